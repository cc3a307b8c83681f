"""The parallel command paths: ``clusterlab mine --nodes`` and ``clusterlab experiment speedup``."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from clusterlab.cli import cli
from clusterlab.errors import ConfigError
from clusterlab.experiments.speedup import SpeedupSpec, parse_transport, run_speedup


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    from clusterlab.data.generate import generate_file

    p = tmp_path_factory.mktemp("pm") / "small.dat"
    generate_file(p, "T10I4D100K", transactions=3000, items=200, seed=3)
    return p


def test_mine_nodes_json_and_passes_file(small, tmp_path):
    out = tmp_path / "sets.parquet"
    r = CliRunner().invoke(cli, ["mine", str(small), "-s", "0.02", "--nodes", "2", "-a", "cd", "--backend", "tcp",
                                 "-o", str(out), "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert s["algorithm"].startswith("cd x2") and s["passes"][0]["pass"] == 1
    seq = CliRunner().invoke(cli, ["mine", str(small), "-s", "0.02", "--json"], catch_exceptions=False)
    assert json.loads(seq.stdout)["itemsets_by_length"] == s["itemsets_by_length"]
    assert json.loads((tmp_path / "sets.passes.json").read_text())[-1]["pass"] >= 2


def test_speedup_experiment_writes_table_and_plot(small, tmp_path):
    r = CliRunner().invoke(cli, ["experiment", "speedup", "--algorithm", "hpa", "--nodes", "1,2", "--data", str(small),
                                 "--min-support", "0.02", "--rto-min", "default,5ms", "--rto-jitter", "10ms",
                                 "-o", str(tmp_path)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    rows = json.loads((tmp_path / "speedup.json").read_text())["rows"]
    assert {(x["setting"], x["nodes"]) for x in rows} == {("default", 1), ("default", 2),
                                                          ("rto_min=5ms+[0,10ms]", 1), ("rto_min=5ms+[0,10ms]", 2)}
    assert all(x["speedup"] > 0 and x["itemsets"] == rows[0]["itemsets"] for x in rows)
    assert (tmp_path / "speedup.png").stat().st_size > 1000
    assert (tmp_path / "speedup.csv").read_text().startswith("setting,algorithm,nodes")


def test_bad_settings_are_one_line_errors(small):
    with pytest.raises(ConfigError, match="unknown transport setting"):
        parse_transport("rto_mni=5ms")
    with pytest.raises(ConfigError, match="nodes"):
        run_speedup(SpeedupSpec(data=str(small), min_support=0.02, nodes=[0]))
    r = CliRunner().invoke(cli, ["experiment", "speedup", "--data", str(small), "--min-support", "0.02",
                                 "--nodes", "1,x"])
    assert r.exit_code != 0 and "comma-separated" in str(r.exception)


@pytest.mark.parametrize("launcher", ["run", "mpiexec"])
def test_mine_as_ranks_of_a_launched_job_mines_once_together(small, tmp_path, launcher):
    """`clusterlab run -n 3 -- mine ...` (and mpiexec) mines on the job's ranks, not once per
    rank: one summary from rank 0, one output file equal to the sequential engine's."""
    import os
    import shutil
    import subprocess
    import sys

    out, seq = tmp_path / "par.txt", tmp_path / "seq.txt"
    mine = ["mine", str(small), "-s", "0.02", "-o", str(out)]
    if launcher == "run":
        argv = [sys.executable, "-m", "clusterlab", "run", "-n", "3", "--", *mine]
    else:
        mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable))
        if mpiexec is None:
            pytest.skip("mpiexec (the mpich wheel) is not installed in this environment")
        argv = [mpiexec, "-n", "3", sys.executable, "-m", "clusterlab", *mine]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("hpa x3 (launched)") == 1
    assert CliRunner().invoke(cli, ["mine", str(small), "-s", "0.02", "-o", str(seq)]).exit_code == 0
    assert out.read_bytes() == seq.read_bytes()
