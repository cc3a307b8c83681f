"""Seed 002's MPI-over-ATM line against point-to-point on the same switch (Figs. 2-3): the
broadcast over a point-to-multipoint channel of the ATM cell switch (the switch replicates each
frame; NAKs and retransmission over point-to-point) with its channel and connections set up per
call, as the seed's VCs were, and kept; beside point-to-point broadcasts over the persistent
mesh: the flat fan-out (the seed's IP over ATM) and the cost model's pick. 64 KB and 1 MB,
2..16 hosts. The seed: point-to-multipoint loses at 64 KB (set-up) and wins at 1 MB."""

import statistics

from clusterlab.experiments.claims import fmt
from clusterlab.experiments.spec import Grid, StarTopo, Study, Testbed, scatter, seed_numbers
from clusterlab.experiments.studies.seed002 import NETWORKS, NOTES
from clusterlab.experiments.workloads.collective import collective

_CELLS = {k: v for k, v in NETWORKS["atm-cells"].items() if k != "name"}
LINES = [{"name": "p2p-flat", "algorithm": "flat", "connections": "persistent"},
         {"name": "p2p-auto", "algorithm": "auto", "connections": "persistent"},
         {"name": "p2mp-per-call", "algorithm": "p2mp", "connections": "per_call"},
         {"name": "p2mp-persistent", "algorithm": "p2mp", "connections": "persistent"}]

STUDY = Study(
    name="seed002-p2mp",
    title="Seed 002 Figs. 2-3: bcast over a point-to-multipoint channel of the ATM cell switch vs point-to-point, "
          "64 KB and 1 MB, 2..16 hosts",
    cluster=Testbed(StarTopo(hosts=6, **_CELLS), dilation=1),
    workload=collective(op="bcast", sizes="64KiB,1MiB"),
    grid=Grid(hosts=[2, 4, 6, 8, 16], line=LINES),
    repeat=1, warmup=0, monitor=False,
    quick={"hosts": "3", "sizes": "64KiB", "time_per_size": "0.1", "line": "p2p-flat,p2mp-per-call"},
    report=[scatter(x="hosts", y="seconds", hue="line", where={"bytes": 65536}, title="64 KiB, measured"),
            scatter(x="hosts", y="seconds", hue="line", where={"bytes": 1048576}, title="1 MiB, measured"),
            scatter(x="hosts", y="relative_error", hue="label", title="model error (measured / predicted - 1)"),
            seed_numbers("002", "Fig. 2"), seed_numbers("002", "Fig. 3")],
    notes=NOTES + (" Here every line runs on the ATM cell switch (155.52 Mbit/s, MTU 9180, 1000-cell ports). p2mp: "
                   "the root sends each frame once to an IP multicast group that the switch replicates to every "
                   "host's port (collectives.bcast_p2mp: NAKs and retransmission over the point-to-point "
                   "connections); per call, the call sets up the TCP mesh and the group (its address and key "
                   "from rank 0, every rank joining and reporting) and releases them, the testbed's counterpart of "
                   "the seed's VC set-up and release, which the switch does not emulate (no ATM signalling): the "
                   "set-up here is TCP connections and Python on 2 shared CPUs, not the seed's switch signalling."),
)


SETUP = [
    ("nodes", "6 SPARCstations (4 SS5 70 MHz, 2 SS20 75 MHz), Solaris 2.5"),
    ("network", "SUMINET-3700SH ATM switch, 155.52 Mbit/s, 8 ports; ENI-155s adapters; and 10 Mbit/s Ethernet"),
    ("lines", "MPI over ATM (point-to-multipoint VC per call, set-up and release counted), IP over ATM and "
              "over Ethernet (MPI_Bcast by point-to-point, connections made at start-up)"),
]


def _versus(nbytes: int, p2mp_faster: bool, line: str = "p2mp-per-call", against: str = "p2p-flat"):
    """The rule: at every host count of the run, ``line``'s median time against ``against``'s at
    ``nbytes``; agrees when p2mp is faster (or slower) at every host count."""
    def rule(rows):
        def med(ln, h):
            v = [r["seconds"] for r in rows if r.get("line") == ln and r.get("hosts") == h and r.get("bytes") == nbytes]
            return statistics.median(v) if v else None

        hosts = sorted({r["hosts"] for r in rows if r.get("bytes") == nbytes and r.get("line") in (line, against)})
        pairs = [(h, med(line, h), med(against, h)) for h in hosts]
        pairs = [(h, a, b) for h, a, b in pairs if a is not None and b is not None]
        if not pairs:
            return "not measured", None
        text = ", ".join(f"{h} hosts {fmt(a / b)}x" for h, a, b in pairs)
        faster = [a < b for _, a, b in pairs]
        return f"{line} / {against} time: {text}", all(faster) if p2mp_faster else not any(faster)
    return rule


PAPER = {
    "Fig. 2": {
        "setup": SETUP,
        "caption": "MPI_Bcast time vs nodes at 64 KB",
        "claims": [("MPI over ATM (point-to-multipoint, VC set-up per call) slower than IP over ATM at 64 KB",
                    "slower at every node count", _versus(65536, False))]},
    "Fig. 3": {
        "setup": SETUP,
        "caption": "MPI_Bcast time vs nodes at 1024 KB",
        "claims": [("MPI over ATM (point-to-multipoint, VC set-up per call) faster than IP over ATM at 1 MB",
                    "faster at every node count", _versus(1048576, True))]},
}
