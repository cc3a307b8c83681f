"""How the computation a replay waits per rank shrinks with the ranks. A script, not a test.

Seed 000's Fig. 6 study replays recorded HPA runs with ``compute_scale`` emulating the seed's
slower CPU. For that, the computation each rank waits must be the mining the seed's program did,
which shrinks about 1/N with N ranks. This records HPA (the study's settings: seed000 data,
minimum support 0.7%, clusterlab's default HPA) on 1..N ranks as local processes over loopback
(``run_parallel(record=...)``; the testbed records the same way) and reports, per rank count,
each rank's recorded computation (the CPU seconds of its gaps between communication calls)
split into the mining and the runtime part (``TracedComm.runtime``: per-pass statistics, HPA's
prefix partitioning step), with the 1-rank mining divided by N beside it, and what a replay at
``--scale`` waits per rank: everything scaled (``runtime_scale=scale``, as before the split)
and the mining scaled with the runtime at this machine's speed (what the study does).

Recording runs the real job: N ranks share this machine's cores, so its CPU seconds are
measured under that load (recorded with each row; the machine is shared).

    python bench/replay_compute_scaling.py [--ranks 1,4,16,64] [--data seed000:1M] [--scale 100]

Writes bench/results/replay_compute_scaling.json with the bench harness's provenance
(``clusterlab.bench.harness``: commit, machine, load, spare CPU, autogroup).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from clusterlab.bench import harness
from clusterlab.experiments.workloads.mining import hpa_recordings

ROOT = Path(__file__).resolve().parents[1]


def rank_compute(directory: Path, rank: int) -> dict:
    """One rank's recorded computation: gap CPU seconds in all, of it the runtime part, and
    the mining per pass."""
    events = json.loads((directory / f"rank{rank}.json").read_text())["events"]
    cpu = runtime = 0.0
    by_pass: dict = {}
    cur = None
    for e in events:
        if e[0] == "pass":
            cur = e[1]
        elif e[0] == "end":
            cur = None
        elif e[0] == "gap":
            rt = e[3] if len(e) > 3 else 0.0
            cpu, runtime = cpu + e[2], runtime + rt
            if cur is not None:
                by_pass[cur] = by_pass.get(cur, 0.0) + e[2] - rt
    return {"cpu_s": cpu, "runtime_s": runtime, "mining_s": cpu - runtime, "mining_by_pass_s": by_pass}


def main(argv=None) -> int:
    ap = harness.parser(__doc__, ROOT / "bench" / "results" / "replay_compute_scaling.json")
    harness.mining_options(ap, ("--ranks", "1,4,16,64", "rank counts"))
    ap.add_argument("--scale", type=float, default=100.0, help="the emulated CPU's compute_scale (default %(default)s)")
    a = ap.parse_args(argv)
    ranks = harness.counts(a.ranks, "--ranks")
    run = harness.start(ap, args=a)
    rows = []
    for n, rec, record_wall_s, load in hpa_recordings(a.data, a.min_support, ranks, a.cache):
        per = [rank_compute(rec, r) for r in range(n)]
        mean = {f: statistics.fmean(p[f] for p in per) for f in ("cpu_s", "runtime_s", "mining_s")}
        passes = sorted({k for p in per for k in p["mining_by_pass_s"]})
        row = {"ranks": n, "load1_before": load, "record_wall_s": record_wall_s,
               **{f"mean_{f}": v for f, v in mean.items()},
               "max_cpu_s": max(p["cpu_s"] for p in per),
               "mining_by_pass_s": [statistics.fmean(p["mining_by_pass_s"].get(k, 0.0) for p in per)
                                    for k in passes],
               "replay_all_scaled_s": mean["cpu_s"] * a.scale,
               "replay_mining_scaled_s": mean["mining_s"] * a.scale + mean["runtime_s"]}
        rows.append(row)
        base = rows[0]
        run.say(f"{n:4d} ranks: gap CPU/rank {mean['cpu_s'] * 1e3:7.1f} ms = mining {mean['mining_s'] * 1e3:7.1f} "
                f"+ runtime {mean['runtime_s'] * 1e3:6.1f} (1-rank mining / N: "
                f"{base['mean_mining_s'] / n * 1e3:6.1f}); replay at x{a.scale:g}: all scaled "
                f"{row['replay_all_scaled_s']:6.2f} s, mining scaled {row['replay_mining_scaled_s']:6.2f} s "
                f"(load {load})")
    result = {"bench": "replay_compute_scaling", "data": a.data, "min_support": a.min_support, "scale": a.scale,
              "rows": rows}
    run.write(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
