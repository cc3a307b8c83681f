"""Seed 002's MPI-over-ATM line against point-to-point on the same switch (Figs. 2-3): the
broadcast over a point-to-multipoint channel of the ATM cell switch (the switch replicates each
frame; NAKs and retransmission over point-to-point) with its channel and connections set up per
call, as the seed's VCs were, and kept; beside point-to-point broadcasts over the persistent
mesh: the flat fan-out (the seed's IP over ATM) and the cost model's pick. 64 KB and 1 MB,
2..16 hosts. The seed: point-to-multipoint loses at 64 KB (set-up) and wins at 1 MB."""

from clusterlab.experiments.spec import Grid, StarTopo, Study, Testbed, scatter
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
            scatter(x="hosts", y="relative_error", hue="label", title="model error (measured / predicted - 1)")],
    notes=NOTES + (" Here every line runs on the ATM cell switch (155.52 Mbit/s, MTU 9180, 1000-cell ports). p2mp: "
                   "the root sends each frame once to an IP multicast group that the switch replicates to every "
                   "host's port (collectives.bcast_p2mp: NAKs and retransmission over the point-to-point "
                   "connections); per call, the call sets up the TCP mesh and the group (its address and key "
                   "from rank 0, every rank joining and reporting) and releases them, the testbed's counterpart of "
                   "the seed's VC set-up and release, which the switch does not emulate (no ATM signalling): the "
                   "set-up here is TCP connections and Python on 2 shared CPUs, not the seed's switch signalling."),
)
