"""Seed 002's collective timings as a study workload: an OSU-style sweep of ``op`` (bcast or
scatter) over ``sizes`` on the testbed's hosts, with the persistent mesh or per-call
connections, each row beside the cost model's prediction (fitted on the same testbed's links,
``clusterlab.bench.collective_testbed``) and its relative error.

``algorithm``: ``auto`` (the cost model's pick per size, as ``collectives.run`` makes it) or
one of the operation's algorithms by name (``clusterlab.comm.collectives.ALGORITHMS``: for
bcast ``flat``, seed 002's IP baseline, ``binomial``, ``scatter_allgather``, ``paced``,
the rate-paced broadcast to the slowest receiver, and ``p2mp``, each frame sent once to a
multicast group the switch replicates); a grid axis ``algorithm=[...]`` compares them. Each
row's prediction prices the algorithm that ran.

Rows: ``bytes``, ``seconds`` (median over calls of the slowest rank), ``predicted_seconds``,
``relative_error`` (measured / predicted - 1), ``algorithm``.

>>> w = collective(op="scatter", sizes="65536", connections="per_call")
>>> w.name, w.params["connections"], w.params["algorithm"]
('collective', 'per_call', 'auto')
>>> collective(op="scatter", algorithm="paced")
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: algorithm for scatter must be one of auto, binomial, linear, got 'paced'
"""

from __future__ import annotations

from clusterlab.errors import ConfigError
from clusterlab.experiments.spec import Workload
from clusterlab.units import parse_float, parse_size

OPS = ("bcast", "scatter")
CONNECTIONS = ("persistent", "per_call")
_models: dict = {}  # one fit per testbed shape and calibration size, for the whole study


def _sizes(text: str) -> list[int]:
    out = [parse_size(s) for s in str(text).split(",") if s.strip()]
    if not out or min(out) < 1:
        raise ConfigError(f"sizes must be a comma list of positive sizes, got {text!r}")
    return out


def algorithms(op: str) -> list[str]:
    """What ``algorithm=`` accepts for ``op``: ``auto`` and the operation's algorithms."""
    from clusterlab.comm import collectives

    return ["auto", *sorted(collectives.ALGORITHMS[op])]


def collective(op: str = "bcast", sizes: str = "1KiB,4KiB,16KiB,64KiB,256KiB,1MiB", connections: str = "persistent",
               time_per_size: float = 0.4, algorithm: str = "auto") -> Workload:
    if op not in OPS:
        raise ConfigError(f"op must be one of {', '.join(OPS)}, got {op!r}")
    if algorithm not in algorithms(op):
        raise ConfigError(f"algorithm for {op} must be one of {', '.join(algorithms(op))}, got {algorithm!r}")
    if connections not in CONNECTIONS:
        raise ConfigError(f"connections must be one of {', '.join(CONNECTIONS)}, got {connections!r}")
    _sizes(sizes)
    if not parse_float(time_per_size, "time_per_size", lo=0, hi=3600) > 0:
        raise ConfigError(f"time_per_size must be positive, got {time_per_size}")
    return Workload("collective", {"op": op, "sizes": sizes, "connections": connections,
                                   "time_per_size": float(time_per_size), "algorithm": algorithm},
                    check=lambda p: collective(**p) and None)


def execute(session, params: dict, reps: int, warmup: int):
    from clusterlab.bench import collective_testbed as ct

    if session.testbed is None:  # only a testbed point has one
        raise ConfigError("the collective workload runs on a Testbed cluster (its model is fitted on the links)")
    if session.dilation != 1.0:
        raise ConfigError(f"the collective workload runs undilated (dilation 1), got {session.dilation:g}")
    collective(**params)  # the same checks as the spec's (one line naming what is accepted)
    algorithm = None if params.get("algorithm", "auto") == "auto" else params["algorithm"]
    tb = session.testbed
    k = min(8, len(tb.placement()))
    key = (tb.topo.rate, tb.topo.mtu, tb.topo.buffer, tb.topo.switch, tb.topo.host_rates, k)
    if key not in _models:
        _models[key] = ct.fit_model(tb, calibrate_hosts=k)
    model = _models[key]
    sizes = _sizes(params["sizes"])
    for i in range(warmup + reps):
        rows = ct.measure(tb, params["op"], sizes, params["connections"], model, nranks=session.ranks,
                          time_per_size=params["time_per_size"], algorithm=algorithm)
        if i < warmup:
            continue
        for r in rows:
            yield {"rep": i - warmup, "bytes": r["bytes"], "seconds": r["p50_us"] * 1e-6,
                   "predicted_seconds": r["predicted_us"] * 1e-6, "relative_error": r["relative_error"],
                   "algorithm": r["algorithm"], "iterations": r["iterations"]}
