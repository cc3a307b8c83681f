"""The launcher's side of the rendezvous: a listening socket where ranks check in, driven by
the launcher's event loop (a :class:`~clusterlab.cluster.supervisor.Supervisor`) and never
blocking it.

Each connection first runs the handshake as a non-blocking state machine
(``handshake.Acceptor``) with its own deadline; one that is idle, slow, speaks garbage or
lacks the secret is dropped (and logged) without delaying anything else. An authenticated rank
then says hello (its mesh address), may receive the address table or an abort, and later
reports its result or its error (``clusterlab.rendezvous.contract``). Every read assembles frames from
whatever arrived; every write is queued and flushed when the socket is writable.

:meth:`Rendezvous.culprit` judges from the evidence (error reports, exits, links lost) which
rank failed first: a rank's own error or death wins over the ``PeerFailure`` others raise as
a consequence.
"""

from __future__ import annotations

import json
import select
import socket
import sys
import time

from clusterlab.cluster.supervisor import JobResult, Supervisor, describe_status
from clusterlab.rendezvous import contract, errors, frames, handshake

_IN, _OUT = select.POLLIN, select.POLLOUT
_ERR = select.POLLERR | select.POLLHUP | select.POLLNVAL


# How long the launcher reads the links of ranks whose processes have ended, for their last words.
LAST_WORDS_S = 10.0


def _log(msg: str) -> None:
    print(f"clusterlab: {msg}", file=sys.stderr, flush=True)


class RankLink:
    """The launcher's connection to one rank and what came over it."""

    __slots__ = ("rank", "sock", "peer", "reader", "out", "hello", "result", "error", "error_at",
                 "bye", "lost_at")

    def __init__(self, rank: int):
        self.rank = rank
        self.sock: socket.socket | None = None
        self.peer = ""
        self.reader = contract.FrameReader(rank)
        self.out = b""
        self.hello: dict | None = None
        self.result = None
        self.error: dict | None = None
        self.error_at: float | None = None
        self.bye = False
        self.lost_at: float | None = None

    @property
    def node(self) -> str:
        return str((self.hello or {}).get("node") or "")


class Rendezvous:
    """Ranks ``0..n-1`` check in at ``host`` (port chosen by the kernel: :attr:`address`).

    ``handshake_timeout``: how long one connection may take to authenticate. Callbacks (set
    by the launcher): ``on_hello(link)``, ``on_error(link)``, ``on_lost(link)``.
    """

    def __init__(self, sup: Supervisor, n: int, secret: bytes, host: str = "127.0.0.1", *,
                 handshake_timeout: float = 5.0, max_pending: int | None = None):
        self.sup, self.n, self.secret = sup, n, secret
        self.handshake_timeout = handshake_timeout
        self.max_pending = max_pending or max(64, 2 * n)
        self.links = [RankLink(r) for r in range(n)]
        self.expected_nodes: list[str] | None = None  # where each rank should run (a hostfile), if known
        self.on_hello = self.on_error = self.on_lost = None
        self.aborted: tuple[int, str] | None = None  # the set-up failed: (rank named, reason)
        self._pending: dict[int, tuple[handshake.Acceptor, str]] = {}
        self._by_fd: dict[int, RankLink] = {}
        self.listener: socket.socket | None = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        try:
            self.listener.bind((host, 0))
            self.listener.listen(max(n, 128))
        except OSError as e:
            self.listener.close()
            raise errors.CommError(f"cannot listen for ranks at {host}: {e.strerror or e}") from None
        self.listener.setblocking(False)
        self.address = self.listener.getsockname()[:2]
        sup.watch(self.listener.fileno(), _IN, self._on_listen)

    # --- accepting ---------------------------------------------------------------------------
    def _on_listen(self, _fd: int, _ev: int) -> None:
        while self.listener is not None:
            try:
                s, addr = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # EMFILE and the like: refuse this one, keep serving
                _log(f"launcher cannot accept a connection: {e.strerror or e}")
                return
            if len(self._pending) >= self.max_pending:
                oldest = min(self._pending, key=lambda fd: self._pending[fd][0].deadline)
                self._drop_pending(oldest, "too many connections are authenticating at once")
            acc = handshake.Acceptor(s, self.secret, handshake.LAUNCHER, self._free, self.handshake_timeout)
            self._pending[s.fileno()] = (acc, f"{addr[0]}:{addr[1]}")
            self.sup.watch(s.fileno(), acc.events, self._on_pending)

    def _free(self, rank: int) -> bool:
        return 0 <= rank < self.n and self.links[rank].sock is None and self.links[rank].lost_at is None

    def _on_pending(self, fd: int, _ev: int) -> None:
        acc, peer = self._pending[fd]
        try:
            rank = acc.step()
        except errors.ProtocolError as e:
            self._drop_pending(fd, str(e))
            return
        if rank is None:
            self.sup.watch(fd, acc.events, self._on_pending)
            return
        del self._pending[fd]
        if not self._free(rank):
            self._reject(acc.sock, fd, peer, f"rank {rank} is already connected")
            return
        link = self.links[rank]
        link.sock, link.peer = acc.sock, peer
        acc.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._by_fd[fd] = link
        self.sup.watch(fd, _IN, self._on_link)

    def _drop_pending(self, fd: int, why: str) -> None:
        acc, peer = self._pending.pop(fd)
        self._reject(acc.sock, fd, peer, why)

    def _reject(self, sock: socket.socket, fd: int, peer: str, why: str) -> None:
        # Once the job is failing (a rank died, the timeout passed), ranks are being stopped and
        # one killed in its handshake is not news: the job's one line says what happened.
        if self.sup.fail_at is None:
            _log(f"launcher rejected a connection from {peer}: {why}")
        self.sup.unwatch(fd)
        sock.close()

    def expire(self, now: float | None = None) -> None:
        """Drop the connections that did not authenticate in time."""
        now = time.monotonic() if now is None else now
        for fd in [fd for fd, (acc, _) in self._pending.items() if acc.expired(now)]:
            self._drop_pending(fd, f"no handshake within {self.handshake_timeout:g} s")

    def stop_accepting(self) -> None:
        """Close the listener (everyone checked in) and drop the connections still pending."""
        if self.listener is not None:
            self.sup.unwatch(self.listener.fileno())
            self.listener.close()
            self.listener = None
        for fd in list(self._pending):
            self._drop_pending(fd, "every rank has checked in")

    # --- talking to ranks --------------------------------------------------------------------
    def _on_link(self, fd: int, ev: int) -> None:
        link = self._by_fd.get(fd)
        if link is None:
            return
        if ev & _OUT and link.out:
            self._flush(link)
        if ev & (_IN | _ERR):
            self._read(link)

    def _read(self, link: RankLink, budget: int = 64) -> None:
        while link.sock is not None and budget > 0:
            budget -= 1
            try:
                data = link.sock.recv(1 << 20)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                self._lose(link)
                return
            try:
                got = link.reader.feed(data)
            except errors.ProtocolError as e:
                _log(f"launcher dropped rank {link.rank}'s link: {e}")
                self._lose(link)
                return
            for h, body in got:
                self._frame(link, h, body)

    def _frame(self, link: RankLink, h, body: bytes) -> None:
        if h.kind == frames.DATA_BYTES:
            if h.tag == contract.RESULT_JSON_TAG:
                try:
                    link.result = json.loads(body)
                except ValueError:
                    _log(f"rank {link.rank} returned malformed JSON")
            elif h.tag == contract.RESULT_BYTES_TAG:
                link.result = body
            return
        try:
            msg = contract.parse_control(body)
        except errors.ProtocolError as e:
            _log(f"launcher ignored a message from rank {link.rank}: {e}")
            return
        op = msg["op"]
        if op == "hello" and link.hello is None:
            link.hello = msg
            if self.aborted is not None:  # a late-comer to a failed set-up
                self.send(link.rank, contract.abort(*self.aborted))
            elif self.on_hello:
                self.on_hello(link)
        elif op == "error" and link.error is None:
            link.error, link.error_at = msg, time.monotonic()
            if self.on_error:
                self.on_error(link)
        elif op == "bye":
            link.bye = True

    def send(self, rank: int, msg: dict) -> None:
        """Queue a control message to ``rank`` (dropped if its link is gone)."""
        link = self.links[rank]
        if link.sock is None:
            return
        link.out += contract.control_frame(handshake.LAUNCHER, msg)
        self._flush(link)

    def _flush(self, link: RankLink) -> None:
        try:
            k = link.sock.send(link.out)
        except (BlockingIOError, InterruptedError):
            k = 0
        except OSError:
            self._lose(link)
            return
        link.out = link.out[k:]
        self.sup.watch(link.sock.fileno(), _IN | _OUT if link.out else _IN, self._on_link)

    def drain(self, rank: int) -> None:
        """Read whatever ``rank`` already sent (its last words, when its process ended)."""
        link = self.links[rank]
        if link.sock is not None:
            self._read(link, budget=1 << 16)

    def read_to_end(self, timeout: float = LAST_WORDS_S) -> None:
        """The ranks' processes have ended: read each link until it closes (at most
        ``timeout`` seconds in all). A process's last words can still be in flight when it exits
        (its kernel sends the queued bytes after the close): reading only what had arrived lost
        rank 0's result of a 100-rank job on a busy, dilated testbed link."""
        end = time.monotonic() + timeout
        while self.connected and time.monotonic() < end:
            self.sup.step(max_wait=0.05)

    def _lose(self, link: RankLink) -> None:
        if link.sock is None:
            return
        fd = link.sock.fileno()
        self.sup.unwatch(fd)
        self._by_fd.pop(fd, None)
        link.sock.close()
        link.sock = None
        link.lost_at = time.monotonic()
        if self.on_lost:
            self.on_lost(link)

    def send_table(self) -> None:
        """Everyone checked in: send each rank the address table, and close the door."""
        tbl = contract.table([(lk.hello["host"], lk.hello["port"]) for lk in self.links])
        for lk in self.links:
            self.send(lk.rank, tbl)
        self.stop_accepting()

    def abort_set_up(self, rank: int, reason: str, *, now: bool = False) -> None:
        """The set-up failed because of ``rank``: this names the job's failure (final), and
        every rank that checked in, or checks in later, is told so (it raises ``PeerFailure``)."""
        self.aborted = (rank, reason)
        self.sup.failed_rank, self.sup.reason = rank, reason
        self.sup.fail(rank, reason, now=now)
        for lk in self.connected:
            if lk.hello is not None:
                self.send(lk.rank, contract.abort(rank, reason))

    @property
    def connected(self) -> list[RankLink]:
        return [lk for lk in self.links if lk.sock is not None]

    def close(self) -> None:
        self.stop_accepting()
        for link in self.links:
            if link.sock is not None:
                self.sup.unwatch(link.sock.fileno())
                link.sock.close()
                link.sock = None

    # --- who failed --------------------------------------------------------------------------
    def culprit(self, exits: dict[int, tuple[int, float]] | None = None) -> tuple[int, str, bool] | None:
        """``(rank, reason, user error)`` of the rank that failed first, judged from error
        reports and ``exits`` (rank -> (returncode, when); None under mpiexec, where exits
        are not per rank and a link lost without result or goodbye stands for a death).
        A rank's own failure (its error, a death) wins over ``PeerFailure`` consequences."""
        own: list[tuple[float, int]] = []
        blamed: dict[int, int] = {}
        for lk in self.links:
            rc_t = exits.get(lk.rank) if exits is not None else None
            err = lk.error
            if err is not None and err.get("culprit", lk.rank) != lk.rank:
                c = err["culprit"]
                if isinstance(c, int) and 0 <= c < self.n:
                    blamed[c] = blamed.get(c, 0) + 1
                continue
            if err is not None:
                own.append((lk.error_at, lk.rank))
            elif rc_t is not None and rc_t[0] != 0:
                own.append((rc_t[1], lk.rank))
            elif exits is None and lk.lost_at is not None and not lk.bye and lk.result is None:
                own.append((lk.lost_at, lk.rank))
        if own:
            r = min(own)[1]
        elif blamed:
            r = max(blamed, key=lambda k: (blamed[k], -k))
        else:
            return None
        return r, *self.describe(r, exits)

    def describe(self, r: int, exits: dict[int, tuple[int, float]] | None) -> tuple[str, bool]:
        where = f" on {self.node_of(r)}" if self.node_of(r) and len(self.nodes()) > 1 else ""
        lk = self.links[r]
        err = lk.error if lk.error is not None and lk.error.get("culprit", r) == r else None
        rc = exits[r][0] if exits is not None and r in exits else None
        if err is not None and err.get("user"):
            return f"rank {r}{where} failed: {err['detail']}", True
        if err is not None:
            status = describe_status(rc) if rc is not None else "failed"
            return f"rank {r}{where} {status}: {err['detail']}", False
        status = describe_status(rc) if rc is not None else "died"
        return f"rank {r}{where} {status}", False

    def node_of(self, r: int) -> str:
        """The host rank ``r`` said it runs on, else where it was placed (if known)."""
        return self.links[r].node or (self.expected_nodes[r] if self.expected_nodes else "")

    def nodes(self) -> set[str]:
        return {self.node_of(r) for r in range(self.n)} - {""}

    def blame(self, link: RankLink) -> None:
        """An error report starts the supervisor's grace clock, blaming the rank it names."""
        c = link.error.get("culprit", link.rank)
        self.sup.fail(c if isinstance(c, int) else link.rank, f"rank {link.rank}: {link.error.get('detail', '')}")

    def job_result(self) -> JobResult:
        """The job's outcome as the supervisor and the links saw it (naming not yet judged)."""
        sup, n = self.sup, len(self.links)
        return JobResult(returncodes=[0] * n, results=[lk.result for lk in self.links], errors=self.errors(),
                         tracebacks=self.tracebacks(), interrupted=sup.interrupted, reason=sup.reason,
                         failed_rank=sup.failed_rank, elapsed=time.monotonic() - sup.t0)

    def tracebacks(self) -> dict[int, str]:
        return {lk.rank: lk.error["traceback"] for lk in self.links
                if lk.error is not None and isinstance(lk.error.get("traceback"), str) and lk.error["traceback"]}

    def errors(self) -> dict[int, str]:
        return {lk.rank: str(lk.error.get("detail", ""))[:4000] for lk in self.links if lk.error is not None}
