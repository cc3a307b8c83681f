"""Seed 001, Fig. 11: PFP reading its data from the iSCSI target (once per job) while bonnie
runs on every initiator, against the number of initiators, beside PFP alone: seed001-fig10
with PFP."""

import dataclasses

from clusterlab.experiments.spec import seed_numbers
from clusterlab.experiments.studies.seed001_fig10 import STUDY as FIG10

STUDY = dataclasses.replace(
    FIG10,
    name="seed001-fig11",
    title="Seed 001 Fig. 11: PFP job time vs initiators, with and without bonnie at the same time",
    workload=FIG10.workload.with_params(algorithm="pfp"),
    report=[*FIG10.report[:-1], seed_numbers("001", "Fig. 11")],
)
