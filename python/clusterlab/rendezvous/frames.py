"""Wire format of the TCP mesh, the Python half: the only place in Python that packs or parses a
frame header. The Rust half is ``crates/clusterlab-net/src/wire.rs``; both encode the same
bytes and reject the same frames with the same messages (``tests/comm/test_wire_agreement.py``).

A frame is a fixed 24-byte header, an optional array description, then the payload::

    magic  b"CLB\\x01"   4 bytes   (the last byte is the protocol version)
    kind   u8           Kind: BYTES, ARRAY, BYE, ABORT, CONTROL
    ndim   u8           array rank (0..MAX_NDIM), 0 for other kinds
    dtlen  u8           length of the dtype string that follows (0 for other kinds)
    flags  u8           reserved, must be 0 (unless the receiver allows a bit)
    tag    i32          message tag (MIN_TAG..MAX_USER_TAG-1)
    source i32          sending rank: must be the rank the connection authenticated as
    length u64          payload bytes (at most the receiver's ``max_frame``)
    [dtype ascii, dtlen bytes][shape, ndim x u64]      arrays only
    payload

Nothing off the socket is ever unpickled or evaluated: the dtype string must be one of the plain
numeric ones (byte order ``<>|=``, kind ``biufc``, an item size numpy has for that kind:
``<f8``, ``|u1``, ``|b1``...) and ``prod(shape) * itemsize`` must equal the payload length,
otherwise ``decode_*`` raises ``ProtocolError``.

>>> import numpy as np
>>> head = encode_header(DATA_ARRAY, tag=7, source=2, payload=np.zeros((2, 3), "<i4"))
>>> h = decode_fixed(head[:HEADER.size], expect_source=2, max_frame=1 << 20)
>>> (h.kind, h.tag, h.source, h.length, h.ndim)
(1, 7, 2, 24, 2)
>>> decode_array_meta(head[HEADER.size:], h)
(dtype('int32'), (2, 3))
>>> decode_fixed(b"XXXX" + head[4:HEADER.size], expect_source=2, max_frame=1 << 20)
Traceback (most recent call last):
...
clusterlab.rendezvous.errors.ProtocolError: rank 2 sent a frame with bad magic b'XXXX'
"""

from __future__ import annotations

import enum
import json
import re
import struct
from typing import NamedTuple

import numpy as np

from clusterlab.rendezvous.errors import ProtocolError

# Tags >= 0 are the user's. Collectives use COLLECTIVE_TAG; backends may reserve more below it.
COLLECTIVE_TAG = -1
MAX_USER_TAG = 2**30

MAGIC = b"CLB\x01"
VERSION = 1
HEADER = struct.Struct("<4sBBBBiiQ")  # 24 bytes


class Kind(enum.IntEnum):
    """What a frame carries (the numbers are on the wire; the names are Rust's ``wire::Kind``)."""

    BYTES = 0     # payload is raw bytes, arrives as ``bytes``
    ARRAY = 1     # payload is a numpy buffer; dtype and shape follow the header
    BYE = 2       # clean close: the peer is done and will send nothing more
    ABORT = 3     # the peer is failing the job; payload = JSON {"rank": r, "detail": "..."}
    CONTROL = 4   # launcher/rendezvous messages; payload = JSON (never pickle)


DATA_BYTES, DATA_ARRAY, BYE, ABORT, CONTROL = (int(k) for k in Kind)
KINDS = tuple(int(k) for k in Kind)

MAX_NDIM = 32
MAX_DTYPE_LEN = 16
CONTROL_LIMIT = 1 << 20       # ABORT and CONTROL payloads (JSON)
DEFAULT_MAX_FRAME = 1 << 34   # 16 GiB: larger than any sane message, small enough to catch garbage
# Tags below COLLECTIVE_TAG are reserved for the backends (none used yet).
MIN_TAG = COLLECTIVE_TAG - 15

# Plain numeric dtypes only: bool, signed/unsigned ints, floats, complex, with the item sizes
# numpy has. No objects, no structured types, no datetimes: a peer cannot make us build
# anything but a flat buffer.
_DTYPE_RE = re.compile(rb"^[<>|=]([biufc])([1-9][0-9]?)$")
_ITEMSIZES = {b"b": (1,), b"i": (1, 2, 4, 8), b"u": (1, 2, 4, 8), b"f": (2, 4, 8, 16), b"c": (8, 16, 32)}
_SHAPE = [struct.Struct(f"<{n}Q") for n in range(MAX_NDIM + 1)]
_DTYPE_STR: dict = {}   # np.dtype -> its wire string, checked once
_WIRE_DTYPE: dict = {}  # wire string -> np.dtype, checked once
_META: dict = {}        # (array description bytes, payload length) -> (dtype, shape), checked once


class Header(NamedTuple):
    kind: int
    ndim: int
    dtlen: int
    tag: int
    source: int
    length: int

    @property
    def meta_len(self) -> int:
        """Bytes of array description between the fixed header and the payload."""
        return self.dtlen + 8 * self.ndim


def wire_dtype(dts: bytes) -> np.dtype | None:
    """The numpy dtype of wire string ``dts``, or None if it is not an accepted one.

    >>> wire_dtype(b"<f8"), wire_dtype(b"|O8"), wire_dtype(b"<i3")
    (dtype('float64'), None, None)
    """
    dt = _WIRE_DTYPE.get(dts)
    if dt is not None:
        return dt
    m = _DTYPE_RE.match(dts)
    if not m or int(m.group(2)) not in _ITEMSIZES[m.group(1)]:
        return None
    try:
        dt = np.dtype(dts.decode("ascii"))
    except TypeError:  # a size this platform's numpy lacks (e.g. no 128-bit floats)
        return None
    if dt.itemsize != int(m.group(2)):
        return None
    _WIRE_DTYPE[dts] = dt
    return dt


def payload_view(data) -> tuple[int, memoryview, bytes, int]:
    """``(kind, flat byte view, array meta, ndim)`` of a payload, without copying contiguous data.

    >>> import numpy as np
    >>> k, view, meta, ndim = payload_view(np.arange(3, dtype="<u2"))
    >>> k, view.nbytes, meta[:3], ndim
    (1, 6, b'<u2', 1)
    >>> payload_view(b"abc")[0], payload_view(b"abc")[2]
    (0, b'')
    """
    if isinstance(data, np.generic):
        data = np.asarray(data)  # a numpy scalar travels as a 0-d array
    if isinstance(data, np.ndarray):
        dt = data.dtype
        dts = _DTYPE_STR.get(dt)
        if dts is None:
            if dt.kind not in "biufc" or dt.fields is not None or dt.subdtype is not None \
                    or wire_dtype(dt.str.encode()) is None:
                raise TypeError(f"cannot send arrays of dtype {dt} (plain numeric dtypes only)")
            dts = _DTYPE_STR[dt] = dt.str.encode()
        ndim = data.ndim
        if ndim > MAX_NDIM:
            raise ValueError(f"array has {ndim} dimensions (at most {MAX_NDIM})")
        if not data.flags.c_contiguous:
            data = np.ascontiguousarray(data)  # the only copy: the caller's array is strided
        meta = dts + _SHAPE[ndim].pack(*data.shape)
        if data.size:
            view = memoryview(data).cast("B") if dt.kind in "biuf" and dt.isnative else \
                memoryview(data.reshape(-1).view(np.uint8))
        else:
            view = memoryview(b"")
        return DATA_ARRAY, view, meta, ndim
    view = memoryview(data)
    if view.ndim != 1 or view.itemsize != 1 or not view.c_contiguous:
        view = view.cast("B") if view.c_contiguous else memoryview(view.tobytes())
    return DATA_BYTES, view, b"", 0


def pack_header(kind: int, tag: int, source: int, nbytes: int, meta: bytes = b"", ndim: int = 0,
                flags: int = 0) -> bytes:
    """Header + array description; ``meta`` and ``ndim`` as :func:`payload_view` gives them."""
    return HEADER.pack(MAGIC, kind, ndim, len(meta) - 8 * ndim, flags, tag, source, nbytes) + meta


def encode_header(kind: int, tag: int, source: int, payload=None, length: int = 0, flags: int = 0) -> bytes:
    """Header (+ array meta) for ``payload`` (its kind wins); for other kinds pass ``length``."""
    if payload is not None:
        k, view, meta, ndim = payload_view(payload)
        return pack_header(k, tag, source, view.nbytes, meta, ndim, flags)
    return pack_header(kind, tag, source, length, flags=flags)


def encode_bye(source: int) -> bytes:
    """A goodbye frame: ``source`` is done and sends nothing more."""
    return pack_header(BYE, 0, source, 0)


def encode_abort(source: int, culprit: int, detail: str) -> bytes:
    """An ABORT frame from ``source``: the job fails because of rank ``culprit``."""
    body = json.dumps({"rank": culprit, "detail": detail[:2000]}).encode()
    return pack_header(ABORT, 0, source, len(body)) + body


def decode_abort(body: bytes, source: int) -> tuple[int, str]:
    """``(culprit, detail)`` of an ABORT frame's payload from rank ``source``."""
    try:
        msg = json.loads(body)
        return int(msg["rank"]), str(msg.get("detail", ""))
    except (ValueError, KeyError, TypeError):
        raise ProtocolError(f"rank {source} sent a malformed ABORT frame") from None


def decode_fixed(buf, expect_source: int, max_frame: int, allowed_flags: int = 0) -> Header:
    """Parse and check the fixed header; ``ProtocolError`` names the peer on any violation."""
    magic, kind, ndim, dtlen, flags, tag, source, length = HEADER.unpack(buf)
    flags &= ~allowed_flags
    who = f"rank {expect_source}"
    if magic != MAGIC:
        if magic[:3] == MAGIC[:3]:
            raise ProtocolError(f"{who} speaks protocol version {magic[3]}, this is version {VERSION}")
        raise ProtocolError(f"{who} sent a frame with bad magic {magic!r}")
    if kind not in KINDS:
        raise ProtocolError(f"{who} sent a frame of unknown kind {kind}")
    if flags:
        raise ProtocolError(f"{who} sent a frame with reserved flags {flags:#x}")
    if source != expect_source:
        raise ProtocolError(f"{who} sent a frame claiming to come from rank {source}")
    if not (MIN_TAG <= tag < MAX_USER_TAG):
        raise ProtocolError(f"{who} sent a frame with tag {tag} outside {MIN_TAG}..{MAX_USER_TAG - 1}")
    if length > max_frame:
        raise ProtocolError(f"{who} sent a {length}-byte frame; the limit is {max_frame} bytes")
    if kind == DATA_ARRAY:
        if ndim > MAX_NDIM or not (3 <= dtlen <= MAX_DTYPE_LEN):
            raise ProtocolError(f"{who} sent an array header with ndim {ndim}, dtype length {dtlen}")
    elif ndim or dtlen:
        raise ProtocolError(f"{who} sent a non-array frame with array meta")
    if kind in (ABORT, CONTROL) and length > CONTROL_LIMIT:
        raise ProtocolError(f"{who} sent a {length}-byte control frame (limit 1 MiB)")
    if kind == BYE and length:
        raise ProtocolError(f"{who} sent a BYE frame with a payload")
    return Header(kind, ndim, dtlen, tag, source, length)


_unpack_from = HEADER.unpack_from


def decode_at(buf, off: int, expect_source: int, max_frame: int) -> Header:
    """:func:`decode_fixed` of the header at ``buf[off:]``, for the receive loop: one unpack
    and a few comparisons when all is well, the full checks (and their precise error) otherwise."""
    magic, kind, ndim, dtlen, flags, tag, source, n = _unpack_from(buf, off)
    if (magic != MAGIC or flags or source != expect_source or n > max_frame or not (MIN_TAG <= tag < MAX_USER_TAG)
            or kind > CONTROL or (kind == DATA_ARRAY and not (ndim <= MAX_NDIM and 3 <= dtlen <= MAX_DTYPE_LEN))
            or (kind != DATA_ARRAY and (ndim or dtlen)) or (kind == BYE and n)
            or (kind >= ABORT and n > CONTROL_LIMIT)):
        return decode_fixed(bytes(buf[off:off + HEADER.size]), expect_source, max_frame)
    return Header(kind, ndim, dtlen, tag, source, n)


def decode_array_meta(buf, h: Header) -> tuple[np.dtype, tuple[int, ...]]:
    """Check the dtype string and shape against the payload length (``buf`` holds at least
    ``h.meta_len`` bytes of array description)."""
    key = (bytes(buf[: h.meta_len]), h.length)
    hit = _META.get(key)
    if hit is not None:
        return hit
    dts = key[0][: h.dtlen]
    dt = wire_dtype(dts)
    if dt is None:
        raise ProtocolError(f"rank {h.source} sent an array of unsupported dtype {dts!r}")
    shape = _SHAPE[h.ndim].unpack(key[0][h.dtlen:])
    n = dt.itemsize
    for s in shape:  # the exact product (at most 32 factors below 2**64)
        n *= s
    if n != h.length:
        raise ProtocolError(f"rank {h.source} sent an array of shape {shape} and dtype "
                            f"{dts.decode('ascii')!r} in {h.length} bytes")
    if len(_META) > 4096:
        _META.clear()
    _META[key] = (dt, tuple(shape))
    return _META[key]
