"""Split a basket file among ranks: rank r of P reads only its own byte range.

A line belongs to the range that holds its first byte, so the ranges of all ranks together
read every line exactly once, whatever the split points.

>>> import tempfile, os
>>> p = os.path.join(tempfile.mkdtemp(), "b.dat")
>>> _ = open(p, "w").write("1 2\\n3\\n4 5\\n6\\n")
>>> [read_partition(p, r, 3).to_lists() for r in range(3)]
[[[1, 2]], [[3], [4, 5]], [[6]]]
"""

from __future__ import annotations

import os

from clusterlab import _core
from clusterlab.data.baskets import Baskets
from clusterlab.data.io import read_fimi
from clusterlab.errors import ConfigError


def byte_ranges(path, parts: int) -> list[tuple[int, int]]:
    """``parts`` line-aligned byte ranges that tile the file."""
    if parts < 1:
        raise ConfigError(f"parts must be at least 1, got {parts}")
    return [tuple(r) for r in _core.split_ranges(os.fspath(path), parts)]


def read_partition(path, rank: int, size: int) -> Baskets:
    """The transactions of rank ``rank`` of ``size`` (an equal byte share, line aligned)."""
    if not 0 <= rank < size:
        raise ConfigError(f"rank {rank} is outside 0..{size - 1}")
    n = os.path.getsize(path)
    return read_fimi(path, n * rank // size, n * (rank + 1) // size)
