"""Frame format and authentication of the TCP mesh, attacked with raw sockets."""

import socket
import struct
import threading
import time

import numpy as np
import pytest

from clusterlab.comm import CommTimeout, PeerFailure, ProtocolError
from clusterlab.comm.tcp import local_mesh
from clusterlab.comm.tcp.mesh import build_mesh, listen
from clusterlab.rendezvous import frames, handshake

H = frames.HEADER


@pytest.fixture(params=["rust", "python"])
def engine(request):
    """Both mesh engines: the Rust hot path and the Python reference must agree."""
    return request.param


def raw_frame(kind=frames.DATA_BYTES, tag=0, source=1, payload=b"", magic=frames.MAGIC, meta=b"", ndim=0, dtlen=0,
              length=None, flags=0):
    n = len(payload) if length is None else length
    return H.pack(magic, kind, ndim, dtlen, flags, tag, source, n) + meta + payload


@pytest.mark.parametrize("frame, message", [
    (raw_frame(magic=b"HTTP"), "bad magic"),
    (raw_frame(magic=b"CLB\x07"), "protocol version 7"),
    (raw_frame(source=0), "claiming to come from rank 0"),
    (raw_frame(kind=9), "unknown kind"),
    (raw_frame(flags=4), "reserved flags"),
    (raw_frame(tag=-100), "outside"),
    (raw_frame(length=1 << 40), "limit"),
    (raw_frame(kind=frames.DATA_ARRAY, meta=b"|O8" + struct.pack("<Q", 1), ndim=1, dtlen=3, payload=bytes(8)),
     "unsupported dtype"),
    (raw_frame(kind=frames.DATA_ARRAY, meta=b"<f8" + struct.pack("<Q", 3), ndim=1, dtlen=3, payload=bytes(8)),
     r"shape \(3,\)"),
    (raw_frame(kind=frames.DATA_ARRAY, meta=b"<f8" + struct.pack("<2Q", 1 << 40, 1 << 40), ndim=2, dtlen=3,
               payload=bytes(8)), "shape"),
    (raw_frame(kind=frames.DATA_BYTES, meta=b"<f8", ndim=0, dtlen=3, payload=b""), "array meta"),
    (raw_frame(kind=frames.ABORT, payload=b"not json"), "malformed ABORT"),
])
def test_bad_frames_raise_protocol_error(frame, message, engine):
    a, b = local_mesh(2, max_frame=1 << 30, engine=engine)
    try:
        b._conns[0].sock.sendall(frame)  # rank 1 misbehaves on the wire
        with pytest.raises(ProtocolError, match=message):
            a.recv(1, timeout=5)
        with pytest.raises(ProtocolError):  # and the failure sticks
            a.recv(1, timeout=5)
    finally:
        a.close()
        b.close()


def test_frame_limit_is_the_receivers(engine):
    a, b = local_mesh(2, max_frame=1000, engine=engine)
    try:
        b.send(0, bytes(999))
        assert len(a.recv(1, timeout=5)) == 999
        with pytest.raises(Exception, match="exceeds the frame limit"):
            b.send(0, bytes(1001))
    finally:
        a.close()
        b.close()


def _mesh_with_intruder(intrude):
    """Two ranks build a mesh while an intruder connects to rank 0 first."""
    secret = b"s" * 32
    l0, l1 = listen(), listen()
    table = [l0.getsockname(), l1.getsockname()]
    out = {}

    def rank(r, ls):
        out[r] = build_mesh(r, 2, table, ls, secret, timeout=10)

    t0 = threading.Thread(target=rank, args=(0, l0))
    t0.start()
    intrude(table[0])
    time.sleep(0.1)
    t1 = threading.Thread(target=rank, args=(1, l1))
    t1.start()
    t0.join(15)
    t1.join(15)
    return out


def _closed_by_peer(s: socket.socket) -> bool:
    s.settimeout(5)
    try:
        while True:
            if not s.recv(4096):
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_intruder_without_secret_is_rejected_and_mesh_still_forms(capfd):
    results = {}

    def wrong_secret(addr):
        s = socket.create_connection(addr)
        with pytest.raises(ProtocolError, match="rejected|failed authentication"):
            handshake.connect(s, b"w" * 32, 1, 0, 5)
        results["rejected"] = True
        s.close()

    out = _mesh_with_intruder(wrong_secret)
    assert results["rejected"] and set(out) == {0, 1}
    out[1].send(0, b"real")
    assert out[0].recv(1, timeout=5) == b"real"
    for c in out.values():
        c.close()
    assert "rejected a connection" in capfd.readouterr().err


def test_intruder_sending_garbage_is_dropped():
    seen = {}

    def garbage(addr):
        s = socket.create_connection(addr)
        s.sendall(b"GET / HTTP/1.0\r\n\r\n" + b"x" * 100)
        seen["closed"] = _closed_by_peer(s)

    out = _mesh_with_intruder(garbage)
    assert seen["closed"] and set(out) == {0, 1}
    for c in out.values():
        c.close()


def test_replayed_hello_with_forged_mac_is_rejected():
    secret = b"k" * 32
    srv = socket.create_server(("127.0.0.1", 0))
    c = socket.create_connection(srv.getsockname())
    s, _ = srv.accept()
    res = {}
    t = threading.Thread(target=lambda: res.setdefault("e", _catch(lambda: handshake.accept(s, secret, 0, {1}, 5))))
    t.start()
    c.sendall(struct.pack("<4sB3xii32s", b"CLBH", 1, 1, 0, bytes(32)))
    c.recv(4 + 8 + 32 + 32)
    c.sendall(bytes(32))  # a MAC guessed without the secret
    t.join(5)
    assert isinstance(res["e"], ProtocolError) and "failed authentication" in str(res["e"])
    for x in (c, s, srv):
        x.close()


def _catch(fn):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001
        return e


def test_listeners_bind_to_loopback_only():
    ls = listen()
    assert ls.getsockname()[0] == "127.0.0.1"
    ls.close()


def test_every_wait_is_bounded(engine):
    a, b = local_mesh(2, drainer=False, engine=engine)  # b never reads: nobody drains its sockets
    try:
        t = time.monotonic()
        with pytest.raises(CommTimeout, match="timed out waiting for a message from rank 1 with tag 0"):
            a.recv(1, timeout=0.3)
        with pytest.raises(CommTimeout):
            a.recv_any(timeout=0.2)
        assert time.monotonic() - t < 2
        # a full send blocks only until the timeout when the peer never reads
        a.default_timeout = 0.5
        with pytest.raises(CommTimeout, match="room to send"):
            for _ in range(200):
                a.send(1, np.zeros(1 << 20))
    finally:
        a.close()
        b.close()


def test_the_drainer_reads_while_the_program_is_away_and_hands_back_the_sockets(engine):
    """A rank away from communication calls (here: not calling at all) still takes in what a peer
    sends, so the peer's sends complete instead of timing out; its next call gets every message,
    in order; and the drainer stays out of a recv that is under way."""
    a, b = local_mesh(2, engine=engine)
    try:
        b.send(0, b"start")  # b has made a call: the drainer waits for it to go idle
        a.recv(1)
        a.default_timeout = 5.0
        chunk = np.arange(1 << 17, dtype=np.float64)  # 1 MiB: 32 of them exceed the socket buffers
        t = time.monotonic()
        for i in range(32):
            chunk[0] = i
            a.send(1, chunk, tag=4)
        assert time.monotonic() - t < 4.5  # drained by b's background reader, not timed out
        got = [b.recv(0, tag=4)[0] for _ in range(32)]
        assert got == list(range(32))
        # a long recv holds the sockets: the drainer must not take the message from under it
        out = {}
        th = threading.Thread(target=lambda: out.setdefault("m", b.recv(0, tag=5, timeout=5.0)))
        th.start()
        time.sleep(0.3)  # past the drainer's idle threshold while b waits in recv
        a.send(1, b"late", tag=5)
        th.join(5.0)
        assert out.get("m") == b"late"
    finally:
        a.close()
        b.close()


def test_peer_close_and_death_are_named(engine):
    a, b, c = local_mesh(3, engine=engine)
    b.close()  # clean goodbye
    with pytest.raises(PeerFailure, match="rank 1 failed: it closed its connection"):
        a.recv(1, timeout=5)
    c._conns[0].sock.close()  # rank 2 vanishes without goodbye
    for cc in c._conns.values():
        cc.sock.close()
    with pytest.raises(PeerFailure) as ei:
        a.recv(2, timeout=5)
    assert ei.value.rank == 2
    a.close()


def test_engines_agree_on_every_payload(engine):
    import threading

    from tests.comm import scenarios

    a, b = local_mesh(2, engine=engine)
    try:
        ps = scenarios.payloads()
        t = threading.Thread(target=lambda: [a.send(1, p, tag=i) for i, p in enumerate(ps)])
        t.start()
        got = [scenarios.digest(b.recv(0, tag=i, timeout=30)) for i in range(len(ps))]
        t.join(30)
        assert got == [scenarios.expected_digest(p) for p in ps]
        # a message queued before its sender said goodbye is still delivered
        a.send(1, b"last words", tag=77)
        a.close()
        assert b.recv(0, tag=77, timeout=5) == b"last words"
        with pytest.raises(PeerFailure, match="closed its connection"):
            b.recv(0, tag=77, timeout=5)
    finally:
        a.close()
        b.close()
