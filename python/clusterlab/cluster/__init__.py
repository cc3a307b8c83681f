"""Where ranks run: one ``Cluster`` protocol (``run`` a rank function, ``launch`` a program) with
its implementations: threads (``InProcess``), local processes on loopback (``Local``), mpiexec
(``Mpirun``), a namespace testbed (``Testbed``), a simulated one (``Simulated``), or the job this process is in (``Launched``).
See ``cluster.api``."""

from clusterlab.cluster.api import (
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
from clusterlab.cluster.simulated.cluster import Simulated

__all__ = ["BACKENDS", "Cluster", "InProcess", "Launched", "Local", "Mpirun", "RankEngine", "Simulated", "Testbed", "current",
           "from_options", "rank_engine", "started_as_rank"]
