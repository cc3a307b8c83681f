"""Itemsets written to a Parquet file as they are found: a result never has to fit in memory.

The kernel runs on one thread and hands its itemsets over in chunks, while this thread
writes them as Parquet row groups; at most a few chunks are in flight, so memory holds the
input, the kernel's working set and those chunks, whatever the number of itemsets. Rows
are in the order the kernel finds them, not sorted (one mining thread: the same file every
run); the set of rows, counts and metadata is the in-memory ``mine()``'s. Only all frequent
itemsets stream (closed and maximal sets are judged against all of them).

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
