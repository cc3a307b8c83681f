"""The local launcher: run n ranks as processes on this machine (loopback by default).

``launch(argv, n)`` starts ``argv`` n times under a ``Supervisor`` (``cluster.supervisor``)
and acts as the rendezvous (``cluster.checkin``): each rank opens its own listening socket,
authenticates to the launcher with the per-job secret (passed in the environment, never on the
command line), reports its address, and receives the address table to build the TCP mesh
(``clusterlab.comm.world()`` does the rank's side; ``clusterlab.rendezvous.contract`` is what the two say).
The launcher then watches: when a rank dies, the others see its connections drop and raise
``PeerFailure`` naming it; whatever is still running ``grace`` seconds later is terminated,
then killed, and every process is reaped (each rank runs in its own process group, so helpers
it started go too). Ctrl-C (SIGINT) and SIGTERM are forwarded to every rank. Before starting
anything it refuses a command that cannot run and more ranks than the machine can start.

``run(fn, n)`` runs a module-level function ``fn(comm, *args)`` on n ranks
(``python -m clusterlab.cluster.rank``) and returns the list of their return values (JSON-able
values or bytes; nothing is pickled).

``hosts`` places rank i elsewhere: ``RankHost(prefix=["ip", "netns", "exec", "h1"],
bind="10.0.0.1")`` runs it inside a network namespace and makes it listen on that address
(the rendezvous address must then be reachable from there: ``rendezvous_host``).

>>> run(_example_sum, 3)
[3, 3, 3]
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, field

from clusterlab.cluster.checkin import RankLink, Rendezvous
from clusterlab.cluster.supervisor import (
    Child,
    JobResult,
    Supervisor,
    check_capacity,
    check_command,
    describe_status,
)
from clusterlab.comm.errors import JobTimeout, PeerFailure
from clusterlab.errors import ConfigError
from clusterlab.net.transport_config import TransportConfig
from clusterlab.rendezvous import contract

__all__ = ["JobResult", "RankHost", "launch", "raise_for", "run"]


@dataclass
class RankHost:
    """Where one rank runs: a command prefix (e.g. ``["ip", "netns", "exec", "h1"]``) and the
    address its mesh listener binds to."""

    prefix: list[str] = field(default_factory=list)
    bind: str = "127.0.0.1"


def launch(argv: list[str], n: int, *, hosts: list[RankHost] | None = None,
           config: TransportConfig | None = None, env: dict[str, str] | None = None,
           timeout: float | None = None, setup_timeout: float = 60.0, grace: float = 3.0,
           comm_timeout: float | None = None, rendezvous_host: str = "127.0.0.1",
           stdin=subprocess.DEVNULL, handshake_timeout: float = 5.0) -> JobResult:
    """Run ``argv`` as ranks 0..n-1 and wait for the job. Never raises for a failed rank:
    the returned ``JobResult`` says who failed and how (``run`` turns that into an exception).
    Raises ``ConfigError`` (bad arguments, a command that does not exist, more ranks than this
    machine can start) or ``LaunchError`` (a rank could not be started) before anything runs.
    ``timeout`` bounds the whole job; ``setup_timeout`` the rendezvous; ``handshake_timeout``
    each connection's authentication."""
    if n < 1:
        raise ConfigError(f"number of ranks must be at least 1 (got {n})")
    if not argv:
        raise ConfigError("no command to run")
    hosts = hosts or [RankHost() for _ in range(n)]
    if len(hosts) != n:
        raise ConfigError(f"hosts has {len(hosts)} entries for {n} ranks")
    check_capacity(n)
    for cmd in {tuple(h.prefix[:1]) for h in hosts} | {(argv[0],)}:
        if cmd:
            check_command(list(cmd))
    config = config or TransportConfig()
    if config.place is None:  # not placed by the caller: socket options, refused now if they cannot be
        config = config.with_place("socket")
    secret = secrets.token_bytes(32)
    with Supervisor(grace=grace, timeout=timeout) as sup:
        rdv = Rendezvous(sup, n, secret, rendezvous_host, handshake_timeout=handshake_timeout)
        try:
            rhost, rport = rdv.address
            base_env = dict(os.environ if env is None else env)
            base_env.pop(contract.ENV_SECRET, None)  # the secret goes through a pipe, not the environment
            base_env.update({contract.ENV_SIZE: str(n), contract.ENV_RDV: f"{rhost}:{rport}",
                             contract.ENV_TRANSPORT: config.to_json(),
                             contract.ENV_LAUNCHER_PID: str(os.getpid()), contract.ENV_BACKEND: "tcp",
                             contract.ENV_SETUP_TIMEOUT: str(setup_timeout)})
            base_env.pop(contract.ENV_IFACE, None)
            if comm_timeout is not None:
                base_env[contract.ENV_TIMEOUT] = str(comm_timeout)
            job = _Job(sup, rdv, setup_timeout)
            for r in range(n):
                e = dict(base_env)
                e[contract.ENV_RANK] = str(r)
                e[contract.ENV_BIND] = hosts[r].bind
                fd = secret_pipe(secret)
                try:
                    e[contract.ENV_SECRET_FD] = str(fd)
                    sup.spawn(list(hosts[r].prefix) + list(argv), e, stdin, rank=r, pass_fds=(fd,))
                finally:
                    os.close(fd)
            while sup.alive():
                job.tick()
                sup.step()
            for r in range(n):
                rdv.drain(r)
            rdv.read_to_end()
        finally:
            rdv.close()
    return job.result()


def secret_pipe(secret: bytes) -> int:
    """The read end of a pipe holding ``secret`` (hex) for one rank: /proc/PID/environ never
    shows it, and whoever reads it first takes it (a stolen secret fails the rank loudly)."""
    r, w = os.pipe()
    try:
        os.write(w, secret.hex().encode())  # 64 bytes: far below the pipe's capacity
    finally:
        os.close(w)
    return r


class _Job:
    """The local launcher's part of the loop: send the table once everyone checked in, abort
    the set-up when a rank cannot join, and name the rank that failed first."""

    def __init__(self, sup: Supervisor, rdv: Rendezvous, setup_timeout: float):
        self.sup, self.rdv, self.setup_timeout = sup, rdv, setup_timeout
        self.table_sent = False
        self.decided = False  # the launcher named the failure itself (set-up): keep it
        self.exits: dict[int, tuple[int, float]] = {}
        sup.on_exit = self._exited
        rdv.on_hello = self._hello
        rdv.on_error = rdv.blame

    def _hello(self, _link: RankLink) -> None:
        if not self.table_sent and self.sup.failed_rank is None and all(lk.hello for lk in self.rdv.links):
            self.rdv.send_table()
            self.table_sent = True

    def _exited(self, child: Child) -> None:
        self.exits[child.rank] = (child.rc, child.exited_at)
        self.rdv.drain(child.rank)  # its last words
        if child.rc != 0:
            self.sup.fail(child.rank, f"rank {child.rank} {describe_status(child.rc)}")

    def _abort_setup(self, rank: int, reason: str, now: bool = False) -> None:
        self.decided = True
        self.rdv.abort_set_up(rank, reason, now=now)

    def tick(self) -> None:
        self.rdv.expire()
        if self.table_sent or self.decided or self.sup.interrupted:
            return
        # a rank that ended (even cleanly) without joining: those waiting for the mesh never
        # will get it, so fail them now, naming it
        gone = [lk.rank for lk in self.rdv.links if lk.rank in self.exits and lk.hello is None]
        if gone and any(lk.hello for lk in self.rdv.links):
            g = gone[0]
            self._abort_setup(g, f"rank {g} {describe_status(self.exits[g][0])} without joining the mesh")
        elif self.sup.failed_rank is None and time.monotonic() - self.sup.t0 > self.setup_timeout:
            missing = [lk.rank for lk in self.rdv.links if lk.hello is None]
            self._abort_setup(missing[0] if missing else 0,
                              f"ranks {missing} did not check in within {self.setup_timeout:g} s", now=True)

    def result(self) -> JobResult:
        sup, rdv = self.sup, self.rdv
        res = rdv.job_result()
        for c in sup.children:
            res.returncodes[c.rank] = c.rc if c.rc is not None else (c.proc.returncode or 0)
        if res.interrupted or res.failed_rank == -1 or self.decided:
            return res
        exits = {r: (rc, self.exits.get(r, (rc, float("inf")))[1]) for r, rc in enumerate(res.returncodes)}
        judged = rdv.culprit(exits)
        if judged is not None:
            res.failed_rank, res.reason, res.user_error = judged
        elif res.failed_rank is None and any(rc != 0 for rc in res.returncodes):
            bad = next(r for r, rc in enumerate(res.returncodes) if rc != 0)
            res.failed_rank, res.reason = bad, f"rank {bad} {describe_status(res.returncodes[bad])}"
        return res


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


def run(fn, n: int, *args, backend: str = "tcp", config: TransportConfig | None = None,
        timeout: float | None = 300.0, comm_timeout: float | None = None,
        hosts: list[RankHost] | None = None, launcher=None, **kw) -> list:
    """Run ``fn(comm, *args)`` on ``n`` ranks; return the list of return values by rank.

    ``fn`` must be a module-level function; return values must be JSON-able or bytes.
    Raises ``PeerFailure`` naming the first rank that failed (with its error if it raised),
    ``JobTimeout`` (a ``CommTimeout``) if the job exceeds ``timeout`` seconds. Other keywords go to ``launch``
    (or ``launch_mpi`` with ``backend="mpi"``, or ``launcher``: a function with ``launch``'s
    signature that starts the ranks some other way).
    """
    target, root = _target_of(fn)
    argv = [sys.executable, "-m", "clusterlab.cluster.rank", target, json.dumps(list(args))]
    if root is not None:
        env = dict(kw.pop("env", None) or os.environ)
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        kw["env"] = env
    if launcher is not None:
        res = launcher(argv, n, config=config, timeout=timeout, comm_timeout=comm_timeout, **kw)
    elif backend == "tcp":
        res = launch(argv, n, config=config, timeout=timeout, comm_timeout=comm_timeout, hosts=hosts, **kw)
    elif backend == "mpi":
        from clusterlab.cluster.mpirun import launch_mpi

        res = launch_mpi(argv, n, config=config, timeout=timeout, comm_timeout=comm_timeout, **kw)
    else:
        raise ConfigError(f"unknown backend {backend!r} ({' or '.join(contract.MESHES)})")
    raise_for(res)
    return res.results


class RankError(PeerFailure):
    """A rank of ``run`` failed with a clusterlab error in the input or settings (e.g. a
    ``ConfigError``); the message names the rank and the error, and the CLI prints it as one
    line."""


def _comm_failure(detail: str) -> bool:
    """Whether a rank's failure (``"CommTimeout: rank 6: timed out ..."``) was a communication
    failure (a ``CommError``), not a bug.

    >>> _comm_failure("CommTimeout: rank 6: timed out waiting for a message from rank 8"), _comm_failure("KeyError: 3")
    (True, False)
    """
    from clusterlab.rendezvous import errors

    names = {c.__name__ for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.CommError)}
    return detail.split(":", 1)[0].strip() in names


def raise_for(res: JobResult, *, show_traceback: bool = True) -> None:
    """Turn a failed ``JobResult`` into the exception a caller expects. A rank's traceback
    (a bug, not a user error) is written to stderr once, since its rank printed nothing."""
    if res.interrupted:
        raise KeyboardInterrupt(res.reason)
    if res.failed_rank == -1:
        raise JobTimeout(res.reason)
    if res.failed_rank is not None:
        r = res.failed_rank
        tb = res.tracebacks.get(r)
        detail = res.reason.split(": ", 1)[1] if ": " in res.reason else res.reason.replace(f"rank {r} ", "", 1)
        # a timeout or a dead peer is said in full by the one line (which rank, waiting for what);
        # a traceback is for a bug
        if show_traceback and tb and not res.user_error and not _comm_failure(detail):
            sys.stderr.write(f"clusterlab: traceback of rank {r}:\n{tb}")
            sys.stderr.flush()
        err = (RankError if res.user_error else PeerFailure)(r, detail)
        err.result = res
        raise err


def _example_sum(comm):
    """Used by the module doctest: every rank contributes 1 via point-to-point to rank 0."""
    if comm.rank == 0:
        total = 1 + sum(int(comm.recv(r)[0]) for r in range(1, comm.size))
        for r in range(1, comm.size):
            comm.send(r, bytes([total]))
        return total
    comm.send(0, bytes([1]))
    return comm.recv(0)[0]
