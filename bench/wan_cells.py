#!/usr/bin/env python3
"""Goodput through the two-site testbed's WAN cell line against the offered rate, per discard
policy (root, iperf3). Not a test.

Seed 004's 135 Mbit/s ATM line lost cells above about 120 Mbit/s. Here: two sites of one host
each on 1 Gbit/s links, joined by a ``--wan-rate`` (135 Mbit/s) line of cells with a
``--queue-cells`` (2000) queue per direction, 6 ms one way; UDP (iperf3 ``-u -b RATE``,
datagrams filling the MTU) from site A to site B at each offered rate for ``--seconds`` (3),
with discard none (plain UBR), ppd and epd (threshold half the queue), at MTU 1500 and 9000,
the policies interleaved per MTU (a testbed per policy). Per point: what was sent and what
arrived (iperf3's count), and the load; per testbed: the line's totals over all its points.
``ideal_mbps`` is the UDP payload a saturated line carries (the cells' share).

Writes ``bench/results/wan_cells.json`` (``-o``; replaced atomically) with the bench harness's
provenance (``clusterlab.bench.harness``: commit, machine, load, spare CPU, autogroup).
Usage: ``sudo nice -n 10 .venv/bin/python bench/wan_cells.py``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from clusterlab.bench import harness
from clusterlab.bench.wanline import offered_goodput
from clusterlab.cluster.testbed import StarTopo, TestbedNetwork
from clusterlab.monitor.provenance import load_average


def main(argv=None) -> int:
    ap = harness.parser(__doc__, Path(__file__).resolve().parent / "results" / "wan_cells.json")
    ap.add_argument("--rates", default="80,100,110,120,130,150,200,270",
                    help="offered UDP Mbit/s, comma-separated (default %(default)s)")
    ap.add_argument("--seconds", type=float, default=3.0, help="seconds per offered rate (default %(default)s)")
    ap.add_argument("--wan-rate", default="135Mbit", help="the line's rate (default %(default)s)")
    ap.add_argument("--queue-cells", type=int, default=2000, help="the line's queue per direction (default %(default)s)")
    ap.add_argument("--mtus", default="1500,9000", help="MTUs, comma-separated (default %(default)s)")
    a = ap.parse_args(argv)
    try:
        rates = [float(x) * 1e6 for x in a.rates.split(",")]
        mtus = [int(x) for x in a.mtus.split(",")]
    except ValueError:
        print("bench/wan_cells.py: --rates and --mtus take comma-separated numbers", file=sys.stderr)
        return 2
    run = harness.start(ap, args=a)
    if os.geteuid() != 0:
        ap.exit(2, f"{ap.prog}: needs root (network namespaces)\n")
    runs = []
    for mtu in mtus:
        for discard in ("none", "ppd", "epd"):
            topo = StarTopo(hosts=2, sites="1+1", rate="1Gbit", mtu=mtu, wan_rate=a.wan_rate, wan_delay="6ms",
                            wan_cells=True, wan_queue=f"{a.queue_cells}cells", wan_discard=discard)
            l0 = load_average()
            r = offered_goodput(TestbedNetwork(topo, name="wancells"), rates, seconds=a.seconds)
            r.update(mtu=mtu, load_before=l0, load_after=load_average(),
                     epd_threshold_cells=topo.wan_epd_threshold_cells if discard == "epd" else None)
            runs.append(r)
            run.say(mtu, discard, [round(p["goodput_mbps"], 1) for p in r["points"]])
    run.write({"wan_rate": a.wan_rate, "queue_cells": a.queue_cells, "seconds": a.seconds, "runs": runs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
