"""``TcpCommunicator``: clusterlab's own full mesh of persistent TCP connections.

Design (why it is shaped this way):

- **One progress engine, driven by the caller.** A rank blocked in ``recv`` polls *all* its
  sockets and reads whatever arrives into per-(source, tag) queues; a rank blocked in ``send``
  (kernel buffer full) does the same while it waits for room. So two ranks that send large
  messages to each other at once never deadlock, and a peer's death (EOF) is seen at once
  whatever we are waiting for. The latency path has no thread hop: the thread that wants the
  message reads the socket itself (with a single open connection, the Rust engine sleeps in
  ``recv`` on it rather than in ``poll``: nothing else needs watching).
- **A background drainer** takes over only while the program is *not* inside a
  communication call (e.g. counting for a minute): it keeps reading so that peers sending to
  us do not stall in ``send`` until their timeout, and it notices dead peers.
- **Zero-copy where the OS allows:** a send is one ``sendmsg`` of [header, payload buffer]
  (numpy arrays are not copied); a large incoming array is received with ``recv_into`` straight
  into the ``np.empty`` that is returned. Small messages are assembled in a per-connection
  staging buffer, so one ``recv`` can carry many frames.
- **Failure is loud and named.** EOF without a goodbye frame, a reset, or a frame that breaks
  the protocol marks that rank failed; from then on every blocking call raises
  ``PeerFailure(rank)`` (or ``ProtocolError``) and the rank tells the other peers (ABORT
  frame), so all ranks name the same culprit. Every wait has a deadline.
"""

from __future__ import annotations

import json
import os
import select
import socket
import sys
import threading
import time
from collections import deque

import numpy as np

from clusterlab.comm.communicator import COLLECTIVE_TAG, MAX_USER_TAG, Communicator
from clusterlab.comm.errors import CommError, CommTimeout, PeerFailure, ProtocolError
from clusterlab.comm.tcp import frames, handshake
from clusterlab.comm.tcp.frames import ABORT, BYE, DATA_ARRAY, DATA_BYTES, HEADER
from clusterlab.net import tcp_info
from clusterlab.net.transport_config import TransportConfig

STAGE = 256 * 1024       # per-connection staging buffer for small frames
DIRECT_MIN = 32 * 1024   # payloads at least this big are received straight into their buffer
_HSIZE = HEADER.size
_POLLIN = select.POLLIN | select.POLLPRI
_POLLERR = select.POLLERR | select.POLLHUP | select.POLLNVAL
_unpack_from = HEADER.unpack_from
_MAGIC = frames.MAGIC
_MIN_TAG = frames.MIN_TAG
_MAX_TAG = frames.MAX_USER_TAG
_META_CACHE: dict = {}
try:  # the Rust hot path (clusterlab._core.NetEngine); CLUSTERLAB_ENGINE=python picks the reference
    from clusterlab._core import NetEngine as _NetEngine
except ImportError:  # pragma: no cover - a core built without it
    _NetEngine = None
if os.environ.get("CLUSTERLAB_ENGINE", "") == "python":
    _NetEngine = None
_DT_CACHE: dict = {}   # (array meta bytes, payload length) -> checked (dtype, shape)
_IDLE = 0.05             # the drainer steps in after this long without a communication call
_ROUND_BUDGET = 8 << 20   # bytes read per connection per poll round: a streaming peer must not
                          # keep a waiting rank from seeing that its own message has arrived
_DRAIN_BITE = 1 << 20     # bytes per connection per drainer step
_DRAIN_CAP = 1 << 30      # the drainer reads ahead at most this much for a busy program
_IDLE_CHECK = 0.05       # ... checking this often (a cheap wake-up; nothing on the hot path)


class _Conn:
    __slots__ = ("peer", "sock", "fd", "stage", "sv", "start", "end", "hdr", "dtype", "shape",
                 "dest", "dest_obj", "dest_off", "dest_tag", "open", "bye", "bytes_sent", "bytes_recv",
                 "msgs_sent", "msgs_recv")

    def __init__(self, peer: int, sock: socket.socket):
        self.peer, self.sock, self.fd = peer, sock, sock.fileno()
        self.stage = bytearray(STAGE)
        self.sv = memoryview(self.stage)
        self.start = self.end = 0
        self.hdr = None
        self.dtype = self.shape = None
        self.dest = self.dest_obj = None
        self.dest_off = self.dest_tag = 0
        self.open = True
        self.bye = False
        self.bytes_sent = self.bytes_recv = self.msgs_sent = self.msgs_recv = 0


class TcpCommunicator(Communicator):
    """A rank of a TCP full mesh. Build one with :func:`build_mesh` (or ``clusterlab.comm.world()``).

    >>> comms = local_mesh(2)          # two ranks in one process, for examples and tests
    >>> comms[0].send(1, np.arange(4.0), tag=3)
    >>> comms[1].recv(0, tag=3)
    array([0., 1., 2., 3.])
    >>> comms[1].send(0, b"hi"); comms[0].recv_any()
    (1, b'hi')
    >>> for c in comms: c.close()
    """

    def __init__(self, rank: int, size: int, socks: dict[int, socket.socket],
                 config: TransportConfig | None = None, max_frame: int = frames.DEFAULT_MAX_FRAME,
                 default_timeout: float | None = None, drainer: bool = True,
                 engine: str | None = None):
        self.rank, self.size = rank, size
        self.config = config or TransportConfig()
        self.max_frame = max_frame
        if default_timeout is not None:
            self.default_timeout = default_timeout
        self._conns: dict[int, _Conn] = {}
        self._by_fd: dict[int, _Conn] = {}
        self._poll = select.poll()
        self._in_force: dict = {}
        for peer, s in socks.items():
            s.setblocking(False)
            c = _Conn(peer, s)
            self._conns[peer] = c
            self._by_fd[c.fd] = c
            self._poll.register(c.fd, _POLLIN)
            if not self._in_force:
                self._in_force = self.config.apply(s, rank)
            else:
                self.config.apply(s, rank)
        self._queues: dict[tuple[int, int], deque] = {}
        self._seq = 0
        self._error: tuple[type, tuple] | None = None  # first failure, re-raised by every call
        self._culprit: tuple[int, str] = (rank, "")
        self._closed = False
        self._lock = threading.Lock()
        self._busy = 0
        self._last_active = time.monotonic()
        self._eng = None
        if socks and _NetEngine is not None and engine != "python":
            _tune_malloc_once()
            self._eng = _NetEngine([(p, c.fd) for p, c in self._conns.items()], max_frame)
            # the Rust engine owns the reading and sending; bind its paths
            self._send = self._send_rs
            self._recv = self._recv_rs
            self._recv_any = self._recv_any_rs
            # the latency path: public send/recv in one Python frame each (same checks)
            self.send = self._send_fast
            self.recv = self._recv_fast
        self._drainer = None
        self._wake_r = self._wake_w = -1
        if drainer and socks and os.environ.get("CLUSTERLAB_DRAINER", "1") != "0":
            self._wake_r, self._wake_w = os.pipe()
            self._drainer = threading.Thread(target=self._drain_loop, name=f"clusterlab-drain-{rank}",
                                             daemon=True)
            self._drainer.start()

    # --- public extras -----------------------------------------------------------------------
    def stats(self) -> dict:
        """Per-peer traffic counters and the kernel's ``TCP_INFO`` for each connection, plus the
        transport settings in force on this rank."""
        if self._eng is not None:
            for p, bs, br, ms, mr, _open in self._eng.counters():
                c = self._conns[p]
                c.bytes_sent, c.bytes_recv, c.msgs_sent, c.msgs_recv = bs, br, ms, mr
        peers = {}
        for p, c in sorted(self._conns.items()):
            peers[p] = {"bytes_sent": c.bytes_sent, "bytes_recv": c.bytes_recv,
                        "msgs_sent": c.msgs_sent, "msgs_recv": c.msgs_recv,
                        "tcp_info": tcp_info.read(c.sock) if c.open else {}}
        tot = {k: sum(v[k] for v in peers.values()) for k in ("bytes_sent", "bytes_recv", "msgs_sent", "msgs_recv")}
        s = self.config.for_rank(self.rank)
        return {"backend": "tcp", "rank": self.rank, "size": self.size, **tot,
                "transport": {"requested": {"sndbuf": s.sndbuf, "rcvbuf": s.rcvbuf, "nodelay": s.nodelay,
                                            "congestion": s.congestion, "rto_min_us": s.rto_min_us,
                                            "rto_max_ms": s.rto_max_ms},
                              "in_force": self._in_force},
                "peers": peers}

    def abort(self, detail: str = "") -> None:
        """Fail the job from this rank: tell every peer (so they raise ``PeerFailure`` naming
        this rank with ``detail``) and drop the connections."""
        with self._lock:
            if self._closed:
                return
            if self._error is not None:  # we are failing because someone else did: name them
                self._broadcast_abort(*self._failure())
            else:
                self._broadcast_abort(self.rank, detail or "aborted")
            self._shutdown()

    def close(self) -> None:
        """Say goodbye to every peer and close. Idempotent."""
        if self._closed:
            return
        with self._lock:
            if self._closed:
                return
            if self._error is None:
                bye = HEADER.pack(frames.MAGIC, BYE, 0, 0, 0, 0, self.rank, 0)
                for c in self._conns.values():
                    if c.open:
                        try:
                            self._send_frame(c, bye, None, time.monotonic() + 2.0)
                        except CommError:
                            pass
            else:
                self._broadcast_abort(*self._failure())
            self._shutdown()

    # --- point to point ------------------------------------------------------------------------
    def _send(self, dest: int, data, tag: int) -> None:
        kind, view, meta, ndim = frames.payload_view(data)
        n = view.nbytes
        if n > self.max_frame:
            raise CommError(f"message of {n} bytes exceeds the frame limit of {self.max_frame} bytes")
        head = HEADER.pack(frames.MAGIC, kind, ndim, len(meta) - 8 * ndim, 0, tag, self.rank, n) + meta
        self._busy += 1
        with self._lock:
            try:
                self._check(dest)
                c = self._conns[dest]
                self._send_frame(c, head, view if n else None, time.monotonic() + self.default_timeout)
                c.msgs_sent += 1
            finally:
                self._busy -= 1
                self._last_active = time.monotonic()

    def _recv(self, source: int, tag: int, timeout: float):
        key = (source, tag)
        self._busy += 1
        with self._lock:
            try:
                q = self._queues.get(key)
                if q:
                    return self._pop(key, q)
                deadline = time.monotonic() + timeout
                while True:
                    self._check(source)
                    self._progress(deadline, f"a message from rank {source} with tag {tag}")
                    q = self._queues.get(key)
                    if q:
                        return self._pop(key, q)
            finally:
                self._busy -= 1
                self._last_active = time.monotonic()

    def _recv_any(self, tag: int, timeout: float):
        self._busy += 1
        with self._lock:
            try:
                deadline = time.monotonic() + timeout
                while True:
                    best = None
                    for (src, t), q in self._queues.items():
                        if t == tag and q and (best is None or q[0][0] < best[1][0][0]):
                            best = ((src, t), q)
                    if best is not None:
                        return best[0][0], self._pop(*best)
                    self._check(None)
                    if not any(c.open for c in self._conns.values()):
                        raise PeerFailure(next(iter(self._conns), self.rank),
                                          "every peer has closed its connection") if self._conns \
                            else CommError(f"rank {self.rank} has no peers to receive from")
                    self._progress(deadline, f"a message with tag {tag} from any rank")
            finally:
                self._busy -= 1
                self._last_active = time.monotonic()

    # --- Rust engine paths ----------------------------------------------------------------------
    def _send_fast(self, dest: int, data, tag: int = 0) -> None:
        """``send`` on the Rust engine: the checks of ``Communicator.send`` inline, then one
        engine call that builds the header and sends (bytes and plain numeric arrays; anything
        else takes the general path)."""
        if dest == self.rank or not 0 <= dest < self.size:
            self._check_peer(dest)
        if not 0 <= tag < _MAX_USER_TAG and tag != _COLLECTIVE_TAG:
            self._check_tag(tag)
        self._busy += 1  # before taking the lock: tells the drainer to hand it back
        with self._lock:
            try:
                if self._error is not None or self._closed:
                    self._check(None)
                r = self._eng.send_fast(dest, tag, self.rank, data, self.default_timeout)
                if r is None:
                    return
                if r[0] != 5:
                    self._send_failed(dest, r)
            finally:
                self._busy -= 1
                self._last_active = _monotonic()
        self._send_rs(dest, data, tag)  # (5,): not a payload the engine frames itself

    def _recv_fast(self, source: int, tag: int = 0, timeout: float | None = None):
        """``recv`` on the Rust engine: the checks of ``Communicator.recv`` inline; a bytes or
        1-D uint8 message comes back from the engine as itself."""
        if source == self.rank or not 0 <= source < self.size:
            self._check_peer(source)
        if not 0 <= tag < _MAX_USER_TAG and tag != _COLLECTIVE_TAG:
            self._check_tag(tag)
        if timeout is None:
            timeout = self.default_timeout
        self._busy += 1
        with self._lock:
            try:
                if self._error is not None or self._closed:
                    self._check(None)
                deadline = _monotonic() + timeout
                r = self._eng.recv_fast(source, tag, timeout)
                if type(r) is not tuple:
                    return r
                return self._wait_locked(source, tag, deadline, r)[1]
            finally:
                self._busy -= 1
                self._last_active = _monotonic()

    def _send_failed(self, dest: int, r) -> None:
        """Raise for an engine send result ``r`` (timeout or failure of ``dest``); lock held."""
        if r[0] == 1:
            msg = f"rank {self.rank}: timed out waiting for room to send to rank {dest} (it is not receiving)"
            # a frame may be half written: this connection cannot be used again
            if self._error is None:
                self._culprit = (dest, "send timed out")
                self._error = (CommTimeout, (msg,))
            raise CommTimeout(msg)
        self._event(r)
        self._check(dest)
        raise PeerFailure(dest, "it closed its connection (finished)" if self._conns[dest].bye
                          else "connection lost")

    def _send_rs(self, dest: int, data, tag: int) -> None:
        t = type(data)
        if t is np.ndarray or isinstance(data, (np.ndarray, np.generic)):
            if t is not np.ndarray:
                data = np.asarray(data)
            dts = frames._DTYPE_STR.get(data.dtype)
            if dts is None:
                frames.payload_view(data.reshape(-1)[:0])  # refuses non-numeric dtypes, caches the name
                dts = frames._DTYPE_STR[data.dtype]
            ndim = data.ndim
            if ndim > frames.MAX_NDIM:
                raise ValueError(f"array has {ndim} dimensions (at most {frames.MAX_NDIM})")
            if not data.flags.c_contiguous:
                data = np.ascontiguousarray(data)
            n = data.nbytes
            head = _pack(_MAGIC, DATA_ARRAY, ndim, len(dts), 0, tag, self.rank, n) + dts + \
                frames._SHAPE[ndim].pack(*data.shape)
            flat = data
        else:
            if t is not bytes:
                mv = memoryview(data)
                data = mv if mv.c_contiguous else memoryview(mv.tobytes())
                data = np.frombuffer(data, np.uint8) if mv.nbytes else b""
            n = len(data) if t is bytes else data.nbytes
            head = _pack(_MAGIC, DATA_BYTES, 0, 0, 0, tag, self.rank, n)
            flat = data
        if n > self.max_frame:
            raise CommError(f"message of {n} bytes exceeds the frame limit of {self.max_frame} bytes")
        self._busy += 1  # before taking the lock: tells the drainer to hand it back
        with self._lock:
            try:
                if self._error is not None or self._closed:
                    self._check(None)
                r = self._eng.send(dest, head, flat, self.default_timeout)
                if r is not None:
                    self._send_failed(dest, r)
            finally:
                self._busy -= 1
                self._last_active = time.monotonic()

    def _recv_rs(self, source: int, tag: int, timeout: float):
        return self._wait_rs(source, tag, timeout)[1]

    def _recv_any_rs(self, tag: int, timeout: float):
        return self._wait_rs(-1, tag, timeout)

    def _wait_rs(self, source: int, tag: int, timeout: float):
        self._busy += 1  # before taking the lock: tells the drainer to hand it back
        with self._lock:
            try:
                return self._wait_locked(source, tag, time.monotonic() + timeout, None)
            finally:
                self._busy -= 1
                self._last_active = time.monotonic()

    def _wait_locked(self, source: int, tag: int, deadline: float, r):
        """Wait for a message (lock held); ``r``: an engine result already in hand, or None."""
        while True:
            if r is None:
                if self._error is not None or self._closed:
                    self._check(None)
                r = self._eng.recv(source, tag, max(deadline - time.monotonic(), 0.0))
            st = r[0]
            if st == 0:
                _, src, kind, dts, shape, payload = r
                if kind == DATA_ARRAY:
                    dt = _DT_CACHE.get(dts)
                    if dt is None:
                        dt = _wire_dtype(dts, src)
                    payload = payload.view(dt)
                    if len(shape) != 1:
                        payload = payload.reshape(shape)
                return src, payload
            if st == 2:
                self._event(r)
                r = None
            elif st == 1:
                what = (f"a message from rank {source} with tag {tag}" if source >= 0
                        else f"a message with tag {tag} from any rank")
                raise CommTimeout(f"rank {self.rank}: timed out waiting for {what}")
            elif st == 4:
                self._check(r[1])
                raise PeerFailure(r[1], "it closed its connection (finished)")
            else:
                if not self._conns:
                    raise CommError(f"rank {self.rank} has no peers to receive from")
                raise PeerFailure(next(iter(self._conns)), "every peer has closed its connection")

    def _event(self, r) -> None:
        """Apply an engine event (peer, code, detail): goodbyes, deaths, aborts, bad frames."""
        _, peer, code, detail = r
        c = self._conns[peer]
        if code == "bye":
            c.bye = True
            return
        if code == "abort":
            try:
                self._control(c, frames.Header(ABORT, 0, 0, 0, peer, len(detail)), detail)
                return
            except ProtocolError as e:
                code, detail = "protocol", str(e).encode()
        self._unregister(c)
        if code == "protocol":
            try:
                c.sock.close()
            except OSError:
                pass
            self._fail(peer, detail.decode(), protocol=True)
        elif not c.bye:
            self._fail(peer, detail.decode())

    def _pop(self, key, q):
        item = q.popleft()
        if not q:
            del self._queues[key]
        return item[1]

    # --- the progress engine (caller holds self._lock) ------------------------------------------
    def _check(self, peer: int | None) -> None:
        if self._closed:
            raise CommError(f"rank {self.rank}: communicator is closed")
        if self._error is not None:
            cls, args = self._error
            raise cls(*args)
        if peer is not None and not self._conns[peer].open:
            raise PeerFailure(peer, "it closed its connection (finished)")

    def _failure(self) -> tuple[int, str]:
        return self._culprit

    def _fail(self, culprit: int, detail: str, via: int | None = None, protocol: bool = False) -> None:
        """Record the first failure (later ones are consequences) and tell the other peers."""
        if self._error is not None:
            return
        self._culprit = (culprit, detail)
        if protocol:
            self._error = (ProtocolError, (detail,))
        else:
            self._error = (PeerFailure, (culprit, detail + (f" (reported by rank {via})" if via is not None else "")))
        self._broadcast_abort(culprit, detail, skip=culprit)

    def _broadcast_abort(self, culprit: int, detail: str, skip: int | None = None) -> None:
        body = json.dumps({"rank": culprit, "detail": detail[:2000]}).encode()
        frame = HEADER.pack(frames.MAGIC, ABORT, 0, 0, 0, 0, self.rank, len(body)) + body
        for c in self._conns.values():
            if c.open and c.peer != skip:
                try:  # best effort, never blocks: a full socket buffer just misses the news
                    c.sock.send(frame, socket.MSG_DONTWAIT)
                except OSError:
                    pass

    def _lost(self, c: _Conn, why: str) -> None:
        self._unregister(c)
        if c.bye:
            return
        self._fail(c.peer, why)

    def _unregister(self, c: _Conn) -> None:
        if self._eng is not None:
            self._eng.forget(c.peer)
        if c.open:
            c.open = False
            try:
                self._poll.unregister(c.fd)
            except (KeyError, ValueError):
                pass

    def _progress(self, deadline: float, what: str, out: _Conn | None = None) -> bool:
        """Wait once for events (at most until ``deadline``) and handle them. Returns True if
        ``out`` became writable."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise CommTimeout(f"rank {self.rank}: timed out waiting for {what}")
        events = self._poll.poll(min(left, 0.5) * 1000.0)
        writable = False
        for fd, ev in events:
            c = self._by_fd.get(fd)
            if c is None or not c.open:
                continue
            if out is not None and c is out and ev & select.POLLOUT:
                writable = True
            if ev & (_POLLIN | _POLLERR):
                self._read(c, _ROUND_BUDGET)
        return writable

    def _read(self, c: _Conn, budget: int = 1 << 62) -> None:
        """Read what is available on ``c`` (non-blocking, about ``budget`` bytes at most) and
        queue complete messages."""
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
                self._lost(c, f"connection error: {e.strerror or e}")
                return
            if n == 0:
                self._lost(c, "connection closed without goodbye (the process died?)")
                return
            c.bytes_recv += n
            budget -= n
            if c.dest is not None:
                c.dest_off += n
                if c.dest_off == len(c.dest):
                    obj = c.dest_obj
                    c.dest = c.dest_obj = None
                    self._deliver(c, c.dest_tag, bytes(obj) if isinstance(obj, bytearray) else obj)
                    # anything left in the socket now goes through the stage again
            else:
                c.end += n
                try:
                    self._parse(c)
                except ProtocolError as e:
                    self._unregister(c)
                    try:
                        c.sock.close()
                    except OSError:
                        pass
                    self._fail(c.peer, str(e), protocol=True)
                    return
            if n < want:
                return

    def _parse(self, c: _Conn) -> None:
        sv = c.sv
        while True:
            avail = c.end - c.start
            h = c.hdr
            if h is None:
                if avail < _HSIZE:
                    break
                # fast path: one unpack and a few comparisons; anything odd goes to the full
                # checker, which raises the precise ProtocolError
                magic, kind, ndim, dtlen, flags, tag, source, n = _unpack_from(c.stage, c.start)
                if (magic != _MAGIC or flags or source != c.peer or n > self.max_frame
                        or not (_MIN_TAG <= tag < _MAX_TAG) or kind > DATA_ARRAY or (kind == DATA_BYTES and (ndim or dtlen))):
                    h = frames.decode_fixed(sv[c.start:c.start + _HSIZE], c.peer, self.max_frame)
                else:
                    h = frames.Header(kind, ndim, dtlen, tag, source, n)
                mlen = h.dtlen + 8 * h.ndim
                if avail < _HSIZE + mlen:
                    c.hdr = None
                    break
                if h.kind == DATA_ARRAY:
                    if not (3 <= dtlen <= frames.MAX_DTYPE_LEN and ndim <= frames.MAX_NDIM):
                        frames.decode_fixed(sv[c.start:c.start + _HSIZE], c.peer, self.max_frame)
                    key = (bytes(sv[c.start + _HSIZE:c.start + _HSIZE + mlen]), n)
                    meta = _META_CACHE.get(key)
                    if meta is None:
                        meta = frames.decode_array_meta(key[0], h)
                        if len(_META_CACHE) > 4096:
                            _META_CACHE.clear()
                        _META_CACHE[key] = meta
                    c.dtype, c.shape = meta
                c.start += _HSIZE + mlen
                avail -= _HSIZE + mlen
                c.hdr = h
            n = h.length
            if avail >= n:
                off = c.start
                c.start += n
                c.hdr = None
                if h.kind == DATA_ARRAY:
                    dt = c.dtype
                    arr = np.frombuffer(c.stage, dt, n // dt.itemsize, off).copy() if n else np.empty(0, dt)
                    self._deliver(c, h.tag, arr.reshape(c.shape) if len(c.shape) != 1 else arr)
                elif h.kind == DATA_BYTES:
                    self._deliver(c, h.tag, bytes(sv[off:off + n]))
                else:
                    self._control(c, h, bytes(sv[off:off + n]))
                continue
            # incomplete payload
            if n >= DIRECT_MIN and h.kind in (DATA_ARRAY, DATA_BYTES):
                if h.kind == DATA_ARRAY:
                    obj = np.empty(c.shape, c.dtype)
                    dest = memoryview(obj.reshape(-1).view(np.uint8))
                else:
                    obj = bytearray(n)
                    dest = memoryview(obj)
                dest[:avail] = sv[c.start:c.end]
                c.start = c.end = 0
                c.hdr = None
                c.dest, c.dest_obj, c.dest_off, c.dest_tag = dest, obj, avail, h.tag
                break
            if c.start + _HSIZE + frames.MAX_DTYPE_LEN + 8 * frames.MAX_NDIM + n > STAGE:
                # make room: move the partial frame to the front of the stage
                sv[:avail] = sv[c.start:c.end]
                c.start, c.end = 0, avail
            break
        if c.hdr is None and c.start + _HSIZE + frames.MAX_DTYPE_LEN + 8 * frames.MAX_NDIM > STAGE:
            avail = c.end - c.start
            sv[:avail] = sv[c.start:c.end]
            c.start, c.end = 0, avail

    def _deliver(self, c: _Conn, tag: int, obj) -> None:
        c.msgs_recv += 1
        self._seq += 1
        key = (c.peer, tag)
        q = self._queues.get(key)
        if q is None:
            q = self._queues[key] = deque()
        q.append((self._seq, obj))

    def _control(self, c: _Conn, h, body: bytes) -> None:
        if h.kind == BYE:
            c.bye = True
        elif h.kind == ABORT:
            try:
                msg = json.loads(body)
                culprit, detail = int(msg["rank"]), str(msg.get("detail", ""))
            except (ValueError, KeyError, TypeError):
                raise ProtocolError(f"rank {c.peer} sent a malformed ABORT frame") from None
            if culprit == c.peer:
                self._fail(culprit, detail)
            elif 0 <= culprit < self.size and culprit != self.rank:
                self._fail(culprit, detail, via=c.peer)
            else:
                self._fail(c.peer, f"it aborted: {detail}")
        else:
            raise ProtocolError(f"rank {c.peer} sent an unexpected control frame (kind {h.kind})")

    def _send_frame(self, c: _Conn, head: bytes, view: memoryview | None, deadline: float) -> None:
        total = len(head) + (view.nbytes if view is not None else 0)
        sent = 0
        bufs = [head, view] if view is not None else [head]
        while True:
            try:
                sent += c.sock.sendmsg(bufs, (), socket.MSG_DONTWAIT)  # the Rust engine makes fds blocking
            except (BlockingIOError, InterruptedError):
                pass
            except OSError as e:
                self._lost(c, f"connection error while sending: {e.strerror or e}")
                self._check(c.peer)
                raise PeerFailure(c.peer, str(e)) from None
            if sent >= total:
                c.bytes_sent += total
                return
            # kernel buffer full: wait for room while draining what peers send us
            bufs = [head[sent:], view] if sent < len(head) else [view[sent - len(head):]]
            self._poll.modify(c.fd, _POLLIN | select.POLLOUT)
            try:
                while True:
                    self._check(c.peer)
                    if self._progress(deadline, f"room to send to rank {c.peer} (it is not receiving)", c):
                        break
            finally:
                if c.open:
                    self._poll.modify(c.fd, _POLLIN)

    # --- background drainer -------------------------------------------------------------------
    def _drain_loop(self) -> None:
        """Read on the program's behalf while it is away from communication calls.

        It sleeps while the program communicates (so it never competes for the GIL or the
        sockets on the latency path) and wakes every ``_IDLE_CHECK`` seconds to see whether
        the program has been away for longer than ``_IDLE``."""
        poller = select.poll()
        poller.register(self._wake_r, select.POLLIN)
        registered = set()
        while not self._closed:
            time.sleep(_IDLE_CHECK)
            while not self._closed and not self._busy and time.monotonic() - self._last_active > _IDLE:
                for c in list(self._conns.values()):
                    if c.open and c.fd not in registered:
                        poller.register(c.fd, _POLLIN)
                        registered.add(c.fd)
                    elif not c.open and c.fd in registered:
                        poller.unregister(c.fd)
                        registered.discard(c.fd)
                try:
                    events = poller.poll(_IDLE_CHECK * 1000)
                except (OSError, ValueError):
                    return
                if self._closed:
                    return
                events = [fd for fd, _ in events if fd != self._wake_r]
                full = False
                if not events or self._busy or not self._lock.acquire(blocking=False):
                    continue
                try:
                    if self._closed or self._busy:
                        continue
                    if self._eng is not None:
                        # one small bite per step, so a returning program gets the sockets
                        # back at once; past _DRAIN_CAP bytes read ahead, let senders wait
                        full = self._eng.pump(_DRAIN_BITE) >= _DRAIN_CAP
                    else:
                        for fd in events:
                            c = self._by_fd.get(fd)
                            if c is not None and c.open:
                                self._read(c, _DRAIN_BITE)
                except Exception as e:  # never die silently: the next call raises it
                    if self._error is None:
                        self._culprit = (self.rank, f"background reader failed: {e!r}")
                        self._error = (CommError, (f"rank {self.rank}: background reader failed: {e!r}",))
                finally:
                    self._lock.release()
                if full:
                    time.sleep(_IDLE_CHECK)

    def _shutdown(self) -> None:
        self._closed = True
        if self._wake_w >= 0:
            try:
                os.write(self._wake_w, b"x")
            except OSError:
                pass
        for c in self._conns.values():
            self._unregister(c)
            try:
                c.sock.close()
            except OSError:
                pass
        if self._drainer is not None and self._drainer is not threading.current_thread():
            self._drainer.join(timeout=2.0)
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._wake_r = self._wake_w = -1

    def __del__(self):
        if not getattr(self, "_closed", True):
            try:
                self._shutdown()
            except Exception:
                pass


_MALLOC_TUNED = False


def _tune_malloc_once() -> None:
    """Received messages land in new buffers; let glibc reuse freed ones instead of taking fresh
    (page-faulting) memory from the kernel each time: 1000 x 1 MiB received cost 257,000 page
    faults before this. Large buffers up to 64 MiB come from the heap, and up to 256 MiB of
    freed memory is kept. ``CLUSTERLAB_MALLOC_TUNE=0`` leaves malloc alone."""
    global _MALLOC_TUNED
    if _MALLOC_TUNED or os.environ.get("CLUSTERLAB_MALLOC_TUNE", "1") == "0":
        return
    _MALLOC_TUNED = True
    from clusterlab._core import net_tune_malloc

    net_tune_malloc(64 << 20, 256 << 20)


def _wire_dtype(dts: str, src: int) -> np.dtype:
    try:
        dt = np.dtype(dts)
    except TypeError:
        raise ProtocolError(f"rank {src} sent an array of unknown dtype {dts!r}") from None
    if dt.itemsize != int(dts[2:]):
        raise ProtocolError(f"rank {src} sent an array of dtype {dts!r} whose size numpy disagrees with")
    _DT_CACHE[dts] = dt
    return dt


_pack = HEADER.pack
_monotonic = time.monotonic
_MAX_USER_TAG = MAX_USER_TAG
_COLLECTIVE_TAG = COLLECTIVE_TAG


# --- building a mesh ---------------------------------------------------------------------------------

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


def build_mesh(rank: int, size: int, table: list[tuple[str, int]], listener: socket.socket | None,
               secret: bytes, config: TransportConfig | None = None, timeout: float = 30.0,
               **kw) -> TcpCommunicator:
    """Connect rank ``rank`` to every other rank of ``table`` (list of (host, port) by rank).

    Rank i connects to every lower rank and accepts every higher one; each connection is
    authenticated with ``secret``. A connection attempt that fails authentication is dropped
    and logged; the mesh keeps waiting for the real peer until ``timeout``.
    """
    config = config or TransportConfig()
    deadline = time.monotonic() + timeout
    socks: dict[int, socket.socket] = {}
    try:
        for j in range(rank):
            host, port = table[j]
            while True:
                s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
                config.apply(s, rank)
                s.settimeout(max(deadline - time.monotonic(), 0.01))
                try:
                    s.connect((host, port))
                    break
                except (TimeoutError, ConnectionRefusedError, OSError) as e:
                    s.close()
                    if time.monotonic() >= deadline:
                        raise CommTimeout(f"rank {rank}: cannot connect to rank {j} at {host}:{port}: {e}") from None
                    time.sleep(0.05)
            try:
                handshake.connect(s, secret, rank, j, max(deadline - time.monotonic(), 0.01))
            except BaseException:
                s.close()
                raise
            socks[j] = s
        expected = set(range(rank + 1, size))
        while expected:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CommTimeout(f"rank {rank}: ranks {sorted(expected)} did not connect within {timeout:g} s")
            listener.settimeout(left)
            try:
                s, addr = listener.accept()
            except TimeoutError:
                continue
            try:
                peer = handshake.accept(s, secret, rank, expected, min(left, 10.0))
            except (ProtocolError, CommTimeout) as e:
                _log(f"rank {rank}: rejected a connection from {addr[0]}:{addr[1]}: {e}")
                s.close()
                continue
            config.apply(s, rank)
            socks[peer] = s
            expected.discard(peer)
    except BaseException:
        for s in socks.values():
            s.close()
        raise
    finally:
        if listener is not None:
            listener.close()  # nobody may join later
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
