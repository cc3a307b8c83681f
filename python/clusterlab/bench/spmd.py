"""Run a benchmark function on the ranks of a cluster (``clusterlab.cluster``: threads of this
process, local processes, mpiexec, a testbed's hosts, or the job this process is one rank of,
where every rank calls and each gets its own results).

``fn`` must be a module-level function ``fn(comm, *args)`` with JSON-able ``args`` (launched
ranks are fresh processes and nothing is pickled; keyword arguments reach in-process ranks only).

>>> from clusterlab.bench.pingpong import pingpong
>>> from clusterlab.cluster import InProcess
>>> rows = spmd(pingpong, 2, [8], cluster=InProcess(), trial_time=0.001)[0]
>>> rows[0]["bytes"]
8
"""

from __future__ import annotations

from clusterlab.errors import ConfigError


def spmd(fn, n: int, *args, cluster, timeout: float = 600.0, **kwargs) -> list:
    """``fn(comm, *args, **kwargs)`` on ``n`` ranks of ``cluster``; the list of results by rank
    (a job this process is one rank of: only this rank's result, in a one-element list)."""
    if cluster is None:
        raise ConfigError("spmd needs a cluster (clusterlab.cluster: InProcess(), Local(), Mpirun(), ...)")
    return cluster.run(fn, n, *args, timeout=timeout, kwargs=kwargs or None)
