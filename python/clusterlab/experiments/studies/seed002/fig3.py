"""Seed 002, Fig. 3: bcast and scatter of 1 MB vs host count, persistent vs per-call."""

from clusterlab.experiments.studies.seed002 import vs_hosts

STUDY = vs_hosts("3", "1 MB", 1048576)
