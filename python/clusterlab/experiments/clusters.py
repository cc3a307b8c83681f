"""From a study's point to running ranks: with ``kinds`` (what each kind of cluster does for a
point), the one place that calls the cluster layer.

Everything the study layer needs from ``clusterlab.cluster`` (the local launcher, MPI, the
in-process backend, the namespace testbed), ``clusterlab.net`` (the one ``TransportConfig``)
and ``clusterlab.monitor`` is called here and in ``kinds`` and nowhere else, so a change in those
APIs is adapted in these two files alone. Here: what every point checks whatever its cluster (the
workload's memory, data, engine), and the ``Session`` a workload runs on; the cluster's own part
(its topology and sysctls, bringing it up, its monitor) each ``kinds.StudyKind`` says.

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
from collections.abc import Iterator

from clusterlab.errors import ConfigError
from clusterlab.experiments import kinds

# A point's testbed, sysctls and kernel check, and what its network recorded, are each kind's own
# (``kinds``); these names are kept here, where the study layer and its tests have used them.
from clusterlab.experiments.kinds import (  # noqa: F401
    MAX_SYSCTL,
    MIN_SYSCTL,
    STACK_SYSCTL_NAMES,
    host_names,
    kernel_accepts,
    star_topo,
    testbed_sysctls,
    transport_config,
    wan_line_account,
)
from clusterlab.experiments.spec import Point, kind_of
from clusterlab.units import parse_size


def check_point(point: Point, kernel: bool = False) -> dict:
    """Build everything a point needs without running it: the topology, the socket settings,
    every host's sysctls. ``kernel``: also write each distinct sysctl value into a scratch
    network namespace and read it back (root), so a value the kernel refuses is found before a
    study runs. Returns what was checked."""
    out: dict = {"point": point.index}
    kind = kinds.of(point.cluster)
    if point.workload.name == "alltoall_broadcast" and kind.checks_memory:
        from clusterlab.experiments.workloads.broadcast import check_memory

        ranks = point.cluster.n_ranks()
        check_memory(parse_size(point.workload.params["size"], "size"), ranks)
    if point.workload.name == "parallel_mining":
        from clusterlab.experiments.workloads.mining import dataset_file

        data = str(point.workload.params["data"])
        path, generator, _ = dataset_file(data, "")
        if generator is None and not os.path.isfile(path):
            raise ConfigError(f"data {data}: no such file")
    if "engine" in point.workload.params:  # what moves the ranks' messages (npb): can it run here?
        from clusterlab.cluster import rank_engine

        why = rank_engine(point.workload.params["engine"]).why_not(point.cluster, point.tcp)
        if why:
            raise ConfigError(why)
    out.update(kind.check(point, kernel))  # the cluster's own: topology, sysctls, capacity, engine
    return out


class Session:
    """A cluster brought up for one point: run rank functions on it, monitor it."""

    def __init__(self, point: Point, cache_dir: str):
        self.point = point
        self.kind = kind_of(point.cluster)  # its name (rows, meta); what it does: ``study_kind``
        self.study_kind = kinds.of(point.cluster)
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
        return self.study_kind.per_host_counters

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
        """Where a compute replay's recording (one real run) is made: this machine's loopback
        mesh (``Local()``, default transport) whatever the point's cluster, its ranks picking
        collective algorithms by the model of the point's cluster (``recording_cost_model``,
        which ``workloads.mining.recording`` hands them). Not in the testbed itself: there the
        recorded computation depends on the network (HPA's counting thread works while the main
        thread waits in a call on the slow dilated links, and that CPU is the call's, not a
        gap's; the ATM switch's forwarding process shares the cores), docs/studies.md. A point
        whose ranks are MPI's records on its own cluster, under MPI."""
        if getattr(self.cluster, "mesh", "tcp") == "mpi":
            return self.mining_options()
        from clusterlab.cluster import Local

        return {"cluster": Local(), "transport": None}

    def recording_cost_model(self):
        """The cost model the ranks of this point's compute recording pick collective algorithms
        by, or None for the process's own: a testbed's (``TestbedNetwork.cost_model``), and for
        a simulated point the same model of the topology it simulates, so that the recording
        moves the messages the point's ranks would. A file named in ``$CLUSTERLAB_COSTMODEL``
        wins everywhere; MPI's ranks run MPI's own collectives."""
        from clusterlab.comm import costmodel

        if os.environ.get(costmodel.ENV) or getattr(self.cluster, "mesh", "tcp") == "mpi":
            return None
        if self.study_kind.runs_programs:
            return self.testbed.cost_model() if self.testbed is not None else None
        topo = getattr(self.cluster, "topo", None)
        if topo is None:
            return None
        from clusterlab.cluster.testbed.model import link_model

        return link_model(topo)

    def monitor(self, interval: float):
        """A started monitor of this cluster (testbed: every host and switch port; otherwise the
        machine's loopback, with the packet capture only as root)."""
        return self.study_kind.monitor(self, interval)


@contextlib.contextmanager
def open_cluster(point: Point, cache_dir: str) -> Iterator[Session]:
    """Bring the point's cluster up (a testbed is built and removed; local ranks start per run).
    The ranks run on a ``clusterlab.cluster`` object: the point's own (``InProcess()``,
    ``Local()``, ``Mpirun()``), or, on a testbed, ``Testbed`` around the network brought up for
    this point."""
    s = Session(point, cache_dir)
    with s.study_kind.open(point, s):  # ``kinds``: each kind brings itself up and says what it applied
        yield s
