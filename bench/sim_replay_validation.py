"""The simulated cluster's HPA replay against the testbed's: one recording replayed on both (root).

For each host count (default 8, 16, 32, 64): HPA (seed000:1M at 0.7%, clusterlab's default
HPA) is recorded once on this machine's loopback (``Local()``, as a study's simulated point
records it), then replayed with ``compute="cpu"`` (each rank waits its recorded CPU seconds, a
core of its own) times ``--scale`` (1: this machine's CPU; 100: the seed's, as Fig. 6) on

- a namespace testbed, seed 000's switch (``StarTopo(hosts=N, rate="155Mbit", buffer="64KB")``,
  the bridge, default TCP timers: MIN 200 ms, MAX 120 s) at dilation ``--dilation`` (the
  replay pays its computation times k and its job time is divided by k, as a study's
  ``compute=replay`` point), ``--reps`` times;
- the simulated cluster on the same topology, calibrated with ``--calibration`` (default: the
  record bench/results/sim_calibration.json), twice: the flows alone (``loss_model=False``: no
  RTO waits) and with the loss/timeout model's wait per pass for the pass's incast (the
  default; the model is fitted to broadcast rounds only, so HPA's replays are held out).

Per point: the testbed's median job time and what its replays lost (timeouts, the slowest
rank's RTO time per pass summed), the simulated job time and its error (simulated / testbed
median - 1) against the issue's target: 15%, 25% where the testbed's time is timeout-dominated
(the median replay's RTO waits, bounded above by ``rto_wait_bound_s``, over a tenth of its job). Per pass too, so that where the
two part is visible.

    sudo .venv/bin/python bench/sim_replay_validation.py [--hosts 8,16,32,64] [--reps 3] [--dilation 3] [--scale 1]

Writes bench/results/sim_replay_validation.json with the bench harness's provenance.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

from clusterlab.bench import harness
from clusterlab.cluster import Simulated, Testbed
from clusterlab.cluster.testbed import StarTopo, TestbedNetwork, require_root
from clusterlab.experiments.workloads.mining import hpa_recordings
from clusterlab.mining.parallel import replay_parallel

ROOT = Path(__file__).resolve().parents[1]


def rto_wait_bound_s(passes: list, rto_min_s: float) -> float:
    """An upper bound of the replay's RTO waits: per pass the largest rank's TCP_INFO total RTO
    time (counted from a recovery's first timeout) plus one minimum RTO per timeout (the wait
    before it; timeouts on different connections overlap, so this is a bound), summed."""
    return sum(max((r.get("rto_time_ms", 0) / 1e3 + r.get("timeouts", 0) * rto_min_s for r in p["ranks"]),
                   default=0.0) for p in passes)


def testbed_replays(rec: Path, n: int, k: float, scale: float, reps: int) -> dict:
    topo = StarTopo(hosts=n, rate="155Mbit", buffer="64KB", dilation=k)
    jobs, rtos, timeouts, per_pass = [], [], [], []
    load0 = os.getloadavg()[0]
    with TestbedNetwork(topo, name=f"srv{n}") as net:
        for _ in range(reps):
            rr = replay_parallel(rec, cluster=Testbed(net), compute="cpu", scale=scale * k, runtime_scale=k,
                                 setup_timeout=max(60.0, 3.0 * n), timeout=1800)
            jobs.append(rr.job_s / k)
            rtos.append(rto_wait_bound_s(rr.passes, 0.2 * k) / k)
            timeouts.append(sum(p["timeouts"] for p in rr.passes))
            per_pass.append([p["t_total"] / k for p in rr.passes])
    med = statistics.median(jobs)
    i = jobs.index(sorted(jobs)[len(jobs) // 2])
    return {"median_s": med, "job_s": jobs, "rto_wait_bound_s": rtos, "timeouts": timeouts, "passes_s": per_pass[i],
            "timeout_dominated": rtos[i] > 0.1 * jobs[i], "load_before": round(load0, 2),
            "load_after": round(os.getloadavg()[0], 2)}


def simulated_replay(rec: Path, n: int, scale: float, calibration, loss_model: bool) -> dict:
    sim = Simulated(StarTopo(hosts=n, rate="155Mbit", buffer="64KB"), calibration=calibration, loss_model=loss_model)
    t = time.perf_counter()
    rr = replay_parallel(rec, cluster=sim, compute="cpu", scale=scale, runtime_scale=1.0, timeout=3600)
    return {"job_s": rr.job_s, "passes_s": [p["t_total"] for p in rr.passes],
            "rto_wait_s": sum(p["rto_time_ms"] for p in rr.passes) / 1000.0 / n,
            "timeouts": sum(p["timeouts"] for p in rr.passes),
            "engine_wall_s": round(time.perf_counter() - t, 2)}


def main(argv=None) -> int:
    ap = harness.parser(__doc__, ROOT / "bench" / "results" / "sim_replay_validation.json")
    harness.mining_options(ap, ("--hosts", "8,16,32,64", "host counts"))
    ap.add_argument("--reps", type=int, default=3, help="testbed replays per point (default %(default)s)")
    ap.add_argument("--dilation", type=float, default=3.0, help="the testbed's dilation (default %(default)s)")
    ap.add_argument("--scale", type=float, default=1.0, help="compute_scale of the replayed mining (default %(default)s)")
    ap.add_argument("--calibration", default=str(ROOT / "bench" / "results" / "sim_calibration.json"),
                    help="a `clusterlab tune sim` record for the simulated side (default %(default)s)")
    a = ap.parse_args(argv)
    hosts = harness.counts(a.hosts, "--hosts")
    if a.reps < 1 or a.dilation < 1 or a.scale <= 0:
        print("--reps >= 1, --dilation >= 1 and --scale > 0", file=sys.stderr)
        return 2
    if not os.path.exists(a.calibration):
        print(f"--calibration {a.calibration}: no such file (clusterlab tune sim writes one)", file=sys.stderr)
        return 2
    require_root()
    run = harness.start(ap, args=a)
    points = []
    for n, rec, _, _ in hpa_recordings(a.data, a.min_support, hosts, a.cache):
        tb = testbed_replays(rec, n, a.dilation, a.scale, a.reps)
        target = 0.25 if tb["timeout_dominated"] else 0.15
        p = {"hosts": n, "testbed": tb, "target": target}
        for label, loss in (("flows", False), ("loss_model", True)):
            s = simulated_replay(rec, n, a.scale, a.calibration, loss)
            s["error"] = s["job_s"] / tb["median_s"] - 1
            s["within_target"] = abs(s["error"]) <= target
            p[label] = s
        points.append(p)
        f, m = p["flows"], p["loss_model"]
        run.say(f"{n:3d} hosts: testbed {tb['median_s']:.2f} s (RTO wait <= {statistics.median(tb['rto_wait_bound_s']):.2f} s, "
                f"timeouts {tb['timeouts']}), simulated {m['job_s']:.2f} s with the loss model ({m['error']:+.1%}; "
                f"its wait {m['rto_wait_s']:.2f} s, {m['timeouts']} timeouts), {f['job_s']:.2f} s flows alone "
                f"({f['error']:+.1%}); target {target:.0%} "
                f"(load {tb['load_before']} -> {tb['load_after']})")
    run.write({"bench": "sim_replay_validation", "data": a.data, "min_support": a.min_support, "scale": a.scale,
               "dilation": a.dilation, "reps": a.reps, "topology": "StarTopo(rate=155Mbit, buffer=64KB), bridge",
               "timers": "default (MIN 200 ms, MAX 120 s)", "calibration": os.path.relpath(a.calibration, ROOT),
               "simulated": {"flows": "calibrated, loss_model=False", "loss_model": "calibrated, the loss model's "
                             "wait per pass for its incast (fitted to broadcast rounds; HPA held out)"},
               "points": points})
    return 0


if __name__ == "__main__":
    sys.exit(main())
