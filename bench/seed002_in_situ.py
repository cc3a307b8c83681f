"""Where seed 002's bcast time goes at 16 testbed hosts on 2 shared CPUs: wall time, CPU time
of all ranks and context switches per call (``collective_testbed.in_situ``), beside the cost
model's link price, for the ring allgather (64 KiB per rank), the binomial bcast (64 KiB) and
the scatter-allgather bcast (1 MiB), the binomial scatter (64 KiB per rank: the first phase of
that bcast at 16 hosts) at 2, 3, 6 and 16 hosts. The record carries the bench harness's
provenance (``clusterlab.bench.harness``: commit, machine, load, spare CPU, autogroup). Root:

    .venv/bin/python bench/seed002_in_situ.py   # ~2 min -> bench/results/seed002_in_situ.json
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from clusterlab.bench import collective_testbed as ct
from clusterlab.bench import harness
from clusterlab.cluster.testbed import StarTopo, TestbedNetwork

# (op, the model's m, algorithm, calls): allgather and scatter m per rank, bcast the message
CASES = (("allgather", 65536, "ring", 5), ("bcast", 65536, "binomial", 20), ("bcast", 1 << 20, "scatter_allgather", 5),
         ("scatter", 65536, "binomial", 5))


def main(argv=None) -> int:
    ap = harness.parser(__doc__, Path(__file__).parent / "results" / "seed002_in_situ.json",
                        output_aliases=("--out",))
    ap.add_argument("--only", default="", help="comma list of the operations to run (default: all)")
    run = harness.start(ap, argv)
    a = run.args
    if os.geteuid() != 0:
        ap.exit(2, f"{ap.prog}: needs root (namespace testbed)\n")
    out = {"rows": []}
    t0 = time.perf_counter()
    with TestbedNetwork(StarTopo(hosts=16, rate="155Mbit", mtu=9180, buffer="256KB")) as tb:
        model = ct.fit_model(tb, calibrate_hosts=None)
        out["model"] = model.to_dict()
        for n in (2, 3, 6, 16):
            for op, m, alg, calls in CASES:
                if a.only and op not in a.only.split(","):
                    continue
                size = m * n if op in ("allgather", "scatter") else m
                r = tb.run(ct.in_situ, n, op, size, alg, calls, timeout=300)[0]
                r["link_price_ms"] = model.predict(op, alg, m, n) * 1e3
                run.say(json.dumps(r))
                out["rows"].append(r)
    out["seconds"] = time.perf_counter() - t0
    run.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
