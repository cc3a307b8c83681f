"""The rate-paced broadcast (seed 002): its rate rule, that the root really sends at the slowest
receiver's measured rate, and that the data arrives whole, through the communicator only."""

import math
import socket
import struct
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterlab.comm import collectives as C
from clusterlab.comm.collectives import bcast_paced
from clusterlab.comm.collectives.bcast_paced import SEGMENT, paced_rate
from clusterlab.comm.inproc import run_threads

from .backends import launch


@given(st.lists(st.tuples(st.floats(1e3, 1e10), st.integers(0, 1 << 24)), min_size=1, max_size=16),
       st.integers(1, 1 << 30))
def test_no_receiver_overflows_at_the_chosen_rate_and_the_slowest_binds(recv, size):
    rates, bufs = [r for r, _ in recv], [b for _, b in recv]
    rate = paced_rate(rates, bufs, size)
    for r, b in recv:
        if math.isfinite(rate) and rate > r:
            assert (rate - r) * size / rate <= b * (1 + 1e-9) + 1e-6  # backlog when the last byte arrives
    limited = [r * size / (size - b) for r, b in recv if size > b]
    assert rate == (min(limited) if limited else math.inf)


def test_rule_with_no_buffer_is_the_slowest_receive_speed():
    assert paced_rate([5e6, 1e6, 3e6], [0, 0, 0], 1 << 20) == 1e6
    assert paced_rate([1e6], [1 << 19], 1 << 20) == 2e6   # half of it fits: twice the speed


@pytest.mark.parametrize("backend", ["inproc", "tcp"])
@pytest.mark.parametrize("payload", [
    np.arange(3 * 12_500, dtype=np.float64).reshape(3, 12_500),   # 300 KB, 5 segments, 2-D
    bytes(range(256)) * (SEGMENT * 5 // 256 + 3),                  # not a multiple of a segment
    np.float32(2.5), np.zeros((0, 4), np.int16), b"",
])
def test_data_arrives_whole(backend, payload):
    res = launch(backend, lambda c: C.run("bcast", c, "paced", data=payload if c.rank == 1 else None, root=1), 4)
    for r, got in enumerate(res):
        if isinstance(payload, (np.ndarray, np.generic)):
            want = np.asarray(payload)
            got = np.asarray(got) if r == 1 else got  # the root returns what it was given
            assert isinstance(got, np.ndarray) and got.dtype == want.dtype and got.shape == want.shape
            assert got.tobytes() == want.tobytes() and (r == 1 or got.flags.writeable)
        else:
            assert got == payload


def test_the_root_sends_at_the_slowest_receivers_measured_rate():
    """Rank 2 drains slowly (about 4 MB/s); the root measures it in the probe and paces every
    receiver to it, so its sends take at least the rest of the data over that rate."""
    size = 24 * SEGMENT
    seen = {}

    def job(c):
        if c.rank == 2:
            real = c.recv

            def slow(*a, **k):
                time.sleep(SEGMENT / 4e6)
                return real(*a, **k)
            c.recv = slow
        if c.rank == 0:
            paced = []
            real_pace = c.pace

            def spy(dest, rate):
                paced.append((dest, rate))
                real_pace(dest, rate)
            c.pace = spy
            t = time.monotonic()
            C.run("bcast", c, "paced", data=bytes(size))
            seen["root_seconds"] = time.monotonic() - t
            seen["paced"] = paced
            return None
        return len(C.run("bcast", c, "paced", data=None))

    assert run_threads(job, 3, timeout=60)[1:] == [size, size]
    rates = {r for _, r in seen["paced"] if r is not None}
    assert len(rates) == 1 and {d for d, _ in seen["paced"]} == {1, 2}
    rate = rates.pop()
    assert 0 < rate < 8e6, rate   # at most the slow receiver's speed (sleeps overshoot on a loaded machine)
    rest = size - bcast_paced.PROBE * SEGMENT
    assert seen["root_seconds"] >= 0.8 * rest / rate   # the root kept to it


def test_tcp_pacing_is_the_kernels():
    from clusterlab.comm.tcp import local_mesh

    a, b = local_mesh(2)
    try:
        a.pace(1, 2e6)
        s = a._conns[1].sock
        opt = getattr(socket, "SO_MAX_PACING_RATE", 47)
        assert struct.unpack("Q", s.getsockopt(socket.SOL_SOCKET, opt, 8))[0] == 2_000_000
        t = time.monotonic()
        a.send(1, bytes(1 << 20))
        assert len(b.recv(0, timeout=30)) == 1 << 20
        assert time.monotonic() - t > 0.3   # 1 MiB at 2 MB/s: about 0.5 s on the wire
        a.pace(1, None)
        assert struct.unpack("Q", s.getsockopt(socket.SOL_SOCKET, opt, 8))[0] == (1 << 64) - 1
        assert b.receive_buffer(0) > 0
        with pytest.raises(ValueError, match="pacing rate"):
            a.pace(1, 0)
    finally:
        a.close()
        b.close()
