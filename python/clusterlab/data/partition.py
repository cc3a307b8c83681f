"""Split basket input among ranks: rank r of P reads only its own share.

FIMI: a line belongs to the byte range that holds its first byte, so the ranges of all ranks
together read every line exactly once, whatever the split points. A rank maps the file and
touches only its own range (line numbers before it are counted only if an error must be
reported). When ``gen --partitions P`` wrote ``<file>.index.json`` and P ranks read, they
take its ranges (equal transaction counts) after checking it against the file.

CSV and Parquet: share r holds transactions ``[T*r/P, T*(r+1)/P)`` in file order (first
appearance of their ids), numbered with the whole file's item dictionary so that every rank
agrees on the ids. See docs/formats.md for what each rank reads.

>>> import tempfile, os
>>> p = os.path.join(tempfile.mkdtemp(), "b.dat")
>>> _ = open(p, "w").write("1 2\\n3\\n4 5\\n6\\n")
>>> [read_partition(p, r, 3).to_lists() for r in range(3)]
[[[1, 2]], [[3], [4, 5]], [[6]]]
"""

from __future__ import annotations

import os
import stat

from clusterlab import _core
from clusterlab.data.baskets import Baskets
from clusterlab.data.generate import index_path_for, read_partition_index
from clusterlab.data.io import detect_format, read_csv, read_fimi, read_parquet
from clusterlab.data.source import input_stat
from clusterlab.errors import BasketFormatError, ConfigError


def _regular(path) -> os.stat_result:
    st = input_stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise BasketFormatError(path, 0, 0, "ranks read their share of a regular file; this is a pipe or "
                                            "device (save it to a file first)")
    return st


def byte_ranges(path, parts: int) -> list[tuple[int, int]]:
    """``parts`` line-aligned byte ranges that tile the file."""
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
        raise ConfigError(f"parts must be an integer >= 1, got {parts!r}")
    _regular(path)
    return [tuple(r) for r in _core.split_ranges(os.fspath(path), parts)]


def fimi_range(path, rank: int, size: int) -> tuple[int, int]:
    """The byte range rank ``rank`` of ``size`` reads: the partition index's when it has
    ``size`` partitions (refused when it does not match the file), else an equal byte share
    (line-aligned by the reader)."""
    st = _regular(path)
    if index_path_for(path).exists():
        parts = read_partition_index(path)
        if len(parts) == size:
            return int(parts[rank]["start"]), int(parts[rank]["end"])
    n = st.st_size
    return n * rank // size, n * (rank + 1) // size


def read_partition(path, rank: int, size: int, format: str | None = None) -> Baskets:
    """The transactions of rank ``rank`` of ``size``, in any input format (by extension
    unless ``format`` is given): FIMI by byte range (from the partition index when present),
    CSV and Parquet by transaction."""
    for name, v in (("rank", rank), ("size", size)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(f"{name} must be an integer, got {v!r}")
    if size < 1 or not 0 <= rank < size:
        raise ConfigError(f"rank {rank} is outside 0..{size - 1}" if size >= 1 else f"size must be >= 1, got {size}")
    fmt = detect_format(path, format)
    if fmt == "fimi":
        start, end = fimi_range(path, rank, size)
        return read_fimi(path, start, end)
    _regular(path)
    reader = read_csv if fmt == "csv" else read_parquet
    return reader(path, rank=rank, size=size)
