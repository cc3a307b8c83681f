"""Seed 001, Fig. 11: PFP reading its data from the iSCSI target (once per job) while bonnie
runs on every initiator, against the number of initiators, beside PFP alone: seed001-fig10
with PFP."""

import dataclasses

from clusterlab.experiments.spec import seed_numbers
from clusterlab.experiments.studies.seed001 import SETUP
from clusterlab.experiments.studies.seed001.fig10 import STUDY as FIG10
from clusterlab.experiments.studies.seed001.fig10 import bonnie_slower, growing

STUDY = dataclasses.replace(
    FIG10,
    name="seed001-fig11",
    title="Seed 001 Fig. 11: PFP job time vs initiators, with and without bonnie at the same time",
    workload=FIG10.workload.with_params(algorithm="pfp"),
    report=[*FIG10.report[:-1], seed_numbers("001", "Fig. 11")],
)


# What the paper says of this figure (its text: the figures are not in the texts), and the rule
# judging each claim from this study's rows.
PAPER = {"Fig. 11": {
        "setup": SETUP,
        "caption": "PFP execution time while bonnie++ runs, 1-8 initiators",
        "claims": [
            ("longer with bonnie++ at the same time", "longer", bonnie_slower),
            ("longer as initiators are added", "growing", growing),
        ]}}
