"""Seed 001, Fig. 8: HPA and PFP reading their data from the iSCSI target, against the number
of initiators (each rank reads its partition through the initiator in 64 KB blocks), beside
the same job reading local files."""

from clusterlab.experiments.spec import Grid, Study, scatter, seed_numbers
from clusterlab.experiments.studies.seed001 import GIGABIT, NOTES, SETUP, flat
from clusterlab.experiments.workloads.storage import mining_from_target

STUDY = Study(
    name="seed001-fig8",
    title="Seed 001 Fig. 8: HPA and PFP job time vs initiators, data read from the iSCSI target",
    cluster=GIGABIT,
    workload=mining_from_target(data="T10I4N1000D100K:1M", min_support=0.01, algorithm="hpa"),
    grid=Grid(algorithm=["hpa", "pfp"], ranks=[1, 2, 4, 8]),
    repeat=3, warmup=0, monitor=True,
    quick={"ranks": "1,4", "hosts": "5", "data": "T10I4N1000D100K:50K", "repeat": "1"},
    report=[scatter(x="ranks", y="seconds", hue="algorithm"),
            scatter(x="ranks", y="iscsi_vs_local", hue="algorithm"),
            scatter(x="ranks", y="read_seconds", hue="algorithm"),
            seed_numbers("001", "Fig. 8")],
    notes=NOTES + " HPA rescans its partition from the target every pass, as the seed's did (PFP reads it "
                  "once: its passes after the first work on its own trees). Seed 001 Fig. 8 (from its text): HPA and PFP "
                  "(1000 items, 1M-8M transactions) take hardly more time as initiators are added.",
)


# What the paper says of this figure (its text: the figures are not in the texts), and the rule
# judging each claim from this study's rows.
PAPER = {"Fig. 8": {
        "setup": SETUP,
        "caption": "HPA execution time, 1000 items, 1M-8M transactions, 1-8 initiators, data on the target",
        "claims": [
            ("execution time hardly changes as initiators are added", "flat",
             flat("seconds", "algorithm", 0.67, 1.5, " s")),
        ]}}
