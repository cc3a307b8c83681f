"""Seed 000, Fig. 4: retransmissions per node (cluster average) against MIN, MAX = MIN + 100 ms:
the runs of Fig. 3, reported for their retransmissions."""

import dataclasses

from clusterlab.experiments.spec import scatter, seed_numbers
from clusterlab.experiments.studies.seed000_fig3 import STUDY as FIG3

STUDY = dataclasses.replace(
    FIG3,
    name="seed000-fig4",
    title="Seed 000 Fig. 4: retransmissions per node vs MIN (MAX = MIN + 100 ms)",
    report=[scatter(x="rto_min_s", y="retransmissions_per_node", hue="switch+stack+scale", logx=True),
            scatter(x="rto_min_s", y="timeouts_per_node", hue="switch+stack+scale", logx=True),
            seed_numbers("000", "Fig. 4")],
)
