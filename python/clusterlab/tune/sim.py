"""Calibrating the simulated cluster from the testbed (``clusterlab tune sim``).

``measure`` brings one testbed up (``StarTopo``, default TCP settings) and runs on it the
ping-pong between hosts 0 and 1 and a few all-to-all broadcast rounds of small blocks; ``fit``
turns what it measured into the simulated cluster's settings, ``calibrate`` does both and
returns the record (``Simulated(topo, calibration=record)`` reads it):

* ``bandwidth_factor``: from the ping-pong's large sizes (>= 64 KiB), the slope of time against
  bytes: the share of the link's rate one TCP flow gets;
* ``latency`` (per link, one way; a route between two hosts crosses two): half the ping-pong's
  one-way time at the smallest sizes (<= 64 bytes), less the bytes' time. Larger small
  messages leave within the link shaper's token bucket (two frames) faster than the link rate,
  which a flow model cannot do: they are not used;
* ``overhead`` and ``overhead_per_byte``: a rank's own time per message and per byte sent or
  received in a broadcast round, one message after the other (LogGP's o and G: the mesh's
  Python and system calls and copies, and on the testbed the n ranks sharing this machine's
  cores): the values (o in [0, 2 ms], G in [0, 200 ns/B]) whose simulated rounds match the
  measured medians best (relative error squared; Gauss-Newton steps from finite differences). Rounds that retransmitted (they waited on
  TCP's timers, which the flow model has not) are left out of the fitted median; a size most of
  whose rounds retransmitted is shown, not fitted.

SimGrid's latency factor stays 1: it multiplies every route's latency, a WAN line's too, and
what the testbed adds on a veth hop is per-message software time, not distance.

>>> fit_line([1, 2, 3], [3.0, 5.0, 7.0])
(1.0, 2.0)
"""

from __future__ import annotations

import datetime
import secrets
import statistics

from clusterlab.cluster.simulated.cluster import MESSAGE_HEADER, Simulated
from clusterlab.cluster.testbed.topo import StarTopo
from clusterlab.errors import ConfigError

PP_SIZES = (1, 64, 256, 1024, 4096, 65536, 131072, 262144, 524288, 1048576)
BCAST_SIZES = (1024, 2048, 4096, 8192)
SMALL = 64  # ping-pong sizes up to this give the latency (larger ones leave within the shaper's bucket)
MAX_OVERHEAD = 0.002  # seconds per message
MAX_PER_BYTE = 2e-7  # seconds per byte (5 MB/s)
LARGE = 65536  # and from this one on, the bandwidth


def fit_line(x, y) -> tuple[float, float]:
    """Least squares ``y = a + b x``: (a, b)."""
    n = len(x)
    if n < 2:
        raise ConfigError("a line needs at least two points")
    mx, my = sum(x) / n, sum(y) / n
    sxx = sum((v - mx) ** 2 for v in x)
    b = sum((u - mx) * (v - my) for u, v in zip(x, y, strict=True)) / sxx
    return my - b * mx, b


def measure(topo: StarTopo, *, pp_sizes=PP_SIZES, bcast_sizes=BCAST_SIZES, reps: int = 10, warmup: int = 2,
            trial_time: float = 0.05, name: str | None = None) -> dict:
    """Ping-pong (hosts 0 and 1) and broadcast rounds (every host) on a fresh testbed of
    ``topo`` (root); the measurements, undilated."""
    from clusterlab.bench.alltoall_broadcast import alltoall_broadcast
    from clusterlab.bench.pingpong import pingpong
    from clusterlab.cluster import Testbed
    from clusterlab.cluster.testbed import TestbedNetwork, require_root

    require_root()
    if topo.dilation != 1:
        raise ConfigError("calibrate on an undilated testbed (dilation 1): dilation leaves per-message times unscaled")
    with TestbedNetwork(topo, name=name or f"cal{secrets.token_hex(2)}") as net:
        c = Testbed(net)
        pp = c.run(pingpong, 2, list(pp_sizes), trial_time)[0]
        bc = {}
        for size in bcast_sizes:
            rows = c.run(alltoall_broadcast, None, int(size), reps, "same", warmup, True, None, 60.0)[0]
            bc[str(size)] = {"median_seconds": statistics.median(r["seconds"] for r in rows),
                             "seconds": [r["seconds"] for r in rows],
                             "retransmissions_per_round": [r.get("retransmissions", 0) for r in rows],
                             "retransmissions": sum(r.get("retransmissions", 0) for r in rows),
                             "timeouts": sum(r.get("timeouts", 0) for r in rows)}
    return {"pingpong": [{"bytes": r["bytes"], "seconds": r["usec"] * 1e-6} for r in pp], "broadcast": bc,
            "hosts": topo.hosts}


def _bcast_error(topo: StarTopo, latency_s: float, bf: float, overhead: float, per_byte: float, bc: dict,
                 n: int) -> tuple[float, dict]:
    sim = Simulated(topo, latency=latency_s, bandwidth_factor=bf, overhead=overhead, overhead_per_byte=per_byte,
                    loss_model=False)
    from clusterlab.bench.alltoall_broadcast import alltoall_broadcast

    got = {s: sim.run(alltoall_broadcast, n, s, 1)[0][0]["seconds"] for s in bc}
    err = sum(((got[s] - bc[s]["median_seconds"]) / bc[s]["median_seconds"]) ** 2 for s in bc)
    return err, got


def fit(topo: StarTopo, measured: dict, *, iterations: int = 8) -> dict:
    """The simulated cluster's settings that reproduce ``measured`` (``measure``'s result)."""
    rate = topo.link_rate_bps(0) if topo.switch == "bridge" else float(topo.cell_rate_bps)
    pp = measured["pingpong"]
    large = [r for r in pp if r["bytes"] >= LARGE]
    small = [r for r in pp if r["bytes"] <= SMALL]
    if len(large) < 2 or not small:
        raise ConfigError(f"the ping-pong needs two sizes >= {LARGE} and one <= {SMALL} bytes to fit")
    _, slope = fit_line([r["bytes"] for r in large], [r["seconds"] for r in large])
    bf = min(1.0, 8 / (rate * slope))
    one_way = statistics.median(r["seconds"] - (r["bytes"] + MESSAGE_HEADER) * 8 / (rate * bf) for r in small)
    latency = max(one_way / 2, 0.0)
    allbc = {int(k): v for k, v in measured["broadcast"].items()}
    # rounds that lost packets waited on TCP's timers, which the flow model has not: the median of
    # the rounds without retransmissions is fitted, a size most of whose rounds retransmitted is not
    bc = {}
    for size, v in allbc.items():
        rtx = v.get("retransmissions_per_round")
        if rtx is None:  # a record with totals only
            if not v.get("retransmissions"):
                bc[size] = {"median_seconds": v["median_seconds"]}
            continue
        clean = [t for t, r in zip(v["seconds"], rtx, strict=True) if not r]
        if 2 * len(clean) >= len(rtx):
            bc[size] = {"median_seconds": statistics.median(clean), "rounds": len(clean)}
    n = int(measured["hosts"])
    overhead, per_byte, got, at_bound = 0.0, 0.0, {}, False
    if bc:
        # the per-message and per-byte overheads whose rounds match the broadcast medians best
        # (relative error squared): Gauss-Newton steps from finite differences, kept in bounds
        sizes = sorted(bc)
        want = [bc[x]["median_seconds"] for x in sizes]

        def times(o: float, gb: float) -> list[float]:
            got = _bcast_error(topo, latency, bf, o, gb, bc, n)[1]
            return [got[x] for x in sizes]

        overhead, per_byte = 50e-6, (1e-9 if len(sizes) > 1 else 0.0)
        for _ in range(iterations):
            t0 = times(overhead, per_byte)
            do, dg = max(1e-6, 0.1 * overhead), max(1e-10, 0.1 * per_byte)
            to = times(overhead + do, per_byte)
            r = [(w - t) / w for w, t in zip(want, t0, strict=True)]
            jo = [(a - t) / do / w for a, t, w in zip(to, t0, want, strict=True)]
            if len(sizes) > 1:  # one size cannot tell a per-byte cost from a per-message one
                tg = times(overhead, per_byte + dg)
                jg = [(a - t) / dg / w for a, t, w in zip(tg, t0, want, strict=True)]
                a11, a12, a22 = sum(x * x for x in jo), sum(x * y for x, y in zip(jo, jg, strict=True)), \
                    sum(y * y for y in jg)
                b1, b2 = sum(x * e for x, e in zip(jo, r, strict=True)), sum(y * e for y, e in zip(jg, r, strict=True))
                det = a11 * a22 - a12 * a12
                step_o, step_g = ((a22 * b1 - a12 * b2) / det, (a11 * b2 - a12 * b1) / det) if det > 0 else (0.0, 0.0)
            else:
                a11 = sum(x * x for x in jo)
                step_o, step_g = (sum(x * e for x, e in zip(jo, r, strict=True)) / a11 if a11 > 0 else 0.0), 0.0
            overhead = min(max(overhead + step_o, 0.0), MAX_OVERHEAD)
            per_byte = min(max(per_byte + step_g, 0.0), MAX_PER_BYTE)
            if abs(step_o) < 1e-8 and abs(step_g) < 1e-12:
                break
        at_bound = overhead > 0.98 * MAX_OVERHEAD or per_byte > 0.98 * MAX_PER_BYTE
    if allbc:
        _, got = _bcast_error(topo, latency, bf, overhead, per_byte, allbc, n)
    return {"latency": f"{latency * 1e6:.3f}us", "latency_factor": 1.0, "bandwidth_factor": round(bf, 5),
            "overhead": f"{overhead * 1e6:.3f}us", "overhead_per_byte": float(f"{per_byte:.4g}"),
            "one_way_small_s": one_way, "overhead_at_bound": at_bound,
            "broadcast_check": {str(s): {"testbed_median_s": allbc[s]["median_seconds"], "simulated_s": got.get(s),
                                         "error": (got[s] / allbc[s]["median_seconds"] - 1) if s in got else None,
                                         "fitted": s in bc, "retransmissions": allbc[s].get("retransmissions", 0),
                                         "fitted_median_s": bc[s]["median_seconds"] if s in bc else None,
                                         "fitted_rounds": bc[s].get("rounds") if s in bc else None}
                                for s in allbc}}


def calibrate(topo: StarTopo, *, pp_sizes=PP_SIZES, bcast_sizes=BCAST_SIZES, reps: int = 10,
              name: str | None = None, measured: dict | None = None, save_measured=None) -> dict:
    """Measure on a testbed of ``topo`` (root) and fit: the calibration record (with
    provenance). ``measured``: a record's ``measured`` part instead (refit, no testbed);
    ``save_measured(partial_record)`` is called with the measurements before the fit."""
    from clusterlab.monitor.provenance import git_revision, load_average, machine, version

    load0 = load_average()
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    m = measured if measured is not None else measure(topo, pp_sizes=pp_sizes, bcast_sizes=bcast_sizes, reps=reps,
                                                      name=name)
    load1 = load_average()
    if save_measured is not None and measured is None:
        save_measured({"topology_args": topology_args(topo), "measured": m})  # kept if the fit fails
    f = fit(topo, m)
    return {"what": "clusterlab tune sim: the simulated cluster's settings fitted to a testbed's ping-pong and "
                    "all-to-all broadcast rounds (default TCP settings)",
            "topology": topo.to_dict(), "topology_args": topology_args(topo),
            "fit": {k: f[k] for k in ("latency", "latency_factor", "bandwidth_factor", "overhead", "overhead_per_byte")},
            "fit_details": f, "measured": m,
            "provenance": {"date": started, "clusterlab": version(), **git_revision(), "machine": machine(),
                           "load_before": load0, "load_after": load1,
                           "refit": measured is not None}}


def topology_args(topo: StarTopo) -> dict:
    """The ``StarTopo`` arguments a calibration's testbed had (``StarTopo(**args)`` rebuilds it)."""
    return {"hosts": topo.hosts, "rate": topo.rate, "buffer": topo.buffer, "mtu": None if topo.mtu_is_default else topo.mtu,
            "switch": topo.switch}
