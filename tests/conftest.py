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


# `make test` runs the suite on two xdist workers, then the tests marked `serial` on their own.
# Serial: tests that share fixed names (marked where they are) and, here, tests that start
# MPICH ranks inside testbed hosts. On two workers (another test's
# testbed or ranks running beside it) one of them failed twice at MPI_Init, UCX's address
# exchange saying "Destination is unreachable"; alone it passes (not yet explained: a user
# running an MPI job on a testbed while the machine is busy may meet it too).
# And the storage study panels: on two workers the throttled backing store's read counter came
# out without a sample once (not explained; alone it passes).
SERIAL_FILES = ("tests/comm/test_mpi.py", "tests/testbed/test_run_mpi_root.py",
                "tests/testbed/test_testbed_cluster_root.py", "tests/npb/test_stack.py",
                "tests/storage/test_study_panels.py")


def pytest_collection_modifyitems(config, items):
    root = Path(__file__).resolve().parents[1]
    for item in items:
        if Path(str(item.fspath)).resolve().relative_to(root).as_posix() in SERIAL_FILES:
            item.add_marker(pytest.mark.serial)
