"""``clusterlab bench`` and ``clusterlab tune model`` end to end (small sizes, quick settings)."""

from __future__ import annotations

import json
import os

import pytest

from clusterlab.cli import main
from clusterlab.comm.costmodel import CostModel


def cli(capsys, *argv) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as ei:
        main(list(argv))
    out, err = capsys.readouterr()
    return ei.value.code, out, err


@pytest.mark.parametrize("backend", ["inproc", "tcp"])
def test_pingpong_json_and_np_out(capsys, tmp_path, backend):
    np_out = tmp_path / "np.out"
    code, out, err = cli(capsys, "bench", "pingpong", "--sizes", "1:256", "--trial-time", "0.002", "--trials", "1",
                         "--backend", backend, "--np-out", str(np_out), "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert [r["bytes"] for r in rows] == [1, 2, 4, 5, 7, 8, 11, 13, 16, 19, 29, 32, 35, 61, 64, 67, 125, 128,
                                          131, 253, 256]
    assert all(set(r) == {"bytes", "mbps", "usec"} and r["usec"] > 0 for r in rows)
    for r in rows:
        assert r["mbps"] == pytest.approx(r["bytes"] * 8 / r["usec"])
    lines = np_out.read_text().splitlines()
    assert len(lines) == len(rows)
    b, mbps, sec = lines[-1].split()
    assert int(b) == 256 and float(sec) == pytest.approx(rows[-1]["usec"] * 1e-6, abs=1e-8)


@pytest.mark.parametrize("backend", ["inproc", "tcp"])
def test_collective_json_rows(capsys, backend):
    code, out, err = cli(capsys, "bench", "collective", "--op", "alltoall", "-n", "3", "--sizes", "1:4K",
                         "--iterations", "4", "--warmup", "1", "--backend", backend, "--json")
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["bytes"] for r in rows] == [1 << k for k in range(13)]
    for r in rows:
        assert list(r) == ["bytes", "avg_us", "min_us", "max_us", "p50_us", "p99_us", "iterations", "predicted_us",
                           "algorithm"]
        assert r["min_us"] <= r["avg_us"] <= r["max_us"] and r["p50_us"] <= r["p99_us"]
        assert r["iterations"] == 4 and r["algorithm"].startswith("auto:") and r["predicted_us"] > 0


def test_collective_table_with_algorithm_and_model(capsys, tmp_path):
    model = tmp_path / "m.json"
    CostModel(alpha=1e-3, beta=0, gamma=0, setup=0, overhead=0, concurrency=0, source="t").save(model)
    code, out, err = cli(capsys, "bench", "collective", "--op", "barrier", "-n", "4", "--algorithm", "central",
                         "--iterations", "3", "--backend", "inproc", "--model", str(model))
    assert code == 0, err
    assert "barrier on 4 ranks" in out and "central" in out
    assert "2,000.0" in out  # predicted: two hops (in, out) of alpha = 1 ms


@pytest.mark.parametrize(("argv", "message"), [
    (["--op", "bcast", "--algorithm", "ring"], "unknown bcast algorithm 'ring'"),
    (["--op", "bcast", "--sizes", "1M:1K"], "upper bound below lower bound"),
    (["--op", "bcast", "--sizes", "12 parsecs"], "unknown size unit"),
    (["--op", "bcast", "-n", "0"], "-n must be at least 1"),
    (["--op", "bcast", "--model", "/nonexistent/m.json"], "cannot read cost model"),
    (["--op", "bcast", "--time-per-size", "0"], "--time-per-size > 0"),
])
def test_collective_bad_input_is_one_line(capsys, argv, message):
    code, out, err = cli(capsys, "bench", "collective", "--backend", "inproc", *argv)
    assert code == 2 and message in err and "Traceback" not in err


@pytest.mark.parametrize("backend", ["tcp", "mpi", "auto"])
def test_point_to_multipoint_is_refused_where_the_cluster_has_no_multicast(capsys, monkeypatch, backend):
    """The cluster the options name decides (``Cluster.multicast``): loopback processes and
    mpiexec's have no multicast group; in-process ranks do (below)."""
    from clusterlab.rendezvous import contract

    for k in (contract.ENV_RANK, contract.ENV_RDV, *contract.MPI_ENV):  # not a rank: auto is local processes
        monkeypatch.delenv(k, raising=False)
    code, _, err = cli(capsys, "bench", "collective", "--op", "bcast", "--algorithm", "p2mp", "-n", "2",
                       "--backend", backend)
    assert code == 2 and "--algorithm p2mp needs a multicast group" in err and "Traceback" not in err


def test_point_to_multipoint_runs_in_process(capsys):
    code, out, err = cli(capsys, "bench", "collective", "--op", "bcast", "--algorithm", "p2mp", "-n", "3",
                         "--sizes", "1K", "--iterations", "2", "--warmup", "0", "--backend", "inproc", "--json")
    assert code == 0, err
    (row,) = [json.loads(line) for line in out.splitlines()]
    assert row["bytes"] == 1024 and row["algorithm"] == "p2mp"


def test_pingpong_bad_input_is_one_line(capsys):
    code, _, err = cli(capsys, "bench", "pingpong", "--backend", "inproc", "--trials", "0")
    assert code == 2 and "--trials must be >= 1" in err
    code, _, err = cli(capsys, "bench", "pingpong", "--backend", "inproc", "--sizes", "8:2")
    assert code == 2 and "upper bound below lower bound" in err


def test_tune_model_writes_a_usable_model(capsys, tmp_path):
    out_path = tmp_path / "model.json"
    code, out, err = cli(capsys, "tune", "model", "-n", "2", "-o", str(out_path), "--sizes", "1:64K",
                         "--trial-time", "0.002", "--backend", "tcp")
    assert code == 0, err
    m = CostModel.load(out_path)
    assert m.alpha > 0 and m.setup > 0 and m.overhead > 0 and m.details["points"] > 10 and m.concurrency == (os.cpu_count() or 1)
    assert "alpha" in out and str(out_path) in out


def test_bench_group_exposes_other_benchmarks_lazily(capsys, monkeypatch):
    from clusterlab.cli import bench

    monkeypatch.setitem(bench.LAZY, "storage", ("clusterlab.cli.stats", "stats"))
    monkeypatch.setitem(bench.LAZY, "broadcast", ("clusterlab.cli.no_such_module", "broadcast"))
    code, out, _ = cli(capsys, "bench", "--help")
    assert code == 0 and "storage" in out and "broadcast" not in out and "pingpong" in out


def test_bench_broadcast_with_a_run_dir_ends_with_the_fidelity_line_and_the_diagnosis(tmp_path):
    """A local bench broadcast recorded in a run directory: its last lines judge the run and
    name its dominant loss (the same as `clusterlab diagnose` of the directory)."""
    import subprocess
    import sys

    d = tmp_path / "b"
    r = subprocess.run([sys.executable, "-m", "clusterlab", "bench", "broadcast", "--reps", "2", "--ranks", "2",
                        "--size", "2KB", "--run-dir", str(d)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.strip().splitlines()
    assert lines[-2].startswith("fidelity: ") and lines[-1].startswith("diagnosis: ")
    assert "fix:" in lines[-1] or "none found" in lines[-1]
    assert (d / "meta.json").exists() and (d / "bench.json").exists()
