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

META_KEY = b"clusterlab.mining"


def numpy_array(values: np.ndarray, dtype=None) -> pa.Array:
    """A 1-D numpy array as an Arrow array, sharing its memory.

    Built from the buffer rather than with ``pa.array``: pyarrow's first ``pa.array`` call in
    a process imports pandas to test the argument (0.3 s), which would be the largest part
    of a small mining run's time.

    >>> numpy_array(np.array([3, 1], dtype=np.uint32)).to_pylist()
    [3, 1]
    >>> numpy_array(np.array([True, False, True])).to_pylist()
    [True, False, True]
    """
    arr = np.ascontiguousarray(values if dtype is None else np.asarray(values, dtype=dtype))
    if arr.dtype == np.bool_:  # Arrow packs booleans into bits
        return pa.Array.from_buffers(pa.bool_(), len(arr), [None, pa.py_buffer(np.packbits(arr, bitorder="little"))])
    return pa.Array.from_buffers(pa.from_numpy_dtype(arr.dtype), len(arr), [None, pa.py_buffer(arr)])


_NUMPY_TYPES = {pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64,
                pa.uint8(): np.uint8, pa.uint16(): np.uint16, pa.uint32(): np.uint32, pa.uint64(): np.uint64,
                pa.float32(): np.float32, pa.float64(): np.float64}


def array_numpy(arr: pa.Array) -> np.ndarray:
    """A primitive Arrow array without nulls as numpy, sharing its memory (``to_numpy`` would
    import pandas on its first call, as ``pa.array`` does); other arrays through ``to_numpy``.

    >>> array_numpy(numpy_array(np.arange(4, dtype=np.int64)).slice(1, 2))
    array([1, 2])
    """
    dtype = _NUMPY_TYPES.get(arr.type)
    if dtype is None or arr.null_count:
        return arr.to_numpy(zero_copy_only=False)
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=arr.offset + len(arr))[arr.offset:]


def list_array(offsets: np.ndarray, values: pa.Array) -> pa.LargeListArray:
    """A ``large_list`` array of CSR ``offsets`` (int64) over ``values``."""
    return pa.LargeListArray.from_arrays(numpy_array(offsets, np.int64), values)


def itemset_table(offsets: np.ndarray, items: np.ndarray, counts: np.ndarray, n_transactions: int,
                  labels=None, **info) -> pa.Table:
    """Wrap CSR itemsets (offsets int64, items uint32, counts uint64) as an Arrow table."""
    counts = np.asarray(counts)
    n = max(int(n_transactions), 1)
    values = numpy_array(items, np.uint32)
    if labels is not None:
        values = pa.array(labels, type=pa.string()).take(values)
    col = list_array(offsets, values)
    count = counts.astype(np.int64, copy=False)
    table = pa.table({"items": col, "count": numpy_array(count), "support": numpy_array(count / n)})
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
    offsets = array_numpy(col.offsets)
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
    count = table.column("count")
    count = count.combine_chunks() if isinstance(count, pa.ChunkedArray) else count
    counts = np.asarray(array_numpy(count), dtype=np.uint64)
    labels = None
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        import pyarrow.compute as pc  # here, not at import: it costs every rank process 60-80 ms

        uniq = values.unique()
        labels_arr = uniq.take(pc.sort_indices(uniq))
        ids = pc.index_in(values, value_set=labels_arr)
        items = np.asarray(ids.to_numpy(zero_copy_only=False), dtype=np.uint32)
        labels = labels_arr.to_pylist()
    else:
        items = np.asarray(array_numpy(values), dtype=np.uint32)
    return offsets, items, counts, labels
