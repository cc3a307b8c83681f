"""Run a benchmark function on ranks, whichever way they exist.

- ``inproc``: threads of this process (``clusterlab.comm.inproc``): tests algorithms, not networks;
- ``tcp`` / ``mpi``: ``n`` processes started by the local launcher (clusterlab's TCP mesh, or
  MPICH through mpi4py);
- ``world``: this process already is a rank (started by ``clusterlab run`` or ``mpiexec``);
  every rank calls, rank 0 gets the results.

``fn`` must be a module-level function ``fn(comm, *args)`` with JSON-able ``args`` (the
launcher starts fresh processes and nothing is pickled).

>>> from clusterlab.bench.pingpong import pingpong
>>> rows = spmd(pingpong, 2, [8], backend="inproc", trial_time=0.001)[0]
>>> rows[0]["bytes"]
8
"""

from __future__ import annotations

import importlib
import importlib.util

from clusterlab.errors import ConfigError

BACKENDS = ("auto", "tcp", "mpi", "inproc", "world")


def started_as_rank() -> bool:
    """True when this process is one rank of a job (clusterlab's launcher or mpiexec)."""
    if importlib.util.find_spec("clusterlab.comm.world") is None:
        return False
    w = importlib.import_module("clusterlab.comm.world")  # the module (the package exports a function)
    return w.under_launcher() or w.under_mpi()


def resolve(backend: str) -> str:
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r} (one of {', '.join(BACKENDS)})")
    if backend == "auto":
        return "world" if started_as_rank() else "tcp"
    return backend


def spmd(fn, n: int, *args, backend: str = "auto", timeout: float = 600.0, **kwargs) -> list:
    """``fn(comm, *args, **kwargs)`` on ``n`` ranks; the list of results by rank (``world``:
    only this rank's result, in a one-element list)."""
    backend = resolve(backend)
    if backend == "inproc":
        from clusterlab.comm.inproc import run_threads

        return run_threads(fn, n, *args, timeout=timeout, **kwargs)
    if kwargs:
        raise ConfigError("keyword arguments reach only in-process ranks; pass them positionally")
    if backend == "world":
        w = importlib.import_module("clusterlab.comm.world")
        return [fn(w.world(), *args)]
    if importlib.util.find_spec("clusterlab.cluster.local") is None:
        raise ConfigError(f"backend {backend!r} needs the local launcher (clusterlab.cluster.local), "
                          "which this installation lacks; use --backend inproc")
    from clusterlab.cluster import local

    return local.run(fn, n, *args, backend=backend, timeout=timeout)
