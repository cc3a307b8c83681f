"""Arrow columns to CSR arrays: a list column (one row per transaction) or long form (a
transaction id column and an item column). Used by Parquet reading and by
``Baskets.from_lists`` for pyarrow, polars and pandas columns.

What is accepted (docs/formats.md): integer items in 0..4294967295 (any integer type; kept
as ids) or string items (a sorted label dictionary); no nulls, floats, booleans or nested
lists. A column that already is ``large_list<uint32>`` with sorted, distinct items is used
without copying its buffers.

>>> import pyarrow as pa
>>> c = list_column_csr(pa.array([[3, 1], [2]], pa.large_list(pa.uint32())), _raise)
>>> c.offsets.tolist(), c.items.tolist(), c.labels
([0, 2, 3], [1, 3, 2], None)
>>> list_column_csr(pa.array([[1.5]]), _raise)
Traceback (most recent call last):
...
ValueError: row 1: items of type double are not accepted (integers 0..4294967295 or strings)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, NoReturn

import numpy as np
import pyarrow as pa

from clusterlab import _core

U32_MAX = 0xFFFFFFFF
ACCEPTED = "integers 0..4294967295 or strings"

#: ``fail(row, message)`` raises the caller's error; ``row`` is 1-based (0: the whole column).
Fail = Callable[[int, str], NoReturn]


class Csr(NamedTuple):
    """Transactions as CSR arrays (items sorted and distinct in each), labels or None, and
    how many duplicate items were dropped."""

    offsets: np.ndarray
    items: np.ndarray
    labels: list[str] | None
    duplicates_dropped: int = 0


def _raise(row: int, message: str) -> NoReturn:
    raise ValueError(f"row {row}: {message}")


def as_array(col) -> pa.Array:
    """One contiguous Arrow array (chunks are concatenated: a copy only when there are several)."""
    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks == 1:
            return col.chunk(0)
        return pa.concat_arrays(col.chunks) if col.num_chunks else pa.array([], col.type)
    return col


def _first_null(arr: pa.Array) -> int:
    return int(np.argmax(arr.is_null().to_numpy(zero_copy_only=False)))


def _plain(arr: pa.Array) -> pa.Array:
    """Dictionary-encoded values decoded to their value type."""
    return arr.cast(arr.type.value_type) if pa.types.is_dictionary(arr.type) else arr


def is_item_type(t: pa.DataType) -> bool:
    t = t.value_type if pa.types.is_dictionary(t) else t
    return pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t) \
        or pa.types.is_string_view(t)


def encode_items(values: pa.Array, row_of: Callable[[int], int], fail: Fail) -> tuple[np.ndarray, list[str] | None]:
    """Items as uint32 ids (integers kept, strings through a sorted dictionary) and labels.
    ``row_of(k)`` names the row that holds value ``k`` in errors."""
    if not is_item_type(values.type):
        kind = values.type
        what = "nested lists are not items" if pa.types.is_list(kind) or pa.types.is_large_list(kind) \
            or pa.types.is_fixed_size_list(kind) or pa.types.is_list_view(kind) \
            else f"items of type {kind} are not accepted"
        fail(row_of(0) if len(values) else 0, f"{what} ({ACCEPTED})")
    if values.null_count:
        fail(row_of(_first_null(values)), "null item")
    values = _plain(values)
    if pa.types.is_integer(values.type):
        ints = values.to_numpy(zero_copy_only=False)
        if ints.size and (int(ints.min()) < 0 or int(ints.max()) > U32_MAX):
            bad = int(np.argmax((ints < 0) | (ints > U32_MAX)) if ints.dtype.kind == "i" else np.argmax(ints > U32_MAX))
            fail(row_of(bad), f"item {int(ints[bad])} is outside 0..4294967295")
        return np.ascontiguousarray(ints, dtype=np.uint32), None
    import pyarrow.compute as pc  # here, not at import: it costs every rank and CLI process 60-80 ms

    enc = pc.dictionary_encode(values)
    labels = enc.dictionary.to_pylist()
    order = sorted(range(len(labels)), key=labels.__getitem__)
    remap = np.empty(len(labels), dtype=np.uint32)
    remap[order] = np.arange(len(labels), dtype=np.uint32)
    codes = enc.indices.to_numpy(zero_copy_only=False)
    return remap[codes], [labels[k] for k in order]


def normalized(offsets: np.ndarray, items: np.ndarray, labels: list[str] | None) -> Csr:
    """CSR arrays with transactions sorted and deduplicated (in Rust; no copy when they
    already are)."""
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    items = np.ascontiguousarray(items, dtype=np.uint32)
    fixed = _core.normalize_csr(offsets, items)
    if fixed is None:
        return Csr(offsets, items, labels)
    o, i, dropped = fixed
    return Csr(o, i, labels, int(dropped))


def list_column_csr(col, fail: Fail) -> Csr:
    """A list column (list, large_list or fixed_size_list of integers or strings), one row
    per transaction."""
    arr = as_array(col)
    t = arr.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)):
        fail(0, f"a column of type {t} is not a list column (accepted: a list of {ACCEPTED})")
    if arr.null_count:
        fail(_first_null(arr) + 1, "null transaction (an empty transaction is an empty list)")
    if pa.types.is_fixed_size_list(t):
        offsets = np.arange(len(arr) + 1, dtype=np.int64) * t.list_size
    else:
        offsets = arr.offsets.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        if offsets.size and offsets[0]:
            offsets = offsets - offsets[0]
    values = arr.flatten()

    def row_of(k: int) -> int:
        return int(np.searchsorted(offsets, k, side="right"))

    items, labels = encode_items(values, row_of, fail)
    return normalized(offsets, items, labels)


def long_form_csr(tids, items, fail_tid: Fail, fail_item: Fail) -> Csr:
    """Long form: one (transaction id, item) pair per row; transactions keep the order in
    which their ids first appear, as in CSV."""
    tids, items = as_array(tids), as_array(items)
    if not is_item_type(tids.type):
        fail_tid(1 if len(tids) else 0, f"transaction ids of type {tids.type} are not accepted (integers or strings)")
    if tids.null_count:
        fail_tid(_first_null(tids) + 1, "null transaction id")
    ids, labels = encode_items(items, lambda k: k + 1, fail_item)
    import pyarrow.compute as pc

    enc = pc.dictionary_encode(_plain(tids))  # codes in order of first appearance
    codes = enc.indices.to_numpy(zero_copy_only=False)
    n_tx = len(enc.dictionary)
    offsets = np.zeros(n_tx + 1, dtype=np.int64)
    np.cumsum(np.bincount(codes, minlength=n_tx), out=offsets[1:])
    return normalized(offsets, ids[np.argsort(codes, kind="stable")], labels)


def arrow_column(obj) -> pa.Array | pa.ChunkedArray | None:
    """``obj`` as an Arrow array when it is one or exports one (pyarrow, polars Series,
    pandas Series with an Arrow dtype, the Arrow PyCapsule interface); else None."""
    if isinstance(obj, (pa.Array, pa.ChunkedArray)):
        return obj
    module = type(obj).__module__ or ""
    if module.startswith("polars") and hasattr(obj, "to_arrow"):
        return obj.to_arrow()
    if module.startswith("pandas") and hasattr(obj, "dtype") and hasattr(obj, "array"):
        if str(getattr(obj.dtype, "storage", "")) == "pyarrow" or type(obj.dtype).__name__ == "ArrowDtype":
            return pa.chunked_array(pa.array(obj.array))
        return None
    if hasattr(obj, "__arrow_c_stream__"):
        return pa.chunked_array(obj)
    if hasattr(obj, "__arrow_c_array__"):
        return pa.array(obj)
    return None
