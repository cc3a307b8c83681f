"""NetPIPE on every node at once: each rank ping-pongs with the next rank of a ring.

Seed 003 runs NetPIPE on all nodes in parallel and keeps one result per node. Here rank i is
the transmitter towards rank i+1 (mod n) and the echo for rank i-1, over its own plain TCP
connections opened *after* the sysctls under test are set (a socket takes its buffer sizes and
its window-scaling option from the sysctls when it is created and when it connects), so
every link carries one ping-pong in each direction, as n NetPIPE pairs on a switch would.

For every message size all ranks start together (a barrier on the job's own mesh), the
repetitions adapt to ``trial_time`` from the previous size's time (NetPIPE's rule), and the
best of ``trials`` trials is kept. Nothing received is interpreted beyond an 8-byte header of
two little-endian counts (size, repetitions), checked against the sweep's bounds, and only
after both ends passed the mesh's handshake with a secret the job's own (authenticated) mesh
handed out: a stranger connecting to a ping-pong listener is refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import threading
import time

from clusterlab.bench.pingpong import sizes as netpipe_sizes
from clusterlab.errors import ClusterlabError

HEADER = struct.Struct("<QQ")
IO_TIMEOUT = 60.0  # a peer silent this long is dead (the job's own timeout names it)
MAX_REPS = 200_000
HANDSHAKE_TIMEOUT = 5.0

__all__ = ["netpipe_sizes", "ring_pingpong", "listen_address"]


def listen_address() -> str:
    """The address this rank's ping-pong listens on: the mesh's own bind address when the
    launcher gave one (a testbed host's eth0), else the route-chosen address."""
    from clusterlab.rendezvous import address, contract

    return os.environ.get(contract.ENV_BIND) or address.choose()


def _recv_exact(sock: socket.socket, view: memoryview) -> None:
    got, n = 0, len(view)
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ClusterlabError("ping-pong peer closed the connection")
        got += k


class _Echo(threading.Thread):
    """Echo every message of the predecessor's ping-pong back to it."""

    def __init__(self, sock: socket.socket, max_size: int):
        super().__init__(daemon=True, name="netpipe-echo")
        self.sock, self.max_size = sock, max_size
        self.error: Exception | None = None
        self.buf = bytearray(max_size)

    def run(self) -> None:
        hdr = bytearray(HEADER.size)
        try:
            while True:
                try:
                    _recv_exact(self.sock, memoryview(hdr))
                except ClusterlabError:
                    return  # the predecessor finished and closed
                size, reps = HEADER.unpack(hdr)
                if not 1 <= size <= self.max_size or not 1 <= reps <= MAX_REPS:
                    raise ClusterlabError(f"ping-pong header out of range: size {size}, reps {reps}")
                view = memoryview(self.buf)[:size]
                for _ in range(reps):
                    _recv_exact(self.sock, view)
                    self.sock.sendall(view)
        except Exception as e:  # reported by the rank after its own sweep
            self.error = e


def _socket() -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # NPtcp sets it too
    return s


def _accept_predecessor(lst: socket.socket, secret: bytes, rank: int, pred: int, got: list) -> None:
    """Accept connections until one authenticates as ``pred`` (others are closed), or time out."""
    from clusterlab.rendezvous import handshake

    deadline = time.monotonic() + IO_TIMEOUT
    try:
        while True:
            lst.settimeout(max(0.1, deadline - time.monotonic()))
            c, _ = lst.accept()
            c.settimeout(IO_TIMEOUT)
            try:
                # a short bound per attempt: a silent stranger cannot hold the listener for long
                handshake.accept(c, secret, rank, {pred}, min(HANDSHAKE_TIMEOUT, max(0.1, deadline - time.monotonic())))
            except Exception:  # noqa: BLE001 - not our predecessor: drop it, keep listening
                c.close()
                if time.monotonic() > deadline:
                    raise
                continue
            got.append(c)
            return
    except Exception as e:  # noqa: BLE001 - reported by the caller
        got.append(e)


def _connect_pair(comm, addr: str) -> tuple[socket.socket, socket.socket]:
    """(to the successor, from the predecessor), both authenticated with a per-sweep secret."""
    from clusterlab.rendezvous import handshake

    n, rank = comm.size, comm.rank
    secret = comm.bcast(os.urandom(32) if rank == 0 else None, root=0, algorithm="binomial")
    lst = _socket()
    got: list = []
    try:
        lst.bind((addr, 0))
        lst.listen(8)
        table = [json.loads(b) for b in comm.allgather(json.dumps([addr, lst.getsockname()[1]]).encode())]
        # Accept in a thread: every rank connects first, and a ring of handshakes waiting on
        # each other's accept would never finish.
        t = threading.Thread(target=_accept_predecessor, args=(lst, secret, rank, (rank - 1) % n, got), daemon=True)
        t.start()
        out = _socket()
        out.settimeout(IO_TIMEOUT)
        out.connect(tuple(table[(rank + 1) % n]))
        handshake.connect(out, secret, rank, (rank + 1) % n, IO_TIMEOUT)
        t.join(IO_TIMEOUT + 1)
    finally:
        lst.close()
    if not got or isinstance(got[0], Exception):
        out.close()
        raise ClusterlabError(f"rank {rank}: no authenticated ping-pong connection from rank {(rank - 1) % n}: "
                              f"{got[0] if got else 'timed out'}")
    return out, got[0]


def ring_pingpong(comm, sizes: list[int], trial_time: float, trials: int, addr: str) -> list[dict]:
    """One NetPIPE sweep of this rank towards rank+1 while echoing rank-1; every rank calls.
    Returns this rank's rows ``{"bytes", "mbps", "usec", "reps"}``."""
    n, rank = comm.size, comm.rank
    max_size = max(sizes)
    out, inc = _connect_pair(comm, addr)
    inc.settimeout(IO_TIMEOUT)
    echo = _Echo(inc, max_size)
    echo.start()
    rows = []
    buf = bytearray(max_size)
    last = 20e-6
    try:
        for nb in sizes:
            view = memoryview(buf)[:nb]
            reps = int(min(MAX_REPS // max(trials, 1) - 1, max(2, trial_time / (2 * last))))
            comm.barrier()  # every node measures this size at the same time
            out.sendall(HEADER.pack(nb, 1 + reps * trials))
            out.sendall(view)  # one untimed exchange: warm-up
            _recv_exact(out, view)
            best = float("inf")
            for _ in range(trials):
                t0 = time.perf_counter()
                for _ in range(reps):
                    out.sendall(view)
                    _recv_exact(out, view)
                best = min(best, (time.perf_counter() - t0) / reps / 2)
            last = best
            rows.append({"bytes": nb, "mbps": nb * 8 / best / 1e6, "usec": best * 1e6, "reps": reps})
    finally:
        with contextlib.suppress(OSError):
            out.shutdown(socket.SHUT_WR)
        out.close()
        echo.join(IO_TIMEOUT)
        inc.close()
    if echo.error is not None:
        raise ClusterlabError(f"rank {rank}: echo for rank {(rank - 1) % n} failed: {echo.error}")
    comm.barrier()
    return rows
