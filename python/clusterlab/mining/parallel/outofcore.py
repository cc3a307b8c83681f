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
rank 0 also checks at every block it merges, a PFP rank at every chunk. Before a level-wise
pass makes its candidates, the ranks agree on its estimated working set (``pass_need``,
``RankOutput.admit``) and refuse a pass that cannot fit, naming what would. What must fit a rank:
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
import time

import numpy as np

from clusterlab.errors import ClusterlabError, ConfigError
from clusterlab.mining.parallel.passes import as_array, assemble
from clusterlab.mining.stream import Merger, SortedRuns  # (sorted runs on disk: the sequential path's too)

#: Requests to a rank during the merge travel with this tag; its blocks come back on MERGE_TAG + 1.
MERGE_TAG = 3100
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

            self.writer = CanonicalWriter(self.path, n_transactions, self.labels, before_flush=self._before_flush,
                                          min_count=int(min_count), target="all", min_len=1, max_len=self.max_len,
                                          algorithm=self.algorithm)

    def _before_flush(self, need: int) -> None:
        """Rank 0: refuse a row group that would take it past the bound, before building it."""
        from clusterlab.mining.stream import ROW_GROUP, current_rss

        now = current_rss()
        if self.limit is not None and now + need > self.limit:
            fit = -(-(now + need) // (64 << 20)) * 64
            raise ConfigError(f"memory: rank 0 writing a row group ({ROW_GROUP:,} itemsets, as the in-memory run's "
                              f"file has them) would take about {need / 2**20:,.0f} MiB on top of the "
                              f"{now / 2**20:,.0f} MiB it holds, over the --memory of {self.per_rank / 2**20:,.0f} "
                              f"MiB a rank may take: give --memory {fit}MiB or more")

    def write(self, offsets: np.ndarray, items: np.ndarray, counts: np.ndarray) -> None:
        """Rank 0: append itemsets (canonical, item ids) to the file; a failure is kept for
        the next ``check`` (so every rank stops together) unless ``now``."""
        if self.writer is None or self._error is not None:
            return
        import pyarrow as pa

        try:
            self.writer.write(offsets, items, counts)
        except ConfigError as e:  # a row group past the bound (_before_flush)
            self._error = e
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
        except ConfigError as e:  # the last row group past the bound (_before_flush)
            raise _agreed(e) from None
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
        from clusterlab.mining.stream import current_rss, peak_rss

        return current_rss() if self.shares_process else peak_rss()

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

    def admit(self, k: int, need: int, what: str) -> None:
        """Every rank at once, before pass ``k`` builds its working set: ``need`` is this
        rank's estimate of it in bytes (``pass_need``; ``what`` says what it holds). If some
        rank's memory now plus its need passes the bound, raise (on every rank) one error
        naming ``--memory`` and the size that would fit, instead of running into the bound
        mid-pass or the machine's out-of-memory killer."""
        if self.limit is None:
            return
        from clusterlab.mining.stream import current_rss

        P, me = self.comm.size, self.comm.rank
        mine = np.zeros(2 * P, dtype=np.int64)
        mine[me], mine[P + me] = current_rss(), int(need)
        every = as_array(self.comm.allreduce(mine, "sum"), np.int64) if P > 1 else mine
        nows, needs = every[:P], every[P:]
        if self.shares_process:  # one process: its memory now and every rank's need
            total = int(nows.max() + needs.sum())
            if total <= self.limit:
                return
            r = int(np.argmax(needs))
            fit = -(-total // P)
        else:
            over = np.flatnonzero(nows + needs > self.limit)
            if not over.size:
                return
            r = int(over[np.argmax((nows + needs)[over])])
            fit = int(nows[r] + needs[r])
        fit_mib = -(-fit // (64 << 20)) * 64  # rounded up to 64 MiB
        raise _agreed(ConfigError(
            f"memory: pass {k} would need about {needs[r] / 2**20:,.0f} MiB on rank {r} ({what}) on top of the "
            f"{nows[r] / 2**20:,.0f} MiB it holds, over the --memory of {self.per_rank / 2**20:,.0f} MiB a rank may "
            f"take: give --memory {fit_mib}MiB or more (per rank), more --nodes, or a higher min_support"))

    def check_here(self, where: str) -> None:
        """This rank alone (rank 0 while it merges): raise if it passed the bound or could not write."""
        if self._error is not None:
            raise _agreed(self._error)
        rss = self.rss()
        self.peak = max(self.peak, rss)
        if self.limit is not None and rss > self.limit:
            raise _agreed(self._over(self.comm.rank, rss, where))


def join_bound(prev: np.ndarray, k: int) -> np.ndarray:
    """Per large (k-1)-itemset of ``prev`` (flat, canonical), at most how many k-candidates
    the Apriori join makes with it as their prefix generator: the itemsets after it that share
    its first k - 2 items (before the prune).

    >>> join_bound(np.array([0, 1, 0, 2, 0, 3, 1, 2], dtype=np.uint32), 3).tolist()
    [2, 1, 0, 0]
    """
    rows = prev.reshape(-1, k - 1)
    n = rows.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    new = np.ones(n, dtype=bool)
    if k > 2:
        new[1:] = (rows[1:, :k - 2] != rows[:-1, :k - 2]).any(axis=1)
    else:
        new[1:] = False
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], n)
    end_of = np.repeat(ends, ends - starts)
    return (end_of - 1 - np.arange(n)).astype(np.int64)


def pass_need(prev: np.ndarray, k: int, share: float = 1.0, tids: np.ndarray | None = None) -> tuple[int, str]:
    """A rank's working set of pass ``k`` before it is built, in bytes, and what it holds:
    ``share`` of the join's candidates (``join_bound``; HPA: 1/P, Count Distribution: all),
    each as its items, a count and a slot of the candidate table (~8k + 24 bytes), and with
    ``tids`` (the number of this rank's transactions holding each itemset of ``prev``: Count
    Distribution's tid-lists) a tid-list of at most its prefix generator's length (4 bytes a
    transaction)."""
    per = join_bound(prev, k)
    n = int(round(int(per.sum()) * share))
    need = n * (8 * k + 24)
    what = f"{n:,} candidates of {k} items"
    if tids is not None and per.size:
        need += 4 * int((per * np.asarray(tids, dtype=np.int64)).sum())
        what += " and their tid-lists"
    return need, what


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
    runs = SortedRuns(itemsets=True)
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
            merger = Merger([runs.merged(k).next] + [remote(r, k) for r in range(1, P)], k, itemsets=True)
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
