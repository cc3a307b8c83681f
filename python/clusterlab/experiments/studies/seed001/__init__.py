"""What seed 001's studies share: its cluster (PCs and one iSCSI target on one Gigabit
Ethernet switch) as a testbed, and what differs from the paper."""

from clusterlab.experiments.claims import fmt, median_of
from clusterlab.experiments.spec import StarTopo, Testbed

# Gigabit Ethernet; up to 8 initiators plus the target (the last host). Jumbo frames: with
# standard 1500-byte frames this 2-core machine cannot carry 1 Gbit/s of iSCSI through the
# emulated switch (seed001-fig4, 2026-11-23: one initiator moved 59 MB/s write, 69 MB/s read
# at MTU 1500, against 115-123 MB/s at MTU 9000 in bench/storage.py).
GIGABIT = Testbed(StarTopo(hosts=9, rate="1Gbit", buffer="256KB", host_queue="1000p", mtu=9000), dilation=1)

NOTES = ("Seed 001 ran an IET iSCSI target (Linux, SAS RAID0) and Open-iSCSI initiators on one Gigabit "
         "Ethernet switch. Here: Linux network namespaces on one 2-core machine, one bridge shaped to 1 Gbit/s "
         "per port, the userspace target tgt (on the testbed's last host, file-backed LUNs) and the libiscsi "
         "initiator in the project (4 commands in flight per initiator), so target, initiators and switch share "
         "2 cores. 'backing_rate' throttles the target's backing store (tgtd in a blkio cgroup, O_DIRECT; shared "
         "by all LUNs, like one RAID) so that storage, as on the seed's disks, can be the bottleneck; 'none' is "
         "the page cache. The seed's findings are in the notes of each study and, as numbers and directions, in "
         "each figure's study module (PAPER, in clusterlab.experiments.studies.seed001).")

WITH_BONNIE = (" Here as in the seed, bonnie (write then read of its own region of the target, over and over, "
               "64 KB commands, 4 in flight) runs on every initiator host while the miners run; the backing store "
               "is throttled to 60 MB/s (tgtd in a blkio cgroup, O_DIRECT), so storage, not the network, can limit, "
               "as on the seed's RAID. HPA rescans its partition from the target every pass, as the seed's did. "
               "Seed 001 Figs. 10-11 (from its text): with bonnie++ at the same time HPA and PFP take longer, and "
               "longer as initiators are added; Fig. 12: the target's network at most 60 MB/s; Figs. 13-15: with one "
               "initiator its CPU is mostly user, with more mostly I/O wait; the target waits for I/O; storage "
               "load high: storage, not the network, bounds the system.")

# The seed's set-up, as its text gives it.
SETUP = [
    ("nodes", "initiators: Xeon 3.6 GHz, 4 GB, SATA disk; target: quad-core Xeon 1.6 GHz, 2 GB, 2 SAS disks RAID0; "
              "Linux 2.6.18"),
    ("network", "one Gigabit Ethernet switch shared by storage (iSCSI) and computation"),
    ("software", "IET 0.4.15 target, Open-iSCSI 2.0-865 initiators, bonnie++, Ganglia; HPA and PFP, 1000 items, "
                 "1M-8M transactions, the database rescanned from the target every pass"),
]


def by_ranks(rows, y, **where):
    """{ranks: median y} over the rows matching ``where`` (check rows left out)."""
    rs = [r for r in rows if not r.get("check") and all(r.get(k) == w for k, w in where.items())]
    xs = sorted({r["ranks"] for r in rs if r.get("ranks") is not None})
    return {x: m for x in xs if (m := median_of(rs, y, ranks=x)) is not None}


def flat(y, key, lo: float, hi: float, unit=""):
    """y at the most ranks / y at the fewest, per ``key``; agrees when within [lo, hi]."""
    def f(rows):
        parts, oks = [], []
        for g in sorted({r.get(key) for r in rows if not r.get("check")}, key=str):
            m = by_ranks(rows, y, **({key: g} if key else {}))
            if len(m) < 2:
                continue
            a, b = m[min(m)], m[max(m)]
            ratio = b / a if a else float("inf")
            parts.append(f"{key}={g}: {fmt(a)}{unit} at {min(m)} vs {fmt(b)}{unit} at {max(m)} initiators ({fmt(ratio)}x)")
            oks.append(lo <= ratio <= hi)
        return "; ".join(parts) or "not measured", (all(oks) if oks else None)
    return f
