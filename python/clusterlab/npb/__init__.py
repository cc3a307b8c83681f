"""NAS Parallel Benchmarks (NPB 3.x: EP, IS, CG, MG, FT, LU, SP; classes S, W, A) on clusterlab's
Communicator, so they run on the TCP mesh (with every TCP knob), under MPI, or as threads.

Compute is in Rust (``clusterlab._core``); communication follows the reference MPI code's
pattern (EP a final reduction, IS an all-to-all-v of keys, CG row/column exchanges on NPB's
2-D process grid, MG halo exchanges on its 3-D decomposition, FT transposes by all-to-all,
LU a pipelined wavefront of k-planes on its 2-D decomposition,
SP face exchanges and pipelined line solves on NPB's multi-partition).
Each run is verified with NPB's own reference values and reports NPB's Mop/s, plus per-rank
compute time between messages and traffic.

>>> r = run("ep", "S", n=2)                  # in-process ranks (threads) unless cluster= says
>>> r.verified, r.nprocs, r.size
(True, 2, '33554432')
"""

from __future__ import annotations

import importlib
import json

from clusterlab.comm.places import InProcess
from clusterlab.errors import ConfigError
from clusterlab.npb.common import CLASSES, KERNELS, NpbResult, TracedComm, check_class

_MODULES = {"ep": "ep", "is": "is_", "cg": "cg", "mg": "mg", "ft": "ft", "lu": "lu", "sp": "sp"}

__all__ = ["CLASSES", "KERNELS", "NpbResult", "kernel_module", "run"]


def kernel_module(kernel: str):
    """The module implementing ``kernel`` (ep, is, cg, mg, ft, lu, sp)."""
    k = str(kernel).lower()
    if k not in _MODULES:
        raise ConfigError(f"unknown NPB kernel {kernel!r} (one of {', '.join(KERNELS)})")
    return importlib.import_module(f"clusterlab.npb.{_MODULES[k]}")


def check(kernel: str, cls: str, n: int) -> tuple:
    """(module, class letter) after checking that ``kernel`` runs in class ``cls`` on ``n``
    ranks; ConfigError saying what is accepted otherwise."""
    mod = kernel_module(kernel)
    c = check_class(kernel, cls)
    if not isinstance(n, int) or n < 1:
        raise ConfigError(f"number of ranks must be at least 1, got {n!r}")
    mod.check(c, n)
    return mod, c


def rank_main(comm, kernel: str, cls: str, backend: str, events: bool):
    """One rank's part of a run (module-level so launchers can start it): the kernel on a
    traced communicator, then the per-rank figures gathered at rank 0, which returns the
    result as a dict (other ranks return None)."""
    mod, c = check(kernel, cls, comm.size)
    traced = TracedComm(comm)
    out = mod.run(traced, c)
    mine = dict(traced.summary(), seconds=out.seconds)
    if events:
        mine["events"] = traced.events
    parts = comm.gather(json.dumps(mine).encode(), root=0)
    if comm.rank != 0:
        return None
    ranks = [json.loads(bytes(p)) for p in parts]
    ev = [r.pop("events") for r in ranks] if events else None
    seconds = max(r["seconds"] for r in ranks)
    size, iterations = mod.describe(c)
    res = NpbResult(kernel=mod.NAME, cls=c, size=size, iterations=iterations, nprocs=comm.size,
                    backend=backend, seconds=seconds, mops=mod.mops(c, seconds) if seconds > 0 else 0.0,
                    optype=mod.OPTYPE, verified=bool(out.verified), verification=out.values,
                    ranks=ranks, events=ev)
    return res.to_dict(events=events)


def _from_dict(d: dict) -> NpbResult:
    d = dict(d)
    d["cls"] = d.pop("class")
    d.pop("mops_per_process", None)
    d.setdefault("events", None)
    return NpbResult(**d)


def run(kernel: str, cls: str = "S", n: int = 1, cluster=None, transport=None,
        timeout: float | None = 600.0, events: bool = False) -> NpbResult | None:
    """Run NPB ``kernel`` in class ``cls`` on ``n`` ranks of ``cluster`` and return the result
    record.

    ``cluster``: a ``clusterlab.cluster.Cluster`` (default ``InProcess()``, threads of this
    process): ``Local()`` (processes on the TCP mesh, ``transport`` a ``TransportConfig`` with
    the TCP knobs), ``Mpirun()`` (mpiexec + MPICH), ``Testbed(name)``, or ``Launched()`` (this
    process is already a rank of a job started by ``clusterlab run`` or ``mpiexec``: every rank
    calls, rank 0 gets the result, the others None; ``n`` must be the job's size).
    ``events=True`` keeps each rank's call sequence (for compute replay).
    """
    check(kernel, cls, n)
    cluster = InProcess() if cluster is None else cluster
    args = (str(kernel).lower(), str(cls).upper(), cluster.name, bool(events))
    results = cluster.run(rank_main, n, *args, transport=transport, timeout=timeout)
    return _from_dict(results[0]) if results[0] is not None else None
