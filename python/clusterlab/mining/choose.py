"""What ``algorithm="auto"`` picks: the kernel measured fastest on the most similar data.

The model is a table of measured rows (``clusterlab.mining.auto_model``, written by
``bench/auto_model.py`` from single-thread CPU times of every kernel on sparse, dense and
seed000-style data): each row holds the data's features and the fastest kernel there. A new
input gets the kernel of its nearest row in feature space (each feature scaled by its spread
over the rows), so the choice follows measurements, not a fixed rule, and a re-run of the
benchmark refits it.

Features (cheap: from item counts of at most ``SAMPLE`` transactions, evenly spaced blocks):
``log10`` of the transactions, of the frequent items, of the relative minimum support, and of
the density (frequent items per transaction over the frequent items).

>>> from clusterlab.data.baskets import Baskets
>>> f = features(Baskets.from_lists([[1, 2], [2, 3], [1, 2, 3]]), 2)
>>> [round(x, 2) for x in f]
[0.48, 0.48, -0.18, -0.11]
>>> choose(f) in ("apriori", "eclat", "fpgrowth", "lcm")
True
"""

from __future__ import annotations

import math

import numpy as np

from clusterlab import _core

#: Transactions the features are computed from (in 8 evenly spaced blocks).
SAMPLE = 200_000
FEATURES = ("log10_transactions", "log10_frequent_items", "log10_support", "log10_density")


def features(b, min_count: int) -> tuple[float, float, float, float]:
    """The model's features of baskets ``b`` at an absolute ``min_count``."""
    n = len(b)
    if n == 0:
        return (0.0, 0.0, 0.0, 0.0)
    if n <= SAMPLE:
        items, n_s = b.items, n
    else:
        block = SAMPLE // 8
        starts = np.linspace(0, n - block, 8).astype(np.int64)
        items = np.concatenate([b.items[b.offsets[s]:b.offsets[s + block]] for s in starts])
        n_s = 8 * block
    _, counts = _core.distinct_item_counts(np.ascontiguousarray(items, dtype=np.uint32))
    frequent = counts[counts * n >= min_count * n_s]
    m = max(int(frequent.size), 1)
    per_tx = float(frequent.sum()) / n_s
    return (math.log10(n), math.log10(m), math.log10(min_count / n), math.log10(max(per_tx, 1e-9) / m))


def choose(f, rows=None) -> str:
    """The fastest kernel of the measured row nearest to features ``f``."""
    if rows is None:
        from clusterlab.mining.auto_model import ROWS as rows
    x = np.array([r["features"] for r in rows], dtype=float)
    scale = np.maximum(x.max(axis=0) - x.min(axis=0), 1e-9)
    d = (((x - np.asarray(f, dtype=float)) / scale) ** 2).sum(axis=1)
    return rows[int(np.argmin(d))]["fastest"]
