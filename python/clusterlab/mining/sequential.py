"""``mine()``: frequent, closed or maximal itemsets of one basket set, in this process.

>>> import clusterlab
>>> t = clusterlab.mine([["milk", "bread"], ["bread", "eggs"], ["milk", "bread", "eggs"]],
...                     min_support=2)
>>> [(items, count) for items, count in zip(t["items"].to_pylist(), t["count"].to_pylist())]
[(['bread'], 3), (['eggs'], 2), (['milk'], 2), (['bread', 'eggs'], 2), (['bread', 'milk'], 2)]
>>> clusterlab.mine([[1, 2], [1, 2], [1]], min_support=0.5, target="closed").to_pydict()["items"]
[[1], [1, 2]]
"""

from __future__ import annotations

import math
import os
from fractions import Fraction

import numpy as np

from clusterlab import _core
from clusterlab.data.baskets import Baskets
from clusterlab.errors import ConfigError, TooManyItemsets
from clusterlab.mining.result import itemset_table

ALGORITHMS = ("auto", "apriori", "fpgrowth", "eclat", "lcm")
TARGETS = ("all", "closed", "maximal")
#: Default cap on the number of itemsets one run may produce. A result takes about
#: 20 + 4 * length bytes per itemset (~50 MB per million at length 8) and the final sort
#: briefly doubles it, so 20 million (~1 GB, ~2 GB while sorting) stops a pattern explosion
#: (2^length itemsets from one long transaction at a low support) long before memory runs
#: out, yet is far above the largest results of the benchmark (chess at 60%: 255k;
#: mushroom at 10%: 574k). Pass ``max_itemsets=`` to change it, ``None`` for no cap.
DEFAULT_MAX_ITEMSETS = 20_000_000


def min_count_of(min_support, n_transactions: int) -> int:
    """Absolute minimum support count: a fraction of the transactions when ``min_support < 1``
    (rounded up, computed exactly from the decimal value), else a count.

    >>> min_count_of(0.01, 100_000), min_count_of(0.007, 1000), min_count_of(5, 10)
    (1000, 7, 5)
    """
    if isinstance(min_support, bool) or not isinstance(min_support, (int, float, np.integer, np.floating)):
        raise ConfigError(f"min_support must be a number, got {min_support!r}")
    if not math.isfinite(min_support) or min_support <= 0:
        raise ConfigError(f"min_support must be > 0 (a fraction below 1 or a count), got {min_support}")
    if min_support < 1:
        return max(1, math.ceil(Fraction(repr(float(min_support))) * n_transactions))
    if float(min_support) != int(min_support):
        raise ConfigError(f"min_support {min_support} is >= 1, so it is a count and must be a whole number")
    return int(min_support)


def as_baskets(baskets_or_path, format: str | None = None) -> Baskets:
    """A Baskets from a Baskets, a file path (any format read_baskets knows) or lists."""
    if isinstance(baskets_or_path, Baskets):
        return baskets_or_path
    if isinstance(baskets_or_path, (str, os.PathLike)):
        from clusterlab.data.io import read_baskets

        return read_baskets(baskets_or_path, format=format)
    try:
        return Baskets.from_lists(baskets_or_path)
    except TypeError:
        raise ConfigError(f"cannot read baskets from a {type(baskets_or_path).__name__}: give a Baskets, "
                          "a file path or a list of transactions") from None


def choose_algorithm(b: Baskets, min_count: int, stats: dict | None = None) -> str:
    """The algorithm "auto" picks: the kernel measured fastest on the most similar data (a
    table of measured rows fitted by ``bench/auto_model.py``; see
    :mod:`clusterlab.mining.choose`). ``stats`` is accepted for compatibility and unused.

    >>> b = Baskets.from_lists([[1, 2], [2, 3]])
    >>> choose_algorithm(b, 1) in ALGORITHMS
    True
    """
    from clusterlab.mining.choose import choose, features

    return choose(features(b, min_count))


def check_mine_args(algorithm: str, min_len, max_len, max_itemsets) -> None:
    """The checks ``mine`` and the streamed ``mine_to_parquet`` share."""
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"unknown algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
    if not isinstance(min_len, (int, np.integer)) or min_len < 1:
        raise ConfigError(f"min_len must be an integer >= 1, got {min_len!r}")
    if max_len is not None and (not isinstance(max_len, (int, np.integer)) or max_len < min_len):
        raise ConfigError(f"max_len must be an integer >= min_len ({min_len}), got {max_len!r}")
    if max_itemsets is not None and (isinstance(max_itemsets, bool) or not isinstance(max_itemsets, (int, np.integer))
                                     or not 1 <= max_itemsets < 2**63):
        raise ConfigError(f"max_itemsets must be an integer >= 1 (or None for no cap), got {max_itemsets!r}")


def mine(baskets_or_path, min_support=0.01, algorithm: str = "auto", target: str = "all",
         min_len: int = 1, max_len: int | None = None, threads: int | None = None,
         format: str | None = None, max_itemsets: int | None = DEFAULT_MAX_ITEMSETS):
    """Frequent itemsets as a ``pyarrow.Table`` (columns ``items``, ``count``, ``support``).

    ``min_support`` is a fraction of the transactions when below 1, else an absolute count.
    ``target`` is ``"all"`` frequent itemsets, ``"closed"`` (no superset with the same count)
    or ``"maximal"`` (no frequent superset); closed/maximal are judged against all frequent
    itemsets, before the ``min_len``/``max_len`` cut. ``threads`` caps the threads used (the
    result is identical for any thread count). Rows are sorted by (length, items); items
    inside a row ascend (by id, or for labelled baskets by their label's id).

    More than ``max_itemsets`` itemsets (default :data:`DEFAULT_MAX_ITEMSETS`; ``None``: no
    cap) stop every thread promptly and raise :class:`~clusterlab.errors.TooManyItemsets`.

    >>> import clusterlab
    >>> t = clusterlab.mine([[1, 2, 3], [1, 2], [2, 3], [2]], min_support=0.5, min_len=2)
    >>> t.to_pydict()
    {'items': [[1, 2], [2, 3]], 'count': [2, 2], 'support': [0.5, 0.5]}
    >>> t.to_pandas()["count"].tolist()
    [2, 2]
    """
    check_mine_args(algorithm, min_len, max_len, max_itemsets)
    if target not in TARGETS:
        raise ConfigError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    if threads is not None and (not isinstance(threads, (int, np.integer)) or threads < 1):
        raise ConfigError(f"threads must be an integer >= 1, got {threads!r}")
    b = as_baskets(baskets_or_path, format)
    n = len(b)
    min_count = min_count_of(min_support, n)
    algo = choose_algorithm(b, min_count) if algorithm == "auto" else algorithm
    try:
        offsets, items, counts = _core.mine_itemsets(b.offsets, b.items, min_count, algo, target,
                                                     int(min_len), None if max_len is None else int(max_len),
                                                     threads, max_itemsets=None if max_itemsets is None else int(max_itemsets))
    except _core.TooManyItemsets as e:
        reached, limit = e.args
        raise TooManyItemsets(
            f"too many itemsets: stopped after {reached:,}, more would pass the limit of {limit:,} (max_itemsets); "
            f"a long transaction at this min_support gives 2^length itemsets: set a max_len (--max-len), raise "
            f"min_support, or raise max_itemsets", reached, limit) from None
    return itemset_table(offsets, items, counts, n, b.labels, min_count=min_count, target=target,
                         min_len=int(min_len), max_len=max_len, algorithm=algo)
