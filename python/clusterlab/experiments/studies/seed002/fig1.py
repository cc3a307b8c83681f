"""Seed 002, Fig. 1: bcast and scatter time vs data size on 6 hosts, on the ATM-like and the
10 Mbit/s Ethernet network, persistent vs per-call connections, with the cost model's
prediction and its error."""

from clusterlab.experiments.spec import Study, scatter
from clusterlab.experiments.studies.seed002 import ATM, MODES, NOTES
from clusterlab.experiments.workloads.collective import collective

STUDY = Study(
    name="seed002-fig1",
    title="Seed 002 Fig. 1: bcast and scatter vs data size on 6 hosts (155 Mbit/s ATM-like and 10 Mbit/s Ethernet), "
          "persistent vs per-call",
    cluster=ATM,
    workload=collective(),
    grid=MODES,
    repeat=1, warmup=0, monitor=False,
    quick={"hosts": "3", "sizes": "4KiB,64KiB", "time_per_size": "0.1", "op": "bcast", "network": "ip-atm"},
    report=[scatter(x="bytes", y="seconds", hue="label", logx=True, logy=True, title="measured"),
            scatter(x="bytes", y="predicted_seconds", hue="label", logx=True, logy=True, title="cost model"),
            scatter(x="bytes", y="relative_error", hue="label", logx=True, title="model error (measured / predicted - 1)")],
    notes=NOTES,
)
