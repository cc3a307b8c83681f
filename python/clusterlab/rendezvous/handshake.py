"""Mutual challenge-response authentication of a new connection with the per-job secret.

Both ends prove they hold the secret without sending it, and bind the proof to the two ranks
and to two fresh nonces, so a recorded exchange cannot be replayed and one side's answer cannot
be reflected back as the other's (the MACs carry different labels)::

    connector -> acceptor   HELLO   magic, version, my rank, your rank, nonce_c
    acceptor  -> connector  REPLY   magic, my rank, nonce_a, HMAC(secret, "accept"  | nonce_c | nonce_a | ranks)
    connector -> acceptor   FINISH  HMAC(secret, "connect" | nonce_a | nonce_c | ranks)
    acceptor  -> connector  OK

Any mismatch closes the connection with ``ProtocolError``; every read has a deadline.
The launcher authenticates as rank ``LAUNCHER`` (-1).

>>> import socket, threading
>>> a, b = socket.socketpair()
>>> out = {}
>>> t = threading.Thread(target=lambda: out.setdefault("peer", accept(b, b"k" * 32, 0, {1}, 5.0)))
>>> t.start(); connect(a, b"k" * 32, 1, 0, 5.0); t.join()
>>> out["peer"]
1
"""

from __future__ import annotations

import hmac
import os
import select
import socket
import struct
import time
from collections.abc import Callable, Container

from clusterlab.rendezvous.errors import CommTimeout, ProtocolError

LAUNCHER = -1
HS_MAGIC = b"CLBH"
HS_VERSION = 1
NONCE = 32
_HELLO = struct.Struct(f"<4sB3xii{NONCE}s")           # magic, version, from, to, nonce
_REPLY = struct.Struct(f"<4sii{NONCE}s32s")            # magic, from, to, nonce, mac
_OK = b"CLOK"
MIN_SECRET = 16


def _mac(secret: bytes, label: bytes, n1: bytes, n2: bytes, conn_rank: int, acc_rank: int) -> bytes:
    return hmac.new(secret, label + n1 + n2 + struct.pack("<ii", conn_rank, acc_rank), "sha256").digest()


def recv_exact(sock: socket.socket, n: int, deadline: float, who: str) -> bytes:
    """Read exactly ``n`` bytes before ``deadline`` (``time.monotonic``) from a blocking socket."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise CommTimeout(f"handshake with {who} timed out")
        sock.settimeout(left)
        try:
            k = sock.recv_into(view[got:])
        except TimeoutError:
            raise CommTimeout(f"handshake with {who} timed out") from None
        except OSError as e:
            raise ProtocolError(f"handshake with {who} failed: {e}") from None
        if k == 0:
            raise ProtocolError(f"{who} closed the connection during the handshake")
        got += k
    return bytes(buf)


def _sendall(sock: socket.socket, data: bytes, deadline: float, who: str) -> None:
    sock.settimeout(max(deadline - time.monotonic(), 0.001))
    try:
        sock.sendall(data)
    except TimeoutError:
        raise CommTimeout(f"handshake with {who} timed out") from None
    except OSError as e:
        raise ProtocolError(f"handshake with {who} failed: {e}") from None


def _check_secret(secret: bytes) -> None:
    if len(secret) < MIN_SECRET:
        raise ProtocolError(f"the job secret must be at least {MIN_SECRET} bytes")


def connect(sock: socket.socket, secret: bytes, my_rank: int, peer_rank: int, timeout: float) -> None:
    """Authenticate the connecting side of ``sock`` as ``my_rank`` to ``peer_rank``."""
    _check_secret(secret)
    deadline = time.monotonic() + timeout
    who = "the launcher" if peer_rank == LAUNCHER else f"rank {peer_rank}"
    nonce_c = os.urandom(NONCE)
    _sendall(sock, _HELLO.pack(HS_MAGIC, HS_VERSION, my_rank, peer_rank, nonce_c), deadline, who)
    try:
        raw = recv_exact(sock, _REPLY.size, deadline, who)
    except ProtocolError:
        # The acceptor hangs up on a connector it rejects; it is alive, so this is not a death.
        raise ProtocolError(f"{who} rejected the connection (wrong job secret or rank?)") from None
    magic, frm, to, nonce_a, mac_a = _REPLY.unpack(raw)
    if magic != HS_MAGIC or frm != peer_rank or to != my_rank:
        raise ProtocolError(f"{who} answered the handshake with a bad reply")
    if not hmac.compare_digest(mac_a, _mac(secret, b"accept", nonce_c, nonce_a, my_rank, peer_rank)):
        raise ProtocolError(f"{who} failed authentication (it does not hold the job secret)")
    _sendall(sock, _mac(secret, b"connect", nonce_a, nonce_c, my_rank, peer_rank), deadline, who)
    if recv_exact(sock, len(_OK), deadline, who) != _OK:
        raise ProtocolError(f"{who} did not confirm the handshake")


def accept(sock: socket.socket, secret: bytes, my_rank: int,
           allowed: Container[int] | Callable[[int], bool], timeout: float) -> int:
    """Authenticate the accepting side; returns the peer's rank. ``allowed`` says which ranks
    may connect here (a container or a predicate)."""
    _check_secret(secret)
    deadline = time.monotonic() + timeout
    who = "an unauthenticated peer"
    frm, nonce_c = _check_hello(recv_exact(sock, _HELLO.size, deadline, who), my_rank, allowed)
    reply, expect_mac = _reply(secret, my_rank, frm, nonce_c)
    _sendall(sock, reply, deadline, who)
    _check_finish(recv_exact(sock, 32, deadline, who), expect_mac, frm)
    _sendall(sock, _OK, deadline, f"rank {frm}")
    return frm


def _check_hello(raw: bytes, my_rank: int, allowed) -> tuple[int, bytes]:
    who = "an unauthenticated peer"
    magic, version, frm, to, nonce_c = _HELLO.unpack(raw)
    if magic != HS_MAGIC:
        raise ProtocolError(f"{who} sent a bad handshake magic {magic!r}")
    if version != HS_VERSION:
        raise ProtocolError(f"{who} speaks handshake version {version}, this is {HS_VERSION}")
    ok = allowed(frm) if callable(allowed) else frm in allowed
    if to != my_rank or not ok:
        raise ProtocolError(f"{who} claimed to be rank {frm} connecting to rank {to}; not expected here")
    return frm, nonce_c


def _reply(secret: bytes, my_rank: int, frm: int, nonce_c: bytes) -> tuple[bytes, bytes]:
    """The REPLY to send and the FINISH MAC the connector must answer with."""
    nonce_a = os.urandom(NONCE)
    mac_a = _mac(secret, b"accept", nonce_c, nonce_a, frm, my_rank)
    return (_REPLY.pack(HS_MAGIC, my_rank, frm, nonce_a, mac_a),
            _mac(secret, b"connect", nonce_a, nonce_c, frm, my_rank))


def _check_finish(mac_c: bytes, expect: bytes, frm: int) -> None:
    if not hmac.compare_digest(mac_c, expect):
        raise ProtocolError(f"a peer claiming to be rank {frm} failed authentication (wrong job secret)")


class Acceptor:
    """The accepting side of the handshake as a non-blocking state machine, for an event loop
    (the launcher's rendezvous) that serves many connections at once: call :meth:`step` when
    the socket is ready for :attr:`events`; it never waits. A connection that is idle, slow,
    or speaks garbage costs nothing but its file descriptor until :attr:`deadline`.

    >>> import socket, threading
    >>> a, b = socket.socketpair()
    >>> acc = Acceptor(b, b"k" * 32, 0, {1}, timeout=5.0)
    >>> t = threading.Thread(target=connect, args=(a, b"k" * 32, 1, 0, 5.0)); t.start()
    >>> import select
    >>> while (peer := acc.step()) is None:
    ...     _ = select.select([b] if acc.events == select.POLLIN else [], [b] if acc.events == select.POLLOUT else [], [], 1)
    >>> t.join(); peer
    1
    """

    def __init__(self, sock: socket.socket, secret: bytes, my_rank: int,
                 allowed: Container[int] | Callable[[int], bool], timeout: float):
        _check_secret(secret)
        sock.setblocking(False)
        self.sock, self.secret, self.my_rank, self.allowed = sock, secret, my_rank, allowed
        self.deadline = time.monotonic() + timeout
        self.peer: int | None = None  # the claimed rank, once its HELLO is checked
        self._buf = bytearray()
        self._need = _HELLO.size
        self._out = b""
        self._expect_mac = b""
        self._done = False

    def fileno(self) -> int:
        return self.sock.fileno()

    @property
    def events(self) -> int:
        """``select.POLLOUT`` while a reply is pending, else ``select.POLLIN``."""
        return select.POLLOUT if self._out else select.POLLIN

    def step(self) -> int | None:
        """Advance as far as the socket allows. Returns the peer's rank once it is
        authenticated, None while more is needed; raises ``ProtocolError`` on any violation
        or when the peer hangs up."""
        who = "an unauthenticated peer" if self.peer is None else f"a peer claiming to be rank {self.peer}"
        while True:
            if self._out:
                try:
                    k = self.sock.send(self._out)
                except (BlockingIOError, InterruptedError):
                    return None
                except OSError as e:
                    raise ProtocolError(f"handshake with {who} failed: {e}") from None
                self._out = self._out[k:]
                if self._out:
                    return None
                if self._done:
                    return self.peer
            try:
                data = self.sock.recv(self._need - len(self._buf))
            except (BlockingIOError, InterruptedError):
                return None
            except OSError as e:
                raise ProtocolError(f"handshake with {who} failed: {e}") from None
            if not data:
                raise ProtocolError(f"{who} closed the connection during the handshake")
            self._buf += data
            if len(self._buf) < self._need:
                continue
            raw, self._buf = bytes(self._buf), bytearray()
            if self.peer is None:
                self.peer, nonce_c = _check_hello(raw, self.my_rank, self.allowed)
                self._out, self._expect_mac = _reply(self.secret, self.my_rank, self.peer, nonce_c)
                self._need = 32
            else:
                _check_finish(raw, self._expect_mac, self.peer)
                self._out, self._done = _OK, True

    def expired(self, now: float) -> bool:
        return now >= self.deadline
