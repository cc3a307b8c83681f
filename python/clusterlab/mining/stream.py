"""Itemsets written to a Parquet file as they are found: a result never has to fit in memory.

The kernel runs on one thread and hands its itemsets over in chunks; they gather into runs,
each sorted and (once there are two) spilled beside the output, and the runs are merged length
by length into the file, in canonical order: the file is ``mine()``'s table written with
``pq.write_table``, byte for byte (``clusterlab mine -o`` with or without ``--memory``).
Memory holds the input, the kernel's working set, a run and a row group, whatever the number
of itemsets. Only all frequent itemsets stream (closed and maximal sets are judged against all
of them). :func:`rules_to_parquet` derives the rules from such a file out of core, in
``rules()``'s order, byte for byte too.

>>> import tempfile, os, pyarrow.parquet as pq
>>> import clusterlab
>>> d = tempfile.mkdtemp()
>>> s = mine_to_parquet([[1, 2], [1, 2], [1, 3]], os.path.join(d, "sets.parquet"), min_support=2)
>>> s["itemsets"], pq.read_table(os.path.join(d, "sets.parquet"))["items"].to_pylist()
(3, [[1], [2], [1, 2]])
"""

from __future__ import annotations

import errno
import json
import os
import time

import numpy as np
import pyarrow as pa

from clusterlab import _core
from clusterlab.errors import ConfigError, TooManyItemsets
from clusterlab.mining.result import META_KEY, list_array, numpy_array
from clusterlab.mining.sequential import as_baskets, check_mine_args, choose_algorithm, min_count_of

#: Itemsets per chunk the kernel hands over (and per row group at most): ~4 MB at length 8.
CHUNK = 1 << 17
#: The smallest --memory accepted: the interpreter and its libraries take ~170 MB.
MIN_MEMORY = 256 << 20


def peak_rss() -> int:
    """This process's peak resident memory (bytes): VmHWM, this process image's own, not
    ``ru_maxrss``, which Linux carries over fork and exec, so that a rank started by a large
    process (a test runner) would count the starter's peak as its own. ``ru_maxrss`` where
    /proc is missing."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    import resource
    import sys

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)


def current_rss() -> int:
    """This process's resident memory now (bytes; 0 where /proc is missing)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def run_rows_of(memory: int | None) -> int:
    """Itemsets a sorted run of ``mine_to_parquet`` holds at least before it may be spilled (a
    small part of ``memory``: ~2 KB of it per itemset, ``CHUNK`` to 1 Mi; ``8 x CHUNK`` without
    a bound, which is every run's size then)."""
    return CHUNK * 8 if memory is None else int(max(CHUNK, min(1 << 20, memory // 2048)))


#: Under a ``memory`` bound a run grows past ``run_rows_of`` while this process's resident
#: memory plus what its sort takes (``one_run``: the pieces joined, the sort's keys and order,
#: the sorted copy; about three times the run as handed over) stays within this share of the
#: bound; the rest is headroom for the kernel's later levels. Fewer, larger runs: less to spill
#: and merge (a fixed 1 Mi itemsets made chess at 40% seven runs under 2 GB).
RUN_SHARE = 0.6
RUN_SORT_COPIES = 3


def spill_now(rows: int, pending_bytes: int, rss: int, memory: int | None) -> bool:
    """Whether ``mine_to_parquet`` spills its pending run (``rows`` itemsets, ``pending_bytes``
    as handed over) with this process at ``rss`` bytes.

    >>> spill_now(2 << 20, 100 << 20, 600 << 20, 2 << 30)   # 600 MiB + 3 x 100 MiB < 60% of 2 GiB
    False
    >>> spill_now(2 << 20, 300 << 20, 600 << 20, 2 << 30)
    True
    >>> spill_now(1000, 1 << 20, 0, 2 << 30)                 # under run_rows_of: never
    False
    """
    if rows < run_rows_of(memory):
        return False
    return memory is None or rss + RUN_SORT_COPIES * pending_bytes > RUN_SHARE * memory


def check_fits(baskets, memory: int) -> None:
    """Refuse up front, in one line naming ``--memory`` and what would fit, a streamed run
    that cannot fit ``memory`` bytes: the process as it is (the input read, the interpreter),
    plus what the kernel's first level holds at least (an eighth of the input's item array:
    the budget of its conditional databases, ``prep.rs``) and one sorted run (three copies of
    ``run_rows_of(memory)`` itemsets at ~48 bytes each), would already pass it. The run's
    later levels are checked as they come (past the bound the run stops naming it)."""
    now = current_rss()
    need = now + baskets.items.nbytes // 8 + RUN_SORT_COPIES * 48 * run_rows_of(memory)
    if need > memory:
        fit = -(-need // (64 << 20)) * 64  # MiB, rounded up to 64 MiB
        raise ConfigError(f"--memory {memory / 2**20:,.0f} MiB cannot hold this run: the process takes "
                          f"{now / 2**20:,.0f} MiB with the input read ({(baskets.offsets.nbytes + baskets.items.nbytes) / 2**20:,.0f} "
                          f"MiB as CSR), and the kernel's first level and one sorted run need at least "
                          f"{(need - now) / 2**20:,.0f} MiB more: give --memory {fit}MiB or more")


def mine_to_parquet(baskets_or_path, path, min_support=0.01, algorithm: str = "auto", min_len: int = 1,
                    max_len: int | None = None, memory: int | None = None, format: str | None = None,
                    max_itemsets: int | None = None, progress=None) -> dict:
    """Mine all frequent itemsets straight into the Parquet file ``path`` (atomically), in
    canonical order: byte-identical to ``mine()``'s table (same arguments) written with
    ``pq.write_table`` (``clusterlab mine -o``).

    The kernel (one thread) hands its itemsets over in chunks as it finds them; they gather
    into runs (``spill_now``: at least ``run_rows_of(memory)`` itemsets, and under a ``memory``
    bound as many as fit ``RUN_SHARE`` of it with their sort), each sorted and, once a second run is needed,
    spilled to a temporary directory beside ``path`` (``SortedRuns``, about 8 + 4 x length
    bytes per itemset, removed at the end); then the runs are merged length by length into
    ``CanonicalWriter`` (a result of one run is written straight from memory).

    ``memory`` (bytes): checked up front (``check_fits``: the input and the kernel's first
    level must fit), then the run stops with an error naming it once this process's resident
    memory passes it (checked at every chunk and merged block); the chunks and runs are
    sized to a small part of it. ``progress(itemsets, seconds, rss_bytes)`` is called after
    every chunk the kernel hands over. Returns a summary: ``itemsets``,
    ``itemsets_by_length``, ``n_transactions``, ``algorithm``, ``row_groups``, ``runs``
    (spilled), ``spilled_bytes``, ``peak_rss_bytes`` (the largest RSS seen at a check).
    """
    check_mine_args(algorithm, min_len, max_len, max_itemsets)
    if memory is not None and (isinstance(memory, bool) or not isinstance(memory, (int, np.integer))
                               or memory < MIN_MEMORY):
        raise ConfigError(f"memory must be at least {MIN_MEMORY >> 20} MiB (the interpreter alone takes ~170 MB), "
                          f"got {memory!r}")
    b = as_baskets(baskets_or_path, format)
    n = len(b)
    min_count = min_count_of(min_support, n)
    algo = choose_algorithm(b, min_count) if algorithm == "auto" else algorithm
    if memory is not None:
        check_fits(b, memory)
    # A chunk of 2^17 itemsets takes ~4-8 MB; a smaller budget gets smaller chunks. A run grows
    # while its sort fits RUN_SHARE of the budget (spill_now).
    chunk = CHUNK if memory is None else int(max(1024, min(CHUNK, memory // 2048)))
    def before_flush(need: int) -> None:
        """Refuse a row group that would take the run past ``memory`` before building it."""
        now = current_rss()
        if memory is not None and now + need > memory:
            fit = -(-(now + need) // (64 << 20)) * 64
            raise ConfigError(f"memory: writing a row group ({ROW_GROUP:,} itemsets, as the in-memory run's file "
                              f"has them) would take about {need / 2**20:,.0f} MiB on top of the "
                              f"{now / 2**20:,.0f} MiB this run holds, over the --memory of "
                              f"{memory / 2**20:,.0f} MiB: give --memory {fit}MiB or more")

    writer = CanonicalWriter(path, n, b.labels, before_flush=before_flush, min_count=min_count, target="all",
                             min_len=int(min_len), max_len=max_len, algorithm=algo)
    runs = None
    state = {"itemsets": 0, "peak": 0, "rows": 0, "bytes": 0}
    pending: list = []  # (offsets, items, counts) as handed over, not yet in a run
    t0 = time.perf_counter()
    input_mib = (b.offsets.nbytes + b.items.nbytes) / 2**20

    def over(rss: int, where: str) -> ConfigError:
        return ConfigError(f"memory: this run reached {rss / 2**20:,.0f} MiB {where}, over the --memory of "
                           f"{memory / 2**20:,.0f} MiB (the input's {input_mib:,.0f} MiB and the kernel's working "
                           "set must fit it): raise it or min_support")

    def check(where: str) -> int:
        rss = current_rss()
        state["peak"] = max(state["peak"], rss)
        if memory is not None and rss > memory:
            raise MemoryError(rss, where)
        return rss

    def one_run():
        """The pending itemsets as one canonical CSR (pending emptied)."""
        offs, its, cnts, base = [np.zeros(1, dtype=np.int64)], [], [], 0
        for o, it, c in pending:
            offs.append(np.asarray(o[1:], dtype=np.int64) - int(o[0]) + base)
            its.append(np.asarray(it[int(o[0]):int(o[-1])], dtype=np.uint32))
            cnts.append(np.asarray(c, dtype=np.uint64))
            base += int(o[-1]) - int(o[0])
        pending.clear()
        state["rows"] = state["bytes"] = 0
        return _core.canonical_itemsets(np.concatenate(offs), np.concatenate(its) if its else np.zeros(0, np.uint32),
                                        np.concatenate(cnts) if cnts else np.zeros(0, np.uint64))

    def spill():
        nonlocal runs
        if runs is None:
            runs = SortedRuns(os.path.dirname(os.path.abspath(os.fspath(path))), itemsets=True)
        runs.add(*one_run())

    try:
        def write(offsets, items, counts):
            if counts.size:
                pending.append((offsets, items, counts))
                state["rows"] += counts.size
                state["itemsets"] += counts.size
                state["bytes"] += offsets.nbytes + items.nbytes + counts.nbytes
            rss = check("while mining")
            if spill_now(state["rows"], state["bytes"], rss, memory):
                spill()
            if progress is not None:
                progress(state["itemsets"], time.perf_counter() - t0, rss)

        try:
            _core.mine_stream(b.offsets, b.items, min_count, algo, int(min_len),
                              None if max_len is None else int(max_len),
                              None if max_itemsets is None else int(max_itemsets), chunk, write)
            del b  # the merge needs only the runs
            if runs is None:  # one run: straight from memory
                writer.write(*one_run())
            else:
                if pending:
                    spill()
                for k in range(1, runs.max_len + 1):
                    merger = runs.merged(k)
                    while True:
                        items, counts = merger.next()
                        if counts.size == 0:
                            break
                        writer.write(np.arange(0, (counts.size + 1) * k, k, dtype=np.int64), items.ravel(), counts)
                        del items, counts
                        check(f"merging the itemsets of length {k}")
        except _core.TooManyItemsets as e:
            reached, limit = e.args
            raise TooManyItemsets(f"too many itemsets: stopped after {reached:,}, more would pass the limit of "
                                  f"{limit:,} (max_itemsets)", reached, limit) from None
        except MemoryError as e:
            if len(e.args) == 2 and isinstance(e.args[0], int):
                raise over(*e.args) from None
            raise over(current_rss(), "(out of memory)") from None
        summary = writer.close()
    except BaseException as e:
        writer.abort(e)
        raise
    finally:
        if runs is not None:
            runs.cleanup()
    return {**summary, "n_transactions": n, "algorithm": algo, "runs": 0 if runs is None else len(runs.runs),
            "spilled_bytes": 0 if runs is None else runs.bytes, "peak_rss_bytes": max(state["peak"], current_rss()),
            "seconds": time.perf_counter() - t0}


# ---- itemsets handed over in canonical order, written as the in-memory table is -----------

#: What writing a row group takes at its peak, per itemset and per item in it: measured at
#: 1 Mi itemsets of 4, 8 and 12 items, 155, 187 and 271 MiB for the Arrow table and Parquet's
#: encoding buffers, plus the pending pieces (16 + 4 x length bytes an itemset) and a margin
#: (chess at 45%, 2.8M itemsets streamed: a peak of 428 MiB, 149 MiB before its last group).
ROW_GROUP_ROW_BYTES, ROW_GROUP_ITEM_BYTES = 140, 20


def row_group_bytes(rows: int, items: int) -> int:
    """Bytes a row group of ``rows`` itemsets holding ``items`` items in all takes to write."""
    return ROW_GROUP_ROW_BYTES * int(rows) + ROW_GROUP_ITEM_BYTES * int(items)


#: Rows per row group of a file ``CanonicalWriter`` writes: pyarrow's default for
#: ``pq.write_table`` (1 Mi rows), so the file is the in-memory table's, byte for byte.
ROW_GROUP = 1 << 20


class CanonicalWriter:
    """Itemsets handed over in canonical order (by length, then items; item ids as CSR),
    written to the Parquet file ``path`` (atomically, on ``close``) exactly as
    ``pq.write_table(itemset_table(all of them, ...))`` writes the whole table: the same
    schema and metadata, row groups of ``ROW_GROUP`` rows, so the file is byte-identical to
    the in-memory result written with ``clusterlab mine -o``. At most one row group waits in
    memory. ``labels``: the item labels (ids index them) or None; ``info``: the table's
    metadata after ``n_transactions`` (``itemset_table``'s keywords, in its order).

    >>> import tempfile, os, pyarrow.parquet as pq
    >>> from clusterlab.mining.result import itemset_table
    >>> d = tempfile.mkdtemp()
    >>> w = CanonicalWriter(os.path.join(d, "a.parquet"), 4, None, algorithm="x")
    >>> w.write(np.array([0, 1, 2], dtype=np.int64), np.array([1, 2], dtype=np.uint32), np.array([3, 2], dtype=np.uint64))
    >>> w.write(np.array([0, 2], dtype=np.int64), np.array([1, 2], dtype=np.uint32), np.array([2], dtype=np.uint64))
    >>> w.close()["itemsets"]
    3
    >>> t = itemset_table(np.array([0, 1, 2, 4], dtype=np.int64), np.array([1, 2, 1, 2], dtype=np.uint32),
    ...                   np.array([3, 2, 2], dtype=np.uint64), 4, algorithm="x")
    >>> pq.write_table(t, os.path.join(d, "b.parquet"))
    >>> open(os.path.join(d, "a.parquet"), "rb").read() == open(os.path.join(d, "b.parquet"), "rb").read()
    True
    """

    def __init__(self, path, n_transactions: int, labels=None, before_flush=None, **info):
        import contextlib

        from clusterlab._atomic import atomic_path

        self.n_transactions, self.labels, self.info = int(n_transactions), labels, info
        self.before_flush = before_flush  # called with the bytes a row group will take (row_group_bytes)
        self._stack = contextlib.ExitStack()
        self._tmp = self._stack.enter_context(atomic_path(path))
        self._writer = None
        self._pending: list = []  # (offsets from 0, items, counts) pieces
        self._rows = 0
        self.itemsets = 0
        self.row_groups = 0
        self.lengths = np.zeros(1, dtype=np.int64)

    def write(self, offsets: np.ndarray, items: np.ndarray, counts: np.ndarray) -> None:
        """Append itemsets (CSR: ``offsets`` int64 from any start, ``items`` uint32 ids,
        ``counts``), which follow everything written before in canonical order."""
        offsets = np.asarray(offsets, dtype=np.int64)
        n = offsets.size - 1
        if n <= 0:
            return
        base = int(offsets[0])
        self._pending.append((offsets - base, np.asarray(items[base:int(offsets[-1])], dtype=np.uint32),
                              np.asarray(counts, dtype=np.uint64)))
        self._rows += n
        self.itemsets += n
        lens = np.bincount(np.diff(offsets))
        if lens.size > self.lengths.size:
            lens[:self.lengths.size] += self.lengths
            self.lengths = lens
        else:
            self.lengths[:lens.size] += lens
        while self._rows >= ROW_GROUP:
            self._flush(ROW_GROUP)

    def _flush(self, rows: int) -> None:
        """Write the first ``rows`` pending itemsets as one row group."""
        import pyarrow.parquet as pq

        from clusterlab.mining.result import itemset_table

        offs, its, cnts = [np.zeros(1, dtype=np.int64)], [], []
        base = taken = 0
        rest: list = []
        for i, (o, it, c) in enumerate(self._pending):
            n = o.size - 1
            if taken + n > rows:  # split this piece: the rest stays pending
                m = rows - taken
                cut = int(o[m])
                if m:
                    offs.append(o[1:m + 1] + base)
                    its.append(it[:cut])
                    cnts.append(c[:m])
                rest = [(o[m:] - cut, it[cut:], c[m:])] + self._pending[i + 1:]
                taken = rows
                break
            offs.append(o[1:] + base)
            its.append(it)
            cnts.append(c)
            base += int(o[-1])
            taken += n
            if taken == rows:
                rest = self._pending[i + 1:]
                break
        if self.before_flush is not None:
            self.before_flush(row_group_bytes(taken, sum(int(x.size) for x in its)))
        self._pending = rest
        self._rows -= taken
        table = itemset_table(np.concatenate(offs), np.concatenate(its) if its else np.zeros(0, np.uint32),
                              np.concatenate(cnts) if cnts else np.zeros(0, np.uint64), self.n_transactions,
                              self.labels, **self.info)
        del offs, its, cnts
        if self._writer is None:
            self._writer = pq.ParquetWriter(self._tmp, table.schema)
        self._writer.write_table(table)
        if table.num_rows:
            self.row_groups += 1

    def close(self) -> dict:
        """Write what is pending, close the file (it replaces ``path``); a summary."""
        try:
            if self._rows or self._writer is None:
                self._flush(self._rows)  # (nothing at all: one empty table, as write_table writes it)
            self._writer.close()
        except BaseException as e:
            self.abort(e)
            raise
        self._stack.close()
        lengths = self.lengths
        return {"itemsets": self.itemsets, "row_groups": self.row_groups,
                "itemsets_by_length": {int(k): int(v) for k, v in enumerate(lengths) if v}}

    def abort(self, exc: BaseException | None = None) -> None:
        """Close without keeping anything (the temporary file is removed)."""
        import contextlib

        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
            self._writer = None
        err = exc if exc is not None else RuntimeError("aborted")
        with contextlib.suppress(BaseException):
            self._stack.__exit__(type(err), err, err.__traceback__)


# ---- sorted runs on disk, merged back in canonical order -----------------------------------

#: Bytes of the blocks a merge of sorted runs holds in all (``SortedRuns.merged``; a parallel
#: rank also hands rank 0 blocks of this size).
MERGE_BLOCK_BYTES = 4 << 20


def write_array(arr: np.ndarray, dest, where: str) -> None:
    """``arr``'s bytes written to ``dest`` (a path, or a file opened in binary mode) in the spill
    directory ``where``; refused up front when the file system lacks the room. Not
    ``ndarray.tofile``: it loses a small write's failure at close and reports a short one
    without an errno."""
    try:
        st = os.statvfs(where)
        free = st.f_bavail * st.f_frsize
    except OSError:
        free = None
    if free is not None and arr.nbytes > free:
        raise OSError(errno.ENOSPC, f"no room to spill {arr.nbytes:,} bytes ({free:,} free; --memory larger, or "
                      "TMPDIR/the output on a larger file system)", where)
    data = memoryview(np.ascontiguousarray(arr)).cast("B")
    if isinstance(dest, (str, os.PathLike)):
        with open(dest, "wb") as f:
            f.write(data)
    else:
        dest.write(data)


class SortedRuns:
    """A rank's itemsets spilled to a temporary directory as sorted runs: every ``add`` (a
    chunk of itemsets in canonical order, item ids) is one run, one items file and one counts
    file per length; ``merged(k)`` reads the length-k itemsets of all runs back in order.
    ``directory``: where the temporary directory goes (None: ``TMPDIR``). ``itemsets``: every
    row's values ascend (item ids of an itemset), so the merge may sort with the core's
    canonical sort (``Merger``); rows of other keys (the rules' runs) keep numpy's lexsort."""

    def __init__(self, directory: str | None = None, *, itemsets: bool = False):
        import tempfile

        self.itemsets = itemsets
        self._dir = tempfile.TemporaryDirectory(prefix="clusterlab-spill-", dir=directory)
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
            write_array(it, self._path(len(self.runs), k, "items"), self.dir)
            write_array(c, self._path(len(self.runs), k, "counts"), self.dir)
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
        return Merger([self._reader(r, k, rows) for r in have], k, itemsets=self.itemsets)

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
    block), sorted; the blocks used up are refilled. Empty at the end. ``itemsets``: every
    row's values ascend, so the core's canonical sort (packed keys, 3x numpy's lexsort over k
    columns) orders them."""

    def __init__(self, sources: list, k: int, *, itemsets: bool = False):
        self.sources, self.k, self.itemsets = sources, k, itemsets
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
        if not self.itemsets:
            order = _lex_order(items)
            return items[order], c[order]
        _, items, c = _core.canonical_itemsets(np.arange(0, (c.size + 1) * self.k, self.k, dtype=np.int64),
                                               np.ascontiguousarray(items, dtype=np.uint32).ravel(),
                                               np.ascontiguousarray(c, dtype=np.uint64))
        return np.asarray(items).reshape(-1, self.k), np.asarray(c)


# ---- association rules from an itemset Parquet file, out of core ---------------------------

#: Multipliers of the bucket hash (the powers of an odd 64-bit constant).
_POW = np.array([pow(0x9E3779B97F4A7C15, j + 1, 1 << 64) for j in range(256)], dtype=np.uint64)
#: Bytes one bucket of one length may take in memory when no ``memory`` is given.
RULES_BUCKET_BYTES = 256 << 20
#: The fewest rules a sorted run of ``rules_to_parquet`` holds (more under a larger budget).
RULES_RUN_MIN = 1 << 12


def _hash(rows: np.ndarray) -> np.ndarray:
    """A 64-bit hash of every row (itemset codes, ascending) of a 2-D uint32 array."""
    h = (rows.astype(np.uint64) * _POW[:rows.shape[1]]).sum(axis=1, dtype=np.uint64)
    h ^= h >> np.uint64(31)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(29)
    return h


def _bucket_of(rows: np.ndarray, buckets: int) -> np.ndarray:
    """Bucket of every row of a 2-D uint32 array."""
    if buckets == 1 or rows.shape[0] == 0:
        return np.zeros(rows.shape[0], dtype=np.int64)
    return (_hash(rows) % np.uint64(buckets)).astype(np.int64)


def _match(sets: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Index in ``sets`` of every row of ``want`` (2-D uint32 arrays of one width), -1 where
    absent: by sorted 64-bit hashes, each match checked item by item; the rows a hash does not
    settle (a collision, or absent) by sorted raw keys."""
    at = np.full(want.shape[0], -1, dtype=np.int64)
    if sets.shape[0] == 0 or want.shape[0] == 0:
        return at
    keys = _hash(sets)
    order = np.argsort(keys)
    keys = keys[order]
    h = _hash(want)
    pos = np.minimum(np.searchsorted(keys, h), keys.size - 1)
    cand = order[pos]
    ok = (keys[pos] == h) & (sets[cand] == want).all(axis=1)
    at[ok] = cand[ok]
    rest = np.flatnonzero(~ok)
    if rest.size:
        raw = _as_keys(sets)
        order = np.argsort(raw)
        raw = raw[order]
        w = _as_keys(want[rest])
        pos = np.minimum(np.searchsorted(raw, w), raw.size - 1)
        found = raw[pos] == w
        at[rest[found]] = order[pos[found]]
    return at


def _as_keys(rows: np.ndarray) -> np.ndarray:
    """Each row of a 2-D uint32 array as one opaque key (sortable, comparable)."""
    rows = np.ascontiguousarray(rows, dtype=np.uint32)
    return rows.view(np.dtype((np.void, 4 * rows.shape[1]))).ravel()


class _Spill:
    """Arrays appended to files per (kind, bucket, length) in a temporary directory."""

    def __init__(self, directory: str):
        self.dir = directory
        self.bytes = 0

    def path(self, kind: str, bucket: int, length: int) -> str:
        return os.path.join(self.dir, f"{kind}-{bucket}-{length}.bin")

    def append(self, kind: str, buckets: np.ndarray, n_buckets: int, length: int, *arrays: np.ndarray) -> None:
        order = np.argsort(buckets, kind="stable")
        ends = np.cumsum(np.bincount(buckets, minlength=n_buckets))
        start = 0
        for b in range(n_buckets):
            end = int(ends[b])
            if end > start:
                sel = order[start:end]
                for j, a in enumerate(arrays):
                    part = np.ascontiguousarray(a[sel])
                    with open(self.path(f"{kind}{j}", b, length), "ab") as f:
                        write_array(part, f, self.dir)
                    self.bytes += part.nbytes
            start = end

    def load(self, kind: str, bucket: int, length: int, dtype, width: int | None = None,
             keep: bool = False) -> np.ndarray:
        """What was appended (and forget it unless ``keep``): rows of ``width`` values, or a flat array."""
        p = self.path(kind, bucket, length)
        if not os.path.exists(p):
            return np.zeros(0 if width is None else (0, width), dtype=dtype)
        a = np.fromfile(p, dtype=dtype)
        if not keep:
            os.unlink(p)
        return a if width is None else a.reshape(-1, width)


def _bits(masks: np.ndarray, width: int) -> np.ndarray:
    """(n, width) booleans: bit j of each mask."""
    return ((masks[:, None] >> np.arange(width, dtype=np.uint64)) & np.uint64(1)).astype(bool)


def _split(rows: np.ndarray, masks: np.ndarray, j: int) -> tuple[np.ndarray, np.ndarray]:
    """(antecedents, consequents) of itemset rows (n, m) split by masks of j bits: the items
    not in the mask and those in it, each in the row's (ascending) order."""
    n, m = rows.shape
    bits = _bits(masks, m)
    return rows[~bits].reshape(n, m - j), rows[bits].reshape(n, j)


def rules_to_parquet(itemsets_path, path, min_confidence: float = 0.8, min_lift: float | None = None,
                     memory: int | None = None, progress=None, n_transactions: int | None = None,
                     consequents: str = "single") -> dict:
    """Association rules of the itemset Parquet file ``itemsets_path`` (all frequent
    itemsets, in any row order: ``mine_to_parquet``'s or ``mine()``'s written out), written to
    the Parquet file ``path`` (atomically) without holding the itemsets or the rules in
    memory. ``consequents``: ``"single"`` (one-item consequents) or ``"multi"`` (any; see
    below). The file is ``rules()``'s table (same ``consequents``) on the same itemsets written
    with ``pq.write_table``, byte for byte.

    The itemsets and every rule's antecedent (an itemset less one item) are spilled into
    hash buckets on disk (a temporary directory beside ``path``), sized so that one bucket of
    one length fits a small part of ``memory``; each bucket's antecedents are then matched to
    their itemsets' counts by sorting. The rules that pass ``min_confidence`` wait in sorted
    runs on disk (keyed as ``rules()`` orders them: by itemset in canonical order, consequent
    size, then the consequent's positions in the itemset), merged at the end into row groups of
    ``ROW_GROUP`` rules (``min_lift`` applied there); one row group is held in memory.

    ``"multi"`` grows the consequents level by level as ``rules()`` does, on disk: round j
    spills every itemset's candidate consequents of j items (round 1: each item) by the
    bucket of their antecedent and matches them; the rules that pass are spilled again by the
    bucket of their consequent (its count, for lift) and by the bucket of their itemset, where
    a consequent of j + 1 items becomes a candidate when all of its j-item subsets passed
    (confidence only drops as an item moves to the consequent, so no rule is lost). The
    itemsets stay spilled by bucket for every round. ``memory`` (bytes):
    the run stops with an error naming it once this process's resident memory passes it.
    ``progress(rules, seconds, rss_bytes)`` is called after every row group. Returns a
    summary: ``rules``, ``itemsets``, ``buckets``, ``spilled_bytes``, ``row_groups``,
    ``peak_rss_bytes``, ``seconds``.
    """
    import tempfile

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from clusterlab._atomic import atomic_path
    from clusterlab.mining.result import array_numpy, list_column_csr
    from clusterlab.mining.rule_columns import (
        check_rule_args,
        rule_metadata,
        rule_table,
        rules_n_transactions,
    )

    check_rule_args(min_confidence, min_lift, consequents)
    multi = consequents == "multi"
    if memory is not None and (isinstance(memory, bool) or not isinstance(memory, (int, np.integer))
                               or memory < MIN_MEMORY):
        raise ConfigError(f"memory must be at least {MIN_MEMORY >> 20} MiB (the interpreter alone takes ~170 MB), "
                          f"got {memory!r}")
    try:
        pf = pq.ParquetFile(itemsets_path)
    except (OSError, pa.ArrowException) as e:
        raise ConfigError(f"cannot read itemsets from {itemsets_path}: {str(e).splitlines()[0]}") from None
    schema = pf.schema_arrow
    if "items" not in schema.names or "count" not in schema.names:
        raise ConfigError(f"{itemsets_path}: an itemset file needs 'items' and 'count' columns (from clusterlab mine)")
    md = schema.metadata or {}
    info = json.loads(md[META_KEY]) if META_KEY in md else {}
    n = rules_n_transactions(info, n_transactions)
    value_type = schema.field("items").type.value_type
    labelled = pa.types.is_string(value_type) or pa.types.is_large_string(value_type)
    t0 = time.perf_counter()
    peak = [0]

    def check_memory():
        rss = current_rss()
        peak[0] = max(peak[0], rss)
        if memory is not None and rss > memory:
            raise ConfigError(f"memory: deriving rules reached {rss / 2**20:,.0f} MiB, over the --memory of "
                              f"{memory / 2**20:,.0f} MiB: raise it")
        return rss

    def batches():
        for batch in pf.iter_batches(batch_size=CHUNK, columns=["items", "count"]):
            offsets, values = list_column_csr(batch.column(0))
            count = batch.column(1)
            yield offsets, values, np.asarray(array_numpy(count), dtype=np.uint64)

    # Pass 1: the single items (every item of a frequent itemset is one) and the rows per length.
    single_values, single_counts, per_length = [], [], np.zeros(1, dtype=np.int64)
    for offsets, values, counts in batches():
        lens = np.diff(offsets)
        one = np.flatnonzero(lens == 1)
        if one.size:
            single_values.append(values.take(numpy_array(offsets[one])) if labelled
                                 else array_numpy(values)[offsets[one]])
            single_counts.append(counts[one])
        bc = np.bincount(lens)
        if bc.size > per_length.size:
            bc[:per_length.size] += per_length
            per_length = bc
        else:
            per_length[:bc.size] += bc
    counts1 = np.concatenate(single_counts) if single_counts else np.zeros(0, dtype=np.uint64)
    if labelled:
        vocab = pa.concat_arrays(single_values) if single_values else pa.array([], type=pa.string())
        order = np.asarray(array_numpy(pc.sort_indices(vocab)), dtype=np.int64)
        vocab = vocab.take(numpy_array(order))
        ids = None
    else:
        ids = np.concatenate(single_values).astype(np.uint32) if single_values else np.zeros(0, dtype=np.uint32)
        order = np.argsort(ids, kind="stable")
        ids = ids[order]
    counts1 = counts1[order]
    n_single = counts1.size
    if (np.diff(ids) == 0).any() if ids is not None else len(pc.unique(vocab)) != len(vocab):  # noqa: SIM108
        raise ConfigError(f"{itemsets_path}: an itemset appears twice (not a mining result)")

    def codes_of(values) -> np.ndarray:
        if labelled:
            c = pc.index_in(values, value_set=vocab)
            if c.null_count:
                missing = values.filter(pc.is_null(c))[0].as_py()
                raise ConfigError(f"{itemsets_path}: item {missing!r} has no itemset of its own: rules need all "
                                  "frequent itemsets (target all, min_len 1)")
            return np.asarray(array_numpy(c), dtype=np.uint32)
        v = array_numpy(values)
        c = np.minimum(np.searchsorted(ids, v), max(n_single - 1, 0))
        bad = np.flatnonzero(ids[c] != v) if n_single else np.arange(v.size)
        if bad.size:
            raise ConfigError(f"{itemsets_path}: item {int(v[bad[0]])} has no itemset of its own: rules need all "
                              "frequent itemsets (target all, min_len 1)")
        return c.astype(np.uint32)

    # Buckets: one length's itemsets and the antecedents of that length (from the itemsets one
    # longer) take about 12 + 4 * length bytes each; sorting holds about twice that.
    budget = RULES_BUCKET_BYTES if memory is None else max(16 << 20, memory // 8)
    need = 0
    for k in range(1, per_length.size):
        rows = int(per_length[k]) + (k + 1) * int(per_length[k + 1] if k + 1 < per_length.size else 0)
        need = max(need, 2 * rows * (12 + 4 * k))
    n_buckets = max(1, -(-need // budget))
    out_meta = rule_metadata(n, min_confidence, min_lift, consequents)
    # Rules wait in sorted runs for the canonical order: a key row of (7 + length) words each,
    # sorting holds about three copies of a run.
    run_rows = max(RULES_RUN_MIN, budget // (3 * 4 * (8 + per_length.size)))
    state = {"rules": 0, "row_groups": 0}
    directory = os.path.dirname(os.path.abspath(os.fspath(path)))
    with tempfile.TemporaryDirectory(prefix=".rules-", dir=directory) as tmpdir, atomic_path(path) as tmp:
        spill = _Spill(tmpdir)
        # Pass 2: every itemset to its bucket; every rule's antecedent to the bucket of that itemset.
        for offsets, values, counts in batches():
            codes = codes_of(values)
            lens = np.diff(offsets)
            for k in np.unique(lens):
                k = int(k)
                if k == 0:
                    continue
                sel = np.flatnonzero(lens == k)
                rows = np.sort(codes[offsets[sel][:, None] + np.arange(k)], axis=1)
                if k + 1 < per_length.size:  # the longest itemsets are no rule's antecedent
                    spill.append("I", _bucket_of(rows, n_buckets), n_buckets, k, rows, counts[sel])
                if k >= 2 and multi:  # round 1's candidates: (itemset, one-item mask), by antecedent
                    if k > 64:
                        raise ConfigError(f"itemset of length {k} is too long for rule generation (at most 64 items)")
                    z = np.repeat(rows, k, axis=0)
                    masks = np.tile(np.uint64(1) << np.arange(k, dtype=np.uint64), rows.shape[0])
                    ante, _ = _split(z, masks, 1)
                    spill.append("C", _bucket_of(ante, n_buckets), n_buckets, k, z, masks,
                                 np.repeat(counts[sel], k))
                elif k >= 2:
                    cols = np.arange(k)
                    ante = np.concatenate([rows[:, cols != p] for p in range(k)])
                    cons = np.concatenate([rows[:, p] for p in range(k)])
                    spill.append("R", _bucket_of(ante, n_buckets), n_buckets, k - 1, ante, cons,
                                 np.tile(counts[sel], k))
            check_memory()
        # Pass 3: per bucket and length, the antecedents' counts by sorted matching; the rules
        # that pass go to sorted runs (the order rules() gives: by itemset in canonical order,
        # then consequent size, then the consequent's positions in the itemset as a bit mask).
        rule_runs = SortedRuns(tmpdir)
        waiting: dict[int, list] = {}  # key width -> [(key rows, rule counts)] not yet in a run
        waiting_rows = [0]

        def spill_rules():
            """The waiting rules as one sorted run (key rows of each width in lexicographic order)."""
            if not waiting:
                return
            offs, its, cnts, base = [np.zeros(1, dtype=np.int64)], [], [], 0
            for w in sorted(waiting):
                keys = np.concatenate([k for k, _ in waiting[w]])
                rc = np.concatenate([c for _, c in waiting[w]])
                order = _lex_order(keys)
                its.append(keys[order].ravel())
                cnts.append(rc[order])
                offs.append(base + w * np.arange(1, rc.size + 1, dtype=np.int64))
                base += w * rc.size
            waiting.clear()
            waiting_rows[0] = 0
            rule_runs.add(np.concatenate(offs), np.concatenate(its), np.concatenate(cnts))
            check_memory()

        def emit(z, masks, j, rc, ac, cc):
            """Rules of itemset code rows ``z`` (one length m) whose consequent is the items at
            the ``j`` bits of ``masks``: kept as key rows (z, j, mask, ac, cc), width m + 7."""
            n_rules, m = z.shape
            key = np.empty((n_rules, m + 7), dtype=np.uint32)
            key[:, :m] = z
            key[:, m] = j
            for col, v in ((m + 1, masks), (m + 3, ac), (m + 5, cc)):
                v = np.asarray(v, dtype=np.uint64)
                key[:, col] = (v >> np.uint64(32)).astype(np.uint32)
                key[:, col + 1] = (v & np.uint64(0xFFFFFFFF)).astype(np.uint32)
            waiting.setdefault(m + 7, []).append((key, np.asarray(rc, dtype=np.uint64)))
            waiting_rows[0] += n_rules
            if waiting_rows[0] >= run_rows:
                spill_rules()
            check_memory()

        def single(ante, cons, rc, ac):
            """``emit`` of single-item consequents: ``ante`` rows (ascending codes) and ``cons``."""
            z = np.sort(np.concatenate([ante, cons[:, None]], axis=1), axis=1)
            pos = (z < cons[:, None]).sum(axis=1).astype(np.uint64)
            emit(z, np.uint64(1) << pos, 1, rc, ac, counts1[cons])

        def rules_of(keys, rc):
            """The rule table of merged key rows (as ``rules()`` builds it)."""
            m = keys.shape[1] - 7

            def u64(col):
                return (keys[:, col].astype(np.uint64) << np.uint64(32)) | keys[:, col + 1].astype(np.uint64)

            z, masks, ac, cc = keys[:, :m], u64(m + 1), u64(m + 3), u64(m + 5)
            bits = _bits(masks, m)
            a_vals, c_vals = z[~bits], z[bits]  # row by row, ascending within a row
            c_len = bits.sum(axis=1)
            c_off = np.concatenate([[0], np.cumsum(c_len)]).astype(np.int64)
            a_off = np.concatenate([[0], np.cumsum(m - c_len)]).astype(np.int64)
            a_vals = vocab.take(numpy_array(a_vals)) if labelled else numpy_array(ids[a_vals])
            c_vals = vocab.take(numpy_array(c_vals)) if labelled else numpy_array(ids[c_vals])
            return rule_table(list_array(a_off, a_vals), list_array(c_off, c_vals), rc, ac, cc, n, min_lift)

        writer = None
        tables: list = []
        held = [0]

        def write_groups(final: bool = False):
            """Row groups of ``ROW_GROUP`` rules out of the tables held (the last one shorter)."""
            nonlocal writer
            while held[0] >= ROW_GROUP or (final and (held[0] or writer is None)):
                t = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
                rows = min(ROW_GROUP, t.num_rows)
                group = t.slice(0, rows).combine_chunks().replace_schema_metadata(out_meta)
                rest = t.slice(rows)
                tables[:] = [rest] if rest.num_rows else []
                held[0] = rest.num_rows
                if writer is None:
                    writer = pq.ParquetWriter(tmp, group.schema)
                writer.write_table(group)
                if group.num_rows:
                    state["row_groups"] += 1
                state["rules"] += group.num_rows
                rss = check_memory()
                if progress is not None:
                    progress(state["rules"], time.perf_counter() - t0, rss)
                if final and not held[0]:
                    break

        def counts_of(rows, b, keep=True):
            """The counts of itemset rows (all of one length) in bucket b: the spilled itemsets'
            (``keep``: the spilled files stay for later rounds)."""
            k = rows.shape[1]
            sets = spill.load("I0", b, k, np.uint32, k, keep=keep)
            at = _match(sets, rows)
            if (at < 0).any():
                miss = rows[np.flatnonzero(at < 0)[0]]
                shown = (vocab.take(numpy_array(miss)).to_pylist() if labelled else ids[miss].tolist())
                raise ConfigError(f"{itemsets_path}: itemset {shown} (a subset of a frequent itemset) is "
                                  "missing: rules need all frequent itemsets (target all, min_len 1)")
            return spill.load("I1", b, k, np.uint64, keep=keep)[at]

        try:
            for j in range(1, per_length.size - 1) if multi else ():  # round j: consequents of j items
                for b in range(n_buckets):  # the candidates' antecedents' counts; the passing rules on
                    for m in range(j + 1, per_length.size):
                        z = spill.load("C0", b, m, np.uint32, m)
                        if z.shape[0] == 0:
                            continue
                        masks = spill.load("C1", b, m, np.uint64)
                        rc = spill.load("C2", b, m, np.uint64)
                        ante, cons = _split(z, masks, j)
                        ac = counts_of(ante, b)
                        keep = np.flatnonzero(rc.astype(np.float64) / ac.astype(np.float64) >= min_confidence)
                        if keep.size == 0:
                            continue
                        z, masks, rc, ac, cons = z[keep], masks[keep], rc[keep], ac[keep], cons[keep]
                        spill.append("P", _bucket_of(cons, n_buckets), n_buckets, m, z, masks, rc, ac)
                        if m > j + 1:
                            spill.append("N", _bucket_of(z, n_buckets), n_buckets, m, z, masks, rc)
                        check_memory()
                for b in range(n_buckets):  # the passing rules' consequents' counts: rules out
                    for m in range(j + 1, per_length.size):
                        z = spill.load("P0", b, m, np.uint32, m)
                        if z.shape[0] == 0:
                            continue
                        masks = spill.load("P1", b, m, np.uint64)
                        rc = spill.load("P2", b, m, np.uint64)
                        ac = spill.load("P3", b, m, np.uint64)
                        _, cons = _split(z, masks, j)
                        emit(z, masks, j, rc, ac, counts_of(cons, b))
                more = 0
                for b in range(n_buckets):  # next round's candidates: all j-item subsets passed
                    for m in range(j + 2, per_length.size):
                        z = spill.load("N0", b, m, np.uint32, m)
                        if z.shape[0] == 0:
                            continue
                        masks = spill.load("N1", b, m, np.uint64)
                        rc = spill.load("N2", b, m, np.uint64)
                        src, bit = np.nonzero(~_bits(masks, m))
                        grown = masks[src] | (np.uint64(1) << bit.astype(np.uint64))
                        keys = _as_keys(np.concatenate([z[src], grown.view(np.uint32).reshape(-1, 2)], axis=1))
                        _, first, times = np.unique(keys, return_index=True, return_counts=True)
                        first = first[times == j + 1]
                        if first.size == 0:
                            continue
                        z, grown, rc = z[src[first]], grown[first], rc[src[first]]
                        ante, _ = _split(z, grown, j + 1)
                        spill.append("C", _bucket_of(ante, n_buckets), n_buckets, m, z, grown, rc)
                        more += first.size
                        check_memory()
                if more == 0:
                    break
            for b in range(n_buckets) if not multi else ():
                for k in range(1, per_length.size - 1):
                    ante = spill.load("R0", b, k, np.uint32, k)
                    if ante.shape[0] == 0:
                        continue
                    cons = spill.load("R1", b, k, np.uint32)
                    rc = spill.load("R2", b, k, np.uint64)
                    ac = counts_of(ante, b, keep=False)
                    keep = np.flatnonzero(rc.astype(np.float64) / ac.astype(np.float64) >= min_confidence)
                    if keep.size == 0:
                        continue
                    single(ante[keep], cons[keep], rc[keep], ac[keep])
            spill_rules()
            for w in sorted({w for run in rule_runs.runs for w in run}):  # by itemset length
                merger = rule_runs.merged(w)
                while True:
                    keys, rc = merger.next()
                    if rc.size == 0:
                        break
                    t = rules_of(keys, rc)
                    if t.num_rows:
                        tables.append(t)
                        held[0] += t.num_rows
                    write_groups()
            if not tables and writer is None:  # no rule at all: one empty table, as write_table writes it
                tables.append(rules_of(np.zeros((0, 8), dtype=np.uint32), np.zeros(0, dtype=np.uint64)))
            write_groups(final=True)
        finally:
            if writer is not None:
                writer.close()
            rule_runs.cleanup()
        spilled = spill.bytes + rule_runs.bytes
    return {"rules": state["rules"], "itemsets": int(per_length.sum()), "buckets": n_buckets,
            "spilled_bytes": spilled, "row_groups": state["row_groups"],
            "peak_rss_bytes": max(peak[0], current_rss()), "seconds": time.perf_counter() - t0}
