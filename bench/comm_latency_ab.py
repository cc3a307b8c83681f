#!/usr/bin/env python3
"""1-byte latency A/B: this checkout's ping-pong and another checkout's, with NPtcp beside them.

Not a test: a measurement. For each run and each placement of the two ends (both on CPU 0,
on CPUs 0 and 1, unpinned) it times NPtcp, this checkout and ``--baseline DIR`` (its
``.venv``) back to back, the order of the two checkouts swapped every run, with
``bench/comm.py``'s ping-pong (``clusterlab.bench.pingpong``: best of 3 trials of 0.2 s, ranks
launched by ``clusterlab.cluster.Local`` over the authenticated TCP mesh; a baseline from before
``Local`` existed, f34ad2d, cannot run). Writes per
placement the half round trip (us) of every side per run, min / median / max over runs, each
checkout's ratio to NPtcp per run, and ``/proc/loadavg`` before every run; the record carries
the bench harness's provenance (``clusterlab.bench.harness``: commit, machine, load, spare CPU,
autogroup) besides both checkouts' commits.

Run it un-niced under the shared lock (about 20 s per run):
``.venv/bin/python bench/comm_latency_ab.py --baseline /work/main --runs 3
-o bench/results/comm_latency_ab.json``
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import comm  # noqa: E402, I001  (bench/comm.py: nptcp, PLACEMENTS)
from clusterlab.bench import harness  # noqa: E402

# what each checkout runs (its own bench/comm.py and clusterlab): one ping-pong of 1 byte
_WORKER = """
import json, sys
sys.path.insert(0, "bench")
import comm
from clusterlab.bench import pingpong as pp
from clusterlab.cluster import Local
cpus = json.loads(sys.argv[1])
rows = (Local().run(pp.pingpong, 2, [1], 0.2, timeout=120) if cpus is None
        else Local().run(comm.pinned_pingpong, 2, cpus, [1], timeout=120))[0]
print(json.dumps(rows[0]["usec"]))
"""


def clusterlab_usec(checkout: Path, cpus: list[int] | None) -> float:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([str(checkout / ".venv" / "bin" / "python"), "-c", _WORKER, json.dumps(cpus)], cwd=checkout,
                         env=env, capture_output=True, text=True, timeout=300, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def nptcp_usec(cpus: list[int] | None) -> float:
    rows = comm.nptcp(2, None if cpus is None else tuple(cpus))
    return next(r["usec"] for r in rows if r["bytes"] == 1)


def spread(v: list[float]) -> dict:
    return {"min": min(v), "median": statistics.median(v), "max": max(v)}


def main(argv=None) -> None:
    ap = harness.parser(__doc__, HERE / "results" / "comm_latency_ab.json", repeat=("--runs", 3),
                        repeat_help="runs, the two checkouts' order swapped every run")
    ap.add_argument("--baseline", type=Path, required=True, help="the other checkout (with its .venv)")
    bench = harness.start(ap, argv, repeat_flag="--runs")
    a = bench.args
    if not (a.baseline / ".venv" / "bin" / "python").exists():
        ap.exit(2, f"{ap.prog}: --baseline {a.baseline}: no .venv/bin/python there (a checkout with its .venv)\n")
    comm.ensure_tools()
    this = HERE.parent
    sides = {"this": this, "baseline": a.baseline.resolve()}
    placements = {**{k: list(v) for k, v in comm.PLACEMENTS.items() if max(v) < (os.cpu_count() or 1)},
                  "unpinned": None}
    commit = {k: subprocess.run(["git", "-C", str(p), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
              for k, p in sides.items()}
    runs = []
    for r in range(a.runs):
        load = Path("/proc/loadavg").read_text().split()[:3]
        order = ["this", "baseline"] if r % 2 == 0 else ["baseline", "this"]
        row = {"loadavg": load, "order": order, "usec": {}}
        for name, cpus in placements.items():
            got = {"nptcp": nptcp_usec(cpus)}
            for side in order:
                got[side] = clusterlab_usec(sides[side], cpus)
            row["usec"][name] = got
            print(f"run {r} {name}: " + ", ".join(f"{k} {v:.2f} us" for k, v in got.items()), file=sys.stderr)
        runs.append(row)
    summary = {}
    for name in placements:
        per = {k: [run["usec"][name][k] for run in runs] for k in ("nptcp", "this", "baseline")}
        ratios = {k: [run["usec"][name][k] / run["usec"][name]["nptcp"] for run in runs] for k in ("this", "baseline")}
        summary[name] = {"usec": {k: {"runs": v, **spread(v)} for k, v in per.items()},
                         "ratio_to_nptcp": {k: {"runs": v, **spread(v)} for k, v in ratios.items()},
                         "this_vs_baseline": spread([t / b for t, b in zip(per["this"], per["baseline"], strict=True)]),
                         "target_1_2x_met_every_run": all(x <= 1.2 for x in ratios["this"])}
    res = {"what": "1-byte half round trip (us), clusterlab ping-pong vs NPtcp, A/B of two checkouts",
           "commits": commit, "checkouts": {k: str(p) for k, p in sides.items()},
           "runs": runs, "placements": summary}
    bench.say(json.dumps({k: {"this": v["usec"]["this"]["median"], "baseline": v["usec"]["baseline"]["median"],
                          "nptcp": v["usec"]["nptcp"]["median"]} for k, v in summary.items()}, indent=1))
    bench.write(res)


if __name__ == "__main__":
    main()
