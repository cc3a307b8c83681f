"""Each kind of study cluster, answering for itself what a study asks of it: the one place the
study layer tells a testbed from a simulated cluster from ranks on this machine.

A study's ``cluster=`` is a ``clusterlab.cluster`` object; ``of(cluster)`` is its ``StudyKind``
here (``KINDS``, by the cluster's class). The spec, the runner, ``clusters`` and the report ask
it, and never branch on ``cluster.kind`` themselves (``tests/test_cluster_kinds.py`` keeps it so):

- ``place``: where the point's ``TransportConfig`` applies (``socket`` options, the ``testbed``'s
  per-host sysctls; None: there is no TCP to set); ``resolve``: the point's dilation, and its
  transport settings checked against what the cluster can take (a simulated cluster's loss model
  takes its RTO bounds, in-process ranks take nothing);
- ``check``: what is built and checked before a study runs (topology, sysctls, launcher capacity);
- ``open``: the cluster brought up for a point (a ``clusters.Session``), and what it applied;
- ``monitored``, ``per_host_counters``, ``monitor``: what the monitor watches;
- ``network_words``/``emulated``: what the run emulates rather than has, in the report's words;
- ``swappable``/``from_topo``: a value of the grid axis ``cluster`` (the same ``StarTopo`` on
  the testbed or simulated);
- ``dilates``: ``--auto-dilation`` reruns its points;
- ``caption_network``/``ranks_words``: how a report's captions and set-up say where it ran (the
  report reads a run's kind by name: ``by_name``).

A new kind of cluster is a class in ``clusterlab.cluster`` and a ``StudyKind`` in ``KINDS``.
The point helpers the testbed's kind uses (``testbed_sysctls``, ``kernel_accepts``,
``wan_line_account``...) live here too, so that this module imports nothing of the study layer
(``clusters`` imports it, and re-exports them).

>>> from clusterlab.cluster import Local, Simulated, Testbed
>>> from clusterlab.cluster.testbed import StarTopo
>>> [(k.name, k.place, k.swappable) for k in KINDS]
[('testbed', 'testbed', True), ('simulated', 'socket', True), ('loopback', 'socket', False), ('mpi', 'socket', False), ('inprocess', None, False)]
>>> of(Local()).name, of(Testbed(StarTopo(hosts=2))).dilates, of(Simulated(StarTopo(hosts=2))).monitored
('loopback', True, False)
"""

from __future__ import annotations

import contextlib
import os
import secrets

from clusterlab.cluster import InProcess, Local, Mpirun, Simulated, Testbed
from clusterlab.errors import ConfigError
from clusterlab.net.transport_config import STACK_SYSCTLS

NO_DILATION = "no dilation (not a testbed)"

# The loss-recovery sysctls a TCP stack sets (and tcp_window_scaling), as the point's meta shows them.
STACK_SYSCTL_NAMES = {p.split("/")[-1] for p, _, _ in STACK_SYSCTLS.values()} | {"tcp_window_scaling"}

MIN_SYSCTL = "net/ipv4/tcp_rto_min_us"
MAX_SYSCTL = "net/ipv4/tcp_rto_max_ms"



def host_names(point) -> list[str]:
    """The testbed's compute hosts for this point (``StarTopo.host_names``)."""
    return star_topo(point).host_names()


def star_topo(point):
    """The testbed topology of a point (checked by ``StarTopo`` itself)."""
    return point.cluster.topo  # a point's testbed is at its dilation already


def transport_config(point, place: str):
    """The point's transport settings at ``place`` (``socket`` or ``testbed``)."""
    return point.tcp.with_place(place)


def testbed_sysctls(point) -> dict[str, dict]:
    """Every host's sysctls for this point, exactly as the testbed writes them
    (``cluster.testbed.sysctl.host_sysctls``)."""
    from clusterlab.cluster.testbed.sysctl import host_sysctls

    return host_sysctls(transport_config(point, "testbed"), host_names(point), float(point.dilation))


def kernel_accepts(sysctls: dict[str, dict]) -> None:
    """Write every distinct (sysctl, value) into one scratch namespace and read it back."""
    from clusterlab.cluster.testbed import require_root
    from clusterlab.net.netns import in_netns

    require_root()
    import subprocess

    ns = f"clab-k{secrets.token_hex(3)}-x"  # clab-* : `testbed clean` would find it after a crash
    pairs = sorted({(k, str(v)) for d in sysctls.values() for k, v in d.items()})
    subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True, timeout=30)
    try:
        with in_netns(ns):
            for key, value in pairs:
                path = os.path.join("/proc/sys", key)
                try:
                    with open(path, "w") as f:
                        f.write(value)
                    with open(path) as f:
                        got = f.read().split()
                except OSError as e:
                    raise ConfigError(f"the kernel refuses {key.replace('/', '.')} = {value}: {e.strerror}") from None
                if got != value.split():
                    raise ConfigError(f"the kernel changed {key.replace('/', '.')} = {value} into {' '.join(got)}")
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


def wan_line_account(t: dict) -> dict:
    """What a point records of its WAN line's totals (per direction, 0: site A to B): frames
    offered, delivered and lost, how late departures were; a line of cells (``wan_cells``) adds
    its cells offered, sent, dropped and wasted (cells of lost frames that used the line).

    >>> wan_line_account({"packets": [10, 4], "delivered": [8, 4], "drops": [2, 0], "send_errors": [0, 0],
    ...                   "late_mean_ns": [1500.0, -200.0], "late_max_ns": [9000, 100], "frames_lost": [2, 0],
    ...                   "cells_in": [320, 8], "cells_out": [300, 8], "cells_dropped": [20, 0],
    ...                   "cells_wasted": [44, 0], "max_queue_cells": [100, 2]})["cells_wasted"]
    [44, 0]
    >>> sorted(wan_line_account({"packets": [1, 0], "delivered": [1, 0], "drops": [0, 0], "send_errors": [0, 0],
    ...                          "late_mean_ns": [0.0, 0.0], "late_max_ns": [0, 0]}))
    ['frames', 'frames_delivered', 'frames_lost', 'late_max_us', 'late_mean_us', 'send_errors']
    """
    out = {"frames": list(t["packets"]), "frames_delivered": list(t["delivered"]), "frames_lost": list(t["drops"]),
           "send_errors": list(t["send_errors"]), "late_mean_us": [round(v / 1e3, 1) for v in t["late_mean_ns"]],
           "late_max_us": [round(v / 1e3, 1) for v in t["late_max_ns"]]}
    for k in ("cells_in", "cells_out", "cells_dropped", "cells_wasted", "max_queue_cells"):
        if k in t:
            out[k] = list(t[k])
    return out




class StudyKind:
    """A kind of study cluster (see the module's doc): the defaults are those of ranks on this
    machine that a launcher starts (``Local``, ``Mpirun``)."""

    cls: type = object
    spelling = ""  # how a study writes it (the message refusing any other cluster)
    place: str | None = "socket"
    swappable = False  # a value of the grid axis ``cluster`` (``from_topo``)
    dilates = False  # auto-dilation reruns its points at other dilations
    monitored = True  # the monitor watches this machine while the ranks run
    per_host_counters = False  # each rank has its own TCP counters (its own namespace)
    # A broadcast's buffers are checked against this machine's free memory before a point runs
    # (not for in-process ranks, as before; a simulated broadcast holds no buffers).
    checks_memory = True
    runs_programs = True  # its ranks are processes running the workload's code (a simulation only replays)
    caption_network = False  # a figure's caption spells out its network (hosts, links, buffer, switch, dilation)

    @property
    def ranks_words(self) -> str:
        """Its ranks in a figure's caption ("4 MPI ranks"), when it does not spell out a network."""
        return f"{self.name} ranks"

    @property
    def name(self) -> str:
        """The place in a study's rows and meta (the cluster class's own ``kind``)."""
        return self.cls.kind

    def accept(self, c, study: str):
        """``c`` as a study's ``cluster=`` (``ConfigError`` naming the study when it cannot be one)."""
        return c

    def resolve(self, cluster, tcp, workload) -> tuple:
        """(the cluster a point runs on, its dilation, why): ``tcp`` checked against what this
        cluster can take (socket options: refused here with the kernel's range)."""
        cluster.check()
        tcp.with_place("socket")
        return cluster, 1.0, NO_DILATION

    def check(self, point, kernel: bool) -> dict:
        """Build and check what the point needs before it runs; what was checked."""
        from clusterlab.cluster.supervisor import check_capacity

        check_capacity(point.cluster.n_ranks())  # what the launcher checks, before anything runs
        why = transport_config(point, "socket").why_not(1.0)
        if why:
            raise ConfigError(why)
        return {}

    @contextlib.contextmanager
    def open(self, point, session):
        """The point's cluster up for ``session`` (its ``cluster``, transport, applied values,
        notes) until the block ends. Ranks on this machine start per run: nothing to bring up."""
        session._config = transport_config(point, self.place) if self.place else None
        session.cluster = point.cluster
        yield

    def monitor(self, session, interval: float):
        """A started monitor of ``session``'s cluster: this machine's loopback, with the packet
        capture only as root."""
        from clusterlab.monitor import Monitor

        return Monitor.local(interval, capture=os.geteuid() == 0).start()

    def network_words(self, c) -> str:
        """What connects ``c``'s ranks, in a report's words."""
        return c.network

    def emulated(self, study, points) -> dict:
        """What a run of ``study`` emulates rather than has, beyond its compute (runner's meta)."""
        return {"network": self.network_words(study.cluster)}


class InProcessKind(StudyKind):
    cls, spelling, place = InProcess, "InProcess()", None
    checks_memory = False
    ranks_words = "ranks in one process (threads)"

    def resolve(self, cluster, tcp, workload) -> tuple:
        cluster.check()
        if not tcp.is_default():
            raise ConfigError("the in-process cluster has no TCP to set")
        return cluster, 1.0, NO_DILATION

    def check(self, point, kernel: bool) -> dict:
        return {}  # threads of this process: nothing to start, no TCP


class LocalKind(StudyKind):
    cls, spelling = Local, "Local()"
    ranks_words = "local ranks over loopback"


class MpirunKind(StudyKind):
    cls, spelling = Mpirun, "Mpirun()"
    ranks_words = "MPI ranks"


class TestbedKind(StudyKind):
    """A namespace testbed built per point from the study's ``StarTopo``."""

    cls, spelling, place = Testbed, "Testbed(StarTopo(...))", "testbed"
    swappable = dilates = per_host_counters = caption_network = True

    def accept(self, c, study: str):
        if c.topo is None:
            raise ConfigError(f"{study}: a study brings its testbed up per point: cluster=Testbed(StarTopo(...)), "
                              f"not a testbed that is up ({c!r})")
        return c

    def from_topo(self, topo, ranks):
        return Testbed(topo, ranks=ranks)

    def resolve(self, cluster, tcp, workload) -> tuple:
        k, note = cluster.resolve_dilation(tcp)
        if k != 1.0 and not workload.dilatable:
            raise ConfigError(f"needs dilation {k:g} ({note}), but workload {workload.name} computes for real and a "
                              "dilated run would not slow its computation down: use settings expressible at "
                              "dilation 1, or compute replay")
        return cluster.at_dilation(k), k, note

    def check(self, point, kernel: bool) -> dict:
        out = {"topology": star_topo(point).to_dict()}
        why = transport_config(point, "testbed").why_not(point.dilation)
        if why:
            raise ConfigError(why)
        sysctls = testbed_sysctls(point)
        out["sysctls"] = len({(k, str(v)) for d in sysctls.values() for k, v in d.items()})
        if kernel:
            kernel_accepts(sysctls)
            out["kernel"] = True
        return out

    @contextlib.contextmanager
    def open(self, point, session):
        """The testbed built for the point and removed after; the ranks run on a
        ``clusterlab.cluster.Testbed`` around it. Records what it applied, and after it stopped,
        the ATM switch's and WAN line's own accounts."""
        from clusterlab import cluster
        from clusterlab.cluster.testbed import TestbedNetwork

        s, c = session, point.cluster
        tb = TestbedNetwork(star_topo(point), transport=transport_config(point, "testbed"))
        with tb:
            s.testbed = tb
            s.cluster = cluster.Testbed(tb, mesh=c.mesh)
            names = [h.name for h in tb.hosts]
            s.applied = {"testbed": tb.name, "up_seconds": round(tb.timings.get("up", 0.0), 3),
                         "rto_min_us_per_host": [tb.sysctls[h].get(MIN_SYSCTL) for h in names],
                         "rto_max_ms_per_host": [tb.sysctls[h].get(MAX_SYSCTL) for h in names],
                         "tcp_stack": tb.transport.stack_name(),
                         "stack_sysctls": {k: v for k, v in tb.sysctls[names[0]].items()
                                           if k.split("/")[-1] in STACK_SYSCTL_NAMES},
                         "warnings": list(tb.warnings), "machine_sysctls_raised": dict(tb.machine_sysctls)}
            if c.wan_description():
                s.notes.append(c.wan_description() + "; site links " + str(c.topo.rate))
            elif c.topo.sites is None and point.settings.get("network"):  # a study that varies the network: say this one
                s.notes.append(f"{point.settings['network']}: {c.n_hosts()} hosts on one switch, links {c.topo.rate}")
            if s.dilation != 1.0:
                s.notes.append(f"dilated k={s.dilation:g}: link rates / {s.dilation:g}, RTO bounds x {s.dilation:g}, "
                               "times / k; the kernel's fixed timers (delayed ACK, loss probe) are not scaled")
            if point.tcp.max_range() is None:
                s.notes.append("MAX left at the kernel's 120 s" + (f" (= {120 / s.dilation:g} s undilated)"
                                                                    if s.dilation != 1.0 else ""))
            yield
        if tb.atm_totals:  # the ATM switch's own account, once it stopped: how faithful its timing was
            t = tb.atm_totals
            s.applied["atm_switch"] = {
                "frames_lost": sum(t["frames_lost"]), "frames_delivered": sum(t["frames_delivered"]),
                "cells_wasted": sum(t["cells_wasted"]), "frames_line_lost": sum(t.get("frames_line_lost") or [0]),
                "late_mean_us": round(t["late_mean_ns"] / 1e3, 1),
                "late_max_us": round(t["late_max_ns"] / 1e3, 1), "read_wait_mean_us": round(t["read_wait_mean_ns"] / 1e3, 1),
                "input_wait_mean_us": round(t["input_wait_mean_ns"] / 1e3, 1),
                "kernel_drops": t["kernel_drops"], "send_errors": t["send_errors"], "late_offers": t["late_offers"]}
        if tb.wan_totals:  # the WAN line's own account, once it stopped
            s.applied["wan_line"] = wan_line_account(tb.wan_totals)

    def monitor(self, session, interval: float):
        """Every host and switch port of the testbed."""
        from clusterlab.monitor import Monitor

        # visiting 100 namespaces costs ~30 ms: sample big testbeds less often
        interval = max(interval, 0.005 * len(session.testbed.hosts))
        return Monitor.for_testbed(session.testbed, interval).start()

    def network_words(self, c) -> str:
        words = (f"network namespaces on one machine: {c.switch_description()}; a {c.topo.host_queue} host queue")
        wan = c.wan_description() if hasattr(c, "wan_description") else None
        return words + (f"; {wan}" if wan else "")

    def stack_words(self, point) -> str:
        """Which TCP stack the point ran, in words."""
        try:
            name = transport_config(point, "testbed").stack_name()
        except ConfigError as e:  # the runner refuses such a point before it runs; say why here too
            name = f"not expressible ({e})"
        return STACK_WORDS.get(name, name)

    def emulated(self, study, points) -> dict:
        return {"network": _per_point(points, lambda p: of(p.cluster).network_words(p.cluster))
                or self.network_words(study.cluster),
                "dilation": ("per point (see each point's dilation): rates / k, RTO bounds x k, times / k; fixed "
                             "kernel timers (delayed ACK, loss probe, 4 ms jiffies) unscaled"),
                "tcp stack": _per_point(points, lambda p: of(p.cluster).stack_words(p), " at every point")}


class SimulatedKind(StudyKind):
    """The study's ``StarTopo`` in SimGrid's flow model: nothing to bring up, each run is one
    engine process; no machine of its own to watch."""

    cls, spelling = Simulated, "Simulated(StarTopo(...))"
    swappable = True
    monitored = checks_memory = runs_programs = False

    def from_topo(self, topo, ranks):
        return Simulated(topo, ranks=ranks)

    def resolve(self, cluster, tcp, workload) -> tuple:
        cluster.check()
        if not tcp.is_default() and cluster._timers(tcp) is None:
            raise ConfigError("the simulated cluster's flow model has no TCP timers, buffers or stacks (its "
                              "flows never lose a packet): transport settings would be ignored (with its "
                              "loss_model on, rto_min, rto_max and stack reach its loss/timeout model)")
        return cluster, 1.0, NO_DILATION

    def check(self, point, kernel: bool) -> dict:
        return {"topology": point.cluster.topo.to_dict(), "engine": point.cluster.engine_config()}

    @contextlib.contextmanager
    def open(self, point, session):
        c = point.cluster
        session.cluster = c
        session._config = transport_config(point, "socket")  # timers at most (spec refuses others); Simulated.run checks again
        session.applied = {"simulated": c.describe(), "engine": c.engine_config()}
        session.notes.append(c.describe())
        yield

    def monitor(self, session, interval: float):
        raise ConfigError("a simulated cluster has no machine of its own to monitor")

    def network_words(self, c) -> str:
        return c.describe()

    def stack_words(self, point) -> str:
        return "no TCP (SimGrid's flows: no loss, no timers)"

    def emulated(self, study, points) -> dict:
        return {"network": _per_point(points, lambda p: of(p.cluster).network_words(p.cluster))
                or self.network_words(study.cluster)}


# Every kind of study cluster; the order is the one a refusal names them in.
KINDS: tuple[StudyKind, ...] = (TestbedKind(), SimulatedKind(), LocalKind(), MpirunKind(), InProcessKind())
SWAPPABLE = tuple(k.name for k in KINDS if k.swappable)  # the values of a grid axis ``cluster``


def of(c) -> StudyKind:
    """The kind of study cluster ``c`` is (``ConfigError`` when it is none)."""
    for k in KINDS:
        if isinstance(c, k.cls):
            return k
    raise ConfigError(f"{c!r} is no kind of study cluster ({', '.join(k.spelling for k in KINDS)})")


def by_name(name: str) -> StudyKind | None:
    """The kind a study's rows and meta call ``name`` (None for a name no kind has)."""
    return next((k for k in KINDS if k.name == name), None)


STACK_WORDS = {
    "linux": "this machine's Linux 6.18 TCP as it is (its congestion control, initial window 10, SACK, RACK, "
             "tail loss probes, F-RTO, timestamps)",
    "seed-era": "seed-era TCP as seed 000's Solaris 2.5.1 had it (Reno, initial window 2, no SACK, no RACK: "
                "three duplicate ACKs or the RTO, no tail loss probe, no F-RTO, no timestamps; per-host sysctls)",
}


def _per_point(points, describe, every: str = "") -> str:
    """``describe(point)`` for every point, said once (with ``every``) when they agree, else
    each with its points."""
    return said_per_point({p.index: describe(p) for p in points}, every)


def said_per_point(by_point: dict[int, str], every: str = "") -> str:
    """Each point's description said once (with ``every``) when they agree, else each with its
    points (a merged run says its parts' points the same way, report.merge).

    >>> said_per_point({0: "tbf", 2: "tbf", 1: "atm"})
    'tbf at points 0, 2; atm at points 1'
    """
    by: dict[str, list[int]] = {}
    for i in sorted(by_point):
        by.setdefault(by_point[i], []).append(i)
    if len(by) <= 1:
        return next(iter(by), "") + (every if by else "")
    return "; ".join(f"{words} at points {', '.join(map(str, ix))}" for words, ix in by.items())
