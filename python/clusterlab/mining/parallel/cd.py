"""Count Distribution (Agrawal & Shafer, 1996): the classic parallel Apriori baseline.

Every rank generates all candidates, counts them on its own transactions, and the counts are
all-reduced. Nothing but one array of counts per pass crosses the network, but every rank
holds every candidate (HPA's point is to avoid that).

How a rank counts (``ParallelConfig.counting``): pass 2 counts every pair of frequent items
in a triangle (``local_pairs``); passes 3 and up either intersect tid-lists (``"tidlist"``,
the default: each large itemset keeps the ids of its local transactions and a candidate's
count is the size of the intersection of its two generators' lists, Eclat's step taken level
by level so that counts can be all-reduced in between) or walk each transaction's subsets
through the candidates (``"trie"``, the same kernel as HPA with every candidate owned
locally).

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
from clusterlab.mining.parallel.outofcore import Levels, pass_need
from clusterlab.mining.parallel.passes import (
    allreduce_counts,
    dense_pairs_ok,
    first_pass,
    global_pairs,
    read_blocks,
    shrink_transactions,
)


def mine(comm, baskets, min_support, config, stats, out=None):
    """Returns ``(offsets, items, counts, n_transactions)`` of all frequent itemsets on every
    rank; with ``out`` (``outofcore.RankOutput``) each pass's go to it instead (see ``hpa.mine``)."""
    fp = first_pass(comm, baskets, min_support, stats)
    freq, fcounts, n_tx, min_count, offsets, ranks = (fp.items, fp.counts, fp.n_transactions, fp.min_count,
                                                      fp.offsets, fp.ranks)
    del fp  # the transactions are held once (a pass's shrink frees the old ones)
    levels = Levels(freq, fcounts, n_tx, min_count, out)
    tidlists = prev_tids = None  # prev_tids: this rank's tid-list length of each large (k-1)-itemset
    n_local = offsets.size - 1
    k = 2
    while levels[-1][1].size >= 2 and (config.max_len == 0 or k <= config.max_len):
        prev = levels[-1][0]
        dense = k == 2 and config.local_pairs and dense_pairs_ok(freq.size)
        if out is not None and not dense:  # refuse a pass that cannot fit, before building it
            tids = None
            if k >= 3 and config.counting == "tidlist":  # (first time: the global counts' local share)
                tids = prev_tids if prev_tids is not None else levels[-1][1] * (n_local / max(n_tx, 1))
            out.admit(k, *pass_need(prev, k, 1.0, tids))
        row = stats.start(k)
        if dense:
            large_flat, large_counts = global_pairs(comm, offsets, ranks, freq.size, min_count, row, n_tx)
        elif k >= 3 and config.counting == "tidlist":
            t = time.perf_counter()
            cands = _core.hpa_candidates(prev, k - 1, 1, 0)
            row["t_generate"] = time.perf_counter() - t
            t = time.perf_counter()
            if tidlists is None:
                # The lists of the large (k-1)-itemsets, from the items they hold.
                keep = np.zeros(freq.size, dtype=bool)
                keep[prev] = True
                tidlists = _core.TidLists.of_items(offsets, ranks, keep)
                if k > 2:
                    for j in range(2, k):
                        tidlists = tidlists.extend(levels[j - 1][0])
                offsets = ranks = None  # the tid-lists replace the transactions from here on
            tidlists = tidlists.extend(cands)
            local = tidlists.counts()
            row["t_count"] = time.perf_counter() - t
            t = time.perf_counter()
            counts = allreduce_counts(comm, local, n_tx)
            row["t_sync"] = time.perf_counter() - t
            keep = counts >= min_count
            tidlists = tidlists.retain(keep)
            prev_tids = local[keep]
            large_flat = cands.reshape(-1, k)[keep].ravel() if cands.size else cands
            large_counts = counts[keep]
            row["candidates"], row["large"] = len(keep), int(large_counts.size)
        else:
            large_flat, large_counts = _count_by_trie(comm, k, prev, offsets, ranks, freq.size, min_count, config, row, n_tx)
        t = time.perf_counter()
        if large_counts.size and tidlists is None:
            offsets, ranks = shrink_transactions(offsets, ranks, large_flat, freq.size, k + 1)
        row["t_scan"] = time.perf_counter() - t
        stats.end(row)
        if large_counts.size == 0:
            break
        levels.append((large_flat, large_counts))
        k += 1
    return levels.result()


def _count_by_trie(comm, k, prev, offsets, ranks, n_items, min_count, config, row, n_tx):
    """Pass k counted by walking each local transaction's subsets through all candidates."""
    t = time.perf_counter()
    cands = _core.hpa_candidates(prev, k - 1, 1, 0)
    table = _core.CandidateTable(k, cands, n_items)
    router = _core.HpaRouter(k, 1, 0, prev, table, None, max(config.block_bytes, 4 * k), config.prune)
    row["t_generate"] = time.perf_counter() - t
    t = time.perf_counter()
    for lo, hi in read_blocks(offsets, config.read_block_bytes):
        router.route(offsets, ranks, lo, hi)
    row["t_count"] = time.perf_counter() - t
    t = time.perf_counter()
    counts = allreduce_counts(comm, router.local_counts(), n_tx)
    row["t_sync"] = time.perf_counter() - t
    keep = counts >= min_count
    row["candidates"], row["large"] = len(table), int(keep.sum())
    row["subsets"] = router.stats()["subsets"]
    return (cands.reshape(-1, k)[keep].ravel() if cands.size else cands), counts[keep]
