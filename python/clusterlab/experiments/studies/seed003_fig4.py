"""Seed 003, Fig. 4: bandwidth vs message size for each TCP send buffer (tcp_wmem)."""

from clusterlab.experiments.spec import Grid, Study, scatter
from clusterlab.experiments.studies._seed003 import BUFFERS, GIGABIT, NOTES, SIZES
from clusterlab.experiments.workloads import pingpong

STUDY = Study(
    name="seed003-fig4",
    title="Seed 003 Fig. 4: TCP write buffer (tcp_wmem) influence over bandwidth",
    cluster=GIGABIT,
    workload=pingpong(sizes=SIZES, trial_time=0.01),
    grid=Grid(wmem=[*BUFFERS, None]),
    repeat=3, warmup=0, monitor=False,
    quick={"wmem": "4096 4096 4096,65536 65536 65536", "sizes": "1:64KiB", "repeat": "1", "hosts": "2"},
    report=[scatter(x="bytes", y="mbps", hue="wmem", logx=True)],
    notes=NOTES,
)
