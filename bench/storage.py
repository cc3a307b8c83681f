#!/usr/bin/env python3
"""iSCSI storage on the testbed (issue 13): tgt on the storage host, libiscsi initiators (root).

Not a test: a measurement. For each link rate (155 Mbit/s as seed 001's links are scaled here,
1 Gbit/s as the seed's, and unshaped) and each number of commands in flight per initiator
(``--connections``: 1, as a process doing one read() at a time, and 4 sessions) it runs
``clusterlab.experiments.storage_bench.run`` with 1 and 8 initiators at once, each writing then reading
its own LUN sequentially in 64 KB blocks, plus the same block loop and bonnie++ on a local
file, and one iperf3 TCP stream each way between st and h0 on the same links before the first count
(what the emulated link gives TCP at that moment: ``write_vs_tcp``, ``read_vs_tcp``). Every phase is monitored (the storage host's link, the machine's CPU and disks) and its
bottleneck named (``phase_usage``). Reported as MB/s and as ratios: 1 initiator vs the link
rate (issue 13's target: >= 90 %), iSCSI vs local. The machine's load is recorded per run.

Writes ``bench/results/storage.json`` atomically, with the bench harness's provenance
(``clusterlab.bench.harness``: commit, machine, load, spare CPU, autogroup). With ``--mining
N``: instead, HPA, PFP and CD on ``--counts``' largest count of hosts over N generated
transactions of 1000 items, each rank reading its partition from the local file, from the LUN's layout in a local file and from
a shared LUN on the target in each ``--layout`` (``clusterlab.experiments.storage_bench.mining_from_target``;
issue 13's target: iSCSI within 1.3x of local), into ``bench/results/storage_mining.json``.

Usage: ``.venv/bin/python bench/storage.py [--size 32MB] [--counts 1,8]
[--rates 155Mbit,1Gbit] [--connections 1,4] [--reps 1]``; the mining comparison:
``... bench/storage.py --mining 1000000 --counts 4 --rates 10Gbit [--tgtd rdwr,rdwr:2,aio]
[--offloads off,on] [--in-flight 1,2,4] [--tbf-bucket auto,1us] [--congestion reno,bbr] [--algorithms hpa,pfp] [--layout packed,fimi]`` (settings interleaved
repetition by repetition;
per job also the machine's busy CPU seconds, and what the target's path adds per MB).
"""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

from clusterlab.bench import harness

HERE = Path(__file__).resolve().parent


def main(argv=None) -> int:
    from clusterlab.bench.storage import parse_counts
    from clusterlab.errors import ConfigError
    from clusterlab.experiments.storage_bench import run
    from clusterlab.units import parse_rate, parse_size

    ap = harness.parser(__doc__, HERE / "results" / "storage.json", output_aliases=("--out",),
                        output_help="the record, written atomically with its provenance (default "
                                    "bench/results/storage.json; bench/results/storage_mining.json with --mining)")
    ap.set_defaults(output=None)
    ap.add_argument("--size", default="32MB")
    ap.add_argument("--block", default="64KB")
    ap.add_argument("--counts", default="1,8")
    ap.add_argument("--rates", default="155Mbit,1Gbit")
    ap.add_argument("--connections", default="1,4")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--backing-rate", default="none", help="throttle the target's backing store (bytes/s, e.g. 60MB)")
    ap.add_argument("--san", default="no", choices=["no", "yes", "both"],
                    help="iSCSI on a second switch: no, yes, or both (consolidated and SAN, side by side)")
    ap.add_argument("--mining", type=int, default=0, help="transactions to mine from the target (0: no)")
    ap.add_argument("--min-support", type=float, default=0.01)
    ap.add_argument("--data", default=None, help="with --mining: this FIMI file (generated with --mining N "
                    "transactions, seed 1, --counts' partitions) instead of generating it")
    ap.add_argument("--algorithms", default="hpa,hpa-rescan,pfp,cd", help="with --mining: the jobs")
    ap.add_argument("--tgtd", default="rdwr",
                    help="with --mining: tgtd settings to compare, comma-separated BSTYPE[:IOTHREADS] (rdwr, aio; "
                         "I/O threads, tgtd's default 16), interleaved repetition by repetition")
    ap.add_argument("--in-flight", default="4", help="with --mining: READ commands each rank keeps in flight, "
                    "comma-separated to compare (interleaved)")
    ap.add_argument("--offloads", default="off", help="with --mining: the testbed's TSO/GSO/GRO, off (MTU-sized "
                    "packets, the testbed's default), on, or off,on (interleaved)")
    ap.add_argument("--tbf-bucket", default="auto", help="with --mining: the links' tbf bucket as a duration of "
                    "the rate, comma-separated to compare (interleaved): auto (two frames up to 1 Gbit/s, 100us above), "
                    "1us (two frames at any rate, as before), 100us, ...")
    ap.add_argument("--congestion", default="default", help="with --mining: the storage host's TCP congestion control, "
                    "comma-separated to compare (interleaved), e.g. reno,bbr (default: the testbed's)")
    ap.add_argument("--layout", default="packed", help="with --mining: the LUN layouts to compare, comma-separated "
                    "(packed, fimi), interleaved repetition by repetition")
    a = ap.parse_args(argv)
    if a.mining:
        from clusterlab.storage.source import check_layout

        try:
            for lay in a.layout.split(","):
                check_layout(lay)
        except ConfigError as e:
            print(f"bench/storage.py: --layout: {e}", file=sys.stderr)
            return 2
    try:
        size, block, counts = parse_size(a.size), parse_size(a.block), parse_counts(a.counts)
    except ConfigError as e:
        ap.exit(2, f"{ap.prog}: {e}\n")
    a.output = a.output or str(HERE / "results" / ("storage_mining.json" if a.mining else "storage.json"))
    run_ = harness.start(ap, args=a)
    if os.geteuid() != 0:
        ap.exit(2, f"{ap.prog}: needs root (namespace testbed, tgtd)\n")
    if a.mining:
        return mining(a, run_)
    out = {"what": "bonnie-style sequential block write then read over iSCSI (tgt on testbed host st, "
                   "libiscsi initiators in compute hosts, one LUN each, file-backed through the page cache)",
           "size": size, "block": block, "runs": []}
    first = True
    backing = None if a.backing_rate == "none" else parse_size(a.backing_rate)
    sans = {"no": [False], "yes": [True], "both": [False, True]}[a.san]
    for rep, rate, conns, san in itertools.product(range(a.reps), a.rates.split(","),
                                                   [int(c) for c in a.connections.split(",")], sans):
        r = None if rate == "none" else rate
        res = run(hosts=max(counts), initiators=counts, size=size, block=block, rate=r,
                  baseline=first, connections=conns, backing_bps=backing, san=san)
        first = False
        if "local" in res:
            out["local"] = res.pop("local")
        for x in res["runs"]:
            x.update(rate=rate, rep=rep, connections=conns, load_before=res["load_before"], backing_bps=backing,
                     network="separate SAN" if san else "consolidated")
            if r is not None and x["initiators"] == 1:
                line_mbps = parse_rate(r) / 8 / 1e6
                x["write_vs_link"] = round(x["write"]["aggregate_mbps"] / line_mbps, 3)
                x["read_vs_link"] = round(x["read"]["aggregate_mbps"] / line_mbps, 3)
            tcp = x.get("tcp", {})
            if "mbps" in tcp.get("to_target", {}) and "mbps" in tcp.get("from_target", {}):
                x["write_vs_tcp"] = round(x["write"]["aggregate_mbps"] / tcp["to_target"]["mbps"], 3)
                x["read_vs_tcp"] = round(x["read"]["aggregate_mbps"] / tcp["from_target"]["mbps"], 3)
            out["runs"].append(x)
            run_.say(f"{rate:>8} n={x['initiators']} c={conns}{' SAN' if san else ''}: write {x['write']['aggregate_mbps']:.1f} MB/s "
                     f"({x['write'].get('monitor', {}).get('bottleneck')}), read {x['read']['aggregate_mbps']:.1f} "
                     f"MB/s ({x['read'].get('monitor', {}).get('bottleneck')}); iperf3 to/from st "
                     f"{tcp.get('to_target', {}).get('mbps')}/{tcp.get('from_target', {}).get('mbps')} MB/s "
                     f"(load {x['load'][0]:.1f})")
    loc = out.get("local")
    if loc:
        for x in out["runs"]:
            x["write_vs_local"] = round(x["write"]["aggregate_mbps"] / loc["write_mbps"], 3)
            x["read_vs_local"] = round(x["read"]["aggregate_mbps"] / loc["read_mbps"], 3)
    run_.write(out)
    return 0


def mining(a, run: harness.Run) -> int:
    import tempfile

    import clusterlab
    from clusterlab.bench.storage import parse_counts
    from clusterlab.experiments.storage_bench import mining_from_target
    from clusterlab.units import parse_size

    nodes = max(parse_counts(a.counts))
    with tempfile.TemporaryDirectory(prefix="clab-storage-mining-", dir="/var/tmp") as d:
        data = a.data or f"{d}/T10I4.dat"
        if not a.data:
            clusterlab.generate_file(data, "T10I4D100K", transactions=a.mining, items=1000, seed=1, partitions=nodes)
        rate = a.rates.split(",")[0]
        settings = []
        for spec in a.tgtd.split(","):
            bstype, _, threads = spec.partition(":")
            settings += [(bstype, int(threads) if threads else None, off == "on", int(k), bucket, cc)
                         for off in a.offloads.split(",") for k in a.in_flight.split(",")
                         for bucket in a.tbf_bucket.split(",") for cc in a.congestion.split(",")]
        res = {"configs": []}
        for rep in range(a.reps):  # interleaved: each setting once per repetition, in turn
            for bstype, threads, offloads, in_flight, bucket, cc in settings:
                r = mining_from_target(data, nodes=nodes, min_support=a.min_support, reps=1, block=parse_size(a.block),
                                       rate=None if rate == "none" else rate, iothreads=threads, bstype=bstype,
                                       algorithms=tuple(a.algorithms.split(",")), offloads=offloads,
                                       connections=in_flight, layouts=tuple(a.layout.split(",")),
                                       tbf_bucket=None if bucket == "auto" else bucket,
                                       congestion=None if cc == "default" else cc)
                for row in r["runs"]:
                    row.update(rep=rep, bstype=bstype, iothreads=threads, offloads=offloads, in_flight=in_flight,
                               tbf_bucket=bucket, tbf_bucket_bytes=r["config"]["tbf_bucket_bytes"], congestion=cc)
                    lo, ll, sc = row["local"], row["local_layout"], row["iscsi"]
                    run.say(f"{bstype}:{threads or 16}{' offloads' if offloads else ''} in flight {in_flight} "
                          f"bucket {bucket} {cc} {row['layout']:>6} "
                            f"{row['algorithm']:>10}: local {lo['job_s']:.2f} s (read "
                            f"{lo['read_s']:.2f} + {lo['rescan_s']:.2f}), {row['layout']} file {ll['job_s']:.2f} s (read "
                            f"{ll['read_s']:.2f}), iscsi {sc['job_s']:.2f} s (read {sc['read_s']:.2f}"
                            f" + {sc['rescan_s']:.2f}, tgtd {sc['tgtd_cpu_s']:.2f} cpu-s): {row['iscsi_vs_local']:.2f}x, "
                            f"{row['iscsi_vs_local_layout']:.2f}x its file; "
                            f"extra CPU {row['extra_cpu_s']:.2f} s ({row['extra_cpu_s_per_mb'] * 1e3:.1f} ms/MB, floor "
                            f"{row['cpu_floor_s']:.2f} s) vs added {row['added_s']:.2f} s (load {row['load'][0]:.1f})")
                res["configs"].append(r)
        res["runs"] = [row for r in res["configs"] for row in r.pop("runs")]
        res["config"] = res["configs"][0]["config"]
    res["what"] = (f"HPA (reading once, and rescanning every pass)/PFP/CD on {nodes} testbed hosts, {a.mining} "
                   "transactions (T10I4, 1000 items): each rank reads its partition from the local file vs from a "
                   f"shared iSCSI LUN on st ({a.block} READ commands, {a.in_flight} in flight, read ahead in 2 MiB pieces "
                   "parsed or decoded as they arrive) and from the same LUN layout in a local file (local_layout); "
                   f"LUN layouts {a.layout} (packed: varint-delta baskets, version 2; fimi: the text, version 1), "
                   "interleaved; job time = slowest rank, "
                   "read to result; tgtd settings " + a.tgtd + ", offloads " + a.offloads + ", tbf buckets "
                   + a.tbf_bucket + ", storage-host congestion control " + a.congestion + " interleaved; extra_cpu_s: "
                   "the machine's busy CPU "
                   "seconds (nice 0) of the iSCSI job minus the local one; cpu_floor_s: that over the cores")
    run.write(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
