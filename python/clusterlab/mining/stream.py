"""Itemsets written to a Parquet file as they are found: a result never has to fit in memory.

The kernel runs on one thread and hands its itemsets over in chunks, while this thread
writes them as Parquet row groups; at most a few chunks are in flight, so memory holds the
input, the kernel's working set and those chunks, whatever the number of itemsets. Rows
are in the order the kernel finds them, not sorted (one mining thread: the same file every
run); the set of rows, counts and metadata is the in-memory ``mine()``'s. Only all frequent
itemsets stream (closed and maximal sets are judged against all of them).
:func:`rules_to_parquet` derives the rules from such a file out of core.

>>> import tempfile, os, pyarrow.parquet as pq
>>> import clusterlab
>>> d = tempfile.mkdtemp()
>>> s = mine_to_parquet([[1, 2], [1, 2], [1, 3]], os.path.join(d, "sets.parquet"), min_support=2)
>>> s["itemsets"], sorted(pq.read_table(os.path.join(d, "sets.parquet"))["items"].to_pylist())
(3, [[1], [1, 2], [2]])
"""

from __future__ import annotations

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


def current_rss() -> int:
    """This process's resident memory now (bytes; 0 where /proc is missing)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def itemset_schema(labelled: bool, meta: dict) -> pa.Schema:
    value = pa.string() if labelled else pa.uint32()
    return pa.schema([("items", pa.large_list(value)), ("count", pa.int64()), ("support", pa.float64())],
                     metadata={META_KEY: json.dumps(meta).encode()})


def mine_to_parquet(baskets_or_path, path, min_support=0.01, algorithm: str = "auto", min_len: int = 1,
                    max_len: int | None = None, memory: int | None = None, format: str | None = None,
                    max_itemsets: int | None = None, progress=None) -> dict:
    """Mine all frequent itemsets straight into the Parquet file ``path`` (atomically).

    ``memory`` (bytes): the run stops with an error naming it once this process's resident
    memory passes it (checked at every chunk), and the chunks are sized to a small part of it.
    ``progress(itemsets, seconds, rss_bytes)`` is called after every chunk. Returns a summary:
    ``itemsets``, ``itemsets_by_length``, ``n_transactions``, ``algorithm``, ``row_groups``,
    ``peak_rss_bytes`` (the largest RSS seen at a chunk).
    """
    from clusterlab._atomic import atomic_path

    check_mine_args(algorithm, min_len, max_len, max_itemsets)
    if memory is not None and (isinstance(memory, bool) or not isinstance(memory, (int, np.integer))
                               or memory < MIN_MEMORY):
        raise ConfigError(f"memory must be at least {MIN_MEMORY >> 20} MiB (the interpreter alone takes ~170 MB), "
                          f"got {memory!r}")
    b = as_baskets(baskets_or_path, format)
    n = len(b)
    min_count = min_count_of(min_support, n)
    algo = choose_algorithm(b, min_count) if algorithm == "auto" else algorithm
    # A chunk of 2^17 itemsets takes ~4-8 MB; a smaller budget gets smaller chunks.
    chunk = CHUNK if memory is None else int(max(1024, min(CHUNK, memory // 2048)))
    meta = {"n_transactions": n, "min_count": min_count, "target": "all", "min_len": int(min_len),
            "max_len": max_len, "algorithm": algo}
    schema = itemset_schema(b.labels is not None, meta)
    labels = None if b.labels is None else pa.array(b.labels, type=pa.string())
    state = {"itemsets": 0, "row_groups": 0, "peak": 0, "lengths": np.zeros(1, dtype=np.int64)}
    t0 = time.perf_counter()
    import pyarrow.parquet as pq

    pending: list = []
    state["pending_rows"] = 0

    with atomic_path(path) as tmp:
        writer = pq.ParquetWriter(tmp, schema)

        def flush():
            if pending:
                writer.write_table(pa.Table.from_batches(pending, schema=schema), row_group_size=1 << 30)
                pending.clear()
                state["pending_rows"] = 0
                state["row_groups"] += 1

        try:
            def write(offsets, items, counts):
                values = numpy_array(items, np.uint32)
                if labels is not None:
                    values = labels.take(values)
                count = counts.astype(np.int64)
                batch = pa.record_batch([list_array(offsets, values), numpy_array(count), numpy_array(count / max(n, 1))],
                                        schema=schema)
                # Kernels hand over what each first-level item leaves (often a few itemsets):
                # gather a chunk's worth per row group.
                pending.append(batch)
                state["pending_rows"] += batch.num_rows
                if state["pending_rows"] >= chunk:
                    flush()
                lens = np.bincount(np.diff(offsets))
                if lens.size > state["lengths"].size:
                    lens[:state["lengths"].size] += state["lengths"]
                    state["lengths"] = lens
                else:
                    state["lengths"][:lens.size] += lens
                state["itemsets"] += counts.size
                rss = current_rss()
                state["peak"] = max(state["peak"], rss)
                if memory is not None and rss > memory:
                    raise MemoryError(rss)
                if progress is not None:
                    progress(state["itemsets"], time.perf_counter() - t0, rss)

            try:
                _core.mine_stream(b.offsets, b.items, min_count, algo, int(min_len),
                                  None if max_len is None else int(max_len),
                                  None if max_itemsets is None else int(max_itemsets), chunk, write)
            except _core.TooManyItemsets as e:
                reached, limit = e.args
                raise TooManyItemsets(f"too many itemsets: stopped after {reached:,}, more would pass the limit of "
                                      f"{limit:,} (max_itemsets)", reached, limit) from None
            except MemoryError as e:
                rss = e.args[0] if e.args and isinstance(e.args[0], int) else current_rss()
                raise ConfigError(f"memory: this run reached {rss / 2**20:,.0f} MiB, over the --memory of "
                                  f"{memory / 2**20:,.0f} MiB (the input's {(b.offsets.nbytes + b.items.nbytes) / 2**20:,.0f} MiB and the "
                                  "kernel's working set must fit it): raise it or min_support") from None
            flush()
        finally:
            writer.close()
    lengths = state["lengths"]
    return {"itemsets": state["itemsets"], "itemsets_by_length": {int(k): int(v) for k, v in enumerate(lengths) if v},
            "n_transactions": n, "algorithm": algo, "row_groups": state["row_groups"],
            "peak_rss_bytes": max(state["peak"], current_rss()), "seconds": time.perf_counter() - t0}


# ---- itemsets handed over in canonical order, written as the in-memory table is -----------

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

    def __init__(self, path, n_transactions: int, labels=None, **info):
        import contextlib

        from clusterlab._atomic import atomic_path

        self.n_transactions, self.labels, self.info = int(n_transactions), labels, info
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


# ---- association rules from an itemset Parquet file, out of core ---------------------------

#: Multipliers of the bucket hash (the powers of an odd 64-bit constant).
_POW = np.array([pow(0x9E3779B97F4A7C15, j + 1, 1 << 64) for j in range(256)], dtype=np.uint64)
#: Bytes one bucket of one length may take in memory when no ``memory`` is given.
RULES_BUCKET_BYTES = 256 << 20


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
                        part.tofile(f)
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
    below).

    The itemsets and every rule's antecedent (an itemset less one item) are spilled into
    hash buckets on disk (a temporary directory beside ``path``), sized so that one bucket of
    one length fits a small part of ``memory``; each bucket's antecedents are then matched to
    their itemsets' counts by sorting, and the rules that pass ``min_confidence`` (and
    ``min_lift``) are written as row groups. The rows, columns and metadata are ``rules()``'s
    (of the same ``consequents``) on the same itemsets, in another order.

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
    out_schema = pa.schema([("antecedent", pa.large_list(value_type if labelled else pa.uint32())),
                            ("consequent", pa.large_list(value_type if labelled else pa.uint32())),
                            ("count", pa.int64()), ("support", pa.float64()), ("confidence", pa.float64()),
                            ("lift", pa.float64()), ("leverage", pa.float64()), ("conviction", pa.float64())],
                           metadata=rule_metadata(n, min_confidence, min_lift, consequents))
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
        # Pass 3: per bucket and length, the antecedents' counts by sorted matching; rules out.
        writer = pq.ParquetWriter(tmp, out_schema)
        pending: list = []
        pending_rows = [0]

        def flush():
            if pending:
                writer.write_table(pa.Table.from_batches(pending, schema=out_schema), row_group_size=1 << 30)
                pending.clear()
                pending_rows[0] = 0
                state["row_groups"] += 1
                rss = check_memory()
                if progress is not None:
                    progress(state["rules"], time.perf_counter() - t0, rss)

        def emit(ante, cons, rc, ac, cc):
            """Rules (antecedent and consequent code rows) out, a row group at a time."""
            a_vals, c_vals = ante.ravel(), cons.ravel()
            a_vals = vocab.take(numpy_array(a_vals)) if labelled else numpy_array(ids[a_vals])
            c_vals = vocab.take(numpy_array(c_vals)) if labelled else numpy_array(ids[c_vals])
            a_off = np.arange(0, (rc.size + 1) * ante.shape[1], ante.shape[1], dtype=np.int64)
            c_off = np.arange(0, (rc.size + 1) * cons.shape[1], cons.shape[1], dtype=np.int64)
            table = rule_table(list_array(a_off, a_vals), list_array(c_off, c_vals), rc, ac, cc, n, min_lift)
            for batch in table.to_batches():
                pending.append(batch)
                pending_rows[0] += batch.num_rows
            state["rules"] += table.num_rows
            if pending_rows[0] >= CHUNK:
                flush()
            check_memory()

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
                        ante, cons = _split(z, masks, j)
                        emit(ante, cons, rc, ac, counts_of(cons, b))
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
                    ante, cons, rc, ac = ante[keep], cons[keep], rc[keep], ac[keep]
                    emit(ante, cons.reshape(-1, 1), rc, ac, counts1[cons])
            flush()
        finally:
            writer.close()
        spilled = spill.bytes
    return {"rules": state["rules"], "itemsets": int(per_length.sum()), "buckets": n_buckets,
            "spilled_bytes": spilled, "row_groups": state["row_groups"],
            "peak_rss_bytes": max(peak[0], current_rss()), "seconds": time.perf_counter() - t0}
