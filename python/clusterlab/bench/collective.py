"""Collective latency, OSU micro-benchmark style, with the cost model's prediction beside it.

For each size: ``warmup`` untimed calls, then ``iterations`` timed calls, each preceded by a
barrier that is not timed (so every rank starts together, as in OSU). Each rank records every
call's time; rank 0 collects them and reports, in microseconds:

- ``avg_us``, ``min_us``, ``max_us``: over ranks, of each rank's average (OSU's columns);
- ``p50_us``, ``p99_us``: over iterations, of the call's completion time (slowest rank);
- ``predicted_us``: the cost model's time for the algorithm used.

Sizes mean what OSU means: the message (bcast), one rank's chunk (scatter, gather,
allgather, alltoall: per pair), the array (reduce, allreduce: float32 elements). Payloads are
numpy ``uint8`` buffers (float32 for reductions), as MPI benchmarks use.

>>> from clusterlab.comm.inproc import run_threads
>>> rows = run_threads(run, 3, "allreduce", [4, 64], iterations=5, warmup=1)[0]
>>> [(r["bytes"], r["iterations"], r["algorithm"]) for r in rows]
[(4, 5, 'auto:allgather'), (64, 5, 'auto:allgather')]
>>> sweep("1:8"), sweep("64KiB,1MiB"), sweep("4K:16K")
([1, 2, 4, 8], [65536, 1048576], [4096, 8192, 16384])
"""

from __future__ import annotations

import re
import time

import numpy as np

from clusterlab.comm import collectives, costmodel
from clusterlab.errors import ConfigError
from clusterlab.units import parse_size

COLUMNS = ["bytes", "avg_us", "min_us", "max_us", "p50_us", "p99_us", "iterations", "predicted_us", "algorithm"]
_BIN = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def _bound(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)\s*", text, re.IGNORECASE)
    if m:  # OSU's convention in a sweep: K, M, G are powers of 1024
        return int(m.group(1)) * _BIN[m.group(2).upper()]
    return parse_size(text)


def sweep(text: str) -> list[int]:
    """Sizes from ``LO:HI`` (the powers of two from LO to HI; bare K/M/G are binary, as in
    OSU's ``-m 1:1M``) or a comma list (``64KiB,1MiB``; ``64KB`` is 64,000)."""
    if ":" in text:
        lo_s, hi_s = text.split(":", 1)
        lo, hi = _bound(lo_s), _bound(hi_s)
        if hi < lo:
            raise ConfigError(f"size sweep {text!r}: upper bound below lower bound")
        out, s = [], max(lo, 0)
        if s == 0:
            out.append(0)
            s = 1
        while s <= hi:
            out.append(s)
            s *= 2
        return out
    out = [_bound(t) for t in text.split(",") if t.strip()]
    if not out:
        raise ConfigError(f"no sizes in {text!r}")
    return out


def make_args(op: str, m: int, rank: int, n: int, root: int = 0) -> dict:
    """The arguments of one call of ``op`` for size ``m`` on ``rank``."""
    if op == "barrier":
        return {}
    buf = np.zeros(m, dtype=np.uint8)  # arrays, as MPI benchmarks send buffers
    if op == "bcast":
        return {"data": buf if rank == root else None, "root": root}
    if op == "scatter":
        return {"chunks": [buf] * n if rank == root else None, "root": root}
    if op == "gather":
        return {"data": buf, "root": root}
    if op == "allgather":
        return {"data": buf}
    if op == "alltoall":
        return {"chunks": [buf] * n}
    arr = np.ones(max(1, m // 4), dtype=np.float32)
    return {"array": arr, "op": "sum", "root": root} if op == "reduce" else {"array": arr, "op": "sum"}


def _label(op: str, algorithm: str | None, m: int, n: int, model) -> tuple[str, str]:
    """(algorithm that runs, label for the table)."""
    if algorithm is not None:
        return algorithm, algorithm
    exact = op in ("reduce", "allreduce")  # float32 sums: the model picks among exact ones
    name = model.pick(op, 4 * max(1, m // 4) if exact else m, n, exact=exact)
    return name, f"auto:{name}"


def _predict(model, op: str, name: str, m: int, n: int, mode: str) -> float:
    """Seconds per call: the algorithm alone on a persistent mesh (its set-up was paid before the
    timed calls), plus the mesh's set-up in per-call mode."""
    if mode == "per_call":
        return model.predict_mode(op, name, m, n, "per_call")
    return model.predict(op, name, m, n)


def run(comm, op: str, sizes: list[int], algorithm: str | None = None, iterations: int | None = None,
        warmup: int | None = None, time_per_size: float = 0.5, max_iterations: int = 1000) -> list[dict] | None:
    """Benchmark ``op`` over ``sizes`` on every rank of ``comm``; rank 0 returns the rows.

    Without ``iterations``, each size runs about ``time_per_size`` seconds (from the slowest
    rank's warm-up calls; 3..``max_iterations`` iterations), decided by rank 0 and broadcast."""
    if op not in collectives.OPS:
        raise ConfigError(f"unknown collective {op!r} (one of {', '.join(collectives.OPS)})")
    if algorithm is not None and algorithm not in collectives.ALGORITHMS[op]:
        raise ConfigError(f"unknown {op} algorithm {algorithm!r} (one of {', '.join(sorted(collectives.ALGORITHMS[op]))})")
    model = costmodel.current()
    n, rank = comm.size, comm.rank
    # Per-call connections set up the whole mesh in every call: the model prices that set-up.
    mode = getattr(comm, "connections", "persistent")
    rows = []
    for m in ([0] if op == "barrier" else sizes):
        kw = make_args(op, m, rank, n)
        name, label = _label(op, algorithm, m, n, model)  # what collectives.run picks
        nwarm = warmup if warmup is not None else (10 if m <= 8192 else 3)
        comm.barrier("dissemination")
        t0 = time.perf_counter()
        for _ in range(nwarm):
            collectives.run(op, comm, algorithm, **kw)
        per_call = (time.perf_counter() - t0) / max(1, nwarm)
        if iterations is None:
            # the slowest rank's warm-up decides: a fan-out's root returns once its sends are
            # buffered, long before the receivers have the data (on a 10 Mbit/s link its own
            # time asked for ~100x the calls that fit time_per_size)
            every_warm = comm.gather(np.array([per_call]), 0, "linear")
            warm = max(float(np.asarray(w).ravel()[0]) for w in every_warm) if rank == 0 else per_call
            want = int(min(max_iterations, max(3, time_per_size / max(warm, 1e-7))))
            got = comm.bcast(np.array([want], dtype=np.int64) if rank == 0 else None, 0, "binomial")
            iters = int(got[0])
        else:
            iters = iterations
        times = np.empty(iters)
        for i in range(iters):
            comm.barrier("dissemination")
            t0 = time.perf_counter()
            collectives.run(op, comm, algorithm, **kw)
            times[i] = time.perf_counter() - t0
        every = comm.gather(times, 0, "linear")
        if rank == 0:
            t = np.stack(every) * 1e6  # ranks x iterations, microseconds
            means = t.mean(axis=1)
            slowest = t.max(axis=0)
            rows.append({"bytes": m, "avg_us": float(means.mean()), "min_us": float(means.min()),
                         "max_us": float(means.max()), "p50_us": float(np.percentile(slowest, 50)),
                         "p99_us": float(np.percentile(slowest, 99)), "iterations": iters,
                         "predicted_us": _predict(model, op, name, m, n, mode) * 1e6, "algorithm": label})
    return rows if rank == 0 else None
