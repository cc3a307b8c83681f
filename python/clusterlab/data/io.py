"""Read and write basket files by format: FIMI ``.dat``, CSV (``transaction_id,item``), Parquet.

>>> import tempfile, os
>>> p = os.path.join(tempfile.mkdtemp(), "b.dat")
>>> write_baskets(Baskets.from_lists([[1, 2], [3]]), p)
>>> read_baskets(p).to_lists()
[[1, 2], [3]]
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from clusterlab import _core
from clusterlab._atomic import atomic_path
from clusterlab.data import columns
from clusterlab.data.baskets import Baskets
from clusterlab.data.source import input_stat, is_seekable_file, open_stream, read_all
from clusterlab.errors import BasketFormatError, ConfigError

FORMATS = ("fimi", "csv", "parquet")


def detect_format(path: str | os.PathLike, fmt: str | None = None) -> str:
    if fmt:
        if fmt not in FORMATS:
            raise ConfigError(f"unknown basket format {fmt!r}; choose one of {', '.join(FORMATS)}")
        return fmt
    suffix = Path(path).suffix.lower()
    return {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}.get(suffix, "fimi")


def _wrap_parse_error(path, err) -> BasketFormatError:
    message, line, column = err.args
    return BasketFormatError(path, line, column, message)


def read_fimi(path, start: int | None = None, end: int | None = None) -> Baskets:
    """Read a FIMI file, or only the lines that start in byte range ``[start, end)``.

    Pipes, FIFOs, ``/dev/stdin`` and /proc files are read as a stream (no byte ranges)."""
    st = input_stat(path)
    try:
        if is_seekable_file(st) or start is not None or end is not None:
            if not stat.S_ISREG(st.st_mode):
                raise BasketFormatError(path, 0, 0, "a byte range needs a regular file, not a pipe or device")
            offsets, items, dropped = _core.read_fimi(os.fspath(path), start, end)
        else:
            with open_stream(path, st) as fd:
                offsets, items, dropped = _core.read_fimi_fd(fd)
    except _core.BasketParseError as e:
        raise _wrap_parse_error(path, e) from None
    except OSError as e:
        raise BasketFormatError(path, 0, 0, f"cannot read: {e.strerror or e}") from None
    return Baskets._trusted(offsets, items, None, dropped)


def _read_bytes(path) -> bytes:
    st = input_stat(path)
    if is_seekable_file(st):
        try:
            return Path(path).read_bytes()
        except OSError as e:
            raise BasketFormatError(path, 0, 0, f"cannot read: {e.strerror or e}") from None
    with open_stream(path, st) as fd:
        return read_all(path, fd)


def read_csv(path, tid_col: str = "transaction_id", item_col: str = "item", *,
             rank: int = 0, size: int = 1) -> Baskets:
    """Long-form CSV baskets; with ``rank``/``size`` only that share of the transactions
    (in order of first appearance), numbered with the whole file's item dictionary."""
    data = _read_bytes(path)
    try:
        offsets, items, labels, _tids = _core.parse_csv_baskets(data, tid_col, item_col, rank, size)
    except _core.BasketParseError as e:
        raise _wrap_parse_error(path, e) from None
    return Baskets._trusted(offsets, items, labels)


def _parquet_fail(path, names, col: str):
    def fail(row: int, message: str):
        where = f"column {col!r}" + (f", row {row}" if row else "")
        raise BasketFormatError(path, row, names.index(col) + 1, f"{where}: {message}")

    return fail


def _open_parquet(path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    st = input_stat(path)
    try:
        if is_seekable_file(st):
            return pq.ParquetFile(path)
        return pq.ParquetFile(pa.BufferReader(_read_bytes(path)))  # a stream: Parquet needs its footer
    except (OSError, pa.ArrowInvalid) as e:
        raise BasketFormatError(path, 0, 0, f"not a readable Parquet file: {e}") from None


def parquet_layout(path, pf, tid_col: str = "transaction_id", item_col: str = "item") -> str:
    """``"list"`` (a list column ``items``, one row per transaction) or ``"long"``."""
    import pyarrow as pa

    schema = pf.schema_arrow
    names = schema.names
    if "items" in names:
        t = schema.field("items").type
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            return "list"
    for col in (tid_col, item_col):
        if col not in names:
            raise BasketFormatError(path, 0, 0, f"missing column {col!r} (found: {', '.join(names)}); "
                                                "give a list column 'items' or the long form")
    return "long"


def read_parquet(path, tid_col: str = "transaction_id", item_col: str = "item", *,
                 rank: int = 0, size: int = 1) -> Baskets:
    """Parquet baskets: either one list column ``items`` with one row per transaction, or long
    form (``transaction_id``, ``item`` columns). Items are integers 0..4294967295 or strings;
    anything else (nulls, floats, nested lists, ids out of range) is refused naming the
    column and row. With ``rank``/``size``, only that share of the transactions: in list
    form with integer items a rank reads only the row groups holding its rows."""
    import pyarrow as pa

    pf = _open_parquet(path)
    names = pf.schema_arrow.names
    layout = parquet_layout(path, pf, tid_col, item_col)
    try:
        if layout == "list":
            first_row = 0
            value_type = pf.schema_arrow.field("items").type.value_type
            if size > 1 and pa.types.is_integer(value_type):
                col, first_row = _list_share(pf, rank, size)
                lo = hi = None
            else:
                col = pf.read(columns=["items"]).column("items")
                n = len(col)
                lo, hi = n * rank // size, n * (rank + 1) // size

            def fail(row: int, message: str):
                _parquet_fail(path, names, "items")(row + first_row if row else 0, message)

            csr = columns.list_column_csr(col, fail)
            b = Baskets._trusted(*csr)
            return b if lo is None or size == 1 else b.slice(lo, hi)
        table = pf.read(columns=[tid_col, item_col])
        csr = columns.long_form_csr(table.column(tid_col), table.column(item_col),
                                    _parquet_fail(path, names, tid_col), _parquet_fail(path, names, item_col))
        b = Baskets._trusted(*csr)
        n = len(b)
        return b if size == 1 else b.slice(n * rank // size, n * (rank + 1) // size)
    except (OSError, pa.ArrowException) as e:
        raise BasketFormatError(path, 0, 0, f"not a readable Parquet file: {e}") from None


def _list_share(pf, rank: int, size: int):
    """Rows ``[n*rank/size, n*(rank+1)/size)`` of the ``items`` column, reading only the row
    groups that hold them; also the index of the first row (for error messages)."""
    import pyarrow as pa

    meta = pf.metadata
    n = meta.num_rows
    lo, hi = n * rank // size, n * (rank + 1) // size
    groups, first, pos = [], None, 0
    for g in range(meta.num_row_groups):
        rows = meta.row_group(g).num_rows
        if pos < hi and pos + rows > lo:
            groups.append(g)
            first = pos if first is None else first
        pos += rows
    if not groups:
        return pa.chunked_array([], pf.schema_arrow.field("items").type), lo
    col = pf.read_row_groups(groups, columns=["items"]).column("items")
    return col.slice(lo - first, hi - lo), lo


def read_baskets(path, format: str | None = None, **kw) -> Baskets:
    """Read a basket file; the format follows the extension unless ``format`` is given.
    Pipes, FIFOs and ``/dev/stdin`` work too (FIMI is streamed; give ``format`` when the
    name has no extension)."""
    fmt = detect_format(path, format)
    return {"fimi": read_fimi, "csv": read_csv, "parquet": read_parquet}[fmt](path, **kw)


def write_baskets(baskets: Baskets, path, format: str | None = None) -> None:
    """Write baskets atomically. FIMI writes item ids (string labels need CSV or Parquet)."""
    fmt = detect_format(path, format)
    with atomic_path(path) as tmp:
        if fmt == "fimi":
            if baskets.labels is not None:
                raise ConfigError("FIMI files hold integer items; write labelled baskets as .csv or .parquet")
            _core.write_fimi(os.fspath(tmp), baskets.offsets, baskets.items)
        elif fmt == "csv":
            import csv

            with open(tmp, "w", newline="", encoding="utf-8") as f:
                w = csv.writer(f)
                w.writerow(["transaction_id", "item"])
                for t, tx in enumerate(baskets):
                    for i in tx:
                        w.writerow([t, baskets.label(int(i))])
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            values = pa.array(baskets.items)
            if baskets.labels is not None:
                values = pa.DictionaryArray.from_arrays(values, pa.array(baskets.labels)).cast(pa.string())
            col = pa.LargeListArray.from_arrays(pa.array(baskets.offsets), values)
            pq.write_table(pa.table({"items": col}), tmp)
