"""Seed 003, Fig. 4: bandwidth vs message size for each TCP send buffer (tcp_wmem; None:
Linux's own triple with autotuning on)."""

from clusterlab.experiments.studies.seed003 import per_value_study

STUDY = per_value_study("4", "wmem", "write")
