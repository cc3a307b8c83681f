"""Seed 003, Fig. 3: bandwidth vs message size for each TCP receive buffer (tcp_rmem; None:
Linux's own triple with autotuning on)."""

from clusterlab.experiments.studies.seed003 import per_value_study

STUDY = per_value_study("3", "rmem", "read")
