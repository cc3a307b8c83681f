"""Point-to-multipoint datagrams: what a communicator offers an algorithm that sends one frame to
every other rank at once (seed 002's point-to-multipoint VC: the switch replicates, the sender
sends once).

``comm.multicast()`` returns this rank's end of the communicator's group (a ``Group``), opening
it on first use; every rank must call it at the same point (collectives do, in call order).
A group moves datagrams: ``send(*parts)`` gives every other member one datagram (the parts
joined), ``recv(timeout)`` returns the next one or None. Datagrams may be lost, duplicated
by the algorithm's own retransmissions, or arrive late from an earlier call: reliability is the
algorithm's (``collectives.bcast_p2mp``: NAKs and retransmission over the point-to-point
connections). A datagram carries at most ``max_payload`` bytes; ``receive_buffer`` is the
smallest receive buffer (bytes) any member's transport holds for the group.

Backends: the in-process one (``inproc``: queues, with an optional seeded loss for tests) and
the TCP mesh on a testbed (``tcp.multicast``: UDP to an IP multicast group, authenticated,
size-checked, only inside a network namespace). Others raise ``CommError`` naming why.

The opening handshake (``open_group``) is generic: rank 0 draws the group's parameters and
sends them to every rank over the point-to-point connections; every rank opens its end and
reports its receive buffer (or that it could not, and why); rank 0 answers every rank with the
smallest buffer or a refusal, so that all ranks succeed or fail together.

>>> from clusterlab.comm.inproc import run_threads
>>> def job(c):
...     g = c.multicast()
...     if c.rank == 0:
...         g.send(b"to ", b"all")
...         return None
...     return g.recv(5.0)
>>> run_threads(job, 3)
[None, b'to all', b'to all']
"""

from __future__ import annotations

import abc
import os
import struct

from clusterlab.comm.errors import CommError, ProtocolError
from clusterlab.comm.payload import COLLECTIVE_TAG

_PARAMS = struct.Struct("<B4sH32s")  # ok, group address, port, key
_REPORT = struct.Struct("<Q")        # receive buffer (0: could not open)


class Group(abc.ABC):
    """One rank's end of a point-to-multipoint channel."""

    max_payload: int = 0
    receive_buffer: int = 0
    calls: int = 0  # algorithms number their calls on the group with it (every rank alike)

    def __init__(self) -> None:
        self.counters = {"sent": 0, "bytes_sent": 0, "received": 0, "rejected": 0, "resent_multicast": 0,
                         "resent_direct": 0}

    @abc.abstractmethod
    def send(self, *parts) -> None:
        """One datagram of ``parts`` (bytes-like, joined) to every other member."""

    @abc.abstractmethod
    def recv(self, timeout: float) -> bytes | None:
        """The next datagram for this member, or None after ``timeout`` seconds."""

    def close(self) -> None:  # noqa: B027 - nothing to release for some backends
        """Release the channel. Idempotent."""


def draw_params() -> tuple[str, int, bytes]:
    """A group's address (administratively scoped, 239.255.0.0/16), port and 32-byte key."""
    r = os.urandom(36)
    group = f"239.255.{1 + r[0] % 254}.{1 + r[1] % 254}"
    port = 20000 + int.from_bytes(r[2:4], "little") % 40000
    return group, port, r[4:36]


def open_group(comm, why_not, opener) -> Group:
    """The handshake (every rank): ``why_not()`` says why this rank cannot join (or None);
    ``opener(group, port, key)`` opens its end. Raises ``CommError`` on every rank if one cannot."""
    import socket

    n, rank = comm.size, comm.rank
    reason = why_not()
    if rank == 0:
        group, port, key = draw_params()
        msg = _PARAMS.pack(0 if reason else 1, socket.inet_aton(group), port, key)
        for r in range(1, n):
            comm.send(r, msg, COLLECTIVE_TAG)
        if reason:
            raise CommError(f"point-to-multipoint: rank 0 cannot open a group: {reason}")
    else:
        got = comm.recv(0, COLLECTIVE_TAG)
        if len(got) != _PARAMS.size:
            raise ProtocolError(f"point-to-multipoint: rank 0 sent {len(got)} bytes of group parameters")
        ok, addr, port, key = _PARAMS.unpack(bytes(got))
        if not ok:
            raise CommError("point-to-multipoint: rank 0 cannot open a group (not in a testbed host?)")
        group = socket.inet_ntoa(addr)
    end = None
    if not reason:
        try:
            end = opener(group, port, key)
        except OSError as e:
            reason = f"{type(e).__name__}: {e}"
    if rank != 0:
        comm.send(0, _REPORT.pack(0 if end is None else max(1, end.receive_buffer)), COLLECTIVE_TAG)
        answer = comm.recv(0, COLLECTIVE_TAG)
        if len(answer) != _REPORT.size:
            raise ProtocolError("point-to-multipoint: malformed answer from rank 0")
        smallest = _REPORT.unpack(bytes(answer))[0]
        if end is None or smallest == 0:
            if end is not None:
                end.close()
            raise CommError("point-to-multipoint: a rank could not open the group"
                            + (f" (rank {rank}: {reason})" if reason else ""))
    else:
        buffers = [end.receive_buffer if end is not None else 0]
        for r in range(1, n):
            got = comm.recv(r, COLLECTIVE_TAG)
            if len(got) != _REPORT.size:
                raise ProtocolError(f"point-to-multipoint: rank {r} sent a malformed report")
            buffers.append(_REPORT.unpack(bytes(got))[0])
        smallest = 0 if min(buffers) == 0 else min(buffers)
        for r in range(1, n):
            comm.send(r, _REPORT.pack(smallest), COLLECTIVE_TAG)
        if smallest == 0:
            if end is not None:
                end.close()
            bad = [r for r, b in enumerate(buffers) if b == 0]
            raise CommError(f"point-to-multipoint: ranks {bad} could not open the group"
                            + (f" (rank 0: {reason})" if reason else ""))
    end.receive_buffer = int(smallest)
    return end


__all__ = ["Group", "draw_params", "open_group"]
