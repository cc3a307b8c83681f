"""bench/comm.py's MPICH anchor (``Mpirun(mpich=...)``, the cluster layer's ``MPICH_TRANSPORTS``):
"over TCP" must really move the data through TCP sockets.

The mpich wheel's network module is UCX; with ``MPIR_CVAR_NOLOCAL=1`` alone UCX still carries
messages between ranks of one host through shared memory and cross-memory attach, which is not
the transport the target compares with. The ``tcp`` setting adds ``UCX_TLS=tcp,self``. Checked
with strace: the bytes the ranks moved with ``sendmsg``/``sendto`` (UCX's TCP transport: the
mpich 5.0.2 wheel's UCX sends with ``sendto``, earlier ones with ``sendmsg``) and with
``process_vm_readv``/``writev`` (cross-memory attach). Needs strace (Debian:
``strace``; ``make test`` installs it as root) and mpi4py + mpiexec."""

import importlib.util
import re
import shutil
import sys
from pathlib import Path

import pytest

from tests.comm.conftest import needs_mpi

ROOT = Path(__file__).resolve().parents[2]
PROG = """
import numpy as np
from mpi4py import MPI
c = MPI.COMM_WORLD
b = np.zeros(1 << 20, np.uint8)
for _ in range(3):
    c.Bcast(b, 0)
"""
# a whole call, or the second half of one that strace split ("<... sendmsg resumed>")
MOVED = re.compile(r"^\d+\s+(?:<\.\.\. )?(sendmsg|sendto|process_vm_readv|process_vm_writev)(?:\(| resumed>).*=\s+(\d+)$")
SOCKET_SENDS = ("sendmsg", "sendto")


def _bench():
    spec = importlib.util.spec_from_file_location("bench_comm", ROOT / "bench" / "comm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _moved(tmp_path: Path, transport: str) -> dict[str, int]:
    """Bytes moved by sendmsg/sendto and by cross-memory attach while broadcasting 1 MiB three times on
    2 ranks under ``Mpirun(mpich=transport)`` (bench/comm.py's MPICH), mpiexec and its ranks traced."""
    from clusterlab.cluster import Mpirun

    prog = tmp_path / "bcast.py"
    prog.write_text(PROG)
    trace = tmp_path / f"{transport}.strace"
    strace = ["strace", "-f", "-qq", "-e", "trace=sendmsg,sendto,process_vm_readv,process_vm_writev", "-e", "signal=none",
              "-o", str(trace)]
    with open(tmp_path / "out", "w") as out:
        job = Mpirun(mpich=transport).launch([sys.executable, str(prog)], 2, timeout=120, wrap=strace, stdout=out)
    assert job.ok, job.reason
    moved = {"socket": 0, "cma": 0}
    for line in trace.read_text().splitlines():
        if m := MOVED.match(line):
            moved["socket" if m.group(1) in SOCKET_SENDS else "cma"] += int(m.group(2))
    return moved


needs_strace = pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace (apt-get install strace)")


@needs_mpi
@needs_strace
def test_mpich_over_tcp_sends_the_data_through_sockets(tmp_path):
    moved = _moved(tmp_path, "tcp")
    assert moved["socket"] >= 3 << 20, moved
    assert moved["cma"] < 64 << 10, moved  # UCX's start-up probe of CMA moves 8 bytes


@needs_mpi
@needs_strace
def test_mpich_with_ucx_defaults_bypasses_tcp(tmp_path):
    """Why the setting matters: without UCX_TLS the same broadcast goes by cross-memory attach."""
    moved = _moved(tmp_path, "ucx_default")
    assert moved["cma"] >= 3 << 20, moved
    assert moved["socket"] < 1 << 20, moved


def test_rows_give_the_spread_over_runs():
    bench = _bench()
    runs = [{"clusterlab_collectives": [{"op": "bcast", "bytes": 8, "avg_us": a, "algorithm": "auto:flat"}],
             "mpich_tcp": [{"op": "bcast", "bytes": 8, "avg_us": b}]} for a, b in ((10.0, 20.0), (30.0, 20.0), (20.0, 10.0))]
    (row,) = bench.collective_rows(runs, ["bcast"], [8], ["clusterlab_collectives", "mpich_tcp"])
    assert row["algorithm"] == "auto:flat"
    assert row["clusterlab_collectives"]["avg_us_spread"] == {"min": 10.0, "median": 20.0, "max": 30.0}
    assert row["ratio_vs_mpich_tcp"]["per_run"] == [0.5, 1.5, 2.0]
    assert (row["ratio_vs_mpich_tcp"]["min"], row["ratio_vs_mpich_tcp"]["median"], row["ratio_vs_mpich_tcp"]["max"]) == (0.5, 1.5, 2.0)
