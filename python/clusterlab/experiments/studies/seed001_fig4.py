"""Seed 001, Fig. 4: bonnie-style sequential block write and read per initiator over iSCSI,
1-8 initiators at once, beside the same block loop on a local file."""

from clusterlab.experiments.spec import Grid, Study, scatter, seed_numbers
from clusterlab.experiments.studies._seed001 import GIGABIT, NOTES
from clusterlab.experiments.workloads.storage import iscsi_bonnie

STUDY = Study(
    name="seed001-fig4",
    title="Seed 001 Fig. 4: iSCSI block write and read per initiator vs initiators (local file beside)",
    cluster=GIGABIT,
    workload=iscsi_bonnie(size="32MB", block="64KB", connections=4),
    grid=Grid(ranks=[1, 2, 4, 8], backing_rate=["none", "60MB"]),
    repeat=3, warmup=0, monitor=True,
    quick={"ranks": "1,2,4", "hosts": "5", "size": "8MB", "backing_rate": "none,20MB", "repeat": "1"},
    report=[scatter(x="ranks", y="read_mbps_per_initiator", hue="backing_rate"),
            scatter(x="ranks", y="write_mbps_per_initiator", hue="backing_rate"),
            scatter(x="ranks", y="read_vs_local", hue="backing_rate"),
            seed_numbers("001", "Fig. 4")],
    notes=NOTES + " Seed 001 Fig. 4 (from its text): iSCSI read about 2/3 of local and flat as initiators grow; "
                  "write below half of local and falling with more initiators.",
)
