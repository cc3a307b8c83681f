"""``TcpCommunicator``: a rank of clusterlab's TCP mesh, the Communicator over one socket engine.

The engine (``engine.py``: Rust by default, the Python reference on request) moves and checks
bytes; this class keeps the policy:

- **The caller drives progress.** A rank blocked in ``recv`` has its engine poll *all* its
  connections and file whatever arrives by (source, tag); a rank blocked in ``send`` (kernel
  buffer full) does the same while it waits for room. So two ranks that send large messages to
  each other at once never deadlock, and a peer's death is seen whatever we wait for. The
  latency path has no thread hop: the thread that wants the message reads the socket itself.
- **A background drainer** takes over only while the program is *not* inside a
  communication call (e.g. counting for a minute): it keeps reading so that peers sending to
  us do not stall in ``send`` until their timeout, and it notices dead peers. The engine is
  the lock between the two (``acquire``/``release``, a call counter), with a bounded wait.
- **The latency path has no Python frame.** With the Rust engine, ``send`` and ``recv`` are
  the engine's ``comm_send``/``comm_recv`` (installed on the instance): they check the
  arguments, hold the engine, frame/send or wait, and return the final object; anything
  else (bad arguments, a busy engine, payloads the engine does not frame, failures, a closed
  or failed communicator) goes to the Python methods below, which raise the precise errors.
- **Failure is loud and named.** EOF without a goodbye frame, a reset, or a frame that breaks
  the protocol marks that rank failed; from then on every blocking call raises
  ``PeerFailure(rank)`` (or ``ProtocolError``) and the rank tells the other peers (ABORT
  frame), so all ranks name the same culprit. Every wait has a deadline.

Build one with ``mesh.build_mesh`` (or ``clusterlab.comm.world()``).
"""

from __future__ import annotations

import ipaddress
import os
import select
import socket
import struct
import threading
import time

import numpy as np

from clusterlab.comm.communicator import COLLECTIVE_TAG, MAX_USER_TAG, Communicator
from clusterlab.comm.errors import CommError, CommTimeout, PeerFailure, ProtocolError
from clusterlab.comm.tcp import engine as engines
from clusterlab.comm.tcp.engine import EventKind, Status
from clusterlab.net import tcp_info
from clusterlab.net.transport_config import TransportConfig
from clusterlab.rendezvous import frames

_IDLE = 0.05              # the drainer steps in after this long without a communication call
_DRAIN_BITE = 1 << 20     # bytes per connection per drainer step
_DRAIN_CAP = 1 << 30      # the drainer reads ahead at most this much for a busy program
_IDLE_CHECK = 0.05        # ... checking this often (a cheap wake-up; nothing on the hot path)
_BYE_TIMEOUT = 2.0        # how long a goodbye may wait for room
_MAX_USER_TAG = MAX_USER_TAG
_COLLECTIVE_TAG = COLLECTIVE_TAG
_MESSAGE, _TIMEOUT, _EVENT, _CLOSED, _UNSUPPORTED = (Status.MESSAGE, Status.TIMEOUT, Status.EVENT, Status.CLOSED,
                                                      Status.UNSUPPORTED)
_monotonic = time.monotonic
_SO_MAX_PACING_RATE = getattr(socket, "SO_MAX_PACING_RATE", 47)  # Linux
_UNPACED = (1 << 64) - 1


class _Peer:
    """A connection as the policy sees it (the engine has its own state)."""

    __slots__ = ("peer", "sock", "open", "bye")

    def __init__(self, peer: int, sock: socket.socket):
        self.peer, self.sock = peer, sock
        self.open = True
        self.bye = False


class TcpCommunicator(Communicator):
    """A rank of a TCP full mesh over authenticated sockets ``socks`` (peer rank -> socket).

    ``engine``: ``"rust"`` or ``"python"`` (default ``$CLUSTERLAB_ENGINE`` or rust);
    ``drainer``: read in the background while the program is away from communication calls.

    >>> from clusterlab.comm.tcp.mesh import local_mesh
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
                 default_timeout: float | None = None, drainer: bool = True, engine: str | None = None):
        self.rank, self.size = rank, size
        self.config = config or TransportConfig()
        self.max_frame = max_frame
        self._timeout = Communicator.default_timeout if default_timeout is None else default_timeout
        self._conns: dict[int, _Peer] = {}
        self._in_force: dict = {}
        settings = self.config.for_rank(rank)
        for peer, s in socks.items():
            self._conns[peer] = _Peer(peer, s)
            got = self.config.apply(s, rank)
            if settings.congestion is None and _on_loopback(s):
                got = _loopback_congestion(s, got)
            self._in_force = self._in_force or got
        self.engine_name = engine or engines.default_name()
        self._engine = engines.create(self.engine_name, dict(socks), max_frame)
        self._error: tuple[type, tuple] | None = None  # first failure, re-raised by every call
        self._culprit: tuple[int, str] = (rank, "")
        self._closed = False
        self._fast = hasattr(self._engine, "bind")
        if self._fast:  # the latency path: the engine's own calls, no Python frame per message
            self._engine.set_timeout(float(self._timeout))
            self._engine.bind(self, rank, size)
            self.send = self._engine.comm_send
            self.recv = self._engine.comm_recv
            self.send_many = self._engine.comm_send_many
            self.recv_many = self._engine.comm_recv_many
        self._drainer = None
        self._wake_r = self._wake_w = -1
        if drainer and socks and os.environ.get("CLUSTERLAB_DRAINER", "1") != "0":
            self._wake_r, self._wake_w = os.pipe()
            self._drainer = threading.Thread(target=self._drain_loop, name=f"clusterlab-drain-{rank}", daemon=True)
            self._drainer.start()

    @property
    def default_timeout(self) -> float:
        """Seconds every blocking call may wait unless given ``timeout=`` (settable)."""
        return self._timeout

    @default_timeout.setter
    def default_timeout(self, value: float) -> None:
        if self.__dict__.get("_fast"):
            self._engine.set_timeout(float(value))
        self._timeout = value

    # --- public extras -----------------------------------------------------------------------
    def background_threads(self) -> list:
        """The threads this communicator runs beside the program (the drainer), so that a
        profile can tell their CPU from the program's (``mining.parallel.trace``)."""
        return [self._drainer] if self._drainer is not None else []

    def stats(self) -> dict:
        """Per-peer traffic counters and the kernel's ``TCP_INFO`` for each connection, plus the
        transport settings in force on this rank."""
        peers = {}
        self._take()  # the drainer may be inside the engine
        try:
            counters = sorted(self._engine.counters())
        finally:
            self._engine.release()
        for p, bs, br, ms, mr, _open in counters:
            c = self._conns[p]
            peers[p] = {"bytes_sent": bs, "bytes_recv": br, "msgs_sent": ms, "msgs_recv": mr,
                        "tcp_info": tcp_info.read(c.sock) if c.open else {}}
        tot = {k: sum(v[k] for v in peers.values()) for k in ("bytes_sent", "bytes_recv", "msgs_sent", "msgs_recv")}
        s = self.config.for_rank(self.rank)
        return {"backend": "tcp", "engine": self.engine_name, "rank": self.rank, "size": self.size, **tot,
                "transport": {"requested": {"sndbuf": s.sndbuf, "rcvbuf": s.rcvbuf, "nodelay": s.nodelay,
                                            "congestion": s.congestion, "rto_min_us": s.rto_min_us,
                                            "rto_max_ms": s.rto_max_ms},
                              "in_force": self._in_force},
                "peers": peers}

    def pace(self, dest: int, rate: float | None) -> None:
        """Let the kernel pace the connection to ``dest`` at ``rate`` bytes/s (None: unpaced):
        ``SO_MAX_PACING_RATE``, which TCP honours by itself since Linux 4.13 (no fq qdisc
        needed). ``send`` returns once the data is in the socket buffer, as always; the rate
        applies on the wire."""
        self._check_peer(dest)
        if rate is not None and not rate > 0:
            raise ValueError(f"pacing rate must be > 0 bytes/s or None, got {rate!r}")
        value = _UNPACED if rate is None or rate >= _UNPACED else max(int(rate), 1)
        c = self._conns[dest]
        if c.open:
            c.sock.setsockopt(socket.SOL_SOCKET, _SO_MAX_PACING_RATE, struct.pack("Q", value))

    def receive_buffer(self, source: int) -> int | None:
        """The receive buffer of the connection from ``source``: half the kernel's
        ``SO_RCVBUF`` (the kernel doubles what is set, for its bookkeeping)."""
        self._check_peer(source)
        c = self._conns[source]
        return c.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) // 2 if c.open else None

    def _open_multicast(self):
        """The mesh's point-to-multipoint group (``tcp.multicast``): UDP to an IP multicast group
        on the testbed's switch, only inside a testbed host (``multicast.why_not``)."""
        from clusterlab.comm import multicast as mc
        from clusterlab.comm.tcp import multicast as udp

        local = peer = None
        for c in self._conns.values():
            if c.open:
                local, peer = c.sock.getsockname()[0], c.sock.getpeername()[0]
                break
        if local is None:
            return mc.open_group(self, lambda: "no open connection to find this rank's address", None)
        return mc.open_group(self, lambda: udp.why_not(local), udp.opener(local, peer))

    def abort(self, detail: str = "") -> None:
        """Fail the job from this rank: tell every peer (so they raise ``PeerFailure`` naming
        this rank with ``detail``) and drop the connections."""
        self._take()
        try:
            if self._closed:
                return
            if self._error is not None:  # we are failing because someone else did: name them
                self._broadcast_abort(*self._culprit)
            else:
                self._broadcast_abort(self.rank, detail or "aborted")
            self._shutdown()
        finally:
            self._engine.release()

    def close(self) -> None:
        """Say goodbye to every peer and close. Idempotent."""
        if self._closed:
            return
        self._take()
        try:
            if self._closed:
                return
            if self._error is None:
                bye = frames.encode_bye(self.rank)
                for c in self._conns.values():
                    if c.open:
                        self._engine.send_frame(c.peer, bye, b"", _BYE_TIMEOUT)  # best effort
            else:
                self._broadcast_abort(*self._culprit)
            self._shutdown()
        finally:
            self._engine.release()

    # --- point to point: the Python path (the Python engine, and the fast calls' fallback) -----
    def send(self, dest: int, data, tag: int = 0) -> None:
        """Send ``data`` to rank ``dest`` (the checks of ``Communicator.send`` inline, then one
        engine call that frames and sends; payloads the engine does not frame itself take
        ``_send``). With the Rust engine the instance's ``send`` is the engine's
        ``comm_send``, which does the same and comes here for everything else."""
        if dest == self.rank or not 0 <= dest < self.size:
            self._check_peer(dest)
        if not 0 <= tag < _MAX_USER_TAG and tag != _COLLECTIVE_TAG:
            self._check_tag(tag)
        self._take()  # counts the call: tells the drainer to hand the engine back
        try:
            if self._error is not None or self._closed:
                self._check(None)
            r = self._engine.send(dest, tag, self.rank, data, self._timeout)
            if r is None:
                return
            if r[0] != _UNSUPPORTED:
                self._send_failed(dest, r)
        finally:
            self._engine.release()
        self._send(dest, data, tag)

    _send_py = send  # what the fast call falls back to (the instance's ``send`` is the engine's)

    def recv(self, source: int, tag: int = 0, timeout: float | None = None):
        """Receive the next message from ``source`` with ``tag`` (the checks of
        ``Communicator.recv`` inline, then one engine call; with the Rust engine the instance's
        ``recv`` is the engine's ``comm_recv``, as for ``send``)."""
        if source == self.rank or not 0 <= source < self.size:
            self._check_peer(source)
        if not 0 <= tag < _MAX_USER_TAG and tag != _COLLECTIVE_TAG:
            self._check_tag(tag)
        if timeout is None:
            timeout = self._timeout
        self._take()
        try:
            if self._error is not None or self._closed:
                self._check(None)
            deadline = _monotonic() + timeout
            r = self._engine.recv(source, tag, timeout)
            if type(r) is not tuple:
                return r
            return self._wait_locked(source, tag, deadline, r)[1]
        finally:
            self._engine.release()

    _recv_py = recv

    def _take(self) -> None:
        """Hold the engine for a call (the exclusion with the drainer and other threads; counts
        the call), waiting at most the default timeout."""
        if not self._engine.acquire(self._timeout):
            raise CommTimeout(f"rank {self.rank}: timed out after {self._timeout} s waiting for another thread's "
                              "communication call to end")

    # --- point to point: the general path (Communicator's abstract methods) -------------------
    def _send(self, dest: int, data, tag: int) -> None:
        kind, view, meta, ndim = frames.payload_view(data)
        n = view.nbytes
        if n > self.max_frame:
            raise CommError(f"message of {n} bytes exceeds the frame limit of {self.max_frame} bytes")
        head = frames.pack_header(kind, tag, self.rank, n, meta, ndim)
        body = np.frombuffer(view, np.uint8) if n else b""  # what both engines take, no copy
        self._take()
        try:
            if self._error is not None or self._closed:
                self._check(None)
            self._check(dest)
            r = self._engine.send_frame(dest, head, body, self._timeout)
            if r is not None:
                self._send_failed(dest, r)
        finally:
            self._engine.release()

    def _recv(self, source: int, tag: int, timeout: float):
        return self._wait(source, tag, timeout)[1]

    def _recv_any(self, tag: int, timeout: float):
        return self._wait(-1, tag, timeout)

    def _wait(self, source: int, tag: int, timeout: float):
        self._take()
        try:
            return self._wait_locked(source, tag, _monotonic() + timeout, None)
        finally:
            self._engine.release()

    def _wait_locked(self, source: int, tag: int, deadline: float, r):
        """``(src, payload)`` of the next message (lock held); ``r``: an engine result already
        in hand, or None."""
        while True:
            if r is None:
                if self._error is not None or self._closed:
                    self._check(None)
                r = self._engine.recv(source, tag, max(deadline - _monotonic(), 0.0))
            if type(r) is not tuple:
                return source, r
            st = r[0]
            if st == _MESSAGE:
                return r[1], r[2]
            if st == _EVENT:
                self._event(r)
                r = None
            elif st == _TIMEOUT:
                what = (f"a message from rank {source} with tag {tag}" if source >= 0
                        else f"a message with tag {tag} from any rank")
                raise CommTimeout(f"rank {self.rank}: timed out waiting for {what}")
            elif st == _CLOSED:
                self._check(r[1])
                raise PeerFailure(r[1], "it closed its connection (finished)")
            else:  # NO_PEERS
                self._check(None)
                if not self._conns:
                    raise CommError(f"rank {self.rank} has no peers to receive from")
                raise PeerFailure(next(iter(self._conns)), "every peer has closed its connection")

    def _send_failed(self, dest: int, r) -> None:
        """Raise for an engine send result ``r`` (timeout, or a failure of ``dest`` or of
        another peer seen while waiting); lock held."""
        if r[0] == _TIMEOUT:
            msg = f"rank {self.rank}: timed out waiting for room to send to rank {dest} (it is not receiving)"
            # a frame may be half written: this connection cannot be used again
            if self._error is None:
                self._culprit = (dest, "send timed out")
                self._error = (CommTimeout, (msg,))
                self._stop_fast()
            raise CommTimeout(msg)
        self._event(r)
        self._check(dest)
        if r[1] != dest:  # another peer's news that does not fail the job (a goodbye)
            raise PeerFailure(r[1], "it closed its connection (finished)")
        raise PeerFailure(dest, "it closed its connection (finished)" if self._conns[dest].bye else "connection lost")

    def _event(self, r) -> None:
        """Apply an engine event (EVENT, peer, kind, detail): goodbyes, deaths, aborts, bad frames."""
        _, peer, kind, detail = r
        c = self._conns[peer]
        if kind == EventKind.BYE:
            c.bye = True
            return
        if kind == EventKind.ABORT:
            try:
                culprit, why = frames.decode_abort(detail, peer)
            except ProtocolError as e:
                kind, detail = EventKind.PROTOCOL, str(e).encode()
            else:
                if culprit == peer:
                    self._fail(culprit, why)
                elif 0 <= culprit < self.size and culprit != self.rank:
                    self._fail(culprit, why, via=peer)
                else:
                    self._fail(peer, f"it aborted: {why}")
                return
        self._unregister(c)
        if kind == EventKind.PROTOCOL:
            try:
                c.sock.close()
            except OSError:
                pass
            self._fail(peer, detail.decode(errors="replace"), protocol=True)
        elif not c.bye:
            self._fail(peer, detail.decode(errors="replace"))

    # --- failure policy (caller holds the engine) -----------------------------------------------
    def _stop_fast(self) -> None:
        """Failed or closed: from now on the engine's fast calls come here (``_check`` raises)."""
        if self._fast:
            self._engine.stop_fast()

    def _check(self, peer: int | None) -> None:
        if self._closed:
            raise CommError(f"rank {self.rank}: communicator is closed")
        if self._error is not None:
            cls, args = self._error
            raise cls(*args)
        if peer is not None and not self._conns[peer].open:
            raise PeerFailure(peer, "it closed its connection (finished)")

    def _fail(self, culprit: int, detail: str, via: int | None = None, protocol: bool = False) -> None:
        """Record the first failure (later ones are consequences) and tell the other peers."""
        if self._error is not None:
            return
        self._culprit = (culprit, detail)
        if protocol:
            self._error = (ProtocolError, (detail,))
        else:
            self._error = (PeerFailure, (culprit, detail + (f" (reported by rank {via})" if via is not None else "")))
        self._stop_fast()
        self._broadcast_abort(culprit, detail, skip=culprit)

    def _broadcast_abort(self, culprit: int, detail: str, skip: int | None = None) -> None:
        frame = frames.encode_abort(self.rank, culprit, detail)
        for c in self._conns.values():
            if c.open and c.peer != skip:
                self._engine.send_nowait(c.peer, frame)  # never blocks: a full buffer misses the news

    def _unregister(self, c: _Peer) -> None:
        self._engine.forget(c.peer)
        c.open = False

    # --- background drainer -------------------------------------------------------------------
    def _drain_loop(self) -> None:
        """Read on the program's behalf while it is away from communication calls.

        It sleeps while the program communicates (so it never competes for the GIL or the
        sockets on the latency path) and wakes every ``_IDLE_CHECK`` seconds to see whether
        the program has been away for longer than ``_IDLE``."""
        poller = select.poll()
        poller.register(self._wake_r, select.POLLIN)
        # while watching, it waits on the wake pipe alone: close() wakes it at once (a plain sleep
        # kept every close waiting up to _IDLE_CHECK for the thread: 0.1-0.2 s to close a 9-rank mesh)
        watch = select.poll()
        watch.register(self._wake_r, select.POLLIN)
        registered: dict[int, int] = {}  # fd -> peer
        eng = self._engine
        seen, since = eng.calls(), _monotonic()  # the call count last seen, and since when
        while not self._closed:
            try:
                watch.poll(_IDLE_CHECK * 1000)
            except (OSError, ValueError):
                return
            now = _monotonic()
            calls = eng.calls()
            if calls != seen or eng.locked():  # a call started, or one is under way
                seen, since = calls, now
                continue
            if now - since <= _IDLE:
                continue
            # away from communication calls: read until the program starts its next call
            while not self._closed and eng.calls() == seen:
                for c in list(self._conns.values()):
                    fd = _fileno(c.sock)
                    if c.open and fd >= 0 and fd not in registered:
                        poller.register(fd, select.POLLIN)
                        registered[fd] = c.peer
                for fd, peer in list(registered.items()):
                    c = self._conns.get(peer)
                    if c is None or not c.open or _fileno(c.sock) != fd:
                        poller.unregister(fd)
                        del registered[fd]
                try:
                    events = poller.poll(_IDLE_CHECK * 1000)
                except (OSError, ValueError):
                    return
                if self._closed:
                    return
                events = [fd for fd, _ in events if fd != self._wake_r]
                full = False
                if not events:
                    continue
                if not eng.try_acquire_idle(seen):
                    break  # a call (or close, stats) has the sockets: back to watching
                try:
                    if self._closed:
                        continue
                    # one small bite per step, so a returning program gets the sockets back at
                    # once; past _DRAIN_CAP bytes read ahead, let senders wait
                    full = self._engine.pump(_DRAIN_BITE) >= _DRAIN_CAP
                except Exception as e:  # never die silently: the next call raises it
                    if self._error is None:
                        self._culprit = (self.rank, f"background reader failed: {e!r}")
                        self._error = (CommError, (f"rank {self.rank}: background reader failed: {e!r}",))
                        self._stop_fast()
                finally:
                    eng.release()
                if full:
                    time.sleep(_IDLE_CHECK)

    def _shutdown(self) -> None:
        self._close_multicast()
        self._closed = True
        self._stop_fast()
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


# Congestion control for connections between ranks of one host when none is asked for. Loopback
# needs none, and the usual default costs there: BBR (this machine's) paces every connection
# with timers and updates its model on every ACK. An alltoall of 1 MiB on 8 local ranks took
# 2.1-2.3 ms of CPU per rank per call with BBR and 1.50-1.56 ms with cubic (8.2-8.7 vs
# 5.1-5.5 ms per call; bench/comm_profile.py). Pacing asked for by ``pace`` still works:
# SO_MAX_PACING_RATE turns on TCP's own pacing for any congestion control.
LOOPBACK_CONGESTION = "cubic"


def _on_loopback(sock: socket.socket) -> bool:
    try:
        return ipaddress.ip_address(sock.getpeername()[0]).is_loopback
    except (OSError, ValueError, IndexError):
        return False


def _loopback_congestion(sock: socket.socket, got: dict) -> dict:
    """Switch a loopback connection to ``LOOPBACK_CONGESTION`` (if the kernel has it); returns
    the settings in force."""
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, LOOPBACK_CONGESTION.encode())
    except OSError:
        return got  # not available here: keep the system's
    return {**got, "congestion": LOOPBACK_CONGESTION}


def _fileno(sock: socket.socket) -> int:
    try:
        return sock.fileno()
    except OSError:
        return -1
