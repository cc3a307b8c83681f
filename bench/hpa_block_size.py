"""Seed 000's own HPA scheme (whole-itemset hash, every k-subset shipped to its owner) timed
against the message block size (the paper's 8 KB and larger), on the seed's file.

It shows how much of the scheme's time is the per-message cost of shipping every k-subset in
small blocks (issue 11: the 1.4x target vs sequential Apriori is missed at 8 KB). 2 local ranks
of one thread each; the load average is recorded beside each run, with each pass's messages
(one per block) and ``send_calls`` (the communicator calls that sent them; absent from code
before ``send_many``, where every block was its own call). The record carries the harness's
provenance (``clusterlab.bench.harness``: commit, machine, load, spare CPU, autogroup).

``--baseline DIR``: before each run of this checkout, the same run with the library under DIR
(another checkout's ``python/``, e.g. main's), recorded under ``baseline``: an interleaved A/B.
``--apriori N``: N runs of sequential Apriori (read + mine, one thread) for the ratio.

    python bench/hpa_block_size.py [--file /work/data/seed000.dat] [--repeat 2] [--baseline DIR] [--apriori 1]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")

from clusterlab.bench import harness  # noqa: E402
from clusterlab.cluster import Local  # noqa: E402
from clusterlab.mining.parallel import ParallelConfig, run_parallel  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def one_run(path: str, min_support: float, bb: int, rep: int) -> dict:
    load = round(os.getloadavg()[0], 2)
    r = run_parallel(path, nodes=2, algorithm="hpa", min_support=min_support, cluster=Local(),
                     config=ParallelConfig(timeout=900, partition="itemset", block_bytes=bb))
    passes = [{k: p[k] for k in ("pass", "messages_sent", "send_calls", "bytes_sent") if k in p} for p in r.passes]
    return {"repeat": rep, "block_bytes": bb, "job_s": round(r.job_s, 3), "itemsets": r.table.num_rows,
            "time_split": {k: round(v, 3) for k, v in r.time_split.items()},
            "passes": passes, "load_before": load, "load_after": round(os.getloadavg()[0], 2)}


def baseline_run(pythonpath: str, a, bb: int, rep: int) -> dict:
    """The same run with the library under ``pythonpath`` (this script, in a subprocess)."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "b.json"
        env = dict(os.environ, PYTHONPATH=pythonpath)
        subprocess.run([sys.executable, __file__, "--file", a.file, "--min-support", str(a.min_support),
                        "--repeat", "1", "--sizes", str(bb), "-o", str(out)], env=env, check=True, timeout=1800)
        row = json.loads(out.read_text())["runs"][0]
    row["repeat"] = rep
    return row


def apriori_run(path: str, min_support: float) -> dict:
    import clusterlab
    from clusterlab.data import read_baskets

    load = round(os.getloadavg()[0], 2)
    t0 = time.perf_counter()
    b = read_baskets(path)
    t1 = time.perf_counter()
    table = clusterlab.mine(b, min_support, algorithm="apriori", threads=1)
    t2 = time.perf_counter()
    return {"read_s": round(t1 - t0, 3), "mine_s": round(t2 - t1, 3), "total_s": round(t2 - t0, 3),
            "itemsets": table.num_rows, "load_before": load, "load_after": round(os.getloadavg()[0], 2)}


def git(pythonpath: Path) -> dict:
    def run(*args):
        return subprocess.run(["git", "-C", str(pythonpath), *args], capture_output=True, text=True,
                              timeout=10).stdout.strip()
    return {"revision": run("rev-parse", "HEAD") or None,
            "dirty": bool(run("status", "--porcelain", "--untracked-files=no"))}


def main(argv=None) -> None:
    ap = harness.parser(__doc__, ROOT / "bench" / "results" / "hpa_block_size.json",
                        repeat=("--repeat", 2), repeat_help="rounds over the block sizes")
    ap.add_argument("--file", default="/work/data/seed000.dat", help="the transactions (default %(default)s)")
    ap.add_argument("--min-support", type=float, default=0.007, help="relative minimum support (default %(default)s)")
    ap.add_argument("--sizes", default="8192,65536,262144", help="message block sizes in bytes (default %(default)s)")
    ap.add_argument("--baseline", default=None, help="another checkout's python/ dir, run interleaved as the baseline")
    ap.add_argument("--apriori", type=int, default=0, help="runs of sequential Apriori (one thread) for the ratio")
    run = harness.start(ap, argv, repeat_flag="--repeat")
    a = run.args
    rows, base_rows, apriori = [], [], []
    for rep in range(a.repeat):
        for bb in (int(x) for x in a.sizes.split(",")):
            if a.baseline:
                row = baseline_run(a.baseline, a, bb, rep)
                run.say({"baseline": row})
                base_rows.append(row)
            row = one_run(a.file, a.min_support, bb, rep)
            run.say(row)
            rows.append(row)
        if rep < a.apriori:
            row = apriori_run(a.file, a.min_support)
            run.say({"apriori": row})
            apriori.append(row)
    doc = {"file": a.file, "min_support": a.min_support, "ranks": 2, "threads_per_rank": 1,
           "scheme": "hpa, partition=itemset, pass 2 counted locally (seed 000's scheme as benchmarked)",
           "runs": rows}
    if a.baseline:
        doc["baseline"] = {"pythonpath": a.baseline, "commit": git(Path(a.baseline)), "runs": base_rows}
    if apriori:
        doc["apriori_sequential"] = apriori
    run.write(doc)


if __name__ == "__main__":
    main()
