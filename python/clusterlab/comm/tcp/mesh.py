"""Building the TCP mesh: listeners, and a communicator per rank over connections to every
other rank, set up all at once (``connect.connect_peers``: concurrent, one deadline, intruders
dropped without delaying the real peers), or, with ``connections="per_call"``, set up anew by
every collective (``percall.py``).

>>> comms = local_mesh(3)
>>> comms[2].send(0, b"up"); comms[0].recv(2)
b'up'
>>> for c in comms: c.close()
"""

from __future__ import annotations

import os
import socket
import threading

from clusterlab.comm.errors import CommTimeout
from clusterlab.comm.tcp.communicator import TcpCommunicator
from clusterlab.comm.tcp.connect import MAX_PENDING, connect_peers
from clusterlab.comm.tcp.percall import MODES, PerCallCommunicator
from clusterlab.errors import ConfigError
from clusterlab.net.transport_config import TransportConfig

CONNECTIONS_ENV = "CLUSTERLAB_CONNECTIONS"


def listen(bind: str = "127.0.0.1", port: int = 0, config: TransportConfig | None = None,
           rank: int = 0, backlog: int = 128) -> socket.socket:
    """A listening socket for incoming mesh connections, with the transport settings applied
    (buffer sizes must be set before ``listen`` so accepted sockets inherit them)."""
    s = socket.socket(socket.AF_INET6 if ":" in bind else socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if config is not None:
        config.apply(s, rank)
    s.bind((bind, port))
    s.listen(backlog)
    return s


def build_mesh(rank: int, size: int, table: list[tuple[str, int]], listener: socket.socket | None,
               secret: bytes, config: TransportConfig | None = None, timeout: float = 30.0,
               connections: str | None = None, **kw) -> TcpCommunicator | PerCallCommunicator:
    """Connect rank ``rank`` to every other rank of ``table`` (list of (host, port) by rank)
    within ``timeout`` seconds (see :func:`connect_peers`), close the listener (nobody may
    join later) and return the rank's communicator (``kw``: ``TcpCommunicator``'s options).
    A connection attempt that fails authentication is dropped and logged; the mesh keeps
    waiting for the real peer until the deadline.

    ``connections``: ``persistent`` (the default, or ``$CLUSTERLAB_CONNECTIONS``) or
    ``per_call``: nothing is connected now, the listener stays open, and every collective
    sets up its own connections (``percall.PerCallCommunicator``)."""
    config = config or TransportConfig()
    connections = connections or os.environ.get(CONNECTIONS_ENV) or "persistent"
    if connections not in MODES:
        raise ConfigError(f"connections={connections!r}: expected one of {', '.join(MODES)} "
                          f"(argument or ${CONNECTIONS_ENV})")
    if connections == "per_call" and size > 1:
        return PerCallCommunicator(rank, size, table, listener, secret, config, **kw)
    try:
        socks = connect_peers(rank, size, table, listener, secret, config, timeout)
    finally:
        if listener is not None:
            listener.close()
    return TcpCommunicator(rank, size, socks, config, **kw)


def local_mesh(n: int, config: TransportConfig | None = None, timeout: float = 10.0, **kw) -> list[TcpCommunicator]:
    """``n`` ranks of a loopback mesh inside this process (threads do the set-up). For tests
    and examples; real jobs use one process per rank (``clusterlab.cluster.local``)."""
    secret = os.urandom(32)
    listeners = [listen("127.0.0.1", 0, config, r) for r in range(n)]
    table = [ls.getsockname()[:2] for ls in listeners]
    out: list = [None] * n
    errs: list = []

    def one(r):
        try:
            out[r] = build_mesh(r, n, table, listeners[r], secret, config, timeout, **kw)
        except BaseException as e:  # pragma: no cover - reported below
            errs.append(e)

    ts = [threading.Thread(target=one, args=(r,)) for r in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout + 1)
    if errs or any(o is None for o in out):
        for o in out:
            if o is not None:
                o.close()
        raise errs[0] if errs else CommTimeout("local mesh set-up timed out")
    return out


__all__ = ["MAX_PENDING", "PerCallCommunicator", "TcpCommunicator", "build_mesh", "connect_peers", "listen",
           "local_mesh"]
