"""The fixed cost of a first mining call (issue 30, item 3). A script, not a test.

``clusterlab mine T10I4D100K.dat -s 0.01`` once reported 0.31 s of mining where later calls in
one process took ~0.025 s: pyarrow's first ``pa.array`` imported pandas. This checks that the
first call pays nothing a later call does not:

1. the CLI, each run a fresh process (every run is a first call): its own ``seconds.mine``
   and ``seconds.read`` (``--json``), the process's wall time, and whether pandas was imported;
2. in one fresh process per round: the first ``clusterlab.mine`` on a read ``Baskets`` and the
   median of ``--later`` calls after it, with the first call split into its parts (choosing
   the kernel, the Rust kernel, building the table) and the modules it imported;
3. the Rust kernel alone, first and later calls (rayon's global pool starts on the first).

Rounds are interleaved (CLI run, then in-process run) and the load average recorded before
and after. Target (``met``): the CLI's median mine time at most ``--ratio`` (1.5) times the
median of the later in-process calls plus 5 ms (a 2-core machine shared with other work:
scheduling noise is milliseconds). Writes ``bench/results/first_call.json`` with the bench
harness's provenance (``clusterlab.bench.harness``: commit, machine, load, spare CPU, autogroup).

    .venv/bin/python bench/first_call.py [--rounds 7] [--later 9]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
SUPPORT = 0.01

# One fresh process: the first mine() and later ones, the first split into its parts.
IN_PROCESS = r"""
import json, sys, time
t0 = time.perf_counter()
import clusterlab
from clusterlab import _core
from clusterlab.mining.sequential import choose_algorithm, min_count_of
from clusterlab.mining.result import itemset_table
t_import = time.perf_counter() - t0
path, support, later, part = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
t0 = time.perf_counter(); b = clusterlab.read_baskets(path); t_read = time.perf_counter() - t0
mods = set(sys.modules)
out = {"import_s": t_import, "read_s": t_read}
if part == "mine":
    times = []
    for _ in range(1 + later):
        t0 = time.perf_counter(); clusterlab.mine(b, support); times.append(time.perf_counter() - t0)
    out.update(first_s=times[0], later_s=times[1:])
else:  # the first call's parts, in the order mine() runs them
    mc = min_count_of(support, len(b))
    t0 = time.perf_counter(); algo = choose_algorithm(b, mc); t1 = time.perf_counter()
    o, i, c = _core.mine_itemsets(b.offsets, b.items, mc, algo, "all", 1, None, None, max_itemsets=None)
    t2 = time.perf_counter(); itemset_table(o, i, c, len(b), b.labels, min_count=mc, algorithm=algo)
    t3 = time.perf_counter()
    kernel = []
    for _ in range(later):
        t = time.perf_counter()
        _core.mine_itemsets(b.offsets, b.items, mc, algo, "all", 1, None, None, max_itemsets=None)
        kernel.append(time.perf_counter() - t)
    out.update(choose_s=t1 - t0, kernel_first_s=t2 - t1, table_s=t3 - t2, kernel_later_s=kernel, algorithm=algo)
out["imported_by_first_call"] = sorted(m for m in set(sys.modules) - mods if "." not in m)
out["pandas_imported"] = "pandas" in sys.modules
print(json.dumps(out))
"""


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def shared_data() -> Path:
    for p in Path(__file__).resolve().parents:
        if (p / "shared" / "data" / "T10I4D100K.dat").exists():
            return p / "shared" / "data"
    sys.exit("cannot find shared/data/T10I4D100K.dat above this checkout")


def cli_run(path: Path) -> dict:
    """One ``clusterlab mine`` in its own process: its reported seconds and the process's wall."""
    probe = ("import sys, atexit; atexit.register(lambda: sys.stderr.write('PANDAS=%d\\n' % "
             "('pandas' in sys.modules))); from clusterlab.cli import main; main(sys.argv[1:])")
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", probe, "mine", str(path), "-s", str(SUPPORT), "--json", "-q"],
                       capture_output=True, text=True, timeout=120, check=True)
    wall = time.perf_counter() - t0
    s = json.loads(p.stdout)
    return {"mine_s": s["seconds"]["mine"], "read_s": s["seconds"]["read"], "process_wall_s": wall,
            "itemsets": s["itemsets"], "pandas_imported": "PANDAS=1" in p.stderr, "load": loadavg()[0]}


def in_process(path: Path, later: int, part: str) -> dict:
    p = subprocess.run([sys.executable, "-c", IN_PROCESS, str(path), str(SUPPORT), str(later), part],
                       capture_output=True, text=True, timeout=120, check=True)
    return json.loads(p.stdout) | {"load": loadavg()[0]}


def main(argv=None) -> int:
    from clusterlab.bench import harness

    ap = harness.parser(__doc__, RESULTS / "first_call.json", repeat=("--rounds", 7),
                        repeat_help="interleaved rounds (CLI run, then in-process runs)")
    ap.add_argument("--later", type=int, default=9, help="later calls timed after the first, per process")
    ap.add_argument("--ratio", type=float, default=1.5, help="the target's ratio to later calls (default %(default)s)")
    run = harness.start(ap, argv, repeat_flag="--rounds")
    a = run.args

    path = shared_data() / "T10I4D100K.dat"
    cli, mine, parts = [], [], []
    for rnd in range(a.rounds):
        cli.append(cli_run(path))
        mine.append(in_process(path, a.later, "mine"))
        parts.append(in_process(path, a.later, "parts"))
        run.say(f"[{rnd}] cli mine {cli[-1]['mine_s'] * 1e3:.1f} ms (process {cli[-1]['process_wall_s']:.2f} s); "
                f"in process first {mine[-1]['first_s'] * 1e3:.1f} ms, later median "
                f"{statistics.median(mine[-1]['later_s']) * 1e3:.1f} ms; kernel first "
                f"{parts[-1]['kernel_first_s'] * 1e3:.1f} ms, later {statistics.median(parts[-1]['kernel_later_s']) * 1e3:.1f}"
                f" ms (load {cli[-1]['load']})")
    med = statistics.median
    cli_mine = med(r["mine_s"] for r in cli)
    later = med(x for r in mine for x in r["later_s"])
    first = med(r["first_s"] for r in mine)
    bound = a.ratio * later + 0.005
    summary = {
        "cli_mine_s": cli_mine, "cli_read_s": med(r["read_s"] for r in cli),
        "cli_process_wall_s": med(r["process_wall_s"] for r in cli),
        "first_call_s": first, "later_calls_s": later,
        "first_call_parts_s": {k: med(r[k] for r in parts) for k in ("choose_s", "kernel_first_s", "table_s")},
        "kernel_later_s": med(x for r in parts for x in r["kernel_later_s"]),
        "import_s": med(r["import_s"] for r in mine), "first_read_s": med(r["read_s"] for r in mine),
        "pandas_imported_anywhere": any(r["pandas_imported"] for r in cli + mine + parts),
        "imported_by_first_call": sorted({m for r in mine for m in r["imported_by_first_call"]}),
        "target": f"cli_mine_s <= {a.ratio} * later_calls_s + 0.005 s", "bound_s": bound,
        "met": cli_mine <= bound and not any(r["pandas_imported"] for r in cli),
    }
    doc = {"bench": "first_call", "what": "the first mine call's fixed cost: CLI (fresh process) vs later calls in one "
                                          f"process, T10I4D100K at {SUPPORT:.0%}; medians over interleaved rounds",
           "rounds": a.rounds, "later": a.later, "summary": summary,
           "cli": cli, "in_process": mine, "parts": parts}
    run.say(json.dumps(summary, indent=1))
    run.write(doc)
    return 0 if summary["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
