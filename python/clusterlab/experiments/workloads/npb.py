"""NPB kernels across seed 004's networks as a study workload: ``npb_wan``.

``nodes`` ranks, one per host, on the point's cluster when it is a ``Testbed`` (a LAN, or
``sites="4+4"`` with the WAN line: the spec declares the network, and ``network`` must match it);
with any other cluster (e.g. ``InProcess(ranks=1)``, the driver only) each point builds its own:

- ``network="lan"``: 8 hosts on one switch at ``lan_rate`` (100M-LAN);
- ``"135M"``: 4 + 4 hosts on two 1 Gbit/s site switches (the paper's GbE LANs at each end)
  joined by the WAN line, ``wan_rate`` per direction, ``wan_delay`` one way (135M-ATM);
- ``"67M"``: the same with both directions sharing one ``wan_rate`` and one queue, losing what
  exceeds it (67M-ATM: the fibre looped back, 67 Mbit/s each way when both send).

Two cores cannot compute for 8 ranks, so each point is **replayed**
(``clusterlab.npb.replay``): the kernel runs for real once per (kernel, class, ranks) as
in-process threads, verified, recording each rank's messages and its compute as CPU time;
the replay sleeps that compute and sends the same messages over the point's network. The
speedup's numerator is a real 1-rank run's CPU time. ``compute_scale`` multiplies every compute
time (both sides of the speedup): > 1 emulates a slower CPU on the same network (the seed's
733 MHz Xeons against its 100 Mbit/s and 12 ms networks), which changes the balance between
compute and communication that Table 3 measures. Rows say ``replayed`` and whether the
recording run itself was CPU-bound (it is, with 8 ranks on 2 cores: that is why it is replayed).

``traffic=True`` adds, per 0.1 s interval of the replay, a row (``row="wan_interval"``; the
replay's own row is ``row="replay"``) with the WAN line's Mbit/s and packets/s (both directions,
what the line carried), drops, and packets per 64-byte length bucket (seed 004's traffic figures).

``engine`` picks what moves the ranks' messages: the TCP mesh's socket engine (``rust``, the
default, or the ``python`` reference; ``comm.tcp.engine``: the launcher passes
``$CLUSTERLAB_ENGINE`` to every rank), or ``mpi``: mpiexec starts the ranks in the hosts'
namespaces and MPICH carries the messages over its own sockets (``clusterlab.cluster.Testbed``
with ``mesh="mpi"``; kept off shared memory by the tool); ``clusterlab.cluster.rank_engine``
maps the name to how the ranks run. Each row says which engine and
congestion control the ranks actually had (read back from the ranks: ``engine``,
``congestion_in_force``; under MPI the host's default, ``net.ipv4.tcp_congestion_control``,
which the testbed sets from the point's ``congestion`` before mpiexec starts: the kernel lets a
namespace's default be only one of ``net.ipv4.tcp_allowed_congestion_control``, so another is
refused for MPI points when the study expands).

>>> npb_wan(kernel="cg", cls="S").params["network"]
'lan'
>>> npb_wan(kernel="bt")
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: unknown NPB kernel 'bt' (one of ep, is, cg, mg, ft, lu, sp)
>>> npb_wan(engine="ucx")
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: engine 'ucx': one of mpi, python, rust (the TCP mesh's engines, or MPI)
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time

from clusterlab.errors import ConfigError
from clusterlab.experiments.spec import Workload

NETWORKS = ("lan", "135M", "67M")
# Seed 004, Table 3, Fast-PC, class A, 8 nodes: speedup on 100M-LAN and on 135M-ATM.
SEED_TABLE3 = {"cg": (4.51, 5.50), "ep": (8.81, 8.94), "ft": (5.07, 4.73), "is": (0.32, 0.33),
               "lu": (8.41, 7.47), "mg": (6.11, 4.63), "sp": (1.50, 1.90)}
_recordings: dict = {}


def npb_wan(kernel: str = "cg", cls: str = "W", network: str = "lan", nodes: int = 8, lan_rate: str = "100Mbit",
            wan_rate: str = "135Mbit", wan_delay: str = "6ms", traffic: bool = False, compute_scale: float = 1.0,
            engine: str = "rust") -> Workload:
    from clusterlab.cluster import rank_engine
    from clusterlab.npb import check

    rank_engine(engine)  # refused now, not when the point runs
    check(kernel, cls, int(nodes))
    if not float(compute_scale) > 0:
        raise ConfigError(f"compute_scale must be positive, got {compute_scale!r}")
    if network not in NETWORKS:
        raise ConfigError(f"network {network!r}: one of {', '.join(NETWORKS)}")
    return Workload("npb_wan", {"kernel": str(kernel).lower(), "cls": str(cls).upper(), "network": network,
                                "nodes": int(nodes), "lan_rate": lan_rate, "wan_rate": wan_rate,
                                "wan_delay": wan_delay, "traffic": bool(traffic),
                                "compute_scale": float(compute_scale), "engine": engine}, dilatable=False,
                    check=check_params)


def npb_replay(kernel: str = "cg", cls: str = "W", network: str = "lan", nodes: int = 8, traffic: bool = False,
               compute_scale: float = 1.0, engine: str = "rust") -> Workload:
    """``npb_wan`` for a study whose cluster is a ``Testbed`` (its ``sites``/``wan_*`` fields
    declare the network; ``network`` names which one each point is and is checked against it).

    >>> sorted(npb_replay(kernel="ep").params)
    ['cls', 'compute_scale', 'engine', 'kernel', 'network', 'nodes', 'traffic']
    """
    w = npb_wan(kernel, cls, network, nodes, traffic=traffic, compute_scale=compute_scale, engine=engine)
    return Workload("npb_wan", {k: v for k, v in w.params.items() if k not in ("lan_rate", "wan_rate", "wan_delay")},
                    dilatable=False, check=check_params)


def check_params(params: dict) -> None:
    """Refuse a point's settings (a grid or ``--set`` value) when the study expands.

    >>> check_params({"kernel": "cg", "engine": "ucx"})
    Traceback (most recent call last):
    ...
    clusterlab.errors.ConfigError: engine 'ucx': one of mpi, python, rust (the TCP mesh's engines, or MPI)
    """
    npb_wan(**params)


def topology(params: dict):
    """The point's testbed topology (the workload builds it: the study's cluster is not a testbed)."""
    from clusterlab.cluster.testbed import StarTopo

    if "lan_rate" not in params:
        raise ConfigError("npb_replay runs on the study's Testbed cluster (declare sites/wan_* there); "
                          "npb_wan builds its own testbed")
    n = int(params["nodes"])
    if params["network"] == "lan":
        return StarTopo(hosts=max(2, n), rate=params["lan_rate"])
    if n < 2:
        raise ConfigError("a WAN point needs at least 2 ranks (one per site)")
    return StarTopo(hosts=n, rate="1Gbit", sites=f"{(n + 1) // 2}+{n // 2}", wan_rate=params["wan_rate"],
                    wan_delay=params["wan_delay"], wan_shared=params["network"] == "67M")


def check_network(network: str, topo, nodes: int) -> None:
    """Refuse a point whose ``network`` is not the testbed the spec declared.

    >>> from clusterlab.cluster.testbed import StarTopo
    >>> check_network("67M", StarTopo(hosts=8, sites="4+4"), 8)
    Traceback (most recent call last):
    ...
    clusterlab.errors.ConfigError: network '67M' needs the cluster's wan_shared=True (two sites sharing one line); the testbed has two sites, wan_shared=False
    """
    want = {"lan": (False, False), "135M": (True, False), "67M": (True, True)}[network]
    have = (topo.has_wan, bool(topo.has_wan and topo.wan_shared))
    if want != have:
        need = {"lan": "one switch (no sites)", "135M": "sites and wan_shared=False",
                "67M": "wan_shared=True (two sites sharing one line)"}[network]
        got = f"two sites, wan_shared={topo.wan_shared}" if topo.has_wan else "one switch"
        raise ConfigError(f"network {network!r} needs the cluster's {need}; the testbed has {got}")
    if nodes > topo.hosts:
        raise ConfigError(f"nodes={nodes} ranks need as many hosts; the testbed has {topo.hosts}")


def recording(kernel: str, cls: str, n: int) -> dict:
    """The real run of (kernel, class, n) this process recorded (once)."""
    from clusterlab.npb.replay import record

    key = (kernel, cls, n)
    if key not in _recordings:
        _recordings[key] = record(kernel, cls, n)
    return _recordings[key]


def replay_on_engine(comm, events: str, compute_scale: float) -> dict:
    """``replay_rank`` plus what this rank's mesh really used: its engine and the congestion
    control its sockets had, as the communicator reads it back (MPI: the host's default)."""
    from clusterlab.npb.replay import replay_rank

    out = replay_rank(comm, events, compute_scale)
    stats = comm.stats() if hasattr(comm, "stats") else {}
    cc = (stats.get("transport") or {}).get("in_force", {}).get("congestion")
    return {**out, "engine": stats.get("engine") or stats.get("backend"), "congestion": cc}


def _one(values: list, what: str):
    """The one value every rank reported, else a ConfigError naming the disagreement."""
    if len(set(values)) != 1:
        raise ConfigError(f"the ranks disagree on {what}: {values}")
    return values[0]


def execute(session, params: dict, reps: int, warmup: int):
    from clusterlab.cluster import rank_engine
    from clusterlab.cluster.testbed import TestbedNetwork
    from clusterlab.npb.replay import save_events

    kernel, cls, n = params["kernel"], params["cls"], int(params["nodes"])
    one = recording(kernel, cls, 1)
    rec = recording(kernel, cls, n)
    if not (one["verified"] and rec["verified"]):
        raise ConfigError(f"NPB {kernel} class {cls} did not verify (1 rank: {one['verified']}, {n}: {rec['verified']})")
    seed = SEED_TABLE3.get(kernel, (None, None))
    scale = float(params.get("compute_scale", 1.0))
    # The numerator as the replay counts compute: the 1-rank run's CPU time (its wall time on a
    # loaded machine includes waiting for a core), times the same scale.
    one1 = one["ranks"][0]["compute_cpu_s"] * scale
    if session.testbed is not None:
        topo = session.testbed.topo
        check_network(params["network"], topo, n)
        bed = contextlib.nullcontext(session.testbed)
    else:
        topo = topology(params)
        bed = TestbedNetwork(topo)
    with tempfile.TemporaryDirectory(prefix="clab-replay-") as tmp, bed as tb:
        events = save_events(rec["events"], os.path.join(tmp, "events.json"))
        engine = params.get("engine", "rust")
        how = rank_engine(engine)
        env, ranks = how.env(), how.on(tb)
        for i in range(warmup + reps):
            out = ranks.run(replay_on_engine, n, events, scale, timeout=600, env=env)
            used = _one([o["engine"] for o in out], "the mesh engine")
            if used != engine:
                raise ConfigError(f"engine {engine!r} asked for, the ranks used {used!r}")
            cc = _one([o["congestion"] for o in out], "the congestion control")
            t1 = time.time()
            t0 = min(o["started"] for o in out)  # after the ranks started and met
            if i < warmup:
                continue
            secs = max(o["seconds"] for o in out)
            row = {"rep": i - warmup, "kernel": kernel, "class": cls, "network": params["network"], "nodes": n,
                   "seconds": secs, "one_rank_seconds": one1, "one_rank_wall_seconds": one["seconds"],
                   "speedup": one1 / secs, "compute_scale": scale, "engine": used,
                   "congestion_in_force": cc, "cc_engine": f"{cc}/{used}",
                   "replayed": True, "recording_cpu_bound": rec["cpu_bound"], "verified": True,
                   "bytes_sent": sum(r["bytes_sent"] for r in rec["ranks"]),
                   "messages_sent": sum(r["messages_sent"] for r in rec["ranks"]),
                   "seed_speedup_lan": seed[0], "seed_speedup_135m": seed[1]}
            if params["traffic"] and topo.has_wan:
                yield from _traffic_rows(tb, row, t0, t1)
            else:
                yield row


def _traffic_rows(tb, row: dict, t0: float, t1: float):
    """The replay's row, then one row per 0.1 s of WAN traffic (both directions summed)."""
    from clusterlab.monitor.wan import BUCKET, WanTrace

    time.sleep(0.25)  # the line writes each interval when it ends
    tr = WanTrace.of_testbed(tb)
    a, b = tr.series(0, t0, t1 + tr.interval), tr.series(1, t0, t1 + tr.interval)
    base = dict(row)
    yield {**row, "row": "replay"}
    for k, t in enumerate(a["t"]):
        nbytes = int(a["bytes"][k] + b["bytes"][k])
        buckets = a["bucket_packets"][k] + b["bucket_packets"][k]
        top = int(buckets.nonzero()[0].max()) if buckets.any() else 0
        yield {**base, "row": "wan_interval", "interval": k, "t": round(float(t), 3), "wan_mbps": nbytes * 8 / tr.interval / 1e6,
               "wan_pps": int(a["packets"][k] + b["packets"][k]) / tr.interval,
               "wan_drops": int(a["drops"][k] + b["drops"][k]),
               "largest_bucket_bytes": top * BUCKET,
               "packets_per_bucket": {int(j) * BUCKET: int(buckets[j]) for j in buckets.nonzero()[0]},
               "seconds": None}
