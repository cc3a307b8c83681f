"""Shared by the seed 002 studies: the ATM-like testbed, and what differs from the paper."""

from clusterlab.experiments.spec import Grid, StarTopo, Study, Testbed, scatter
from clusterlab.experiments.workloads.collective import collective

# The paper: SparcStations on a 155 Mbit/s ATM switch (and 10 Mbit/s Ethernet). Here: testbed
# hosts on one switch at 155 Mbit/s with classical IP over ATM's 9180-byte MTU, undilated.
ATM = Testbed(StarTopo(hosts=6, rate="155Mbit", buffer="256KB", mtu=9180), dilation=1)
MODES = Grid(op=["bcast", "scatter"], connections=["persistent", "per_call"])
NOTES = ("Each point times the collective (median over calls of the slowest rank) with the persistent TCP mesh "
         "or with per-call connections (every call sets up and releases the full mesh, as ATM SVCs did), beside "
         "the cost model fitted on the same testbed's links (clusterlab.bench.collective_testbed: alpha and beta "
         "from a ping-pong between two hosts, set-up from a per-call mesh of up to 8 hosts sharing the machine's "
         "CPUs). TCP has no point-to-multipoint connection, so the seed's ATM multicast has no counterpart: "
         "per-call mode can only add set-up. The hosts share 2 CPUs, which bounds per-call set-up and many "
         "simultaneous senders (bcast's allgather at 16 hosts); see docs/collectives.md for the measured errors.")


def vs_hosts(figure: str, size: str, nbytes: int) -> Study:
    """Figs. 2-3: time against host count at one size, both operations and connection modes."""
    return Study(
        name=f"seed002-fig{figure}",
        title=f"Seed 002 Fig. {figure}: bcast and scatter of {size} vs hosts (155 Mbit/s), persistent vs per-call",
        cluster=ATM,
        workload=collective(sizes=str(nbytes)),
        grid=Grid(hosts=[2, 4, 6, 8, 16], **MODES.axes),
        repeat=1, warmup=0, monitor=False,
        quick={"hosts": "2,4", "op": "bcast", "time_per_size": "0.1"},
        report=[scatter(x="hosts", y="seconds", hue="label", title="measured"),
                scatter(x="hosts", y="predicted_seconds", hue="label", title="cost model"),
                scatter(x="hosts", y="relative_error", hue="label", title="model error (measured / predicted - 1)")],
        notes=NOTES,
    )
