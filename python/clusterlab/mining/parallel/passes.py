"""The pass machinery every parallel miner shares: per-pass statistics, pass 1 (global item
counts over sparse ids), read blocks, the all-gather of large itemsets and the final assembly.

Written only against the ``Communicator`` interface. Items after pass 1 are *ranks*: indices
in the list of frequent items (in id order for the Apriori family, in F-list order for PFP).

>>> from clusterlab.comm.inproc import run_threads
>>> from clusterlab.data import Baskets
>>> b = Baskets.from_lists([[7, 4294967295], [7], [4294967295, 9], [7, 9]])
>>> def job(comm):
...     ids, counts = global_item_counts(comm, b.slice(comm.rank * 2, comm.rank * 2 + 2).items)
...     return ids.tolist(), counts.tolist()
>>> run_threads(job, 2)[1]
([7, 9, 4294967295], [3, 2, 2])
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Any

import numpy as np

from clusterlab import _core
from clusterlab.mining.sequential import min_count_of

# Marks an item that is dropped when transactions are reduced (the kernels' "no rank").
NONE = np.uint32(0xFFFFFFFF)

# Per-pass fields every rank records (floats, so the stats travel as one numpy array).
# t_comm: seconds inside communication calls on the rank's main thread; t_compute: the rest of
# the pass (t_total - t_comm); cpu_s: CPU seconds of the whole rank process in the pass;
# rto_time_ms: growth of tcpi_total_rto_time over this rank's connections (TCP only);
# send_calls: HPA's communicator calls that sent its message blocks (one send_many per read
# block that filled any, not one per block).
STAT_FIELDS = ("pass", "candidates", "large", "t_total", "t_generate", "t_scan", "t_route", "t_send",
               "t_recv", "t_wait", "t_count", "t_sync", "bytes_sent", "messages_sent", "itemsets_sent", "subsets",
               "retransmissions", "timeouts", "t_comm", "t_compute", "cpu_s", "rto_time_ms", "send_calls")


class PassStats:
    """One rank's statistics, one row per pass. ``on_pass(row)`` is called as each pass ends
    (rank 0 uses it to show progress). With a ``TracedComm`` (``trace.py``) the pass's time is
    split into computation and communication on the rank's own clock, and each row also
    carries the growth of every peer connection's RTO time (``peer_rto_ms``: one entry per
    rank, for the attribution of RTO waits)."""

    def __init__(self, comm, on_pass=None):
        self.comm = comm
        self.rows: list[dict] = []
        self.on_pass = on_pass
        with runtime_region(comm):
            self._base = comm_counters(comm)

    def start(self, k: int) -> dict:
        mark = getattr(self.comm, "mark_pass", None)
        if mark is not None:
            mark(k)
        row: dict = {f: 0.0 for f in STAT_FIELDS}
        row["pass"] = k
        with runtime_region(self.comm):  # statistics, not mining: see runtime_region
            row["_t0"], row["_c0"], row["_comm0"] = time.perf_counter(), time.process_time(), getattr(self.comm, "comm_s", 0.0)
            s = comm_stats(self.comm)  # one read of every peer's TCP_INFO for both
            self._base, self._peer_base = counters_of(s), peer_rto_of(s)
        return row

    def end(self, row: dict) -> None:
        end = getattr(self.comm, "end_pass", None)
        if end is not None:
            end()
        row["t_total"] = time.perf_counter() - row.pop("_t0")
        row["cpu_s"] = time.process_time() - row.pop("_c0")
        row["t_comm"] = min(getattr(self.comm, "comm_s", 0.0) - row.pop("_comm0"), row["t_total"])
        row["t_compute"] = row["t_total"] - row["t_comm"]
        with runtime_region(self.comm):
            s = comm_stats(self.comm)
            now = counters_of(s)
            for f in ("bytes_sent", "messages_sent", "retransmissions", "timeouts", "rto_time_ms"):
                row[f] = now[f] - self._base[f]
            row["peer_rto_ms"] = peer_rto_wait_ms(self.comm.size, self._peer_base, peer_rto_of(s))
        self.rows.append(row)
        if self.on_pass is not None:
            self.on_pass(row)

    def as_array(self) -> np.ndarray:
        """One row per pass: STAT_FIELDS, then the per-peer RTO milliseconds (size columns)."""
        p = self.comm.size
        rows = [[r[f] for f in STAT_FIELDS] + list(r.get("peer_rto_ms", np.zeros(p))) for r in self.rows]
        return np.array(rows, dtype=np.float64).reshape(-1, len(STAT_FIELDS) + p)


def runtime_region(comm):
    """A region of a rank's computation that is not the mining itself (statistics, the
    implementation's own bookkeeping, its receive loop): a ``TracedComm`` logs this thread's
    CPU in it (outside communication calls) apart so that a replay scales it with
    ``runtime_scale``, not with the emulated CPU's ``scale`` (``trace.py``).
    Reading every peer connection's TCP_INFO at each pass boundary costs this machine about
    0.2 ms per peer, which grows with the ranks while the mining shrinks."""
    region = getattr(comm, "runtime", None)
    return region() if region is not None else contextlib.nullcontext()


def comm_stats(comm) -> dict:
    """``comm.stats()``, tried a few times: the TCP mesh's Rust engine can refuse a read of its
    counters while its drainer thread holds them ("Already mutably borrowed"); statistics must
    never break a run, so after that it is {}."""
    for attempt in range(5):
        try:
            return comm.stats() or {}
        except Exception:  # noqa: BLE001 - see above
            time.sleep(0.001 * (attempt + 1))
    return {}


def comm_counters(comm) -> dict[str, float]:
    """Bytes and messages sent, TCP retransmissions and timeouts (RTOs) from ``comm.stats()``.
    Backends that do not know a counter report 0 for it."""
    return counters_of(comm_stats(comm))


def counters_of(s: dict) -> dict[str, float]:
    """``comm_counters`` of a ``comm.stats()`` already read."""
    out = {"bytes_sent": float(s.get("bytes_sent", 0)), "messages_sent": float(s.get("messages_sent", s.get("msgs_sent", 0))),
           "retransmissions": 0.0, "timeouts": 0.0, "rto_time_ms": 0.0}
    for key_out, keys in (("retransmissions", ("total_retrans", "tcpi_total_retrans", "retransmissions")),
                          ("timeouts", ("total_rto", "tcpi_total_rto", "timeouts", "rto_timeouts")),
                          ("rto_time_ms", ("total_rto_time_ms", "tcpi_total_rto_time"))):
        out[key_out] = float(sum_keys(s, keys))
    return out


def peer_rto_state(comm) -> dict:
    """Each peer connection's cumulative RTO counters and current RTO
    (``clusterlab.net.tcp_info.rto_counters`` of ``comm.stats()``'s TCP_INFO; {} on backends
    without it)."""
    return peer_rto_of(comm_stats(comm))


def peer_rto_of(s: dict) -> dict:
    """``peer_rto_state`` of a ``comm.stats()`` already read."""
    from clusterlab.net.tcp_info import rto_counters

    peers = s.get("peers", {})
    return rto_counters({int(p): (d.get("tcp_info") or {}) for p, d in peers.items() if isinstance(d, dict)})


def peer_rto_wait_ms(size: int, before: dict, after: dict) -> np.ndarray:
    """Milliseconds each connection waited on retransmission timeouts between two
    ``peer_rto_state`` readings, one entry per peer rank: the growth of
    ``tcpi_total_rto_time`` (Linux 6.7+) plus one RTO per recovery for the wait before its
    first timeout (``clusterlab.net.tcp_info.rto_delta``)."""
    from clusterlab.net.tcp_info import rto_delta

    out = np.zeros(size, dtype=np.float64)
    for p, a in after.items():
        if 0 <= p < size:
            out[p] = rto_delta({p: before.get(p, {})}, {p: a})["rto_wait_s"] * 1000.0
    return out


def attribute_time(t_total: np.ndarray, t_comm: np.ndarray, peer_rto: np.ndarray) -> np.ndarray:
    """Split each rank's communication time of a pass into transfer and RTO waiting.

    ``peer_rto[s, r]``: milliseconds rank s's connection to rank r waited on retransmission
    timeouts during the pass (``peer_rto_wait_ms``: its data towards r stalled until the
    timer fired and through the recovery). A rank
    waits on an RTO when a connection it receives from, or sends on, stalls; the stalls of
    different connections overlap, so the longest one is counted, never more than the rank
    spent communicating. Returns ``t_rto`` per rank.

    >>> attribute_time(np.array([1.0, 1.0]), np.array([0.6, 0.1]), np.array([[0, 250.0], [0, 0]]))
    array([0.25, 0.1 ])
    """
    incoming = peer_rto.max(axis=0) if peer_rto.size else np.zeros_like(t_total)
    outgoing = peer_rto.max(axis=1) if peer_rto.size else np.zeros_like(t_total)
    return np.minimum(np.maximum(incoming, outgoing) / 1000.0, t_comm)


def sum_keys(obj: Any, keys: tuple[str, ...]) -> float:
    """Sum of the values under any of ``keys`` anywhere in a nested dict/list (TCP_INFO per peer)."""
    total = 0.0
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in keys and isinstance(v, (int, float)):
                total += v
            elif isinstance(v, (dict, list, tuple)):
                total += sum_keys(v, keys)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            total += sum_keys(v, keys)
    return total


def as_array(x, dtype) -> np.ndarray:
    """A received payload as a contiguous, aligned array of ``dtype`` (bytes arrive as bytes;
    a backend may hand out views at unaligned offsets of its receive buffer, which the
    kernels cannot take)."""
    a = np.ascontiguousarray(x, dtype=dtype) if isinstance(x, np.ndarray) else np.frombuffer(x, dtype=dtype)
    return a if a.flags.aligned else a.copy()


def allreduce_sum(comm, array: np.ndarray) -> np.ndarray:
    """Elementwise sum over ranks (int64), or the array itself on one rank."""
    a = np.ascontiguousarray(array, dtype=np.int64)
    return a if comm.size == 1 else as_array(comm.allreduce(a, "sum"), np.int64)


def count_dtype(bound: int):
    """The narrowest unsigned type that holds every count of a job with ``bound`` transactions
    (a support, and every partial sum of one over ranks, is at most that): 32 bits unless the
    job has 2^32 transactions or more. Counts travel in it, half the bytes of 64 bits."""
    return np.uint32 if bound < 1 << 32 else np.uint64


def allreduce_counts(comm, counts: np.ndarray, bound: int) -> np.ndarray:
    """Elementwise sum of every rank's support counts (uint64 out), sent as ``count_dtype(bound)``."""
    dt = count_dtype(bound)
    a = np.ascontiguousarray(counts, dtype=dt)
    if comm.size > 1:
        a = as_array(comm.allreduce(a, "sum"), dt)
    return a.astype(np.uint64)


# Pass 1's dense all-reduce holds one count per id up to the largest: at most this many (64 MB
# of 32-bit counts); sparser or larger id spaces are all-gathered as (id, count) lists.
DENSE_ITEMS_MAX = 1 << 24


def global_item_counts(comm, items: np.ndarray, n_tx: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Every distinct item of all ranks with its support: ``(ids ascending uint32, counts
    uint64)``. Two ways, whichever moves fewer bytes (every rank takes the same from one small
    all-reduce of the largest id and the most distinct items of a rank): each rank's distinct
    items and counts all-gathered (traffic and memory follow the number of distinct items,
    never the largest id, but every rank receives every other rank's list: n - 1 lists), or,
    when the ids are dense enough, one count per id up to the largest all-reduced (each rank
    sends and receives about twice the vector, whatever the rank count). ``n_tx``: the global
    number of transactions, which bounds every count (None: counts sent as 64 bits)."""
    ids, counts = _core.distinct_item_counts(np.ascontiguousarray(items, dtype=np.uint32))
    if comm.size == 1:
        return ids, counts
    bound = (1 << 63) if n_tx is None else n_tx
    width = np.dtype(count_dtype(bound)).itemsize
    top, most = (int(x) for x in as_array(comm.allreduce(
        np.array([int(ids[-1]) + 1 if ids.size else 0, ids.size], dtype=np.int64), "max"), np.int64))
    if top <= DENSE_ITEMS_MAX and top * width <= (comm.size - 1) * most * (4 + 8):
        dense = np.zeros(top, dtype=count_dtype(bound))
        dense[ids] = counts
        total = as_array(comm.allreduce(dense, "sum"), dense.dtype)
        ids = np.flatnonzero(total).astype(np.uint32)
        return ids, total[ids].astype(np.uint64)
    all_ids = [as_array(x, np.uint32) for x in comm.allgather(ids)]
    all_counts = [as_array(x, np.uint64) for x in comm.allgather(counts)]
    # The sum over ranks (P lists, whatever each rank's share): the reduction an
    # all-reduce does inside its call, runtime for a replay (runtime_region).
    with runtime_region(comm):
        ids, counts = _core.merge_item_counts(all_ids, all_counts)
    return ids, counts


@dataclasses.dataclass
class FirstPass:
    """What pass 1 leaves for the next passes: the frequent items (ids, in rank order), their
    counts, the global number of transactions and minimum count, and this rank's transactions
    reduced to frequent-item ranks (CSR)."""

    items: np.ndarray
    counts: np.ndarray
    n_transactions: int
    min_count: int
    offsets: np.ndarray
    ranks: np.ndarray


def first_pass(comm, baskets, min_support, stats: PassStats, order: str = "id", min_len: int = 2) -> FirstPass:
    """Pass 1 (as every algorithm here): global item counts, the frequent items ranked in id
    order (``order="id"``) or by descending support, then id (``"support"``: PFP's F-list),
    and the transactions reduced to ranks (those shorter than ``min_len`` dropped)."""
    row = stats.start(1)
    t = time.perf_counter()
    n_tx = int(allreduce_sum(comm, np.array([len(baskets)]))[0])
    ids, counts = global_item_counts(comm, baskets.items, n_tx)
    row["t_sync"] += time.perf_counter() - t
    min_count = min_count_of(min_support, n_tx)
    keep = counts >= min_count
    freq, fcounts = ids[keep], counts[keep]
    if order == "support":
        by = np.lexsort((freq, -fcounts.astype(np.int64)))
        freq, fcounts = freq[by], fcounts[by]
    t = time.perf_counter()
    # reduce_by_keys wants ascending keys: rank_of[i] is the rank of the i-th smallest id.
    key_order = np.argsort(freq, kind="stable")
    rank_of = np.empty(freq.size, dtype=np.uint32)
    rank_of[:] = key_order.astype(np.uint32)
    keys = np.ascontiguousarray(freq[key_order])
    row["subsets"] = float(baskets.items.size)
    take = getattr(baskets, "take", None)  # a rank's own read (reading.OwnedBaskets)
    if take is not None:
        # Reduced in place: no second copy of the rank's transactions (its peak memory).
        offsets, ranks = take()
        kept_tx, kept_items = _core.reduce_by_keys_inplace(offsets, ranks, keys, rank_of, min_len)
        try:  # shrink in place (realloc); refused if anything else refers to the arrays
            offsets.resize(kept_tx + 1)
            ranks.resize(kept_items)
        except ValueError:
            offsets, ranks = offsets[:kept_tx + 1].copy(), ranks[:kept_items].copy()
    else:
        offsets, ranks = _core.reduce_by_keys(baskets.offsets, baskets.items, keys, rank_of, min_len)
    row["t_scan"] += time.perf_counter() - t
    row["candidates"], row["large"] = int(ids.size), int(freq.size)
    stats.end(row)
    return FirstPass(freq.astype(np.uint32), fcounts.astype(np.uint64), n_tx, min_count, offsets, ranks)


# Pass 2 is counted on every rank when the pair triangle has at most this many entries
# (all-reduced as int64: 32 MB at most; seed000 at 0.7% has 325,000).
DENSE_PAIRS_MAX = 1 << 22


def dense_pairs_ok(n_items: int) -> bool:
    return 2 <= n_items and n_items * (n_items - 1) // 2 <= DENSE_PAIRS_MAX


def global_pairs(comm, offsets, ranks, n_items: int, min_count: int, row: dict, n_tx: int | None = None):
    """Pass 2 counted locally and all-reduced: every pair of frequent items is a candidate,
    each rank counts its transactions' pairs in a triangle (one memory access per pair), one
    all-reduce sums them (as 32-bit counts below 2^32 transactions, ``n_tx``; 64 bits when
    None). Returns the large pairs (flat, lexicographic) and their counts."""
    t = time.perf_counter()
    local = _core.count_pairs(offsets, ranks, n_items)
    row["t_count"] += time.perf_counter() - t
    t = time.perf_counter()
    total = allreduce_counts(comm, local, (1 << 63) if n_tx is None else n_tx)
    row["t_sync"] += time.perf_counter() - t
    t = time.perf_counter()
    flat, counts = _core.frequent_pairs(total, n_items, min_count)
    row["t_generate"] += time.perf_counter() - t
    row["candidates"], row["large"] = n_items * (n_items - 1) // 2, int(counts.size)
    lens = np.diff(offsets)
    row["subsets"] = float((lens * (lens - 1) // 2).sum())
    return flat, counts


def read_blocks(offsets: np.ndarray, read_block_bytes: int):
    """Transaction ranges ``(lo, hi)`` of about ``read_block_bytes`` item bytes each."""
    n = offsets.size - 1
    if n <= 0:
        return
    per = max(1, read_block_bytes // 4)
    cuts = np.searchsorted(offsets, np.arange(per, int(offsets[-1]) + per, per), side="left")
    lo = 0
    for c in cuts:
        hi = int(min(max(c, lo + 1), n))
        if hi > lo:
            yield lo, hi
            lo = hi
        if lo >= n:
            break
    if lo < n:
        yield lo, n


def allgather_large(comm, k: int, flat: np.ndarray, counts: np.ndarray):
    """Every rank's large k-itemsets, merged in lexicographic order."""
    if comm.size > 1:
        flats = comm.allgather(np.ascontiguousarray(flat, dtype=np.uint32))
        cnts = comm.allgather(np.ascontiguousarray(counts, dtype=np.uint64))
        flat = np.concatenate([as_array(f, np.uint32) for f in flats])
        counts = np.concatenate([as_array(c, np.uint64) for c in cnts])
    return canonical_level(k, flat, counts)


def canonical_level(k: int, flat: np.ndarray, counts: np.ndarray):
    """k-itemsets (flat) and counts sorted lexicographically (no communication)."""
    n = counts.size
    if n == 0:
        return np.asarray(flat, dtype=np.uint32)[:0], np.asarray(counts, dtype=np.uint64)
    offsets = np.arange(0, (n + 1) * k, k, dtype=np.int64)
    _, flat, counts = _core.canonical_itemsets(offsets, np.ascontiguousarray(flat, dtype=np.uint32),
                                               np.ascontiguousarray(counts, dtype=np.uint64))
    return flat, counts


def shrink_transactions(offsets, ranks, large_flat: np.ndarray, n_items: int, min_len: int):
    """Keep only the items of the large itemsets (what pass ``min_len`` can still use)."""
    alive = np.full(n_items, NONE, dtype=np.uint32)
    u = np.unique(large_flat)
    alive[u] = u
    return _core.reduce_transactions(offsets, ranks, alive, min_len)


def assemble(levels, item_of_rank: np.ndarray, n_tx: int):
    """Levels of (flat ranks, counts) -> canonical (offsets, item ids, counts, n)."""
    offs, items, counts = [np.zeros(1, np.int64)], [], []
    base = 0
    for k, (flat, cnt) in enumerate(levels, start=1):
        n = cnt.size
        if n == 0:
            continue
        offs.append(base + np.arange(k, (n + 1) * k, k, dtype=np.int64)[:n])
        base += n * k
        items.append(item_of_rank[flat])
        counts.append(cnt)
    return (np.concatenate(offs), np.concatenate(items) if items else np.zeros(0, np.uint32),
            np.concatenate(counts).astype(np.uint64) if counts else np.zeros(0, np.uint64), n_tx)
