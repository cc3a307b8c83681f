"""HPA-ELD: HPA with Extremely Large itemset Duplication (Shintani & Kitsuregawa, PDIS'96).

Candidates made only of the most frequent items (expected to be large, and the source of most
of HPA's traffic) are replicated at every rank, counted locally during the scan and
all-reduced; the others are partitioned by seed 000's itemset hash as in HPA. ``eld_max``
(``ParallelConfig``) bounds the replicated candidates per pass.

>>> from clusterlab.comm.inproc import run_threads
>>> from clusterlab.data import Baskets
>>> from clusterlab.mining.parallel.config import ParallelConfig
>>> from clusterlab.mining.parallel.passes import PassStats
>>> b = Baskets.from_lists([[1, 2, 3], [1, 2], [2, 3], [1, 2, 3]])
>>> def job(comm):
...     part = b.slice(comm.rank * 2, comm.rank * 2 + 2)
...     return mine(comm, part, 2, ParallelConfig(eld_max=1), PassStats(comm))[2].tolist()
>>> run_threads(job, 2)[0]
[3, 4, 3, 3, 2, 3, 2]
"""

from __future__ import annotations

from clusterlab.mining.parallel import hpa


def mine(comm, baskets, min_support, config, stats, rescan=None, out=None):
    """HPA with duplicated extremely large candidates; returns what ``hpa.mine`` returns."""
    return hpa.mine(comm, baskets, min_support, config, stats, eld=True, rescan=rescan, out=out)
