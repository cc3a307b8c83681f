"""Seed 001, Fig. 4: bonnie-style sequential block write and read per initiator over iSCSI,
1-8 initiators at once, beside the same block loop on a local file."""

from clusterlab.experiments.claims import fmt, median_of
from clusterlab.experiments.spec import Grid, Study, scatter, seed_numbers
from clusterlab.experiments.studies.seed001 import GIGABIT, NOTES, SETUP, flat
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


# What the paper says of this figure (its text: the figures are not in the texts), and the rule
# judging each claim from this study's rows.
def _s001_median(y, lo: float, hi: float, key="backing_rate"):
    """Median of y per ``key``; agrees when every median is within [lo, hi]."""
    def f(rows):
        parts, oks = [], []
        for g in sorted({r.get(key) for r in rows if not r.get("check")}, key=str):
            m = median_of([r for r in rows if not r.get("check")], y, **{key: g})
            if m is not None:
                parts.append(f"{key}={g}: median {fmt(m)}")
                oks.append(lo <= m <= hi)
        return "; ".join(parts) or "not measured", (all(oks) if oks else None)
    return f


PAPER = {"Fig. 4": {
        "setup": SETUP,
        "caption": "bonnie++ sequential read and write, local RAID0 vs iSCSI, 1-8 initiators on one target",
        "claims": [
            ("iSCSI read about 2/3 of local", "~0.67 of local", _s001_median("read_vs_local", 0.5, 0.85)),
            ("iSCSI read per initiator stays almost the same as initiators grow", "flat",
             flat("read_mbps_per_initiator", "backing_rate", 0.75, 1.33, " MB/s")),
            ("iSCSI write below half of local", "< 0.5 of local", _s001_median("write_vs_local", 0, 0.5)),
            ("iSCSI write decreasing with more initiators", "falling",
             flat("write_mbps_per_initiator", "backing_rate", 0, 1.0, " MB/s")),
        ]}}
