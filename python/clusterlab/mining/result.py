"""Itemset tables: the Arrow form of a mining result and the way back to CSR arrays.

An itemset table has columns ``items`` (``large_list<uint32>``, or ``large_list<string>``
when the baskets carry labels), ``count`` (int64) and ``support`` (float64, a fraction of the
transactions). Its schema metadata records how it was mined (``n_transactions``,
``min_count``, ``target``, ``min_len``, ``max_len``, ``algorithm``), so that
:func:`clusterlab.rules` needs no extra argument. The columns wrap the Rust result without
copying (int64 offsets map onto Arrow's large lists).

>>> import numpy as np
>>> t = itemset_table(np.array([0, 1, 3], dtype=np.int64), np.array([4, 2, 4], dtype=np.uint32),
...                   np.array([3, 2], dtype=np.uint64), n_transactions=4)
>>> t.column("items").to_pylist(), t.column("support").to_pylist()
([[4], [2, 4]], [0.75, 0.5])
>>> table_info(t)["n_transactions"]
4
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

META_KEY = b"clusterlab.mining"


def itemset_table(offsets: np.ndarray, items: np.ndarray, counts: np.ndarray, n_transactions: int,
                  labels=None, **info) -> pa.Table:
    """Wrap CSR itemsets (offsets int64, items uint32, counts uint64) as an Arrow table."""
    counts = np.asarray(counts)
    n = max(int(n_transactions), 1)
    values = pa.array(np.asarray(items, dtype=np.uint32))
    if labels is not None:
        values = pa.array(labels, type=pa.string()).take(values)
    col = pa.LargeListArray.from_arrays(pa.array(np.asarray(offsets, dtype=np.int64)), values)
    count = counts.astype(np.int64, copy=False)
    table = pa.table({"items": col, "count": count, "support": count / n})
    meta = {"n_transactions": int(n_transactions), **info}
    return table.replace_schema_metadata({META_KEY: json.dumps(meta).encode()})


def table_info(table: pa.Table) -> dict:
    """The mining metadata of an itemset table ({} when it has none)."""
    md = table.schema.metadata or {}
    return json.loads(md[META_KEY]) if META_KEY in md else {}


def list_column_csr(col) -> tuple[np.ndarray, pa.Array]:
    """(offsets int64, flat values) of a list column, whatever its chunking and list type."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if pa.types.is_list(col.type):
        col = col.cast(pa.large_list(col.type.value_type))
    if not pa.types.is_large_list(col.type):
        raise TypeError(f"expected a list column, got {col.type}")
    if col.null_count:
        raise ValueError("the list column has null rows")
    offsets = np.asarray(col.offsets, dtype=np.int64)
    values = col.values
    if offsets.size and offsets[0] != 0:
        values = values.slice(offsets[0], offsets[-1] - offsets[0])
        offsets = offsets - offsets[0]
    return offsets, values


def table_csr(table: pa.Table):
    """(offsets, item ids uint32, counts uint64, labels or None) of an itemset table.

    String items are given ids by a sorted dictionary (the ids are only used internally,
    so any consistent numbering works)."""
    offsets, values = list_column_csr(table.column("items"))
    counts = np.asarray(table.column("count").to_numpy(), dtype=np.uint64)
    labels = None
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        uniq = values.unique()
        labels_arr = uniq.take(pc.sort_indices(uniq))
        ids = pc.index_in(values, value_set=labels_arr)
        items = np.asarray(ids.to_numpy(zero_copy_only=False), dtype=np.uint32)
        labels = labels_arr.to_pylist()
    else:
        items = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.uint32)
    return offsets, items, counts, labels
