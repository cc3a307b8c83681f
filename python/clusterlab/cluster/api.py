"""Where ranks run, as one protocol: a :class:`Cluster` runs a Python rank function on n ranks
(``run``) or starts a program as n ranks (``launch``). Every layer above takes a Cluster; the
choice between threads, loopback processes, mpiexec, a namespace testbed or the job this process
is already in is made here (``from_options`` maps the command-line flags to one, ``rank_engine`` a
workload's ``engine`` name) and nowhere else (``tests/test_backend_choices.py`` keeps it so).

============== ===============================================================================
``InProcess``   ranks are threads of this process (``comm.inproc``): tests algorithms, not networks
``Local``       processes on this machine joined by the TCP mesh over loopback (``cluster.local``)
``Mpirun``      processes started by ``mpiexec`` (MPICH's hydra), on this machine or the hosts of
                a hostfile; ``mesh="mpi"`` (MPI's own transport) or ``"tcp"`` (clusterlab's mesh)
``Testbed``     rank i in host i of a namespace testbed (``cluster.testbed``): the emulated network
``Simulated``   the same topology in SimGrid's flow model (``cluster.simulated``): models of the
                bench's broadcast and ping-pong, to 1,000 hosts, no packet loss
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
``multicast`` says whether the ranks can join an IP multicast group (the point-to-multipoint
algorithms): threads and a testbed's hosts can, loopback processes and mpiexec's cannot.

``run_dir=`` (``Local``, ``Mpirun``, ``Testbed``; with ``monitor=``, ``monitor_interval=``) records
either call as ``clusterlab run --run-dir`` does (``cluster.record``): ``meta.json``, the monitor's
samples, and each rank's wall time split into compute, transfer and RTO wait; ``clusterlab
report`` and ``clusterlab diagnose`` read the directory.

>>> from clusterlab.cluster.local import _example_sum
>>> InProcess().run(_example_sum, 3), Local().run(_example_sum, 2)
([3, 3, 3], [2, 2])
>>> from_options("inproc").name, from_options("tcp").name, from_options("mpi").name
('inproc', 'tcp', 'mpi')
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import shlex
import shutil
import tempfile
from typing import Protocol, runtime_checkable

from clusterlab.cluster.mpirun import MPICH_TRANSPORTS, mpich_env
from clusterlab.comm.places import InProcess, Launched, OnThisMachine, has_knobs, no_kwargs, started_as_rank
from clusterlab.errors import ConfigError
from clusterlab.rendezvous import contract

BACKENDS = ("auto", "tcp", "mpi", "inproc", "world")  # the values of the commands' --backend
MESHES = contract.MESHES  # what connects processes: clusterlab's TCP mesh, or MPI's own transport
LAUNCHERS = ("local", "mpiexec")  # the values of `clusterlab run --launcher`: what starts the processes

__all__ = ["BACKENDS", "LAUNCHERS", "MESHES", "Cluster", "InProcess", "Launched", "Local", "Mpirun", "RankEngine", "Testbed",
           "current", "from_options", "rank_engine", "started_as_rank"]


@runtime_checkable
class Cluster(Protocol):
    """Where ranks run (see the module's doc)."""

    name: str
    size: int | None
    multicast: bool  # its ranks can join an IP multicast group (the point-to-multipoint algorithms)

    def run(self, fn, n: int | None, *args, transport=None, timeout: float | None = 300.0,
            kwargs: dict | None = None, **options) -> list: ...

    def launch(self, argv: list[str], n: int, *, transport=None, timeout: float | None = None, **options): ...


def _records(method):
    """A cluster's ``run``/``launch`` that also takes ``run_dir=`` (with ``monitor=True`` and
    ``monitor_interval=0.1``): the call recorded there by ``cluster.record`` (meta.json, the
    monitor's samples, each rank's time split), as ``clusterlab run --run-dir`` does."""

    @functools.wraps(method)
    def call(self, what, n, *args, run_dir=None, monitor=None, monitor_interval=None, **options):
        if run_dir is None:
            if monitor is not None or monitor_interval is not None:
                raise ConfigError("monitor and monitor_interval go with run_dir= (where the samples are kept)")
            return method(self, what, n, *args, **options)
        from clusterlab.cluster import record

        return getattr(record, method.__name__)(self, what, n, *args, run_dir=run_dir,
                                                monitor=True if monitor is None else monitor,
                                                monitor_interval=0.1 if monitor_interval is None else monitor_interval,
                                                **options)

    return call


class Local(OnThisMachine):
    """Processes on this machine, joined by clusterlab's TCP mesh. ``iface``: the interface (or
    address) every rank's mesh listens on (default loopback); ``rendezvous_host``: where the
    launcher listens for its ranks; ``ranks``: how many a study runs by default; ``prefix``: a
    command some ranks start under, by rank (``{1: ["taskset", "-c", "1"]}``; the others as
    usual).

    >>> Local(prefix={1: ["nice"]})
    Local(prefix={1: ['nice']})
    >>> Local(prefix={"1": "nice"})
    Traceback (most recent call last):
    ...
    clusterlab.errors.ConfigError: prefix must map ranks (whole numbers >= 0) to commands (lists of strings), got {'1': 'nice'}
    """

    name = "tcp"
    kind = "loopback"
    network = "loopback on one machine: no link rate, no switch; TCP settings per socket"
    size = None
    multicast = False  # loopback carries no multicast group

    def __init__(self, iface: str | None = None, rendezvous_host: str = "127.0.0.1", *, ranks: int | None = None,
                 prefix: dict[int, list[str]] | None = None):
        prefix = dict(prefix or {})
        if not all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 and isinstance(cmd, (list, tuple)) and cmd
                   and all(isinstance(a, str) for a in cmd) for r, cmd in prefix.items()):
            raise ConfigError(f"prefix must map ranks (whole numbers >= 0) to commands (lists of strings), got {prefix!r}")
        self.iface, self.rendezvous_host, self.ranks = iface, rendezvous_host, ranks
        self.prefix = {r: list(cmd) for r, cmd in prefix.items()}

    def __repr__(self) -> str:
        given = [f"iface={self.iface!r}"] if self.iface else []
        if self.prefix:
            given.append(f"prefix={self.prefix!r}")
        return self._ranks_repr(", ".join(given))

    def _hosts(self, n: int):
        if not self.iface and not self.prefix:
            return None
        if self.prefix and max(self.prefix) >= n:
            raise ConfigError(f"prefix names rank {max(self.prefix)}; the job has ranks 0..{n - 1}")
        from clusterlab.cluster.local import RankHost
        from clusterlab.rendezvous.address import choose

        bind = choose(iface=self.iface) if self.iface else "127.0.0.1"
        return [RankHost(prefix=list(self.prefix.get(r, ())), bind=bind) for r in range(n)]

    @_records
    def run(self, fn, n, *args, transport=None, timeout: float | None = 300.0, kwargs=None, **options) -> list:
        from clusterlab.cluster import local

        no_kwargs(kwargs, "launched")
        options.setdefault("rendezvous_host", self.rendezvous_host)
        return local.run(fn, n, *args, config=transport, timeout=timeout, hosts=self._hosts(n), **options)

    @_records
    def launch(self, argv, n, *, transport=None, timeout: float | None = None, **options):
        from clusterlab.cluster import local
        from clusterlab.cluster.program import refuse_mpi_program

        refuse_mpi_program(argv, n)
        options.setdefault("rendezvous_host", self.rendezvous_host)
        return local.launch(argv, n, config=transport, timeout=timeout, hosts=self._hosts(n), **options)


class Mpirun(OnThisMachine):
    """Processes started by ``mpiexec``: on this machine, or on the hosts of ``hostfile``
    (``host[:slots]`` per line). ``mesh``: ``mpi`` (MPI's own transport, ``comm.mpi``) or
    ``tcp`` (clusterlab's mesh between the processes mpiexec started). ``iface``: the interface
    every rank's mesh listens on; ``rendezvous_host``: where the launcher listens;
    ``mpiexec_args``: extra arguments (a list, or one string split as a shell would);
    ``mpich``: how MPICH moves data between ranks of one machine (``tcp``: TCP sockets;
    ``ucx_default``: UCX's shared memory; ``shm``: MPICH's defaults; None: as the environment
    says; ``cluster.mpirun.MPICH_TRANSPORTS``); ``ranks``: how many a study runs by default.
    ``launch``/``run`` also take ``launch_mpi``'s ``env=``, ``stdout=``, ``cwd=`` (the ranks'
    working directory) and ``wrap=`` (a command mpiexec runs under, e.g. a tracer)."""

    kind = "mpi"
    size = None
    multicast = False

    def __init__(self, hostfile: str | None = None, mesh: str = "mpi", iface: str | None = None,
                 rendezvous_host: str | None = None, mpiexec_args=(), mpiexec: str | None = None, *,
                 ranks: int | None = None, mpich: str | None = None):
        if mesh not in MESHES:
            raise ConfigError(f"mesh must be mpi or tcp, got {mesh!r}")
        if mpich is not None:
            mpich_env(mpich, {})  # a name it knows, refused now rather than at launch
        self.mpich = mpich
        self.hostfile, self.mesh, self.iface, self.rendezvous_host = hostfile, mesh, iface, rendezvous_host
        self.mpiexec_args = shlex.split(mpiexec_args) if isinstance(mpiexec_args, str) else list(mpiexec_args)
        self.mpiexec = mpiexec
        self.ranks = ranks

    @property
    def name(self) -> str:
        return "mpi" if self.mesh == "mpi" else "tcp over mpiexec"

    @property
    def network(self) -> str:
        """What connects the ranks, in a report's words."""
        how = "TCP settings per socket" if self.mesh == "tcp" else "MPI's own transport"
        if self.hostfile is None:
            return f"loopback on one machine: no link rate, no switch; {how}"
        return f"the network of the hosts in {self.hostfile} (nothing emulated); {how}"

    def __repr__(self) -> str:
        mpich = f", mpich={self.mpich!r}" if self.mpich is not None else ""
        return self._ranks_repr(f"hostfile={self.hostfile!r}, mesh={self.mesh!r}{mpich}")

    def _options(self, options: dict) -> dict:
        """``launch_mpi``'s keywords: this cluster's, then the call's (a call's ``mpiexec_args``
        follow this cluster's rather than replace them)."""
        opts = dict(backend=self.mesh, hostfile=self.hostfile, iface=self.iface, rendezvous_host=self.rendezvous_host,
                    mpiexec=self.mpiexec, mpich=self.mpich)
        opts.update(options)
        opts["mpiexec_args"] = [*self.mpiexec_args, *options.get("mpiexec_args", ())]
        return opts

    @_records
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

    @_records
    def launch(self, argv, n, *, transport=None, timeout: float | None = None, **options):
        """``argv`` as n ranks under mpiexec; an MPI program that knows nothing of clusterlab
        (``program.mpi_program``) runs under the wrapper that names a rank that died."""
        from clusterlab.cluster.program import mpi_program

        # under mpiexec an MPI program gets its real world whichever mesh clusterlab's ranks use
        options.setdefault("program", mpi_program(argv) is not None)
        return self._launch(argv, n, config=transport, timeout=timeout, **options)


# Settings a testbed applies only on the sockets clusterlab opens (every other one is a host sysctl).
SOCKET_ONLY = ("sndbuf", "rcvbuf", "nodelay")


class Testbed:
    """Rank i in host i of a namespace testbed. ``where``: a testbed that is up, by name
    (``Testbed("lab")``) or as the ``cluster.testbed.TestbedNetwork`` this process built
    (``Testbed(net)``); or a ``StarTopo`` (``Testbed(StarTopo(hosts=8, rate="1Gbit"))``), which
    each ``run``/``launch`` brings up for the call (with ``transport`` as the hosts' settings)
    and removes after. A study's ``cluster=`` is the same object.

    The ranks get the testbed's TCP settings (the hosts' sysctls, and its per-socket knobs
    unless ``transport`` names others). ``mesh="mpi"``: ``launch`` starts a program, and ``run``
    a rank function, under mpiexec with its ranks in the hosts (``launch_mpi_on_testbed``); the
    testbed's congestion control becomes each host's default, per-socket knobs are refused.

    With a ``StarTopo``: ``ranks`` is how many ranks run by default (one per host when None);
    ``dilation`` None runs at the topology's own dilation, a number at that one, ``"auto"`` at
    the one closest to the topology's that makes the transport's RTO settings expressible
    (``cluster.testbed.dilation.pick_dilation``).

    >>> from clusterlab.cluster.testbed import StarTopo
    >>> t = Testbed(StarTopo(hosts=16, rate="155.52Mbit", switch="atm", buffer="1000cells"), dilation="auto")
    >>> t, t.n_ranks(), t.topo.mtu
    (Testbed(StarTopo(hosts=16, rate='155.52Mbit', buffer='1000cells', switch='atm'), dilation='auto'), 16, 9180)
    >>> t.with_settings(hosts=4, switch="bridge").topo.mtu   # an MTU not given is the switch's own
    9000
    >>> t.with_settings(hosts=8, sites="4+3")
    Traceback (most recent call last):
    ...
    clusterlab.errors.ConfigError: sites '4+3' must add up to hosts=8 (e.g. sites='4+4')
    """

    size = None
    kind = "testbed"  # what a study calls this place (``experiments.spec.kind_of``)
    multicast = True  # the hosts' links and switch carry IP multicast
    socket_only = SOCKET_ONLY  # what MPI's sockets (MPICH's own) never get
    __test__ = False  # not a pytest class
    # The topology's settings a study varies by name (StarTopo's own fields; its dilation is
    # the study's ``prefer_dilation``), then the cluster's own.
    TOPO_SETTINGS = ("hosts", "rate", "buffer", "host_queue", "mtu", "sites", "wan_rate", "wan_delay", "wan_queue",
                     "wan_shared", "wan_cells", "wan_discard", "wan_epd_threshold", "switch", "discard", "epd_threshold", "host_rates", "loss",
                     "loss_seed")
    SETTINGS = (*TOPO_SETTINGS[:5], "ranks", "dilation", "prefer_dilation", *TOPO_SETTINGS[5:])

    def __init__(self, where=None, mesh: str = "tcp", *, ranks: int | None = None, dilation=None,
                 hosts_follow_ranks: bool = False, **topo_fields):
        from clusterlab.cluster.testbed.topo import StarTopo

        if topo_fields or where is None:  # studies once declared the topology's fields here
            given = ", ".join(f"{k}={v!r}" for k, v in topo_fields.items())
            raise ConfigError(f"Testbed({given}): the topology is a StarTopo of its own: "
                              f"Testbed(StarTopo({given})) (from clusterlab.cluster.testbed)")
        if mesh not in MESHES:
            raise ConfigError(f"mesh must be tcp or mpi, got {mesh!r}")
        self.mesh = mesh
        self.topo = where if isinstance(where, StarTopo) else None
        self._tb = None if isinstance(where, (str, StarTopo)) else where
        self._name = where if isinstance(where, str) else None if self.topo is not None else where.name
        if self.topo is None and (ranks is not None or dilation is not None or hosts_follow_ranks):
            raise ConfigError("ranks and dilation go with a StarTopo (a testbed that is up has its own)")
        if ranks is not None and (isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1):
            raise ConfigError(f"ranks must be a whole number >= 1, got {ranks!r}")
        if not (dilation is None or dilation == "auto"
                or (isinstance(dilation, (int, float)) and not isinstance(dilation, bool) and 1 <= dilation <= 1e6)):
            raise ConfigError(f"dilation must be 'auto' or a number 1..1e6, got {dilation!r}")
        self.ranks, self.dilation, self.hosts_follow_ranks = ranks, dilation, hosts_follow_ranks
        if self.topo is not None and self.ranks is not None and self.ranks > self.n_hosts():
            raise ConfigError(f"ranks must be 1..hosts ({self.n_hosts()}), got {self.ranks}")

    @property
    def testbed(self):
        """The ``cluster.testbed.TestbedNetwork`` (attached on first use when given by name)."""
        if self._tb is None:
            if self.topo is not None:
                raise ConfigError("this Testbed is a topology: run/launch bring it up for the call")
            from clusterlab.cluster.testbed import TestbedNetwork

            self._tb = TestbedNetwork.attach(self._name)
        return self._tb

    @property
    def name(self) -> str:
        return f"testbed {self._name}" if self.topo is None else "testbed"

    def __repr__(self) -> str:
        if self.topo is None:
            return f"Testbed({self._name!r})" + (", mesh='mpi'" if self.mesh == "mpi" else "")
        given = {f.name: getattr(self.topo, f.name) for f in dataclasses.fields(self.topo) if f.init}
        defaults = {f.name: f.default for f in dataclasses.fields(self.topo) if f.init}
        shown = ", ".join(f"{k}={v!r}" for k, v in given.items()
                          if k in ("hosts", "rate", "switch") or (v != defaults[k] and k != "mtu"))
        extra = "".join(f", {k}={v!r}" for k, v in (("mesh", self.mesh if self.mesh != "tcp" else None),
                                                   ("ranks", self.ranks), ("dilation", self.dilation)) if v is not None)
        return f"Testbed(StarTopo({shown}){extra})"

    # --- a topology's settings by name (what a study varies) --------------------------------
    def n_hosts(self) -> int:
        return self.topo.hosts if self.topo is not None else len(self.testbed.hosts)

    def n_ranks(self) -> int:
        return self.ranks if self.ranks is not None else self.n_hosts()

    def settings(self) -> dict:
        """Every setting by name (``SETTINGS``): the topology's fields, ``ranks``, ``dilation``
        (None: the topology's own) and ``prefer_dilation`` (the topology's dilation)."""
        t = self._need_topo()
        d = {k: getattr(t, k) for k in self.TOPO_SETTINGS}
        if t.mtu_is_default:  # the switch's own (9000 bridge, 9180 atm)
            d["mtu"] = None
        if self.hosts_follow_ranks:
            d["hosts"] = None
        d.update(ranks=self.ranks, dilation=self.dilation, prefer_dilation=float(t.dilation))
        return {k: d[k] for k in self.SETTINGS}

    def with_settings(self, **values) -> Testbed:
        """A copy with settings changed by name; ``hosts=None``: one host per rank (at least 2).
        The topology checks the result. ``mtu=None``: the switch's own; a topology whose MTU
        was not given keeps taking its switch's own."""
        t = self._need_topo()
        unknown = set(values) - set(self.SETTINGS)
        if unknown:
            raise ConfigError(f"a testbed has no setting {sorted(unknown)} (has {', '.join(self.SETTINGS)})")
        topo = {k: v for k, v in values.items() if k in self.TOPO_SETTINGS}
        if t.mtu_is_default and "mtu" not in topo:
            topo["mtu"] = None
        if "prefer_dilation" in values:
            topo["dilation"] = float(values["prefer_dilation"])
        ranks = values.get("ranks", self.ranks)
        follow = values["hosts"] is None if "hosts" in values else self.hosts_follow_ranks
        if follow:
            topo["hosts"] = max(2, ranks or 2)
        return Testbed(dataclasses.replace(t, **topo), self.mesh, ranks=ranks,
                       dilation=values.get("dilation", self.dilation), hosts_follow_ranks=follow)

    def at_dilation(self, k: float) -> Testbed:
        """The same testbed at dilation ``k`` (rates / k, timers x k)."""
        return Testbed(dataclasses.replace(self._need_topo(), dilation=float(k)), self.mesh, ranks=self.ranks,
                       dilation=float(k))

    def resolve_dilation(self, transport=None) -> tuple[float, str]:
        """The dilation this testbed runs ``transport`` at, and why (see the class's doc)."""
        from clusterlab.cluster.testbed.dilation import pick_dilation
        from clusterlab.net.transport_config import TransportConfig

        t = self._need_topo()
        requested = float(t.dilation) if self.dilation is None else self.dilation
        return pick_dilation(transport or TransportConfig(), requested, float(t.dilation))

    def switch_description(self) -> str:
        """The switch in words (a report's "What was emulated")."""
        t = self._need_topo()
        if t.switch == "bridge":
            own = f" (at their own rate: {t.host_rates.replace(' ', ', ')})" if t.host_rates else ""
            return (f"a Linux bridge switch, links shaped by tbf at {t.rate}{own} with {t.buffer} output buffer "
                    f"per switch port (whole packets dropped when full), MTU {t.mtu}")
        policy = {"none": "plain UBR, no discard policy", "ppd": "partial packet discard",
                  "epd": f"early packet discard above {t.epd_threshold_cells} cells"}[t.discard]
        lossy = (f"; lossy links losing cells in both directions ({t.loss.replace(' ', ', ')}, seed {t.loss_seed})"
                 if t.loss else "")
        return (f"an ATM cell switch (clusterlab-atm): AAL5 cells of 53 bytes at {t.cell_rate_bps / 1e6:g} Mbit/s "
                f"per link, {t.buffer_cells}-cell output buffer per port, cells lost when it is full ({policy}), "
                f"IP over ATM with MTU {t.mtu}{lossy}")

    def wan_description(self) -> str | None:
        """The WAN line in words (None with one switch)."""
        t = self._need_topo()
        if t.sites is None:
            return None
        sites = "+".join(map(str, t.site_sizes))
        rate = f"{t.wan_rate} shared by both directions" if t.wan_shared else f"{t.wan_rate} per direction"
        if t.wan_cells:
            return (f"two sites ({sites} hosts) joined by a WAN line carrying AAL5 cells (clusterlab-atm's cell "
                    f"line): {t.wan_rate} of 53-byte cells {rate.split(' ', 1)[1]} "
                    f"({t.wan_ip_rate_bps() / 1e6:.1f} Mbit/s of IP at MTU {t.mtu}), {t.wan_delay} one way, "
                    f"{t.wan_queue_cells}-cell queue, a frame lost whole when one of its cells finds it full, "
                    f"discard {t.wan_discard}")
        return (f"two sites ({sites} hosts) joined by a WAN delay line (clusterlab-wan): {rate}, "
                f"{t.wan_delay} one way, {t.wan_queue} drop-tail queue")

    def _need_topo(self):
        if self.topo is None:
            return self.testbed.topo
        return self.topo

    # --- running -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def _network(self, transport):
        """The network to run on: the one given, or the topology brought up for this call
        (at its dilation; ``transport`` becomes the hosts' settings)."""
        if self.topo is None:
            yield self.testbed, transport
            return
        from clusterlab.cluster.testbed import TestbedNetwork
        from clusterlab.net.transport_config import TransportConfig

        default = TransportConfig()
        socket_only = [k for k in SOCKET_ONLY if transport is not None and getattr(transport, k) != getattr(default, k)]
        if self.mesh == "mpi" and socket_only:
            raise ConfigError(f"{', '.join(socket_only)}: MPI's sockets are MPICH's, per-socket knobs cannot reach "
                              "them (the hosts' sysctls can: rto_*, congestion, rmem/wmem...)")

        k, _ = self.resolve_dilation(transport)
        with TestbedNetwork(dataclasses.replace(self.topo, dilation=k), transport=transport) as net:
            yield net, None

    @_records
    def run(self, fn, n, *args, transport=None, timeout: float | None = 300.0, kwargs=None, **options) -> list:
        """``fn(comm, *args)`` with rank i in host i; ``mesh="mpi"``: the ranks started by
        mpiexec in the hosts and joined by MPI (``launch_mpi_on_testbed``), so their traffic is
        MPICH's sockets under the hosts' sysctls."""
        no_kwargs(kwargs, "launched")
        with self._network(transport) as (net, config):
            n = n or self._default_n(net)
            if self.mesh == "mpi":
                if has_knobs(config):
                    raise ConfigError("MPI's sockets are MPICH's: the testbed's TCP settings are the hosts' sysctls "
                                      "(set them when the testbed comes up), per-socket knobs cannot reach them")
                from clusterlab.cluster import local

                return local.run(fn, n, *args, timeout=timeout, **options,
                                 launcher=lambda argv, k, **o: launch_mpi_on_testbed(net, argv, k, **o))
            return net.run(fn, n, *args, config=config, timeout=timeout, **options)

    def _default_n(self, net) -> int:
        """A topology's ``ranks`` if given, else one rank per compute host (a storage host is none)."""
        return self.ranks if self.ranks is not None and self.topo is not None else len(net.placement())

    @_records
    def launch(self, argv, n, *, transport=None, timeout: float | None = None, **options):
        from clusterlab.cluster.local import launch

        with self._network(transport) as (tb, transport):
            n = n or self._default_n(tb)
            if self.mesh == "mpi":
                if has_knobs(transport):  # a topology brought up for the call took them as its hosts' settings
                    raise ConfigError("an MPI program's sockets are MPICH's: the testbed's TCP settings are the "
                                      "hosts' sysctls (set them when the testbed comes up), per-socket knobs cannot "
                                      "reach them")
                from clusterlab.cluster.program import mpi_program

                options.setdefault("program", mpi_program(argv) is not None)
                return launch_mpi_on_testbed(tb, argv, n, timeout=timeout, **options)
            from clusterlab.cluster.program import refuse_mpi_program

            refuse_mpi_program(argv, n)
            with tb.from_the_switch(n, transport, options.pop("env", None)) as (hosts, config, where, env):
                return launch(argv, n, hosts=hosts, config=config, timeout=timeout, rendezvous_host=where, env=env,
                              **options)



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
# off its shared-memory path, UCX_TLS keeps UCX on TCP (``MPICH_TRANSPORTS["tcp"]``),
# UCX_NET_DEVICES on the host's link.
MPICH_NETWORK_ENV = {**MPICH_TRANSPORTS["tcp"], "UCX_NET_DEVICES": "eth0"}


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
    set_default_congestion(tb, [p["host"] for p in places])
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


def mpi_congestion_why_not(congestion: str | None) -> str | None:
    """Why MPI ranks on a testbed cannot run under ``congestion``, or None. MPICH opens its own
    sockets, so the testbed's congestion control reaches them only as each host's default, and
    the kernel lets a namespace other than the machine's own default only to an algorithm in
    ``net.ipv4.tcp_allowed_congestion_control`` (EPERM otherwise)."""
    if congestion is None:
        return None
    with open("/proc/sys/net/ipv4/tcp_allowed_congestion_control") as f:
        allowed = f.read().split()
    if congestion not in allowed:
        return (f"congestion {congestion!r} cannot reach MPI ranks on a testbed: MPICH's sockets take the host's "
                f"default, and the kernel lets a namespace default only to one of "
                f"net.ipv4.tcp_allowed_congestion_control ({' '.join(allowed)})")
    return None


@dataclasses.dataclass(frozen=True)
class RankEngine:
    """How ranks run for one ``engine`` name (``rank_engine``): clusterlab's TCP mesh moving
    their messages with one of its socket engines, or MPI's own transport under mpiexec."""

    name: str
    mesh: str  # one of MESHES

    def on(self, net) -> Testbed:
        """The cluster that runs ranks with this engine in the hosts of testbed ``net`` (a
        ``TestbedNetwork`` that is up, or a testbed's name)."""
        return Testbed(net, mesh=self.mesh)

    def env(self, base: dict | None = None) -> dict | None:
        """The environment the ranks start with: ``base`` (default ``os.environ``) naming the
        TCP mesh's socket engine (``comm.tcp.engine.ENV``); None for MPI (the launcher's own)."""
        from clusterlab.comm.tcp.engine import ENV

        if self.mesh == "mpi":
            return None
        return {**(os.environ if base is None else base), ENV: self.name}

    def why_not(self, cluster, transport) -> str | None:
        """Why ranks with this engine cannot run on ``cluster`` with ``transport``, or None: MPI
        ranks on a testbed take its congestion control only as each host's default
        (``mpi_congestion_why_not``)."""
        if self.mesh == "mpi" and isinstance(cluster, Testbed) and transport is not None:
            return mpi_congestion_why_not(transport.congestion)
        return None


def rank_engine(name: str) -> RankEngine:
    """What moves ranks' messages, by name (a workload's ``engine``): one of the TCP mesh's socket
    engines (``comm.tcp.engine.ENGINES``: ``rust``, ``python``) or ``mpi`` (MPI's own
    transport). The one place an engine name becomes a way of running ranks.

    >>> rank_engine("python"), rank_engine("mpi").mesh
    (RankEngine(name='python', mesh='tcp'), 'mpi')
    >>> rank_engine("ucx")
    Traceback (most recent call last):
    ...
    clusterlab.errors.ConfigError: engine 'ucx': one of mpi, python, rust (the TCP mesh's engines, or MPI)
    """
    from clusterlab.comm.tcp.engine import ENGINES

    if name == "mpi":
        return RankEngine(name, "mpi")
    if isinstance(name, str) and name in ENGINES:
        return RankEngine(name, "tcp")
    raise ConfigError(f"engine {name!r}: one of {', '.join(sorted((*ENGINES, 'mpi')))} (the TCP mesh's engines, or MPI)")


def set_default_congestion(tb, hosts: list[str]) -> None:
    """Each of ``hosts``' default congestion control set to the testbed's (MPI ranks' sockets
    are not clusterlab's: this is how its setting reaches them)."""
    from clusterlab.net.netns import in_netns

    cc = tb.transport.congestion
    why = mpi_congestion_why_not(cc)
    if why:
        raise ConfigError(why)
    if cc is None:
        return
    for h in hosts:
        with in_netns(tb.host(h).ns), open("/proc/sys/net/ipv4/tcp_congestion_control", "w") as f:
            f.write(cc)


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
    if launcher not in LAUNCHERS:
        raise ConfigError(f"unknown launcher {launcher!r} ({' or '.join(LAUNCHERS)})")
    return Mpirun(hostfile=hostfile, mesh=backend, iface=iface, rendezvous_host=rendezvous_host,
                  mpiexec_args=mpiexec_args or ())
