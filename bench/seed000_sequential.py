"""Sequential mining of the full seed000 file against Count Distribution on one rank.

Not a test (minutes). Issue 30, item 2: the sequential path (``mine -a auto`` and each kernel)
at least as fast as the tool's own Count Distribution run as one rank (``cd@1``: the parallel
algorithm launched as one process, read and mine inside it), one thread. Every run is its own
process (so ``ru_maxrss`` is its peak): ``read_baskets`` of the file, then
``mine(..., threads=1)``; ``cd@1`` is ``run_parallel(nodes=1, algorithm="cd")`` on the local
cluster, timed inside the rank from the start of its read to the result (``job_s``; launch
apart). Rounds are interleaved (every row once per round) so that a burst of other work on the
shared machine spreads over all rows; the load average is recorded beside every run.

Recorded per run: read and mine wall seconds (their sum ``total_s``), CPU seconds of read +
mine, peak RSS and its ratio to the CSR. Per row: medians. Targets: each row's median
``total_s`` and CPU at most ``cd@1``'s (``vs_cd1`` >= 1.0: cd@1's time over the row's);
every row finds the same itemsets. Writes ``bench/results/seed000_sequential.json`` with the
bench harness's provenance (``clusterlab.bench.harness``: commit, machine, load, spare CPU,
autogroup):

    .venv/bin/python bench/seed000_sequential.py /work/data/seed000.dat [--repeat 3]

(``clusterlab gen --preset seed000 -o seed000.dat`` makes the file: 10M transactions, 717 MB.)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROWS = ("auto", "eclat", "apriori", "fpgrowth", "lcm", "cd@1")


def worker(path: str, algo: str, min_support: float) -> dict:
    os.environ["RAYON_NUM_THREADS"] = "1"
    if algo == "cd@1":
        from clusterlab.cluster import Local
        from clusterlab.mining.parallel import ParallelConfig, run_parallel

        r = run_parallel(path, nodes=1, algorithm="cd", min_support=min_support, cluster=Local(),
                         config=ParallelConfig(timeout=900))
        rank = r.ranks[0]
        csr = int(rank.get("csr_bytes", 0))
        return {"algorithm": "cd", "itemsets": r.table.num_rows, "read_s": rank["read_s"],
                "mine_s": r.job_s - rank["read_s"], "total_s": r.job_s, "cpu_s": rank["cpu_s"],
                "wall_s": r.wall_s, "csr_bytes": csr, "peak_rss_bytes": int(rank["peak_rss_bytes"]),
                "peak_over_csr": int(rank["peak_rss_bytes"]) / csr if csr else None}
    import clusterlab
    from clusterlab.mining.result import table_info

    c0 = time.process_time()
    t0 = time.perf_counter()
    b = clusterlab.read_baskets(path)
    t1 = time.perf_counter()
    r = clusterlab.mine(b, min_support, algorithm=algo, threads=1)
    t2 = time.perf_counter()
    csr = b.items.nbytes + b.offsets.nbytes
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"algorithm": table_info(r)["algorithm"], "itemsets": r.num_rows, "read_s": t1 - t0, "mine_s": t2 - t1,
            "total_s": t2 - t0, "cpu_s": time.process_time() - c0, "csr_bytes": csr, "peak_rss_bytes": peak,
            "peak_over_csr": peak / csr}


def main(argv=None) -> int:
    from clusterlab.bench import harness

    ap = harness.parser(__doc__, ROOT / "bench" / "results" / "seed000_sequential.json", repeat=("--repeat", 3),
                        repeat_help="interleaved rounds over the rows")
    ap.add_argument("file", help="the seed000 transactions (FIMI format)")
    ap.add_argument("--min-support", type=float, default=0.007, help="relative minimum support (default %(default)s)")
    ap.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated, of {', '.join(ROWS)}")
    ap.add_argument("--worker", metavar="ROW", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        print(json.dumps(worker(a.file, a.worker, a.min_support)))
        return 0
    rows = a.rows.split(",")
    bad = [r for r in rows if r not in ROWS]
    if bad:
        ap.exit(2, f"{ap.prog}: --rows: unknown {', '.join(bad)}; choose from {', '.join(ROWS)}\n")
    run = harness.start(ap, repeat_flag="--repeat", args=a)
    runs: dict = {r: [] for r in rows}
    out = {"file": a.file, "min_support": a.min_support, "threads": 1, "repeat": a.repeat,
           "how": __doc__.split("\n\n")[1].replace("\n", " ")}
    for rnd in range(a.repeat):
        for row in rows:
            load = round(os.getloadavg()[0], 2)
            p = subprocess.run([sys.executable, __file__, a.file, "--min-support", repr(a.min_support), "--worker", row],
                               capture_output=True, text=True, timeout=1800)
            if p.returncode != 0:
                r = {"error": (p.stderr.strip().splitlines() or ["no output"])[-1][:300]}
            else:
                r = json.loads(p.stdout.strip().splitlines()[-1])
            r |= {"load_before": load, "load_after": round(os.getloadavg()[0], 2)}
            runs[row].append(r)
            run.say(f"[{rnd}] {row:9s} " + (r.get("error") or
                  f"total {r['total_s']:.2f} s (read {r['read_s']:.2f}, mine {r['mine_s']:.2f}), cpu {r['cpu_s']:.2f} s, "
                  f"{r['algorithm']}, {r['itemsets']} itemsets, peak {r['peak_rss_bytes'] / 2**20:.0f} MiB") +
                  f", load {load}")
    med = statistics.median
    ok = {k: [r for r in v if "error" not in r] for k, v in runs.items()}
    summary = {k: {"total_s": med(r["total_s"] for r in v), "read_s": med(r["read_s"] for r in v),
                   "mine_s": med(r["mine_s"] for r in v), "cpu_s": med(r["cpu_s"] for r in v),
                   "peak_rss_bytes": med(r["peak_rss_bytes"] for r in v), "peak_over_csr": med(r["peak_over_csr"] for r in v),
                   "algorithm": v[0]["algorithm"], "runs": len(v)} for k, v in ok.items() if v}
    if "cd@1" in summary:
        base = summary["cd@1"]
        for k, s in summary.items():
            if k != "cd@1":
                s["vs_cd1"] = base["total_s"] / s["total_s"]
                s["vs_cd1_cpu"] = base["cpu_s"] / s["cpu_s"]
                s["met"] = s["vs_cd1"] >= 1.0
    counts = {r["itemsets"] for v in ok.values() for r in v}
    out |= {"summary": summary, "results_agree": len(counts) == 1, "errors": sum(len(runs[k]) - len(ok[k]) for k in runs),
            "runs": runs}
    for k, s in summary.items():
        extra = f"  vs cd@1 {s['vs_cd1']:.2f}x wall, {s['vs_cd1_cpu']:.2f}x cpu" if "vs_cd1" in s else ""
        run.say(f"{k:9s} {s['total_s']:.2f} s (read {s['read_s']:.2f} mine {s['mine_s']:.2f}) cpu {s['cpu_s']:.2f} "
                f"peak {s['peak_rss_bytes'] / 2**20:.0f} MiB ({s['peak_over_csr']:.2f}x CSR) {s['algorithm']}{extra}")
    run.say(f"results agree: {out['results_agree']}")
    run.write(out)
    return 0 if out["results_agree"] and not out["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
