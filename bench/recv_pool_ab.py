#!/usr/bin/env python3
"""Receive-buffer A/B: this checkout's mesh and another checkout's, on big messages.

Not a test: a measurement. The Rust engine's big payloads (32 KiB and up) come from a bounded
pool of reused buffers (``crates/clusterlab-net/src/pool.rs``, issue 25's soak) instead of
glibc's heap with ``CLUSTERLAB_MALLOC_TUNE``'s thresholds; both avoid page-faulting fresh memory
for each message, and this shows whether the pool costs speed. Per run, each checkout in turn
(the order swapped every run), through the CLI with ``PYTHONPATH`` set to the checkout's
``python/`` (the same interpreter, each checkout's own ``_core`` module):

* ``pingpong``: ``clusterlab bench pingpong --sizes 64K:4M`` (best of 3 trials per size; Mbit/s
  at the powers of two);
* ``alltoall``: ``clusterlab bench collective --op alltoall -n 8 --sizes 64K:1M`` (us per call,
  the mean over ranks);
* ``broadcast``: ``clusterlab bench broadcast --ranks 16 --size 50000 --reps 30`` (seed 000's
  round, as ``bench/soak.py`` runs it: median seconds per round);
* ``stream``: rank 0 sends 1000 messages of 1 MiB (and 4000 of 64 KiB) to rank 1, which
  receives them in a loop ``x = comm.recv(0, 1)`` (``hold 1``) or keeps the last 8
  (``hold 8``: more than the pool's bound of two per peer); the receiver's minor page faults
  and CPU seconds (``getrusage``) per message after 20 untimed ones: what the reuse of buffers
  is for (fresh memory costs ~257 page faults per 1 MiB message), and less swayed by the
  load than wall time, which is recorded too.

Writes ``runs/recv_pool_ab.json`` (an A/B, not a benchmark record; its story is in
``docs/notes/soak.md``): every number per run with ``/proc/loadavg`` before each command, the
ratio this / baseline per run and its median, both checkouts' commits, and the bench harness's
provenance. Run it niced beside other jobs; the file says the load.

Usage: ``.venv/bin/python bench/recv_pool_ab.py --baseline /work/main [--runs 3] [--only stream,...]``
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from clusterlab.bench import harness

HERE = Path(__file__).resolve().parent
THIS = HERE.parent

COMMANDS = {
    "pingpong": ["bench", "pingpong", "--sizes", "64K:4M", "--np-out", "", "--json"],
    "alltoall": ["bench", "collective", "--op", "alltoall", "-n", "8", "--sizes", "64K:1M", "--json"],
    "broadcast": ["bench", "broadcast", "--ranks", "16", "--size", "50000", "--reps", "30", "--json"],
    "stream": [],  # stream_rank, through clusterlab.cluster.local.run
}


def stream_rank(comm, size: int, count: int, hold: int):
    """Rank 0 streams ``count`` + 20 messages of ``size`` bytes to rank 1, which keeps the last
    ``hold`` and answers its page faults and CPU seconds per message over the last ``count``."""
    import collections
    import resource
    import time

    import numpy as np

    if comm.rank == 0:
        block = np.ones(size, dtype=np.uint8)
        for _ in range(count + 20):
            comm.send(1, block, 1)
        comm.recv(1, 2)
        return None
    kept: collections.deque = collections.deque(maxlen=hold)
    for _ in range(20):
        kept.append(comm.recv(0, 1))
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(count):
        kept.append(comm.recv(0, 1))
    r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    comm.send(0, b"done", 2)
    return {"faults per msg": round((r1.ru_minflt - r0.ru_minflt) / count, 2),
            "cpu us per msg": round((r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) / count * 1e6, 1),
            "wall us per msg": round((t1 - t0) / count * 1e6, 1)}


STREAMS = [(1 << 20, 1000, 1), (1 << 20, 1000, 8), (1 << 16, 4000, 1)]


def _commit(path: Path) -> dict:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True, timeout=10).stdout.strip()

    return {"revision": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


def _load() -> list[float]:
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def measure(checkout: Path, what: str) -> dict:
    """One command on one checkout: {name: number} (higher is better for Mbit/s only)."""
    env = {**os.environ, "PYTHONPATH": str(checkout / "python")}
    if what == "stream":
        env["PYTHONPATH"] += os.pathsep + str(HERE)
        out: dict = {}
        for size, count, hold in STREAMS:
            code = ("import json, recv_pool_ab; from clusterlab.cluster.local import run; "
                    f"print(json.dumps(run(recv_pool_ab.stream_rank, 2, {size}, {count}, {hold}, timeout=300)[1]))")
            res = json.loads(subprocess.run([sys.executable, "-c", code], env=env, cwd=checkout, capture_output=True,
                                            text=True, timeout=600, check=True).stdout)
            out.update({f"{size} B hold {hold} {k}": v for k, v in res.items()})
        return out
    out = subprocess.run([sys.executable, "-m", "clusterlab", *COMMANDS[what]], env=env, cwd=checkout,
                         capture_output=True, text=True, timeout=600, check=True).stdout
    if what == "pingpong":
        rows = json.loads(out)["rows"]
        return {f"{r['bytes']} B Mbit/s": round(r["mbps"], 1) for r in rows
                if r["bytes"] & (r["bytes"] - 1) == 0}
    if what == "alltoall":
        rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        return {f"{r['bytes']} B us": round(r["avg_us"], 1) for r in rows}
    res = json.loads(out)
    secs = [r["seconds"] for r in res["reps"]] if "reps" in res else [r["seconds"] for r in res["rounds"]]
    return {"round median s": round(statistics.median(secs), 5)}


def record(a, sides: dict, runs: list[dict]) -> dict:
    """The runs so far with, per number, this / baseline per run (None where the baseline's is 0,
    e.g. no page faults) and the median of those."""
    summary: dict = {}
    for what in a.only:
        for k in [k for k in runs[0][what]["this"] if k != "load_before"]:
            ratios = [r[what]["this"][k] / r[what]["baseline"][k] if r[what]["baseline"][k] else None for r in runs]
            known = [x for x in ratios if x is not None]
            summary[f"{what} {k}"] = {"this / baseline per run": [None if x is None else round(x, 3) for x in ratios],
                                      "median": round(statistics.median(known), 3) if known else None}
    return {"settings": {"runs": a.runs, "commands": {w: COMMANDS[w] for w in a.only}, "streams": STREAMS},
            "checkouts": {s: {"path": str(p), "git": _commit(p)} for s, p in sides.items()},
            "runs": runs, "summary": summary}


def main() -> int:
    ap = harness.parser(__doc__, THIS / "runs" / "recv_pool_ab.json", repeat=("--runs", 3),
                        repeat_help="runs (each checkout once per command per run)",
                        output_help="the A/B's file, written atomically with its provenance (default "
                                    "runs/recv_pool_ab.json: not a record)")
    ap.add_argument("--baseline", type=Path, required=True, help="the other checkout (e.g. /work/main)")
    ap.add_argument("--only", default=",".join(COMMANDS), help=f"comma-separated subset of {', '.join(COMMANDS)}")
    a = ap.parse_args()
    a.only = [w.strip() for w in a.only.split(",") if w.strip()]
    if not a.only or set(a.only) - set(COMMANDS):
        ap.exit(2, f"{ap.prog}: --only takes a comma-separated subset of {', '.join(COMMANDS)}, got {a.only}\n")
    bench = harness.start(ap, repeat_flag="--runs", args=a)  # the output checked first
    if not (a.baseline / "python" / "clusterlab").is_dir():
        ap.exit(2, f"{ap.prog}: --baseline {a.baseline}: no python/clusterlab there\n")
    sides = {"this": THIS, "baseline": a.baseline.resolve()}
    runs = []
    for i in range(a.runs):
        order = list(sides) if i % 2 == 0 else list(sides)[::-1]
        run: dict = {"order": order}
        for what in a.only:
            for side in order:
                load = _load()
                vals = measure(sides[side], what)
                run.setdefault(what, {})[side] = {"load_before": load, **vals}
                bench.say(f"run {i + 1} {what} {side}: load {load[0]}: {vals}")
        runs.append(run)
        bench.write(record(a, sides, runs), final=i == a.runs - 1)  # each run kept as it ends
    summary = record(a, sides, runs)["summary"]
    for k, v in summary.items():
        print(f"  {k}: this / baseline {v['this / baseline per run']} (median {v['median']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
