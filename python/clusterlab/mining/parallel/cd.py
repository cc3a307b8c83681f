"""Count Distribution (Agrawal & Shafer, 1996): the classic parallel Apriori baseline.

Every rank generates all candidates, counts them on its own transactions (the same subset
enumeration kernel as HPA, with every candidate owned locally), and the counts are
all-reduced. Nothing but one array of counts per pass crosses the network, but every rank
holds every candidate (HPA's point is to avoid that).

>>> from clusterlab.comm.inproc import run_threads
>>> from clusterlab.data import Baskets
>>> from clusterlab.mining.parallel.config import ParallelConfig
>>> from clusterlab.mining.parallel.passes import PassStats
>>> b = Baskets.from_lists([[1, 2, 3], [1, 2], [2, 3], [1, 2, 3]])
>>> def job(comm):
...     part = b.slice(comm.rank * 2, comm.rank * 2 + 2)
...     o, i, c, n = mine(comm, part, 3, ParallelConfig(), PassStats(comm))
...     return i.tolist(), c.tolist()
>>> run_threads(job, 2)[1]
([1, 2, 3, 1, 2, 2, 3], [3, 4, 3, 3, 3])
"""

from __future__ import annotations

import time

import numpy as np

from clusterlab import _core
from clusterlab.mining.parallel.passes import (
    allreduce_sum,
    assemble,
    first_pass,
    read_blocks,
    shrink_transactions,
)


def mine(comm, baskets, min_support, config, stats):
    """Returns ``(offsets, items, counts, n_transactions)`` of all frequent itemsets on every rank."""
    fp = first_pass(comm, baskets, min_support, stats)
    freq, fcounts, n_tx, min_count, offsets, ranks = (fp.items, fp.counts, fp.n_transactions, fp.min_count,
                                                      fp.offsets, fp.ranks)
    levels = [(np.arange(freq.size, dtype=np.uint32), fcounts)]
    k = 2
    while levels[-1][1].size >= 2 and (config.max_len == 0 or k <= config.max_len):
        prev = levels[-1][0]
        row = stats.start(k)
        t = time.perf_counter()
        cands = _core.hpa_candidates(prev, k - 1, 1, 0)
        table = _core.CandidateTable(k, cands, freq.size)
        router = _core.HpaRouter(k, 1, 0, prev, table, None, max(config.block_bytes, 4 * k), config.prune)
        row["t_generate"] = time.perf_counter() - t
        t = time.perf_counter()
        for lo, hi in read_blocks(offsets, config.read_block_bytes):
            router.route(offsets, ranks, lo, hi)
        row["t_count"] = time.perf_counter() - t
        t = time.perf_counter()
        counts = allreduce_sum(comm, router.local_counts().astype(np.int64)).astype(np.uint64)
        row["t_sync"] = time.perf_counter() - t
        keep = counts >= min_count
        large_flat = cands.reshape(-1, k)[keep].ravel() if cands.size else cands
        large_counts = counts[keep]
        row["candidates"], row["large"] = len(table), large_counts.size
        row["subsets"] = router.stats()["subsets"]
        t = time.perf_counter()
        if large_counts.size:
            offsets, ranks = shrink_transactions(offsets, ranks, large_flat, freq.size, k + 1)
        row["t_scan"] = time.perf_counter() - t
        stats.end(row)
        if large_counts.size == 0:
            break
        levels.append((large_flat, large_counts))
        k += 1
    return assemble(levels, freq, n_tx)
