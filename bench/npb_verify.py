#!/usr/bin/env python3
"""NPB verification matrix: every kernel, class S, W and A, on 1, 2, 4 and 8 ranks, on every
backend (``inproc`` threads, ``tcp`` processes on the TCP mesh, ``mpi`` under mpiexec).

Not a timing benchmark (run it niced): it records whether NPB's own verification passed, the
verified values (which must be bit-identical across rank counts and backends), the time and the
load average. A rank count a kernel does not support (``npb.check``) is recorded as refused with
the reason. The JSON is rewritten atomically after every run, so an interrupted matrix keeps
what it measured; each write carries the bench harness's provenance of the run so far
(``clusterlab.bench.harness``: commit, machine, load, spare CPU, autogroup).

    nice -n 19 .venv/bin/python bench/npb_verify.py [--classes S,W,A] [--ranks 1,2,4,8]
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from clusterlab import npb
from clusterlab.bench import harness
from clusterlab.cluster import from_options
from clusterlab.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def load() -> list[float]:
    return [float(x) for x in open("/proc/loadavg").read().split()[:3]]


def verified_values(v: dict) -> dict:
    """The computed quantities of NPB's verification (references and tolerances left out):
    EP's sums, IS's checks and test-key ranks, CG's zeta, MG's norms, FT's checksums.

    >>> verified_values({"zeta": {"value": 8.5, "reference": 8.5, "error": 0.0}, "checksums": [[1.0, 2.0]],
    ...                  "references": [[1.0, 2.0]], "passed_checks": 51})
    {'zeta': 8.5, 'checksums': [[1.0, 2.0]]}
    """
    # IS's check counts grow with the rank count (NPB adds one full-verification check per
    # process); whether they all passed is ``verified``. What must not change is the rest.
    skip = {"references", "reference", "epsilon", "error", "errors", "expected_checks", "passed_checks"}
    return {k: (x["value"] if isinstance(x, dict) and "value" in x else x) for k, x in v.items() if k not in skip}


def one(kernel: str, cls: str, n: int, backend: str, timeout: float) -> dict:
    row = {"kernel": kernel, "class": cls, "ranks": n, "backend": backend, "load_before": load()}
    try:
        npb.check(kernel, cls, n)
    except ConfigError as e:
        return {**row, "refused": str(e)}
    t = time.monotonic()
    try:
        r = npb.run(kernel, cls, n=n, cluster=from_options(backend), timeout=timeout)
        row.update(verified=bool(r.verified), seconds=round(r.seconds, 4), values=verified_values(r.verification))
    except Exception as e:  # a failed run is a row that says why; the matrix goes on
        row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    row["wall_s"] = round(time.monotonic() - t, 2)
    row["load_after"] = load()
    return row


def main(argv=None) -> int:
    ap = harness.parser(__doc__, ROOT / "bench" / "results" / "npb_verify.json")
    ap.add_argument("--kernels", default=",".join(npb.KERNELS), help="(default %(default)s)")
    ap.add_argument("--classes", default="S,W,A", help="(default %(default)s)")
    ap.add_argument("--ranks", default="1,2,4,8", help="rank counts (default %(default)s)")
    ap.add_argument("--backends", default="inproc,tcp,mpi", help="(default %(default)s)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per run (default %(default)s)")
    a = ap.parse_args(argv)
    try:
        ranks = [int(x) for x in a.ranks.split(",")]
    except ValueError:
        ap.exit(2, f"{ap.prog}: --ranks {a.ranks}: a comma-separated list of rank counts\n")
    run = harness.start(ap, args=a)
    res: dict = {"benchmark": "npb_verify", "rows": []}
    for cls in a.classes.split(","):
        for backend in a.backends.split(","):
            for n in ranks:
                for kernel in a.kernels.split(","):
                    row = one(kernel, cls, n, backend, a.timeout)
                    res["rows"].append(row)
                    run.say(json.dumps({k: v for k, v in row.items() if k != "values"}))
                    res["summary"] = summary(res["rows"])
                    run.write(res, final=False)
    run.write(res)
    return 0


def summary(rows: list[dict]) -> dict:
    """Counts, and whether each (kernel, class)'s verified values agree across every run."""
    ran = [r for r in rows if "refused" not in r]
    values: dict = {}
    for r in ran:
        if r.get("values"):
            values.setdefault(f"{r['kernel']}.{r['class']}", set()).add(json.dumps(r["values"], sort_keys=True))
    return {"runs": len(ran), "verified": sum(1 for r in ran if r.get("verified")),
            "failed": [f"{r['kernel']}.{r['class']} n={r['ranks']} {r['backend']}: {r.get('error', 'UNSUCCESSFUL')}"
                       for r in ran if not r.get("verified")],
            "refused": sorted({f"{r['kernel']} n={r['ranks']}" for r in rows if "refused" in r}),
            "identical_values_across_runs": {k: len(v) == 1 for k, v in sorted(values.items())}}


if __name__ == "__main__":
    raise SystemExit(main())
