import os
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def shared(name: str) -> Path:
    """A dataset from ../shared/data, or skip with the reason when the checkout has none."""
    p = SHARED_DATA / name
    if not p.exists():
        pytest.skip(f"{p} not present (the shared datasets sit beside the checkout)")
    return p


is_root = hasattr(os, "geteuid") and os.geteuid() == 0
