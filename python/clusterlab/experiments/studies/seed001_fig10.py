"""Seed 001, Fig. 10: HPA reading its data from the iSCSI target (rescanned every pass) while
bonnie runs on every initiator, against the number of initiators, beside HPA alone."""

from clusterlab.experiments.spec import Grid, Study, scatter, seed_numbers
from clusterlab.experiments.studies._seed001 import GIGABIT, NOTES, WITH_BONNIE
from clusterlab.experiments.workloads.storage import mining_from_target

STUDY = Study(
    name="seed001-fig10",
    title="Seed 001 Fig. 10: HPA job time vs initiators, with and without bonnie at the same time",
    cluster=GIGABIT,
    workload=mining_from_target(data="T10I4N1000D100K:1M", algorithm="hpa", backing_rate="60MB",
                                compare_local=False, rescan=True),
    grid=Grid(bonnie=[False, True], ranks=[1, 2, 4, 8]),
    repeat=2, warmup=0, monitor=True,
    quick={"ranks": "1,4", "hosts": "5", "data": "T10I4N1000D100K:100K", "repeat": "1", "bonnie_size": "8MiB"},
    report=[scatter(x="ranks", y="seconds", hue="bonnie"),
            scatter(x="ranks", y="bonnie_mbps", hue="bonnie"),
            scatter(x="ranks", y="backing_mbps", hue="bonnie"),
            seed_numbers("001", "Fig. 10")],
    notes=NOTES + WITH_BONNIE,
)
