"""Building the TCP mesh: listeners, and connecting every pair of ranks, all at once.

Rank i connects to every lower rank and accepts every higher one; each connection is
authenticated with the per-job secret (``handshake.py``). Nothing waits serially: the
connections out are opened and authenticated concurrently, every accepted connection is
authenticated on its own thread, and one deadline bounds the whole set-up. A connection that
fails authentication, sends garbage or stays idle is dropped (and logged) without delaying the
others; at most ``MAX_PENDING`` unauthenticated connections are held at once (the oldest is
dropped to make room), so a flood of idle connections cannot starve the real peers.

>>> comms = local_mesh(3)
>>> comms[2].send(0, b"up"); comms[0].recv(2)
b'up'
>>> for c in comms: c.close()
"""

from __future__ import annotations

import os
import select
import socket
import sys
import threading
import time

from clusterlab.comm.errors import CommError, CommTimeout, ProtocolError
from clusterlab.comm.tcp import handshake
from clusterlab.comm.tcp.communicator import TcpCommunicator
from clusterlab.net.transport_config import TransportConfig

HANDSHAKE_LIMIT = 5.0   # seconds an accepted connection gets to authenticate
MAX_PENDING = 64        # unauthenticated connections held at once
RETRY = 0.05            # seconds between attempts to reach a peer that is not listening yet


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


def _log(msg: str) -> None:
    print(f"clusterlab: {msg}", file=sys.stderr, flush=True)


class _SetUp:
    """The connections of one rank's set-up, gathered from several threads."""

    def __init__(self, rank: int, secret: bytes, config: TransportConfig, deadline: float):
        self.rank, self.secret, self.config, self.deadline = rank, secret, config, deadline
        self.lock = threading.Lock()
        self.socks: dict[int, socket.socket] = {}
        self.error: BaseException | None = None
        self.pending: dict[socket.socket, float] = {}  # accepted, authenticating -> accept time
        self.threads: list[threading.Thread] = []
        self.wake_r, self.wake_w = os.pipe()  # a thread finished: the accept loop looks again

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def _done(self) -> None:
        try:
            os.write(self.wake_w, b"x")
        except OSError:
            pass

    def start(self, target, *args) -> None:
        t = threading.Thread(target=target, args=args, name=f"clusterlab-setup-{self.rank}", daemon=True)
        self.threads.append(t)
        t.start()

    # --- out: connect to a lower rank and authenticate ------------------------------------------
    def connect(self, peer: int, host: str, port: int) -> None:
        try:
            while True:
                s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
                self.config.apply(s, self.rank)
                s.settimeout(max(self.left(), 0.01))
                try:
                    s.connect((host, port))
                    break
                except OSError as e:
                    s.close()
                    if self.left() <= RETRY or self.error is not None:
                        raise CommTimeout(f"rank {self.rank}: cannot connect to rank {peer} at {host}:{port}: {e}") \
                            from None
                    time.sleep(RETRY)
            try:
                handshake.connect(s, self.secret, self.rank, peer, max(self.left(), 0.01))
            except BaseException:
                s.close()
                raise
            with self.lock:
                self.socks[peer] = s
        except BaseException as e:  # noqa: BLE001 - reported by the set-up loop
            with self.lock:
                self.error = self.error or e
        finally:
            self._done()

    # --- in: authenticate an accepted connection ------------------------------------------------
    def authenticate(self, s: socket.socket, addr, expected: set[int]) -> None:
        try:
            limit = min(self.left(), HANDSHAKE_LIMIT)
            peer = handshake.accept(s, self.secret, self.rank, lambda r: r in expected and r not in self.socks,
                                    max(limit, 0.01))
            with self.lock:
                self.pending.pop(s, None)
                if peer in self.socks:  # two connections claiming one rank: keep the first
                    raise ProtocolError(f"a second connection claims to be rank {peer}")
                self.config.apply(s, self.rank)
                self.socks[peer] = s
        except (ProtocolError, CommTimeout, OSError) as e:
            with self.lock:
                self.pending.pop(s, None)
            _log(f"rank {self.rank}: rejected a connection from {addr[0]}:{addr[1]}: {e}")
            s.close()
        finally:
            self._done()

    def make_room(self) -> None:
        """Drop the oldest unauthenticated connection (a real peer authenticates at once)."""
        with self.lock:
            if len(self.pending) < MAX_PENDING:
                return
            oldest = min(self.pending, key=self.pending.get)
        try:
            oldest.shutdown(socket.SHUT_RDWR)  # wakes its thread, which logs and closes it
        except OSError:
            pass

    def finish(self) -> None:
        """Drop what is still authenticating and wait (briefly) for the threads."""
        with self.lock:
            pending = list(self.pending)
        for s in pending:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in self.threads:
            t.join(timeout=2.0)
        if not any(t.is_alive() for t in self.threads):  # else a late write could hit a reused fd
            for fd in (self.wake_r, self.wake_w):
                os.close(fd)


def connect_peers(rank: int, size: int, table: list[tuple[str, int]], listener: socket.socket | None,
                  secret: bytes, config: TransportConfig | None = None, timeout: float = 30.0,
                  connect_to=None, accept_from=None) -> dict[int, socket.socket]:
    """Authenticated sockets to ``connect_to`` (default: every lower rank) and from
    ``accept_from`` (default: every higher rank), all set up at once within ``timeout``
    seconds. ``table[r]`` is rank r's listening (host, port); ``listener`` is this rank's."""
    config = config or TransportConfig()
    out_peers = list(range(rank)) if connect_to is None else sorted(connect_to)
    expected = set(range(rank + 1, size)) if accept_from is None else set(accept_from)
    if expected and listener is None:
        raise CommError(f"rank {rank} must accept connections but has no listener")
    st = _SetUp(rank, secret, config, time.monotonic() + timeout)
    try:
        for j in out_peers:
            host, port = table[j]
            st.start(st.connect, j, host, port)
        poller = select.poll()
        poller.register(st.wake_r, select.POLLIN)
        if expected:
            listener.setblocking(False)
            poller.register(listener.fileno(), select.POLLIN)
        want = set(out_peers) | expected
        while True:
            with st.lock:
                if st.error is not None:
                    raise st.error
                if want <= set(st.socks):
                    return dict(st.socks)
            left = st.left()
            if left <= 0:
                missing_in = sorted(expected - set(st.socks))
                missing_out = sorted(set(out_peers) - set(st.socks))
                raise CommTimeout(f"rank {rank}: ranks {missing_in or missing_out} did not connect within {timeout:g} s")
            for fd, _ in poller.poll(min(left, 0.5) * 1000):
                if fd == st.wake_r:
                    os.read(st.wake_r, 4096)
                    continue
                while True:  # take every connection waiting in the backlog
                    try:
                        s, addr = listener.accept()
                    except (BlockingIOError, InterruptedError):
                        break
                    except OSError as e:
                        raise CommError(f"rank {rank}: accepting mesh connections failed: {e}") from None
                    s.setblocking(True)
                    st.make_room()
                    with st.lock:
                        st.pending[s] = time.monotonic()
                    st.start(st.authenticate, s, addr, expected)
    except BaseException:
        with st.lock:
            socks = list(st.socks.values())
            st.socks.clear()
        for s in socks:
            s.close()
        raise
    finally:
        st.finish()


def build_mesh(rank: int, size: int, table: list[tuple[str, int]], listener: socket.socket | None,
               secret: bytes, config: TransportConfig | None = None, timeout: float = 30.0,
               **kw) -> TcpCommunicator:
    """Connect rank ``rank`` to every other rank of ``table`` (list of (host, port) by rank)
    within ``timeout`` seconds (see :func:`connect_peers`), close the listener (nobody may
    join later) and return the rank's communicator (``kw``: ``TcpCommunicator``'s options).
    A connection attempt that fails authentication is dropped and logged; the mesh keeps
    waiting for the real peer until the deadline."""
    config = config or TransportConfig()
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


__all__ = ["MAX_PENDING", "TcpCommunicator", "build_mesh", "connect_peers", "listen", "local_mesh"]
