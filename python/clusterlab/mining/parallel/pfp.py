"""PFP: parallel FP-growth (Li et al., RecSys'08; the cluster version of seed 001).

After the global item count, frequent items are ordered by descending support (the F-list) and
split into one group per rank, balanced by estimated work rather than by hash: an item's
conditional pattern base holds about ``support x (number of more frequent items a transaction
carries before it)`` entries, and groups are filled greedily, largest estimate first, into the
least loaded rank (LPT). Each rank turns its transactions into group-dependent transactions
(for every group, the prefix up to the transaction's last item of that group), shuffles them
with one alltoall and mines only the itemsets whose least frequent item is in its group, with
the fastest kernel (``ParallelConfig.pfp_kernel``: by default tid-list intersections guided by
the pair counts of what it received, Eclat's way; or an FP-tree). Results are gathered at rank 0.

>>> work_groups(np.array([100, 90, 50, 10]), 2.0, 2).tolist()
[1, 0, 1, 0]
"""

from __future__ import annotations

import time

import numpy as np

from clusterlab import _core
from clusterlab.mining.parallel.passes import allreduce_sum, as_array, first_pass


def work_groups(flist_counts: np.ndarray, avg_len: float, n_groups: int) -> np.ndarray:
    """Group of each F-list position: LPT on ``count x min(position, avg_len)`` (+ count, so
    the first items still weigh something). Deterministic: ties by position."""
    n = flist_counts.size
    pos = np.arange(n, dtype=np.float64)
    est = flist_counts.astype(np.float64) * (np.minimum(pos, max(avg_len, 1.0)) + 1.0)
    order = np.lexsort((pos, -est))
    load = np.zeros(n_groups)
    group = np.zeros(n, dtype=np.uint32)
    for p in order:
        g = int(np.argmin(load))
        group[p] = g
        load[g] += est[p]
    return group


def mine(comm, baskets, min_support, config, stats, out=None):
    """Returns ``(offsets, items, counts, n_transactions)``: all frequent itemsets on rank 0
    (in canonical order); other ranks return empty arrays. With ``out`` (an
    ``outofcore.RankOutput``) each rank spills its own itemsets as its kernel finds them, in
    sorted runs, and rank 0 merges them into ``out`` instead of gathering them (every rank
    returns empty arrays)."""
    P, me = comm.size, comm.rank
    fp = first_pass(comm, baskets, min_support, stats, order="support", min_len=1)
    flist, fcounts, n_tx, min_count = fp.items, fp.counts, fp.n_transactions, fp.min_count
    offsets, pos = fp.offsets, fp.ranks
    del fp  # the transactions are held once (freed as soon as they are shuffled)

    row = stats.start(2)
    t = time.perf_counter()
    kept = offsets.size - 1
    total = allreduce_sum(comm, np.array([pos.size, kept]))
    avg_len = float(total[0]) / max(float(total[1]), 1.0)
    group = work_groups(fcounts, avg_len, P)
    streams = _core.pfp_group_transactions(offsets, pos, group, P)
    n_pos = int(pos.size)
    offsets = pos = None
    row["t_scan"] = time.perf_counter() - t
    t = time.perf_counter()
    row["itemsets_sent"] = sum(int(s.size) for j, s in enumerate(streams) if j != me)
    received = comm.alltoall(streams) if P > 1 else streams
    streams = None  # what was sent is no longer needed while this rank mines
    row["t_send"] = time.perf_counter() - t
    t = time.perf_counter()
    received = [as_array(r, np.uint32) for r in received]
    if out is not None:  # each chunk sorted and spilled as found; rank 0 merges all ranks' runs
        from clusterlab.mining.parallel.outofcore import OverBound, SortedRuns, merge_runs

        out.begin(n_tx, min_count)
        runs = SortedRuns(itemsets=True)
        try:
            def take(o, it, c):
                runs.add(*_core.canonical_itemsets(o, flist[it], c))
                out.watch()

            if config.pfp_kernel == "vertical":
                try:
                    mined = _core.pfp_mine_group_stream(received, flist.size, group == me, min_count, config.max_len,
                                                        out.chunk, take)
                except OverBound:  # the check in merge_runs stops every rank, naming this one
                    mined = 0
            else:
                o, it, c = _core.pfp_mine_group(received, flist.size, group == me, min_count, config.max_len,
                                                config.pfp_kernel)
                mined = int(c.size)
                try:
                    take(o, it, c)
                except OverBound:
                    pass
                o = it = c = None
        except BaseException:
            runs.cleanup()
            raise
        received = None
        row["t_count"] = time.perf_counter() - t
        t = time.perf_counter()
        total_mined = int(allreduce_sum(comm, np.array([mined]))[0])
        merge_runs(comm, out, runs)
        row["t_sync"] = time.perf_counter() - t
        row["candidates"] = row["large"] = total_mined
        row["subsets"] = n_pos
        stats.end(row)
        return np.zeros(1, np.int64), np.zeros(0, np.uint32), np.zeros(0, np.uint64), n_tx
    o, it, c = _core.pfp_mine_group(received, flist.size, group == me, min_count, config.max_len, config.pfp_kernel)
    row["t_count"] = time.perf_counter() - t
    t = time.perf_counter()
    if P > 1:
        offs = comm.gather(o, root=0)
        items = comm.gather(it, root=0)
        cnts = comm.gather(c, root=0)
        total_mined = int(allreduce_sum(comm, np.array([c.size]))[0])
    else:
        offs, items, cnts, total_mined = [o], [it], [c], int(c.size)
    row["t_sync"] = time.perf_counter() - t
    row["candidates"] = row["large"] = total_mined
    row["subsets"] = n_pos
    if me != 0:
        stats.end(row)
        return np.zeros(1, np.int64), np.zeros(0, np.uint32), np.zeros(0, np.uint64), n_tx
    t = time.perf_counter()
    # Concatenate the ranks' CSR results, map positions back to item ids, canonical order.
    all_o, base = [np.zeros(1, np.int64)], 0
    for oo in offs:
        oo = as_array(oo, np.int64)
        all_o.append(oo[1:] + base)
        base += int(oo[-1]) if oo.size else 0
    flat = np.concatenate([as_array(x, np.uint32) for x in items]) if items else np.zeros(0, np.uint32)
    cc = np.concatenate([as_array(x, np.uint64) for x in cnts]) if cnts else np.zeros(0, np.uint64)
    res = _core.canonical_itemsets(np.concatenate(all_o), flist[flat], cc)
    row["t_sync"] += time.perf_counter() - t
    stats.end(row)
    return res[0], res[1], res[2], n_tx
