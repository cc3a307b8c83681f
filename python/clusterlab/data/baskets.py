"""``Baskets``: transactions in compressed sparse row form.

Transaction ``t`` holds ``items[offsets[t]:offsets[t + 1]]``: item ids (uint32) sorted
ascending without duplicates. String items carry a ``labels`` dictionary (id -> label).
Ids may be sparse (any u32): memory for statistics follows the distinct items, and
``compact()`` renumbers them densely, in order, for code that indexes arrays by id.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from clusterlab import _core
from clusterlab.data import columns
from clusterlab.errors import ConfigError


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
        """Build from transactions of ints (0..4294967295) or strings (strings get a sorted
        item dictionary; with any string present, ints become labels too). Converted in Rust
        in one pass. Also takes a list column without copying it where it can: a pyarrow
        (chunked) array, a polars Series or a pandas Series of lists, or a 2-D integer numpy
        array (one row per transaction). Floats, None, bytes and nested lists are refused
        (``ConfigError`` naming ``transactions[t][k]``).

        >>> Baskets.from_lists([[3, 1, 3], (2,)]).to_lists()
        [[1, 3], [2]]
        >>> import polars as pl
        >>> Baskets.from_lists(pl.Series([["b", "a"], ["a"]])).to_lists(labels=True)
        [['a', 'b'], ['a']]
        >>> Baskets.from_lists([[1, 2.5]])
        Traceback (most recent call last):
        ...
        clusterlab.errors.ConfigError: transactions[0][1] = 2.5 (float) is not an item: items are integers 0..4294967295 or strings
        """
        arrow = columns.arrow_column(transactions)
        if arrow is not None:
            def fail(row: int, message: str):
                raise ConfigError(f"transactions[{row - 1}]: {message}" if row else message)

            return cls._trusted(*columns.list_column_csr(arrow, fail))
        if isinstance(transactions, np.ndarray):
            if transactions.ndim == 2 and transactions.dtype.kind in "iu":
                return cls._from_matrix(transactions)
            transactions = transactions.tolist()
        elif type(transactions).__module__.startswith("pandas") and hasattr(transactions, "tolist"):
            transactions = transactions.tolist()  # a Series of Python lists: their references
        try:
            offsets, items, labels, dropped = _core.lists_to_csr(transactions)
        except (TypeError, ValueError, OverflowError) as e:
            if str(e).startswith("transactions["):
                raise ConfigError(str(e)) from None
            raise
        return cls._trusted(offsets, items, labels, dropped)

    @classmethod
    def _from_matrix(cls, m: np.ndarray) -> Baskets:
        """A 2-D integer array: row ``t`` is transaction ``t``."""
        if m.size and (int(m.min()) < 0 or int(m.max()) > 0xFFFFFFFF):
            t, k = (int(x[0]) for x in np.nonzero((m < 0) | (m > 0xFFFFFFFF)))
            raise ConfigError(f"transactions[{t}][{k}] = {int(m[t, k])} is outside 0..4294967295")
        offsets = np.arange(m.shape[0] + 1, dtype=np.int64) * m.shape[1]
        return cls._trusted(*columns.normalized(offsets, m.reshape(-1), None))

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
        """Number of distinct items that occur (memory follows them, not the largest id)."""
        return int(_core.distinct_items(self.items)) if self.items.size else 0

    def compact(self) -> tuple[Baskets, np.ndarray]:
        """The same baskets with item ids renumbered ``0..d-1`` in their original order, and
        the original ids (ascending, uint32): item ``k`` of the result is ``ids[k]`` here.
        Transactions stay sorted, so anything mined on the result maps back through ``ids``
        in the same order. Labels follow their items. No copy when the ids already are dense.

        >>> b, ids = Baskets.from_lists([[7, 4294967295], [3, 7]]).compact()
        >>> b.to_lists(), ids.tolist()
        ([[1, 2], [0, 1]], [3, 7, 4294967295])
        """
        dense, ids, _counts = _core.compact_items(self.items)
        if dense is None:
            return self, ids
        labels = [self.labels[i] for i in ids.tolist()] if self.labels is not None else None
        return Baskets._trusted(self.offsets, dense, labels, self.duplicates_dropped), ids

    def renumber(self, ids) -> Baskets:
        """Items renumbered to their position in ``ids`` (ascending distinct ids holding every
        item here): what ranks use to agree on one compact numbering, with ``ids`` the union
        of every rank's ``compact()`` ids. ``ConfigError`` names an item missing from ``ids``.

        >>> Baskets.from_lists([[7, 40]]).renumber([3, 7, 40]).to_lists()
        [[1, 2]]
        """
        ids = np.ascontiguousarray(ids, dtype=np.uint32)
        try:
            items = _core.renumber_items(self.items, ids)
        except ValueError as e:
            raise ConfigError(f"renumber: {e}") from None
        if self.labels is not None and ids.size and int(ids[-1]) >= len(self.labels):
            raise ConfigError(f"renumber: id {int(ids[-1])} has no label ({len(self.labels)} labels)")
        labels = [self.labels[i] for i in ids.tolist()] if self.labels is not None else None
        return Baskets._trusted(self.offsets, items, labels, self.duplicates_dropped)

    def to_lists(self, labels: bool = False) -> list[list]:
        out = [t.tolist() for t in self]
        if labels and self.labels is not None:
            out = [[self.labels[i] for i in t] for t in out]
        return out

    def label(self, item: int):
        return self.labels[item] if self.labels is not None else int(item)

    def stats(self, top: int = 10) -> dict:
        """Transactions, distinct items, lengths, density and the ``top`` most frequent items."""
        if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 0:
            raise ConfigError(f"top must be an integer >= 0, got {top!r}")
        s = _core.basket_stats(self.offsets, self.items)
        ids, counts = s.pop("item_ids"), s.pop("item_counts")
        n = max(s["transactions"], 1)
        # Most frequent first; ties by id (ids ascend, so a stable sort on -count does it).
        order = np.argsort(-counts.astype(np.int64), kind="stable")[:top]
        s["most_frequent"] = [
            {"item": self.label(int(ids[k])), "count": int(counts[k]), "support": float(counts[k]) / n}
            for k in order
        ]
        s["duplicates_dropped"] = self.duplicates_dropped
        return s

    def slice(self, start: int, stop: int) -> Baskets:
        """Transactions ``start..stop`` as a new Baskets (copies the item range)."""
        o = self.offsets[start:stop + 1]
        return Baskets(o - o[0], self.items[o[0]:o[-1]], self.labels)
