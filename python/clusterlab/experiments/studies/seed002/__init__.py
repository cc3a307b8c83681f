"""Shared by the seed 002 studies: the networks (the seed's IP over ATM and 10 Mbit/s Ethernet
lines, and the ATM cell switch), and what differs from the paper."""

from clusterlab.experiments.spec import Grid, StarTopo, Study, Testbed, scatter
from clusterlab.experiments.workloads.collective import collective

# The paper: SparcStations on a 155 Mbit/s ATM switch, and on 10 Mbit/s Ethernet. Here: testbed
# hosts on one switch, undilated, each network a bundle of the testbed's settings (grid axis
# ``network``; ``--set network=ethernet-10`` picks one):
# - ip-atm: IP over ATM as the Linux bridge carries it, 155 Mbit/s links with classical IP over
#   ATM's 9180-byte MTU (the network of the studies' records);
# - ethernet-10: 10 Mbit/s Ethernet, MTU 1500, each host's link shaped to 10 Mbit/s on the bridge
#   (a switched Ethernet; the seed's was probably one shared segment, where several senders at
#   once would share the 10 Mbit/s: a root's fan-out is the same on both);
# - atm-cells: the ATM cell switch (docs/atm.md), 155.52 Mbit/s lines, MTU 9180, 1000-cell port
#   buffers; point-to-multipoint frames are replicated by the switch.
NETWORKS = {
    "ip-atm": {"name": "ip-atm", "switch": "bridge", "rate": "155Mbit", "mtu": 9180, "buffer": "256KB"},
    "ethernet-10": {"name": "ethernet-10", "switch": "bridge", "rate": "10Mbit", "mtu": 1500, "buffer": "256KB"},
    "atm-cells": {"name": "atm-cells", "switch": "atm", "rate": "155.52Mbit", "mtu": 9180, "buffer": "1000cells"},
}
ATM = Testbed(StarTopo(hosts=6, rate="155Mbit", buffer="256KB", mtu=9180), dilation=1)
MODES = Grid(network=[NETWORKS["ip-atm"], NETWORKS["ethernet-10"]], op=["bcast", "scatter"],
             connections=["persistent", "per_call"])
NOTES = ("Each point times the collective (median over calls of the slowest rank) with the persistent TCP mesh "
         "or with per-call connections (every call sets up and releases the full mesh, as ATM SVCs did), beside "
         "the cost model fitted on the same testbed's links (clusterlab.bench.collective_testbed: alpha and beta "
         "from a ping-pong between two hosts, set-up from a per-call mesh of up to 8 hosts sharing the machine's "
         "CPUs). Networks: ip-atm is 155 Mbit/s links at MTU 9180 on the Linux bridge; ethernet-10 is 10 Mbit/s "
         "links at MTU 1500 on the bridge (switched; the seed's Ethernet was likely one shared segment). TCP has "
         "no point-to-multipoint connection: the seed's MPI-over-ATM line is the p2mp bcast on the cell switch "
         "(seed002-p2mp). The hosts share 2 CPUs, which bounds per-call set-up and many simultaneous "
         "senders (bcast's allgather at 16 hosts); see docs/collectives.md for the measured errors.")


def vs_hosts(figure: str, size: str, nbytes: int) -> Study:
    """Figs. 2-3: time against host count at one size, both operations and connection modes."""
    return Study(
        name=f"seed002-fig{figure}",
        title=f"Seed 002 Fig. {figure}: bcast and scatter of {size} vs hosts (155 Mbit/s ATM-like and 10 Mbit/s "
              "Ethernet), persistent vs per-call",
        cluster=ATM,
        workload=collective(sizes=str(nbytes)),
        grid=Grid(hosts=[2, 4, 6, 8, 16], **MODES.axes),
        repeat=1, warmup=0, monitor=False,
        quick={"hosts": "2,4", "op": "bcast", "time_per_size": "0.1", "network": "ip-atm"},
        report=[scatter(x="hosts", y="seconds", hue="label", title="measured"),
                scatter(x="hosts", y="predicted_seconds", hue="label", title="cost model"),
                scatter(x="hosts", y="relative_error", hue="label", title="model error (measured / predicted - 1)")],
        notes=NOTES,
    )
