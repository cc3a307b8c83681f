"""Seed 000, Fig. 2: time of the all-to-all broadcast against the maximum RTO (MIN = 200 ms)."""

from clusterlab.experiments.spec import DilationCheck, Grid, Study, TransportConfig, scatter, seed_numbers
from clusterlab.experiments.studies._seed000 import NOTES, SCALES, STACKS, SWITCH
from clusterlab.experiments.workloads import alltoall_broadcast

STUDY = Study(
    name="seed000-fig2",
    title="Seed 000 Fig. 2: all-to-all broadcast time vs MAX (MIN = 200 ms)",
    cluster=SWITCH,
    workload=alltoall_broadcast(size="50KB"),
    transport=TransportConfig(rto_min="200ms"),
    grid=Grid(scale=SCALES, stack=STACKS, rto_max=["500ms", "1s", "2s", "5s", "10s", "20s", "40s", "60s"]),
    checks=[DilationCheck({"hosts": 16, "rto_max": "1s", "stack": "seed-era"}, dilations=(1, 4))],
    repeat=10, warmup=1, monitor=True,
    quick={"scale": "16 hosts", "hosts": "8", "rto_max": "1s,60s", "repeat": "2"},
    report=[scatter(x="rto_max_s", y="seconds", hue="stack+scale", logx=True),
            scatter(x="rto_max_s", y="timeouts_per_node", hue="stack+scale", logx=True),
            seed_numbers("000", "Fig. 2")],
    notes=NOTES,
)
