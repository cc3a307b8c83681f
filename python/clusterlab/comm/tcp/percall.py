"""Per-call connections (seed 002's switched virtual circuits): every collective call sets up
its connections, authenticated, and tears them down after, so set-up time counts in the call.

``PerCallCommunicator`` keeps only its listener between calls. A collective connects the full
mesh for the call (concurrently, within one deadline: ``mesh.connect_peers``), runs the
algorithm over it (a ``TcpCommunicator`` of that call), says goodbye and closes every
connection. Point-to-point messages need the persistent mesh and are refused. Choose it with
``build_mesh(..., connections="per_call")`` or ``CLUSTERLAB_CONNECTIONS=per_call`` (for ranks
started by ``clusterlab run``); the cost model prices it (``costmodel.CostModel.choose``).

A call waits for every rank to arrive (its connections cannot form before), so a rank that
computes between collectives delays the others' next call, at most ``default_timeout``.

>>> import threading
>>> from clusterlab.comm.tcp.mesh import local_mesh
>>> comms = local_mesh(3, connections="per_call")
>>> out = [None] * 3
>>> ts = [threading.Thread(target=lambda c=c: out.__setitem__(c.rank, c.allgather(bytes([c.rank])))) for c in comms]
>>> for t in ts: t.start()
>>> for t in ts: t.join()
>>> out[0]
[b'\\x00', b'\\x01', b'\\x02']
>>> comms[0].stats()["calls"], comms[0].stats()["connections"]
(1, 'per_call')
>>> for c in comms: c.close()
"""

from __future__ import annotations

import socket
import time

from clusterlab.comm.communicator import Communicator
from clusterlab.comm.errors import CommError
from clusterlab.comm.tcp.communicator import TcpCommunicator
from clusterlab.comm.tcp.connect import Early, connect_peers
from clusterlab.net.transport_config import TransportConfig
from clusterlab.rendezvous import frames

MODES = ("persistent", "per_call")


class PerCallCommunicator(Communicator):
    """A rank whose collectives each run over connections set up for that call only.
    ``table``: every rank's listening (host, port); ``listener``: this rank's (kept open)."""

    connections = "per_call"

    def __init__(self, rank: int, size: int, table: list[tuple[str, int]], listener: socket.socket, secret: bytes,
                 config: TransportConfig | None = None, max_frame: int = frames.DEFAULT_MAX_FRAME,
                 default_timeout: float | None = None, engine: str | None = None, drainer: bool = False):
        self.rank, self.size = rank, size
        self.config = config or TransportConfig()
        if default_timeout is not None:
            self.default_timeout = default_timeout
        self._table, self._listener, self._secret = table, listener, secret
        self._inner_kw = {"max_frame": max_frame, "engine": engine, "drainer": False}
        self.calls = 0
        self.setup_seconds = 0.0     # spent connecting, over all calls
        self.teardown_seconds = 0.0  # spent saying goodbye and closing
        self._early = Early()  # connections peers opened for our next call while this one ran
        self._closed = False

    def _connect(self) -> TcpCommunicator:
        if self._closed:
            raise CommError(f"rank {self.rank}: communicator is closed")
        t0 = time.perf_counter()
        socks = connect_peers(self.rank, self.size, self._table, self._listener, self._secret, self.config,
                              self.default_timeout, connect_to=range(self.rank),
                              accept_from=range(self.rank + 1, self.size), early=self._early, call=self.calls)
        inner = TcpCommunicator(self.rank, self.size, socks, self.config, default_timeout=self.default_timeout,
                                **self._inner_kw)
        self.setup_seconds += time.perf_counter() - t0
        return inner

    def _collective(self, op: str, algorithm: str | None, /, **kw):
        from clusterlab.comm import collectives

        inner = self._connect()  # for call number self.calls (the same on every rank)
        self.calls += 1
        try:
            out = collectives.run(op, inner, algorithm=algorithm, **kw)
        except BaseException as e:
            inner.abort(f"{type(e).__name__}: {e}")
            raise
        t0 = time.perf_counter()
        inner.close()
        self.teardown_seconds += time.perf_counter() - t0
        return out

    # point to point needs connections that outlive a call
    def _refuse(self):
        raise CommError("per-call connections carry collectives only; point-to-point messages need "
                        "connections='persistent'")

    def _send(self, dest, data, tag):
        if self.size == 1:
            raise ValueError(f"rank {dest} is not a peer of rank {self.rank} (size 1)")
        self._refuse()

    def _recv(self, source, tag, timeout):
        self._refuse()

    def _recv_any(self, tag, timeout):
        if self.size == 1:
            raise CommError(f"rank {self.rank} has no peers to receive from")
        self._refuse()

    def stats(self) -> dict:
        return {"backend": "tcp", "connections": self.connections, "rank": self.rank, "size": self.size,
                "calls": self.calls, "setup_seconds": self.setup_seconds, "teardown_seconds": self.teardown_seconds}

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._listener.close()
            self._early.close()

    def abort(self, detail: str = "") -> None:
        self.close()
