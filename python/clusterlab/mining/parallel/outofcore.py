"""Parallel mining straight into a Parquet file within a memory bound per rank
(``run_parallel(..., output=PATH)`` with ``ParallelConfig.memory``; ``clusterlab mine --nodes N
--memory SIZE -o X.parquet``).

Rank 0 writes the itemsets as they become final, in canonical order, through
``mining.stream.CanonicalWriter``, so the file is byte-identical to the in-memory run's table
written with ``-o``, whatever the node count:

- HPA, HPA-ELD and Count Distribution (``Levels``): each pass's large itemsets, which every
  rank holds after the pass's all-gather or all-reduce, go to the file as the pass ends, and
  a rank keeps only the last pass's (the next candidates are made from it), not every level.
- PFP (``SortedRuns``, ``merge_runs``): each rank's kernel (the default "vertical" one) hands
  its itemsets over in chunks as it finds them; each chunk is sorted and spilled to the rank's
  temporary directory (``TMPDIR``) as a run, one file per length. Then rank 0 merges, length
  by length, its own runs and the other ranks' (each rank merges its own runs and hands rank 0
  blocks of them over the Communicator), holding a few MB of blocks.

``ParallelConfig.memory`` bounds each rank's process (ranks that are threads of one process
share it: that process gets ``nodes`` times the bound). Every rank checks its peak at every
pass end and the ranks agree, so a job over the bound ends with one error naming the rank;
rank 0 also checks at every block it merges, a PFP rank at every chunk. What must fit a rank:
its share of the input, one pass's large itemsets and its candidates (HPA, CD), or its group's
transactions and one chunk (PFP; the "fptree" and "fpgrowth" kernels hand over a group's
itemsets at once), and one row group being written.

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
#: The most itemsets a PFP rank's kernel hands over at a time (``RankOutput.chunk``).
CHUNK_MAX = 1 << 20
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
        self.runs = 0  # sorted runs the ranks spilled (PFP)
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
        ``row_groups``, ``spilled_bytes`` and ``runs`` (all ranks'), ``peak_rss_bytes``,
        ``memory_bytes``). Others: None."""
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
        s.update(spilled_bytes=int(self.spilled_bytes), runs=int(self.runs), peak_rss_bytes=int(max(self.peak, self.rss())),
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
                           "pass's working set must fit: itemsets, candidates, tid-lists): raise it or min_support")

    @property
    def chunk(self) -> int:
        """Itemsets a PFP rank's kernel hands over at a time (one sorted run each): a small
        part of the bound (~2 KB of it per itemset), 65,536 to 1 Mi."""
        return 1 << 19 if self.per_rank is None else int(min(CHUNK_MAX, max(1 << 16, self.per_rank // 2048)))

    def watch(self) -> None:
        """This rank alone, while its kernel runs: raise ``OverBound`` (stopping the kernel)
        past the bound; the ranks' next ``check`` then stops the job naming this rank."""
        rss = self.rss()
        self.peak = max(self.peak, rss)
        if self.limit is not None and rss > self.limit:
            raise OverBound(rss)

    def check(self, where: str) -> None:
        """Every rank at once: raise (on every rank) if any rank passed the bound or rank 0
        could not write."""
        rss = max(self.rss(), self.peak)
        self.peak = rss
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


class OverBound(Exception):
    """Raised by a PFP rank's chunk hand-over past its bound, to stop its kernel; the ranks'
    next common check then stops the job with the error naming it."""


class SortedRuns:
    """A rank's itemsets spilled to a temporary directory as sorted runs: every ``add`` (a
    chunk of itemsets in canonical order, item ids) is one run, one items file and one counts
    file per length; ``merged(k)`` reads the length-k itemsets of all runs back in order."""

    def __init__(self):
        self._dir = tempfile.TemporaryDirectory(prefix="clusterlab-spill-")
        self.dir = self._dir.name
        self.runs: list[dict[int, int]] = []  # per run: length -> rows
        self.bytes = 0

    def add(self, offsets: np.ndarray, items: np.ndarray, counts: np.ndarray) -> None:
        lens = np.diff(offsets)
        if lens.size == 0:
            return
        if (np.diff(lens) < 0).any():
            raise ValueError("itemsets must be in canonical order (by length)")
        run: dict[int, int] = {}
        for k in np.unique(lens):
            k = int(k)
            a, b = int(np.searchsorted(lens, k, "left")), int(np.searchsorted(lens, k, "right"))
            it = np.ascontiguousarray(items[int(offsets[a]):int(offsets[b])], dtype=np.uint32)
            c = np.ascontiguousarray(counts[a:b], dtype=np.uint64)
            it.tofile(self._path(len(self.runs), k, "items"))
            c.tofile(self._path(len(self.runs), k, "counts"))
            run[k] = b - a
            self.bytes += it.nbytes + c.nbytes
        self.runs.append(run)

    @property
    def max_len(self) -> int:
        return max((k for run in self.runs for k in run), default=0)

    def _path(self, run: int, k: int, what: str) -> str:
        return os.path.join(self.dir, f"{run}.{k}.{what}")

    def _reader(self, run: int, k: int, rows: int):
        pos = [0]
        n = self.runs[run].get(k, 0)

        def read():
            m = max(0, min(rows, n - pos[0]))
            if m == 0:
                return np.zeros((0, k), np.uint32), np.zeros(0, np.uint64)
            items = np.fromfile(self._path(run, k, "items"), dtype=np.uint32, count=m * k, offset=pos[0] * k * 4)
            counts = np.fromfile(self._path(run, k, "counts"), dtype=np.uint64, count=m, offset=pos[0] * 8)
            pos[0] += m
            return items.reshape(m, k), counts

        return read

    def merged(self, k: int) -> Merger:
        """The length-k itemsets of every run, in order (``MERGE_BLOCK_BYTES`` of them held in all)."""
        have = [r for r, run in enumerate(self.runs) if k in run]
        rows = max(256, MERGE_BLOCK_BYTES // max(len(have), 1) // (8 + 4 * k))
        return Merger([self._reader(r, k, rows) for r in have], k)

    def cleanup(self) -> None:
        self._dir.cleanup()


def _count_le(rows: np.ndarray, bound: np.ndarray) -> int:
    """How many rows of a sorted (n, k) array are lexicographically <= ``bound``."""
    diff = rows != bound
    first = diff.argmax(axis=1)
    le = ~diff.any(axis=1) | (rows[np.arange(rows.shape[0]), first] < bound[first])
    return int(le.sum())


def _lex_order(rows: np.ndarray) -> np.ndarray:
    return np.lexsort(tuple(rows[:, j] for j in range(rows.shape[1] - 1, -1, -1)))


class Merger:
    """Length-k itemsets of several sorted sources merged in order. A source is a function
    returning its next block ``(items (n, k) uint32, counts)``, empty at its end; rows are
    unique across sources. ``next()`` gives the next rows: every held row up to the
    smallest of the held blocks' last rows (no source can hold a smaller one after its
    block), sorted; the blocks used up are refilled. Empty at the end."""

    def __init__(self, sources: list, k: int):
        self.sources, self.k = sources, k
        self.buf: list = [None] * len(sources)
        self.done = [False] * len(sources)

    def next(self) -> tuple[np.ndarray, np.ndarray]:
        for i, src in enumerate(self.sources):
            if not self.done[i] and self.buf[i] is None:
                items, counts = src()
                if counts.size:
                    self.buf[i] = (items, counts)
                else:
                    self.done[i] = True
        active = [i for i, b in enumerate(self.buf) if b is not None]
        if not active:
            return np.zeros((0, self.k), np.uint32), np.zeros(0, np.uint64)
        if len(active) == 1:  # every other source is done
            out, self.buf[active[0]] = self.buf[active[0]], None
            return out
        lasts = np.stack([self.buf[i][0][-1] for i in active])
        bound = lasts[_lex_order(lasts)[0]]
        parts, counts = [], []
        for i in active:
            items, c = self.buf[i]
            n = _count_le(items, bound)
            parts.append(items[:n])
            counts.append(c[:n])
            self.buf[i] = (items[n:], c[n:]) if n < c.size else None
        items, c = np.concatenate(parts), np.concatenate(counts)
        order = _lex_order(items)
        return items[order], c[order]


def merge_runs(comm, out: RankOutput, runs: SortedRuns) -> None:
    """Every rank: its spilled runs (no rank's itemsets overlap another's); rank 0 writes all
    ranks' in canonical order to ``out``, pulling the others' over the Communicator (see
    the module). The runs are removed at the end."""
    try:
        K = runs.max_len
        if comm.size > 1:
            K = int(as_array(comm.allreduce(np.array([K], dtype=np.int64), "max"), np.int64)[0])
            spilled, n_runs = (int(x) for x in as_array(comm.allreduce(np.array([runs.bytes, len(runs.runs)],
                                                                                  dtype=np.int64), "sum"), np.int64))
        else:
            spilled, n_runs = runs.bytes, len(runs.runs)
        out.spilled_bytes += spilled  # (all ranks')
        out.runs += n_runs
        out.check("the spill of every rank's itemsets")
        if comm.rank == 0:
            _merge_root(comm, out, runs, K)
        else:
            _serve(comm, runs, out.timeout)
    finally:
        runs.cleanup()


def merge_to_root(comm, out: RankOutput, arrays: list) -> None:
    """``merge_runs`` of one run: ``arrays = [offsets, items, counts]`` (canonical CSR of item
    ids), spilled first (the list is emptied, so they are freed)."""
    runs = SortedRuns()
    try:
        runs.add(*arrays)
    except BaseException:
        runs.cleanup()
        raise
    arrays.clear()
    merge_runs(comm, out, runs)


def _serve(comm, runs: SortedRuns, timeout: float) -> None:
    """A rank other than 0: answer rank 0's requests for blocks until it says the end."""
    mergers: dict[int, Merger] = {}
    while True:
        req = as_array(comm.recv(0, MERGE_TAG, timeout=timeout), np.int64)
        k = int(req[0])
        if k == _KEEPALIVE:
            continue
        if k == _DONE:
            return
        if k == _ABORT:
            raise _agreed(ConfigError("rank 0 stopped merging the ranks' itemsets"))
        if k not in mergers:
            mergers.clear()
            mergers[k] = runs.merged(k)
        items, counts = mergers[k].next()
        comm.send(0, np.concatenate([counts.view(np.uint8), items.ravel().view(np.uint8)]), MERGE_TAG + 1)


def _merge_root(comm, out: RankOutput, runs: SortedRuns, K: int) -> None:
    """Rank 0: per length, merge its own runs and the other ranks' merged blocks into ``out``."""
    P = comm.size
    last = [time.monotonic()] * P

    def send(r: int, k: int) -> None:
        comm.send(r, np.array([k, 0], dtype=np.int64), MERGE_TAG)
        last[r] = time.monotonic()

    def remote(r: int, k: int):
        def fetch():
            send(r, k)
            data = as_array(comm.recv(r, MERGE_TAG + 1, timeout=out.timeout), np.uint8)
            n = data.size // (8 + 4 * k)
            if data.size != n * (8 + 4 * k):
                from clusterlab.comm.errors import ProtocolError

                raise ProtocolError(f"rank {r} sent a merge block of {data.size} bytes for length {k}")
            return data[8 * n:].view(np.uint32).reshape(n, k), data[:8 * n].view(np.uint64)

        return fetch

    ok = False
    try:
        for k in range(1, K + 1):
            merger = Merger([runs.merged(k).next] + [remote(r, k) for r in range(1, P)], k)
            while True:
                items, counts = merger.next()
                if counts.size == 0:
                    break
                n = counts.size
                out.write(np.arange(0, (n + 1) * k, k, dtype=np.int64), items.ravel(), counts)
                del items, counts
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
