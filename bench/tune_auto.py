#!/usr/bin/env python3
"""``tune auto`` against the full grid on issue 12's incast workload: the all-to-all broadcast
of 50 KB blocks on 16 testbed hosts, 155 Mbit/s links, 64 KB switch port buffers (root).

Each phase takes a few minutes and runs apart from the others, each on a fresh testbed:

    .venv/bin/python bench/tune_auto.py search   # halving + confirm runs
    .venv/bin/python bench/tune_auto.py grid     # every setting --runs times
    .venv/bin/python bench/tune_auto.py compare                         # -> bench/results/tune_auto.json

``search`` and ``grid`` write ``runs/tune_auto/<stem>_search.json`` and ``<stem>_grid.json``
(``--dir``; out of git); ``compare`` reads them and writes the record, which holds both in full
(its ``search`` and ``grid`` keys), to ``bench/results/<stem>.json`` (``-o``).

With ``--workload hpa`` the objective is an HPA job instead (issue 12's "an HPA job"): 6 hosts,
the same links, seed000:200K at 0.7% support (about a second a job), the space
``HPA_SETUP["space"]`` (RTO minimum, congestion control, send buffer, allreduce algorithm: 16
settings), the record in ``tune_auto_hpa.json``:

    .venv/bin/python bench/tune_auto.py search --workload hpa
    .venv/bin/python bench/tune_auto.py grid --workload hpa
    .venv/bin/python bench/tune_auto.py compare --workload hpa

``compare`` puts both beside each other: the grid's mean time of the search's choice over the
grid's best mean (target <= 1.10), the share of the grid's runs the search used (target <=
0.25), and the search replayed 1000 times on the grid's measured runs.

Every phase writes through the bench harness (``clusterlab.bench.harness``): its output is
checked before the work (``-o``: where this phase writes) and carries a ``provenance`` block
(commit, machine, load, spare CPU, autogroup); the record keeps each phase's in its ``search``
and ``grid``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from clusterlab.bench import harness
from clusterlab.tune import auto

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
PHASES = ROOT / "runs" / "tune_auto"
SETUP = {"hosts": 16, "rate": "155Mbit", "buffer": "64KB", "mtu": 9000, "size": 50_000, "space": auto.DEFAULT_SPACE,
         "runs": 8}
HPA_SETUP = {**SETUP, "hosts": 6, "space": "rto_min=5ms,200ms;congestion=cubic,reno;sndbuf=default,32KiB;"
             "allreduce=auto,ring", "workload": "hpa", "data": "seed000:200K", "min_support": 0.007}


def main(argv=None) -> int:
    ap = harness.parser(__doc__, RESULTS / "tune_auto.json",
                        output_help="where this phase writes: compare's record (default "
                                    "bench/results/tune_auto.json, tune_auto_hpa.json with --workload hpa), "
                                    "search's and grid's run (default DIR/<stem>_search.json, <stem>_grid.json)")
    ap.set_defaults(output=None)
    ap.add_argument("phase", choices=["search", "grid", "compare"])
    ap.add_argument("--workload", choices=auto.WORKLOADS, default="alltoall_broadcast",
                    help="the objective (default %(default)s)")
    ap.add_argument("--hosts", type=int, default=None, help="testbed hosts (default: the workload's setup)")
    ap.add_argument("--runs", type=int, default=None, help="runs per setting in the grid (default: the workload's setup)")
    ap.add_argument("--space", default=None, help="the settings searched (default: the workload's setup)")
    ap.add_argument("--dir", default=str(PHASES), help="where search and grid write their JSON and compare reads it")
    a = ap.parse_args(argv)
    d = Path(a.dir)
    base = HPA_SETUP if a.workload == "hpa" else SETUP
    setup = {**base, **{k: v for k, v in (("hosts", a.hosts), ("runs", a.runs), ("space", a.space)) if v is not None}}
    stem = "tune_auto_hpa" if a.workload == "hpa" else "tune_auto"
    if a.output is None:
        a.output = str(RESULTS / f"{stem}.json" if a.phase == "compare" else d / f"{stem}_{a.phase}.json")
    run = harness.start(ap, args=a)
    if a.phase == "compare":
        try:
            s = json.loads((d / f"{stem}_search.json").read_text())
            g = json.loads((d / f"{stem}_grid.json").read_text())
        except (OSError, ValueError) as e:
            ap.exit(2, f"{ap.prog}: compare: {e} (run search and grid first, --dir {d})\n")
        if s["space"] != g["space"] or s["testbed"] != g["testbed"]:
            ap.exit(2, f"{ap.prog}: the search and the grid ran different spaces or testbeds\n")
        search = {**s["search"], "chosen": dict(p.split("=", 1) for p in s["search"]["chosen"].split(","))}
        out = {"setup": setup, "search": s, "grid": g, "comparison": auto.compare(search, g["grid"]),
               "replay": auto.replay(g["grid"], s["search"]["budget"], s["search"]["eta"])}
        c = out["comparison"]
        c["met"] = c["chosen_over_best"] <= 1.10 and c["runs_share"] <= 0.25
        run.say(json.dumps({**c, "replay": out["replay"]}, indent=1))
        run.write(out)
        return 0
    if os.geteuid() != 0:
        ap.exit(2, f"{ap.prog}: {a.phase} needs root (namespace testbed)\n")
    kw = {k: setup[k] for k in ("hosts", "rate", "buffer", "mtu", "size", "space", "runs", "workload", "data",
                                "min_support") if k in setup}
    from clusterlab.diagnose.search import observe_visit, search_fidelity

    res = auto.tune_auto(**kw, grid=a.phase == "grid", search=a.phase == "search", watch=observe_visit)
    key = "search" if a.phase == "search" else "grid"
    # whether the runs can be believed, as `clusterlab tune auto` says it (each visit monitored)
    res["fidelity"] = search_fidelity(res.pop("visits"), 1.0, res[key]["chosen"])
    run.say(res["fidelity"]["line"])
    run.say(f"{key}: {res[key]['runs']} runs, {res[key]['visits']} jobs, {res[key]['seconds']:.0f} s, "
            f"chose {res[key]['chosen']}; load {res['loadavg_before']} -> {res['loadavg_after']}")
    run.write(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
