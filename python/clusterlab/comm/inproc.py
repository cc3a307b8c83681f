"""In-process backend: ``n`` ranks as threads of one process, messages through queues.

It is the backend for testing collective algorithms and for quick experiments: no sockets, no
processes, the same ``Communicator`` interface and semantics (per-source, per-tag FIFO order;
payloads copied on send as they would be on a wire, so arrays arrive as fresh arrays and
anything else as ``bytes``; every wait bounded by a timeout). It says nothing about network
performance.

When a rank's function raises, the rank counts as failed: every other rank blocked in (or
later entering) a wait that its queues cannot satisfy raises ``PeerFailure`` naming the rank
that failed first, at once. A rank that returns normally is closed: waiting for a message it
never sent raises ``PeerFailure(rank, "closed")``.

>>> import numpy as np
>>> def job(comm):
...     return comm.allreduce(np.array([comm.rank + 1]), "sum").tolist()
>>> run_threads(job, 3)
[[6], [6], [6]]
>>> def ping(comm):
...     if comm.rank == 0:
...         comm.send(1, b"hi", tag=7)
...         return comm.recv(1, tag=7)
...     comm.send(0, comm.recv(0, tag=7) + b"!", tag=7)
>>> run_threads(ping, 2)[0]
b'hi!'
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from clusterlab.comm.communicator import Communicator, Payload
from clusterlab.comm.errors import CommTimeout, PeerFailure
from clusterlab.comm.multicast import Group, open_group


def _copy_payload(data: Payload) -> Any:
    """What the receiver gets: a fresh contiguous array, or ``bytes`` for anything else."""
    if isinstance(data, np.ndarray):
        if data.dtype.hasobject:
            raise TypeError("object arrays cannot be sent (they would need pickle)")
        return np.array(data, copy=True, order="C")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"payload must be bytes-like or a numpy array, not {type(data).__name__}")


class _Mailbox:
    """One rank's incoming messages: a FIFO per (source, tag) plus arrival order per tag
    (for ``recv_any``)."""

    def __init__(self) -> None:
        self.queues: dict[tuple[int, int], deque] = {}
        self.arrivals: dict[int, deque] = {}


class _InprocGroup(Group):
    """A multicast group of an in-process world: a queue of datagrams per member; each copy is
    lost with the world's ``multicast_loss`` probability (seeded draws), for testing what an
    algorithm does about loss."""

    max_payload = 9000

    def __init__(self, world: _World, rank: int, key: tuple):
        super().__init__()
        self._w, self._rank = world, rank
        self._boxes = world.groups.setdefault(key, {})
        self._boxes[rank] = deque()
        self.receive_buffer = 1 << 24

    def send(self, *parts) -> None:
        data = b"".join(bytes(p) for p in parts)
        if len(data) > self.max_payload:
            raise ValueError(f"a datagram of {len(data)} bytes is above the group's {self.max_payload}")
        w = self._w
        with w.cond:
            for r, box in self._boxes.items():
                if r != self._rank and not (w.multicast_loss and w.rng.random() < w.multicast_loss):
                    box.append(data)
            w.cond.notify_all()
        self.counters["sent"] += 1
        self.counters["bytes_sent"] += len(data)

    def recv(self, timeout: float) -> bytes | None:
        w = self._w
        box = self._boxes[self._rank]
        deadline = time.monotonic() + timeout
        with w.cond:
            while not box:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                w.cond.wait(left)
            self.counters["received"] += 1
            return box.popleft()


class _World:
    def __init__(self, n: int, multicast_loss: float = 0.0, seed: int = 1):
        import random

        self.groups: dict = {}
        self.multicast_loss = multicast_loss
        self.rng = random.Random(seed)
        self.n = n
        self.cond = threading.Condition()
        self.boxes = [_Mailbox() for _ in range(n)]
        self.failed: dict[int, str] = {}  # rank -> reason, first failure first
        self.closed: set[int] = set()

    def fail(self, rank: int, reason: str) -> None:
        with self.cond:
            self.failed.setdefault(rank, reason)
            self.cond.notify_all()

    def close(self, rank: int) -> None:
        with self.cond:
            self.closed.add(rank)
            self.cond.notify_all()

    def first_failure(self) -> PeerFailure | None:
        for r, why in self.failed.items():
            return PeerFailure(r, why)
        return None


class InprocCommunicator(Communicator):
    """One rank of an in-process world (create them with ``world(n)`` or ``run_threads``)."""

    shares_process = True

    def __init__(self, world: _World, rank: int, default_timeout: float = 60.0):
        self._w = world
        self.rank = rank
        self.size = world.n
        self.default_timeout = default_timeout
        self._sent = [0] * world.n
        self._received = [0] * world.n
        self._msgs_sent = 0
        self._msgs_received = 0

    def _send(self, dest: int, data: Payload, tag: int) -> None:
        msg = _copy_payload(data)
        w = self._w
        with w.cond:
            if dest in w.failed:  # name the rank whose failure started it all
                raise w.first_failure()
            box = w.boxes[dest]
            box.queues.setdefault((self.rank, tag), deque()).append(msg)
            box.arrivals.setdefault(tag, deque()).append(self.rank)
            w.cond.notify_all()
        self._sent[dest] += _nbytes(msg)
        self._msgs_sent += 1

    def _take(self, source: int, tag: int) -> Any:
        box = self._w.boxes[self.rank]
        msg = box.queues[(source, tag)].popleft()
        box.arrivals[tag].remove(source)  # removes the earliest entry of this source
        self._received[source] += _nbytes(msg)
        self._msgs_received += 1
        return msg

    def _wait(self, ready: Callable[[], Any], gone: Callable[[], PeerFailure | None], timeout: float, what: str):
        w = self._w
        deadline = time.monotonic() + timeout
        with w.cond:
            while True:
                r = ready()
                if r is not None:
                    return r
                err = gone()
                if err is not None:
                    raise err
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CommTimeout(f"rank {self.rank}: no message {what} within {timeout:g} s")
                w.cond.wait(left)

    def _recv(self, source: int, tag: int, timeout: float) -> Any:
        box = self._w.boxes[self.rank]

        def ready():
            q = box.queues.get((source, tag))
            return (self._take(source, tag),) if q else None

        def gone():
            f = self._w.first_failure()
            if f is not None:
                return f
            if source in self._w.closed:
                return PeerFailure(source, "closed before sending the awaited message")
            return None

        return self._wait(ready, gone, timeout, f"from rank {source} with tag {tag}")[0]

    def _recv_any(self, tag: int, timeout: float) -> tuple[int, Any]:
        box = self._w.boxes[self.rank]

        def ready():
            a = box.arrivals.get(tag)
            if a:
                src = a[0]
                return (src, self._take(src, tag))
            return None

        def gone():
            f = self._w.first_failure()
            if f is not None:
                return f
            others = set(range(self.size)) - {self.rank}
            if others <= self._w.closed:
                return PeerFailure(min(others), "every peer closed")
            return None

        return self._wait(ready, gone, timeout, f"from any rank with tag {tag}")

    def _open_multicast(self):
        return open_group(self, lambda: None, lambda group, port, key: _InprocGroup(self._w, self.rank, (group, port)))

    def close(self) -> None:
        self._close_multicast()
        self._w.close(self.rank)

    def stats(self) -> dict:
        return {"bytes_sent": sum(self._sent), "bytes_received": sum(self._received),
                "messages_sent": self._msgs_sent, "messages_received": self._msgs_received,
                "bytes_sent_per_peer": list(self._sent), "bytes_received_per_peer": list(self._received)}


def _nbytes(msg: Any) -> int:
    return msg.nbytes if isinstance(msg, np.ndarray) else len(msg)


def world(n: int, default_timeout: float = 60.0, multicast_loss: float = 0.0, seed: int = 1) -> list[InprocCommunicator]:
    """``n`` connected communicators (rank order), to be driven by ``n`` threads; their
    multicast group loses each datagram copy with probability ``multicast_loss`` (draws seeded
    by ``seed``)."""
    if n < 1:
        raise ValueError(f"need at least one rank, got {n}")
    if not 0.0 <= multicast_loss < 1.0:
        raise ValueError(f"multicast_loss must be in [0, 1), got {multicast_loss}")
    w = _World(n, multicast_loss, seed)
    return [InprocCommunicator(w, r, default_timeout) for r in range(n)]


def run_threads(fn: Callable[..., Any], n: int, *args, timeout: float = 60.0, return_exceptions: bool = False,
                multicast_loss: float = 0.0, **kwargs) -> list:
    """Run ``fn(comm, *args, **kwargs)`` on ``n`` ranks (threads); return each rank's result.

    A rank whose ``fn`` raises is marked failed, so the others raise ``PeerFailure`` instead of
    waiting. Unless ``return_exceptions``, the first failing rank's exception is re-raised
    (``PeerFailure`` of other ranks only when nothing else failed). ``timeout`` bounds every
    wait and the whole run: a rank still running after ``timeout`` seconds gives ``CommTimeout``.
    ``multicast_loss``: the probability that the ranks' multicast group loses a datagram copy.

    >>> run_threads(lambda c: c.bcast(b"x" if c.rank == 1 else None, root=1), 4)
    [b'x', b'x', b'x', b'x']
    >>> def boom(comm):
    ...     if comm.rank == 2:
    ...         raise RuntimeError("rank 2 dies")
    ...     comm.barrier()
    >>> [type(e).__name__ for e in run_threads(boom, 3, return_exceptions=True)]
    ['PeerFailure', 'PeerFailure', 'RuntimeError']
    """
    comms = world(n, default_timeout=timeout, multicast_loss=multicast_loss)
    results: list[Any] = [None] * n
    errors: list[BaseException | None] = [None] * n

    def body(r: int) -> None:
        comm = comms[r]
        try:
            results[r] = fn(comm, *args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - any failure of a rank is reported to its peers
            errors[r] = e
            comm._w.fail(r, f"{type(e).__name__}: {e}")
        else:
            comm.close()

    threads = [threading.Thread(target=body, args=(r,), name=f"inproc-rank-{r}", daemon=True) for r in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for r, t in enumerate(threads):
        t.join(max(0.0, deadline - time.monotonic()))
        if t.is_alive() and errors[r] is None:
            errors[r] = CommTimeout(f"rank {r} still running after {timeout:g} s")
            comms[r]._w.fail(r, "timed out")
    if return_exceptions:
        return [e if e is not None else res for e, res in zip(errors, results, strict=True)]
    failed = [e for e in errors if e is not None]
    if failed:
        primary = [e for e in failed if not isinstance(e, PeerFailure)]
        raise (primary or failed)[0]
    return results
