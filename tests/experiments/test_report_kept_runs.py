"""A run kept without its Parquet table (as in bench/results/studies/) re-reports from
table.csv, the same as from the Parquet; without either table it is refused with the reason."""

import pytest

from clusterlab.errors import ConfigError
from clusterlab.experiments import workloads as wl
from clusterlab.experiments.runner import run_study
from clusterlab.experiments.spec import Grid, InProcess, Study, scatter
from clusterlab.report.study import load_run, render


def test_csv_only_run_reports_like_the_parquet(tmp_path):
    study = Study(name="pp", cluster=InProcess(ranks=2), workload=wl.pingpong(sizes="8,64", trial_time=0.001),
                  grid=Grid(sizes=["8", "8,64"]), repeat=2, warmup=0, monitor=False,
                  report=[scatter(x="sizes", y="seconds")])
    d = tmp_path / "run"
    run_study(study, d)
    full_rows, _ = load_run(d)
    (d / "table.parquet").unlink()
    csv_rows, _ = load_run(d)
    assert len(csv_rows) == len(full_rows) == 6  # 1 + 2 sizes x 2 repetitions
    assert [r["seconds"] for r in csv_rows] == pytest.approx([r["seconds"] for r in full_rows])
    out = render(d)
    assert out["pngs"] and out["rows"] == 6, out
    (d / "table.csv").unlink()
    with pytest.raises(ConfigError, match="no table.parquet or table.csv"):
        render(d)
