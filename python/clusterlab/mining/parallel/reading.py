"""A rank's share of a FIMI file read in small slices into one growing CSR, so that the
rank's peak memory is about its CSR share, not three times it.

Why: reading a byte range in one call maps it (its pages count in the process's resident
memory while the parse runs) and, parsing in chunks, joins the chunks' arrays at the end
(a second copy of the CSR). On seed000's half file that was 1.08 GB at peak for a 340 MB
CSR. Here the range is read in slices (``slice_size``: about a sixteenth of it, 1-32 MiB);
each slice's transactions are appended to arrays that grow in place (``resize``
is ``realloc``: large blocks grow by remapping pages, without a copy) and the slice's
arrays are freed at once. The slices are line-aligned by the same rule as the range (a line
belongs to the slice that holds its first byte), so they tile exactly the range's lines, and
a parse error names the file's own line number (the reader counts lines from the file's
start).

Only the data layer's public readers are used (``clusterlab.data.io.read_fimi`` with a byte
range); the partition index of ``gen --partitions`` is honoured as ``read_partition`` does.

>>> import tempfile, os
>>> p = os.path.join(tempfile.mkdtemp(), "b.dat")
>>> _ = open(p, "w").write("1 2\\n3\\n4 5\\n6\\n")
>>> read_fimi_compact(p, 2, 11, slice_bytes=3).to_lists()
[[3], [4, 5], [6]]
>>> read_fimi_compact(p, 2, 11, slice_bytes=3).to_lists() == read_fimi(p, 2, 11).to_lists()
True
"""

from __future__ import annotations

import numpy as np

from clusterlab.data import Baskets
from clusterlab.data.io import read_fimi
from clusterlab.data.source import input_stat

# A range is read in about SLICES slices of MIN_SLICE_BYTES..SLICE_BYTES each: a slice's map,
# its parse and its join copy (the parser splits a buffer into chunks of at least 1 MiB) are
# then about a sixteenth of the share. Far smaller slices cost more CPU than they save (a map,
# a parse set-up and page faults each: 1 MiB slices took 1.5x the CPU of one read on seed000).
SLICES = 16
MIN_SLICE_BYTES = 1 << 20
SLICE_BYTES = 32 << 20


def slice_size(range_bytes: int) -> int:
    """Bytes per slice for a range of ``range_bytes``.

    >>> slice_size(358_000_000) // 2**20, slice_size(10_000) // 2**20
    (21, 1)
    """
    return min(SLICE_BYTES, max(MIN_SLICE_BYTES, range_bytes // SLICES))


class _Growing:
    """A 1-D array appended to in place; capacity doubles through ``ndarray.resize``."""

    def __init__(self, dtype, capacity: int):
        self.a = np.empty(max(int(capacity), 16), dtype=dtype)
        self.n = 0

    def append(self, x: np.ndarray, shift: int = 0) -> None:
        need = self.n + x.size
        if need > self.a.size:
            self.a.resize(max(need, 2 * self.a.size), refcheck=False)
        dst = self.a[self.n:need]
        if shift:
            np.add(x, shift, out=dst)
        else:
            dst[:] = x
        self.n = need

    def done(self) -> np.ndarray:
        self.a.resize(self.n, refcheck=False)
        return self.a


class OwnedBaskets(Baskets):
    """A rank's own freshly read share: nothing else refers to its arrays, so pass 1 may take
    them (``take``) and reduce the transactions in place instead of copying them."""

    def take(self) -> tuple[np.ndarray, np.ndarray]:
        """The CSR arrays, handed over: this object keeps empty ones (and its labels)."""
        offsets, items = self.offsets, self.items
        self.offsets, self.items = np.zeros(1, np.int64), np.zeros(0, np.uint32)
        return offsets, items


def read_fimi_compact(path, start: int = 0, end: int | None = None, slice_bytes: int | None = None) -> OwnedBaskets:
    """The transactions whose lines start in ``[start, end)`` of FIMI file ``path`` (the same
    lines ``read_fimi(path, start, end)`` reads; ``end=None``: to the end of the file), read
    slice by slice into one CSR (``slice_bytes``: default ``slice_size`` of the range). A
    missing or unreadable file is a one-line ``BasketFormatError``."""
    size = input_stat(path).st_size
    end = size if end is None else min(int(end), size)
    start = max(0, min(int(start), end))
    slice_bytes = slice_size(end - start) if slice_bytes is None else int(slice_bytes)
    # A first guess of the capacity from the bytes (FIMI: about 3-5 bytes per item).
    items = _Growing(np.uint32, (end - start) // 4)
    offsets = _Growing(np.int64, (end - start) // 32 + 1)
    offsets.append(np.zeros(1, np.int64))
    dropped = 0
    for s in range(start, max(end, start + 1), max(slice_bytes, 1)):
        e = min(s + slice_bytes, end)
        part = read_fimi(path, s, e)
        offsets.append(part.offsets[1:], shift=items.n)
        items.append(part.items)
        dropped += part.duplicates_dropped
        del part
    return OwnedBaskets(offsets.done(), items.done(), duplicates_dropped=dropped)
