"""Seed 003, Fig. 5: bandwidth vs TCP buffer size (tcp_rmem and tcp_wmem both set to it), for a
small (2 KiB), a middle (64 KiB) and a large (1 MiB) message."""

from clusterlab.experiments.spec import Grid, Study, scatter
from clusterlab.experiments.studies.seed003 import BOTH, GIGABIT, NOTES
from clusterlab.experiments.workloads import pingpong

STUDY = Study(
    name="seed003-fig5",
    title="Seed 003 Fig. 5: bandwidth achieved for different TCP buffer sizes",
    cluster=GIGABIT,
    workload=pingpong(sizes="2048,65536,1048576", trial_time=0.02),
    grid=Grid(tcp_buffer=BOTH),
    repeat=5, warmup=0, monitor=False,
    quick={"repeat": "1", "hosts": "2", "sizes": "2048,65536", "tcp_buffer": "4KiB,32KiB,512KiB"},
    report=[scatter(x="tcp_buffer", y="mbps", hue="bytes", logy=True,
                    title="bandwidth vs buffer size (tcp_rmem = tcp_wmem = 'size size size')")],
    notes=NOTES,
)
