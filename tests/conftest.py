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
