"""Seed 001, Figs. 12-15 (Ganglia during HPA + bonnie): the target's network (Fig. 12), an
initiator's CPU (13), the target's CPU (14) and its storage I/O (15), against the number of
initiators; each job monitored with per-host CPU (columns of the study's table)."""

import dataclasses

from clusterlab.experiments.spec import Grid, scatter, seed_numbers
from clusterlab.experiments.studies.seed001_fig10 import STUDY as FIG10

STUDY = dataclasses.replace(
    FIG10,
    name="seed001-fig12",
    title="Seed 001 Figs. 12-15: target network, initiator and target CPU, target storage I/O during HPA + bonnie",
    grid=Grid(bonnie=[True], ranks=[1, 2, 4, 8]),
    repeat=1,
    report=[scatter(x="ranks", y="st_tx_mbps"),
            scatter(x="ranks", y="st_rx_mbps"),
            scatter(x="ranks", y="initiator_user_cpu"),
            scatter(x="ranks", y="io_share"),
            scatter(x="ranks", y="target_cpu"),
            scatter(x="ranks", y="target_io_wait_threads"),
            scatter(x="ranks", y="backing_mbps"),
            seed_numbers("001", "Figs. 12-15")],
)
