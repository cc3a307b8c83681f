"""Setting up authenticated connections between ranks, all at once.

Rank i connects to the ranks in ``connect_to`` and accepts those in ``accept_from`` (in a
mesh: every lower and every higher rank); each connection is authenticated with the per-job
secret (``handshake.py``). Nothing waits serially: the connections out are opened and
authenticated concurrently, every accepted connection is authenticated on its own thread, and
one deadline bounds the whole set-up. A connection that fails authentication, sends garbage or
stays idle is dropped (and logged) without delaying the others; at most ``MAX_PENDING``
unauthenticated connections are held at once (the oldest is dropped to make room), so a flood
of idle connections cannot starve the real peers.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import sys
import threading
import time

from clusterlab.comm.errors import CommError, CommTimeout, ProtocolError
from clusterlab.net.transport_config import TransportConfig
from clusterlab.rendezvous import handshake

HANDSHAKE_LIMIT = 5.0   # seconds an accepted connection gets to authenticate
MAX_PENDING = 64        # unauthenticated connections held at once
RETRY = 0.05            # seconds between attempts to reach a peer that is not listening yet
_CALL = struct.Struct("<Q")  # per-call mode: the call a new connection is for


def _log(msg: str) -> None:
    print(f"clusterlab: {msg}", file=sys.stderr, flush=True)


class Early:
    """Authenticated connections that arrived for the next set-up while this one was running
    (per-call mode: a rank that finished a call connects for the next one at once)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.socks: dict[int, tuple[int, socket.socket]] = {}  # peer -> (call number, socket)
        self.wake_r, self.wake_w = os.pipe()  # a connection arrived: a running set-up looks

    def put(self, peer: int, call: int, s: socket.socket) -> bool:
        """Keep ``s`` for ``call``; False if ``peer`` already has one waiting (or closed)."""
        with self.lock:
            if peer in self.socks or self.wake_w < 0:
                return False
            self.socks[peer] = (call, s)
            os.write(self.wake_w, b"x")
            return True

    def take(self, call: int, peers) -> dict[int, socket.socket]:
        """The connections waiting for ``call`` from ``peers``."""
        with self.lock:
            if self.wake_r >= 0:
                try:
                    os.read(self.wake_r, 4096)
                except BlockingIOError:
                    pass
            return {p: self.socks.pop(p)[1] for p, (c, _) in list(self.socks.items()) if c == call and p in peers}

    def close(self) -> None:
        with self.lock:
            socks, self.socks = [s for _, s in self.socks.values()], {}
            for fd in (self.wake_r, self.wake_w):
                if fd >= 0:
                    os.close(fd)
            self.wake_r = self.wake_w = -1
        for s in socks:
            s.close()


class _SetUp:
    """The connections of one rank's set-up, gathered from several threads."""

    def __init__(self, rank: int, secret: bytes, config: TransportConfig, deadline: float, early: Early | None,
                 call: int | None):
        self.rank, self.secret, self.config, self.deadline = rank, secret, config, deadline
        self.early, self.call = early, call
        self.active = True  # after the set-up, a late handshake goes to `early` (or is refused)
        self.lock = threading.Lock()
        self.socks: dict[int, socket.socket] = {}
        self.error: BaseException | None = None
        self.pending: dict[socket.socket, float] = {}  # accepted, authenticating -> accept time
        self.threads: list[threading.Thread] = []   # connecting out
        self.auth_threads: list[threading.Thread] = []
        self.wake_r, self.wake_w = os.pipe()  # a thread finished: the accept loop looks again

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def _done(self) -> None:
        with self.lock:  # the pipe is closed under this lock: no write can reach a reused fd
            if self.wake_w >= 0:
                try:
                    os.write(self.wake_w, b"x")
                except OSError:
                    pass

    def start(self, target, *args) -> None:
        t = threading.Thread(target=target, args=args, name=f"clusterlab-setup-{self.rank}", daemon=True)
        (self.auth_threads if target == self.authenticate else self.threads).append(t)
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
                if self.call is not None:  # which call this connection is for (per-call mode)
                    s.settimeout(max(self.left(), 0.01))
                    s.sendall(_CALL.pack(self.call))
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
            peer = handshake.accept(s, self.secret, self.rank,
                                    lambda r: r in expected and (self.early is not None or r not in self.socks),
                                    max(limit, 0.01))
            call = self.call
            if call is not None:
                call = _CALL.unpack(handshake.recv_exact(s, _CALL.size, time.monotonic() + max(limit, 0.01),
                                                         f"rank {peer}"))[0]
                if call not in (self.call, self.call + 1):
                    raise ProtocolError(f"rank {peer} connected for call {call}; this is call {self.call}")
            with self.lock:
                self.pending.pop(s, None)
                if self.active and peer not in self.socks and call == self.call:
                    self.config.apply(s, self.rank)
                    self.socks[peer] = s
                    return
            if self.early is not None:  # the peer's connection for the next call
                self.config.apply(s, self.rank)
                if self.early.put(peer, call, s):
                    return
            raise ProtocolError(f"a second connection claims to be rank {peer}")  # keep the first
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
        """Drop what is still authenticating (with ``early``: let it finish, for the next
        set-up) and wait (briefly) for the threads."""
        with self.lock:
            self.active = False
            pending = list(self.pending) if self.early is None else []
        for s in pending:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in self.threads + (self.auth_threads if self.early is None else []):
            t.join(timeout=2.0)
        with self.lock:
            for fd in (self.wake_r, self.wake_w):
                os.close(fd)
            self.wake_r = self.wake_w = -1


def connect_peers(rank: int, size: int, table: list[tuple[str, int]], listener: socket.socket | None,
                  secret: bytes, config: TransportConfig | None = None, timeout: float = 30.0,
                  connect_to=None, accept_from=None, early: Early | None = None,
                  call: int | None = None) -> dict[int, socket.socket]:
    """Authenticated sockets to ``connect_to`` (default: every lower rank) and from
    ``accept_from`` (default: every higher rank), all set up at once within ``timeout``
    seconds. ``table[r]`` is rank r's listening (host, port); ``listener`` is this rank's
    (left open: the caller closes it). ``early``: connections a previous set-up received ahead
    of time are used, and a second connection from a peer is kept there for the next set-up
    instead of refused (per-call mode); ``call``: the number of the call the connections are for,
    sent by the connecting side after the handshake (per-call mode: a peer's connection for the
    next call can overtake its connection for this one)."""
    config = config or TransportConfig()
    out_peers = list(range(rank)) if connect_to is None else sorted(connect_to)
    expected = set(range(rank + 1, size)) if accept_from is None else set(accept_from)
    if expected and listener is None:
        raise CommError(f"rank {rank} must accept connections but has no listener")
    st = _SetUp(rank, secret, config, time.monotonic() + timeout, early, call)
    if early is not None:
        os.set_blocking(early.wake_r, False)
        st.socks.update(early.take(call, expected))
    try:
        for j in out_peers:
            host, port = table[j]
            st.start(st.connect, j, host, port)
        poller = select.poll()
        poller.register(st.wake_r, select.POLLIN)
        if early is not None:
            poller.register(early.wake_r, select.POLLIN)
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
                if early is not None and fd == early.wake_r:  # a previous set-up's late handshake
                    got = early.take(call, expected)
                    with st.lock:
                        st.socks.update({p: x for p, x in got.items() if p not in st.socks})
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
