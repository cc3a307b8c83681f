"""The simulated cluster against the testbed: seed 000's all-to-all broadcast at 8, 16 and 32 hosts.

First the simulated cluster is calibrated (``clusterlab tune sim``'s ``calibrate`` on an 8-host
testbed, 20 rounds per size) in the same run, so that its per-message time is fitted under the
load the validation meets (``--calibration FILE`` uses a record instead). Then each host count: a namespace testbed (``StarTopo(hosts=N, rate="155Mbit", buffer="64KB")``,
the bridge, default TCP settings: the kernel's 200 ms minimum RTO) runs ``--reps`` timed rounds
of the broadcast (each of ``--sizes`` to every other host, send order ``same``) after one
warm-up, and the simulated cluster runs the same call, calibrated and uncalibrated. Per point: the testbed's median round, the
simulated round, the error (simulated / testbed median - 1) both for the flow model alone
(``flow_error``) and for flow time plus the fitted loss/timeout model's RTO wait (``error``,
``clusterlab.cluster.simulated.loss``; bench/sim_loss_fit.py fits it), and what the testbed's rounds
lost (rounds that retransmitted, had a timeout, the slowest rank's RTO wait): the flow model
has no loss, so a point most of whose rounds retransmitted is "timeout-dominated" (it waits on
TCP's loss recovery), the issue's 25% target; the others, 15%. Sizes: seed 000's 50 KB, and
2 KB, whose rounds mostly do not lose (the flow model's own ground). The testbed
medians of rounds without retransmissions (when there are any) are compared too.

Needs root. The machine is shared: the load is recorded before and after each point.

    sudo .venv/bin/python bench/sim_validation.py [--hosts 8,16,32] [--sizes 50KB,2KB] [--reps 10]

Writes bench/results/sim_validation.json with the bench harness's provenance
(``clusterlab.bench.harness``: commit, machine, load, spare CPU, autogroup).
"""

from __future__ import annotations

import statistics
from pathlib import Path

from clusterlab.bench import harness
from clusterlab.bench.alltoall_broadcast import alltoall_broadcast
from clusterlab.cluster import Simulated, Testbed
from clusterlab.cluster.testbed import StarTopo, TestbedError, TestbedNetwork, require_root
from clusterlab.errors import ConfigError
from clusterlab.monitor.provenance import load_average
from clusterlab.units import parse_size

ROOT = Path(__file__).resolve().parents[1]


def point(n: int, size: int, reps: int, name: str, calibration) -> dict:
    topo = StarTopo(hosts=n, rate="155Mbit", buffer="64KB")
    load0 = load_average()
    with TestbedNetwork(topo, name=name) as net:
        rows = Testbed(net).run(alltoall_broadcast, None, size, reps, "same", 1, True, net.switch.ns, 120.0)[0]
    load1 = load_average()
    secs = [r["seconds"] for r in rows]
    slow_rto = [max(r["ranks"], key=lambda x: x["seconds"])["rto_wait_s"] for r in rows]
    clean = [r["seconds"] for r in rows if not r.get("retransmissions")]
    tb_median = statistics.median(secs)
    out = {"hosts": n, "testbed": {"median_s": tb_median, "seconds": secs,
                                   "retransmissions": [r.get("retransmissions") for r in rows],
                                   "timeouts": [r.get("timeouts") for r in rows],
                                   "drops": [r.get("drops") for r in rows],
                                   "slowest_rank_rto_wait_s": slow_rto,
                                   "rounds_with_timeouts": sum(1 for r in rows if r.get("timeouts")),
                                   "median_lossless_s": statistics.median(clean) if clean else None,
                                   "lossless_rounds": len(clean)},
           "load_before": load0, "load_after": load1}
    # the flow model has no loss: a point most of whose rounds retransmitted waits on TCP's loss
    # recovery (timeouts, probes); the 25% target applies there, 15% elsewhere
    lossy = sum(1 for r in rows if r.get("retransmissions"))
    out["rounds_with_retransmissions"] = lossy
    out["timeout_dominated"] = 2 * lossy >= len(rows)
    out["target"] = 0.25 if out["timeout_dominated"] else 0.15
    out["size_bytes"] = size
    for label, cal in (("calibrated", calibration), ("uncalibrated", None)):
        sim = Simulated(topo, calibration=cal)  # the loss model on: flow time + its RTO wait
        row = sim.run(alltoall_broadcast, n, size, 1, "same")[0][0]
        s, flow = row["seconds"], row["flow_seconds"]
        out[label] = {"seconds": s, "error": s / tb_median - 1,
                      "flow_seconds": flow, "flow_error": flow / tb_median - 1,
                      "loss_model_rto_wait_s": row["loss_model_rto_wait_s"],
                      "loss_model_timeouts": row["loss_model_timeouts"], "time_model": row["time_model"],
                      "error_vs_lossless": (flow / out["testbed"]["median_lossless_s"] - 1) if clean else None,
                      "within_target": abs(s / tb_median - 1) <= out["target"],
                      "flow_within_target": abs(flow / tb_median - 1) <= out["target"],
                      "settings": sim.describe().replace(f" (calibration {sim.calibration})", " (calibrated)")}
    return out


def main(argv=None) -> int:
    ap = harness.parser(__doc__, ROOT / "bench" / "results" / "sim_validation.json", repeat=("--reps", 10),
                        repeat_help="timed broadcast rounds per point", output_aliases=("--out",))
    ap.add_argument("--hosts", default="8,16,32", help="host counts (default %(default)s)")
    ap.add_argument("--sizes", default="50KB,2KB",
                    help="block sizes (50KB: seed 000's, lossy here; 2KB: rounds that mostly do not lose)")
    ap.add_argument("--calibration", default=None,
                    help="a `clusterlab tune sim` record to use; default: calibrate first, on 8 hosts, in this run "
                         "(the per-message time it fits depends on the machine's load: the same minutes as the "
                         "validation)")
    a = ap.parse_args(argv)
    try:
        sizes = [parse_size(x, "--sizes", lo=1) for x in a.sizes.split(",")]
    except ConfigError as e:
        ap.exit(2, f"{ap.prog}: {e}\n")
    hosts = harness.counts(a.hosts, "--hosts")
    run = harness.start(ap, repeat_flag="--reps", args=a)
    try:
        require_root()
    except TestbedError as e:
        ap.exit(2, f"{ap.prog}: {e}\n")
    if a.calibration:
        calibration = a.calibration
        cal_record = {"file": a.calibration}
    else:
        from clusterlab.tune.sim import calibrate

        cal = calibrate(StarTopo(hosts=8, rate="155Mbit", buffer="64KB"), reps=20, name="s28bcal")
        calibration = {"fit": cal["fit"]}
        cal_record = {"fit": cal["fit"], "broadcast_check": cal["fit_details"]["broadcast_check"],
                      "load_before": cal["provenance"]["load_before"], "load_after": cal["provenance"]["load_after"]}
        run.say(f"calibrated: {cal['fit']}")
    points = []
    for size in sizes:
        for n in hosts:
            p = point(n, size, a.reps, f"s28b{n}", calibration)
            points.append(p)
            c = p["calibrated"]
            run.say(f"{size} B, {n} hosts: testbed median {p['testbed']['median_s'] * 1e3:.1f} ms "
                    f"({p['rounds_with_retransmissions']}/{a.reps} rounds retransmitted, "
                    f"{p['testbed']['rounds_with_timeouts']} had timeouts), simulated "
                    f"{c['seconds'] * 1e3:.1f} ms (flow {c['flow_seconds'] * 1e3:.1f} + loss model "
                    f"{c['loss_model_rto_wait_s'] * 1e3:.1f}): error {c['error']:+.1%}, flow only {c['flow_error']:+.1%} "
                    f"(target {p['target']:.0%}); uncalibrated {p['uncalibrated']['error']:+.1%}")
    rec = {"what": "simulated (SimGrid flow model, alone and plus the fitted loss/timeout model) vs testbed: median "
                   "all-to-all broadcast round, default TCP timers",
           "sizes_bytes": sizes, "reps": a.reps, "order": "same", "rate": "155Mbit", "buffer": "64KB",
           "switch": "bridge", "calibration": cal_record, "points": points}
    run.write(rec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
