"""From a study's point to running ranks: the one place that calls the cluster layer.

Everything the study layer needs from ``clusterlab.cluster`` (the local launcher, MPI, the
in-process backend, the namespace testbed), ``clusterlab.net`` (the one ``TransportConfig``)
and ``clusterlab.monitor`` is called here and nowhere else, so a change in those APIs is adapted
in this file alone.

A point's ``TransportConfig`` is already placed: on the testbed (``place="testbed"``) its RTO
bounds are per-host sysctls drawn per host (seed 000's random MIN per host, MAX = that host's
MIN + offset), multiplied by the point's dilation; elsewhere socket options. The spec picked a
dilation at which the kernel takes every value; ``TransportConfig.why_not`` checks it again.

>>> from clusterlab.experiments.spec import StarTopo, Study, Testbed, TransportConfig
>>> from clusterlab.experiments.workloads import alltoall_broadcast
>>> p = Study(name="x", cluster=Testbed(StarTopo(hosts=2), dilation="auto"), workload=alltoall_broadcast(),
...           transport=TransportConfig(rto_min="200ms", rto_max_offset="100ms")).points()[0]
>>> s = testbed_sysctls(p)["h0"]
>>> p.dilation, s["net/ipv4/tcp_rto_min_us"], s["net/ipv4/tcp_rto_max_ms"]
(4.0, 800000, 1200)
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator

from clusterlab.errors import ConfigError
from clusterlab.experiments.spec import Point, kind_of
from clusterlab.net.transport_config import STACK_SYSCTLS
from clusterlab.units import parse_size

# The loss-recovery sysctls a TCP stack sets (and tcp_window_scaling), as the point's meta shows them.
STACK_SYSCTL_NAMES = {p.split("/")[-1] for p, _, _ in STACK_SYSCTLS.values()} | {"tcp_window_scaling"}

MIN_SYSCTL = "net/ipv4/tcp_rto_min_us"
MAX_SYSCTL = "net/ipv4/tcp_rto_max_ms"


def host_names(point: Point) -> list[str]:
    """The testbed's compute hosts for this point (``StarTopo.host_names``)."""
    return star_topo(point).host_names()


def star_topo(point: Point):
    """The testbed topology of a point (checked by ``StarTopo`` itself)."""
    return point.cluster.topo  # a point's testbed is at its dilation already


def transport_config(point: Point, place: str):
    """The point's transport settings at ``place`` (``socket`` or ``testbed``)."""
    return point.tcp.with_place(place)


def testbed_sysctls(point: Point) -> dict[str, dict]:
    """Every host's sysctls for this point, exactly as the testbed writes them
    (``cluster.testbed.sysctl.host_sysctls``)."""
    from clusterlab.cluster.testbed.sysctl import host_sysctls

    return host_sysctls(transport_config(point, "testbed"), host_names(point), float(point.dilation))


def check_point(point: Point, kernel: bool = False) -> dict:
    """Build everything a point needs without running it: the topology, the socket settings,
    every host's sysctls. ``kernel``: also write each distinct sysctl value into a scratch
    network namespace and read it back (root), so a value the kernel refuses is found before a
    study runs. Returns what was checked."""
    out: dict = {"point": point.index}
    kind = kind_of(point.cluster)
    if point.workload.name == "alltoall_broadcast" and kind not in ("inprocess", "simulated"):
        from clusterlab.experiments.workloads.broadcast import check_memory

        ranks = point.cluster.n_ranks()
        check_memory(parse_size(point.workload.params["size"], "size"), ranks)
    if point.workload.name == "parallel_mining":
        from clusterlab.experiments.workloads.mining import dataset_file

        data = str(point.workload.params["data"])
        path, generator, _ = dataset_file(data, "")
        if generator is None and not os.path.isfile(path):
            raise ConfigError(f"data {data}: no such file")
    if kind == "testbed" and point.workload.params.get("engine") == "mpi":
        from clusterlab.cluster.api import mpi_congestion_why_not

        why = mpi_congestion_why_not(point.tcp.congestion)  # MPICH's sockets: only the hosts' default reaches them
        if why:
            raise ConfigError(why)
    if kind == "testbed":
        topo = star_topo(point)
        out["topology"] = topo.to_dict()
        why = transport_config(point, "testbed").why_not(point.dilation)
        if why:
            raise ConfigError(why)
        sysctls = testbed_sysctls(point)
        out["sysctls"] = len({(k, str(v)) for d in sysctls.values() for k, v in d.items()})
        if kernel:
            kernel_accepts(sysctls)
            out["kernel"] = True
    elif kind == "simulated":
        out["topology"] = point.cluster.topo.to_dict()
        out["engine"] = point.cluster.engine_config()
    elif kind != "inprocess":
        from clusterlab.cluster.supervisor import check_capacity

        check_capacity(point.cluster.n_ranks())  # what the launcher checks, before anything runs
        why = transport_config(point, "socket").why_not(1.0)
        if why:
            raise ConfigError(why)
    return out


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


class Session:
    """A cluster brought up for one point: run rank functions on it, monitor it."""

    def __init__(self, point: Point, cache_dir: str):
        self.point = point
        self.kind = kind_of(point.cluster)
        self.dilation = float(point.dilation)
        self.cache_dir = cache_dir
        self.ranks = point.cluster.n_ranks()
        self.applied: dict = {}
        self.notes: list[str] = []
        self.testbed = None
        self.cluster = None   # the ``clusterlab.cluster.Cluster`` the point's ranks run on
        self._config = None

    @property
    def per_host_counters(self) -> bool:
        """Each rank has its own TCP counters (own namespace)."""
        return self.kind == "testbed"

    @property
    def switch_ns(self) -> str | None:
        return self.testbed.switch.ns if self.testbed is not None else None

    @property
    def testbed_name(self) -> str | None:
        return self.testbed.name if self.testbed is not None else None

    def run(self, fn, *args, nranks: int | None = None, timeout: float = 600.0) -> list:
        """``fn(comm, *args)`` on the point's ranks; each rank's return value."""
        n = nranks or self.ranks
        opts = {}
        if self.testbed is not None:
            # starting many interpreters on a busy machine takes long: scale the set-up timeout
            opts["setup_timeout"] = max(60.0, 3.0 * n)
        return self.cluster.run(fn, n, *args, transport=self._config, timeout=timeout, **opts)

    def mining_options(self) -> dict:
        """Keyword arguments for ``mine_parallel`` that put its ranks on this cluster (a
        testbed's ranks get the testbed's own transport)."""
        return {"cluster": self.cluster, "transport": self._config}

    def recording_options(self) -> dict:
        """Where a compute replay's recording (one real run) is made: the point's own cluster,
        or, for a simulated point (whose ranks run no program), this machine's loopback mesh
        (``Local()``, default transport; the recording is shared with the testbed's points of
        the same job and rank count, see ``workloads.mining.recording``)."""
        if self.kind == "simulated":
            from clusterlab.cluster import Local

            return {"cluster": Local(), "transport": None}
        return self.mining_options()

    def monitor(self, interval: float):
        """A started monitor of this cluster (testbed: every host and switch port; otherwise the
        machine's loopback, with the packet capture only as root)."""
        from clusterlab.monitor import Monitor

        if self.kind == "testbed":
            # visiting 100 namespaces costs ~30 ms: sample big testbeds less often
            interval = max(interval, 0.005 * len(self.testbed.hosts))
            return Monitor.for_testbed(self.testbed, interval).start()
        return Monitor.local(interval, capture=os.geteuid() == 0).start()


@contextlib.contextmanager
def open_cluster(point: Point, cache_dir: str) -> Iterator[Session]:
    """Bring the point's cluster up (a testbed is built and removed; local ranks start per run).
    The ranks run on a ``clusterlab.cluster`` object: the point's own (``InProcess()``,
    ``Local()``, ``Mpirun()``), or, on a testbed, ``Testbed`` around the network brought up for
    this point."""
    from clusterlab import cluster

    s = Session(point, cache_dir)
    c = point.cluster
    if s.kind == "simulated":  # nothing to bring up: each run is one engine process
        s.cluster = c
        s._config = transport_config(point, "socket")  # timers at most (spec refuses others); Simulated.run checks again
        s.applied = {"simulated": c.describe(), "engine": c.engine_config()}
        s.notes.append(c.describe())
        yield s
        return
    if s.kind != "testbed":
        s._config = None if s.kind == "inprocess" else transport_config(point, "socket")
        s.cluster = c
        yield s
        return
    from clusterlab.cluster.testbed import TestbedNetwork

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
                     "warnings": list(tb.warnings)}
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
        yield s
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
