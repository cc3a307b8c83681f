"""HPA with seed 000's scheme (itemset hash) on the full seed000 file: job time and its split
against the message block size (the paper's 8 KB, then 64 KB and 256 KB). A script, not a test.

It shows how much of the scheme's time is the per-message cost of shipping every k-subset in
small blocks (issue 11: the 1.4x target vs sequential Apriori is missed at 8 KB). 2 local ranks
of one thread each; the load average is recorded beside each run and the record carries the
harness's provenance (``clusterlab.bench.harness``: commit, machine, load, spare CPU, autogroup).

    python bench/hpa_block_size.py [--file /work/data/seed000.dat] [--repeat 2]
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")

from clusterlab.bench import harness  # noqa: E402
from clusterlab.mining.parallel import ParallelConfig, run_parallel  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> None:
    ap = harness.parser(__doc__, ROOT / "bench" / "results" / "hpa_block_size.json",
                        repeat=("--repeat", 2), repeat_help="rounds over the block sizes")
    ap.add_argument("--file", default="/work/data/seed000.dat", help="the transactions (default %(default)s)")
    ap.add_argument("--min-support", type=float, default=0.007, help="relative minimum support (default %(default)s)")
    ap.add_argument("--sizes", default="8192,65536,262144", help="message block sizes in bytes (default %(default)s)")
    run = harness.start(ap, argv, repeat_flag="--repeat")
    a = run.args
    rows = []
    for rep in range(a.repeat):
        for bb in (int(x) for x in a.sizes.split(",")):
            r = run_parallel(a.file, nodes=2, algorithm="hpa", min_support=a.min_support,
                             config=ParallelConfig(timeout=900, partition="itemset", block_bytes=bb))
            row = {"repeat": rep, "block_bytes": bb, "job_s": round(r.job_s, 3), "itemsets": r.table.num_rows,
                   "time_split": {k: round(v, 3) for k, v in r.time_split.items()},
                   "load": round(os.getloadavg()[0], 2)}
            run.say(row)
            rows.append(row)
    doc = {"file": a.file, "min_support": a.min_support, "ranks": 2, "threads_per_rank": 1,
           "scheme": "hpa, partition=itemset, pass 2 counted locally (seed 000's scheme as benchmarked)",
           "runs": rows}
    run.write(doc)


if __name__ == "__main__":
    main()
