"""The rank functions a study can run, each as a factory (settings -> ``Workload``, pure data)
and an ``execute(session, params, reps, warmup)`` that yields one dict per timed repetition.

Column naming and ``undilate``: ``clusterlab.experiments.workloads.columns``.
"""

from __future__ import annotations

from clusterlab.errors import ConfigError
from clusterlab.experiments.workloads.broadcast import alltoall_broadcast
from clusterlab.experiments.workloads.columns import is_time_column, undilate
from clusterlab.experiments.workloads.mining import hpa_job, parallel_mining
from clusterlab.experiments.workloads.pingpong import pingpong

__all__ = ["alltoall_broadcast", "get", "hpa_job", "is_time_column", "parallel_mining", "pingpong", "undilate"]


def get(name: str):
    """The ``execute`` function of workload ``name``."""
    import importlib

    modules = {"alltoall_broadcast": "broadcast", "parallel_mining": "mining", "pingpong": "pingpong",
               "npb_wan": "npb", "iscsi_bonnie": "storage", "mining_from_target": "storage",
               "collective": "collective", "file_transfer": "filecopy"}
    if name not in modules:
        raise ConfigError(f"unknown workload {name!r} (known: {', '.join(sorted(modules))})")
    return importlib.import_module(f"clusterlab.experiments.workloads.{modules[name]}").execute
