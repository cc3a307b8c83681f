"""Seed 001, Fig. 10: HPA reading its data from the iSCSI target (rescanned every pass) while
bonnie runs on every initiator, against the number of initiators, beside HPA alone."""

from clusterlab.experiments.claims import fmt
from clusterlab.experiments.spec import Grid, Study, scatter, seed_numbers
from clusterlab.experiments.studies.seed001 import GIGABIT, NOTES, SETUP, WITH_BONNIE, by_ranks, flat
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


# What the paper says of this figure (its text: the figures are not in the texts), and the rule
# judging each claim from this study's rows.
def bonnie_slower(rows):
    alone, both = by_ranks(rows, "seconds", bonnie=False), by_ranks(rows, "seconds", bonnie=True)
    common = sorted(set(alone) & set(both))
    if not common:
        return "not measured", None
    text = "; ".join(f"{n}: {fmt(both[n])} s with bonnie vs {fmt(alone[n])} s alone" for n in common)
    return text, all(both[n] > alone[n] for n in common)


def growing(rows):
    return flat("seconds", "bonnie", 1.0, float("inf"), " s")([r for r in rows if r.get("bonnie")])


PAPER = {"Fig. 10": {
        "setup": SETUP,
        "caption": "HPA execution time while bonnie++ runs, 1-8 initiators",
        "claims": [
            ("longer with bonnie++ at the same time", "longer", bonnie_slower),
            ("longer as initiators are added", "growing", growing),
        ]}}
