"""Seed 001's workloads on an iSCSI target (issue 13): the bonnie-style block benchmark and
mining that reads its data from the target, as study workloads.

The point's testbed gives the hosts: the **last** host runs the target (tgtd), the first
``ranks`` hosts are the initiators (or the miners), so a study sets ``hosts`` to at least the
largest rank count + 1. Both are real I/O and computation: not dilatable.

``iscsi_bonnie``: per repetition, every initiator writes ``size`` bytes to its own LUN in
``block``-byte commands, all at once, then reads them back (checked); row: aggregate and
per-initiator MB/s of each phase, with the bottleneck the monitor named
(``clusterlab.bench.storage.phase_usage``), and the same block loop on a local file
(``local_write_mbps``, ``local_read_mbps``, first repetition of each point).

``mining_from_target``: the data (a FIMI file, or a generator name with a size such as
``T10I4N1000D100K:1M``: 1000 items, as the seed's) is written once per point to a shared LUN, one region per rank
(``clusterlab.storage.source``); per repetition the job reads its partitions from the target
(``seconds``: job time, read to result) and, with ``compare_local``, the same job reads the
local file (``local_seconds``); the itemsets must be equal.

>>> iscsi_bonnie(size="8MB").params["size"], mining_from_target().params["algorithm"]
('8MB', 'hpa')
"""

from __future__ import annotations

import contextlib

from clusterlab.errors import ConfigError
from clusterlab.experiments.spec import Workload

ALGORITHMS = ("hpa", "pfp", "cd", "hpa-eld")


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
                       backing_rate: str | None = None, compare_local: bool = True) -> Workload:
    """HPA/PFP/CD reading their partitions from the target."""
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    _rate(backing_rate)
    return Workload("mining_from_target", {"job": "mining", "data": data, "min_support": float(min_support),
                                           "algorithm": algorithm, "backing_rate": backing_rate or "none",
                                           "compare_local": bool(compare_local)}, dilatable=False)


def _hosts(session):
    tb = session.testbed
    if session.kind != "testbed" or tb is None:
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
    local = local_baseline(size, block, bonnie=False)
    with IscsiTarget(tb, host=st, clients=clients, lun_size=size, backing_bps=backing) as target:
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
                       "read_vs_local": round(rd["aggregate_mbps"] / n / local["read_mbps"], 4),
                       "write_vs_local": round(w["aggregate_mbps"] / n / local["write_mbps"], 4)}
        finally:
            for lun in luns:
                with contextlib.suppress(Exception):
                    lun.close()


def _mining(session, params, reps, warmup):
    from clusterlab.cluster.testbed.node import in_netns
    from clusterlab.cluster.testbed.storage import IscsiTarget
    from clusterlab.experiments.workloads.mining import resolve_data
    from clusterlab.mining.parallel.driver import run_parallel
    from clusterlab.storage.source import lun_bytes_needed, partition_ranges, write_partitions

    tb, st, clients = _hosts(session)
    n = len(clients)
    path = resolve_data(params["data"], session.cache_dir)
    lengths = [e - s for s, e in partition_ranges(path, n)]
    with IscsiTarget(tb, host=st, clients=clients, lun_size=lun_bytes_needed(lengths), shared=True,
                     backing_bps=_rate(params["backing_rate"])) as target:
        url = target.luns[0]["url"]
        with in_netns(clients[0].ns):
            write_partitions(url, path, n)
        for i in range(warmup + reps):
            r = run_parallel(url, n, params["algorithm"], params["min_support"], testbed=tb.name)
            row = {"rep": i - warmup, "initiators": n, "seconds": r.job_s, "wall_seconds": r.wall_s,
                   "read_seconds": max(x.get("read_s", 0.0) for x in r.ranks), "passes": len(r.passes),
                   "itemsets": r.table.num_rows, "bytes": sum(lengths)}
            if params["compare_local"]:
                loc = run_parallel(path, n, params["algorithm"], params["min_support"], testbed=tb.name)
                if not loc.table.equals(r.table):
                    raise OSError(f"{params['algorithm']}: itemsets mined from the target differ from the file's")
                row.update(local_seconds=loc.job_s, local_read_seconds=max(x.get("read_s", 0.0) for x in loc.ranks),
                           iscsi_vs_local=round(r.job_s / loc.job_s, 3) if loc.job_s else None)
            if i >= warmup:
                yield row


def execute(session, params: dict, reps: int, warmup: int):
    if params.get("job") == "bonnie":
        yield from _bonnie(session, params, reps, warmup)
    elif params.get("job") == "mining":
        yield from _mining(session, params, reps, warmup)
    else:
        raise ConfigError(f"unknown storage job {params.get('job')!r}")
