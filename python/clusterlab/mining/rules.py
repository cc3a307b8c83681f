"""``rules()``: association rules from an itemset table.

For a rule X -> Y over n transactions (mlxtend / Spark definitions):
support = count(X ∪ Y)/n, confidence = count(X ∪ Y)/count(X),
lift = confidence / support(Y), leverage = support - support(X)·support(Y),
conviction = (1 - support(Y)) / (1 - confidence) (inf when confidence is 1).

>>> import clusterlab
>>> sets = clusterlab.mine([["a", "b"], ["a", "b"], ["a"], ["b", "c"]], min_support=2)
>>> r = clusterlab.rules(sets, min_confidence=0.6)
>>> r.select(["antecedent", "consequent", "support", "confidence", "lift"]).to_pylist()
[{'antecedent': ['b'], 'consequent': ['a'], 'support': 0.5, 'confidence': 0.6666666666666666, 'lift': 0.8888888888888888}, {'antecedent': ['a'], 'consequent': ['b'], 'support': 0.5, 'confidence': 0.6666666666666666, 'lift': 0.8888888888888888}]
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pyarrow as pa

from clusterlab import _core
from clusterlab.errors import ConfigError
from clusterlab.mining.result import META_KEY, list_array, numpy_array, table_csr, table_info

RULE_COLUMNS = ("antecedent", "consequent", "count", "support", "confidence", "lift", "leverage", "conviction")


def rules(itemsets, min_confidence: float = 0.8, min_lift: float | None = None,
          consequents: str = "single", n_transactions: int | None = None) -> pa.Table:
    """Association rules with confidence >= ``min_confidence`` (and lift >= ``min_lift``).

    ``itemsets`` is a table from :func:`clusterlab.mine` with ``target="all"`` (every subset
    of a frequent itemset must be present to know its count), or the path of such a table in
    a Parquet file (``clusterlab mine -o X.parquet``, streamed or not): with one-item
    consequents the rules are then derived out of core
    (:func:`clusterlab.mining.stream.rules_to_parquet`, spilling to the temporary directory)
    and only they are held in memory, in another row order; ``"multi"`` reads the file whole. ``consequents="single"`` gives
    one-item consequents (pyfim and Spark behaviour), ``"multi"`` every non-empty proper
    subset as consequent (mlxtend behaviour). ``n_transactions`` defaults to the table's
    metadata. Columns: antecedent, consequent (lists like the ``items`` column), count,
    support, confidence, lift, leverage, conviction.

    >>> import clusterlab
    >>> sets = clusterlab.mine([[1, 2, 3], [1, 2, 3], [1, 2], [3]], min_support=2)
    >>> r = clusterlab.rules(sets, min_confidence=0.6, consequents="multi")
    >>> [(a, c) for a, c in zip(r["antecedent"].to_pylist(), r["consequent"].to_pylist())][-3:]
    [([3], [1, 2]), ([2], [1, 3]), ([1], [2, 3])]
    """
    if isinstance(itemsets, (str, os.PathLike)):
        return _rules_of_file(itemsets, min_confidence, min_lift, consequents, n_transactions)
    if not isinstance(itemsets, pa.Table) or "items" not in itemsets.column_names or "count" not in itemsets.column_names:
        raise ConfigError("rules() needs an itemset table with 'items' and 'count' columns (from clusterlab.mine)")
    check_rule_args(min_confidence, min_lift, consequents)
    n = rules_n_transactions(table_info(itemsets), n_transactions)
    offsets, items, counts, labels = table_csr(itemsets)
    offsets, items, counts = _core.canonical_itemsets(offsets, items, counts)
    try:
        ao, ai, ac, co, ci, cc, rc = _core.association_rules(offsets, items, counts, float(min_confidence),
                                                             consequents == "multi")
    except ValueError as e:
        raise ConfigError(str(e)) from None
    def lists(o, i):
        values = numpy_array(i)
        if labels is not None:
            values = pa.array(labels, type=pa.string()).take(values)
        return list_array(o, values)

    table = rule_table(lists(ao, ai), lists(co, ci), rc, ac, cc, n, min_lift)
    return table.replace_schema_metadata(rule_metadata(n, min_confidence, min_lift, consequents))


def _rules_of_file(path, min_confidence, min_lift, consequents: str, n_transactions) -> pa.Table:
    """``rules`` of the itemset Parquet file ``path``."""
    import tempfile

    import pyarrow.parquet as pq

    check_rule_args(min_confidence, min_lift, consequents)
    if consequents == "multi":
        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowException) as e:
            raise ConfigError(f"cannot read itemsets from {path}: {str(e).splitlines()[0]}") from None
        return rules(table, min_confidence, min_lift, consequents, n_transactions)
    from clusterlab.mining.stream import rules_to_parquet

    with tempfile.TemporaryDirectory(prefix="clusterlab-rules-") as d:
        out = os.path.join(d, "rules.parquet")
        rules_to_parquet(path, out, min_confidence=min_confidence, min_lift=min_lift, n_transactions=n_transactions)
        table = pq.read_table(out)
    # Parquet names a list's child "element": back to the in-memory table's types.
    types = [pa.large_list(f.type.value_type) if pa.types.is_large_list(f.type) else f.type for f in table.schema]
    schema = pa.schema([pa.field(f.name, t) for f, t in zip(table.schema, types, strict=True)],
                       metadata=table.schema.metadata)
    return table.cast(schema)


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
