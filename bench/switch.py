#!/usr/bin/env python3
"""The ATM cell switch (``clusterlab-atm``) measured (root). Not a test.

1. ``--incast REPS``: does Floyd and Romanow's ordering (none < PPD < EPD) hold with TCP?
   ``--senders`` hosts (10) each send 8 MB over one TCP flow (iperf3) into one host through a
   ``--buffer-cells`` (1000) output port, at MTU 9180 and 1500, with discard none (plain UBR),
   ppd and epd (threshold: half the buffer), for each of ``--stacks`` (linux; seed-era: Reno
   without SACK, closer to the TCP of their simulations), at ``--dilation`` (2); REPS rounds,
   the settings interleaved in each. Goodput share = all bytes / wall time until the last flow
   finished, over the TCP payload rate the cell arithmetic gives (134.34 Mbit/s at MTU 9180).
   The port's own counts: cells of lost frames sent anyway (``wasted_share``), frames lost.
2. ``--cost REPS``: what the switch costs the machine: the all-to-all broadcast (every host
   sends 256 KB to every other, 50 KB at 100 hosts; the mesh's TCP) at 155.52 Mbit/s on the bridge and on the ATM
   switch, 16 hosts at dilation 1 and 2 and (``--hosts100``) 100 hosts at dilation 10, REPS
   repetitions each, every host with its own random MIN (200..300 ms, MAX = MIN + 1 s: with
   one MIN on every host, 100 hosts stall in lock-step at a cell port). Per point: time per repetition, the machine's spare CPU, and for the ATM
   switch its process's CPU (utime + stime; softirq work of the frames it writes is charged to
   it) per second and per Gbit of frames it moved.

Writes ``bench/results/switch.json`` (``-o``) atomically: a section per part (a part not run
keeps the record's), each with the bench harness's provenance of the run that measured it
(``clusterlab.bench.harness``: commit, date, machine, load, spare CPU, autogroup); the record's
own ``provenance`` is the last run's. Usage: ``.venv/bin/python bench/switch.py --incast 3 --cost 3``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

from clusterlab.bench import harness
from clusterlab.bench.switch import incast
from clusterlab.cluster.testbed import StarTopo, TestbedNetwork
from clusterlab.monitor.provenance import load_average as load
from clusterlab.net.transport_config import TransportConfig

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "switch.json")


def cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs, counting niced time as idle (what a nice-0 run could have had)."""
    with open("/proc/stat") as f:
        v = [float(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
    return user + system + irq + softirq + steal, sum(v[:8])


def proc_cpu(pid: int) -> float:
    """utime + stime of a process, seconds."""
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


INCAST_MTUS = (9180, 1500)
DISCARDS = ("none", "ppd", "epd")


def part_incast(run: harness.Run, reps: int, senders: int, buffer_cells: int, stacks: list[str],
                dilation: float) -> dict:
    rows = []
    for rep in range(reps):
        for stack in stacks:
            for mtu in INCAST_MTUS:
                for discard in DISCARDS:
                    topo = StarTopo(hosts=senders + 1, rate="155.52Mbit", switch="atm", buffer=f"{buffer_cells}cells",
                                    discard=discard, mtu=mtu, dilation=dilation)
                    l0 = load()
                    r = incast(TestbedNetwork(topo, name="bsw", transport=TransportConfig.parse(f"stack={stack}")),
                               senders, 8 << 20, timeout=120 * dilation)
                    rows.append({"rep": rep, "stack": stack, "mtu": mtu, "discard": discard, "load_before": l0,
                                 "load_after": load(),
                                 **{k: r[k] for k in ("seconds", "goodput_mbps", "ideal_mbps", "goodput_share",
                                                      "retransmits", "stalled_flows")},
                                 **{f"port_{k}": v for k, v in r["port"].items()}})
                    run.say(json.dumps(rows[-1]))
    summary = {}
    for stack in stacks:
        for mtu in INCAST_MTUS:
            sel = [r for r in rows if r["stack"] == stack and r["mtu"] == mtu]
            med = {d: statistics.median(r["goodput_share"] for r in sel if r["discard"] == d) for d in DISCARDS}
            summary[f"{stack} {mtu}"] = {
                "goodput_share_median": med,
                "wasted_share_median": {d: statistics.median(r["port_wasted_share"] for r in sel if r["discard"] == d)
                                        for d in DISCARDS},
                "ordering_none_ppd_epd": med["none"] < med["ppd"] < med["epd"]}
        summary[f"{stack}: larger frames worse under ubr"] = (
            summary[f"{stack} 9180"]["goodput_share_median"]["none"]
            < summary[f"{stack} 1500"]["goodput_share_median"]["none"])
    return {"settings": {"senders": senders, "bytes_each": 8 << 20, "buffer_cells": buffer_cells, "rate": "155.52Mbit",
                         "epd_threshold_cells": buffer_cells // 2, "stacks": stacks, "dilation": dilation, "reps": reps},
            "rows": rows, "summary": summary}


# Per-host random timers: the part measures forwarding, and with one MIN on every host 100
# hosts' retransmissions meet in lock-step at a cell port and stall (docs/studies.md).
COST_TIMERS = "rto_min=200ms,rto_min_jitter=100ms,rto_max_offset=1s"


def part_cost(run: harness.Run, reps: int, hosts100: bool) -> dict:
    from clusterlab.bench.alltoall_broadcast import alltoall_broadcast

    # 100 hosts send the seed's 50 KB blocks: 256 KB from 99 senders at 15.5 Mbit/s a port ran
    # past the mesh's wait for room to send (a rank still receiving from the 63 before it).
    points = [(16, 1.0, 256 << 10), (16, 2.0, 256 << 10)] + ([(100, 10.0, 50_000)] if hosts100 else [])
    rows = []
    for hosts, k, size in points:
        for switch in ("bridge", "atm"):
            topo = StarTopo(hosts=hosts, rate="155.52Mbit", switch=switch, buffer="64KB", host_queue="9MB",
                            dilation=k, mtu=9000 if switch == "bridge" else 9180)
            l0 = load()
            with TestbedNetwork(topo, name="bsw", transport=TransportConfig.parse(COST_TIMERS)) as tb:
                pid = tb.atm.proc.pid if tb.atm else None
                c0, b0, t0 = (proc_cpu(pid) if pid else 0.0), cpu_times(), time.monotonic()
                res = tb.run(alltoall_broadcast, hosts, size, reps, timeout=600)[0]
                wall = time.monotonic() - t0
                c1, b1 = (proc_cpu(pid) if pid else 0.0), cpu_times()
            busy = (b1[0] - b0[0]) / max(1.0, b1[1] - b0[1])
            row = {"hosts": hosts, "dilation": k, "switch": switch, "size": size, "reps": reps, "wall_s": wall,
                   "seconds_per_rep_median": statistics.median(r["seconds"] for r in res),
                   "machine_busy_share": busy, "load_before": l0, "load_after": load()}
            t = tb.atm_totals
            if t:
                frames_bits = sum(c * 48 * 8 for c in t["cells_out"])  # payload bits of the cells sent
                row.update(switch_cpu_s=c1 - c0, switch_cores=(c1 - c0) / wall,
                           switch_cpu_s_per_gbit=(c1 - c0) / max(1e-9, frames_bits / 1e9),
                           cells_out=sum(t["cells_out"]), frames_lost=sum(t["frames_lost"]),
                           late_mean_us=t["late_mean_ns"] / 1e3, late_max_us=t["late_max_ns"] / 1e3,
                           kernel_drops=t["kernel_drops"], send_errors=t["send_errors"])
            rows.append(row)
            run.say(json.dumps(row))
    return {"settings": {"size": "256 KiB (16 hosts), 50 KB (100 hosts)", "rate": "155.52Mbit", "buffer": "64KB", "reps": reps,
                         "transport": COST_TIMERS}, "rows": rows}


def main(argv=None) -> int:
    ap = harness.parser(__doc__, OUT, output_help="the record to update, written atomically with its provenance "
                        "(default bench/results/switch.json)")
    ap.add_argument("--incast", type=int, default=0, metavar="REPS", help="part 1: rounds of the incast (0: not run)")
    ap.add_argument("--cost", type=int, default=0, metavar="REPS", help="part 2: repetitions per point (0: not run)")
    ap.add_argument("--hosts100", action="store_true", help="also 100 hosts at dilation 10 in --cost")
    ap.add_argument("--senders", type=int, default=10, help="--incast: TCP flows into one port (default 10, as "
                    "Floyd and Romanow)")
    ap.add_argument("--buffer-cells", type=int, default=1000, help="--incast: the port's buffer (default 1000)")
    ap.add_argument("--stacks", default="linux", help="--incast: TCP stacks, comma-separated (linux: this "
                    "kernel's; seed-era: Reno without SACK, closer to Floyd and Romanow's TCP, whose flows can "
                    "back off past the round's limit)")
    ap.add_argument("--dilation", type=float, default=2.0, help="--incast: dilation (default 2: at 1 a loaded "
                    "2-core machine delays the hosts' frames in softirq by tens of ms)")
    a = ap.parse_args(argv)
    stacks = [x.strip() for x in a.stacks.split(",") if x.strip()]
    if not 1 <= a.senders <= 99 or not 64 <= a.buffer_cells <= 1_000_000 or not 1 <= a.dilation <= 100 or \
            not stacks or any(x not in ("linux", "seed-era") for x in stacks):
        print("bench/switch.py: --senders 1..99, --buffer-cells 64..1000000, --dilation 1..100, "
              "--stacks from linux,seed-era", file=sys.stderr)
        return 2
    if not (a.incast or a.cost):
        print("bench/switch.py: give --incast REPS and/or --cost REPS", file=sys.stderr)
        return 2
    run = harness.start(ap, args=a)
    if os.geteuid() != 0:
        ap.exit(2, f"{ap.prog}: needs root (network namespaces)\n")
    try:
        with open(run.output) as f:
            rec = json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        rec = {}
    # each part's provenance covers this run up to the part's end (the parts run one after the other)
    if a.incast:
        part = part_incast(run, a.incast, a.senders, a.buffer_cells, stacks, a.dilation)
        rec["incast"] = {"provenance": run.provenance(), **part}
    if a.cost:
        part = part_cost(run, a.cost, a.hosts100)
        rec["cost"] = {"provenance": run.provenance(), **part}
    run.write(rec)
    return 0


if __name__ == "__main__":
    sys.exit(main())
