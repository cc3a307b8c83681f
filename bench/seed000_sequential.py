"""Sequential mining of the full seed000 file: read + mine time and peak memory per kernel.

Not a test (minutes). Each kernel runs in its own process (so ``ru_maxrss`` is its peak):
``read_baskets`` of the file, then ``mine(..., threads=1)``. Recorded per kernel: read and
mine wall seconds, mine CPU seconds, peak RSS after the read and at the end, and the ratio
of the peak to the CSR size (issue 11's target: <= 1.3x for eclat and apriori). Writes
``bench/results/seed000_sequential.json`` with the load average. Run under the shared lock:

    .venv/bin/python bench/seed000_sequential.py /work/data/seed000.dat
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALGOS = ("eclat", "apriori", "fpgrowth", "lcm")


def worker(path: str, algo: str, min_support: float) -> dict:
    import clusterlab

    t0 = time.perf_counter()
    b = clusterlab.read_baskets(path)
    t1 = time.perf_counter()
    rss_read = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    c0 = time.process_time()
    t2 = time.perf_counter()
    r = clusterlab.mine(b, min_support, algorithm=algo, threads=1)
    t3 = time.perf_counter()
    csr = b.items.nbytes + b.offsets.nbytes
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"algorithm": algo, "itemsets": r.num_rows, "read_s": t1 - t0, "mine_s": t3 - t2,
            "mine_cpu_s": time.process_time() - c0, "csr_bytes": csr, "rss_after_read_bytes": rss_read,
            "peak_rss_bytes": peak, "peak_over_csr": peak / csr}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--min-support", type=float, default=0.007)
    ap.add_argument("--algorithms", default=",".join(ALGOS))
    ap.add_argument("-o", "--output", default=str(ROOT / "bench" / "results" / "seed000_sequential.json"))
    ap.add_argument("--worker", metavar="ALGO", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(a.file, a.worker, a.min_support)))
        return
    out = {"file": a.file, "min_support": a.min_support, "threads": 1, "load_avg_start": os.getloadavg(), "runs": []}
    for algo in a.algorithms.split(","):
        p = subprocess.run([sys.executable, __file__, a.file, "--min-support", repr(a.min_support), "--worker", algo],
                           capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            r = {"algorithm": algo, "error": (p.stderr.strip().splitlines() or ["no output"])[-1][:200]}
        else:
            r = json.loads(p.stdout.strip().splitlines()[-1])
            r["load_avg_after"] = os.getloadavg()
        print(json.dumps(r), flush=True)
        out["runs"].append(r)
    counts = {r["itemsets"] for r in out["runs"] if "itemsets" in r}
    out["results_agree"] = len(counts) == 1
    out["load_avg_end"] = os.getloadavg()
    tmp = Path(a.output).with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=2))
    os.replace(tmp, a.output)


if __name__ == "__main__":
    main()
