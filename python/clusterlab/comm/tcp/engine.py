"""The socket engine interface of the TCP mesh, its named statuses, and the choice of engine.

An engine moves and checks bytes on a rank's connections and never decides policy: it polls
every connection, reads and checks frames (``frames.py`` / Rust's ``wire``), files complete
messages by (source, tag), and sends [header, payload] reading whatever arrives while the
kernel buffer is full. A peer that says goodbye, closes, breaks the protocol or aborts becomes
an event that ``TcpCommunicator`` acts on. Two engines implement it:

- ``rust`` (default): ``clusterlab._core.NetEngine``, the pure crate ``clusterlab-net``'s
  engine behind a thin binding (``engine_rust.py``);
- ``python``: the reference engine (``engine_python.py``), the same algorithm in Python.

Results are the payload itself (the latency path: a message from the awaited source) or a
tuple whose first item is a ``Status``; ``Status`` and ``EventKind`` carry the same names as
Rust's ``engine::Status`` and ``engine::EventKind`` (a test checks them against the binding).

>>> Status.TIMEOUT == 1, EventKind("eof").name
(True, 'EOF')
>>> sorted(ENGINES)
['python', 'rust']
"""

from __future__ import annotations

import enum
import importlib
import os
import socket
from typing import Any, Protocol


class Status(enum.IntEnum):
    """First item of an engine's result tuple (Rust: ``clusterlab_net::Status``)."""

    MESSAGE = 0       # (MESSAGE, src, payload): a message (any-source waits)
    TIMEOUT = 1       # (TIMEOUT,): the deadline passed
    EVENT = 2         # (EVENT, peer, kind name, detail bytes): see EventKind
    NO_PEERS = 3      # (NO_PEERS,): no connection is open any more
    CLOSED = 4        # (CLOSED, peer): the awaited peer closed and nothing of it is queued
    UNSUPPORTED = 5   # (UNSUPPORTED,): send only: frame this payload yourself (send_frame)


class EventKind(str, enum.Enum):
    """Why a connection needs the communicator's attention (Rust: ``clusterlab_net::EventKind``)."""

    EOF = "eof"            # closed without a goodbye (the process died?)
    ERROR = "error"        # a socket error
    PROTOCOL = "protocol"  # a frame that breaks the protocol (detail: why)
    BYE = "bye"            # the peer is done
    ABORT = "abort"        # the peer fails the job (detail: the ABORT frame's JSON)


class Engine(Protocol):
    """What both engines provide. ``timeout`` is in seconds; ``peer``/``dest``/``source`` are ranks.

    The engine is also the lock between the program's calls and the background drainer: the
    communicator holds it (``acquire``/``release``) around every other method. The Rust
    engine also has the latency path (``bind``, ``comm_send``, ``comm_recv``, ``set_timeout``,
    ``stop_fast``: see ``engine_rust.py``)."""

    def acquire(self, timeout: float) -> bool:
        """Hold the engine for a program call (counted), waiting at most ``timeout``; whether
        it was taken."""

    def try_acquire_idle(self, seen: int) -> bool:
        """The drainer's: hold it only if free and no call started since ``seen`` calls."""

    def release(self) -> None:
        """Give it back."""

    def locked(self) -> bool:
        """Whether a call holds it."""

    def calls(self) -> int:
        """Program calls started so far."""

    def send(self, dest: int, tag: int, source: int, payload: Any, timeout: float) -> tuple | None:
        """Frame and send; None when all of it is in the kernel, ``(UNSUPPORTED,)`` when the
        caller must frame this payload itself, else ``(TIMEOUT,)`` or an ``(EVENT, ...)``."""

    def send_frame(self, dest: int, head: bytes, payload: Any, timeout: float) -> tuple | None:
        """Send a frame the caller built (``frames.pack_header``) with ``payload`` (bytes or a
        C-contiguous numpy array, sent from its own memory). Results as ``send``."""

    def send_nowait(self, peer: int, frame: bytes) -> bool:
        """One non-blocking attempt (news of a failure must never wait); whether all of it went."""

    def recv(self, source: int, tag: int, timeout: float) -> Any:
        """The payload of the next message from ``source`` with ``tag``; for ``source`` -1
        (any), ``(MESSAGE, src, payload)``; otherwise a status tuple. Events come first."""

    def pump(self, budget: int) -> int:
        """Read what is ready without waiting (about ``budget`` bytes per connection); returns
        the payload bytes queued."""

    def add(self, peer: int, sock: socket.socket) -> None:
        """Start using ``sock`` (authenticated) for ``peer``, replacing a closed connection."""

    def forget(self, peer: int) -> None:
        """Stop using ``peer``'s connection (the caller is about to close it)."""

    def counters(self) -> list[tuple[int, int, int, int, int, bool]]:
        """``[(peer, bytes_sent, bytes_recv, msgs_sent, msgs_recv, open), ...]``."""


ENGINES = {"rust": "clusterlab.comm.tcp.engine_rust", "python": "clusterlab.comm.tcp.engine_python"}
ENV = "CLUSTERLAB_ENGINE"


def default_name() -> str:
    """``$CLUSTERLAB_ENGINE`` if set (``python`` picks the reference engine), else ``rust``."""
    return os.environ.get(ENV) or "rust"


def create(name: str | None, socks: dict[int, socket.socket], max_frame: int) -> Engine:
    """An engine called ``name`` (None: :func:`default_name`) over ``socks`` (peer -> socket)."""
    name = name or default_name()
    if name not in ENGINES:
        from clusterlab.errors import ConfigError

        raise ConfigError(f"unknown mesh engine {name!r} (one of {', '.join(sorted(ENGINES))}; "
                          f"set by engine= or ${ENV})")
    return importlib.import_module(ENGINES[name]).create(socks, max_frame)


__all__ = ["ENGINES", "Engine", "EventKind", "Status", "create", "default_name"]
