"""The storage benchmarks as one call each, on a testbed and an iSCSI target they build:
``run`` (bonnie-style block I/O, ``clusterlab bench storage``; issue 13, seed 001 Fig. 4) and
``mining_from_target`` (mining a LUN against the local file). The measurements are
``clusterlab.bench.storage``'s.

Nothing is left running: the target and the testbed are removed on return, on exceptions and on
Ctrl-C (``with`` blocks; SIGTERM and SIGHUP unwind them too, so the target goes before the
testbed; atexit is covered by the testbed, whose removal kills tgtd; ``clean_storage`` removes
its files).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time

from clusterlab.bench.storage import (
    MINING_CASES,
    UNSHAPED_RATE,
    _load,
    _open_all,
    _read_cost,
    _terminate_unwinds,
    bonnie_phases,
    local_baseline,
    tcp_baseline,
    timed_job,
)
from clusterlab.errors import ConfigError


def run(hosts: int = 8, initiators: list[int] | None = None, size: int = 64 << 20, block: int = 64 << 10,
        rate: str | None = "155Mbit", baseline: bool = True, bonnie: bool = True, seed: int = 0,
        name: str | None = None, timeout: int = 30, direct: bool = False, connections: int = 4,
        monitor: bool = True, backing_bps: int | None = None, san: bool = False, tcp: bool = True) -> dict:
    """The benchmark as one call (needs root, tgt, libiscsi). ``rate`` None: unshaped links.
    ``connections``: sessions per initiator, i.e. commands in flight (1: one at a time).
    ``monitor``: sample the testbed during each phase (``phase_usage``: the bottleneck).
    ``backing_bps``: throttle the target's backing store to that many bytes/s (read and write).
    ``san``: iSCSI on a second switch (``SanNetwork``) instead of the compute switch.
    ``tcp``: also measure one iperf3 stream each way between the target's host and h0 on the
    same links before the first count's phases (``tcp_baseline``; the links are the same for
    every count, so each run row carries that one measurement).

    Returns ``{"config", "load", "runs": [{"initiators", "write": {...}, "read": {...}}],
    "local": {...}}``; every run's read blocks are checked (``bad_blocks`` must be 0).
    """
    from clusterlab.cluster.testbed import StarTopo, TestbedNetwork
    from clusterlab.cluster.testbed.storage import IscsiTarget, SanNetwork, clean_storage

    initiators = initiators or [1]
    if max(initiators) > hosts:
        raise ConfigError(f"--initiators up to {max(initiators)} needs --hosts >= {max(initiators)}, got {hosts}")
    if block <= 0 or block % 512 or size % block:
        raise ConfigError(f"--block must be a positive multiple of 512 that divides --size (got {block}, {size})")
    res = {"config": {"hosts": hosts, "initiators": initiators, "size": size, "block": block,
                      "rate": rate or f"unshaped ({UNSHAPED_RATE} htb)", "direct": direct,
                      "connections": connections, "backing_bps": backing_bps,
                      "network": "separate SAN switch" if san else "consolidated (one switch)"},
           "load_before": _load(), "runs": []}
    topo = StarTopo(hosts=max(2, hosts), rate=rate or UNSHAPED_RATE, storage=True)
    tb = TestbedNetwork(topo, name=name)
    try:
        with _terminate_unwinds(), tb, (SanNetwork(tb) if san else contextlib.nullcontext()) as sannet, \
                IscsiTarget(tb, initiators=max(initiators), lun_size=size, direct=direct, backing_bps=backing_bps,
                            san=sannet) as target:
            luns = _open_all(tb, target, max(initiators), timeout, connections)
            try:
                yardstick = None
                if tcp and not san:
                    h0 = tb.host(target.luns[0]["client"])
                    yardstick = {"to_target": tcp_baseline(tb, target.host, h0),
                                 "from_target": tcp_baseline(tb, target.host, h0, reverse=True)}
                for n in initiators:
                    run_n = {"initiators": n, "load": _load()}
                    if yardstick is not None:
                        run_n["tcp"] = yardstick
                    run_n.update(bonnie_phases(tb, target, luns, n, size, block, seed, monitor=monitor,
                                               rate_bps=topo.rate_bps if rate else None, backing_bps=backing_bps,
                                               ifaces=("eth0", "eth1") if san else ("eth0",)))
                    res["runs"].append(run_n)
            finally:
                for lun in luns:
                    if lun is not None:
                        with contextlib.suppress(Exception):
                            lun.close()
    finally:
        clean_storage(tb.name)
    if baseline:
        res["local"] = local_baseline(size, block, bonnie=bonnie)
    res["load_after"] = _load()
    return res


def mining_from_target(data, nodes: int = 4, algorithms: tuple = ("hpa", "hpa-rescan", "pfp", "cd"),
                       min_support=0.01, rate: str | None = "1Gbit", reps: int = 1, name: str | None = None,
                       backing_bps: int | None = None, block: int | None = None, iothreads: int | None = None,
                       bstype: str = "rdwr", offloads: bool = False, connections: int | None = None,
                       layouts: tuple = ("packed",), tbf_bucket: str | None = None,
                       congestion: str | None = None) -> dict:
    """Mine FIMI file ``data`` on ``nodes`` testbed hosts per layout, algorithm and
    repetition three ways: each rank reading its partition from the local FIMI file
    (``local``), from the same LUN layout in a local file (``local_layout``: a ``lunfile://``
    URL, so that what the network path costs stays visible), and from a shared LUN on ``st``
    (``iscsi``; ``clusterlab.storage.source``). ``layouts``: ``packed`` and/or ``fimi``, the
    LUN rewritten in each in turn within a repetition (interleaved). ``algorithms``: names of
    ``MINING_CASES`` (``hpa-rescan``: HPA reading its share again every pass,
    ``ParallelConfig.rescan``, from any of the three). Per job: the time (slowest rank, read to
    result), the slowest rank's read (``read_s``; with a rescan, the passes' reads too:
    ``rescan_s``), ``mine_s`` (job - read), tgtd's CPU seconds, the machine's busy CPU
    seconds; per row the ratios iSCSI / local FIMI file and iSCSI / local layout file and the
    stored bytes of one read; the itemsets must be equal. ``block``: bytes per READ command
    (default 64 KiB, the seed's reads); ``connections``: the commands each rank keeps in flight
    (default the URL's, 4). ``iothreads``, ``bstype``: tgtd's own settings (``IscsiTarget``).
    ``offloads``: leave the testbed's TSO/GSO/GRO on (it turns them off so that links carry
    MTU-sized packets; on, the emulated switch moves up to 64 KB per packet, as a NIC's
    offloads spare a real host's CPU). ``tbf_bucket``: the links' token bucket (``StarTopo``;
    None: the default for the rate); ``congestion``: the storage host's TCP congestion control
    (``IscsiTarget``). Per row also what the target's path adds (``_read_cost``)."""
    from clusterlab.cluster import Testbed as OnTestbed
    from clusterlab.cluster.testbed import StarTopo, TestbedNetwork
    from clusterlab.cluster.testbed.link import burst_bytes
    from clusterlab.cluster.testbed.storage import IscsiTarget, clean_storage
    from clusterlab.net.netns import in_netns
    from clusterlab.storage.source import (
        CONNECTIONS,
        FILE_SCHEME,
        READ_BLOCK,
        check_layout,
        lun_bytes_needed,
        partition_ranges,
        write_partitions,
    )

    for a in algorithms:
        if a not in MINING_CASES:
            raise ConfigError(f"unknown mining case {a!r}; choose from {', '.join(MINING_CASES)}")
    for lay in layouts:
        check_layout(lay)
    lengths = [e - s for s, e in partition_ranges(data, nodes)]
    res = {"config": {"data": str(data), "bytes": sum(lengths), "nodes": nodes, "min_support": min_support,
                      "rate": rate or "unshaped", "backing_bps": backing_bps, "block": block or READ_BLOCK,
                      "connections": connections or CONNECTIONS, "iothreads": iothreads, "bstype": bstype,
                      "offloads": offloads, "layouts": list(layouts), "cores": os.cpu_count(),
                      "congestion": congestion},
           "load_before": _load(), "runs": [], "write_seconds": {}, "stored_bytes": {}}
    topo = StarTopo(hosts=nodes, rate=rate or UNSHAPED_RATE, storage=True, tbf_bucket=tbf_bucket)
    res["config"]["tbf_bucket_bytes"] = burst_bytes(topo)
    tb = TestbedNetwork(topo, name=name, offloads_off=not offloads)
    images = tempfile.TemporaryDirectory(prefix="clab-lun-images-", dir="/var/tmp")
    try:
        with _terminate_unwinds(), images, tb, IscsiTarget(tb, initiators=nodes, lun_size=lun_bytes_needed(lengths),
                                                           shared=True, backing_bps=backing_bps, iothreads=iothreads,
                                                           bstype=bstype, congestion=congestion) as tgt:
            lun_url = tgt.luns[0]["url"]
            query = [f"block={block}"] * bool(block) + [f"connections={connections}"] * bool(connections)
            url = lun_url + ("?" + "&".join(query) if query else "")
            files = {}
            for lay in layouts:
                files[lay] = f"{FILE_SCHEME}{images.name}/{lay}.img"
                res["stored_bytes"][lay] = sum(r.length for r in write_partitions(files[lay], data, nodes, layout=lay))
            for rep in range(reps):
                for lay in layouts:
                    t0 = time.monotonic()
                    with in_netns(tb.host("h0").ns):
                        write_partitions(lun_url, data, nodes, layout=lay)
                    res["write_seconds"].setdefault(lay, []).append(round(time.monotonic() - t0, 3))
                    for case in algorithms:
                        algorithm, rescan = MINING_CASES[case]
                        row = {"algorithm": case, "rep": rep, "layout": lay, "load": _load(),
                               "stored_bytes": res["stored_bytes"][lay]}
                        tables = {}
                        for where, src in (("local", str(data)), ("local_layout", files[lay]), ("iscsi", url)):
                            row[where], tables[where] = timed_job(src, nodes, algorithm, min_support, OnTestbed(tb),
                                                                  rescan, tgt.proc.pid)
                        for where in ("local_layout", "iscsi"):
                            if not tables["local"].equals(tables[where]):
                                raise OSError(f"{case} ({lay}, {where}): itemsets differ from the FIMI file's")
                        row["iscsi_vs_local"] = round(row["iscsi"]["job_s"] / row["local"]["job_s"], 3)
                        row["iscsi_vs_local_layout"] = round(row["iscsi"]["job_s"] / row["local_layout"]["job_s"], 3)
                        row["local_layout_vs_local"] = round(row["local_layout"]["job_s"] / row["local"]["job_s"], 3)
                        row.update(_read_cost(row, res["stored_bytes"][lay]))
                        res["runs"].append(row)
    finally:
        clean_storage(tb.name)
    res["load_after"] = _load()
    return res
