"""The reference engine: the Rust engine's algorithm (``crates/clusterlab-net/src/engine.rs``)
in Python, with ``frames.py`` for the wire format. Selected with ``engine="python"`` or
``CLUSTERLAB_ENGINE=python``; the tests run the frame and payload checks on both engines.

It frames nothing itself (``send`` always answers ``UNSUPPORTED``: the communicator frames with
``frames.py``), keeps its sockets non-blocking, and receives large payloads (>= ``DIRECT_MIN``)
straight into the array or buffer that is handed out; small frames are assembled in a
per-connection staging buffer, so one ``recv`` can carry many frames.

>>> import socket
>>> from clusterlab.rendezvous import frames
>>> a, b = socket.socketpair()
>>> e0, e1 = create({1: a}, 1 << 20), create({0: b}, 1 << 20)
>>> e0.send_frame(1, frames.pack_header(frames.DATA_BYTES, 5, 0, 2), b"hi", 1.0)
>>> e1.recv(0, 5, 1.0)
b'hi'
>>> e1.recv(0, 5, 0.01)[0] == Status.TIMEOUT
True
"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections import deque

import numpy as np

from clusterlab.comm.errors import ProtocolError
from clusterlab.comm.tcp.engine import EventKind, Status
from clusterlab.rendezvous import frames

STAGE = 256 * 1024        # per-connection staging buffer for small frames
DIRECT_MIN = 32 * 1024    # payloads at least this big are received straight into their buffer
ROUND_BUDGET = 8 << 20    # bytes per connection per poll round: a streaming peer must not keep
                          # a waiting rank from seeing that its own message has arrived
_MAX_SLEEP = 0.5
_HSIZE = frames.HEADER.size
_MAX_HEAD = _HSIZE + frames.MAX_DTYPE_LEN + 8 * frames.MAX_NDIM
_POLLIN = select.POLLIN | select.POLLPRI
_POLLANY = _POLLIN | select.POLLERR | select.POLLHUP | select.POLLNVAL
_UNSUPPORTED = (Status.UNSUPPORTED,)
_TIMEOUT = (Status.TIMEOUT,)
_NO_PEERS = (Status.NO_PEERS,)
_EOF_DETAIL = b"connection closed without goodbye (the process died?)"


class _Conn:
    __slots__ = ("peer", "sock", "fd", "open", "bye", "stage", "sv", "start", "end", "pending", "dest", "dest_obj",
                 "dest_off", "bytes_sent", "bytes_recv", "msgs_sent", "msgs_recv")

    def __init__(self, peer: int, sock: socket.socket):
        self.peer, self.sock, self.fd = peer, sock, sock.fileno()
        self.open = True
        self.bye = False      # the peer said goodbye: its close is no failure
        self.stage = bytearray(STAGE)
        self.sv = memoryview(self.stage)
        self.start = self.end = 0
        self.pending = None   # (Header, dtype, shape) of the frame being received
        self.dest = self.dest_obj = None
        self.dest_off = 0
        self.bytes_sent = self.bytes_recv = self.msgs_sent = self.msgs_recv = 0


class PythonEngine:
    """The ``Engine`` interface in Python (see ``engine.py``)."""

    def __init__(self, socks: dict[int, socket.socket], max_frame: int):
        self.max_frame = max_frame
        self._conns: dict[int, _Conn] = {}
        self._by_fd: dict[int, _Conn] = {}
        self._poll = select.poll()
        self._queues: dict[tuple[int, int], deque] = {}
        self._events: deque = deque()
        self._seq = 0
        self._lock = threading.Lock()
        self._calls = 0
        for peer, s in socks.items():
            self.add(peer, s)

    # --- the call/drainer exclusion (the caller holds it around every other method) ------------
    def acquire(self, timeout: float) -> bool:
        self._calls += 1
        t = min(timeout, threading.TIMEOUT_MAX) if timeout == timeout else 0.0  # NaN: no wait
        return self._lock.acquire(timeout=t) if t > 0 else self._lock.acquire(blocking=False)

    def try_acquire_idle(self, seen: int) -> bool:
        if self._calls != seen or not self._lock.acquire(blocking=False):
            return False
        if self._calls != seen:
            self._lock.release()
            return False
        return True

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    def calls(self) -> int:
        return self._calls

    # --- connections ----------------------------------------------------------------------------
    def add(self, peer: int, sock: socket.socket) -> None:
        sock.setblocking(False)
        c = _Conn(peer, sock)
        old = self._conns.get(peer)
        if old is not None:
            self.forget(peer)
            c.bytes_sent, c.bytes_recv, c.msgs_sent, c.msgs_recv = (old.bytes_sent, old.bytes_recv, old.msgs_sent,
                                                                    old.msgs_recv)
        self._conns[peer] = c
        self._by_fd[c.fd] = c
        self._poll.register(c.fd, _POLLIN)

    def forget(self, peer: int) -> None:
        c = self._conns.get(peer)
        if c is not None and c.open:
            self._close(c)

    def _close(self, c: _Conn) -> None:
        c.open = False
        try:
            self._poll.unregister(c.fd)
        except (KeyError, ValueError):
            pass
        if self._by_fd.get(c.fd) is c:
            del self._by_fd[c.fd]

    def counters(self) -> list[tuple[int, int, int, int, int, bool]]:
        return [(c.peer, c.bytes_sent, c.bytes_recv, c.msgs_sent, c.msgs_recv, c.open) for c in self._conns.values()]

    # --- receiving ------------------------------------------------------------------------------
    def recv(self, source: int, tag: int, timeout: float):
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            if self._events:
                return self._events.popleft()
            got = self._take(source, tag)
            if got is not None:
                return got[1] if source >= 0 else (Status.MESSAGE, got[0], got[1])
            if source >= 0:
                c = self._conns.get(source)
                if c is None or not c.open:
                    return (Status.CLOSED, source)
            if not any(c.open for c in self._conns.values()):
                return _NO_PEERS
            left = deadline - time.monotonic()
            if left <= 0:
                return _TIMEOUT
            self._poll_once(min(left, _MAX_SLEEP), None, ROUND_BUDGET)

    def pump(self, budget: int) -> int:
        self._poll_once(0.0, None, budget)
        return sum(_nbytes(m) for q in self._queues.values() for _, m in q)

    def _take(self, source: int, tag: int):
        if source >= 0:
            key = (source, tag)
        else:
            best = None
            for k, q in self._queues.items():
                if k[1] == tag and q and (best is None or q[0][0] < best[1]):
                    best = (k, q[0][0])
            if best is None:
                return None
            key = best[0]
        q = self._queues.get(key)
        if not q:
            return None
        m = q.popleft()[1]
        if not q:
            del self._queues[key]
        return key[0], m

    def _deliver(self, c: _Conn, tag: int, obj) -> None:
        c.msgs_recv += 1
        self._seq += 1
        q = self._queues.get((c.peer, tag))
        if q is None:
            q = self._queues[(c.peer, tag)] = deque()
        q.append((self._seq, obj))

    def _event(self, c: _Conn, kind: EventKind, detail: bytes) -> None:
        self._events.append((Status.EVENT, c.peer, kind.value, detail))

    def _poll_once(self, timeout: float, out: _Conn | None, budget: int) -> bool:
        """One poll over every open connection (plus POLLOUT on ``out``); reads what is ready.
        Returns whether ``out`` is writable."""
        if not self._by_fd:
            return False
        writable = False
        for fd, ev in self._poll.poll(timeout * 1000.0):
            c = self._by_fd.get(fd)
            if c is None or not c.open:
                continue
            if c is out and ev & select.POLLOUT:
                writable = True
            if ev & _POLLANY & ~select.POLLOUT:
                self._read(c, budget)
        return writable

    def _read(self, c: _Conn, budget: int) -> None:
        """Read what is available on ``c`` (about ``budget`` bytes at most), queue complete
        messages, turn goodbyes, aborts, closes and bad frames into events."""
        while c.open and budget > 0:
            try:
                if c.dest is not None:
                    want = len(c.dest) - c.dest_off
                    n = c.sock.recv_into(c.dest[c.dest_off:], 0, socket.MSG_DONTWAIT)
                else:
                    if c.start == c.end:
                        c.start = c.end = 0
                    want = STAGE - c.end
                    n = c.sock.recv_into(c.sv[c.end:], 0, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                self._close(c)
                self._event(c, EventKind.ERROR, f"connection error: {e.strerror or e}".encode())
                return
            if n == 0:
                self._close(c)
                self._event(c, EventKind.EOF, _EOF_DETAIL)
                return
            c.bytes_recv += n
            budget -= n
            if c.dest is not None:
                c.dest_off += n
                if c.dest_off == len(c.dest):
                    obj = c.dest_obj
                    c.dest = c.dest_obj = None
                    tag = c.pending[0].tag
                    c.pending = None
                    self._deliver(c, tag, bytes(obj) if isinstance(obj, bytearray) else obj)
            else:
                c.end += n
                try:
                    self._parse(c)
                except ProtocolError as e:
                    self._close(c)
                    self._event(c, EventKind.PROTOCOL, str(e).encode())
                    return
            if n < want:
                return

    def _parse(self, c: _Conn) -> None:
        sv = c.sv
        while True:
            avail = c.end - c.start
            if c.pending is None:
                if avail < _HSIZE:
                    break
                h = frames.decode_at(c.stage, c.start, c.peer, self.max_frame)
                if h.kind == frames.CONTROL:
                    raise ProtocolError(f"rank {c.peer} sent an unexpected control frame (kind {frames.CONTROL})")
                mlen = h.dtlen + 8 * h.ndim
                if avail < _HSIZE + mlen:
                    break
                dt = shape = None
                if h.kind == frames.DATA_ARRAY:
                    dt, shape = frames.decode_array_meta(sv[c.start + _HSIZE:c.start + _HSIZE + mlen], h)
                c.start += _HSIZE + mlen
                avail -= _HSIZE + mlen
                c.pending = (h, dt, shape)
            h, dt, shape = c.pending
            n = h.length
            if avail >= n:
                off = c.start
                c.start += n
                c.pending = None
                if h.kind == frames.DATA_ARRAY:
                    arr = np.frombuffer(c.stage, dt, n // dt.itemsize, off).copy() if n else np.empty(0, dt)
                    self._deliver(c, h.tag, arr.reshape(shape) if len(shape) != 1 else arr)
                elif h.kind == frames.DATA_BYTES:
                    self._deliver(c, h.tag, bytes(sv[off:off + n]))
                elif h.kind == frames.BYE:
                    c.bye = True
                    self._event(c, EventKind.BYE, b"")
                else:
                    self._event(c, EventKind.ABORT, bytes(sv[off:off + n]))
                continue
            # incomplete payload
            if n >= DIRECT_MIN and h.kind in (frames.DATA_ARRAY, frames.DATA_BYTES):
                # big: receive the rest straight into the object that is handed out
                if h.kind == frames.DATA_ARRAY:
                    obj = np.empty(shape, dt)
                    dest = memoryview(obj.reshape(-1).view(np.uint8))
                else:
                    obj = bytearray(n)
                    dest = memoryview(obj)
                dest[:avail] = sv[c.start:c.end]
                c.start = c.end = 0
                c.dest, c.dest_obj, c.dest_off = dest, obj, avail
                return
            if c.start + n > STAGE:
                self._compact(c)
            break
        if c.pending is None and c.start + _MAX_HEAD > STAGE:
            self._compact(c)

    @staticmethod
    def _compact(c: _Conn) -> None:
        avail = c.end - c.start
        c.sv[:avail] = c.sv[c.start:c.end]
        c.start, c.end = 0, avail

    # --- sending --------------------------------------------------------------------------------
    def send(self, dest: int, tag: int, source: int, payload, timeout: float):
        return _UNSUPPORTED  # the communicator frames with frames.py and calls send_frame

    def send_frame(self, dest: int, head: bytes, payload, timeout: float):
        c = self._conns.get(dest)
        if c is None:
            raise ValueError(f"no connection to rank {dest}")
        deadline = time.monotonic() + max(timeout, 0.0)
        body = memoryview(payload)
        if body.format != "B" or body.ndim != 1:
            body = body.cast("B")  # the communicator passes bytes or uint8 arrays: no copy
        body = body if body.nbytes else None
        total = len(head) + (body.nbytes if body is not None else 0)
        bufs = [head, body] if body is not None else [head]
        sent = 0
        while True:
            if not c.open:
                return self._closed_event(c)
            try:
                sent += c.sock.sendmsg(bufs, (), socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
            except (BlockingIOError, InterruptedError):
                pass
            except OSError as e:
                self._close(c)
                c.bytes_sent += sent
                return (Status.EVENT, dest, EventKind.ERROR.value, f"connection error while sending: {e.strerror or e}".encode())
            if sent >= total:
                c.bytes_sent += total
                c.msgs_sent += 1
                return None
            bufs = [head[sent:], body] if sent < len(head) else [body[sent - len(head):]]
            # kernel buffer full: wait for room, reading whatever arrives meanwhile
            self._poll.modify(c.fd, _POLLIN | select.POLLOUT)
            try:
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        c.bytes_sent += sent
                        return _TIMEOUT
                    writable = self._poll_once(min(left, _MAX_SLEEP), c, ROUND_BUDGET)
                    for i, e in enumerate(self._events):
                        if e[1] != dest and self._is_failure(e):
                            # another peer failed while we wait: the job is failing, say so now
                            del self._events[i]
                            c.bytes_sent += sent
                            return e
                    if writable or not c.open:
                        break
            finally:
                if c.open:
                    self._poll.modify(c.fd, _POLLIN)

    def _is_failure(self, e: tuple) -> bool:
        """Whether event ``e`` fails the job: anything but a goodbye and the close or error after one."""
        if e[2] == EventKind.BYE.value:
            return False
        if e[2] in (EventKind.EOF.value, EventKind.ERROR.value):
            c = self._conns.get(e[1])
            return c is None or not c.bye
        return True

    def _closed_event(self, c: _Conn) -> tuple:
        # the first event of this peer: a goodbye before the close makes the close expected
        for i, e in enumerate(self._events):
            if e[1] == c.peer:
                del self._events[i]
                return e
        return (Status.EVENT, c.peer, EventKind.ERROR.value, b"connection is closed")

    def send_nowait(self, peer: int, frame: bytes) -> bool:
        c = self._conns.get(peer)
        if c is None or not c.open:
            return False
        try:
            n = c.sock.send(frame, socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL)
        except OSError:
            return False
        c.bytes_sent += n
        return n == len(frame)


def _nbytes(obj) -> int:
    return obj.nbytes if isinstance(obj, np.ndarray) else len(obj)


def create(socks: dict[int, socket.socket], max_frame: int) -> PythonEngine:
    return PythonEngine(socks, max_frame)
