"""Seed 002's collective timings on a namespace testbed, with the cost model beside them.

``fit_model(tb)`` fits the cost model *on the testbed's links*: a ping-pong between hosts 0 and
1 (alpha, beta, per-message overhead) and the time to open and authenticate one connection
across the switch (``setup``), with ``concurrency=0`` (every host has its own link and the
switch is non-blocking). ``measure(tb, op, sizes, mode, model)`` runs the OSU-style collective
benchmark (``bench.collective.run``) on every host with the persistent mesh or per-call
connections, and each row carries the model's prediction for that mode. ``relative_error``
is measured / predicted - 1 per row.

Example (needs root)::

    from clusterlab.cluster.testbed import StarTopo, Testbed
    with Testbed(StarTopo(hosts=6, rate="155Mbit", mtu=9180)) as tb:
        model = fit_model(tb)
        rows = measure(tb, "bcast", [65536, 1 << 20], "per_call", model)
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import statistics
import tempfile

from clusterlab.comm import costmodel
from clusterlab.errors import ConfigError

MODES = ("persistent", "per_call")


def _my_address() -> str:
    from clusterlab.cluster import address, contract

    return os.environ.get(contract.ENV_BIND) or address.choose()


def setup_times(comm, count: int = 20) -> list[float] | None:
    """Rank 0 opens ``count`` connections to rank 1 across the network and runs the mesh's
    authentication handshake on each; rank 0 returns the seconds per connection."""
    from clusterlab.bench.setup import serve_handshakes, time_handshakes

    if comm.rank > 1:
        comm.barrier()
        return None
    secret = comm.bcast(os.urandom(32) if comm.rank == 0 else None, root=0, algorithm="binomial")
    if comm.rank == 1:
        lsock = socket.create_server((_my_address(), 0))
        lsock.settimeout(30)
        comm.send(0, json.dumps([_my_address(), lsock.getsockname()[1]]).encode(), 7)
        try:
            serve_handshakes(lsock, secret, count)
        finally:
            lsock.close()
        comm.barrier()
        return None
    host, port = json.loads(comm.recv(1, 7))
    out = time_handshakes(host, port, secret, count)
    comm.barrier()
    return out


def two_region_fit(rows: list[dict], small: int = 64, large: int = 65536) -> tuple[float, float]:
    """(alpha, beta) of a shaped link: alpha the median half round trip of messages up to
    ``small`` bytes, beta the least-squares slope of the rest of the time over messages of at
    least ``large`` bytes. (``costmodel.fit`` minimises the relative error over every size, which
    on a tc-shaped link under load lets the noisy middle sizes pull beta to twice the line rate.)

    >>> rows = [{"bytes": b, "usec": 50 + b * 0.05} for b in (1, 8, 64, 65536, 1 << 20)]
    >>> a, b = two_region_fit(rows)
    >>> round(a * 1e6), round(b * 1e9, 3)
    (50, 50.0)
    """
    smalls = [float(r["usec"]) * 1e-6 for r in rows if r["bytes"] <= small]
    bigs = [(float(r["bytes"]), float(r["usec"]) * 1e-6) for r in rows if r["bytes"] >= large]
    if not smalls or len(bigs) < 1:
        raise ConfigError(f"the fit needs ping-pong rows up to {small} bytes and from {large} bytes")
    alpha = float(statistics.median(smalls))
    beta = sum(m * (t - alpha) for m, t in bigs) / sum(m * m for m, _ in bigs)
    return alpha, max(beta, 0.0)


def per_call_overhead(comm, calls: int = 20) -> float:
    """Seconds per call this rank spent setting up and releasing its per-call connections over
    ``calls`` barriers (the communicator must be a per-call one)."""
    for _ in range(calls):
        comm.barrier()
    st = comm.stats()
    return (st["setup_seconds"] + st["teardown_seconds"]) / max(1, st["calls"])


def fit_model(tb, sizes: tuple[int, int] = (1, 1 << 20), trial_time: float = 0.02,
              calibrate_hosts: int | None = 8) -> costmodel.CostModel:
    """The cost model of ``tb``'s links (ping-pong between hosts 0 and 1, set-up across the switch).

    The testbed's hosts share this machine's CPUs, so a per-call mesh's set-ups queue for them:
    with ``calibrate_hosts`` = k, ``setup`` is fitted from the set-up and release time of a
    per-call mesh of k hosts (the slowest rank's, per call) as k(k-1)/2 set-ups over the CPU
    count (``setup_cpus``); otherwise it is one connection's set-up measured alone."""
    from clusterlab.bench import pingpong as pp
    from clusterlab.comm.tcp.mesh import CONNECTIONS_ENV

    cal = tb.run(pp.calibrate, 2, pp.sizes(*sizes), trial_time, timeout=600)[0]
    setup = tb.run(setup_times, 2, timeout=120)[0]
    m = costmodel.fit(cal["rows"], setup_times=setup, source=f"testbed {tb.topo.rate} {tb.topo.hosts} hosts",
                      concurrency=0.0, overhead=cal["overhead"])
    alpha, beta = two_region_fit(cal["rows"])
    m = dataclasses.replace(m, alpha=alpha, beta=beta)
    m.details["setup_samples"] = len(setup)
    m.details["setup_stdev"] = statistics.pstdev(setup)
    m.details["setup_alone"] = m.setup
    k = min(calibrate_hosts or 0, len(tb.placement()))
    if k >= 3:
        cpus = float(os.cpu_count() or 1)
        env = dict(os.environ, **{CONNECTIONS_ENV: "per_call"})
        per_call = max(tb.run(per_call_overhead, k, 20, timeout=300, env=env))
        m = dataclasses.replace(m, setup=per_call * cpus / (k * (k - 1) / 2), setup_cpus=cpus)
        m.details.update({"setup_calibrated_hosts": k, "per_call_overhead": per_call})
    return m


def measure(tb, op: str, sizes: list[int], mode: str, model: costmodel.CostModel, nranks: int | None = None,
            time_per_size: float = 0.5) -> list[dict]:
    """``bench.collective.run`` on the testbed's hosts in connection ``mode`` under ``model``."""
    from clusterlab.bench.collective import run as bench_run
    from clusterlab.comm.tcp.mesh import CONNECTIONS_ENV

    if mode not in MODES:
        raise ConfigError(f"connection mode must be one of {', '.join(MODES)}, got {mode!r}")
    with tempfile.TemporaryDirectory(prefix="clab-model-") as d:
        path = os.path.join(d, "model.json")
        model.save(path)
        env = dict(os.environ, CLUSTERLAB_COSTMODEL=path, **{CONNECTIONS_ENV: mode})
        rows = tb.run(bench_run, nranks, op, sizes, None, None, None, time_per_size, timeout=900, env=env)[0]
    n = nranks or len(tb.placement())
    for r in rows:
        r.update({"op": op, "hosts": n, "connections": mode,
                  "relative_error": r["p50_us"] / r["predicted_us"] - 1 if r["predicted_us"] > 0 else None})
    return rows


def median_abs_error(rows: list[dict]) -> float:
    """The median over rows of |measured / predicted - 1|."""
    errs = [abs(r["relative_error"]) for r in rows if r.get("relative_error") is not None]
    if not errs:
        raise ConfigError("no rows with a prediction")
    return float(statistics.median(errs))
