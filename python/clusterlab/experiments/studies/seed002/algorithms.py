"""Seed 002's broadcasts side by side: every bcast algorithm (the IP baseline ``flat``, the trees,
the rate-paced broadcast to the slowest receiver, the point-to-multipoint one) on the seed's
networks at its 6 nodes, 64 KB and 1 MB: the ATM-like bridge, 10 Mbit/s Ethernet, the ATM-like
bridge with one slow receiver (where pacing matters), and the ATM cell switch."""

from clusterlab.experiments.spec import Grid, Study, scatter
from clusterlab.experiments.studies.seed002 import ATM, NETWORKS, NOTES
from clusterlab.experiments.workloads.collective import collective

# One receiver (h1) with a tenth of the others' link rate: the slowest receiver the paced
# broadcast matches its rate to (seed 002's SS5s and SS20s received at different speeds).
SLOW = {**NETWORKS["ip-atm"], "name": "ip-atm-slow-h1", "host_rates": "h1=15.5Mbit"}

STUDY = Study(
    name="seed002-algorithms",
    title="Seed 002: every bcast algorithm at 6 hosts, 64 KB and 1 MB, on 155 Mbit/s ATM-like links, 10 Mbit/s "
          "Ethernet, ATM-like links with one slow receiver, and the ATM cell switch",
    cluster=ATM,
    workload=collective(op="bcast", sizes="64KiB,1MiB"),
    grid=Grid(network=[NETWORKS["ip-atm"], NETWORKS["ethernet-10"], SLOW, NETWORKS["atm-cells"]],
              algorithm=["flat", "binomial", "scatter_allgather", "paced", "p2mp"]),
    repeat=1, warmup=0, monitor=False,
    quick={"hosts": "3", "sizes": "64KiB", "time_per_size": "0.1", "network": "ip-atm", "algorithm": "flat,paced"},
    report=[scatter(x="algorithm", y="seconds", hue="network", where={"bytes": 65536}, title="64 KiB, measured"),
            scatter(x="algorithm", y="seconds", hue="network", where={"bytes": 1048576}, title="1 MiB, measured"),
            scatter(x="algorithm", y="relative_error", hue="label", title="model error (measured / predicted - 1)")],
    notes=NOTES + (" ip-atm-slow-h1: h1's link at 15.5 Mbit/s (both directions), the others at 155: the paced "
                   "broadcast measures every receiver's speed and sends to all at the slowest one's rate."),
)
