"""Seed 000, Fig. 4: retransmissions per node (cluster average) against MIN, MAX = MIN + 100 ms:
the runs of Fig. 3, reported for their retransmissions."""

import dataclasses

from clusterlab.experiments.spec import scatter, seed_numbers
from clusterlab.experiments.studies.seed000 import SETUP, spread
from clusterlab.experiments.studies.seed000.fig3 import STUDY as FIG3

STUDY = dataclasses.replace(
    FIG3,
    name="seed000-fig4",
    title="Seed 000 Fig. 4: retransmissions per node vs MIN (MAX = MIN + 100 ms)",
    report=[scatter(x="rto_min_s", y="retransmissions_per_node", hue="switch+stack+scale", logx=True),
            scatter(x="rto_min_s", y="timeouts_per_node", hue="switch+stack+scale", logx=True),
            seed_numbers("000", "Fig. 4")],
)


# What the paper says of this figure (its text: the figures are not in the texts), and the rule
# judging each claim from this study's rows.
PAPER = {"Fig. 4": {
        "setup": SETUP,
        "caption": "Amount of retransmission per node, cluster average (MAX = MIN + 100 ms), MIN varied",
        "claims": [
            ("the amount of retransmission is dispersed randomly as MIN changes",
             "dispersed (no numbers in the text)", spread("rto_min_s", "retransmissions_per_node", None)),
        ]}}
