"""What one connection costs before its first message: open a TCP connection and run the
mesh's authentication handshake (what ``connections="per_call"`` pays for every connection
of every call), timed ``count`` times on ``host``. The cost model's ``setup`` is their median.

>>> times = connection_setup_times(3)
>>> len(times), all(0 < t < 5 for t in times)
(3, True)
"""

from __future__ import annotations

import os
import socket
import threading
import time

from clusterlab.errors import ConfigError
from clusterlab.rendezvous import handshake


def serve_handshakes(lsock: socket.socket, secret: bytes, count: int) -> None:
    """Accept ``count`` connections on ``lsock``, running the mesh's handshake on each."""
    for _ in range(count):
        c, _ = lsock.accept()
        with c:
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            handshake.accept(c, secret, 0, {1}, 10.0)


def time_handshakes(host: str, port: int, secret: bytes, count: int) -> list[float]:
    """Seconds to connect to ``(host, port)`` and finish the handshake, ``count`` times."""
    out: list[float] = []
    for _ in range(count):
        t0 = time.perf_counter()
        with socket.create_connection((host, port), timeout=10) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            handshake.connect(s, secret, 1, 0, 10.0)
        out.append(time.perf_counter() - t0)
    return out


def connection_setup_times(count: int = 30, host: str = "127.0.0.1") -> list[float]:
    """Seconds to connect and authenticate (both ends' handshake done), ``count`` times."""
    secret = os.urandom(32)
    lsock = socket.create_server((host, 0))
    lsock.settimeout(10)
    port = lsock.getsockname()[1]
    err: list[BaseException] = []

    def serve():
        try:
            serve_handshakes(lsock, secret, count)
        except Exception as e:  # noqa: BLE001 - reported below
            err.append(e)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    out: list[float] = []
    try:
        out = time_handshakes(host, port, secret, count)
    except Exception as e:  # noqa: BLE001 - one clear error below
        err.append(e)
    finally:
        t.join(10)
        lsock.close()
    if err:
        raise ConfigError(f"connection set-up timing failed: {err[0]}")
    return out
