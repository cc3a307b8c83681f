"""Tuning this cluster's TCP from measurements (seed 003's self-optimization of buffers).

``tune_buffers(load("tune.toml"))`` runs the sweep; ``write_results`` saves the result files,
plots and a sysctl.d fragment.
"""

from clusterlab.tune.buffers import tune_buffers
from clusterlab.tune.config import TuneConfig, load

__all__ = ["TuneConfig", "load", "tune_buffers"]
