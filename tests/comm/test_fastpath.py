"""The TCP mesh's latency path in Rust (``NetEngine.comm_send``/``comm_recv``): no Python frame
per small message, the same results and errors as the Python path, and the engine's own
call/drainer lock (bounded waits, safe under threads)."""

import sys
import threading
import time

import numpy as np
import pytest

from clusterlab.comm import CommError, CommTimeout, PeerFailure
from clusterlab.comm.tcp import local_mesh
from clusterlab.comm.tcp.communicator import TcpCommunicator


@pytest.fixture
def pair():
    a, b = local_mesh(2, engine="rust")
    yield a, b
    a.close()
    b.close()


def test_small_messages_take_no_python_frame(pair):
    """A ping-pong of small payloads runs no Python function of clusterlab (it did: send, recv)."""
    a, b = pair
    payloads = [b"x", np.zeros(1, np.uint8), np.arange(6.0).reshape(2, 3), np.float32([1, 2])]
    calls = []

    def profile(frame, event, arg):
        if event == "call" and "clusterlab" in frame.f_code.co_filename:
            calls.append(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")

    for p in payloads:  # warm-up: dtype caches
        a.send(1, p, 3)
        b.send(0, b.recv(0, 3), 3)
        a.recv(1, 3)
    sys.setprofile(profile)
    try:
        got = []
        for _ in range(20):
            for p in payloads:
                a.send(1, p, 3)
                b.send(0, b.recv(0, 3, timeout=5.0), tag=3)
                got.append(a.recv(1, tag=3))
    finally:
        sys.setprofile(None)
    assert calls == []
    for p, g in zip(payloads * 20, got, strict=True):
        if isinstance(p, bytes):
            assert g == p
        else:
            assert g.dtype == p.dtype and g.shape == p.shape and (g == p).all() and g.flags.writeable


def _error(f, *args, **kw):
    try:
        f(*args, **kw)
    except Exception as e:  # noqa: BLE001  (comparing what each path raises)
        return type(e), str(e)
    return None


@pytest.mark.parametrize("call", [
    ("send", (0, b"x")), ("send", (2, b"x")), ("send", (-1, b"x")), ("send", (1, b"x", -5)),
    ("send", (1, b"x", 1 << 30)), ("send", ("1", b"x")), ("send", (1, b"x", 2.5)),
    ("recv", (0,)), ("recv", (7,)), ("recv", (1, -2)), ("recv", (1, 0, "soon")),
])
def test_the_fast_calls_raise_what_the_python_path_raises(pair, call):
    a, _ = pair
    name, args = call
    fast = getattr(a, name)
    python = getattr(TcpCommunicator, f"_{name}_py").__get__(a)
    assert type(fast).__name__ == "builtin_function_or_method"
    want = _error(python, *args)
    assert want is not None
    assert _error(fast, *args) == want


def test_unusual_payloads_and_arguments_take_the_python_path(pair):
    a, b = pair
    strided = np.arange(10.0)[::2]
    a.send(1, strided, np.int64(2))          # strided array, numpy integer tag
    a.send(np.int32(1), memoryview(b"mv"))   # memoryview, numpy integer rank
    a.send(1, np.float64(1.5), tag=True)     # numpy scalar; bool is an int, as before
    assert (b.recv(0, 2) == strided).all()
    assert b.recv(0) == b"mv"
    got = b.recv(0, 1, timeout=np.float32(2))
    assert got.shape == () and got.dtype == np.float64 and got == 1.5


def test_timeouts_default_and_per_call(pair):
    a, _ = pair
    a.default_timeout = 0.2
    assert a.default_timeout == 0.2
    t = time.monotonic()
    with pytest.raises(CommTimeout, match="timed out waiting for a message from rank 1 with tag 4"):
        a.recv(1, 4)
    with pytest.raises(CommTimeout):
        a.recv(1, 4, timeout=0.1)
    with pytest.raises(CommTimeout):
        a.recv(1, 4, None)
    assert time.monotonic() - t < 3


def test_a_busy_engine_makes_calls_wait_bounded(pair):
    """Another thread holding the engine (a long call) makes this thread's calls wait, up to the
    default timeout (before, without a limit), then go on once it is free."""
    a, b = pair
    a.default_timeout = 0.3
    held, done = threading.Event(), threading.Event()

    def holder():
        assert a._engine.acquire(5.0)
        held.set()
        done.wait(10)
        a._engine.release()

    th = threading.Thread(target=holder)
    th.start()
    try:
        assert held.wait(5)
        t = time.monotonic()
        with pytest.raises(CommTimeout, match="another thread's communication call"):
            a.send(1, b"x")
        with pytest.raises(CommTimeout, match="another thread's communication call"):
            a.recv(1, timeout=5.0)
        assert 0.5 <= time.monotonic() - t < 3
    finally:
        done.set()
        th.join(5)
    a.default_timeout = 5.0
    a.send(1, b"after")
    assert b.recv(0) == b"after"
    with pytest.raises(RuntimeError, match="does not hold"):
        a._engine.release()


def test_threads_share_a_communicator():
    """One thread ping-pongs while another sends and reads the statistics through the same
    communicator: the second waits for the engine (the fallback path, under contention) and
    every message arrives, in order. (Two threads blocked in ``recv`` on one communicator are not
    supported: a wait holds the engine, as before.)"""
    a, b = local_mesh(2, engine="rust", default_timeout=20)
    n = 300
    errors = []

    def run(f):
        try:
            f()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    def ping():
        for i in range(n):
            a.send(1, np.int64([i]), 1)
            assert a.recv(1, 1).tolist() == [i]

    def other():
        for i in range(n):
            a.send(1, np.int64([i]), 2)
            if i % 50 == 0:
                assert a.stats()["peers"][1]["msgs_sent"] >= i

    def pong():
        for _ in range(n):
            b.send(0, b.recv(0, 1), 1)

    threads = [threading.Thread(target=run, args=(f,)) for f in (ping, other, pong)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    got = [b.recv(0, 2).tolist() for _ in range(n)] if not errors else []
    a.close()
    b.close()
    assert not errors and not any(t.is_alive() for t in threads)
    assert got == [[i] for i in range(n)]


def test_after_a_failure_or_close_every_fast_call_raises():
    a, b, c = local_mesh(3, engine="rust", default_timeout=5)
    for cc in b._conns.values():  # rank 1 vanishes without a goodbye
        cc.sock.close()
    with pytest.raises(PeerFailure, match="rank 1 failed: connection closed without goodbye"):
        a.recv(1)
    with pytest.raises(PeerFailure, match="rank 1 failed: connection closed without goodbye"):
        a.send(2, b"x")  # the job has failed: every call says so, from now on
    with pytest.raises(PeerFailure, match="rank 1 failed"):
        c.recv(0)  # rank 0 told rank 2 (ABORT)
    c.close()
    with pytest.raises(CommError, match="communicator is closed"):
        c.send(0, b"x")
    with pytest.raises(CommError, match="communicator is closed"):
        c.recv(0)
    a.close()


def test_the_engine_does_not_keep_its_communicator_alive():
    import gc
    import weakref

    a, b = local_mesh(2, engine="rust", drainer=False)
    send, ref = a.send, weakref.ref(a)
    a.close()
    b.close()
    del a
    gc.collect()
    assert ref() is None
    with pytest.raises(RuntimeError, match="communicator of this engine is gone"):
        send(1, b"x")
