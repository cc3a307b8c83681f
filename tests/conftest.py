import os
from pathlib import Path

import pytest


def _find_shared_data() -> Path:
    """../shared/data beside the checkout (CI's layout), or the nearest one above it, or
    $CLUSTERLAB_SHARED_DATA."""
    if os.environ.get("CLUSTERLAB_SHARED_DATA"):
        return Path(os.environ["CLUSTERLAB_SHARED_DATA"])
    here = Path(__file__).resolve().parents[1]
    for d in [here, *here.parents]:
        if (d.parent / "shared" / "data").is_dir():
            return d.parent / "shared" / "data"
    return here.parent / "shared" / "data"


SHARED_DATA = _find_shared_data()


def shared(name: str) -> Path:
    """A dataset from ../shared/data, or skip with the reason when the checkout has none."""
    p = SHARED_DATA / name
    if not p.exists():
        pytest.skip(f"{p} not present (the shared datasets sit beside the checkout)")
    return p


is_root = hasattr(os, "geteuid") and os.geteuid() == 0


# `make test` runs the suite on three xdist workers, then the tests marked `serial` on their own:
# tests that share fixed names (marked where they are), the diagnose corpus's scenarios (their
# local jobs' cause depends on the CPU each rank gets: beside a second worker at load 9 the
# skewed partition's straggler came out as CPU starvation) and the tests that start MPICH ranks
# in testbed hosts.
MPI_IN_TESTBED = ("tests/comm/test_mpi.py", "tests/testbed/test_run_mpi_root.py",
                  "tests/testbed/test_testbed_cluster_root.py", "tests/npb/test_stack.py")
SERIAL_FILES = (*MPI_IN_TESTBED, "tests/test_diagnose_scenarios.py")


def pytest_collection_modifyitems(config, items):
    root = Path(__file__).resolve().parents[1]
    for item in items:
        rel = Path(str(item.fspath)).resolve().relative_to(root).as_posix()
        if rel in SERIAL_FILES:
            item.add_marker(pytest.mark.serial)
    # The long tests first (the documented commands, the quick studies: 15-60 s each), so that the
    # xdist workers end on short ones instead of two of them idling while a third runs one late.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
