"""What seed 000's studies share: its switch (100 PCs on one 155 Mbit/s ATM switch), its
Solaris defaults, the two scales we run it at, the two switches and the two TCP stacks."""

from clusterlab.experiments.claims import fmt, fmt_secs, groups, median_of
from clusterlab.experiments.spec import StarTopo, Testbed, TransportConfig

# One 155 Mbit/s switch, 64 KB output buffer per port; a NIC-like host queue (1000 jumbo
# frames) so that drops happen at the switch, as on the ATM switch, not in the hosts' own queues.
SWITCH = Testbed(StarTopo(hosts=16, rate="155Mbit", buffer="64KB", host_queue="9MB", mtu=9000), dilation="auto")

# The seed's network and today's: the ATM cell switch (an OC-3c line carries 149.76 Mbit/s of
# cells; IP over ATM's MTU 9180; the same 64 KB of port memory, 1207 cells; plain UBR, cells
# lost at a full buffer and their frames at reassembly) beside the Linux bridge (tbf per port,
# whole packets dropped), as the earlier records ran it.
SWITCHES = [{"name": "bridge", "switch": "bridge", "rate": "155Mbit", "mtu": 9000},
            {"name": "atm", "switch": "atm", "rate": "155.52Mbit", "mtu": 9180}]

# 16 hosts, and the seed's 100 hosts. Every line of one figure runs at the same dilation (each
# study fixes it: rates / k, timers x k), so that lines are compared on equal terms.
SCALES = [{"name": "16 hosts", "hosts": 16}, {"name": "100 hosts", "hosts": 100}]

# The TCP stacks every figure compares: this kernel's as it is, and seed-era TCP as the seed's
# Solaris 2.5.1 had it (Reno, initial window 2, no SACK, RACK, tail loss probes, F-RTO or
# timestamps), which loses whole windows and leaves them to the RTO.
STACKS = ["linux", "seed-era"]

# Solaris 2.5.1, the seed's OS: MIN 200 ms, MAX 60 s.
SOLARIS = TransportConfig(rto_min="200ms", rto_max="60s", label="default (MIN 200 ms, MAX 60 s)")

NOTES = ("Seed 000 ran 100 Pentium Pro PCs on one HITACHI AN1000-20 ATM switch (155 Mbit/s UBR, cells "
         "dropped on overflow). Here: Linux network namespaces on one 2-core machine, with two switches side by "
         "side: clusterlab's ATM cell switch (AAL5 cells, interleaved at the output port, lost at a full cell "
         "buffer, frames lost at reassembly) and a Linux bridge with tbf shaping per port (whole packets dropped); "
         "Linux 6.18 TCP instead of Solaris 2.5.1 (and a seed-era profile of it). The AN1000's buffer per port is "
         "not in the paper: 64 KB (1207 cells) here.")

# The seed's set-up, as its text gives it (beside ours in every figure's report).
SETUP = [
    ("nodes", "100 PCs (Pentium Pro 200 MHz, 64 MB), Solaris 2.5.1"),
    ("network", "one HITACHI AN1000-20 ATM switch, 155 Mbit/s UBR, LLC/SNAP (RFC 1483); ~120 Mbit/s TCP "
                "point to point"),
    ("TCP defaults", "MIN 200 ms, MAX 60000 ms"),
    ("repetitions", "10 runs per point, every run its own mark"),
]


def spread(x, y, limit: float | None, group="scale", unit=""):
    """The medians of ``y`` over ``x`` within ``limit`` x of each other, per ``group``; judged only
    where two or more values of ``x`` were measured. Points whose rounds never finished (failed
    rows: retransmissions locked in step at a port) are told, not judged."""
    def f(rows):
        parts, oks = [], []
        for g, rs in groups(rows, group).items():
            xs = sorted({r[x] for r in rs if r.get(x) is not None and not r.get("failed")})
            meds = [(xx, median_of(rs, y, **{x: xx})) for xx in xs]
            meds = [(a, b) for a, b in meds if b is not None]
            stalled = sorted({r[x] for r in rs if r.get("failed") and r.get(x) is not None} - {a for a, _ in meds})
            note = (f" ({x.removesuffix('_s')} {', '.join(fmt_secs(v) for v in stalled)}: no round finished)"
                    if stalled else "")
            if not meds:
                parts.append(f"{g}: not measured{note}" if stalled else "")
                continue
            lo, hi = min(b for _, b in meds), max(b for _, b in meds)
            parts.append(f"{g}: medians {fmt(lo)}..{fmt(hi)}{unit} over {x.removesuffix('_s')} "
                         f"{fmt_secs(meds[0][0])}..{fmt_secs(meds[-1][0])}{note}")
            if limit is not None and lo > 0 and len(meds) > 1:
                oks.append(hi / lo <= limit)
        return "; ".join(p for p in parts if p) or "not measured", (all(oks) if oks else None)
    return f


