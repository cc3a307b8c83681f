"""Mesh set-up never waits serially: idle, garbage and unauthenticated connections to a rank's
listener are dropped without delaying the real peers, and a missing rank is reported at the
one set-up deadline, whatever else is connected."""

import os
import socket
import threading
import time

import pytest

from clusterlab.comm import CommTimeout
from clusterlab.comm.tcp import mesh
from clusterlab.rendezvous import handshake


def _build(n, intrude, timeout=10.0, missing=()):
    """Start ranks (except ``missing``) after ``intrude(table)`` has connected to the
    listeners; returns ({rank: communicator or exception}, seconds to set up, intruders)."""
    secret = os.urandom(32)
    listeners = [mesh.listen() for _ in range(n)]
    table = [ls.getsockname()[:2] for ls in listeners]
    intruders = intrude(table)
    out, took = {}, {}

    def rank(r):
        t0 = time.monotonic()
        try:
            out[r] = mesh.build_mesh(r, n, table, listeners[r], secret, timeout=timeout)
        except Exception as e:  # noqa: BLE001 - examined by the test
            out[r] = e
        took[r] = time.monotonic() - t0

    ts = [threading.Thread(target=rank, args=(r,)) for r in range(n) if r not in missing]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout + 5)
    for r in missing:
        listeners[r].close()
    return out, max(took.values()), intruders


def _idle(addr, k):
    return [socket.create_connection(addr) for _ in range(k)]


def _garbage(addr, k):
    out = []
    for i in range(k):
        s = socket.create_connection(addr)
        s.sendall(b"GET / HTTP/1.0\r\n\r\n" + bytes([i]) * 100)
        out.append(s)
    return out


def _half_hello(addr):
    """Starts a handshake claiming to be rank 1 and goes quiet (a stalled peer)."""
    s = socket.create_connection(addr)
    s.sendall(handshake.HS_MAGIC + b"\x01")
    return [s]


def _close(socks):
    for s in socks:
        s.close()


def test_idle_and_garbage_connections_do_not_delay_set_up(capfd):
    def intrude(table):
        return _idle(table[0], 12) + _garbage(table[0], 5) + _half_hello(table[0]) + _idle(table[2], 6) \
            + _garbage(table[3], 3)

    out, took, intruders = _build(4, intrude)
    try:
        assert all(not isinstance(c, Exception) for c in out.values()), out
        # Before: each idle connection held the set-up for up to 10 s in turn (the mesh failed).
        assert took < 3.0, f"set-up took {took:.1f} s"
        out[3].send(0, b"through")
        assert out[0].recv(3, timeout=5) == b"through"
    finally:
        for c in out.values():
            if not isinstance(c, Exception):
                c.close()
        _close(intruders)
    err = capfd.readouterr().err
    assert err.count("rejected a connection") >= 8  # the garbage ones at least, each logged


def test_a_flood_of_idle_connections_cannot_starve_the_real_peers():
    out, took, intruders = _build(3, lambda table: _idle(table[0], mesh.MAX_PENDING + 30))
    try:
        assert all(not isinstance(c, Exception) for c in out.values()), out
        assert took < 5.0, f"set-up took {took:.1f} s"
    finally:
        for c in out.values():
            if not isinstance(c, Exception):
                c.close()
        _close(intruders)


def test_a_missing_rank_is_named_at_the_deadline_despite_idle_connections():
    t0 = time.monotonic()
    out, _, intruders = _build(3, lambda table: _idle(table[0], 10) + _idle(table[1], 10), timeout=2.0, missing=(2,))
    try:
        dt = time.monotonic() - t0
        assert isinstance(out[0], CommTimeout) and "ranks [2] did not connect within 2 s" in str(out[0])
        assert isinstance(out[1], CommTimeout) and "[2]" in str(out[1])
        assert dt < 4.0, f"failure reported after {dt:.1f} s (the deadline is 2 s)"
    finally:
        _close(intruders)


@pytest.mark.parametrize("n", [2, 5])
def test_connections_are_set_up_concurrently(n):
    """Every rank of a mesh is reached in one round of waiting, not one per peer: a rank
    that starts late delays the others by its own lateness only."""
    secret = os.urandom(32)
    listeners = [mesh.listen() for _ in range(n)]
    table = [ls.getsockname()[:2] for ls in listeners]
    out = {}

    def rank(r, delay):
        time.sleep(delay)
        out[r] = mesh.build_mesh(r, n, table, listeners[r], secret, timeout=10)

    t0 = time.monotonic()
    ts = [threading.Thread(target=rank, args=(r, 0.3 if r == 0 else 0.0)) for r in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(15)
    took = time.monotonic() - t0
    try:
        assert sorted(out) == list(range(n))
        assert took < 2.0, f"{took:.2f} s"
    finally:
        for c in out.values():
            c.close()
