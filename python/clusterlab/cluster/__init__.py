"""Where ranks run: one ``Cluster`` protocol (``run`` a rank function, ``launch`` a program) with
its implementations: threads (``InProcess``), local processes on loopback (``Local``), mpiexec
(``Mpirun``), a namespace testbed (``Testbed``), a simulated one (``Simulated``), or the job this process is in (``Launched``).
See ``cluster.api``.

The names are imported on first use: every rank process starts as ``clusterlab.cluster.rank``,
which needs none of them (importing them all cost each rank 0.2 s of CPU at start-up)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

_WHERE = {name: "clusterlab.cluster.api" for name in (
    "BACKENDS", "Cluster", "InProcess", "Launched", "Local", "Mpirun", "RankEngine", "Testbed", "current",
    "from_options", "rank_engine", "started_as_rank")}
_WHERE["Simulated"] = "clusterlab.cluster.simulated.cluster"

__all__ = sorted(_WHERE)

if TYPE_CHECKING:
    from clusterlab.cluster.api import (  # noqa: F401
        BACKENDS,
        Cluster,
        InProcess,
        Launched,
        Local,
        Mpirun,
        RankEngine,
        Testbed,
        current,
        from_options,
        rank_engine,
        started_as_rank,
    )
    from clusterlab.cluster.simulated.cluster import Simulated  # noqa: F401


def __getattr__(name: str):
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'clusterlab.cluster' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_WHERE))
