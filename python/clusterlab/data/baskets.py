"""``Baskets``: transactions in compressed sparse row form.

Transaction ``t`` holds ``items[offsets[t]:offsets[t + 1]]``: item ids (uint32) sorted
ascending without duplicates. String items carry a ``labels`` dictionary (id -> label).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from clusterlab import _core


class Baskets:
    """A set of transactions.

    >>> b = Baskets.from_lists([["milk", "bread"], ["bread"], []])
    >>> b.labels
    ['bread', 'milk']
    >>> b.to_lists(labels=True)
    [['bread', 'milk'], ['bread'], []]
    >>> b.stats()["transactions"]
    3
    """

    __slots__ = ("offsets", "items", "labels", "duplicates_dropped")

    def __init__(self, offsets, items, labels: Sequence[str] | None = None, duplicates_dropped: int = 0):
        self.offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        self.items = np.ascontiguousarray(items, dtype=np.uint32)
        if self.offsets.ndim != 1 or self.offsets.size == 0 or self.offsets[0] != 0 \
                or self.offsets[-1] != self.items.size or np.any(np.diff(self.offsets) < 0):
            raise ValueError("offsets must start at 0, be non-decreasing and end at len(items)")
        self.labels = list(labels) if labels is not None else None
        if self.labels is not None and self.items.size and int(self.items.max()) >= len(self.labels):
            raise ValueError("an item id has no label")
        self.duplicates_dropped = int(duplicates_dropped)

    @classmethod
    def _trusted(cls, offsets, items, labels=None, duplicates_dropped: int = 0) -> Baskets:
        """Wrap arrays the Rust core produced (already valid): skips the O(n) checks."""
        b = cls.__new__(cls)
        b.offsets, b.items, b.duplicates_dropped = offsets, items, int(duplicates_dropped)
        b.labels = list(labels) if labels is not None else None
        return b

    @classmethod
    def from_lists(cls, transactions: Iterable[Iterable]) -> Baskets:
        """Build from lists of ints or of strings (strings get a sorted item dictionary)."""
        txs = [list(t) for t in transactions]
        flat = [x for t in txs for x in t]
        labels = None
        if any(not isinstance(x, (int, np.integer)) for x in flat):
            labels = sorted({str(x) for x in flat})
            index = {s: k for k, s in enumerate(labels)}
            txs = [[index[str(x)] for x in t] for t in txs]
        else:
            for x in flat:
                if not 0 <= int(x) <= 0xFFFFFFFF:
                    raise ValueError(f"item {x} is outside 0..4294967295")
        offsets = np.zeros(len(txs) + 1, dtype=np.int64)
        items: list[int] = []
        dropped = 0
        for k, t in enumerate(txs):
            s = sorted(set(int(x) for x in t))
            dropped += len(t) - len(s)
            items.extend(s)
            offsets[k + 1] = len(items)
        return cls(offsets, np.asarray(items, dtype=np.uint32), labels, dropped)

    def __len__(self) -> int:
        return self.offsets.size - 1

    def __getitem__(self, t: int) -> np.ndarray:
        if not -len(self) <= t < len(self):
            raise IndexError(t)
        t %= len(self)
        return self.items[self.offsets[t]:self.offsets[t + 1]]

    def __iter__(self):
        for t in range(len(self)):
            yield self.items[self.offsets[t]:self.offsets[t + 1]]

    def __eq__(self, other) -> bool:
        return (isinstance(other, Baskets) and np.array_equal(self.offsets, other.offsets)
                and np.array_equal(self.items, other.items) and self.labels == other.labels)

    def __repr__(self) -> str:
        return f"Baskets({len(self)} transactions, {self.items.size} items, {self.n_items} distinct)"

    @property
    def n_items(self) -> int:
        """Number of distinct items that occur."""
        return int(np.count_nonzero(np.bincount(self.items))) if self.items.size else 0

    def to_lists(self, labels: bool = False) -> list[list]:
        out = [t.tolist() for t in self]
        if labels and self.labels is not None:
            out = [[self.labels[i] for i in t] for t in out]
        return out

    def label(self, item: int):
        return self.labels[item] if self.labels is not None else int(item)

    def stats(self, top: int = 10) -> dict:
        """Transactions, distinct items, lengths, density and the ``top`` most frequent items."""
        s = _core.basket_stats(self.offsets, self.items)
        counts = s.pop("item_counts")
        n = max(s["transactions"], 1)
        order = np.lexsort((np.arange(counts.size), -counts.astype(np.int64)))[:top]
        s["most_frequent"] = [
            {"item": self.label(int(i)), "count": int(counts[i]), "support": float(counts[i]) / n}
            for i in order if counts[i] > 0
        ]
        s["duplicates_dropped"] = self.duplicates_dropped
        return s

    def slice(self, start: int, stop: int) -> Baskets:
        """Transactions ``start..stop`` as a new Baskets (copies the item range)."""
        o = self.offsets[start:stop + 1]
        return Baskets(o - o[0], self.items[o[0]:o[-1]], self.labels)
