"""The backends the communication tests run on, and one way to run an SPMD function on each.

``inproc`` always; ``tcp`` and ``mpi`` join when their modules are present."""

from __future__ import annotations

from clusterlab.comm.inproc import run_threads

BACKENDS = ["inproc"]


def launch(backend: str, fn, n: int, timeout: float = 30.0) -> list:
    """Run ``fn(comm)`` on ``n`` ranks of ``backend``; each rank's result, or raise the first
    failing rank's error."""
    if backend == "inproc":
        return run_threads(fn, n, timeout=timeout)
    raise ValueError(f"unknown backend {backend}")
