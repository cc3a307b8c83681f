"""Incast of the all-to-all broadcast on 16 hosts: default vs 5 ms minimum RTO, shallow vs
NIC-like host queue, everyone-to-rank-0-first vs shifted send order (issue 10's target)."""

from clusterlab.experiments.spec import Grid, StarTopo, Study, Testbed, TransportConfig, scatter
from clusterlab.experiments.workloads import alltoall_broadcast

STUDY = Study(
    name="broadcast-incast",
    title="All-to-all broadcast incast, 16 hosts, 155 Mbit/s, 64 KB port buffers",
    cluster=Testbed(StarTopo(hosts=16, rate="155Mbit", buffer="64KB", mtu=9000), dilation="auto"),
    workload=alltoall_broadcast(size="50KB"),
    grid=Grid(host_queue=["256KB", "9MB"], order=["same", "shifted"], tcp=[TransportConfig(), TransportConfig(rto_min="5ms")]),
    repeat=10, warmup=1, monitor=True,
    quick={"hosts": "8", "host_queue": "9MB", "repeat": "3"},
    report=[scatter(x="tcp", y="seconds", hue="order"), scatter(x="tcp", y="retransmissions", hue="order")],
)
