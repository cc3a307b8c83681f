"""NPB kernels, side by side: clusterlab's (Rust compute on the Communicator) vs the official
NPB 3.3 serial build (Fortran/C), per kernel and class.

Not a test, and it builds nothing: point it at NPB binaries you built yourself (the JSON
records what you say they are). The comparison is per-rank compute: our one-rank run's CPU
time between messages (``compute_cpu_s``: the whole timed region on one rank) against NPB's
timed region. The machine is shared and oversubscribed, so CPU time is the measure on both
sides: pass a build whose timer reads ``CLOCK_PROCESS_CPUTIME_ID`` (NPB's ``common/wtime.c``
replaced) as ``--npb-cpu-bin``; a normal build (wall clock) as ``--npb-bin`` is run too and
reported beside it. Each cell is the best of ``--repeat`` runs, ours and NPB's alternating;
the load average is recorded before and after every run. Optionally also runs ours on more
ranks (``--ranks 1,2``, TCP mesh) and reports per-rank compute. The record carries the bench
harness's provenance (``clusterlab.bench.harness``: commit, machine, load, spare CPU, autogroup).

    .venv/bin/python bench/npb.py --npb-cpu-bin DIR [--npb-bin DIR] --classes S,W,A \\
        --build "how the NPB binaries were built" -o bench/results/npb.json
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

from clusterlab import npb
from clusterlab.bench import harness
from clusterlab.cluster import InProcess, Local

ROOT = Path(__file__).resolve().parents[1]
TARGET = 2.0  # per-rank compute within 2x of NPB's serial time


def load() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def run_npb(binary: Path, timeout: float) -> dict:
    t0 = time.perf_counter()
    p = subprocess.run([str(binary)], capture_output=True, text=True, timeout=timeout, cwd=binary.parent)
    wall = time.perf_counter() - t0
    out = p.stdout
    secs = re.search(r"Time in seconds\s*=\s*([\d.Ee+-]+)", out)
    mops = re.search(r"Mop/s total\s*=\s*([\d.Ee+-]+)", out)
    ok = re.search(r"Verification\s*=\s*SUCCESSFUL", out) is not None
    return {"seconds": float(secs.group(1)) if secs else None, "mops": float(mops.group(1)) if mops else None,
            "verified": ok, "process_wall_s": wall}


def run_ours(kernel: str, cls: str, n: int) -> dict:
    r = npb.run(kernel, cls, n=n, cluster=InProcess() if n == 1 else Local(), timeout=3600)
    return {"seconds": r.seconds, "mops": r.mops, "verified": r.verified,
            "compute_cpu_s": max(x["compute_cpu_s"] for x in r.ranks),
            "compute_s": max(x["compute_s"] for x in r.ranks),
            "bytes_sent": sum(x["bytes_sent"] for x in r.ranks)}


def best(rows: list[dict], key: str) -> dict:
    ok = [r for r in rows if r.get(key) is not None]
    return min(ok, key=lambda r: r[key]) if ok else rows[0]


def main(argv=None) -> int:
    ap = harness.parser(__doc__, ROOT / "bench" / "results" / "npb.json", repeat=("--repeat", 2),
                        repeat_help="runs per cell, ours and NPB's alternating; the best kept")
    ap.add_argument("--npb-cpu-bin", type=Path, help="NPB serial binaries (KERNEL.CLASS.x) timing CPU time")
    ap.add_argument("--npb-bin", type=Path, help="NPB serial binaries timing wall-clock time (NPB's default)")
    ap.add_argument("--build", default="", help="how the NPB binaries were built (recorded in the JSON)")
    ap.add_argument("--kernels", default=",".join(npb.KERNELS))
    ap.add_argument("--classes", default="S,W,A")
    ap.add_argument("--ranks", default="1", help="our rank counts (1 = in-process; more: TCP mesh)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per NPB run (default %(default)s)")
    a = ap.parse_args(argv)
    try:
        ranks = [int(x) for x in a.ranks.split(",")]
    except ValueError:
        ap.exit(2, f"{ap.prog}: --ranks {a.ranks}: a comma-separated list of rank counts\n")
    run = harness.start(ap, repeat_flag="--repeat", args=a)
    rows = []
    for cls in a.classes.split(","):
        for kernel in a.kernels.split(","):
            row = {"kernel": kernel, "class": cls, "load_before": load()}
            ours, cpu, wall = {n: [] for n in ranks}, [], []
            for _ in range(a.repeat):
                for n in ranks:
                    ours[n].append(run_ours(kernel, cls, n))
                if a.npb_cpu_bin:
                    cpu.append(run_npb(a.npb_cpu_bin / f"{kernel}.{cls}.x", a.timeout))
                if a.npb_bin:
                    wall.append(run_npb(a.npb_bin / f"{kernel}.{cls}.x", a.timeout))
            row["load_after"] = load()
            row["ours"] = {str(n): dict(best(v, "compute_cpu_s"), runs=v) for n, v in ours.items()}
            if cpu:
                row["npb_cpu_timer"] = dict(best(cpu, "seconds"), runs=cpu)
            if wall:
                row["npb_wall_timer"] = dict(best(wall, "seconds"), runs=wall)
            base = row.get("npb_cpu_timer", {}).get("seconds")
            if base:
                one = row["ours"]["1"]["compute_cpu_s"] if "1" in row["ours"] else None
                row["ratio_compute_cpu_vs_npb_cpu"] = one / base if one else None
                for n in ranks:
                    row["ours"][str(n)]["per_rank_ratio_x_ranks"] = row["ours"][str(n)]["compute_cpu_s"] * n / base
                row["target_met"] = row.get("ratio_compute_cpu_vs_npb_cpu") is not None and row["ratio_compute_cpu_vs_npb_cpu"] <= TARGET
            run.say(json.dumps({k: v for k, v in row.items() if k in ("kernel", "class", "ratio_compute_cpu_vs_npb_cpu", "load_after")}))
            rows.append(row)
    doc = {"benchmark": "npb", "npb_build": a.build, "target": f"our one-rank compute CPU time <= {TARGET}x NPB serial CPU time",
           "method": "best of --repeat runs each, ours and NPB alternating; CPU time both sides (shared machine)",
           "rows": rows}
    run.write(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
