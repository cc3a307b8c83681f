import os
import time
import uuid
from pathlib import Path

import pytest

from clusterlab.cluster.mpirun import mpiexec_path


def _has_mpi() -> bool:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return mpiexec_path() is not None


HAS_MPI = _has_mpi()
needs_mpi = pytest.mark.skipif(not HAS_MPI, reason="mpi4py or mpiexec missing (pip install 'clusterlab[mpi]')")
BACKENDS = ["tcp", pytest.param("mpi", marks=needs_mpi)]


@pytest.fixture
def marker():
    """A unique string put on the ranks' command lines, to find leftovers in /proc."""
    return f"cl-test-{uuid.uuid4().hex[:12]}"


def processes_with(marker: str) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) == os.getpid():
            continue
        try:
            cmd = (p / "cmdline").read_bytes()
            stat = (p / "stat").read_text()
        except OSError:
            continue
        if marker.encode() in cmd and ") Z " not in stat:
            out.append(int(p.name))
    return out


def assert_nothing_left(marker: str, within: float = 2.0) -> None:
    deadline = time.monotonic() + within
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_with(marker) == [], "processes left behind"
