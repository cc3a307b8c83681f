"""The Rust engine: ``clusterlab._core.NetEngine``, the pure crate ``clusterlab-net``'s socket
engine (``crates/clusterlab-net/src/engine.rs``) behind a binding that only converts arguments
and releases the interpreter lock while it waits (``crates/clusterlab-py/src/net.rs``).

It takes the connections' file descriptors, not the sockets: Python keeps the sockets and
closes them (after ``forget``). It switches them to blocking mode, so that a wait on the one
open connection sleeps in ``recv()`` (as NPtcp does) instead of ``poll()`` then ``recv()``;
every other call passes ``MSG_DONTWAIT``.

It frames ``bytes`` and C-contiguous plain numeric arrays itself (no Python struct packing)
and answers ``(UNSUPPORTED,)`` for anything else, which the communicator frames with
``frames.py`` and sends with ``send_frame``.

It is its own lock (``acquire``/``release``: a futex word, ``clusterlab_net::lock``; every
method called by another thread than the holder waits for it, bounded) and carries the latency
path: after ``bind(comm, rank, size)``, ``comm_send``/``comm_recv`` are whole
``TcpCommunicator.send``/``recv`` calls in Rust (the communicator installs them as its own),
calling back into the communicator's Python methods only for what they cannot finish.
"""

from __future__ import annotations

import os
import socket

from clusterlab._core import NetEngine

_MALLOC_TUNED = False


class RustEngine(NetEngine):
    """``NetEngine`` taking sockets, as the ``Engine`` interface says (methods are Rust's)."""

    __slots__ = ()

    def __new__(cls, socks: dict[int, socket.socket], max_frame: int):
        return super().__new__(cls, [(p, s.fileno()) for p, s in socks.items()], max_frame)

    def add(self, peer: int, sock: socket.socket) -> None:
        NetEngine.add(self, peer, sock.fileno())


def create(socks: dict[int, socket.socket], max_frame: int) -> RustEngine:
    _tune_malloc_once()
    return RustEngine(socks, max_frame)


def _tune_malloc_once() -> None:
    """Let glibc reuse freed large buffers instead of taking fresh (page-faulting) memory from
    the kernel each time: 1000 x 1 MiB received cost 257,000 page faults without any reuse.
    Received payloads of 32 KiB and more come from the engine's own bounded pool
    (``clusterlab-net``'s ``pool.rs``); this serves the rest (smaller payloads, the ``bytes``
    copies of big ones, Python's objects): large buffers up to 64 MiB come from the heap, and up
    to 256 MiB of freed memory is kept. ``CLUSTERLAB_MALLOC_TUNE=0`` leaves malloc alone."""
    global _MALLOC_TUNED
    if _MALLOC_TUNED or os.environ.get("CLUSTERLAB_MALLOC_TUNE", "1") == "0":
        return
    _MALLOC_TUNED = True
    from clusterlab._core import net_tune_malloc

    net_tune_malloc(64 << 20, 256 << 20)
