"""Parallel mining straight into a Parquet file within a memory bound per rank
(``run_parallel(..., output=PATH)`` with ``ParallelConfig.memory``; ``clusterlab mine --nodes N
--memory SIZE -o X.parquet``).

Rank 0 writes the itemsets as they become final, in canonical order, through
``mining.stream.CanonicalWriter``, so the file is byte-identical to the in-memory run's table
written with ``-o``, whatever the node count:

- HPA, HPA-ELD and Count Distribution (``Levels``): each pass's large itemsets, which every
  rank holds after the pass's all-gather or all-reduce, go to the file as the pass ends, and
  a rank keeps only the last pass's (the next candidates are made from it), not every level.
- PFP (``merge_to_root``): each rank sorts the itemsets of its own groups, spills them to its
  temporary directory (``TMPDIR``), one file per length, and rank 0 merges the ranks' sorted
  runs, pulling blocks of them over the Communicator (its own from disk); at most one block
  per rank waits in memory.

``ParallelConfig.memory`` bounds each rank's process (ranks that are threads of one process
share it: that process gets ``nodes`` times the bound). Every rank checks its peak at every
pass end and the ranks agree, so a job over the bound ends with one error naming the rank;
rank 0 also checks at every block it merges. What must fit a rank: its share of the input,
one pass's large itemsets and its candidates (HPA, CD), or the itemsets of its own group once
(PFP mines a group in memory before it spills them), and one row group being written.

>>> import tempfile, os, pyarrow.parquet as pq
>>> from clusterlab.comm.inproc import run_threads
>>> from clusterlab.data import Baskets
>>> from clusterlab.mining.parallel.config import ParallelConfig
>>> from clusterlab.mining.parallel.passes import PassStats
>>> from clusterlab.mining.parallel import pfp
>>> b = Baskets.from_lists([[1, 2, 3], [1, 2], [2, 3], [1, 2, 3]])
>>> path = os.path.join(tempfile.mkdtemp(), "sets.parquet")
>>> def job(comm):
...     out = RankOutput(comm, path, None, None, "pfp", None)
...     pfp.mine(comm, b.slice(comm.rank * 2, comm.rank * 2 + 2), 2, ParallelConfig(), PassStats(comm), out=out)
...     return out.close()
>>> run_threads(job, 2)[0]["itemsets"]
7
>>> pq.read_table(path)["items"].to_pylist()
[[1], [2], [3], [1, 2], [1, 3], [2, 3], [1, 2, 3]]
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
import time

import numpy as np

from clusterlab.errors import ClusterlabError, ConfigError
from clusterlab.mining.parallel.passes import as_array, assemble

#: Requests to a rank during the merge travel with this tag; its blocks come back on MERGE_TAG + 1.
MERGE_TAG = 3100
#: Bytes of one block a rank hands rank 0 during the merge (and rank 0 reads of its own).
MERGE_BLOCK_BYTES = 4 << 20
#: Requests: k >= 1 (a block of length-k itemsets, at most ``rows`` of them), a keep-alive, the end, an abort.
_KEEPALIVE, _DONE, _ABORT = 0, -1, -2


def _agreed(e: ClusterlabError) -> ClusterlabError:
    e.agreed_by_ranks = True  # every rank raises it: the driver reports it once (driver.rank_job)
    return e


class RankOutput:
    """One rank's side of a run streamed to ``path`` (only rank 0 writes it).

    ``memory``: bytes each rank's process may take (None: unbounded); ``labels``, ``algorithm``,
    ``max_len``: what the itemset table's metadata says (as ``driver.itemsets_table``).
    ``timeout``: seconds any wait of the merge may take. ``shares_process``: the ranks are
    threads of one process, which then may take ``size`` times ``memory``."""

    def __init__(self, comm, path, memory: int | None, labels, algorithm: str, max_len: int | None,
                 timeout: float = 120.0, shares_process: bool = False):
        self.comm, self.path = comm, os.fspath(path)
        self.per_rank = None if not memory else int(memory)
        self.limit = None if not memory else int(memory) * (comm.size if shares_process else 1)
        self.shares_process = shares_process
        self.labels, self.algorithm, self.max_len, self.timeout = labels, algorithm, max_len, timeout
        self.writer = None
        self.peak = 0
        self.spilled_bytes = 0
        self._error: ClusterlabError | None = None  # rank 0's failure to write, told at the next check

    # ---- rank 0's file ----------------------------------------------------------------
    def begin(self, n_transactions: int, min_count: int) -> None:
        """Pass 1 is done: rank 0 opens the file (its metadata needs these)."""
        if self.comm.rank == 0 and self.writer is None:
            from clusterlab.mining.stream import CanonicalWriter

            self.writer = CanonicalWriter(self.path, n_transactions, self.labels, min_count=int(min_count),
                                          target="all", min_len=1, max_len=self.max_len, algorithm=self.algorithm)

    def write(self, offsets: np.ndarray, items: np.ndarray, counts: np.ndarray) -> None:
        """Rank 0: append itemsets (canonical, item ids) to the file; a failure is kept for
        the next ``check`` (so every rank stops together) unless ``now``."""
        if self.writer is None or self._error is not None:
            return
        import pyarrow as pa

        try:
            self.writer.write(offsets, items, counts)
        except (OSError, pa.ArrowException) as e:
            detail = e.strerror if isinstance(e, OSError) and e.strerror else str(e).splitlines()[0]
            self._error = ConfigError(f"cannot write {self.path}: {detail}")

    def level(self, k: int, items: np.ndarray, counts: np.ndarray) -> None:
        """Every rank, as a pass ends: the pass's large k-itemsets (flat item ids, canonical);
        rank 0 writes them. Then the ranks check their memory together."""
        n = counts.size
        if n:
            self.write(np.arange(0, (n + 1) * k, k, dtype=np.int64), items, counts)
        self.check(f"pass {k}")

    def close(self) -> dict | None:
        """Rank 0: finish the file; a summary (``itemsets``, ``itemsets_by_length``,
        ``row_groups``, ``spilled_bytes``, ``peak_rss_bytes``, ``memory_bytes``). Others: None."""
        if self.writer is None:
            return None
        if self._error is not None:
            raise _agreed(self._error)
        import pyarrow as pa

        writer, self.writer = self.writer, None
        try:
            s = writer.close()  # (a failure removes the unfinished file)
        except (OSError, pa.ArrowException) as e:
            detail = e.strerror if isinstance(e, OSError) and e.strerror else str(e).splitlines()[0]
            raise _agreed(ConfigError(f"cannot write {self.path}: {detail}")) from None
        s.update(spilled_bytes=int(self.spilled_bytes), peak_rss_bytes=int(max(self.peak, self.rss())),
                 memory_bytes=self.limit, output=self.path)
        return s

    def abort(self, exc: BaseException | None = None) -> None:
        if self.writer is not None:
            self.writer.abort(exc)
            self.writer = None

    # ---- memory ---------------------------------------------------------------------
    def rss(self) -> int:
        """This rank's memory: its process's peak, or (threads of one process) its current RSS."""
        from clusterlab.mining.stream import current_rss

        if self.shares_process:
            return current_rss()
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)

    def _over(self, rank: int, rss: int, where: str) -> ConfigError:
        shared = (f" ({self.limit / 2**20:,.0f} MiB for the {self.comm.size} ranks of this process)"
                  if self.shares_process else "")
        return ConfigError(f"memory: rank {rank} reached {rss / 2**20:,.0f} MiB at {where}, over the --memory of "
                           f"{self.per_rank / 2**20:,.0f} MiB a rank may take{shared} (its share of the input and one "
                           "pass's itemsets must fit): raise it or min_support")

    def check(self, where: str) -> None:
        """Every rank at once: raise (on every rank) if any rank passed the bound or rank 0
        could not write."""
        rss = self.rss()
        self.peak = max(self.peak, rss)
        mine = np.zeros(self.comm.size + 1, dtype=np.int64)
        mine[self.comm.rank] = rss
        mine[-1] = int(self._error is not None)
        every = as_array(self.comm.allreduce(mine, "sum"), np.int64) if self.comm.size > 1 else mine
        if every[-1]:
            raise _agreed(self._error if self._error is not None else
                          ConfigError(f"rank 0 could not write {self.path}"))
        if self.limit is not None:
            over = np.flatnonzero(every[:-1] > self.limit)
            if over.size:
                r = int(over[0])
                raise _agreed(self._over(r, int(every[r]), where))

    def check_here(self, where: str) -> None:
        """This rank alone (rank 0 while it merges): raise if it passed the bound or could not write."""
        if self._error is not None:
            raise _agreed(self._error)
        rss = self.rss()
        self.peak = max(self.peak, rss)
        if self.limit is not None and rss > self.limit:
            raise _agreed(self._over(self.comm.rank, rss, where))


class Levels:
    """The large itemsets of each pass, ``(flat ranks, counts)``, as HPA and CD keep them.
    Without ``out`` every level is kept and ``result()`` assembles them; with ``out`` each
    level goes to it as it is appended (item ids: ``item_of_rank``) and only the last one is
    kept (indexing an earlier one raises)."""

    def __init__(self, item_of_rank: np.ndarray, counts: np.ndarray, n_transactions: int, min_count: int,
                 out: RankOutput | None = None):
        self.item_of_rank, self.n_transactions, self.out = item_of_rank, n_transactions, out
        self._levels: list = []
        if out is not None:
            out.begin(n_transactions, min_count)
        self.append((np.arange(item_of_rank.size, dtype=np.uint32), counts))

    def append(self, level) -> None:
        self._levels.append(level)
        if self.out is not None:
            flat, counts = level
            self.out.level(len(self._levels), self.item_of_rank[flat], counts)
            if len(self._levels) >= 2:
                self._levels[-2] = None

    def __len__(self) -> int:
        return len(self._levels)

    def __getitem__(self, i):
        level = self._levels[i]
        if level is None:
            raise RuntimeError(f"level {i % len(self._levels) + 1} was written out and is no longer held")
        return level

    def result(self):
        """``(offsets, items, counts, n_transactions)`` of every level (empty when written out)."""
        if self.out is not None:
            return np.zeros(1, np.int64), np.zeros(0, np.uint32), np.zeros(0, np.uint64), self.n_transactions
        return assemble(self._levels, self.item_of_rank, self.n_transactions)


class SortedRuns:
    """A rank's itemsets (canonical CSR of item ids) spilled to ``directory``, one items file
    and one counts file per length, read back in blocks in order."""

    def __init__(self, directory: str, offsets: np.ndarray, items: np.ndarray, counts: np.ndarray):
        self.dir = directory
        self.n: dict[int, int] = {}
        self.pos: dict[int, int] = {}
        self.bytes = 0
        lens = np.diff(offsets)
        if lens.size and (np.diff(lens) < 0).any():
            raise ValueError("itemsets must be in canonical order (by length)")
        for k in np.unique(lens):
            k = int(k)
            a, b = int(np.searchsorted(lens, k, "left")), int(np.searchsorted(lens, k, "right"))
            it = np.ascontiguousarray(items[int(offsets[a]):int(offsets[b])], dtype=np.uint32)
            c = np.ascontiguousarray(counts[a:b], dtype=np.uint64)
            it.tofile(self._path(k, "items"))
            c.tofile(self._path(k, "counts"))
            self.n[k], self.pos[k] = b - a, 0
            self.bytes += it.nbytes + c.nbytes

    @property
    def max_len(self) -> int:
        return max(self.n, default=0)

    def _path(self, k: int, what: str) -> str:
        return os.path.join(self.dir, f"{k}.{what}")

    def read(self, k: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """The next ``rows`` (at most) length-k itemsets: ``(items (n, k) uint32, counts)``."""
        at = self.pos.get(k, 0)
        n = max(0, min(int(rows), self.n.get(k, 0) - at))
        if n == 0:
            return np.zeros((0, max(k, 1)), np.uint32), np.zeros(0, np.uint64)
        items = np.fromfile(self._path(k, "items"), dtype=np.uint32, count=n * k, offset=at * k * 4)
        counts = np.fromfile(self._path(k, "counts"), dtype=np.uint64, count=n, offset=at * 8)
        self.pos[k] = at + n
        return items.reshape(n, k), counts


def _block_rows(k: int) -> int:
    return max(256, MERGE_BLOCK_BYTES // (8 + 4 * k))


def merge_to_root(comm, out: RankOutput, arrays: list) -> None:
    """Every rank: its itemsets ``arrays = [offsets, items, counts]`` (canonical CSR of item
    ids; no rank's overlap another's) go to disk (the list is emptied, so they are freed),
    then rank 0 writes all ranks' in canonical order to ``out`` (see the module)."""
    offsets, items, counts = arrays
    arrays.clear()
    with tempfile.TemporaryDirectory(prefix="clusterlab-spill-") as d:
        runs = SortedRuns(d, offsets, items, counts)
        del offsets, items, counts
        K = runs.max_len
        if comm.size > 1:
            K = int(as_array(comm.allreduce(np.array([K], dtype=np.int64), "max"), np.int64)[0])
            spilled = int(as_array(comm.allreduce(np.array([runs.bytes], dtype=np.int64), "sum"), np.int64)[0])
        else:
            spilled = runs.bytes
        out.spilled_bytes += spilled  # (all ranks')
        out.check("the spill of every rank's itemsets")
        if comm.rank == 0:
            _merge_root(comm, out, runs, K)
        else:
            _serve(comm, runs, out.timeout)


def _serve(comm, runs: SortedRuns, timeout: float) -> None:
    """A rank other than 0: answer rank 0's requests for blocks until it says the end."""
    while True:
        req = as_array(comm.recv(0, MERGE_TAG, timeout=timeout), np.int64)
        k = int(req[0])
        if k == _KEEPALIVE:
            continue
        if k == _DONE:
            return
        if k == _ABORT:
            raise _agreed(ConfigError("rank 0 stopped merging the ranks' itemsets"))
        items, counts = runs.read(k, int(req[1]))
        comm.send(0, np.concatenate([counts.view(np.uint8), items.ravel().view(np.uint8)]), MERGE_TAG + 1)


def _merge_root(comm, out: RankOutput, runs: SortedRuns, K: int) -> None:
    """Rank 0: per length, merge the ranks' sorted runs (its own from ``runs``) into ``out``.

    Each rank's current block is sorted; every step sorts the blocks held together, writes
    every row up to the smallest of the blocks' last rows (no block can hold a smaller one
    after it) and refills the blocks that were used up. Rows are unique across ranks."""
    P = comm.size
    last = [time.monotonic()] * P

    def send(r: int, k: int, rows: int = 0) -> None:
        comm.send(r, np.array([k, rows], dtype=np.int64), MERGE_TAG)
        last[r] = time.monotonic()

    def fetch(r: int, k: int, rows: int):
        if r == 0:
            return runs.read(k, rows)
        send(r, k, rows)
        data = as_array(comm.recv(r, MERGE_TAG + 1, timeout=out.timeout), np.uint8)
        n = data.size // (8 + 4 * k)
        if data.size != n * (8 + 4 * k):
            from clusterlab.comm.errors import ProtocolError

            raise ProtocolError(f"rank {r} sent a merge block of {data.size} bytes for length {k}")
        counts = data[:8 * n].view(np.uint64)
        return data[8 * n:].view(np.uint32).reshape(n, k), counts

    ok = False
    try:
        for k in range(1, K + 1):
            rows = _block_rows(k)
            bufs: list = [None] * P
            done = [False] * P
            while True:
                for r in range(P):
                    if not done[r] and (bufs[r] is None or bufs[r][1].size == 0):
                        got = fetch(r, k, rows)
                        bufs[r] = got if got[1].size else None
                        done[r] = got[1].size == 0
                active = [r for r in range(P) if bufs[r] is not None and bufs[r][1].size]
                if not active:
                    break
                sizes = np.array([bufs[r][1].size for r in active])
                cat = np.concatenate([bufs[r][0] for r in active])
                cnt = np.concatenate([bufs[r][1] for r in active])
                order = np.lexsort(tuple(cat[:, j] for j in range(k - 1, -1, -1)))
                at = np.empty(order.size, dtype=np.int64)
                at[order] = np.arange(order.size)
                cut = int(at[np.cumsum(sizes) - 1].min()) + 1  # through the smallest last row
                take = order[:cut]
                out.write(np.arange(0, (cut + 1) * k, k, dtype=np.int64), cat[take].ravel(), cnt[take])
                used = np.bincount(np.repeat(np.arange(len(active)), sizes)[take], minlength=len(active))
                for j, r in enumerate(active):
                    bufs[r] = (bufs[r][0][used[j]:], bufs[r][1][used[j]:])
                del cat, cnt, order, at, take
                out.check_here(f"the merge of length {k}")
                now = time.monotonic()
                for r in range(1, P):  # ranks not asked for a while: still here, keep waiting
                    if now - last[r] > out.timeout / 4:
                        send(r, _KEEPALIVE)
        ok = True
    finally:
        for r in range(1, P):
            try:
                send(r, _DONE if ok else _ABORT)
            except Exception:  # noqa: BLE001 - the first error is the one to report
                if ok:
                    raise
