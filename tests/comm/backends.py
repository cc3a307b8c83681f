"""The backends the communication tests run on, and one way to run an SPMD function on each.

- ``inproc``: threads and queues (``clusterlab.comm.inproc``);
- ``tcp``: clusterlab's TCP mesh on loopback, ranks as threads of the test process
  (``local_mesh``); fast enough for property tests. Separate-process runs through the launcher
  (``launch_processes``) cover what threads cannot: a rank's process dying;
- ``mpi``: MPICH through mpi4py, ranks as processes started by ``mpiexec`` (only through
  ``launch_processes``), present when ``clusterlab.comm.mpi`` and mpi4py are.
"""

from __future__ import annotations

import importlib.util
import threading
import time

from clusterlab.comm.errors import CommTimeout, PeerFailure
from clusterlab.comm.inproc import run_threads

BACKENDS = ["inproc"]
PROCESS_BACKENDS = []
if importlib.util.find_spec("clusterlab.comm.tcp") is not None:
    BACKENDS.append("tcp")
    PROCESS_BACKENDS.append("tcp")
if (importlib.util.find_spec("clusterlab.comm.mpi") is not None and importlib.util.find_spec("mpi4py") is not None
        and importlib.util.find_spec("clusterlab.cluster.mpirun") is not None):
    PROCESS_BACKENDS.append("mpi")


def _tcp_threads(fn, n: int, timeout: float) -> list:
    from clusterlab.comm.tcp.mesh import local_mesh

    comms = local_mesh(n, default_timeout=timeout)
    results: list = [None] * n
    errors: list = [None] * n

    def body(r):
        try:
            results[r] = fn(comms[r])
        except BaseException as e:  # noqa: BLE001 - a failing rank tells its peers, as world() does
            errors[r] = e
            comms[r].abort(f"{type(e).__name__}: {e}")

    ts = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(n)]
    for t in ts:
        t.start()
    deadline = time.monotonic() + timeout
    for r, t in enumerate(ts):
        t.join(max(0.0, deadline - time.monotonic()))
        if t.is_alive():
            errors[r] = CommTimeout(f"rank {r} still running after {timeout} s")
    for c in comms:
        c.close()
    failed = [e for e in errors if e is not None]
    if failed:
        primary = [e for e in failed if not isinstance(e, PeerFailure)]
        raise (primary or failed)[0]
    return results


def launch(backend: str, fn, n: int, timeout: float = 30.0) -> list:
    """Run ``fn(comm)`` on ``n`` ranks of ``backend``; each rank's result, or raise the first
    failing rank's error."""
    if backend == "inproc":
        return run_threads(fn, n, timeout=timeout)
    if backend == "tcp":
        return _tcp_threads(fn, n, timeout)
    raise ValueError(f"unknown backend {backend}")


def launch_processes(backend: str, fn, n: int, *args, timeout: float = 120.0) -> list:
    """Run module-level ``fn(comm, *args)`` on ``n`` processes through the local launcher."""
    from clusterlab.cluster import local

    return local.run(fn, n, *args, backend=backend, timeout=timeout, comm_timeout=30.0)
