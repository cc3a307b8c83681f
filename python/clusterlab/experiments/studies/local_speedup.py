"""Speedup of parallel HPA on local ranks over loopback, one line per transport setting (the
`clusterlab experiment speedup` study as a spec; on loopback the network is never the
bottleneck, so the lines coincide: seed000-fig6 runs it on the testbed)."""

from clusterlab.experiments.spec import Grid, Loopback, Study, TransportConfig, scatter, speedup
from clusterlab.experiments.workloads import hpa_job

STUDY = Study(
    name="local-speedup",
    title="HPA speedup on local ranks (loopback)",
    cluster=Loopback(),
    workload=hpa_job(data="seed000:1M", min_support=0.007),
    grid=Grid(ranks=[1, 2, 4], tcp=[TransportConfig(), TransportConfig(rto_min="5ms", rto_min_jitter="100ms")]),
    repeat=3, warmup=1, monitor=False,
    quick={"data": "seed000:50K", "ranks": "1,2", "repeat": "1"},
    report=[speedup(x="ranks", y="seconds", hue="tcp"), scatter(x="ranks", y="seconds", hue="tcp")],
)
