"""Seed 001's question the other way round: HPA (rescanning its data from the target every
pass) with bonnie on every initiator, iSCSI on the compute switch (consolidated, as the
seed) vs on a second switch (separate SAN, as its Fig. 1), unthrottled backing store, so that
the network is what the two share."""

from clusterlab.experiments.spec import Grid, Study, scatter
from clusterlab.experiments.studies.seed001 import GIGABIT, NOTES
from clusterlab.experiments.workloads.storage import mining_from_target

STUDY = Study(
    name="seed001-san",
    title="Seed 001: consolidated IP-SAN vs separate SAN, HPA with bonnie at the same time",
    cluster=GIGABIT,
    workload=mining_from_target(data="T10I4N1000D100K:1M", algorithm="hpa", compare_local=False, rescan=True,
                                bonnie=True),
    grid=Grid(network=["consolidated", "san"], ranks=[2, 4, 8]),
    repeat=2, warmup=0, monitor=True,
    quick={"ranks": "4", "hosts": "5", "data": "T10I4N1000D100K:100K", "repeat": "1", "bonnie_size": "8MiB"},
    report=[scatter(x="ranks", y="seconds", hue="network"),
            scatter(x="ranks", y="bonnie_mbps", hue="network"),
            scatter(x="ranks", y="retransmissions", hue="network")],
    notes=NOTES + " Seed 001 consolidates storage onto the cluster network and finds that the network is not "
                  "its bottleneck (the target moved at most 60 MB/s). Here the backing store is not throttled, so "
                  "bonnie and the rescans fill the target's link; 'san' moves iSCSI to a second switch (eth1, 10.1.0.x) "
                  "and leaves the first to HPA's own messages.",
)
