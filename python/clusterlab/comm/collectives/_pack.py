"""Several payloads in one message, without pickle (tree algorithms forward whole subtrees).

Layout: magic ``CLPK``, item count (u32), then per item a kind byte (0 bytes, 1 array), for
arrays the dtype string (from a whitelist of plain numeric types) and shape, and the byte
length; then the items' bytes back to back. ``unpack`` checks every length against the
buffer, so a corrupt or hostile message raises ``ProtocolError`` instead of misreading.

>>> import numpy as np
>>> items = unpack(pack([b"ab", np.arange(3, dtype=np.int16), b""]))
>>> items[0], items[1].tolist(), items[1].dtype.str, items[2]
(b'ab', [0, 1, 2], '<i2', b'')
"""

from __future__ import annotations

import re
import struct

import numpy as np

from clusterlab.comm.errors import ProtocolError

MAGIC = b"CLPK"
_HEAD = struct.Struct("<4sI")
_ITEM = struct.Struct("<BBBQ")  # kind, len(dtype str), ndim, nbytes
_DTYPE = re.compile(r"^[<>|][biufc][0-9]{1,2}$")
MAX_ITEMS = 1 << 24
MAX_NDIM = 32


def _dtype_str(a: np.ndarray) -> str:
    s = a.dtype.str
    if not _DTYPE.match(s):
        raise TypeError(f"arrays of dtype {a.dtype} cannot be sent (plain numeric dtypes only)")
    return s


def pack(items: list) -> bytes:
    """One ``bytes`` message holding ``items`` (bytes-like or numpy arrays)."""
    head = [_HEAD.pack(MAGIC, len(items))]
    bodies = []
    for x in items:
        if isinstance(x, np.ndarray):
            ds = _dtype_str(x).encode()
            x = np.ascontiguousarray(x)
            head.append(_ITEM.pack(1, len(ds), x.ndim, x.nbytes) + ds + struct.pack(f"<{x.ndim}Q", *x.shape))
            bodies.append(memoryview(x).cast("B") if x.nbytes else b"")
        elif isinstance(x, (bytes, bytearray, memoryview)):
            mv = memoryview(x).cast("B") if not isinstance(x, bytes) else x
            head.append(_ITEM.pack(0, 0, 0, len(mv)))
            bodies.append(mv)
        else:
            raise TypeError(f"payload must be bytes-like or a numpy array, not {type(x).__name__}")
    return b"".join(head + bodies)


def unpack(buf) -> list:
    """The items of a ``pack``ed message: arrays as (writable) arrays, the rest as ``bytes``."""
    mv = memoryview(buf).cast("B") if not isinstance(buf, np.ndarray) else memoryview(buf.view(np.uint8).ravel())
    if len(mv) < _HEAD.size:
        raise ProtocolError("packed message shorter than its header")
    magic, count = _HEAD.unpack_from(mv, 0)
    if magic != MAGIC or count > MAX_ITEMS:
        raise ProtocolError("not a packed collective message (bad magic or item count)")
    off = _HEAD.size
    metas = []
    for _ in range(count):
        if off + _ITEM.size > len(mv):
            raise ProtocolError("packed message truncated in its item table")
        kind, dlen, ndim, nb = _ITEM.unpack_from(mv, off)
        off += _ITEM.size
        if kind == 0:
            metas.append((0, None, None, nb))
            continue
        if kind != 1 or ndim > MAX_NDIM or off + dlen + 8 * ndim > len(mv):
            raise ProtocolError("packed message has a malformed item header")
        ds = bytes(mv[off:off + dlen]).decode("ascii", "replace")
        off += dlen
        if not _DTYPE.match(ds):
            raise ProtocolError(f"packed message names a refused dtype {ds!r}")
        shape = struct.unpack_from(f"<{ndim}Q", mv, off)
        off += 8 * ndim
        dt = np.dtype(ds)
        if int(np.prod(shape, dtype=np.uint64)) * dt.itemsize != nb:
            raise ProtocolError("packed array's shape does not match its byte length")
        metas.append((1, dt, shape, nb))
    if off + sum(m[3] for m in metas) != len(mv):
        raise ProtocolError("packed message length does not match its item table")
    out = []
    for kind, dt, shape, nb in metas:
        chunk = mv[off:off + nb]
        off += nb
        if kind == 0:
            out.append(bytes(chunk))
        else:
            out.append(np.frombuffer(bytearray(chunk), dtype=dt).reshape(shape))
    return out
