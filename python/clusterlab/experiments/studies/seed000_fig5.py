"""Seed 000, Fig. 5: retransmissions per node when every host draws its own MIN from
[X, X + 100 ms] and its own MAX = MIN + 100 ms, beside the same X fixed on every host (Fig. 4).
Every point at dilation 10 (MAX = 10 ms + 100 ms needs k >= 9.1)."""

import dataclasses

from clusterlab.experiments.spec import Grid, Study, TransportConfig, scatter, seed_numbers
from clusterlab.experiments.studies._seed000 import NOTES, SCALES, STACKS, SWITCH, SWITCHES
from clusterlab.experiments.workloads import alltoall_broadcast

STUDY = Study(
    name="seed000-fig5",
    title="Seed 000 Fig. 5: retransmissions vs X with MIN random in [X, X + 100 ms], MAX = MIN + 100 ms",
    cluster=dataclasses.replace(SWITCH, dilation=10.0),
    workload=alltoall_broadcast(size="50KB"),
    transport=TransportConfig(rto_min="10ms", rto_min_jitter="100ms", rto_max_offset="100ms"),
    grid=Grid(scale=SCALES, switch=SWITCHES, stack=STACKS, rto_min=["10ms", "50ms", "100ms", "200ms", "300ms", "500ms"],
              rto_min_jitter=["0ms", "100ms"]),
    repeat=10, warmup=1, monitor=True,
    quick={"scale": "16 hosts", "hosts": "8", "switch": "atm", "rto_min": "200ms", "repeat": "2"},
    report=[*(scatter(x="rto_min_s", y=y, hue="rto_min_jitter+scale", logx=True, where={"stack": st, "switch": sw},
                      title=f"seed000-fig5, {sw} switch, {st} TCP: {y} vs MIN X")
              for sw in ("bridge", "atm") for st in STACKS for y in ("retransmissions_per_node", "seconds")),
            seed_numbers("000", "Fig. 5")],
    notes=NOTES,
)
