"""Seed 004, traffic figures: per NPB kernel, the WAN line's traffic every 0.1 s (Mbit/s, packets
per second, packets per 64-byte length bucket), class W, 8 ranks, 67M-ATM."""

from clusterlab.experiments.spec import Grid, Study, Testbed, scatter, seed_numbers
from clusterlab.experiments.workloads.npb import npb_replay

STUDY = Study(
    name="seed004-traffic",
    title="Seed 004 traffic patterns: WAN Mbit/s and packets per 0.1 s per NPB kernel (class W, 8 ranks, 67M-ATM)",
    cluster=Testbed(hosts=8, rate="1Gbit", sites="4+4", wan_rate="135Mbit", wan_delay="6ms", wan_queue="256KiB",
                    wan_shared=True, dilation=1.0),
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
