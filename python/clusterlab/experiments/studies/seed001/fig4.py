"""Seed 001, Fig. 4: bonnie-style sequential block write and read over iSCSI, the total
throughput of 1-8 initiators at once (the paper plots the total), beside the same block loop on
a local file."""

import statistics

from clusterlab.experiments.claims import fmt
from clusterlab.experiments.spec import Grid, Study, scatter, seed_numbers
from clusterlab.experiments.studies.seed001 import GIGABIT, NOTES, SETUP, flat
from clusterlab.experiments.workloads.storage import iscsi_bonnie

STUDY = Study(
    name="seed001-fig4",
    title="Seed 001 Fig. 4: iSCSI block write and read, total of all initiators vs initiators (local file beside)",
    cluster=GIGABIT,
    workload=iscsi_bonnie(size="32MB", block="64KB", connections=4),
    grid=Grid(ranks=[1, 2, 4, 8], backing_rate=["none", "60MB"]),
    repeat=3, warmup=0, monitor=True,
    quick={"ranks": "1,2,4", "hosts": "5", "size": "8MB", "backing_rate": "none,20MB", "repeat": "1"},
    report=[scatter(x="ranks", y="read_mbps", hue="backing_rate", title="total read throughput (MB/s) vs initiators"),
            scatter(x="ranks", y="write_mbps", hue="backing_rate", title="total write throughput (MB/s) vs initiators"),
            scatter(x="ranks", y="read_mbps_per_initiator", hue="backing_rate"),
            seed_numbers("001", "Fig. 4")],
    notes=NOTES + " Seed 001 Fig. 4 (from its text): iSCSI read about 2/3 of local and flat as initiators grow; "
                  "write below half of local and falling with more initiators.",
)


# What the paper says of this figure (its text: the figures are not in the texts), and the rule
# judging each claim from this study's rows.
def _s001_of_local(y, local, lo: float, hi: float, key="backing_rate"):
    """Median over the rows of the total ``y`` / the local file's ``local`` per ``key``; agrees
    when every judged median is within [lo, hi]. Judged only where the local loop ran on a
    disk at the target's backing-store rate (``local_backing_rate`` equal to ``backing_rate``):
    against the page cache (``none``: no disk behind either) the ratio is shown, not judged.

    >>> rows = [{"backing_rate": "60MB", "local_backing_rate": "60MB", "read_mbps": r, "local_read_mbps": 90.0}
    ...         for r in (50.0, 60.0, 70.0)]
    >>> _s001_of_local("read_mbps", "local_read_mbps", 0.5, 0.85)(rows)
    ('backing_rate=60MB: median 0.667 of local', True)
    >>> _s001_of_local("read_mbps", "local_read_mbps", 0.5, 0.85)([{"backing_rate": "none", "read_mbps": 120.0,
    ...                                                           "local_read_mbps": 10000.0}])
    ('backing_rate=none: median 0.012 of local (the page cache: not judged)', None)
    """
    def f(rows):
        parts, oks = [], []
        for g in sorted({r.get(key) for r in rows if not r.get("check")}, key=str):
            rs = [r for r in rows if not r.get("check") and r.get(key) == g and r.get(y) is not None and r.get(local)]
            if not rs:
                continue
            m = statistics.median(r[y] / r[local] for r in rs)
            disk = all(r.get("local_backing_rate") == g != "none" for r in rs)
            parts.append(f"{key}={g}: median {fmt(m)} of local" + ("" if disk else " (the page cache: not judged)"))
            if disk:
                oks.append(lo <= m <= hi)
        return "; ".join(parts) or "not measured", (all(oks) if oks else None)
    return f


PAPER = {"Fig. 4": {
        "setup": SETUP,
        "caption": "bonnie++ sequential read and write, local RAID0 vs iSCSI, 1-8 initiators on one target",
        # Fig. 4 "shows the total throughput of the storage access": the claims are judged on
        # the total of all initiators (read_mbps, write_mbps), against one local run.
        "claims": [
            ("iSCSI read about 2/3 of local (total throughput)", "~0.67 of local",
             _s001_of_local("read_mbps", "local_read_mbps", 0.5, 0.85)),
            ("iSCSI read stays almost the same as initiators grow (total throughput)", "flat",
             flat("read_mbps", "backing_rate", 0.75, 1.33, " MB/s")),
            ("iSCSI write below half of local (total throughput)", "< 0.5 of local",
             _s001_of_local("write_mbps", "local_write_mbps", 0, 0.5)),
            ("iSCSI write decreasing with more initiators (total throughput)", "falling",
             flat("write_mbps", "backing_rate", 0, 1.0, " MB/s")),
        ]}}
