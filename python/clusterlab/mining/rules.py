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

import os

import pyarrow as pa

from clusterlab import _core
from clusterlab.errors import ConfigError
from clusterlab.mining.result import list_array, numpy_array, table_csr, table_info
from clusterlab.mining.rule_columns import check_rule_args, rule_metadata, rule_table, rules_n_transactions

RULE_COLUMNS = ("antecedent", "consequent", "count", "support", "confidence", "lift", "leverage", "conviction")


def rules(itemsets, min_confidence: float = 0.8, min_lift: float | None = None,
          consequents: str = "single", n_transactions: int | None = None) -> pa.Table:
    """Association rules with confidence >= ``min_confidence`` (and lift >= ``min_lift``).

    ``itemsets`` is a table from :func:`clusterlab.mine` with ``target="all"`` (every subset
    of a frequent itemset must be present to know its count), or the path of such a table in
    a Parquet file (``clusterlab mine -o X.parquet``, streamed or not): the rules are then
    derived out of core (:func:`clusterlab.mining.stream.rules_to_parquet`, spilling to the
    temporary directory) and only they are held in memory, the same table. ``consequents="single"`` gives
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
    from clusterlab.mining.stream import rules_to_parquet

    with tempfile.TemporaryDirectory(prefix="clusterlab-rules-") as d:
        out = os.path.join(d, "rules.parquet")
        rules_to_parquet(path, out, min_confidence=min_confidence, min_lift=min_lift, n_transactions=n_transactions,
                         consequents=consequents)
        table = pq.read_table(out)
    # Parquet names a list's child "element": back to the in-memory table's types.
    types = [pa.large_list(f.type.value_type) if pa.types.is_large_list(f.type) else f.type for f in table.schema]
    schema = pa.schema([pa.field(f.name, t) for f, t in zip(table.schema, types, strict=True)],
                       metadata=table.schema.metadata)
    return table.cast(schema)
