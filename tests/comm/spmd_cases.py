"""Module-level SPMD functions for backends whose ranks are separate processes (the launcher
imports them by name; arguments and results are JSON). Inputs come from seeds, so the test
process can rebuild them and compare every rank's result with the in-process backend's."""

from __future__ import annotations

import hashlib
import os

import numpy as np

from clusterlab.comm import collectives as C

DTYPES = ["uint8", "int32", "int64", "float32", "float64"]


def case_inputs(op: str, n: int, seed: int):
    """(per-rank payloads, root, reduction) for one case."""
    rng = np.random.default_rng([seed, n, C.OPS.index(op)])
    root = int(rng.integers(0, n))
    red = ["sum", "min", "max"][int(rng.integers(0, 3))]

    def one():
        if op in ("reduce", "allreduce"):
            return None
        if rng.random() < 0.5:
            return rng.bytes(int(rng.integers(0, 3000)))
        dt = DTYPES[int(rng.integers(0, len(DTYPES)))]
        return (rng.random(int(rng.integers(0, 500))) * 100).astype(dt)

    if op in ("reduce", "allreduce"):
        dt = DTYPES[int(rng.integers(0, len(DTYPES)))]
        size = int(rng.integers(0, 5000))
        per_rank = [(rng.random(size) * 1000 - 500).astype(dt) for _ in range(n)]
    elif op == "bcast":
        per_rank = [one()] * n
    else:
        per_rank = [one() for _ in range(n)]
    return per_rank, root, red


def run_case(comm, op: str, name: str | None, seed: int):
    n, r = comm.size, comm.rank
    per_rank, root, red = case_inputs(op, n, seed)
    if op == "barrier":
        return C.run(op, comm, name)
    if op == "bcast":
        return C.run(op, comm, name, data=per_rank[root] if r == root else None, root=root)
    if op == "scatter":
        return C.run(op, comm, name, chunks=per_rank if r == root else None, root=root)
    if op == "gather":
        return C.run(op, comm, name, data=per_rank[r], root=root)
    if op == "allgather":
        return C.run(op, comm, name, data=per_rank[r])
    if op == "alltoall":
        return C.run(op, comm, name, chunks=[per_rank[(r + j) % n] for j in range(n)])
    if op == "reduce":
        return C.run(op, comm, name, array=per_rank[r], op=red, root=root)
    return C.run(op, comm, name, array=per_rank[r], op=red)


def canon(x) -> bytes:
    """A byte string that identifies a result exactly (type, dtype, shape, bytes)."""
    if x is None:
        return b"N"
    if isinstance(x, list):
        return b"L%d[" % len(x) + b"".join(canon(i) for i in x) + b"]"
    if isinstance(x, np.ndarray):
        return b"A" + x.dtype.str.encode() + repr(x.shape).encode() + x.tobytes()
    return b"B%d:" % len(x) + bytes(x)


def digest(x) -> str:
    return hashlib.sha256(canon(x)).hexdigest()[:24]


def cases() -> list[tuple[str, str | None]]:
    # (not the algorithms that need a multicast group, which processes on loopback have not)
    return [(op, name) for op in C.OPS for name in [*sorted(C.ALGORITHMS[op]), None]
            if name is None or getattr(C.MODULES[op][name], "AUTO", True)]


def all_cases(comm, seeds: list[int]) -> list[str]:
    """Every algorithm on every seed, back to back on one communicator: the digests."""
    return [digest(run_case(comm, op, name, s)) for s in seeds for op, name in cases()]


def die_mid(comm, op: str, name: str, victim: int, after: int):
    """``victim`` exits abruptly (no goodbye, no exception handling) at its point-to-point
    call number ``after + 1`` inside the collective; the others run the collective."""
    if comm.rank == victim:
        count = [0]

        def wrap(real):
            def call(*a, **k):
                count[0] += 1
                if count[0] > after:
                    os._exit(9)
                return real(*a, **k)
            return call

        comm.send, comm.recv = wrap(comm.send), wrap(comm.recv)  # the calls collectives make
    run_case(comm, op, name, 0)
    return "finished"
