"""Seed 000, Figs. 3 and 4: broadcast time and retransmissions per node against the minimum
RTO, with MAX = MIN + 100 ms. Every point at dilation 10: MAX = 10 ms + 100 ms needs k >= 9.1."""


from clusterlab.experiments.spec import DilationCheck, Grid, Study, TransportConfig, scatter, seed_numbers
from clusterlab.experiments.studies.seed000 import NOTES, SCALES, SETUP, STACKS, SWITCH, SWITCHES, spread
from clusterlab.experiments.workloads import alltoall_broadcast

STUDY = Study(
    name="seed000-fig3",
    title="Seed 000 Figs. 3-4: broadcast time and retransmissions vs MIN (MAX = MIN + 100 ms)",
    cluster=SWITCH.with_settings(dilation=10.0),
    workload=alltoall_broadcast(size="50KB"),
    transport=TransportConfig(rto_min="200ms", rto_max_offset="100ms"),  # rto_min: the grid's
    grid=Grid(scale=SCALES, switch=SWITCHES, stack=STACKS,
              rto_min=["10ms", "50ms", "100ms", "200ms", "300ms", "500ms", "1s"]),
    checks=[DilationCheck({"hosts": 16, "rto_min": "200ms", "stack": "seed-era", "switch": "bridge"}, dilations=(10, 20))],
    repeat=10, warmup=1, monitor=True,
    quick={"scale": "16 hosts", "hosts": "8", "switch": "atm", "rto_min": "10ms,200ms", "repeat": "2"},
    report=[scatter(x="rto_min_s", y="seconds", hue="switch+stack+scale", logx=True),
            scatter(x="rto_min_s", y="retransmissions_per_node", hue="switch+stack+scale", logx=True),
            seed_numbers("000", "Fig. 3"), seed_numbers("000", "Fig. 4")],
    notes=NOTES,
)


# What the paper says of this figure (its text: the figures are not in the texts), and the rule
# judging each claim from this study's rows.
PAPER = {"Fig. 3": {
        "setup": SETUP,
        "caption": "Execution time of the broadcasting program (MAX = MIN + 100 ms), MIN varied",
        "claims": [
            ("execution time reasonably short and not much changed when MIN varies",
             "short, flat (no numbers in the text)", spread("rto_min_s", "seconds", 2.0, unit=" s")),
        ]}}
