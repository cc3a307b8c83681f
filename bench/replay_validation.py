"""Compute replay validated against real runs on the namespace testbed (root). A script, not a test.

For each host count (default 4, 8, 16): bring up a fresh testbed (seed 000's switch: 155 Mbit/s
links, 64 KB port buffers), run HPA for real on it with ``record=DIR`` (rank i in host i), then
replay the recording on the same testbed with the same transport settings, ``--reps`` times
each, interleaved. Reports the real and replayed job times and their ratio (target: within
15%; the median over repetitions of replay / real, each replay right after its real run), the
bytes per pass (equal by construction), and whether the real run was CPU-bound.

Like with like: the real ranks share this machine's cores (2 here, for up to 16 ranks), so
their computation *and* their communication wait for a core. The validated replay is
``compute="spin"``: each rank burns its recorded CPU seconds on the same cores, so the replay
loads the machine as the real run did and its messages meet the same contention. Also
measured, not validated by the target: ``"wall"`` (sleeps the gaps as measured under that
load: the sleeping ranks leave the cores to the communication, which then runs faster than
in the real run) and ``"cpu"`` (sleeps the CPU seconds: every rank on a core of its own, what
the 32-100 host points of Fig. 6 emulate; it has no real run to compare with here). The load
average is recorded with every run; the machine is shared.

    python bench/replay_validation.py [--hosts 4,8,16] [--reps 5] [--transactions 200000]

Writes bench/results/replay_validation.json with the bench harness's provenance
(``clusterlab.bench.harness``: commit, machine, load, spare CPU, autogroup).
"""

from __future__ import annotations

import json
import os
import secrets
import statistics
import sys
import tempfile
from pathlib import Path

from clusterlab.bench import harness
from clusterlab.cluster import Testbed as OnTestbed
from clusterlab.cluster.testbed import StarTopo, TestbedNetwork
from clusterlab.mining.parallel import ParallelConfig, replay_parallel, run_parallel
from clusterlab.monitor.provenance import load_average

ROOT = Path(__file__).resolve().parents[1]
MODES = ("spin", "wall", "cpu")


def load() -> float | None:
    """The 1-minute load average now, recorded with every run (the runner's report quotes them)."""
    la = load_average()
    return round(la[0], 2) if la else None


def main(argv=None) -> int:
    ap = harness.parser(__doc__, ROOT / "bench" / "results" / "replay_validation.json", repeat=("--reps", 5),
                        repeat_help="real runs and their replays per host count, interleaved")
    ap.add_argument("--hosts", default="4,8,16", help="host counts (default %(default)s)")
    ap.add_argument("--transactions", type=int, default=200_000,
                    help="seed000-style transactions generated (default %(default)s)")
    ap.add_argument("--min-support", type=float, default=0.007, help="relative minimum support (default %(default)s)")
    a = ap.parse_args(argv)
    a.host_counts = harness.counts(a.hosts, "--hosts")
    run = harness.start(ap, repeat_flag="--reps", args=a)
    if os.geteuid() != 0:
        ap.exit(2, f"{ap.prog}: needs root (network namespaces)\n")
    with tempfile.TemporaryDirectory(prefix="replay-validation-") as tmp:  # data and recordings
        points = validate(a, Path(tmp), run)
    res = {"machine": {"cpus": os.cpu_count(), "note": "2 cores shared with other jobs; load per run"},
           "topology": "StarTopo defaults (155Mbit links, 64KB port buffer)", "algorithm": "hpa (itemset, every pass shipped)",
           "transactions": a.transactions, "min_support": a.min_support, "compute": "spin (validated); wall and cpu measured beside it", "points": points}
    # the runner's report quotes "finished" and machine.cpus (experiments/runner.py: replay_validation)
    res["finished"] = run.provenance()["finished"]
    run.say(json.dumps([{k: p[k] for k in ("hosts", "median_real_s", "median_replay_s", "replay_over_real",
                                            "wall_over_real", "cpu_over_real",
                                            "within_15pct", "same_bytes_per_pass", "cpu_bound")} for p in points], indent=1))
    run.write(res)
    return 0


def validate(a, work: Path, run: harness.Run) -> list:
    """The points: per host count, real runs and their replays (see the module docstring)."""
    from clusterlab.data.generate import generate_file

    data = work / "seed000.dat"
    generate_file(data, "seed000", transactions=a.transactions, seed=0)
    config = ParallelConfig(partition="itemset", local_pairs=False, timeout=600)  # seed 000's HPA
    points = []
    for n in a.host_counts:
        name = "t" + secrets.token_hex(3)
        with TestbedNetwork(StarTopo(hosts=n), name=name):
            real, replayed = [], []
            for rep in range(a.reps):
                rec = work / f"rec{n}_{rep}"
                r = run_parallel(data, nodes=n, algorithm="hpa", min_support=a.min_support, config=config,
                                 cluster=OnTestbed(name), record=rec)
                real.append({"job_s": r.job_s, "load": load(), "cpu_bound_passes": sum(p["cpu_bound"] for p in r.passes),
                             "bytes": [p["bytes_sent"] for p in r.passes],
                             "cpu_cores_busy": [round(p["cpu_cores_busy"], 2) for p in r.passes]})
                row = {"load": load()}
                for mode in MODES:
                    rp = replay_parallel(rec, cluster=OnTestbed(name), compute=mode)
                    row[mode] = rp.job_s
                    row[f"{mode}_passes"] = [round(p["t_total"], 4) for p in rp.passes]
                    if mode == "spin":
                        row["bytes"] = [p["bytes_sent"] for p in rp.passes]
                replayed.append(row)
                run.say(f"{n} hosts rep {rep}: real {r.job_s:.2f} s, replay " +
                        ", ".join(f"{m} {row[m]:.2f} s" for m in MODES) +
                        f", cpu-bound passes {real[-1]['cpu_bound_passes']}/{len(r.passes)}, load {load()}")
        med_real = statistics.median(x["job_s"] for x in real)
        med = {m: statistics.median(x[m] for x in replayed) for m in MODES}
        med_rep = med["spin"]
        # Each replay ran right after its recording: on a machine whose load swings (other jobs),
        # the ratio within a pair is steadier than the ratio of the medians.
        paired = {m: statistics.median(y[m] / x["job_s"] for x, y in zip(real, replayed, strict=True)) for m in MODES}
        points.append({"hosts": n, "real": real, "replay": replayed, "median_real_s": med_real,
                       "median_replay_s": med_rep, "replay_over_real": paired["spin"],
                       "ratio_of_medians": med_rep / med_real,
                       **{f"median_replay_{m}_s": med[m] for m in MODES},
                       **{f"{m}_over_real": paired[m] for m in MODES},
                       "within_15pct": abs(paired["spin"] - 1) <= 0.15,
                       "same_bytes_per_pass": all(x["bytes"] == y["bytes"] for x, y in zip(real, replayed, strict=True)),
                       "cpu_bound": any(x["cpu_bound_passes"] for x in real)})
    return points


if __name__ == "__main__":
    sys.exit(main())
