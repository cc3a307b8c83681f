"""Frequent itemsets and association rules, sequential and parallel.

>>> import clusterlab
>>> sets = clusterlab.mine([[1, 2], [1, 2], [1, 3]], min_support=2)
>>> sets.to_pydict()["items"]
[[1], [2], [1, 2]]
>>> clusterlab.rules(sets, min_confidence=0.9).to_pydict()["antecedent"]
[[2]]
"""

from clusterlab.mining.result import itemset_table, table_info
from clusterlab.mining.rules import rules
from clusterlab.mining.sequential import mine

__all__ = ["itemset_table", "mine", "rules", "table_info"]
