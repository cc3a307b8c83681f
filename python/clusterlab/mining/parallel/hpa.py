"""HPA: Hash Partitioned Apriori (Shintani & Kitsuregawa, PDIS'96), as run in seed 000.

Candidate k-itemsets are partitioned among ranks by a fixed hash (``clusterlab._core.hpa_owner``,
documented in crates/clusterlab-core/src/hpa/hash.rs), like the build side of a hash join, so
the cluster's memory holds the candidates once. Each rank scans its own transactions in read
blocks, enumerates the k-subsets that can be candidates, and sends each to its owner packed in
message blocks (8 KB by default); owners count what they receive in a hash table. Sending and
counting overlap: a receiver thread counts incoming blocks while the main thread scans and
sends (the Rust kernels release the GIL). At the end of a pass the large itemsets are
all-gathered so every rank can generate the next candidates.

Pass 2 (``ParallelConfig.local_pairs``, the default): every pair of frequent items is a
candidate, so the candidates are few and dense; each rank counts its transactions' pairs in a
triangle and one all-reduce sums them instead of shipping every pair to its owner. With
``local_pairs=False`` and ``partition="itemset"`` every pass is seed 000's.

Prefix partitioning (``ParallelConfig.partition == "prefix"``, the default): a candidate is
owned by the rank that owns its first item, first items being dealt out greedily by estimated
counting work. A transaction then travels to another owner once, as one record (its items from
the first one that owner owns), and the owner enumerates and counts its own subsets: the
candidates are still partitioned and each counted once at its owner, but a transaction of n
items costs about n words of traffic instead of every subset's k items.
``partition="itemset"`` is seed 000's hash of the whole itemset.

HPA-ELD (``eld=True``, module ``hpa_eld``): candidates made only of the most frequent items
(expected to be large, and the source of most traffic) are replicated at every rank, counted
locally and all-reduced.

>>> from clusterlab.comm.inproc import run_threads
>>> from clusterlab.data import Baskets
>>> from clusterlab.mining.parallel.config import ParallelConfig
>>> from clusterlab.mining.parallel.passes import PassStats
>>> b = Baskets.from_lists([[1, 2, 3], [1, 2], [2, 3], [1, 2, 3]])
>>> def job(comm):
...     part = b.slice(comm.rank * 2, comm.rank * 2 + 2)
...     o, i, c, n = mine(comm, part, 2, ParallelConfig(), PassStats(comm))
...     return i.tolist(), c.tolist()
>>> run_threads(job, 2)[0]
([1, 2, 3, 1, 2, 1, 3, 2, 3, 1, 2, 3], [3, 4, 3, 3, 2, 3, 2])
"""

from __future__ import annotations

import queue
import threading
import time

import numpy as np

from clusterlab import _core
from clusterlab.comm.errors import CommTimeout, ProtocolError
from clusterlab.mining.parallel.outofcore import Levels, pass_need
from clusterlab.mining.parallel.passes import (
    allgather_large,
    allreduce_counts,
    allreduce_sum,
    canonical_level,
    dense_pairs_ok,
    first_pass,
    global_pairs,
    read_blocks,
    runtime_region,
    shrink_transactions,
)

PASS_TAG = 1000  # pass k's blocks travel with tag PASS_TAG + k


class _Counter(threading.Thread):
    """Counts received blocks into the owner's table while the main thread scans and sends.

    Only the main thread talks to the communicator (backends need not be thread-safe, and
    MPI's thread level stays irrelevant); this thread runs the Rust counting kernel, which
    releases the GIL, so counting overlaps routing and sending. Its inbox holds lists of
    ``(source, block)`` (what one ``recv_many`` took); ``count`` takes a list of blocks, and
    each run of blocks from one source is one call.
    """

    def __init__(self, count, name: str):
        super().__init__(name=name, daemon=True)
        self.count = count
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        self.error: BaseException | None = None
        self.t_count = 0.0

    def run(self) -> None:
        while True:
            batch = self.inbox.get()
            if batch is None:
                return
            if self.error is not None:
                continue
            t = time.perf_counter()
            i = 0
            while i < len(batch) and self.error is None:
                src = batch[i][0]
                j = i
                while j < len(batch) and batch[j][0] == src:
                    j += 1
                try:
                    self.count([d for _, d in batch[i:j]])
                except ValueError as e:
                    self.error = ProtocolError(f"bad HPA block from rank {src}: {e}")
                i = j
            self.t_count += time.perf_counter() - t


class _Inbound:
    """The main thread's side of receiving pass k's blocks: poll, hand blocks to the counter,
    and track the end markers (an empty message from each peer). Each poll takes every block
    already received in one ``recv_many`` call (on the TCP mesh's Rust engine)."""

    # A poll between read blocks does not wait: a timed wait there cost ~1 ms a read block
    # (the GIL and the scheduler, on 2 busy cores), more than routing the block itself.
    POLL = 0.0

    def __init__(self, comm, tag: int, counter: _Counter):
        self.comm, self.tag, self.counter = comm, tag, counter
        self.pending = comm.size - 1
        self.blocks = 0

    def _take(self, got) -> None:
        batch = []
        for src, data in got:
            if isinstance(data, np.ndarray):
                data = data.tobytes()
            if len(data) == 0:
                self.pending -= 1
            else:
                batch.append((src, data))
        if batch:
            self.blocks += len(batch)
            self.counter.inbox.put(batch)

    # Receiving is a loop of this implementation's (a recording takes one message a call, the
    # real run all that arrived): between the calls it only hands blocks to the counting thread,
    # which is runtime for a replay, not mining (passes.runtime_region).
    def poll(self) -> None:
        """Take whatever has arrived, without waiting."""
        with runtime_region(self.comm):
            while self.pending:
                try:
                    got = self.comm.recv_many(self.tag, timeout=self.POLL)
                except CommTimeout:
                    return
                self._take(got)

    def finish(self, timeout: float) -> None:
        """Wait for every peer's remaining blocks and end marker."""
        with runtime_region(self.comm):
            while self.pending:
                self._take(self.comm.recv_many(self.tag, timeout=timeout))


def _comb(n: np.ndarray, r: int) -> np.ndarray:
    """C(n, r) elementwise as float64 (0 where n < r)."""
    w = np.ones(n.size, dtype=np.float64)
    for j in range(r):
        w *= np.maximum(n - j, 0) / (j + 1)
    return w


def prefix_owners(comm, offsets: np.ndarray, ranks: np.ndarray, n_items: int, k: int,
                  sample: int = 65536) -> np.ndarray:
    """Owner rank of each first item for pass k: the items, heaviest first, go one by one to
    the least loaded rank, an item's weight being the k-subsets it starts in (a sample of)
    the transactions, summed over ranks so every rank computes the same owners.

    >>> from clusterlab.comm.inproc import run_threads
    >>> o = np.array([0, 3, 5], dtype=np.int64); r = np.array([0, 1, 2, 1, 2], dtype=np.uint32)
    >>> run_threads(lambda c: prefix_owners(c, o, r, 3, 2).tolist(), 2)
    [[0, 1, 0], [0, 1, 0]]
    """
    # A step of this HPA that the seed's (a hash of the whole itemset) does not have, and its
    # cost does not shrink with the ranks (a fixed-size sample, then the interpreter's loop over
    # the items on every rank): runtime for a replay, not mining (passes.runtime_region).
    with runtime_region(comm):
        n_tx = min(offsets.size - 1, sample)
        end = int(offsets[n_tx])
        lens = np.diff(offsets[: n_tx + 1])
        pos = np.arange(end, dtype=np.int64) - np.repeat(offsets[:n_tx], lens)
        after = np.repeat(lens, lens) - 1 - pos
        w = np.bincount(ranks[:end], weights=_comb(after, k - 1), minlength=n_items)[:n_items]
        w = np.minimum(np.rint(w), 2.0**52).astype(np.int64)
    if comm.size > 1:
        w = comm.allreduce(w, "sum").astype(np.int64)
    owners = np.zeros(n_items, dtype=np.uint32)
    load = np.zeros(comm.size, dtype=np.int64)
    with runtime_region(comm):
        for i in np.lexsort((np.arange(n_items), -w)):
            o = int(np.argmin(load))
            owners[i] = o
            load[o] += w[i]
    return owners


def _rescanned(rescan, freq: np.ndarray, prev, k: int, row: dict):
    """This rank's share read again (``rescan()``) and reduced to what pass ``k`` uses: the
    frequent items' ranks (as ``first_pass`` numbers them), then, from pass 3, only items
    of the large (k-1)-itemsets ``prev`` (as the shrink between passes keeps them). The time
    goes to ``row["t_scan"]``."""
    t = time.perf_counter()
    b = rescan()
    key_order = np.argsort(freq, kind="stable")
    offsets, ranks = _core.reduce_by_keys(b.offsets, b.items, np.ascontiguousarray(freq[key_order]),
                                          key_order.astype(np.uint32), 2)
    del b
    if prev is not None:
        offsets, ranks = shrink_transactions(offsets, ranks, prev, freq.size, k)
    row["t_scan"] += time.perf_counter() - t
    return offsets, ranks


def mine(comm, baskets, min_support, config, stats, eld: bool = False, rescan=None, out=None):
    """Run HPA on this rank's ``baskets``. Returns the frequent itemsets of all ranks
    ``(offsets, items, counts, n_transactions)`` in canonical order (every rank gets them).
    ``rescan``: a function reading this rank's share again (``ParallelConfig.rescan``): every
    pass after the first starts from a fresh read (its time is the pass's ``t_scan``).
    ``out``: an ``outofcore.RankOutput``: each pass's large itemsets go to it as the pass
    ends, only the last pass's are kept, and the arrays returned are empty."""
    fp = first_pass(comm, baskets, min_support, stats)
    freq, fcounts, n_tx, min_count, offsets, ranks = (fp.items, fp.counts, fp.n_transactions, fp.min_count,
                                                      fp.offsets, fp.ranks)
    del fp  # the transactions are held once (a pass's shrink frees the old ones)
    levels = Levels(freq, fcounts, n_tx, min_count, out)
    # Descending-frequency position of each frequent item (HPA-ELD picks the hottest items).
    freq_pos = np.empty(freq.size, dtype=np.uint32)
    freq_pos[np.lexsort((np.arange(freq.size), -fcounts.astype(np.int64)))] = np.arange(freq.size, dtype=np.uint32)
    P, me = comm.size, comm.rank
    # Items travel as 2-byte ranks when there are few enough frequent items (half the bytes).
    prefix = config.partition == "prefix" and not eld and P > 1
    long_tx = 0
    if prefix:
        # Prefix records carry their length as one item word.
        long_tx = int(offsets.size > 1 and np.diff(offsets).max() > 65535)
        long_tx = int(allreduce_sum(comm, np.array([long_tx]))[0])
    width = 2 if freq.size <= 65536 and not long_tx else 4
    k = 2
    if config.local_pairs and not eld and dense_pairs_ok(freq.size) and (config.max_len == 0 or config.max_len >= 2):
        # Pass 2's candidates are every pair of frequent items: few and dense, so each rank
        # counts its own pairs and one all-reduce sums them (no pair travels on its own).
        row = stats.start(2)
        if rescan is not None:
            offsets, ranks = _rescanned(rescan, freq, None, 2, row)
        large_flat, large_counts = global_pairs(comm, offsets, ranks, freq.size, min_count, row, n_tx)
        t = time.perf_counter()
        if large_counts.size and rescan is None:
            offsets, ranks = shrink_transactions(offsets, ranks, large_flat, freq.size, 3)
        row["t_scan"] += time.perf_counter() - t
        stats.end(row)
        if large_counts.size == 0:
            return levels.result()
        levels.append((large_flat, large_counts))
        k = 3
    while levels[-1][1].size >= 2 and (config.max_len == 0 or k <= config.max_len):
        prev = levels[-1][0]
        if out is not None:  # refuse a pass whose candidates cannot fit, before making them
            out.admit(k, *pass_need(prev, k, 1.0 / P))
        row = stats.start(k)
        if rescan is not None:
            offsets, ranks = _rescanned(rescan, freq, prev, k, row)
        t = time.perf_counter()
        owners = None
        if eld:
            eld_flat, own = _core.hpa_eld_candidates(prev, k - 1, P, me, freq_pos, config.eld_max)
        elif prefix:
            owners = prefix_owners(comm, offsets, ranks, freq.size, k)
            eld_flat, own = np.zeros(0, np.uint32), _core.hpa_prefix_candidates(prev, k - 1, owners, me)
        else:
            eld_flat, own = np.zeros(0, np.uint32), _core.hpa_candidates(prev, k - 1, P, me)
        table = _core.CandidateTable(k, own, freq.size)
        eld_table = _core.CandidateTable(k, eld_flat, freq.size) if eld_flat.size else None
        # A block always holds at least one k-itemset, whatever block_bytes says.
        block = max(config.block_bytes, width * k)
        router = _core.HpaRouter(k, P, me, prev, table, eld_table, block, config.prune, width, owners)
        # Prefix records are counted by a second router of the same candidates (the receiver
        # thread's), since the first one is busy routing on the main thread.
        receiver = (_core.HpaRouter(k, P, me, prev, table, None, block, config.prune, width, owners)
                    if owners is not None else None)
        row["t_generate"] = time.perf_counter() - t
        tag = PASS_TAG + k
        counter = inbound = None
        if P > 1:
            if receiver is not None:
                def count(blocks, receiver=receiver):
                    for data in blocks:
                        receiver.count_records(data)
            else:
                def count(blocks, table=table):
                    table.count_blocks(blocks, width)
            counter = _Counter(count, f"hpa-count-{me}")
            counter.start()
            inbound = _Inbound(comm, tag, counter)
        try:
            t_route = t_send = t_recv = 0.0
            send_calls = 0
            for lo, hi in read_blocks(offsets, config.read_block_bytes):
                t = time.perf_counter()
                ready = router.route(offsets, ranks, lo, hi)
                t2 = time.perf_counter()
                if ready:  # one call per read block: the engine sends its blocks (Rust's loop on TCP)
                    comm.send_many(ready, tag)
                    send_calls += 1
                t3 = time.perf_counter()
                if inbound is not None:
                    inbound.poll()
                t_route += t2 - t
                t_send += t3 - t2
                t_recv += time.perf_counter() - t3
            t = time.perf_counter()
            ready = router.flush()
            if ready:
                comm.send_many(ready, tag)
                send_calls += 1
            comm.send_many([(dest, b"") for dest in range(P) if dest != me], tag)  # end markers
            t_send += time.perf_counter() - t
            t = time.perf_counter()
            if inbound is not None:
                inbound.finish(config.timeout)
            t_wait = time.perf_counter() - t
        finally:
            if counter is not None:
                counter.inbox.put(None)
                counter.join(config.timeout)
        if counter is not None:
            if counter.is_alive():
                raise CommTimeout(f"rank {me}: HPA counting of pass {k} did not finish within {config.timeout:g} s")
            if counter.error is not None:
                raise counter.error
        t = time.perf_counter()
        counts = table.counts() + router.local_counts()
        if receiver is not None:
            counts += receiver.local_counts()
        keep = counts >= min_count
        own_large = own.reshape(-1, k)[keep].ravel() if own.size else own
        large_flat, large_counts = allgather_large(comm, k, own_large, counts[keep])
        n_cand_total = int(allreduce_sum(comm, np.array([len(table)]))[0])
        if eld_table is not None:
            ecounts = allreduce_counts(comm, router.eld_counts(), n_tx)
            ekeep = ecounts >= min_count
            ef = eld_flat.reshape(-1, k)[ekeep].ravel()
            both_flat = np.concatenate([large_flat, ef]).astype(np.uint32)
            both_counts = np.concatenate([large_counts, ecounts[ekeep]]).astype(np.uint64)
            large_flat, large_counts = canonical_level(k, both_flat, both_counts)
            n_cand_total += len(eld_table)
        row["t_sync"] = time.perf_counter() - t
        rs = router.stats()
        row["t_route"], row["t_send"], row["t_recv"] = t_route, t_send, t_recv
        row["t_wait"] = t_wait
        row["send_calls"] = send_calls
        row["t_count"] = counter.t_count if counter is not None else 0.0
        row["candidates"], row["large"] = n_cand_total, large_counts.size
        row["itemsets_sent"], row["subsets"] = rs["itemsets_sent"], rs["subsets"]
        # Shrink the transactions to the items still in play for pass k + 1.
        t = time.perf_counter()
        if large_counts.size and rescan is None:
            offsets, ranks = shrink_transactions(offsets, ranks, large_flat, freq.size, k + 1)
        row["t_scan"] += time.perf_counter() - t
        stats.end(row)
        if large_counts.size == 0:
            break
        levels.append((large_flat, large_counts))
        k += 1
    return levels.result()


