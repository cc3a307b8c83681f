"""Where ranks run, as one protocol: a :class:`Cluster` runs a Python rank function on n ranks
(``run``) or starts a program as n ranks (``launch``). Every layer above takes a Cluster; the
choice between threads, loopback processes, mpiexec, a namespace testbed or the job this process
is already in is made here (``from_options`` maps the command-line flags to one) and nowhere else.

============== ===============================================================================
``InProcess``   ranks are threads of this process (``comm.inproc``): tests algorithms, not networks
``Local``       processes on this machine joined by the TCP mesh over loopback (``cluster.local``)
``Mpirun``      processes started by ``mpiexec`` (MPICH's hydra), on this machine or the hosts of
                a hostfile; ``mesh="mpi"`` (MPI's own transport) or ``"tcp"`` (clusterlab's mesh)
``Testbed``     rank i in host i of a namespace testbed (``cluster.testbed``): the emulated network
``Launched``    this process already is one rank of a job (``clusterlab run``, ``mpiexec``)
============== ===============================================================================

``run(fn, n, *args, transport=None, timeout=..., kwargs=None)`` calls ``fn(comm, *args)`` on each
rank and returns the ranks' return values by rank (``Launched``: this rank's alone, in a
one-element list; ``size`` tells the two apart: None for a cluster that starts its ranks, the
job's size for ``Launched``). ``fn`` must be a module-level function and its ``args`` JSON-able
(ranks are fresh processes; nothing is pickled), except on ``InProcess``, which also passes
``kwargs``. ``transport`` is a ``TransportConfig`` for the TCP mesh; a cluster whose sockets it
cannot reach refuses it rather than ignore it.

``launch(argv, n, ...)`` starts a program as ranks 0..n-1 and returns the ``JobResult``.

>>> from clusterlab.cluster.local import _example_sum
>>> InProcess().run(_example_sum, 3), Local().run(_example_sum, 2)
([3, 3, 3], [2, 2])
>>> from_options("inproc").name, from_options("tcp").name, from_options("mpi").name
('inproc', 'tcp', 'mpi')
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from typing import Protocol, runtime_checkable

from clusterlab.comm.places import InProcess, Launched, has_knobs, no_kwargs, started_as_rank
from clusterlab.errors import ConfigError

BACKENDS = ("auto", "tcp", "mpi", "inproc", "world")  # the values of the commands' --backend
MESHES = ("tcp", "mpi")  # what connects processes: clusterlab's TCP mesh, or MPI's own transport

__all__ = ["BACKENDS", "MESHES", "Cluster", "InProcess", "Launched", "Local", "Mpirun", "Testbed", "current",
           "from_options", "started_as_rank"]


@runtime_checkable
class Cluster(Protocol):
    """Where ranks run (see the module's doc)."""

    name: str
    size: int | None

    def run(self, fn, n: int | None, *args, transport=None, timeout: float | None = 300.0,
            kwargs: dict | None = None, **options) -> list: ...

    def launch(self, argv: list[str], n: int, *, transport=None, timeout: float | None = None, **options): ...


class Local:
    """Processes on this machine, joined by clusterlab's TCP mesh. ``iface``: the interface (or
    address) every rank's mesh listens on (default loopback); ``rendezvous_host``: where the
    launcher listens for its ranks."""

    name = "tcp"
    size = None

    def __init__(self, iface: str | None = None, rendezvous_host: str = "127.0.0.1"):
        self.iface, self.rendezvous_host = iface, rendezvous_host

    def __repr__(self) -> str:
        return f"Local(iface={self.iface!r})" if self.iface else "Local()"

    def _hosts(self, n: int):
        if not self.iface:
            return None
        from clusterlab.cluster.local import RankHost
        from clusterlab.rendezvous.address import choose

        return [RankHost(bind=choose(iface=self.iface)) for _ in range(n)]

    def run(self, fn, n, *args, transport=None, timeout: float | None = 300.0, kwargs=None, **options) -> list:
        from clusterlab.cluster import local

        no_kwargs(kwargs, "launched")
        options.setdefault("rendezvous_host", self.rendezvous_host)
        return local.run(fn, n, *args, config=transport, timeout=timeout, hosts=self._hosts(n), **options)

    def launch(self, argv, n, *, transport=None, timeout: float | None = None, **options):
        from clusterlab.cluster import local
        from clusterlab.cluster.program import refuse_mpi_program

        refuse_mpi_program(argv, n)
        options.setdefault("rendezvous_host", self.rendezvous_host)
        return local.launch(argv, n, config=transport, timeout=timeout, hosts=self._hosts(n), **options)


class Mpirun:
    """Processes started by ``mpiexec``: on this machine, or on the hosts of ``hostfile``
    (``host[:slots]`` per line). ``mesh``: ``mpi`` (MPI's own transport, ``comm.mpi``) or
    ``tcp`` (clusterlab's mesh between the processes mpiexec started). ``iface``: the interface
    every rank's mesh listens on; ``rendezvous_host``: where the launcher listens;
    ``mpiexec_args``: extra arguments (a list, or one string split as a shell would)."""

    size = None

    def __init__(self, hostfile: str | None = None, mesh: str = "mpi", iface: str | None = None,
                 rendezvous_host: str | None = None, mpiexec_args=(), mpiexec: str | None = None):
        if mesh not in ("mpi", "tcp"):
            raise ConfigError(f"mesh must be mpi or tcp, got {mesh!r}")
        self.hostfile, self.mesh, self.iface, self.rendezvous_host = hostfile, mesh, iface, rendezvous_host
        self.mpiexec_args = shlex.split(mpiexec_args) if isinstance(mpiexec_args, str) else list(mpiexec_args)
        self.mpiexec = mpiexec

    @property
    def name(self) -> str:
        return "mpi" if self.mesh == "mpi" else "tcp over mpiexec"

    def __repr__(self) -> str:
        return f"Mpirun(hostfile={self.hostfile!r}, mesh={self.mesh!r})"

    def _options(self, options: dict) -> dict:
        opts = dict(backend=self.mesh, hostfile=self.hostfile, iface=self.iface, rendezvous_host=self.rendezvous_host,
                    mpiexec_args=self.mpiexec_args, mpiexec=self.mpiexec)
        opts.update(options)
        return opts

    def run(self, fn, n, *args, transport=None, timeout: float | None = 300.0, kwargs=None, **options) -> list:
        from clusterlab.cluster import local

        no_kwargs(kwargs, "launched")
        return local.run(fn, n, *args, config=transport, timeout=timeout, launcher=self._launch, **options)

    def _launch(self, argv, n, **options):
        from clusterlab.cluster.mpirun import launch_mpi

        if self.mesh == "mpi" and has_knobs(options.get("config")):
            raise ConfigError("TCP settings apply to clusterlab's TCP mesh, not to MPI's own transport "
                              "(Mpirun(mesh='tcp'), or a testbed's hosts' sysctls)")

        return launch_mpi(argv, n, **self._options(options))

    def launch(self, argv, n, *, transport=None, timeout: float | None = None, **options):
        """``argv`` as n ranks under mpiexec; an MPI program that knows nothing of clusterlab
        (``program.mpi_program``) runs under the wrapper that names a rank that died."""
        from clusterlab.cluster.program import mpi_program

        # under mpiexec an MPI program gets its real world whichever mesh clusterlab's ranks use
        options.setdefault("program", mpi_program(argv) is not None)
        return self._launch(argv, n, config=transport, timeout=timeout, **options)


class Testbed:
    """Rank i in host i of a namespace testbed: ``Testbed("lab")`` (one that is up, by name) or
    ``Testbed(tb)`` (a ``cluster.testbed.Testbed`` this process built). The ranks get the
    testbed's TCP settings (the hosts' sysctls, and its per-socket knobs unless ``transport``
    names others). ``mesh="mpi"``: ``launch`` starts a program under mpiexec with its ranks in
    the hosts (``launch_mpi_on_testbed``)."""

    size = None
    __test__ = False  # not a pytest class

    def __init__(self, testbed, mesh: str = "tcp"):
        if mesh not in MESHES:
            raise ConfigError(f"mesh must be tcp or mpi, got {mesh!r}")
        self._tb = testbed if not isinstance(testbed, str) else None
        self._name = testbed if isinstance(testbed, str) else testbed.name
        self.mesh = mesh

    @property
    def testbed(self):
        """The ``cluster.testbed.Testbed`` (attached on first use when given by name)."""
        if self._tb is None:
            from clusterlab.cluster.testbed import Testbed as NamespaceTestbed

            self._tb = NamespaceTestbed.attach(self._name)
        return self._tb

    @property
    def name(self) -> str:
        return f"testbed {self._name}"

    def __repr__(self) -> str:
        return f"Testbed({self._name!r})"

    def run(self, fn, n, *args, transport=None, timeout: float | None = 300.0, kwargs=None, **options) -> list:
        no_kwargs(kwargs, "launched")
        return self.testbed.run(fn, n, *args, config=transport, timeout=timeout, **options)

    def launch(self, argv, n, *, transport=None, timeout: float | None = None, **options):
        from clusterlab.cluster.local import RankHost, launch
        from clusterlab.net.netns import in_netns

        tb = self.testbed
        if self.mesh == "mpi":
            if has_knobs(transport):
                raise ConfigError("an MPI program's sockets are MPICH's: the testbed's TCP settings are the hosts' "
                                  "sysctls (set them when the testbed comes up), per-socket knobs cannot reach them")
            from clusterlab.cluster.program import mpi_program

            options.setdefault("program", mpi_program(argv) is not None)
            return launch_mpi_on_testbed(tb, argv, n, timeout=timeout, **options)
        from clusterlab.cluster.program import refuse_mpi_program

        refuse_mpi_program(argv, n)
        places = tb.placement(n)
        hosts = [RankHost(prefix=p["prefix"], bind=p["address"]) for p in places]
        config = tb.transport if transport is None else transport
        with in_netns(tb.switch.ns):
            return launch(argv, n, hosts=hosts, config=config, timeout=timeout,
                          rendezvous_host=tb.topo.switch_address, **options)


# Hydra starts its proxy on each host as `ssh -x HOST "PROXY" ARGS...`; this launcher enters the
# host's namespace instead, and dies with mpiexec as an ssh session would.
_NSEXEC = """#!/bin/sh
shift
host=$1; shift
exec setpriv --pdeathsig KILL ip netns exec {prefix}$host sh -c "exec $*"
"""

# What MPICH (the mpich wheel: UCX underneath) needs to move data over the emulated network: the
# hosts share one kernel, so without these hydra's ranks would talk through shared memory and
# cross-memory attach, bypassing the links and giving a wrong, too-fast time. NOLOCAL keeps MPICH
# off its shared-memory path, UCX_TLS keeps UCX on TCP, UCX_NET_DEVICES on the host's link.
MPICH_NETWORK_ENV = {"MPIR_CVAR_NOLOCAL": "1", "UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "eth0"}


def launch_mpi_on_testbed(tb, argv: list[str], n: int, *, timeout: float | None = None, env: dict | None = None,
                          mesh: str = "mpi", **options):
    """``mpiexec -n n argv`` with rank i in testbed ``tb``'s host i: mpiexec runs in the switch's
    namespace (where every host reaches it), hydra's proxies enter the hosts' namespaces instead
    of ssh, and ``MPICH_NETWORK_ENV`` keeps MPICH off shared memory, so every byte crosses the
    emulated links under the hosts' TCP settings. Returns the ``JobResult``."""
    from clusterlab.cluster.mpirun import launch_mpi
    from clusterlab.net.netns import in_netns

    if shutil.which("setpriv") is None:
        raise ConfigError("running MPI ranks in a testbed's hosts needs setpriv (util-linux)")
    places = tb.placement(n)
    prefix = tb.host(places[0]["host"]).ns[: -len(places[0]["host"])]
    e = dict(os.environ if env is None else env)
    e.update(MPICH_NETWORK_ENV)
    with tempfile.TemporaryDirectory(prefix="clusterlab-mpi-") as d:
        script = os.path.join(d, "nsexec.sh")
        with open(script, "w") as f:
            f.write(_NSEXEC.format(prefix=prefix))
        os.chmod(script, 0o755)
        hostfile = os.path.join(d, "hosts")
        with open(hostfile, "w") as f:
            f.write("".join(f"{p['host']}\n" for p in places))
        with in_netns(tb.switch.ns):
            return launch_mpi(argv, n, backend=mesh, hostfile=hostfile, env=e, timeout=timeout,
                              mpiexec_args=["-launcher", "ssh", "-launcher-exec", script, "-iface", "br0",
                                            *options.pop("mpiexec_args", ())],
                              rendezvous_host=tb.topo.switch_address, **options)


def current() -> Launched | None:
    """The job this process runs in, or None."""
    return Launched() if started_as_rank() else None


def from_options(backend: str = "auto", *, testbed: str | None = None, hostfile: str | None = None,
                 iface: str | None = None, rendezvous_host: str | None = None, mpiexec_args: str | None = None,
                 launcher: str | None = None, job_first: bool = False) -> Cluster:
    """The cluster the commands' options name: ``--backend`` (auto: the job this runs in, else
    local processes), ``--testbed NAME``, ``--hostfile``, ``--launcher local|mpiexec``...
    ``job_first``: inside a launched job, its ranks, whatever ``--backend`` says (but not with
    ``--testbed`` or ``--backend inproc``).

    >>> from_options("mpi", hostfile="hosts", iface="eth1")
    Mpirun(hostfile='hosts', mesh='mpi')
    >>> from_options("tcp", launcher="local", hostfile="hosts")
    Traceback (most recent call last):
    ...
    clusterlab.errors.ConfigError: --hostfile and --mpiexec-args need --launcher mpiexec
    """
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r} (one of {', '.join(BACKENDS)})")
    if job_first and testbed is None and backend != "inproc" and started_as_rank():
        return Launched()
    if testbed is not None:
        if hostfile or mpiexec_args or launcher == "local" and backend == "mpi":
            raise ConfigError("--testbed places the ranks itself: drop --hostfile/--mpiexec-args")
        if backend in ("inproc", "world"):
            raise ConfigError(f"--testbed runs processes in its hosts, not --backend {backend}")
        return Testbed(testbed, mesh="mpi" if backend == "mpi" else "tcp")
    if backend == "auto":
        backend = "world" if started_as_rank() else "tcp"
    if backend == "inproc":
        return InProcess()
    if backend == "world":
        return Launched()
    if launcher is None:
        launcher = "mpiexec" if backend == "mpi" or hostfile or mpiexec_args else "local"
    if launcher == "local":
        if backend == "mpi":
            raise ConfigError("--backend mpi needs --launcher mpiexec (MPI starts the ranks)")
        if hostfile or mpiexec_args:
            raise ConfigError("--hostfile and --mpiexec-args need --launcher mpiexec")
        return Local(iface=iface, rendezvous_host=rendezvous_host or "127.0.0.1")
    if launcher != "mpiexec":
        raise ConfigError(f"unknown launcher {launcher!r} (local or mpiexec)")
    return Mpirun(hostfile=hostfile, mesh=backend, iface=iface, rendezvous_host=rendezvous_host,
                  mpiexec_args=mpiexec_args or ())
