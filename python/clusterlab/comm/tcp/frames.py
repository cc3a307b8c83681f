"""Wire format of the TCP mesh: one length-prefixed frame per message, checked before use.

A frame is a fixed 24-byte header, an optional array description, then the payload::

    magic  b"CLB\\x01"   4 bytes   (the last byte is the protocol version)
    kind   u8           DATA_BYTES, DATA_ARRAY, BYE, ABORT, CONTROL
    ndim   u8           array rank (0..MAX_NDIM), 0 for bytes
    dtlen  u8           length of the dtype string that follows (0 for bytes)
    flags  u8           reserved, must be 0
    tag    i32          message tag (COLLECTIVE_TAG..MAX_USER_TAG-1)
    source i32          sending rank: must be the rank the connection authenticated as
    length u64          payload bytes (at most the receiver's ``max_frame``)
    [dtype ascii, dtlen bytes][shape, ndim x u64]      arrays only
    payload

Nothing off the socket is ever unpickled or evaluated: the dtype string must match a plain
numeric pattern (``<f8``, ``|u1``, ``|b1``...) and ``prod(shape) * itemsize`` must equal the
payload length, otherwise ``decode_*`` raises ``ProtocolError``.

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
clusterlab.comm.errors.ProtocolError: rank 2 sent a frame with bad magic b'XXXX'
"""

from __future__ import annotations

import re
import struct
from typing import NamedTuple

import numpy as np

from clusterlab.comm.communicator import COLLECTIVE_TAG, MAX_USER_TAG
from clusterlab.comm.errors import ProtocolError

MAGIC = b"CLB\x01"
VERSION = 1
HEADER = struct.Struct("<4sBBBBiiQ")  # 24 bytes

DATA_BYTES = 0   # payload is raw bytes, arrives as ``bytes``
DATA_ARRAY = 1   # payload is a numpy buffer; dtype and shape follow the header
BYE = 2          # clean close: the peer is done and will send nothing more
ABORT = 3        # the peer is failing the job; payload = JSON {"rank": r, "detail": "..."}
CONTROL = 4      # launcher/rendezvous messages; payload = JSON (never pickle)
KINDS = (DATA_BYTES, DATA_ARRAY, BYE, ABORT, CONTROL)

MAX_NDIM = 32
MAX_DTYPE_LEN = 16
DEFAULT_MAX_FRAME = 1 << 34  # 16 GiB: larger than any sane message, small enough to catch garbage
# Tags below COLLECTIVE_TAG are reserved for the backends (none used yet).
MIN_TAG = COLLECTIVE_TAG - 15

# Plain numeric dtypes only: bool, signed/unsigned ints, floats, complex. No objects, no
# structured types, no datetimes: a peer cannot make us build anything but a flat buffer.
_DTYPE_RE = re.compile(rb"^[<>|=][biufc][0-9]{1,2}$")
_SHAPE = [struct.Struct(f"<{n}Q") for n in range(MAX_NDIM + 1)]
_DTYPE_STR: dict = {}  # np.dtype -> its wire string, checked once


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
            if dt.kind not in "biufc" or dt.fields is not None or dt.subdtype is not None:
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


def encode_header(kind: int, tag: int, source: int, payload=None, length: int = 0) -> bytes:
    """Header (+ array meta) for ``payload`` (its kind wins); for other kinds pass ``length``."""
    if payload is not None:
        k, view, meta, ndim = payload_view(payload)
        return pack_header(k, tag, source, view.nbytes, meta, ndim)
    return HEADER.pack(MAGIC, kind, 0, 0, 0, tag, source, length)


def pack_header(kind: int, tag: int, source: int, nbytes: int, meta: bytes, ndim: int) -> bytes:
    """Fast path used by the mesh: ``meta`` and ``ndim`` come from :func:`payload_view`."""
    return HEADER.pack(MAGIC, kind, ndim, len(meta) - 8 * ndim, 0, tag, source, nbytes) + meta


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
    if kind in (ABORT, CONTROL) and length > 1 << 20:
        raise ProtocolError(f"{who} sent a {length}-byte control frame (limit 1 MiB)")
    if kind == BYE and length:
        raise ProtocolError(f"{who} sent a BYE frame with a payload")
    return Header(kind, ndim, dtlen, tag, source, length)


def decode_array_meta(buf, h: Header) -> tuple[np.dtype, tuple[int, ...]]:
    """Check the dtype string and shape against the payload length."""
    dts = bytes(buf[: h.dtlen])
    if not _DTYPE_RE.match(dts):
        raise ProtocolError(f"rank {h.source} sent an array of unsupported dtype {dts!r}")
    try:
        dt = np.dtype(dts.decode("ascii"))
    except TypeError as e:
        raise ProtocolError(f"rank {h.source} sent an array of unknown dtype {dts!r}") from e
    shape = _SHAPE[h.ndim].unpack(bytes(buf[h.dtlen: h.dtlen + 8 * h.ndim]))
    n = 1
    for s in shape:
        n *= s
        if n * dt.itemsize > h.length:  # also stops absurd shapes before they overflow
            break
    if n * dt.itemsize != h.length:
        raise ProtocolError(
            f"rank {h.source} sent an array of shape {shape} and dtype {dt} in {h.length} bytes")
    return dt, tuple(shape)
