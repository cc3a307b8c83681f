"""Seed 003, Fig. 2: bandwidth vs message size with TCP window scaling off and on
(net.ipv4.tcp_window_scaling per testbed host; buffers left at Linux's own triple)."""

from clusterlab.experiments.spec import Grid, Study, scatter
from clusterlab.experiments.studies.seed003 import GIGABIT, NOTES, SIZES
from clusterlab.experiments.workloads import pingpong

STUDY = Study(
    name="seed003-fig2",
    title="Seed 003 Fig. 2: TCP window scaling (tcp_window_scaling) influence over bandwidth",
    cluster=GIGABIT,
    workload=pingpong(sizes=SIZES, trial_time=0.01),
    grid=Grid(window_scaling=[False, True]),
    repeat=3, warmup=0, monitor=False,
    quick={"sizes": "1:64KiB", "repeat": "1", "hosts": "2"},
    report=[scatter(x="bytes", y="mbps", hue="window_scaling", logx=True)],
    notes=NOTES + (" Fig. 2 sets only tcp_window_scaling (0 or 1) on every host; on a LAN whose "
                   "bandwidth-delay product is far below 64 KiB the window scale option should not matter."),
)
