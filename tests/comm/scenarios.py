"""Backend-agnostic programs for the communicator tests: each is ``fn(comm, ...)`` run on every
rank by ``clusterlab.cluster.local.run`` (tcp or mpi) and returns a JSON digest, so the tests
can demand identical results from both backends."""

from __future__ import annotations

import hashlib
import os
import signal
import time

import numpy as np

from clusterlab.comm import COLLECTIVE_TAG, PeerFailure


def payloads() -> list:
    """Every kind of payload the interface promises to carry."""
    rng = np.random.default_rng(7)
    return [
        b"", b"x", bytes(range(256)) * 10, bytearray(b"mutable"), memoryview(b"..view..")[2:6],
        np.arange(10, dtype=np.uint8), np.arange(-5, 5, dtype=np.int16), np.arange(12, dtype=np.int32).reshape(3, 4),
        np.arange(7, dtype=np.int64) - 3, rng.random((4, 5)).astype(np.float32), rng.random(9),
        (rng.random(5) + 1j * rng.random(5)).astype(np.complex128), np.array([True, False, True]),
        np.arange(6, dtype=">f8"), np.float64(2.5), np.zeros((0, 3)), np.zeros(0, np.int64),
        # headers the Rust engine builds itself: half floats, 0-d, swapped 2-D, 2-D bytes, complex64
        np.arange(3, dtype=np.float16), np.array(7, dtype=np.int32), np.arange(4, dtype=">i2").reshape(2, 2),
        np.arange(6, dtype=np.uint8).reshape(2, 3), np.arange(3, dtype=np.complex64),
        np.arange(24, dtype=np.int64).reshape(2, 3, 4)[:, ::2, :],          # strided: sent as a copy
        rng.integers(0, 1 << 40, 3_000_000, dtype=np.int64),                 # 24 MB: the zero-copy path
        bytes(rng.integers(0, 256, 5_000_001, dtype=np.uint8)),             # 5 MB of bytes
    ]


def digest(obj) -> list:
    if isinstance(obj, np.ndarray):
        return ["array", obj.dtype.str, list(obj.shape), hashlib.sha256(obj.tobytes()).hexdigest()[:16],
                bool(obj.flags.writeable)]
    return [type(obj).__name__, len(obj), hashlib.sha256(obj).hexdigest()[:16]]


def expected_digest(p) -> list:
    if isinstance(p, (np.ndarray, np.generic)):
        return digest(np.asarray(p).copy())
    return digest(bytes(p))


def p2p_roundtrip(comm) -> list:
    """Rank 0 sends every payload to every rank with its own tag; they echo it back."""
    ps = payloads()
    if comm.rank == 0:
        for r in range(1, comm.size):
            for i, p in enumerate(ps):
                comm.send(r, p, tag=100 + i)
        return [[digest(comm.recv(r, tag=100 + i)) for i in range(len(ps))] for r in range(1, comm.size)]
    got = [comm.recv(0, tag=100 + i) for i in range(len(ps))]
    for i, g in enumerate(got):
        comm.send(0, g, tag=100 + i)
    return [digest(g) for g in got]


def tags_and_order(comm) -> list:
    """FIFO per (source, tag), independent tags, and recv_any."""
    n = comm.size
    if comm.rank == 0:
        # messages from rank 1 interleave tags 5 and 9; take all 9s first, then the 5s
        nines = [int(comm.recv(1, tag=9)[0]) for _ in range(20)]
        fives = [int(comm.recv(1, tag=5)[0]) for _ in range(20)]
        big_tag = comm.recv(1, tag=(1 << 30) - 1)
        coll = comm.recv(1, tag=COLLECTIVE_TAG)
        anys = sorted(comm.recv_any(tag=3)[0] for _ in range(n - 1))
        return {"nines": nines, "fives": fives, "big_tag": big_tag.decode(), "collective_tag": coll.decode(),
                "any_sources": anys}
    if comm.rank == 1:
        for i in range(20):
            comm.send(0, np.array([i], np.int32), tag=5)
            comm.send(0, np.array([100 + i], np.int32), tag=9)
        comm.send(0, b"top tag", tag=(1 << 30) - 1)
        comm.send(0, b"reserved for collectives", tag=COLLECTIVE_TAG)
    comm.send(0, bytes([comm.rank]), tag=3)
    return None


def exchange_all_at_once(comm, nbytes: int = 8 << 20) -> list:
    """Every rank sends a large message to every other rank before receiving any: only a
    backend that drains while it sends survives this."""
    mine = np.full(nbytes // 8, comm.rank, dtype=np.int64)
    for r in range(comm.size):
        if r != comm.rank:
            comm.send(r, mine, tag=1)
    out = []
    for r in range(comm.size):
        if r != comm.rank:
            x = comm.recv(r, tag=1)
            out.append([r, int(x[0]), int(x[-1]), int(x.size)])
    return out


def have_collectives() -> bool:
    """Whether the collective algorithms are installed (they live on another branch until merged)."""
    try:
        from clusterlab.comm import collectives
    except ImportError:
        return False
    return hasattr(collectives, "run")


def kill_mid_exchange(comm, victim: int, at: int, marker: str = "") -> dict:
    """Rounds of ring exchange plus all-to-all (the collective when installed, else by hand);
    ``victim`` SIGKILLs itself at round ``at``. The others must raise PeerFailure naming the
    victim (their error goes back to the launcher)."""
    t0 = time.monotonic()
    collective = have_collectives()
    for i in range(10_000):
        if comm.rank == victim and i == at:
            os.kill(os.getpid(), signal.SIGKILL)
        nxt, prv = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
        comm.send(nxt, np.full(4096, i, np.int64), tag=2)
        comm.recv(prv, tag=2)
        if collective:  # every rank talks to the victim inside a collective
            comm.alltoall([np.full(512, i, np.int64) for _ in range(comm.size)])
            comm.allreduce(np.array([i], np.int64))
            continue
        for r in range(comm.size):
            if r != comm.rank:
                comm.send(r, bytes([i % 256]), tag=3)
        for r in range(comm.size):
            if r != comm.rank:
                comm.recv(r, tag=3)
    return {"finished": True, "seconds": time.monotonic() - t0}


def raise_on(comm, rank: int, marker: str = ""):
    if comm.rank == rank:
        raise ValueError(f"deliberate failure on rank {rank}")
    comm.recv((comm.rank + 1) % comm.size, tag=0)  # blocks until the failure reaches us


def return_types(comm):
    if comm.rank == 0:
        return b"\x00raw bytes\xff"
    if comm.rank == 1:
        return {"array": np.arange(3), "scalar": np.float32(1.5)}
    return [comm.rank, comm.size, "text"]


def stats_after_traffic(comm):
    peer = 1 - comm.rank
    for _ in range(5):
        if comm.rank == 0:
            comm.send(peer, np.zeros(100_000))
            comm.recv(peer)
        else:
            comm.recv(peer)
            comm.send(peer, np.zeros(100_000))
    return comm.stats()


def sleepy(comm, seconds: float, marker: str = ""):
    time.sleep(seconds)
    return comm.rank


def catch_peer_failure(comm):
    """Used to show PeerFailure is the exception type ranks see."""
    try:
        comm.recv((comm.rank + 1) % comm.size, tag=0, timeout=5)
    except PeerFailure as e:
        return e.rank
    return None


def send_many_recv_many(comm) -> list:
    """``send_many`` of 50 small blocks to rank 0, which takes them with ``recv_many``: the
    blocks in order, and the number of calls it took (on the Rust engine several blocks per
    call once they are all received)."""
    if comm.rank == 1:
        n = comm.send_many([(0, bytes([i]) * (i + 1)) for i in range(50)], tag=7)
        comm.send(0, b"sent", tag=8)
        return [n]
    if comm.rank == 0:
        comm.recv(1, tag=8)  # every block is on its way (FIFO per connection)
        time.sleep(0.2)
        got, calls = [], 0
        while len(got) < 50:
            got += comm.recv_many(tag=7, timeout=10)
            calls += 1
        return [[[s, bytes(d).hex()] for s, d in got], calls]
    return []
