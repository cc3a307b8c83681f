"""Run a job under MPI's own launcher (``mpiexec``, MPICH's hydra): on this machine, or on the
hosts of a hostfile (``-f``), for the MPI backend or for clusterlab's TCP mesh.

As with the local launcher, each rank checks in at our rendezvous (``cluster.checkin``,
per-job secret in the environment, which hydra passes on to every host): with the TCP mesh it
receives the address table there (each rank listens on its host's routable address:
``clusterlab.rendezvous.address``), and ``run(fn, n, backend="mpi")`` collects return values and error
reports without pickle. The same :class:`~clusterlab.cluster.supervisor.Supervisor` as the
local launcher forwards Ctrl-C, enforces the timeouts and kills what is left (including the
processes hydra starts in process groups of their own). The rank named on failure is the one
that reported its own error, else the first whose link dropped without a result or a goodbye;
a rank that never checks in is named with the host the hostfile put it on.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from clusterlab.cluster.checkin import RankLink, Rendezvous
from clusterlab.cluster.supervisor import (
    JobResult,
    Supervisor,
    check_capacity,
    check_command,
    describe_status,
)
from clusterlab.errors import ConfigError
from clusterlab.net.transport_config import TransportConfig
from clusterlab.rendezvous import address, contract


def mpiexec_path() -> str | None:
    """``mpiexec`` next to this Python (the ``mpich`` wheel's), else on PATH."""
    cand = Path(sys.executable).with_name("mpiexec")
    if cand.exists():
        return str(cand)
    return shutil.which("mpiexec")


def read_hostfile(path: str) -> list[tuple[str, int]]:
    """``(host, slots)`` per line of a hydra hostfile (``host[:slots]``, ``#`` comments)."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the hostfile: {e.strerror}") from None
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        host, _, rest = line.partition(":")
        slots = rest.split(":", 1)[0].strip() or "1"
        if not host or not slots.isdigit() or int(slots) < 1:
            raise ConfigError(f"{path}:{i}:1: expected host or host:slots (slots >= 1), got {line!r}")
        out.append((host.strip(), int(slots)))
    if not out:
        raise ConfigError(f"{path}: the hostfile names no host")
    return out


def placement(hosts: list[tuple[str, int]], n: int) -> list[str]:
    """The host of each rank as hydra places them by default: fill each host's slots in
    order, then start over.

    >>> placement([("a", 2), ("b", 1)], 5)
    ['a', 'a', 'b', 'a', 'a']
    """
    order = [h for h, k in hosts for _ in range(k)]
    return [order[r % len(order)] for r in range(n)]


def launcher_address(hosts: list[tuple[str, int]], iface: str | None = None) -> str:
    """Where the rendezvous listens for a job on ``hosts``: ``iface``'s address, else the
    source of this machine's route towards the first host that is not this one."""
    if iface:
        return address.choose(iface=iface)
    for h, _ in hosts:
        src = address.route_source(h)
        if src is not None and not src.startswith("127."):
            return src
    return "127.0.0.1"


# How MPICH moves data between ranks of one machine. The ``mpich`` wheel's only network module is
# UCX, so libfabric's FI_PROVIDER means nothing to it, and MPIR_CVAR_NOLOCAL=1 alone only turns
# off MPICH's own shared memory: UCX then still carries every message through its shared memory
# and cross-memory attach (tests/comm/test_bench_comm.py checks both with strace).
MPICH_TRANSPORTS = {
    "tcp": {"MPIR_CVAR_NOLOCAL": "1", "UCX_TLS": "tcp,self"},  # TCP sockets, also between ranks of one host
    "ucx_default": {"MPIR_CVAR_NOLOCAL": "1"},                  # UCX's shared memory + cross-memory attach
    "shm": {},                                                  # MPICH's defaults (its own shared memory)
}
_MPICH_PREFIXES = ("UCX_", "MPIR_CVAR_", "FI_")


def mpich_env(transport: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default this process's) without its MPICH/UCX/libfabric settings, then with
    ``MPICH_TRANSPORTS[transport]``'s: MPICH moves data exactly that way, whatever the caller's
    environment said.

    >>> mpich_env("tcp", {"UCX_TLS": "sm", "FI_PROVIDER": "tcp", "HOME": "/root"})
    {'HOME': '/root', 'MPIR_CVAR_NOLOCAL': '1', 'UCX_TLS': 'tcp,self'}
    >>> mpich_env("udp", {})
    Traceback (most recent call last):
    ...
    clusterlab.errors.ConfigError: unknown MPICH transport 'udp' (tcp, ucx_default or shm)
    """
    if transport not in MPICH_TRANSPORTS:
        names = list(MPICH_TRANSPORTS)
        raise ConfigError(f"unknown MPICH transport {transport!r} ({', '.join(names[:-1])} or {names[-1]})")
    out = {k: v for k, v in (os.environ if env is None else env).items() if not k.startswith(_MPICH_PREFIXES)}
    out.update(MPICH_TRANSPORTS[transport])
    return out


def launch_mpi(argv: list[str], n: int, *, config: TransportConfig | None = None, backend: str = "mpi",
               env: dict[str, str] | None = None, timeout: float | None = None, comm_timeout: float | None = None,
               grace: float = 3.0, stdin=subprocess.DEVNULL, mpiexec: str | None = None,
               setup_timeout: float = 60.0, hostfile: str | None = None, mpiexec_args: list[str] | tuple = (),
               iface: str | None = None, rendezvous_host: str | None = None,
               handshake_timeout: float = 5.0, program: bool = False, stdout=None,
               mpich: str | None = None, wrap: list[str] | tuple = (), cwd: str | None = None) -> JobResult:
    """``[wrap] mpiexec [-f hostfile] [mpiexec_args] -n n argv``; returns a ``JobResult`` like ``launch``.

    ``iface``: the interface (or address) every rank's mesh listens on (``CLUSTERLAB_IFACE``;
    default: the route towards the rendezvous). ``rendezvous_host``: the address the
    launcher listens on (default: loopback, or with a hostfile ``iface``'s address or the
    route towards the hosts). ``setup_timeout``: every rank must check in within it.
    ``program``: ``argv`` knows nothing of clusterlab (an mpi4py script, an MPI C binary): each
    rank runs it under ``clusterlab.cluster.program``, which checks in for it and reports how it
    ended, so a rank that died is named. ``stdout``: a file for what the ranks print (hydra
    forwards it to mpiexec's output), default this process's. ``mpich``: how MPICH moves data
    on one machine (a ``MPICH_TRANSPORTS`` name; ``mpich_env``), None: as the environment says.
    ``wrap``: a command mpiexec runs under (a tracer: ``["strace", "-f", "-c", "-o", FILE]``
    counts mpiexec and its ranks, not this launcher). ``cwd``: the ranks' working directory
    (mpiexec's ``-wdir``), default this process's.
    """
    mpiexec = mpiexec or mpiexec_path()
    if mpiexec is None:
        raise ConfigError("mpiexec not found (install the extra: pip install 'clusterlab[mpi]')")
    if n < 1:
        raise ConfigError(f"number of ranks must be at least 1 (got {n})")
    if not argv:
        raise ConfigError("no command to run")
    if backend not in contract.MESHES:
        raise ConfigError(f"unknown backend {backend!r} ({' or '.join(contract.MESHES)})")
    hosts = read_hostfile(hostfile) if hostfile else None
    if hosts is None:  # every rank on this machine
        check_capacity(n)
        check_command(argv)
    if rendezvous_host is None:
        rendezvous_host = launcher_address(hosts, iface) if hosts else "127.0.0.1"
    config = config or TransportConfig()
    if config.place is None:  # not placed by the caller: socket options, refused now if they cannot be
        config = config.with_place("socket")
    if mpich is not None:
        env = mpich_env(mpich, env)
    if wrap:
        check_command(list(wrap))
    secret = secrets.token_bytes(32)
    with Supervisor(grace=grace, timeout=timeout, track_descendants=True) as sup:
        rdv = Rendezvous(sup, n, secret, rendezvous_host, handshake_timeout=handshake_timeout)
        if hosts:
            rdv.expected_nodes = placement(hosts, n)
        job = _MpiJob(sup, rdv, backend, setup_timeout)
        try:
            rhost, rport = rdv.address
            e = dict(os.environ if env is None else env)
            e.update({contract.ENV_RDV: f"{rhost}:{rport}", contract.ENV_SECRET: secret.hex(),
                      contract.ENV_SIZE: str(n), contract.ENV_BACKEND: backend,
                      contract.ENV_TRANSPORT: config.to_json(),
                      contract.ENV_SETUP_TIMEOUT: str(setup_timeout)})
            for k in (contract.ENV_RANK, contract.ENV_BIND, contract.ENV_IFACE):
                e.pop(k, None)
            if iface:
                e[contract.ENV_IFACE] = iface
            if comm_timeout is not None:
                e[contract.ENV_TIMEOUT] = str(comm_timeout)
            ranks = [sys.executable, "-m", "clusterlab.cluster.program", *argv] if program else list(argv)
            cmd = [*wrap, mpiexec, *(["-f", hostfile] if hostfile else []), *(["-wdir", cwd] if cwd else []),
                   *mpiexec_args, "-n", str(n), *ranks]
            job.mpiexec = sup.spawn(cmd, e, stdin, rank=-1, what="mpiexec", stdout=stdout)
            while sup.alive():
                job.tick()
                sup.step()
            if sup.failed_rank is not None or sup.interrupted or job.mpiexec.rc not in (0, None):
                # a failed mpiexec and its proxies can leave ranks running (blocked on the dead
                # one) that would hold their links open for read_to_end's 10 s
                sup.kill_descendants()
            # mpiexec can exit a moment before its ranks' last words reach us
            rdv.read_to_end()
        finally:
            rdv.close()
    return job.result()


class _MpiJob:
    def __init__(self, sup: Supervisor, rdv: Rendezvous, backend: str, setup_timeout: float):
        self.sup, self.rdv, self.backend, self.setup_timeout = sup, rdv, backend, setup_timeout
        self.mpiexec = None
        self.decided = False
        rdv.on_hello = self._hello
        rdv.on_error = rdv.blame
        rdv.on_lost = self._lost

    def _hello(self, _link: RankLink) -> None:
        if all(lk.hello for lk in self.rdv.links):
            if self.backend == "tcp" and self.sup.failed_rank is None:
                self.rdv.send_table()
            self.rdv.stop_accepting()

    def _lost(self, link: RankLink) -> None:
        if link.result is None and not link.bye and link.error is None:
            self.sup.fail(link.rank, f"rank {link.rank} died")

    def tick(self) -> None:
        self.rdv.expire()
        if not self.decided and self.sup.failed_rank is None and not self.sup.interrupted \
                and time.monotonic() - self.sup.t0 > self.setup_timeout \
                and not all(lk.hello for lk in self.rdv.links):
            missing = [lk.rank for lk in self.rdv.links if lk.hello is None]
            r = missing[0]
            on = f" on {self.rdv.node_of(r)}" if self.rdv.node_of(r) else ""
            reason = (f"rank {r}{on} did not check in within {self.setup_timeout:g} s (it could not reach the "
                      f"launcher at {self.rdv.address[0]}:{self.rdv.address[1]}, or did not start)")
            if len(missing) > 1:
                reason += f"; nor did ranks {missing[1:]}"
            self.decided = True
            self.rdv.abort_set_up(r, reason, now=True)

    def result(self) -> JobResult:
        rdv = self.rdv
        rc = self.mpiexec.rc if self.mpiexec is not None and self.mpiexec.rc is not None else 1
        res = rdv.job_result()
        if rc != 0 or res.errors or res.failed_rank is not None:
            res.returncodes = [rc if rc else 1] * len(rdv.links)
        if res.interrupted or res.failed_rank == -1 or self.decided:
            return res
        judged = rdv.culprit(None)
        if judged is not None:
            r, reason, res.user_error = judged
            if rdv.links[r].error is None:  # a death: say what mpiexec saw
                reason += f" (mpiexec {_mpiexec_status(rc)})"
            res.failed_rank, res.reason = r, reason
        elif rc != 0:
            r = next((lk.rank for lk in rdv.links if lk.result is None and not lk.bye), 0)
            res.failed_rank, res.reason = r, f"rank {r} died (mpiexec {_mpiexec_status(rc)})"
        return res


def _mpiexec_status(rc: int) -> str:
    """Hydra exits with a failed rank's status, or with the signal number that killed it."""
    text = describe_status(rc)
    if 0 < rc < 65:
        try:
            text += f": a rank exited with {rc} or was killed by {signal.Signals(rc).name}"
        except ValueError:
            pass
    return text
