"""What ``rules()`` and the out-of-core ``rules_to_parquet`` share: the argument checks, the
transactions rules are measured over, and the rule columns from counts.

>>> import numpy as np
>>> from clusterlab.mining.result import list_array, numpy_array
>>> a = list_array(np.array([0, 1], dtype=np.int64), numpy_array(np.array([1], dtype=np.uint32)))
>>> c = list_array(np.array([0, 1], dtype=np.int64), numpy_array(np.array([2], dtype=np.uint32)))
>>> t = rule_table(a, c, np.array([2], dtype=np.uint64), np.array([4], dtype=np.uint64),
...                np.array([2], dtype=np.uint64), 4)
>>> t["confidence"].to_pylist(), t["lift"].to_pylist()
([0.5], [1.0])
"""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa

from clusterlab.errors import ConfigError
from clusterlab.mining.result import META_KEY, numpy_array


def check_rule_args(min_confidence, min_lift, consequents: str = "single") -> None:
    """The checks of ``rules`` and the out-of-core ``rules_to_parquet``: one ConfigError each."""
    if isinstance(min_confidence, bool) or not isinstance(min_confidence, (int, float, np.integer, np.floating)) \
            or not 0 <= min_confidence <= 1:
        raise ConfigError(f"min_confidence must be a number in [0, 1], got {min_confidence!r}")
    if min_lift is not None and (isinstance(min_lift, bool)
                                 or not isinstance(min_lift, (int, float, np.integer, np.floating))
                                 or not math.isfinite(min_lift) or min_lift < 0):
        raise ConfigError(f"min_lift must be a finite number >= 0 (or None for no lift filter), got {min_lift!r}")
    if consequents not in ("single", "multi"):
        raise ConfigError(f"consequents must be 'single' or 'multi', got {consequents!r}")


def rules_n_transactions(info: dict, n_transactions=None) -> int:
    """The transactions rules are measured over, after checking that the itemsets (``info``:
    their metadata) are all frequent itemsets."""
    if info.get("target", "all") != "all":
        raise ConfigError(f"rules need all frequent itemsets; this table holds {info['target']} itemsets "
                          "(mine with target='all')")
    if (info.get("min_len") or 1) > 1:
        raise ConfigError("rules need all frequent itemsets; this table was mined with min_len > 1")
    n = n_transactions if n_transactions is not None else info.get("n_transactions")
    if n is None:
        raise ConfigError("the itemset table carries no n_transactions; pass n_transactions=")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ConfigError(f"n_transactions must be a positive integer, got {n!r}")
    return int(n)


def rule_table(antecedent, consequent, rc, ac, cc, n: int, min_lift=None) -> pa.Table:
    """The rule columns from the list columns and the counts of rule, antecedent, consequent;
    only rules with lift >= ``min_lift`` when it is given."""
    n = float(n)
    support = rc / n
    confidence = rc / ac
    cons_support = cc / n
    lift = confidence / cons_support
    leverage = support - (ac / n) * cons_support
    with np.errstate(divide="ignore", invalid="ignore"):
        conviction = np.where(confidence >= 1.0, np.inf, (1.0 - cons_support) / (1.0 - confidence))
    table = pa.table({
        "antecedent": antecedent, "consequent": consequent, "count": numpy_array(rc, np.int64),
        "support": numpy_array(support), "confidence": numpy_array(confidence), "lift": numpy_array(lift),
        "leverage": numpy_array(leverage), "conviction": numpy_array(conviction),
    })
    return table if min_lift is None else table.filter(numpy_array(lift >= min_lift))


def rule_metadata(n: int, min_confidence, min_lift, consequents: str) -> dict:
    meta = {"n_transactions": int(n), "min_confidence": float(min_confidence), "min_lift": min_lift,
            "consequents": consequents}
    return {META_KEY: json.dumps(meta).encode()}
