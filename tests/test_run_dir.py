"""`clusterlab run --run-dir`: a user's program recorded (meta, monitor, each rank's split of its
wall time into compute, transfer and RTO wait), then `clusterlab report` and `clusterlab diagnose`
on the directory; the Python form (``cluster.record.launch``). Loopback, no root."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.comm.conftest import needs_mpi

ROOT = Path(__file__).resolve().parents[1]

# Rank 0 computes (sleeps) 0.3 s, then sends 200 kB to every other rank, which wait in recv;
# then an allreduce. Rank 0's time is compute, the others' is communication.
PROGRAM = """
import sys, time
import numpy as np
from clusterlab.comm import world
c = world()
if c.rank == 0:
    time.sleep(0.3)
    for r in range(1, c.size):
        c.send(r, bytes(200_000))
else:
    c.recv(0)
c.allreduce(np.ones(1000))
if len(sys.argv) > 1 and c.rank == int(sys.argv[1]):
    sys.exit(3)
"""


def _cli(*args, **kw):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    return subprocess.run([sys.executable, "-m", "clusterlab", *args], env=env, capture_output=True, text=True,
                          timeout=120, **kw)


@pytest.fixture
def prog(tmp_path):
    p = tmp_path / "prog.py"
    p.write_text(PROGRAM)
    return p


def test_run_dir_records_each_ranks_split_and_report_and_diagnose_read_it(tmp_path, prog):
    d = tmp_path / "run"
    p = _cli("run", "-n", "3", "--run-dir", str(d), "--monitor-interval", "0.05", "--", "python", str(prog))
    assert p.returncode == 0, p.stderr[-3000:]
    assert "clusterlab report" in p.stderr
    end = p.stderr.strip().splitlines()  # it ends with the fidelity line and the diagnosis in one line
    assert end[-1].startswith("diagnosis: ") and ("fix:" in end[-1] or "none found" in end[-1])
    assert any(ln.startswith("fidelity: ") for ln in end[-4:])
    meta = json.loads((d / "meta.json").read_text())
    assert meta["kind"] == "program" and meta["status"] == "ok" and meta["ranks"] == 3
    assert meta["returncodes"] == [0, 0, 0] and meta["failed_rank"] is None
    assert meta["cluster"]["place"] == "loopback" and meta["rank_records"] == 3
    assert meta["argv"][-3:] == ["--", "python", str(prog)] and meta["load_before"] and meta["machine"]["cpus"]
    assert meta["monitor"]["samples"] >= 2 and (d / "monitor.parquet").stat().st_size > 0
    recs = {r: json.loads((d / "ranks" / f"rank-{r}.json").read_text()) for r in range(3)}
    for r, x in recs.items():
        assert x["rank"] == r and x["size"] == 3
        # the split adds up to the wall time, and no part is negative
        assert abs(x["compute_s"] + x["transfer_s"] + x["rto_wait_s"] - x["wall_s"]) < 1e-3, x
        assert min(x["compute_s"], x["transfer_s"], x["rto_wait_s"]) >= 0, x
        assert x["wall_s"] <= meta["elapsed_s"]
        assert x["timeouts"] == 0 and x["retransmissions"] is not None
    assert recs[0]["compute_s"] >= 0.25 and recs[0]["bytes_sent"] >= 400_000
    for r in (1, 2):  # waiting for rank 0's data: inside recv, not computing
        assert recs[r]["transfer_s"] >= 0.25 and recs[r]["compute_s"] < 0.2, recs[r]
        assert recs[r]["bytes_recv"] >= 200_000

    p = _cli("report", str(d))
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.strip().splitlines()[-1] == end[-1]  # `report` ends with the same diagnosis
    md = (d / "report.md").read_text()
    for r in range(3):
        assert f"\n| {r} | " in md
    assert "## Diagnosis" in md and "per rank (wall = compute + transfer + RTO wait)" in md
    assert (d / "monitor" / "report.md").exists() and (d / "monitor" / "traffic.png").exists()

    p = _cli("diagnose", str(d), "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    job = json.loads(p.stdout)["jobs"][0]
    assert job["kind"] == "program" and job["nodes"] == 3
    per = {x["rank"]: x for x in job["per_rank"]}
    assert sorted(per) == [0, 1, 2]
    for r, x in per.items():
        assert abs(x["compute_s"] + x["transfer_s"] + x["rto_wait_s"] - x["wall_s"]) < 2e-3
        assert x["wall_s"] == pytest.approx(recs[r]["wall_s"], abs=1e-6)
    text = _cli("diagnose", str(d)).stdout
    assert "per rank (wall = compute + transfer + RTO wait):" in text
    assert len([ln for ln in text.splitlines() if ln.split()[:1] in (["0"], ["1"], ["2"])]) == 3


def test_a_failed_rank_is_named_in_the_run_dir(tmp_path, prog):
    d = tmp_path / "run"
    p = _cli("run", "-n", "3", "--run-dir", str(d), "--", "python", str(prog), "1")
    assert p.returncode == 3, p.stderr[-3000:]
    meta = json.loads((d / "meta.json").read_text())
    assert meta["status"] == "failed" and meta["failed_rank"] == 1 and meta["returncodes"][1] == 3
    assert "rank 1" in meta["reason"]
    assert _cli("report", str(d)).returncode == 0
    assert "status: failed (rank 1" in (d / "report.md").read_text()


def test_run_dir_is_checked_before_anything_runs(tmp_path, prog):
    marker = tmp_path / "ran"
    prog.write_text(f"open({str(marker)!r}, 'w').close()\n" + PROGRAM)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    p = _cli("run", "-n", "2", "--run-dir", str(blocker), "--", "python", str(prog))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "is a file" in p.stderr
    d = tmp_path / "run"
    d.mkdir()
    (d / "meta.json").write_text("{}")
    p = _cli("run", "-n", "2", "--run-dir", str(d), "--", "python", str(prog))
    assert p.returncode == 2 and "already holds a run" in p.stderr
    assert not marker.exists()


def test_python_form_records_the_same(tmp_path, prog):
    from clusterlab.cluster import Local
    from clusterlab.cluster.record import load
    from clusterlab.net.transport_config import TransportConfig

    d = tmp_path / "api"
    res = Local().launch([sys.executable, str(prog)], 2, run_dir=d, transport=TransportConfig(rto_min="5ms"),
                         monitor=False, env=dict(os.environ, PYTHONPATH=str(ROOT / "python")))
    assert res.ok
    run = load(d)
    assert [r["rank"] for r in run["ranks"]] == [0, 1]
    assert run["meta"]["transport"]["rto_min"] == 0.005 and not (d / "monitor.parquet").exists()
    assert run["ranks"][0]["transport_in_force"]


def _fails_on_rank_1(comm, seconds):
    """A rank function: rank 1 raises after the others reached a barrier with it."""
    import time

    comm.barrier()
    if comm.rank == 1:
        raise RuntimeError("rank 1 gives up")
    time.sleep(seconds)
    return comm.rank


def _returns_rank(comm, seconds):
    import time

    time.sleep(seconds)
    comm.barrier()
    return comm.rank


def test_python_form_of_a_rank_function_records_results_and_failures(tmp_path):
    from clusterlab.cluster import InProcess, Launched, Local
    from clusterlab.cluster.record import load
    from clusterlab.comm.errors import PeerFailure
    from clusterlab.errors import ConfigError

    d = tmp_path / "ok"
    assert Local().run(_returns_rank, 3, 0.2, run_dir=d, monitor=False) == [0, 1, 2]
    got = load(d)
    assert got["meta"]["status"] == "ok" and [r["rank"] for r in got["ranks"]] == [0, 1, 2]
    assert all(r["compute_s"] >= 0.15 for r in got["ranks"])  # the sleep is outside communication calls

    d = tmp_path / "fails"
    with pytest.raises(PeerFailure) as e:
        Local().run(_fails_on_rank_1, 3, 0.0, run_dir=d, monitor=False)
    assert e.value.rank == 1
    meta = load(d)["meta"]
    assert meta["status"] == "failed" and meta["failed_rank"] == 1 and "gives up" in meta["reason"]
    recs = {r["rank"]: r for r in load(d)["ranks"]}
    assert "gives up" in recs[1]["error"] and recs[1]["calls"] >= 1  # its split up to the failure

    # where nothing could be recorded, run_dir is refused rather than ignored
    with pytest.raises(ConfigError, match="run_dir"):
        InProcess().run(_returns_rank, 2, 0.0, run_dir=tmp_path / "x")
    with pytest.raises(ConfigError, match="clusterlab run --run-dir"):
        Launched().run(_returns_rank, None, 0.0, run_dir=tmp_path / "x")
    with pytest.raises(ConfigError, match="go with run_dir"):
        Local().run(_returns_rank, 2, 0.0, monitor_interval=0.5)
    assert not (tmp_path / "x").exists()


MPI4PY_PROGRAM = """
import numpy as np
from mpi4py import MPI
c = MPI.COMM_WORLD
t = np.empty(1)
for _ in range(20):
    c.Allreduce(np.ones(1), t)
"""


@pytest.mark.slow
@needs_mpi
def test_mpi_runs_say_what_they_lack(tmp_path, prog):
    # a world() program on MPI's own transport: timed calls, but no TCP_INFO (RTO wait unknown)
    d = tmp_path / "world"
    p = _cli("run", "--backend", "mpi", "-n", "2", "--run-dir", str(d), "--", "python", str(prog))
    assert p.returncode == 0, p.stderr[-3000:]
    recs = [json.loads((d / "ranks" / f"rank-{r}.json").read_text()) for r in range(2)]
    assert [r["mesh"] for r in recs] == ["mpi", "mpi"] and all(r["rto_wait_s"] is None for r in recs)
    assert recs[1]["transfer_s"] >= 0.25 and meta_of(d)["transport"] == {}
    text = _cli("diagnose", str(d)).stdout
    assert "MPI's own transport, no TCP_INFO" in text

    # an mpi4py program: no records at all, the monitor's per-host TCP counters instead
    mp = tmp_path / "mpi_prog.py"
    mp.write_text(MPI4PY_PROGRAM)
    d = tmp_path / "mpi4py"
    p = _cli("run", "--backend", "mpi", "-n", "2", "--run-dir", str(d), "--", "python", str(mp))
    assert p.returncode == 0, p.stderr[-3000:]
    assert meta_of(d)["rank_records"] == 0 and meta_of(d)["returncodes"] == [0, 0]
    assert _cli("report", str(d)).returncode == 0
    assert "No rank records" in (d / "report.md").read_text()
    text = _cli("diagnose", str(d)).stdout
    assert "per rank: no records" in text and "segments out" in text


def meta_of(d):
    return json.loads((d / "meta.json").read_text())


def _times_out_on_rank_1(comm):
    """A rank function: rank 1 gives up waiting (a communication failure, not a bug)."""
    from clusterlab.comm.errors import CommTimeout

    comm.barrier()
    if comm.rank == 1:
        raise CommTimeout("rank 1: timed out waiting for a message from rank 0 with tag 7")
    comm.recv(1, 7, timeout=30)


def test_a_ranks_timeout_is_one_line_and_a_bug_keeps_its_traceback(capfd):
    """A timeout or a dead peer is said in full by the line naming the rank and what it waited
    for; a traceback (of this library's own code) would only bury it. A bug keeps its traceback."""
    from clusterlab.cluster import Local
    from clusterlab.comm.errors import PeerFailure

    with pytest.raises(PeerFailure, match=r"rank 1 .*timed out waiting for a message from rank 0 with tag 7"):
        Local().run(_times_out_on_rank_1, 2)
    assert "Traceback" not in capfd.readouterr().err
    with pytest.raises(PeerFailure, match="rank 1 gives up"):
        Local().run(_fails_on_rank_1, 2, 0.0)
    assert "traceback of rank 1" in capfd.readouterr().err
