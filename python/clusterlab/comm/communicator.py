"""The ``Communicator`` interface: what parallel algorithms are written against.

Backends (``tcp``: clusterlab's own mesh; ``mpi``: mpi4py) implement the point-to-point part;
collectives are algorithms over point-to-point, one module each in ``collectives/``, chosen
per call by name or by the cost model. Algorithms know nothing of sockets; backends know
nothing of algorithms (as in Gloo).

Payloads are bytes-like objects or numpy arrays, never pickled: an array travels as its raw
buffer plus dtype and shape, and arrives as an array; anything else arrives as ``bytes``.

Matching follows MPI: messages from one source with one tag arrive in the order sent. Every
rank must call collectives in the same order. Every blocking call has a timeout
(``default_timeout`` seconds unless given) and raises ``CommTimeout`` or ``PeerFailure``
instead of hanging.
"""

from __future__ import annotations

import abc
import time
from typing import Any

import numpy as np

from clusterlab.comm import collectives
from clusterlab.comm.payload import COLLECTIVE_TAG, MAX_USER_TAG, Payload, nbytes

__all__ = ["COLLECTIVE_TAG", "MAX_USER_TAG", "Communicator", "Payload", "nbytes"]


class Communicator(abc.ABC):
    """A group of ``size`` ranks; this process is ``rank``.

    Subclasses implement ``_send``, ``_recv``, ``_recv_any`` and ``close``. Collectives take an
    optional ``algorithm`` name (see ``clusterlab.comm.collectives.ALGORITHMS``); by default
    the cost model picks one by operation, message size and number of ranks.
    """

    rank: int
    size: int
    default_timeout: float = 60.0
    connections: str = "persistent"  # or "per_call": connections set up by every collective
    shares_process: bool = False  # the ranks are threads of one process (their CPU, memory are one)

    # --- point to point (backends) ---------------------------------------------------------
    @abc.abstractmethod
    def _send(self, dest: int, data: Payload, tag: int) -> None: ...

    @abc.abstractmethod
    def _recv(self, source: int, tag: int, timeout: float) -> Any: ...

    @abc.abstractmethod
    def _recv_any(self, tag: int, timeout: float) -> tuple[int, Any]: ...

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections. Idempotent."""

    def stats(self) -> dict:
        """Counters of this rank's traffic (bytes and messages sent/received, per peer where
        known) and, on TCP, the kernel's view of each connection (TCP_INFO)."""
        return {}

    # --- point to point (public) ----------------------------------------------------------
    def send(self, dest: int, data: Payload, tag: int = 0) -> None:
        """Send ``data`` to rank ``dest``. Returns once the data is handed to the transport."""
        self._check_peer(dest)
        self._check_tag(tag)
        if self._pacing:
            self._pace_wait(dest, nbytes(data))
        self._send(dest, data, tag)

    def send_many(self, blocks, tag: int = 0) -> int:
        """``send(dest, data, tag)`` for each ``(dest, data)`` of the list ``blocks``, in order.
        Returns how many were sent. The TCP mesh's Rust engine does the loop in one call
        (``NetEngine.comm_send_many``); here it is ``send`` per block."""
        for dest, data in blocks:
            self.send(dest, data, tag)
        return len(blocks)

    # --- pacing (what a rate-paced algorithm asks of the transport) --------------------------
    _pacing: dict = {}  # dest -> [rate bytes/s, time the next send may start]; per instance once set

    def pace(self, dest: int, rate: float | None) -> None:
        """Send to ``dest`` at most ``rate`` bytes per second from now on (None: unpaced).
        This generic version delays each ``send`` until the previous ones fit the rate; the TCP
        mesh lets the kernel pace the connection instead (``SO_MAX_PACING_RATE``).

        >>> from clusterlab.comm.inproc import run_threads
        >>> def job(c):
        ...     if c.rank == 0:
        ...         c.pace(1, 1e6)                 # 1 MB/s: ten 10 kB messages take 0.09 s or more
        ...         t = time.monotonic()
        ...         for _ in range(10):
        ...             c.send(1, bytes(10_000))
        ...         c.pace(1, None)
        ...         return time.monotonic() - t >= 0.09
        ...     return [len(c.recv(0)) for _ in range(10)] == [10_000] * 10
        >>> run_threads(job, 2)
        [True, True]
        """
        self._check_peer(dest)
        if rate is not None and not rate > 0:
            raise ValueError(f"pacing rate must be > 0 bytes/s or None, got {rate!r}")
        if "_pacing" not in self.__dict__:
            self._pacing = {}
        if rate is None or rate == float("inf"):
            self._pacing.pop(dest, None)
        else:
            self._pacing[dest] = [float(rate), time.monotonic()]

    def _pace_wait(self, dest: int, n: int) -> None:
        p = self._pacing.get(dest)
        if p is None:
            return
        now = time.monotonic()
        if p[1] > now:
            time.sleep(p[1] - now)
        p[1] = max(p[1], now) + n / p[0]

    # --- point-to-multipoint (what seed 002's broadcast over a p2mp VC asks of the transport) ---
    def multicast(self):
        """This rank's end of the communicator's point-to-multipoint group
        (``clusterlab.comm.multicast.Group``: one datagram to every other rank, the network
        replicating it), opened on first use: every rank must call it at the same point, as
        collectives do. Raises ``CommError`` where the backend has none."""
        g = self.__dict__.get("_group")
        if g is None:
            g = self._open_multicast()
            self._group = g
        return g

    def _open_multicast(self):
        from clusterlab.comm.errors import CommError

        raise CommError(f"point-to-multipoint: the {type(self).__name__} backend has no multicast group "
                        "(the TCP mesh on a testbed and the in-process backend have one)")

    def _close_multicast(self) -> None:
        g = self.__dict__.pop("_group", None)
        if g is not None:
            g.close()

    def receive_buffer(self, source: int) -> int | None:
        """Bytes the transport can hold for us from ``source`` before the sender must stop
        (the socket receive buffer on TCP); None when the backend does not say."""
        return None

    def recv(self, source: int, tag: int = 0, timeout: float | None = None):
        """Receive the next message from ``source`` with ``tag``."""
        self._check_peer(source)
        self._check_tag(tag)
        return self._recv(source, tag, self.default_timeout if timeout is None else timeout)

    def recv_any(self, tag: int = 0, timeout: float | None = None) -> tuple[int, Any]:
        """Receive the next message with ``tag`` from any source: ``(source, data)``."""
        self._check_tag(tag)
        return self._recv_any(tag, self.default_timeout if timeout is None else timeout)

    def recv_many(self, tag: int = 0, timeout: float | None = None, max: int = 1024) -> list[tuple[int, Any]]:
        """``recv_any(tag, timeout)``'s message, then, where the backend can tell without
        waiting, further messages with ``tag`` already received (up to ``max`` in all): a list
        of ``(source, data)`` in arrival order. Raises ``CommTimeout`` as ``recv_any`` does.
        The TCP mesh's Rust engine takes them in one call (``NetEngine.comm_recv_many``); here
        it is one message per call."""
        return [self.recv_any(tag, timeout)]

    def sendrecv(self, dest: int, data: Payload, source: int, tag: int = 0, timeout: float | None = None):
        """Send to ``dest`` and receive from ``source`` (safe against exchange deadlock because
        backends drain incoming data independently of sends)."""
        self.send(dest, data, tag)
        return self.recv(source, tag, timeout)

    # --- collectives --------------------------------------------------------------------------
    def _collective(self, op: str, algorithm: str | None, /, **kw):  # reductions pass op= too
        return collectives.run(op, self, algorithm=algorithm, **kw)

    def barrier(self, algorithm: str | None = None) -> None:
        self._collective("barrier", algorithm)

    def bcast(self, data: Payload | None, root: int = 0, algorithm: str | None = None):
        """Root's ``data`` on every rank (non-roots pass None)."""
        return self._collective("bcast", algorithm, data=data, root=root)

    def scatter(self, chunks: list[Payload] | None, root: int = 0, algorithm: str | None = None):
        """Rank i gets ``chunks[i]`` of the root (non-roots pass None)."""
        return self._collective("scatter", algorithm, chunks=chunks, root=root)

    def gather(self, data: Payload, root: int = 0, algorithm: str | None = None):
        """List of every rank's ``data`` at the root (None elsewhere)."""
        return self._collective("gather", algorithm, data=data, root=root)

    def allgather(self, data: Payload, algorithm: str | None = None) -> list:
        return self._collective("allgather", algorithm, data=data)

    def alltoall(self, chunks: list[Payload], algorithm: str | None = None) -> list:
        """``chunks[j]`` goes to rank j; returns the list of what each rank sent here. Chunks may
        differ in size (this is also alltoallv for bytes payloads)."""
        return self._collective("alltoall", algorithm, chunks=chunks)

    def alltoallv(self, sendbuf: np.ndarray, sendcounts, algorithm: str | None = None):
        """Array form: ``sendbuf`` holds consecutive blocks of ``sendcounts[j]`` elements for
        rank j. Returns ``(recvbuf, recvcounts)`` with the blocks ordered by source rank."""
        sendbuf = np.ascontiguousarray(sendbuf)
        counts = np.asarray(sendcounts, dtype=np.int64)
        if counts.size != self.size or counts.sum() != sendbuf.shape[0]:
            raise ValueError("sendcounts must have one entry per rank and sum to len(sendbuf)")
        bounds = np.concatenate([[0], np.cumsum(counts)])
        parts = self.alltoall([sendbuf[bounds[j]:bounds[j + 1]] for j in range(self.size)], algorithm)
        recvcounts = np.array([p.shape[0] for p in parts], dtype=np.int64)
        return np.concatenate(parts) if parts else sendbuf[:0], recvcounts

    def reduce(self, array: np.ndarray, op: str = "sum", root: int = 0, algorithm: str | None = None):
        """Elementwise ``op`` (sum, min, max) of every rank's array at the root (None elsewhere)."""
        return self._collective("reduce", algorithm, array=np.ascontiguousarray(array), op=op, root=root)

    def allreduce(self, array: np.ndarray, op: str = "sum", algorithm: str | None = None) -> np.ndarray:
        return self._collective("allreduce", algorithm, array=np.ascontiguousarray(array), op=op)

    # --- helpers ------------------------------------------------------------------------------
    def _check_peer(self, r: int) -> None:
        if not (0 <= r < self.size) or r == self.rank:
            raise ValueError(f"rank {r} is not a peer of rank {self.rank} (size {self.size})")

    @staticmethod
    def _check_tag(tag: int) -> None:
        if not (tag == COLLECTIVE_TAG or 0 <= tag < MAX_USER_TAG):
            raise ValueError(f"tag {tag} outside 0..{MAX_USER_TAG - 1}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
