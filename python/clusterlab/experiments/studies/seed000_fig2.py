"""Seed 000, Fig. 2: time of the all-to-all broadcast against the maximum RTO (MIN = 200 ms).

Every point at dilation 3: MAX 500 ms needs k >= 2 (the kernel's MAX is at least 1 s) and 60 s
allows k <= 2 (at most 120 s), so no one k spans the seed's whole sweep; at k = 3 it ends at
40 s, where a MIN of 200 ms has backed off eight times (0.2 .. 25.6 s) either way."""

import dataclasses

from clusterlab.experiments.spec import DilationCheck, Grid, Study, TransportConfig, scatter, seed_numbers
from clusterlab.experiments.studies._seed000 import NOTES, SCALES, STACKS, SWITCH, SWITCHES
from clusterlab.experiments.workloads import alltoall_broadcast

STUDY = Study(
    name="seed000-fig2",
    title="Seed 000 Fig. 2: all-to-all broadcast time vs MAX (MIN = 200 ms)",
    cluster=dataclasses.replace(SWITCH, dilation=3.0),
    workload=alltoall_broadcast(size="50KB"),
    transport=TransportConfig(rto_min="200ms"),
    grid=Grid(scale=SCALES, switch=SWITCHES, stack=STACKS, rto_max=["500ms", "1s", "2s", "5s", "10s", "20s", "40s"]),
    checks=[DilationCheck({"hosts": 16, "rto_max": "1s", "stack": "seed-era", "switch": "atm"}, dilations=(3, 6))],
    repeat=10, warmup=1, monitor=True,
    quick={"scale": "16 hosts", "hosts": "8", "switch": "atm", "rto_max": "1s,40s", "repeat": "2"},
    report=[scatter(x="rto_max_s", y="seconds", hue="switch+stack+scale", logx=True),
            scatter(x="rto_max_s", y="timeouts_per_node", hue="switch+stack+scale", logx=True),
            seed_numbers("000", "Fig. 2")],
    notes=NOTES,
)
