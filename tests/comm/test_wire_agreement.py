"""The two wire-format modules agree byte for byte: Python's ``frames.py`` and Rust's ``wire``
(``clusterlab-net``, reached through ``clusterlab._core.wire_encode``/``wire_decode``).
Encode in one, decode in the other, for every frame kind; malformed headers get the same
reject with the same message. Also: the engine statuses and event kinds share their names."""

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterlab import _core
from clusterlab.comm.errors import ProtocolError
from clusterlab.comm.tcp.engine import EventKind, Status
from clusterlab.rendezvous import frames

H = frames.HEADER
BIG = 1 << 40


def py_decode(buf: bytes, expect: int, max_frame: int, allowed: int = 0):
    try:
        h = frames.decode_fixed(buf[:H.size], expect, max_frame, allowed)
        dtype = shape = None
        if h.kind == frames.DATA_ARRAY:
            _dt, shape = frames.decode_array_meta(buf[H.size:], h)
            dtype = buf[H.size:H.size + h.dtlen].decode()
            shape = list(shape)
        return (h.kind, h.ndim, h.dtlen, buf[7], h.tag, h.source, h.length, dtype, shape)
    except ProtocolError as e:
        return f"reject: {e}"


def rs_decode(buf: bytes, expect: int, max_frame: int, allowed: int = 0):
    try:
        return _core.wire_decode(buf, expect, max_frame, allowed)
    except ValueError as e:
        return f"reject: {e}"


DTYPES = [f"{o}{k}{n}" for k, sizes in (("b", [1]), ("i", [1, 2, 4, 8]), ("u", [1, 2, 4, 8]), ("f", [2, 4, 8, 16]),
                                         ("c", [8, 16, 32])) for n in sizes for o in "<>|="]
SHAPES = [(), (0,), (5,), (2, 3), (1, 0, 7), (2, 1, 2, 1, 2)]


def _frames():
    out = []
    for tag in (0, 1, frames.COLLECTIVE_TAG, frames.MIN_TAG, frames.MAX_USER_TAG - 1):
        for n in (0, 1, 100, BIG):
            out.append((frames.DATA_BYTES, tag, 3, n, b"", ()))
    for dts in DTYPES:
        for shape in SHAPES:
            size = int(dts[2:]) * int(np.prod(shape))
            out.append((frames.DATA_ARRAY, 7, 3, size, dts.encode(), shape))
    out += [(frames.BYE, 0, 3, 0, b"", ()), (frames.ABORT, 0, 3, 40, b"", ()), (frames.CONTROL, 0, 3, 1 << 20, b"", ())]
    return out


@pytest.mark.parametrize("kind, tag, source, length, dtype, shape", _frames())
def test_encoded_in_either_language_the_bytes_are_the_same_and_decode_in_the_other(kind, tag, source, length,
                                                                                     dtype, shape):
    meta = dtype + struct.pack(f"<{len(shape)}Q", *shape)
    py = frames.pack_header(kind, tag, source, length, meta, len(shape))
    rs = _core.wire_encode(kind, tag, source, length, dtype, list(shape))
    assert py == rs
    want = (kind, len(shape), len(dtype), 0, tag, source, length, dtype.decode() or None,
            list(shape) if kind == frames.DATA_ARRAY else None)
    assert rs_decode(py, source, 1 << 41) == want   # Python -> Rust
    assert py_decode(rs, source, 1 << 41) == want   # Rust -> Python


def test_python_payloads_encode_as_rust_does():
    # what payload_view/pack_header produce for real arrays is what Rust's encoder produces
    for arr in (np.arange(6, dtype=">i2").reshape(2, 3), np.float64(2.5), np.zeros((0, 4), np.complex64),
                np.array([True, False]), np.arange(3, dtype=np.float16)):
        head = frames.encode_header(frames.DATA_ARRAY, 5, 1, payload=arr)
        a = np.asarray(arr)
        assert head == _core.wire_encode(frames.DATA_ARRAY, 5, 1, a.nbytes, a.dtype.str.encode(), list(a.shape))


def _head(kind=0, ndim=0, dtlen=0, flags=0, tag=0, source=1, length=0, magic=frames.MAGIC):
    return H.pack(magic, kind, ndim, dtlen, flags, tag, source, length)


MALFORMED = [
    _head(magic=b"HTTP"), _head(magic=b"CLB\x07"), _head(magic=b"\x00\x00\x00\x00"), _head(magic=b"CL'\x01"),
    _head(source=0), _head(source=-1), _head(kind=5), _head(kind=255), _head(flags=4), _head(flags=1),
    _head(tag=-17), _head(tag=-100), _head(tag=frames.MAX_USER_TAG), _head(length=(1 << 30) + 1),
    _head(kind=1, ndim=33, dtlen=3), _head(kind=1, ndim=1, dtlen=2), _head(kind=1, ndim=1, dtlen=17),
    _head(kind=0, dtlen=3), _head(kind=2, ndim=1), _head(kind=3, length=(1 << 20) + 1),
    _head(kind=4, length=(1 << 20) + 1), _head(kind=2, length=1),
    _head(kind=1, ndim=1, dtlen=3, length=8) + b"|O8" + struct.pack("<Q", 1),
    _head(kind=1, ndim=1, dtlen=3, length=8) + b"<i3" + struct.pack("<Q", 1),
    _head(kind=1, ndim=1, dtlen=4, length=8) + b"<f12" + struct.pack("<Q", 1),
    _head(kind=1, ndim=1, dtlen=4, length=8) + b"<f08" + struct.pack("<Q", 1),
    _head(kind=1, ndim=1, dtlen=3, length=8) + b"<U1" + struct.pack("<Q", 2),
    _head(kind=1, ndim=1, dtlen=5, length=8) + b"<f8\x00\x00" + struct.pack("<Q", 1),
    _head(kind=1, ndim=1, dtlen=3, length=8) + b"<f8" + struct.pack("<Q", 3),
    _head(kind=1, ndim=2, dtlen=3, length=8) + b"<f8" + struct.pack("<2Q", 1 << 40, 1 << 40),
    _head(kind=1, ndim=3, dtlen=3, length=0) + b"<f8" + struct.pack("<3Q", 1 << 63, 1 << 63, 2),
    _head(kind=1, ndim=0, dtlen=3, length=4) + b"<f8",
]


@pytest.mark.parametrize("buf", MALFORMED, ids=range(len(MALFORMED)))
def test_malformed_headers_get_the_same_reject(buf):
    py, rs = py_decode(buf, 1, 1 << 30), rs_decode(buf, 1, 1 << 30)
    assert py.startswith("reject: rank 1 ")
    assert py == rs


@settings(max_examples=400, deadline=None)
@given(magic=st.sampled_from([frames.MAGIC, b"CLB\x02", b"XXXX"]), kind=st.integers(0, 6),
       ndim=st.integers(0, 34), dtlen=st.integers(0, 17), flags=st.sampled_from([0, 0, 0, 1, 2, 128]),
       tag=st.sampled_from([0, 5, -1, -16, -17, 1 << 30, (1 << 30) - 1, -(1 << 31)]),
       source=st.sampled_from([2, 2, 2, 0, -1]), length=st.sampled_from([0, 1, 8, 24, 1 << 20, (1 << 20) + 1, 1 << 33]),
       dts=st.sampled_from([b"<f8", b"|u1", b">i4", b"=c16", b"|b1", b"<f16", b"<i3", b"|O8", b"xx", b"<f8zz"]),
       dims=st.lists(st.sampled_from([0, 1, 2, 3, 1 << 32, (1 << 64) - 1]), max_size=34),
       allowed=st.sampled_from([0, 1]))
def test_fuzzed_headers_decode_alike(magic, kind, ndim, dtlen, flags, tag, source, length, dts, dims, allowed):
    meta = (dts + b"\x00" * 17)[:dtlen] + b"".join(struct.pack("<Q", d) for d in (dims + [1] * 34)[:ndim])
    buf = H.pack(magic, kind, ndim, dtlen, flags, tag, source, length) + meta
    assert py_decode(buf, 2, 1 << 32, allowed) == rs_decode(buf, 2, 1 << 32, allowed)


def test_statuses_events_and_kinds_share_their_names_with_rust():
    assert {s.name: int(s) for s in Status} == _core.NET_STATUS
    assert [k.value for k in EventKind] == list(_core.NET_EVENTS)
    assert {k.name: int(k) for k in frames.Kind} == _core.WIRE_KINDS
    c = _core.WIRE_CONSTANTS
    assert (c["MAGIC"], c["HEADER_LEN"], c["MAX_NDIM"], c["MAX_DTYPE_LEN"], c["CONTROL_LIMIT"], c["DEFAULT_MAX_FRAME"],
            c["MIN_TAG"], c["MAX_TAG"]) == (frames.MAGIC, H.size, frames.MAX_NDIM, frames.MAX_DTYPE_LEN,
                                            frames.CONTROL_LIMIT, frames.DEFAULT_MAX_FRAME, frames.MIN_TAG,
                                            frames.MAX_USER_TAG)
