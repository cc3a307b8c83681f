"""The MPI backend and the MPI launch path: the same program under mpiexec and under our launcher."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterlab.cluster.mpirun import mpiexec_path
from tests.comm.conftest import assert_nothing_left, needs_mpi

pytestmark = needs_mpi
ROOT = Path(__file__).resolve().parents[2]

PROGRAM = """
import json, os, sys
from clusterlab.comm import world
from tests.comm import scenarios
c = world()
out = {"backend": type(c).__name__, "size": c.size,
       "p2p": scenarios.p2p_roundtrip(c), "order": scenarios.tags_and_order(c)}
if sys.argv[2] == "kill" and c.rank == 1:
    os.kill(os.getpid(), 9)
out["exchange"] = scenarios.exchange_all_at_once(c, 1 << 20)
with open(os.path.join(sys.argv[1], f"rank{c.rank}.json"), "w") as f:
    json.dump(out, f)
"""


def _run(cmd, tmp_path, env_extra=None, timeout=90):
    env = dict(os.environ, PYTHONPATH=str(ROOT), **(env_extra or {}))
    t = time.monotonic()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=tmp_path)
    return p, time.monotonic() - t


def _outputs(d: Path, n: int) -> list:
    return [json.loads((d / f"rank{r}.json").read_text()) for r in range(n)]


@pytest.fixture
def prog(tmp_path):
    p = tmp_path / "prog.py"
    p.write_text(PROGRAM)
    return p


def test_same_program_same_results_under_mpiexec_and_clusterlab_run(prog, tmp_path, marker):
    runs = {}
    for name, cmd, extra in [
        ("mpi", [mpiexec_path(), "-n", "3", sys.executable, str(prog)], {}),
        ("tcp-over-mpi", [mpiexec_path(), "-n", "3", sys.executable, str(prog)], {"CLUSTERLAB_BACKEND": "tcp"}),
        ("tcp", [sys.executable, "-m", "clusterlab", "run", "-n", "3", "--", "python", str(prog)], {}),
    ]:
        d = tmp_path / name
        d.mkdir()
        p, _ = _run([*cmd, str(d), "ok", marker], tmp_path, extra)
        assert p.returncode == 0, p.stderr[-3000:]
        runs[name] = _outputs(d, 3)
    assert [o["backend"] for o in runs["mpi"]] == ["MpiCommunicator"] * 3
    assert [o["backend"] for o in runs["tcp-over-mpi"]] == ["TcpCommunicator"] * 3
    strip = [[{k: v for k, v in o.items() if k != "backend"} for o in outs] for outs in runs.values()]
    assert strip[0] == strip[1] == strip[2]
    assert_nothing_left(marker)


def test_rank_killed_under_mpiexec_ends_the_job_quickly(prog, tmp_path, marker):
    d = tmp_path / "k"
    d.mkdir()
    p, elapsed = _run([mpiexec_path(), "-n", "3", sys.executable, str(prog), str(d), "kill", marker], tmp_path,
                      timeout=60)
    assert p.returncode != 0
    assert elapsed < 10 + 3, elapsed                     # + start-up of 3 Pythons
    assert "signal 9" in (p.stdout + p.stderr) or "Killed" in (p.stdout + p.stderr)
    assert_nothing_left(marker)


def test_mpi_stats_and_abort_through_launcher():
    from clusterlab.cluster.local import run
    from tests.comm import scenarios

    res = run(scenarios.stats_after_traffic, 2, backend="mpi", timeout=60)
    for r, st in enumerate(res):
        assert st["backend"] == "mpi" and st["library"].startswith("MPICH")
        assert st["peers"][str(1 - r)]["msgs_sent"] == 5 and st["msgs_recv"] == 5
