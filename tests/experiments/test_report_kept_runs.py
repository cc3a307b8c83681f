"""A run kept without its Parquet table (as the runs once kept in bench/results/studies/ were) re-reports from
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


def test_monitor_summary_counts_saturated_samples():
    """The mean spare CPU hides bursts; the share of samples below the CPU-bound line shows them."""
    import types

    import pyarrow as pa

    from clusterlab.experiments.runner import _Writer
    from clusterlab.monitor.sampler import SCHEMA

    spare = [0.05, 0.5, 0.1, 0.9]
    t = pa.Table.from_pydict({"t": [0.1 * i for i in range(4)], "node": ["machine"] * 4, "iface": [""] * 4,
                              "metric": ["cpu_spare"] * 4, "bucket": [-1] * 4, "value": spare}, schema=SCHEMA)
    mon = types.SimpleNamespace(table=lambda: t, meta={"samples": 4})
    s = _Writer(None).monitor(types.SimpleNamespace(index=0), mon)
    assert s["cpu_saturated_share"] == 0.5 and s["mean_cpu_spare"] == pytest.approx(0.388, abs=1e-3)
