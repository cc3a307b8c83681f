"""Read and write basket files by format: FIMI ``.dat``, CSV (``transaction_id,item``), Parquet.

>>> import tempfile, os
>>> p = os.path.join(tempfile.mkdtemp(), "b.dat")
>>> write_baskets(Baskets.from_lists([[1, 2], [3]]), p)
>>> read_baskets(p).to_lists()
[[1, 2], [3]]
"""

from __future__ import annotations

import os
from pathlib import Path

from clusterlab import _core
from clusterlab._atomic import atomic_path
from clusterlab.data.baskets import Baskets
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
    """Read a FIMI file, or only the lines that start in byte range ``[start, end)``."""
    try:
        offsets, items, dropped = _core.read_fimi(os.fspath(path), start, end)
    except _core.BasketParseError as e:
        raise _wrap_parse_error(path, e) from None
    except OSError as e:
        raise BasketFormatError(path, 0, 0, f"cannot read: {e.strerror or e}") from None
    return Baskets._trusted(offsets, items, None, dropped)


def read_csv(path, tid_col: str = "transaction_id", item_col: str = "item") -> Baskets:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise BasketFormatError(path, 0, 0, f"cannot read: {e.strerror or e}") from None
    try:
        offsets, items, labels, _tids = _core.parse_csv_baskets(data, tid_col, item_col)
    except _core.BasketParseError as e:
        raise _wrap_parse_error(path, e) from None
    return Baskets._trusted(offsets, items, labels)


def read_parquet(path, tid_col: str = "transaction_id", item_col: str = "item") -> Baskets:
    """Parquet baskets: either long form (``transaction_id``, ``item`` columns) or one list
    column ``items`` with one row per transaction."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as e:
        raise BasketFormatError(path, 0, 0, f"not a readable Parquet file: {e}") from None
    names = table.column_names
    if "items" in names and pa.types.is_list(table.schema.field("items").type) \
            or "items" in names and pa.types.is_large_list(table.schema.field("items").type):
        lists = table.column("items").to_pylist()
        for row, t in enumerate(lists):
            if t is None:
                raise BasketFormatError(path, row + 1, 1, "null transaction in column 'items'")
        return Baskets.from_lists(lists)
    for col in (tid_col, item_col):
        if col not in names:
            raise BasketFormatError(path, 0, 0, f"missing column {col!r} (found: {', '.join(names)})")
    tids = table.column(tid_col).to_pylist()
    items = table.column(item_col).to_pylist()
    groups: dict = {}
    for row, (t, i) in enumerate(zip(tids, items, strict=True)):
        if t is None or i is None:
            raise BasketFormatError(path, row + 1, 1, "null transaction id or item")
        groups.setdefault(t, []).append(i)
    return Baskets.from_lists(groups.values())


def read_baskets(path, format: str | None = None, **kw) -> Baskets:
    """Read a basket file; the format follows the extension unless ``format`` is given."""
    fmt = detect_format(path, format)
    if not Path(path).exists():
        raise BasketFormatError(path, 0, 0, "no such file")
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
