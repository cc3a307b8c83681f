"""The local launcher: run n ranks as processes on this machine (loopback by default).

``launch(argv, n)`` starts ``argv`` n times and acts as the rendezvous: each rank opens its own
listening socket, authenticates to the launcher with the per-job secret (passed in the
environment, never on the command line), reports its address, and receives the address table
to build the TCP mesh (``clusterlab.comm.world()`` does the rank's side). The launcher then
watches: when a rank dies, the others see its connections drop and raise ``PeerFailure``
naming it; whatever is still running ``grace`` seconds later is terminated, then killed, and
every process is reaped (each rank runs in its own process group, so helpers it started go
too). Ctrl-C (SIGINT) and SIGTERM are forwarded to every rank.

``run(fn, n)`` runs a module-level function ``fn(comm, *args)`` on n ranks and returns the
list of their return values (JSON-able values or bytes; nothing is pickled).

``hosts`` places rank i elsewhere: ``RankHost(prefix=["ip", "netns", "exec", "h1"],
bind="10.0.0.1")`` runs it inside a network namespace and makes it listen on that address
(the rendezvous address must then be reachable from there: ``rendezvous_host``).

>>> run(_example_sum, 3)
[3, 3, 3]
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import importlib.util
import json
import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field

from clusterlab.comm.errors import CommError, CommTimeout, PeerFailure, ProtocolError
from clusterlab.comm.tcp import frames, handshake
from clusterlab.errors import ConfigError
from clusterlab.net.transport_config import TransportConfig

ENV_RANK = "CLUSTERLAB_RANK"
ENV_SIZE = "CLUSTERLAB_SIZE"
ENV_RDV = "CLUSTERLAB_RENDEZVOUS"
ENV_SECRET = "CLUSTERLAB_SECRET"
ENV_BIND = "CLUSTERLAB_BIND"
ENV_TRANSPORT = "CLUSTERLAB_TRANSPORT"
ENV_TIMEOUT = "CLUSTERLAB_TIMEOUT"
ENV_BACKEND = "CLUSTERLAB_BACKEND"
ENV_LAUNCHER_PID = "CLUSTERLAB_LAUNCHER_PID"

RESULT_JSON_TAG = 1
RESULT_BYTES_TAG = 2
MAX_RESULT = 1 << 30


@dataclass
class RankHost:
    """Where one rank runs: a command prefix (e.g. ``["ip", "netns", "exec", "h1"]``) and the
    address its mesh listener binds to."""

    prefix: list[str] = field(default_factory=list)
    bind: str = "127.0.0.1"


@dataclass
class JobResult:
    """What a launched job did: per-rank exit status (negative = killed by that signal), the
    first rank that failed and why, per-rank return values (``run``) and error reports."""

    returncodes: list[int]
    failed_rank: int | None = None
    reason: str = ""
    results: list = field(default_factory=list)
    errors: dict[int, str] = field(default_factory=dict)
    elapsed: float = 0.0
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        return self.failed_rank is None and not self.interrupted and all(rc == 0 for rc in self.returncodes)


def _describe_status(rc: int) -> str:
    if rc < 0:
        try:
            return f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"was killed by signal {-rc}"
    return f"exited with status {rc}"


# --- frames on the launcher connection (blocking, deadline-bounded) -------------------------

def send_frame(sock: socket.socket, kind: int, tag: int, source: int, body: bytes, timeout: float = 10.0) -> None:
    head = frames.HEADER.pack(frames.MAGIC, kind, 0, 0, 0, tag, source, len(body))
    sock.settimeout(timeout)
    try:
        sock.sendall(head + body)
    except TimeoutError:
        raise CommTimeout("sending to the launcher timed out") from None


def recv_frame(sock: socket.socket, expect_source: int, deadline: float, max_frame: int = MAX_RESULT):
    who = "the launcher" if expect_source == handshake.LAUNCHER else f"rank {expect_source}"
    h = frames.decode_fixed(handshake.recv_exact(sock, frames.HEADER.size, deadline, who), expect_source, max_frame)
    if h.kind not in (frames.CONTROL, frames.DATA_BYTES):
        raise ProtocolError(f"{who} sent an unexpected frame kind {h.kind} on the launcher connection")
    return h, handshake.recv_exact(sock, h.length, deadline, who) if h.length else b""


def send_control(sock: socket.socket, source: int, obj: dict, timeout: float = 10.0) -> None:
    send_frame(sock, frames.CONTROL, 0, source, json.dumps(obj).encode(), timeout)


# --- process helpers -----------------------------------------------------------------------------

def _pdeathsig_preexec():
    """Returns a preexec function that makes the child get SIGKILL if the launcher dies (so a
    killed launcher leaves no ranks behind). Resolved here, before fork: the child only calls."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return lambda: os.setpgid(0, 0)
    parent = os.getpid()

    def pre():
        # Own process group (so the launcher can signal a rank and whatever it started), but
        # the launcher's session: with scheduler autogroups a new session per rank would
        # make every rank its own CPU group, and loopback wake-ups slower by a factor of 3.
        os.setpgid(0, 0)
        prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the launcher died before prctl took effect
            os._exit(1)

    return pre


class _Rank:
    __slots__ = ("rank", "proc", "pgid", "pidfd", "rc", "conn", "hello", "result", "error")

    def __init__(self, rank, proc):
        self.rank, self.proc, self.pgid = rank, proc, proc.pid
        self.pidfd = os.pidfd_open(proc.pid)
        self.rc = None
        self.conn = None
        self.hello = None
        self.result = None
        self.error = None


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def launch(argv: list[str], n: int, *, hosts: list[RankHost] | None = None,
           config: TransportConfig | None = None, env: dict[str, str] | None = None,
           timeout: float | None = None, setup_timeout: float = 60.0, grace: float = 3.0,
           comm_timeout: float | None = None, rendezvous_host: str = "127.0.0.1",
           stdin=subprocess.DEVNULL) -> JobResult:
    """Run ``argv`` as ranks 0..n-1 and wait for the job. Never raises for a failed rank:
    the returned ``JobResult`` says who failed and how (``run`` turns that into an exception).
    ``timeout`` bounds the whole job; ``setup_timeout`` the rendezvous."""
    if n < 1:
        raise ConfigError(f"number of ranks must be at least 1 (got {n})")
    if not argv:
        raise ConfigError("no command to run")
    hosts = hosts or [RankHost() for _ in range(n)]
    if len(hosts) != n:
        raise ConfigError(f"hosts has {len(hosts)} entries for {n} ranks")
    config = config or TransportConfig()
    secret = secrets.token_bytes(32)
    t0 = time.monotonic()

    lsock = socket.socket(socket.AF_INET6 if ":" in rendezvous_host else socket.AF_INET)
    lsock.bind((rendezvous_host, 0))
    lsock.listen(max(n, 16))
    rhost, rport = lsock.getsockname()[:2]

    base_env = dict(os.environ if env is None else env)
    base_env.update({ENV_SIZE: str(n), ENV_RDV: f"{rhost}:{rport}", ENV_SECRET: secret.hex(),
                     ENV_TRANSPORT: config.to_json(), ENV_LAUNCHER_PID: str(os.getpid()),
                     ENV_BACKEND: "tcp"})
    if comm_timeout is not None:
        base_env[ENV_TIMEOUT] = str(comm_timeout)
    pre = _pdeathsig_preexec()
    ranks: list[_Rank] = []
    poller = select.poll()
    fd_kind: dict[int, tuple[str, _Rank | None]] = {lsock.fileno(): ("listen", None)}
    poller.register(lsock.fileno(), select.POLLIN)

    state = {"sig": None}
    old_handlers = {}

    def on_signal(signum, _frame):
        state["sig"] = signum

    if threading_is_main():
        for s in (signal.SIGINT, signal.SIGTERM):
            old_handlers[s] = signal.signal(s, on_signal)
    res = JobResult(returncodes=[0] * n, results=[None] * n)
    try:
        for r in range(n):
            e = dict(base_env)
            e[ENV_RANK] = str(r)
            e[ENV_BIND] = hosts[r].bind
            proc = subprocess.Popen(list(hosts[r].prefix) + list(argv), env=e, stdin=stdin,
                                    preexec_fn=pre)
            rk = _Rank(r, proc)
            ranks.append(rk)
            fd_kind[rk.pidfd] = ("exit", rk)
            poller.register(rk.pidfd, select.POLLIN)

        table_sent = False
        fail_at = None        # when the first failure (or signal) happened
        termed = killed = False
        job_deadline = None if timeout is None else t0 + timeout
        while any(rk.rc is None for rk in ranks):
            now = time.monotonic()
            if state["sig"] is not None and not res.interrupted:
                res.interrupted = True
                res.reason = f"interrupted by {signal.Signals(state['sig']).name}"
                for rk in ranks:
                    if rk.rc is None:
                        _killpg(rk.pgid, state["sig"])
                fail_at = now
            if not table_sent and now - t0 > setup_timeout and res.failed_rank is None and not res.interrupted:
                missing = [rk.rank for rk in ranks if rk.hello is None]
                res.failed_rank = missing[0] if missing else 0
                res.reason = f"ranks {missing} did not check in within {setup_timeout:g} s"
                fail_at = now - grace
            if job_deadline is not None and now > job_deadline and fail_at is None:
                res.reason = f"job timed out after {timeout:g} s"
                res.failed_rank = -1
                fail_at = now - grace
            if fail_at is not None:
                if not termed and now >= fail_at + grace:
                    termed = True
                    for rk in ranks:
                        if rk.rc is None:
                            _killpg(rk.pgid, signal.SIGTERM)
                if not killed and now >= fail_at + grace + 2.0:
                    killed = True
                    for rk in ranks:
                        if rk.rc is None:
                            _killpg(rk.pgid, signal.SIGKILL)
            for fd, _ev in poller.poll(100):
                kind, rk = fd_kind.get(fd, (None, None))
                if kind == "listen":
                    _accept_rank(lsock, secret, ranks, poller, fd_kind, n)
                elif kind == "exit":
                    info = os.waitid(os.P_PIDFD, fd, os.WEXITED | os.WNOWAIT)
                    rk.rc = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
                    poller.unregister(fd)
                    if rk.conn is not None:  # collect what it said before dying
                        _drain_conn(rk, poller, fd_kind)
                    if rk.rc != 0 and res.failed_rank is None and not res.interrupted:
                        res.failed_rank = rk.rank
                        res.reason = f"rank {rk.rank} {_describe_status(rk.rc)}"
                        if rk.error:
                            res.reason += f": {rk.error}"
                        fail_at = time.monotonic()
                elif kind == "conn":
                    _read_conn(rk, poller, fd_kind)
            if not table_sent and res.failed_rank is None:
                # a rank that ended (even cleanly) without joining: those waiting for the
                # mesh can never get it, so fail them now, naming it
                gone = [rk for rk in ranks if rk.rc is not None and rk.hello is None]
                waiting = [rk for rk in ranks if rk.hello is not None and rk.conn is not None]
                if gone and waiting:
                    g = gone[0]
                    res.failed_rank = g.rank
                    res.reason = f"rank {g.rank} {_describe_status(g.rc)} without joining the mesh"
                    for rk in waiting:
                        with contextlib.suppress(OSError, CommError):
                            send_control(rk.conn, handshake.LAUNCHER,
                                         {"op": "abort", "rank": g.rank, "detail": res.reason}, 2.0)
                    fail_at = time.monotonic()
            if not table_sent and res.failed_rank is None and all(rk.hello is not None for rk in ranks):
                table = [[rk.hello["host"], rk.hello["port"]] for rk in ranks]
                for rk in ranks:
                    try:
                        send_control(rk.conn, handshake.LAUNCHER, {"op": "table", "table": table})
                    except (OSError, CommError):
                        pass  # that rank is dying; its exit is reported through its pidfd
                table_sent = True
        for rk in ranks:
            if rk.conn is not None:
                _drain_conn(rk, poller, fd_kind)
    finally:
        for rk in ranks:  # groups are still reserved by the unreaped leaders: no pid reuse race
            _killpg(rk.pgid, signal.SIGKILL)
        for rk in ranks:
            with contextlib.suppress(Exception):
                rk.proc.wait(timeout=5)
            os.close(rk.pidfd)
            if rk.conn is not None:
                rk.conn.close()
        lsock.close()
        for s, h in old_handlers.items():
            signal.signal(s, h)
    for rk in ranks:
        res.returncodes[rk.rank] = rk.rc if rk.rc is not None else rk.proc.returncode
        res.results[rk.rank] = rk.result
        if rk.error:
            res.errors[rk.rank] = rk.error
    if res.failed_rank is None and not res.interrupted:
        bad = [r for r, rc in enumerate(res.returncodes) if rc != 0]
        if bad:
            res.failed_rank = bad[0]
            res.reason = f"rank {bad[0]} {_describe_status(res.returncodes[bad[0]])}"
    res.elapsed = time.monotonic() - t0
    return res


def threading_is_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _accept_rank(lsock, secret, ranks, poller, fd_kind, n) -> None:
    try:
        s, addr = lsock.accept()
    except OSError:
        return
    waiting = {rk.rank for rk in ranks if rk.conn is None}
    try:
        r = handshake.accept(s, secret, handshake.LAUNCHER, waiting, 5.0)
        h, body = recv_frame(s, r, time.monotonic() + 5.0, 1 << 16)
        hello = json.loads(body)
        if h.kind != frames.CONTROL or hello.get("op") != "hello":
            raise ProtocolError(f"rank {r} did not say hello")
        if not isinstance(hello.get("host"), str) or not isinstance(hello.get("port"), int):
            raise ProtocolError(f"rank {r} sent a malformed address")
    except (ProtocolError, CommTimeout, ValueError, OSError) as e:
        print(f"clusterlab: launcher rejected a connection from {addr[0]}:{addr[1]}: {e}", file=sys.stderr)
        s.close()
        return
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rk = ranks[r]
    rk.conn, rk.hello = s, hello
    fd_kind[s.fileno()] = ("conn", rk)
    poller.register(s.fileno(), select.POLLIN)


def _read_conn(rk: _Rank, poller, fd_kind) -> None:
    """One frame from a rank (it sends results and error reports whole, so a short deadline)."""
    try:
        h, body = recv_frame(rk.conn, rk.rank, time.monotonic() + 10.0)
    except (ProtocolError, CommTimeout, OSError):
        _drop_conn(rk, poller, fd_kind)
        return
    if h.kind == frames.DATA_BYTES:
        if h.tag == RESULT_JSON_TAG:
            rk.result = json.loads(body)
        elif h.tag == RESULT_BYTES_TAG:
            rk.result = bytes(body)
        return
    try:
        msg = json.loads(body)
    except ValueError:
        return
    if msg.get("op") == "error":
        rk.error = str(msg.get("detail", ""))[:4000]


def _drain_conn(rk: _Rank, poller, fd_kind) -> None:
    while rk.conn is not None:
        r, _, _ = select.select([rk.conn], [], [], 0)
        if not r:
            return
        before = rk.conn
        _read_conn(rk, poller, fd_kind)
        if rk.conn is before and rk.conn is not None:
            continue


def _drop_conn(rk: _Rank, poller, fd_kind) -> None:
    if rk.conn is None:
        return
    fd = rk.conn.fileno()
    with contextlib.suppress(KeyError, ValueError):
        poller.unregister(fd)
    fd_kind.pop(fd, None)
    rk.conn.close()
    rk.conn = None


# --- run a Python function on n ranks -------------------------------------------------------------

def _target_of(fn) -> tuple[str, str | None]:
    """``("module:qualname", import root)``: the root is the directory the ranks need on
    their path to import the module (tests, scripts)."""
    if "<locals>" in fn.__qualname__ or "<lambda>" in fn.__qualname__:
        raise ConfigError(f"run() needs a module-level function, not {fn.__qualname__}")
    mod = fn.__module__
    m = sys.modules.get(mod)
    path = getattr(m, "__file__", None)
    if mod == "__main__":
        if not path:
            raise ConfigError("run() needs a function defined in an importable module or script file")
        return f"{os.path.abspath(path)}:{fn.__qualname__}", None
    root = None
    if path:
        root = os.path.abspath(path)
        for _ in range(mod.count(".") + (2 if path.endswith("__init__.py") else 1)):
            root = os.path.dirname(root)
    return f"{mod}:{fn.__qualname__}", root


def _resolve(target: str):
    mod, _, qual = target.rpartition(":")
    if mod.endswith(".py"):
        spec = importlib.util.spec_from_file_location("__clusterlab_main__", mod)
        m = importlib.util.module_from_spec(spec)
        sys.modules["__clusterlab_main__"] = m
        spec.loader.exec_module(m)
    else:
        m = importlib.import_module(mod)
    obj = m
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


def run(fn, n: int, *args, backend: str = "tcp", config: TransportConfig | None = None,
        timeout: float | None = 300.0, comm_timeout: float | None = None,
        hosts: list[RankHost] | None = None, **kw) -> list:
    """Run ``fn(comm, *args)`` on ``n`` ranks; return the list of return values by rank.

    ``fn`` must be a module-level function; return values must be JSON-able or bytes.
    Raises ``PeerFailure`` naming the first rank that failed (with its error if it raised),
    ``CommTimeout`` if the job exceeds ``timeout`` seconds.
    """
    target, root = _target_of(fn)
    argv = [sys.executable, "-m", "clusterlab.cluster.local", "call", target, json.dumps(list(args))]
    if root is not None:
        env = dict(kw.pop("env", None) or os.environ)
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        kw["env"] = env
    if backend == "tcp":
        res = launch(argv, n, config=config, timeout=timeout, comm_timeout=comm_timeout, hosts=hosts, **kw)
    elif backend == "mpi":
        from clusterlab.cluster.mpirun import launch_mpi

        res = launch_mpi(argv, n, config=config, timeout=timeout, comm_timeout=comm_timeout, **kw)
    else:
        raise ConfigError(f"unknown backend {backend!r} (tcp or mpi)")
    raise_for(res)
    return res.results


def raise_for(res: JobResult) -> None:
    """Turn a failed ``JobResult`` into the exception a caller expects."""
    if res.interrupted:
        raise KeyboardInterrupt(res.reason)
    if res.failed_rank == -1:
        raise CommTimeout(res.reason)
    if res.failed_rank is not None:
        err = PeerFailure(res.failed_rank, res.reason.split(": ", 1)[1] if ": " in res.reason
                          else res.reason.replace(f"rank {res.failed_rank} ", "", 1))
        err.result = res
        raise err


def _json_default(o):
    import numpy as np

    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"return value of type {type(o).__name__} is not JSON-serialisable")


def _rank_call(target: str, args_json: str) -> int:
    """Entry point of one rank of ``run``: build the communicator, call, report."""
    world_mod = importlib.import_module("clusterlab.comm.world")

    comm = world_mod.world()
    args = json.loads(args_json)
    try:
        fn = _resolve(target)
        value = fn(comm, *args)
        if isinstance(value, (bytes, bytearray, memoryview)):
            body, tag = bytes(value), RESULT_BYTES_TAG
        else:
            body, tag = json.dumps(value, default=_json_default).encode(), RESULT_JSON_TAG
    except BaseException as e:
        detail = f"{type(e).__name__}: {e}"
        world_mod.report_error(detail, traceback.format_exc())
        raise
    world_mod.send_result(body, tag)
    return 0


def _example_sum(comm):
    """Used by the module doctest: every rank contributes 1 via point-to-point to rank 0."""
    if comm.rank == 0:
        total = 1 + sum(int(comm.recv(r)[0]) for r in range(1, comm.size))
        for r in range(1, comm.size):
            comm.send(r, bytes([total]))
        return total
    comm.send(0, bytes([1]))
    return comm.recv(0)[0]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 3 and argv[0] == "call":
        return _rank_call(argv[1], argv[2])
    print("usage: python -m clusterlab.cluster.local call MODULE:FUNCTION ARGS_JSON", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
