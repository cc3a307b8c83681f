"""How a launched job's rank 0 hands its result to the driver: the itemset table as one Arrow
IPC stream, the per-pass and per-rank statistics as JSON in its schema metadata (nothing is
pickled). An input error every rank agreed on travels as a small JSON-able record instead, so
the driver raises it as the same one-line error a sequential run gives.

>>> import pyarrow as pa
>>> t = pa.table({"count": [3]})
>>> back, passes, ranks = decode_result(encode_result(t, [{"pass": 1}], [{"rank": 0}]))
>>> back.equals(t), passes, ranks
(True, [{'pass': 1}], [{'rank': 0}])
>>> from clusterlab.errors import BasketFormatError
>>> str(error_from_record(error_record(BasketFormatError("b.csv", 2, 3, "bad item"))))
'b.csv:2:3: bad item'
"""

from __future__ import annotations

import json

from clusterlab.errors import BasketFormatError, ClusterlabError, ConfigError

_PASSES_KEY = b"clusterlab.passes"
_RANKS_KEY = b"clusterlab.ranks"


def encode_result(table, passes: list[dict], ranks: list[dict]) -> bytes:
    """``(table, passes, ranks)`` as one Arrow IPC stream."""
    import pyarrow as pa

    meta = dict(table.schema.metadata or {})
    meta[_PASSES_KEY] = json.dumps(passes).encode()
    meta[_RANKS_KEY] = json.dumps(ranks).encode()
    sink = pa.BufferOutputStream()
    t = table.replace_schema_metadata(meta)
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    return sink.getvalue().to_pybytes()


def decode_result(data: bytes):
    """Inverse of ``encode_result``: the table exactly as rank 0 built it, the passes, the ranks."""
    import pyarrow as pa

    t = pa.ipc.open_stream(data).read_all()
    meta = dict(t.schema.metadata or {})
    passes = json.loads(meta.pop(_PASSES_KEY, b"[]"))
    ranks = json.loads(meta.pop(_RANKS_KEY, b"[]"))
    return t.replace_schema_metadata(meta or None), passes, ranks


def error_record(e: ClusterlabError) -> dict:
    """A clusterlab error as a JSON-able record (its class and what it names)."""
    if isinstance(e, BasketFormatError):
        return {"error": "BasketFormatError", "path": e.path, "line": e.line, "column": e.column, "message": e.message}
    return {"error": "ConfigError" if isinstance(e, ConfigError) else "ClusterlabError", "message": str(e)}


def error_from_record(rec: dict) -> ClusterlabError:
    """The error a record describes (the same class and message as on the rank)."""
    kind = rec.get("error")
    if kind == "BasketFormatError":
        return BasketFormatError(rec["path"], rec["line"], rec["column"], rec["message"])
    if kind == "ConfigError":
        return ConfigError(rec["message"])
    return ClusterlabError(rec.get("message", "a rank failed"))
