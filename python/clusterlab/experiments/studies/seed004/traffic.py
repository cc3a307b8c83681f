"""Seed 004, traffic figures: per NPB kernel, the WAN line's traffic every 0.1 s (Mbit/s, packets
per second, packets per 64-byte length bucket), class W, 8 ranks, 67M-ATM."""

import statistics

from clusterlab.experiments.spec import Grid, StarTopo, Study, Testbed, scatter, seed_numbers
from clusterlab.experiments.studies.seed004 import SETUP
from clusterlab.experiments.workloads.npb import npb_replay

STUDY = Study(
    name="seed004-traffic",
    title="Seed 004 traffic patterns: WAN Mbit/s and packets per 0.1 s per NPB kernel (class W, 8 ranks, 67M-ATM)",
    cluster=Testbed(StarTopo(hosts=8, rate="1Gbit", sites="4+4", wan_rate="135Mbit", wan_delay="6ms", wan_queue="256KiB", wan_shared=True), dilation=1.0),
    workload=npb_replay(cls="W", network="67M", traffic=True),
    grid=Grid(kernel=["cg", "ep", "ft", "is", "mg"]),
    repeat=1, warmup=0, monitor=False,
    quick={"cls": "S"},
    report=[scatter(x="t", y="wan_mbps", hue="kernel", where={"row": "wan_interval"}),
            scatter(x="t", y="wan_pps", hue="kernel", where={"row": "wan_interval"}),
            scatter(x="t", y="largest_bucket_bytes", hue="kernel", where={"row": "wan_interval"}),
            seed_numbers("004", "traffic")],
    notes=("Replayed (recorded per-rank compute slept, the real messages sent across the emulated 67M-ATM line): "
           "two cores cannot compute for 8 ranks. The delay line counts every frame it carries by IP length in "
           "64-byte buckets every 0.1 s, as the seed's Comet TM did; rows hold packets_per_bucket per interval. "
           "MTU 9000 (the seed's IP over ATM used 9180), so bulk transfers show as 9000-byte packets."),
)


# What the paper says of this figure (its text: the figures are not in the texts), and the rule
# judging each claim from this study's rows.
def _traffic(kernel_test):
    def ours(rows):
        iv = [r for r in rows if r.get("row") == "wan_interval"]
        if not iv:
            return "not measured", None
        by: dict = {}
        for r in iv:
            by.setdefault(r["kernel"], []).append(r["wan_mbps"])
        return kernel_test(by)
    return ours


def _ep_least(by):
    mean = {k: statistics.fmean(v) for k, v in by.items()}
    text = ", ".join(f"{k.upper()} {v:.1f}" for k, v in sorted(mean.items()))
    return f"mean Mbit/s on the line: {text}", (min(mean, key=mean.get) == "ep" if "ep" in mean else None)


def _cg_steady(by):
    v = by.get("cg")
    if not v or len(v) < 3:
        return "not measured", None
    busy = sum(1 for x in v if x > 0.1) / len(v)
    return f"CG: traffic in {busy:.0%} of its 0.1 s intervals, mean {statistics.fmean(v):.1f} Mbit/s", busy >= 0.8


PAPER = {"traffic": {
        "setup": SETUP,
        "caption": "Traffic patterns on the line, class W, 67M-ATM, 8 nodes: Mbit/s (both directions, Ethernet and "
                   "IP headers included) and packets per 64-byte length bucket every 0.1 s",
        "claims": [
            ("EP: almost no communication", "least traffic of all kernels", _traffic(_ep_least)),
            ("CG: a constant amount of traffic without pause, packets of similar length", "steady",
             _traffic(_cg_steady)),
        ]}}
