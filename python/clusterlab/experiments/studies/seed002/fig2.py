"""Seed 002, Fig. 2: bcast and scatter of 64 KB vs host count, persistent vs per-call."""

from clusterlab.experiments.studies.seed002 import vs_hosts

STUDY = vs_hosts("2", "64 KB", 65536)
