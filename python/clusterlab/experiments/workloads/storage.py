"""Seed 001's workloads on an iSCSI target (issue 13): the bonnie-style block benchmark and
mining that reads its data from the target, as study workloads.

The point's testbed gives the hosts: the **last** host runs the target (tgtd), the first
``ranks`` hosts are the initiators (or the miners), so a study sets ``hosts`` to at least the
largest rank count + 1. Both are real I/O and computation: not dilatable.

``iscsi_bonnie``: per repetition, every initiator writes ``size`` bytes to its own LUN in
``block``-byte commands, all at once, then reads them back (checked); row: aggregate and
per-initiator MB/s of each phase, with the bottleneck the monitor named
(``clusterlab.bench.storage.phase_usage``), and the same block loop on a local file
(``local_write_mbps``, ``local_read_mbps``, once per point): with ``backing_rate`` a disk of
that rate (``IscsiTarget.local_disk_baseline``: direct I/O under the same limit, as the seed's
local RAID), without it the page cache (``local_backing_rate``: ``none``).

``mining_from_target``: the data (a FIMI file, or a generator name with a size such as
``T10I4N1000D100K:1M``: 1000 items, as the seed's) is written once per point to a shared LUN, one region per rank
(``clusterlab.storage.source``; ``layout``: ``packed``, varint-delta baskets, about a third of
the text's bytes, or ``fimi``, the text); per repetition the job reads its partitions from the target
(``seconds``: job time, read to result) and, with ``compare_local``, the same job reads the
local file (``local_seconds``); the itemsets must be equal. ``rescan``: HPA reads its
partition from the target again every pass (``ParallelConfig.rescan``, as the seed's; PFP and
CD read once). ``bonnie``: while the job runs, every initiator host also runs the bonnie-style
loop (write then read ``bonnie_size`` bytes of its own region of the LUN, over and over) as
seed 001's Figs. 10-15 ran bonnie++ beside the miners; row: ``bonnie_mbps`` (all
initiators). ``network``: ``consolidated`` (iSCSI on the compute switch, as the seed) or
``san`` (a second switch, ``SanNetwork``). Each job runs under a monitor of its own with
per-host CPU: the target's link (``st_tx_mbps``, ``st_rx_mbps``), its CPU (``target_cpu``,
cores) and threads waiting for the disk (``target_io_wait_threads``), the backing store's
MB/s, the first initiator's user CPU and waiting threads (``initiator_user_cpu``,
``initiator_io_wait_threads``: the libiscsi initiator waits for the target in poll(), which
the kernel counts as idle, not I/O wait, so ``io_share``, the share of the job the slowest
rank spent reading and rescanning, stands for the seed's "WAIT CPU"), and the bottleneck
named as ``bench.storage.phase_usage`` does.

The study's own monitor (``experiments.runner``) asks ``execute.monitor_options`` how to watch
these workloads: per-host CPU and the target's backing store, filed under the target's host,
so that the study's report draws seed 001's Ganglia-style panels for every point.

>>> iscsi_bonnie(size="8MB").params["size"], mining_from_target().params["algorithm"]
('8MB', 'hpa')
"""

from __future__ import annotations

import contextlib
import threading
import time

from clusterlab.errors import ConfigError
from clusterlab.experiments.spec import Workload

ALGORITHMS = ("hpa", "pfp", "cd", "hpa-eld")
NETWORKS = ("consolidated", "san")
BONNIE_CHUNK = 4 << 20  # the background bonnie loop moves this much per call (then checks for the end)


def _rate(text: str | None) -> int | None:
    from clusterlab.units import parse_size

    if text in (None, "", "none"):
        return None
    try:
        return parse_size(text)
    except ConfigError as e:
        raise ConfigError(f"backing_rate: {e}") from None


def iscsi_bonnie(size: str = "32MB", block: str = "64KB", connections: int = 4,
                 backing_rate: str | None = None) -> Workload:
    """Sequential block write then read over iSCSI by every initiator at once."""
    from clusterlab.units import parse_size

    if parse_size(block) <= 0 or parse_size(block) % 512 or parse_size(size) % parse_size(block):
        raise ConfigError(f"block must be a positive multiple of 512 that divides size (got {block}, {size})")
    if not 1 <= int(connections) <= 64:
        raise ConfigError(f"connections must be 1..64, got {connections}")
    _rate(backing_rate)
    return Workload("iscsi_bonnie", {"job": "bonnie", "size": size, "block": block, "connections": int(connections),
                                     "backing_rate": backing_rate or "none"}, dilatable=False)


def mining_from_target(data: str = "T10I4N1000D100K:1M", min_support: float = 0.01, algorithm: str = "hpa",
                       backing_rate: str | None = None, compare_local: bool = True, rescan: bool = True,
                       bonnie: bool = False, bonnie_size: str = "16MiB", network: str = "consolidated",
                       layout: str = "packed") -> Workload:
    """HPA/PFP/CD reading their partitions from the target (with bonnie beside, optionally);
    ``layout``: how the LUN holds them, ``packed`` (varint-delta baskets) or ``fimi`` (text)."""
    from clusterlab.storage.source import check_layout
    from clusterlab.units import parse_size

    check_layout(layout)
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    if network not in NETWORKS:
        raise ConfigError(f"network must be one of {', '.join(NETWORKS)}, got {network!r}")
    if parse_size(bonnie_size) < BONNIE_CHUNK or parse_size(bonnie_size) % BONNIE_CHUNK:
        raise ConfigError(f"bonnie_size must be a multiple of {BONNIE_CHUNK} bytes (4 MiB), got {bonnie_size}")
    _rate(backing_rate)
    return Workload("mining_from_target", {"job": "mining", "data": data, "min_support": float(min_support),
                                           "algorithm": algorithm, "backing_rate": backing_rate or "none",
                                           "compare_local": bool(compare_local), "rescan": bool(rescan),
                                           "bonnie": bool(bonnie), "bonnie_size": bonnie_size, "network": network,
                                           "layout": layout},
                    dilatable=False)


def _hosts(session):
    tb = session.testbed
    if tb is None:  # only a testbed point has one
        raise ConfigError("the storage workloads run on a testbed (cluster=Testbed(...))")
    if session.ranks >= len(tb.hosts):
        raise ConfigError(f"{session.ranks} initiators and a storage host need hosts >= {session.ranks + 1}, "
                          f"the testbed has {len(tb.hosts)}")
    return tb, tb.hosts[-1], tb.hosts[:session.ranks]


def _bonnie(session, params, reps, warmup):
    from clusterlab.bench.storage import bonnie_phases, local_baseline, open_all
    from clusterlab.cluster.testbed.storage import IscsiTarget
    from clusterlab.units import parse_size

    tb, st, clients = _hosts(session)
    size, block = parse_size(params["size"]), parse_size(params["block"])
    backing = _rate(params["backing_rate"])
    with IscsiTarget(tb, host=st, clients=clients, lun_size=size, backing_bps=backing) as target:
        # the local file: with a throttled backing store, a disk of that rate (direct I/O, the
        # same limit); without one the page cache, as the target's unthrottled LUNs use
        local = target.local_disk_baseline(size, block) if backing else local_baseline(size, block, bonnie=False)
        luns = open_all(tb, target, len(clients), connections=params["connections"])
        try:
            for i in range(warmup + reps):
                r = bonnie_phases(tb, target, luns, len(clients), size, block, seed=i,
                                  rate_bps=tb.topo.rate_bps, backing_bps=backing)
                if i < warmup:
                    continue
                w, rd = r["write"], r["read"]
                n = len(clients)
                yield {"rep": i - warmup, "initiators": n,
                       "seconds": max(x["seconds"] for x in w["per_initiator"])
                       + max(x["seconds"] for x in rd["per_initiator"]),
                       "write_mbps": w["aggregate_mbps"], "read_mbps": rd["aggregate_mbps"],
                       "write_mbps_per_initiator": round(w["aggregate_mbps"] / n, 2),
                       "read_mbps_per_initiator": round(rd["aggregate_mbps"] / n, 2),
                       "write_bottleneck": w["monitor"]["bottleneck"], "read_bottleneck": rd["monitor"]["bottleneck"],
                       "target_cpu_write": w["monitor"].get("target_cpu"),
                       "target_cpu_read": rd["monitor"].get("target_cpu"),
                       "st_link_utilization_read": rd["monitor"]["st_link_utilization"],
                       "local_write_mbps": local["write_mbps"], "local_read_mbps": local["read_mbps"],
                       "local_backing_rate": params["backing_rate"] if backing else "none",
                       "read_vs_local": round(rd["aggregate_mbps"] / n / local["read_mbps"], 4),
                       "write_vs_local": round(w["aggregate_mbps"] / n / local["write_mbps"], 4)}
        finally:
            for lun in luns:
                with contextlib.suppress(Exception):
                    lun.close()


class _BackgroundBonnie:
    """Every client host writes then reads its own ``size``-byte region of the shared LUN from
    ``base`` on, over and over, in 64 KB commands (4 in flight), until stopped: bonnie++ beside
    the miners. ``mbps``: all bytes moved / the time it ran."""

    def __init__(self, lun: dict, clients: list, base: int, size: int):
        self.lun, self.clients, self.base, self.size = lun, clients, base, size
        self.stop, self.moved, self.errors, self.threads = threading.Event(), [0] * len(clients), [], []

    def _run(self, i: int, host) -> None:
        from clusterlab.net.netns import in_netns
        from clusterlab.storage.iscsi import open_lun

        try:
            with in_netns(host.ns), open_lun(self.lun["portal"], self.lun["iqn"], self.lun["lun"],
                                             connections=4) as lun:
                region = self.base + i * self.size
                while not self.stop.is_set():
                    for op in (lun.write_sequential, lun.read_sequential):
                        for pos in range(region, region + self.size, BONNIE_CHUNK):
                            if self.stop.is_set():
                                return
                            tr = op(BONNIE_CHUNK, block=64 << 10, offset=pos, seed=i)
                            if tr.bad_blocks:
                                raise OSError(f"{host.name}: bonnie read back {tr.bad_blocks} bad blocks")
                            self.moved[i] += tr.nbytes
        except Exception as e:  # reported by stop()
            self.errors.append(f"{host.name}: {e}")

    def __enter__(self):
        self.t0 = time.monotonic()
        for i, h in enumerate(self.clients):
            t = threading.Thread(target=self._run, args=(i, h), name=f"bonnie-{h.name}", daemon=True)
            t.start()
            self.threads.append(t)
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)
        self.mbps = round(sum(self.moved) / max(time.monotonic() - self.t0, 1e-9) / 1e6, 2)
        if exc[0] is None and self.errors:
            raise OSError("; ".join(self.errors))


def _job_usage(tbl, st, first, rate_bps, backing_bps, port) -> dict:
    """``phase_usage`` of one job, plus the first initiator's user CPU and waiting threads."""
    from clusterlab.bench.storage import phase_usage

    u = phase_usage(tbl, st.name, rate_bps, backing_bps, port)
    u["monitored_seconds"] = u.pop("seconds")  # the job's wall time as sampled; "seconds" is the job's own
    rows = [r for r in tbl.to_pylist() if r["node"] == first.name]

    def mean(metric):
        v = [r["value"] for r in rows if r["metric"] == metric]
        return round(sum(v) / len(v), 3) if v else 0.0

    u["initiator_user_cpu"], u["initiator_io_wait_threads"] = mean("host_cpu_user"), mean("host_io_wait")
    return u


def _mining(session, params, reps, warmup):
    from clusterlab.cluster import Testbed
    from clusterlab.cluster.testbed.storage import IscsiTarget, SanNetwork
    from clusterlab.experiments.workloads.mining import resolve_data
    from clusterlab.mining.parallel.config import ParallelConfig
    from clusterlab.mining.parallel.driver import RESCANNING, run_parallel
    from clusterlab.monitor.sampler import Monitor
    from clusterlab.net.netns import in_netns
    from clusterlab.storage.source import lun_bytes_needed, partition_ranges, write_partitions
    from clusterlab.units import parse_size

    tb, st, clients = _hosts(session)
    n = len(clients)
    path = resolve_data(params["data"], session.cache_dir)
    lengths = [e - s for s, e in partition_ranges(path, n)]
    backing = _rate(params["backing_rate"])
    bonnie_size = parse_size(params.get("bonnie_size", "16MiB")) if params.get("bonnie") else 0
    base = -(-lun_bytes_needed(lengths) // BONNIE_CHUNK) * BONNIE_CHUNK
    config = ParallelConfig(rescan=bool(params.get("rescan")) and params["algorithm"] in RESCANNING)
    san = params.get("network", "consolidated") == "san"
    with contextlib.ExitStack() as stack:
        net = stack.enter_context(SanNetwork(tb)) if san else None
        target = stack.enter_context(IscsiTarget(tb, host=st, clients=clients, lun_size=base + n * bonnie_size,
                                                 shared=True, backing_bps=backing, san=net))
        url = target.luns[0]["url"]
        with in_netns(clients[0].ns):
            stored = write_partitions(url, path, n, layout=params["layout"])
        for i in range(warmup + reps):
            mon = Monitor.for_testbed(tb, interval=0.2, capture=False, host_cpu=True,
                                      backing=target.backing_io if backing is not None else None,
                                      ifaces=("eth0", "eth1") if san else ("eth0",), storage_host=st.name)
            bonnie = _BackgroundBonnie(target.luns[0], clients, base, bonnie_size) if bonnie_size else None
            with mon, bonnie or contextlib.nullcontext():
                r = run_parallel(url, n, params["algorithm"], params["min_support"], cluster=Testbed(tb), config=config)
            row = {"rep": i - warmup, "initiators": n, "seconds": r.job_s, "wall_seconds": r.wall_s,
                   "read_seconds": max(x.get("read_s", 0.0) for x in r.ranks), "passes": len(r.passes),
                   "rescan_seconds": sum(p.get("t_scan", 0.0) for p in r.passes[1:]) if config.rescan else 0.0,
                   "itemsets": r.table.num_rows, "bytes": sum(lengths), "rescan": config.rescan,
                   "layout": params["layout"], "stored_bytes": sum(x.length for x in stored),
                   "bonnie_mbps": bonnie.mbps if bonnie else 0.0,
                   **_job_usage(mon.table(), st, clients[0], tb.topo.rate_bps, backing,
                                None if san else st.port)}
            # the share of the job the slowest rank spent waiting for the target (reads and rescans): what
            # the seed's Ganglia shows as the initiator's I/O wait (a userspace initiator waits in poll(), idle)
            row["io_share"] = round((row["read_seconds"] + row["rescan_seconds"]) / r.job_s, 3) if r.job_s else 0.0
            if params["compare_local"]:
                loc = run_parallel(path, n, params["algorithm"], params["min_support"], cluster=Testbed(tb), config=config)
                if not loc.table.equals(r.table):
                    raise OSError(f"{params['algorithm']}: itemsets mined from the target differ from the file's")
                row.update(local_seconds=loc.job_s, local_read_seconds=max(x.get("read_s", 0.0) for x in loc.ranks),
                           iscsi_vs_local=round(r.job_s / loc.job_s, 3) if loc.job_s else None)
            if i >= warmup:
                yield row


def monitor_options(tb) -> dict:
    """How a study's monitor watches these workloads on testbed ``tb``: every host's CPU and the
    backing store of the target, which runs on the last host (``Monitor.for_testbed`` keywords);
    no packet capture: at 1 Gbit/s of iSCSI it would take CPU from target and initiators. ``eth1``
    too: with ``network=san`` the iSCSI traffic takes the second switch's interfaces, which
    appear after the monitor has started (it reads interfaces by name as they come)."""
    import functools

    from clusterlab.cluster.testbed.storage import backing_io

    return {"host_cpu": True, "backing": functools.partial(backing_io, tb.name), "storage_host": tb.hosts[-1].name,
            "capture": False, "ifaces": ("eth0", "eth1")}


def execute(session, params: dict, reps: int, warmup: int):
    if params.get("job") == "bonnie":
        yield from _bonnie(session, params, reps, warmup)
    elif params.get("job") == "mining":
        yield from _mining(session, params, reps, warmup)
    else:
        raise ConfigError(f"unknown storage job {params.get('job')!r}")


execute.monitor_options = monitor_options
