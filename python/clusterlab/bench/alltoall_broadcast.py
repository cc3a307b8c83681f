"""Seed 000's all-to-all broadcast (section 4): barrier, every rank sends a block of ``size``
bytes to every other rank, barrier; repeated ``reps`` times.

Written only against the ``Communicator``: the same code runs on the local loopback cluster,
on the namespace testbed and on a real cluster. What each repetition reports (at rank 0):

* ``seconds``: the slowest rank's time from leaving the first barrier to leaving the second;
* ``retransmissions`` / ``timeouts``: TCP segments retransmitted and retransmission timeouts
  (``TcpRetransSegs``, ``TcpExtTCPTimeouts``) during the repetition, in total and per host.
  On the testbed each rank reads its own host's namespace; on a shared namespace (local run)
  only rank 0 reads the machine-wide counters, and ``per_host`` is empty;
* ``drops``: packets dropped at the switch's output buffers, in total and per port, when the
  caller passes a ``drops`` reader (the testbed's switch); ``host_drops``: packets the hosts'
  own egress queues refused (testbed: each rank reads its host's queue), in total and per host;
* ``ranks``: time attribution per rank: ``seconds`` (its own time between the barriers),
  ``rto_wait_s`` (the longest time one of its connections waited on retransmission timeouts,
  from the TCP_INFO deltas ``total_rto_time`` and ``total_rto_recoveries``; see
  ``clusterlab.net.tcp_info.rto_delta``), ``transfer_s`` (the rest), ``rto``,
  ``rto_recoveries``, ``rto_time_ms``, ``retrans`` (TCP_INFO deltas over its connections),
  ``rto_time_per_recovery_s`` (the longest time one of its connections spent per recovery after
  the first timeout: above one RTO, the timer doubled).

Send order: ``same`` (every rank sends to 0, 1, 2, ... in turn, so all start by flooding the
same receiver) or ``shifted`` (rank r sends to r+1, r+2, ...: one sender per receiver at a
time).

>>> send_order(2, 4, "same"), send_order(2, 4, "shifted")
([0, 1, 3], [3, 0, 1])
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import numpy as np

from clusterlab.errors import ConfigError
from clusterlab.monitor.procfs import cpu_bound
from clusterlab.net.tcp_info import rto_counters, rto_delta

ORDERS = ("same", "shifted")
TAG = 7
COUNTERS = ("TcpRetransSegs", "TcpExtTCPTimeouts", "TcpExtTCPLossProbes", "TcpOutSegs")


def send_order(rank: int, size: int, order: str) -> list[int]:
    """The destinations of ``rank`` in the order it sends to them."""
    if order == "same":
        return [j for j in range(size) if j != rank]
    if order == "shifted":
        return [(rank + k) % size for k in range(1, size)]
    raise ConfigError(f"send order must be one of {', '.join(ORDERS)}, got {order!r}")


def tcp_counters() -> dict[str, int]:
    """This process's namespace TCP counters (nstat names)."""
    from clusterlab.monitor.procfs import parse_snmp

    out: dict[str, int] = {}
    for f in ("/proc/self/net/snmp", "/proc/self/net/netstat"):
        with open(f) as fh:
            out.update(parse_snmp(fh.read()))
    return {k: out.get(k, 0) for k in COUNTERS}


def _infos(comm) -> dict:
    """TCP_INFO of each of this rank's connections (empty off TCP)."""
    return {p: v["tcp_info"] for p, v in comm.stats().get("peers", {}).items() if v.get("tcp_info")}


def _host_queue_drops() -> Callable[[], int] | None:
    """Drops of this namespace's ``eth0`` egress queue (a testbed host), or None off a testbed."""
    from clusterlab.monitor.netlink import QdiscDrops

    try:
        reader = QdiscDrops(None)
    except OSError:
        return None
    if "eth0" not in reader.names.values():
        return None
    return lambda: reader().get("eth0", 0)


def _cpu_busy() -> tuple[int, int, int]:
    """(idle + I/O wait, spare, total) ticks of the machine (``procfs.cpu_spare``)."""
    from clusterlab.monitor.procfs import cpu_spare, cpu_total, parse_cpu

    with open("/proc/stat") as f:
        c = parse_cpu(f.read())
    return c["idle"] + c["iowait"], cpu_spare(c), cpu_total(c)


def alltoall_broadcast(comm, size: int, reps: int, order: str = "same", warmup: int = 1,
                       per_host_counters: bool = True, drops: Callable[[], dict[str, int]] | str | None = None,
                       timeout: float = 120.0, progress: str | None = None) -> list[dict] | None:
    """Run the benchmark on every rank; rank 0 returns one dict per repetition, others None.

    ``per_host_counters``: every rank reads its own namespace's TCP counters (testbed); False:
    rank 0 alone reads them (ranks share a namespace). ``drops``: on rank 0, returns the
    cumulative drop count per switch port (or the name of the switch's namespace, read with
    ``monitor.netlink.QdiscDrops``). ``progress``: rank 0 appends each finished repetition to
    this file as a JSON line, so an interrupted job still shows the repetitions it finished.
    """
    if isinstance(drops, str):
        from clusterlab.monitor.netlink import QdiscDrops

        drops = QdiscDrops(drops) if comm.rank == 0 else None
    if size < 0 or reps < 1 or warmup < 0:
        raise ConfigError(f"need size >= 0, reps >= 1, warmup >= 0 (got {size}, {reps}, {warmup})")
    # A round's barriers wait as long as its receives: a flow stalled in timeouts (seconds each
    # under dilation) holds every rank at the closing barrier.
    comm.default_timeout = max(comm.default_timeout, timeout)
    dests = send_order(comm.rank, comm.size, order)
    block = np.full(size, comm.rank % 251, dtype=np.uint8)
    peers = [j for j in range(comm.size) if j != comm.rank]
    read_counters = per_host_counters or comm.rank == 0
    host_queue = _host_queue_drops() if per_host_counters else None
    # Rank 0's record of the measured rounds, allocated (and written, so resident) before the
    # first round: what each rank sent at the gather, the machine's CPU and the switch's drops per
    # port. The result's dicts (6 KB a round at 16 ranks) are built once, at the end: kept per
    # round they grew rank 0 by 0.7 MB per 100 rounds (a 300-round soak, bench/soak.py).
    store = _Rounds(reps, comm.size) if comm.rank == 0 else None
    for rep in range(warmup + reps):
        c0 = tcp_counters() if read_counters else None
        d0 = drops() if (drops is not None and comm.rank == 0) else None
        h0 = host_queue() if host_queue else 0
        r0 = rto_counters(_infos(comm))
        cpu0 = _cpu_busy()
        comm.barrier()
        t0 = time.perf_counter()
        for d in dests:
            comm.send(d, block, TAG)
        for s in peers:
            got = comm.recv(s, TAG, timeout=timeout)
            arr = np.frombuffer(got, dtype=np.uint8) if not isinstance(got, np.ndarray) else got.view(np.uint8)
            if arr.size != size or (size and not (arr == s % 251).all()):
                raise RuntimeError(f"rank {comm.rank}: block from rank {s} is wrong "
                                   f"({arr.size} bytes, expected {size} bytes of {s % 251})")
        comm.barrier()
        elapsed = time.perf_counter() - t0
        cpu1 = _cpu_busy()
        rd = rto_delta(r0, rto_counters(_infos(comm)))
        c1 = tcp_counters() if read_counters else None
        d1 = drops() if (drops is not None and comm.rank == 0) else None
        h1 = host_queue() if host_queue else 0
        t = rd["total"]
        mine = ([elapsed] + ([c1[k] - c0[k] for k in COUNTERS] if read_counters else [-1] * len(COUNTERS))
                + [rd["rto_wait_s"], t["total_rto"], t["total_rto_recoveries"], t["total_rto_time_ms"],
                   t["total_retrans"], h1 - h0, rd["rto_time_per_recovery_s"]])
        allv = comm.gather(np.array(mine, dtype=np.float64), root=0)
        if comm.rank != 0 or rep < warmup:
            continue
        i = rep - warmup
        for r, v in enumerate(allv):
            store.m[i, r] = np.asarray(v, dtype=np.float64)
        ticks = max(1, cpu1[2] - cpu0[2])
        store.cpu[i] = (round((cpu1[0] - cpu0[0]) / ticks, 3), round((cpu1[1] - cpu0[1]) / ticks, 3))
        if d0 is not None:
            store.put_drops(i, {p: int(d1.get(p, 0) - d0.get(p, 0)) for p in d1})
        if progress:
            with open(progress, "a") as f:  # one write per line: a kill leaves whole lines
                f.write(json.dumps(store.row(i, per_host_counters)) + "\n")
    return [store.row(i, per_host_counters) for i in range(reps)] if comm.rank == 0 else None


class _Rounds:
    """Rank 0's record of ``reps`` rounds of ``size`` ranks in arrays allocated at the start
    (``m``: what each rank gathered, ``1 + len(COUNTERS) + 7`` numbers; ``cpu``: idle and spare
    shares; the switch's drops per port), and the row of the result each round becomes."""

    def __init__(self, reps: int, size: int):
        self.m = np.full((reps, size, len(COUNTERS) + 8), np.nan)  # full, not empty: its pages resident now
        self.cpu = np.full((reps, 2), np.nan)
        self.ports: tuple | None = None  # the switch's ports, as the first round's drops named them
        self.drops: np.ndarray | None = None
        self.other_drops: dict[int, dict] = {}  # a round whose ports differ from the first's (not seen)

    def put_drops(self, i: int, per_port: dict[str, int]) -> None:
        if self.ports is None:
            self.ports = tuple(per_port)
            self.drops = np.full((len(self.m), len(self.ports)), -1, dtype=np.int64)
        if tuple(per_port) == self.ports:
            self.drops[i] = list(per_port.values())
        else:
            self.other_drops[i] = per_port

    def row(self, i: int, per_host_counters: bool) -> dict:
        m = self.m[i]
        row = {"rep": i, "seconds": float(m[:, 0].max()), "rank0_seconds": float(m[0, 0]),
               "cpu_idle": float(self.cpu[i, 0]), "cpu_spare": float(self.cpu[i, 1])}
        rows = m if per_host_counters else m[:1]
        for j, k in enumerate(COUNTERS, start=1):
            name = {"TcpRetransSegs": "retransmissions", "TcpExtTCPTimeouts": "timeouts",
                    "TcpExtTCPLossProbes": "loss_probes", "TcpOutSegs": "segments"}[k]
            row[name] = int(rows[:, j].sum())
            if per_host_counters and name in ("retransmissions", "timeouts"):
                row[f"{name}_per_host"] = [int(x) for x in rows[:, j]]
        per_port = self.other_drops.get(i)
        if per_port is None and self.ports is not None:
            per_port = {p: int(x) for p, x in zip(self.ports, self.drops[i], strict=True)}
        if per_port is not None:
            row["drops"] = sum(per_port.values())
            row["drops_per_port"] = per_port
        n = len(COUNTERS) + 1
        if per_host_counters:
            row["host_drops_per_host"] = [int(x) for x in m[:, n + 5]]
            row["host_drops"] = int(m[:, n + 5].sum())
        row["ranks"] = [{"rank": r, "seconds": round(float(v[0]), 6), "rto_wait_s": round(float(v[n]), 6),
                         "transfer_s": round(max(0.0, float(v[0] - v[n])), 6), "rto": int(v[n + 1]),
                         "rto_recoveries": int(v[n + 2]), "rto_time_ms": int(v[n + 3]), "retrans": int(v[n + 4]),
                         "rto_time_per_recovery_s": round(float(v[n + 6]), 6)}
                        for r, v in enumerate(m)]
        return row


def summarize(reps: list[dict]) -> dict:
    """Median/min/max seconds and totals over repetitions.

    >>> summarize([{"seconds": 0.1, "retransmissions": 2, "timeouts": 1},
    ...            {"seconds": 0.3, "retransmissions": 0, "timeouts": 0}])["median_seconds"]
    0.2
    """
    s = np.array([r["seconds"] for r in reps])
    out = {"median_seconds": float(np.median(s)), "min_seconds": float(s.min()), "max_seconds": float(s.max()),
           "retransmissions": int(sum(r.get("retransmissions", 0) for r in reps)),
           "timeouts": int(sum(r.get("timeouts", 0) for r in reps))}
    if any("drops" in r for r in reps):
        out["drops"] = int(sum(r.get("drops", 0) for r in reps))
    if any("host_drops" in r for r in reps):
        out["host_drops"] = int(sum(r.get("host_drops", 0) for r in reps))
    if all("ranks" in r for r in reps) and reps:
        # the slowest rank of each repetition: how much of its time was RTO waiting
        slow = [max(r["ranks"], key=lambda x: x["seconds"]) for r in reps]
        out["median_slowest_rank_rto_wait_s"] = float(np.median([x["rto_wait_s"] for x in slow]))
        # the RTO wait is the sender's: the longest any rank's connections waited in a round
        out["median_max_rto_wait_s"] = float(np.median([max(x["rto_wait_s"] for x in r["ranks"]) for r in reps]))
    return out


def undilate(reps: list[dict], dilation: float) -> list[dict]:
    """Report a dilated run's times in undilated seconds (divided by ``dilation``), in place."""
    k = float(dilation)
    for r in reps:
        for key in ("seconds", "rank0_seconds"):
            if key in r:
                r[key] /= k
        for x in r.get("ranks", []):
            for key in ("seconds", "rto_wait_s", "transfer_s"):
                x[key] = round(x[key] / k, 6)
            x["rto_time_ms"] = round(x["rto_time_ms"] / k, 3)
    return reps


def line_rate_seconds(ranks: int, size: int, rate_bps: float) -> float:
    """The ideal round: every rank receives ``ranks - 1`` blocks at the link rate.

    >>> round(line_rate_seconds(16, 50_000, 155e6), 4), round(line_rate_seconds(100, 50_000, 155e6), 4)
    (0.0387, 0.2555)
    """
    return (ranks - 1) * size * 8 / rate_bps


def run_broadcast(size: int, reps: int, *, cluster, transport=None, ranks: int | None = None,
                  order: str = "same", warmup: int = 1, timeout: float = 1800.0) -> dict:
    """One point of the benchmark, from Python, on ``cluster`` (a ``clusterlab.cluster.Cluster``):
    a namespace testbed's hosts (``Testbed(tb)``: each rank reads its host's counters and the
    switch's drops; root) or ``ranks`` local loopback ranks (``Local()``). ``transport``: a
    ``TransportConfig`` (or its text, ``TransportConfig.parse``) for the local ranks' sockets;
    a testbed's ranks get the testbed's own.

    Returns ``{"settings", "reps", "summary"}`` with times undilated, the line-rate ideal,
    and the repetitions whose machine was CPU-bound (idle < 15%: they measured the CPU)."""
    from clusterlab.net.transport_config import TransportConfig

    tb = getattr(cluster, "testbed", None)  # the namespace testbed, whose hosts and switch are read
    if tb is not None:
        if transport is not None:
            raise ConfigError("a testbed's ranks run with the testbed's TCP settings: give them to the testbed")
        transport = tb.transport
    elif transport is None or isinstance(transport, str):
        transport = TransportConfig.parse(transport, place="socket")
    settings = {"size": size, "reps": reps, "warmup": warmup, "order": order, "transport": transport.to_text()}
    with open("/proc/loadavg") as f:
        settings["loadavg_before"] = f.read().split()[:3]
    if tb is None:
        n = ranks or 4
        out = cluster.run(alltoall_broadcast, n, size, reps, order, warmup, False, None, transport=transport,
                          timeout=timeout)[0]
        settings.update(cluster=cluster.name, ranks=n)
    else:
        topo = tb.topo
        n = ranks or topo.hosts
        settings.update(cluster="testbed", testbed=tb.name, hosts=topo.hosts, ranks=n, topo=topo.to_dict(),
                        rto_min_us_per_host=[tb.sysctls[h.name].get("net/ipv4/tcp_rto_min_us") for h in tb.hosts],
                        rto_max_ms_per_host=[tb.sysctls[h.name].get("net/ipv4/tcp_rto_max_ms") for h in tb.hosts])
        # starting many interpreters on a busy machine takes long: scale the set-up timeout
        out = cluster.run(alltoall_broadcast, n, size, reps, order, warmup, True, tb.switch.ns, timeout=timeout,
                          setup_timeout=max(60.0, 3.0 * n))[0]
        undilate(out, topo.dilation)
        settings["line_rate_seconds"] = line_rate_seconds(n, size, topo.rate_bps)
    with open("/proc/loadavg") as f:
        settings["loadavg_after"] = f.read().split()[:3]
    settings["cpu_bound_reps"] = [r["rep"] for r in out if cpu_bound(r)]
    return {"settings": settings, "reps": out, "summary": summarize(out)}
