"""Run a job under MPI's own launcher (``mpiexec``), for the MPI backend or for the TCP mesh
bootstrapped through MPI.

The ranks get the MPI backend (``CLUSTERLAB_BACKEND=mpi``) or the TCP mesh whose addresses
travel through MPI (``tcp``). As with the local launcher, each rank authenticates to a small
result server of ours (per-job secret in the environment) so that ``run(fn, n,
backend="mpi")`` can collect return values and error reports without pickle. When a rank dies,
MPICH's process manager ends the job; the rank named is the one that reported an error, or
else the first whose connection dropped without a result.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from clusterlab.cluster import local
from clusterlab.errors import ConfigError
from clusterlab.net.transport_config import TransportConfig


def mpiexec_path() -> str | None:
    """``mpiexec`` next to this Python (the ``mpich`` wheel's), else on PATH."""
    cand = Path(sys.executable).with_name("mpiexec")
    if cand.exists():
        return str(cand)
    return shutil.which("mpiexec")


def launch_mpi(argv: list[str], n: int, *, config: TransportConfig | None = None, backend: str = "mpi",
               env: dict[str, str] | None = None, timeout: float | None = None, comm_timeout: float | None = None,
               grace: float = 3.0, stdin=subprocess.DEVNULL, mpiexec: str | None = None,
               setup_timeout: float = 60.0) -> local.JobResult:
    """``mpiexec -n n argv`` with result collection; returns a ``JobResult`` like ``launch``."""
    mpiexec = mpiexec or mpiexec_path()
    if mpiexec is None:
        raise ConfigError("mpiexec not found (install the extra: pip install 'clusterlab[mpi]')")
    if n < 1:
        raise ConfigError(f"number of ranks must be at least 1 (got {n})")
    secret = secrets.token_bytes(32)
    t0 = time.monotonic()
    lsock = socket.create_server(("127.0.0.1", 0), backlog=max(n, 16))
    rhost, rport = lsock.getsockname()[:2]
    e = dict(os.environ if env is None else env)
    e.update({local.ENV_RDV: f"{rhost}:{rport}", local.ENV_SECRET: secret.hex(), local.ENV_SIZE: str(n),
              local.ENV_TRANSPORT: (config or TransportConfig()).to_json(), local.ENV_BACKEND: backend})
    e.pop(local.ENV_RANK, None)
    if comm_timeout is not None:
        e[local.ENV_TIMEOUT] = str(comm_timeout)
    proc = subprocess.Popen([mpiexec, "-n", str(n), *argv], env=e, stdin=stdin,
                            preexec_fn=local._pdeathsig_preexec())
    pidfd = os.pidfd_open(proc.pid)
    ranks = [_Slot(r) for r in range(n)]
    poller = select.poll()
    fd_kind: dict = {lsock.fileno(): ("listen", None), pidfd: ("exit", None)}
    poller.register(lsock.fileno(), select.POLLIN)
    poller.register(pidfd, select.POLLIN)
    res = local.JobResult(returncodes=[0] * n, results=[None] * n)
    state = {"sig": None}
    old = {}
    if local.threading_is_main():
        for s in (signal.SIGINT, signal.SIGTERM):
            old[s] = signal.signal(s, lambda signum, _f: state.__setitem__("sig", signum))
    dropped: list[int] = []
    rc = None
    try:
        fail_at = None
        while rc is None:
            now = time.monotonic()
            if state["sig"] is not None and not res.interrupted:
                res.interrupted, res.reason = True, f"interrupted by {signal.Signals(state['sig']).name}"
                local._killpg(proc.pid, state["sig"])
                fail_at = now
            if timeout is not None and now - t0 > timeout and fail_at is None:
                res.failed_rank, res.reason = -1, f"job timed out after {timeout:g} s"
                local._killpg(proc.pid, signal.SIGTERM)
                fail_at = now
            if fail_at is not None and now > fail_at + grace:
                local._killpg(proc.pid, signal.SIGKILL)
            for fd, _ev in poller.poll(100):
                kind, rk = fd_kind.get(fd, (None, None))
                if kind == "listen":
                    local._accept_rank(lsock, secret, ranks, poller, fd_kind, n)
                elif kind == "exit":
                    info = os.waitid(os.P_PIDFD, fd, os.WEXITED | os.WNOWAIT)
                    rc = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
                elif kind == "conn":
                    local._read_conn(rk, poller, fd_kind)
                    if rk.conn is None and rk.result is None:
                        dropped.append(rk.rank)
        # mpiexec can exit a moment before its ranks' last words reach us: wait for each
        # connection to close (bounded), reading what comes
        end = time.monotonic() + 2.0
        while any(rk.conn is not None for rk in ranks) and time.monotonic() < end:
            for fd, _ev in poller.poll(50):
                kind, rk = fd_kind.get(fd, (None, None))
                if kind == "conn":
                    local._read_conn(rk, poller, fd_kind)
                    if rk.conn is None and rk.result is None:
                        dropped.append(rk.rank)
    finally:
        local._killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            proc.wait(timeout=5)
        os.close(pidfd)
        for rk in ranks:
            if rk.conn is not None:
                rk.conn.close()
        lsock.close()
        for s, h in old.items():
            signal.signal(s, h)
    res.elapsed = time.monotonic() - t0
    for rk in ranks:
        res.results[rk.rank] = rk.result
        if rk.error:
            res.errors[rk.rank] = rk.error
    if rc != 0 or res.errors:
        res.returncodes = [rc if rc else 1] * n
        if res.failed_rank is None and not res.interrupted:
            if res.errors:
                r = min(res.errors)
                res.failed_rank, res.reason = r, f"rank {r} failed: {res.errors[r]}"
            else:
                r = dropped[0] if dropped else next((rk.rank for rk in ranks if rk.result is None), 0)
                res.failed_rank = r
                res.reason = f"rank {r} died (mpiexec {local._describe_status(rc)})"
    return res


class _Slot:
    """Per-rank state for the result server (the fields ``local`` helpers use)."""

    __slots__ = ("rank", "conn", "hello", "result", "error")

    def __init__(self, rank):
        self.rank, self.conn, self.hello, self.result, self.error = rank, None, None, None, None

