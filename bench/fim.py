"""Frequent itemset mining, side by side: clusterlab vs pyfim 6.28 vs mlxtend vs efficient-apriori.

Not a test. Every tool runs in its own subprocess (so ``ru_maxrss`` is that tool's peak
memory), loads the data into its natural in-memory input first (clusterlab: CSR Baskets;
pyfim and efficient-apriori: a list of transactions; mlxtend: a one-hot boolean DataFrame),
then times only mining up to a materialized result (our Arrow table, pyfim's Python list,
mlxtend's DataFrame, efficient-apriori's dict). clusterlab is also timed given the same
Python lists as pyfim (conversion included) and given the file path (read included), the
latter against pyfim's load of the file into lists plus mining. Median of 5 runs (1 for anchors whose first
run takes over 10 s); each subprocess is capped by a timeout and an address-space limit.
The itemset counts of all tools must agree (pyfim's count is corrected for its quirk of
leaving out itemsets made only of items in every transaction). The record carries the
bench harness's provenance (``clusterlab.bench.harness``: commit, machine, load, spare CPU,
autogroup); each row keeps its own load averages too.

    .venv/bin/python bench/fim.py            # all rows, writes bench/results/fim.{json,png}
    .venv/bin/python bench/fim.py --quick    # fewer rows and runs (smoke run)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def shared_data() -> Path:
    for p in Path(__file__).resolve().parents:
        if (p / "shared" / "data" / "T10I4D100K.dat").exists():
            return p / "shared" / "data"
    sys.exit("cannot find shared/data/T10I4D100K.dat above this checkout")


# (label, file, min support as a fraction)
ROWS = [
    ("T10I4D100K 1%", "T10I4D100K.dat", 0.01),
    ("T10I4D100K 0.5%", "T10I4D100K.dat", 0.005),
    ("T10I4D100K 0.1%", "T10I4D100K.dat", 0.001),
    ("T10I4D100K 0.05%", "T10I4D100K.dat", 0.0005),
    ("chess 60%", "chess.dat", 0.6),
    ("mushroom 10%", "mushroom.dat", 0.1),
    ("seed000-style 1M 0.7%", "seed000_1M.dat", 0.007),
    ("T10I4D100K 0.02%", "T10I4D100K.dat", 0.0002),
    ("sparse 11k 0.05%", "sparse11k.dat", 0.0005),
    ("sparse 11k 0.02%", "sparse11k.dat", 0.0002),
]
# clusterlab is timed on three input forms: a Baskets (its own in-memory input), the same
# Python lists pyfim gets (conversion included) and the file path (read included, against
# pyfim's load of the file into lists + mining).
TOOLS = ("clusterlab", "clusterlab-lists", "clusterlab-file", "pyfim", "pyfim-eclat", "pyfim-file",
         "pyfim-eclat-file", "mlxtend", "efficient-apriori")
TIMEOUT = {"mlxtend": 240, "efficient-apriori": 120}
MEM_LIMIT = 12 << 30  # address-space cap per anchor subprocess


def make_seed000_style(path: Path, n: int = 1_000_000, n_items: int = 5000, avg_len: int = 20,
                       n_patterns: int = 2000, avg_pat: int = 4, seed: int = 0) -> None:
    """A deterministic IBM-Quest-like basket file in the spirit of seed 000 (5000 items,
    transactions of ~20 items built from ~4-item potentially large patterns plus noise).
    Used when the project's own generator is not available in this checkout."""
    rng = np.random.default_rng(seed)
    pat_len = np.maximum(1, rng.poisson(avg_pat, n_patterns))
    pat_off = np.concatenate([[0], np.cumsum(pat_len)])
    pat_items = rng.integers(0, n_items, pat_off[-1])
    weight = rng.exponential(1.0, n_patterns)
    weight /= weight.sum()
    t_len = np.maximum(1, rng.poisson(avg_len, n))
    k = np.maximum(1, np.round(t_len * 0.8 / avg_pat).astype(np.int64))  # patterns per transaction
    pats = rng.choice(n_patterns, size=int(k.sum()), p=weight)
    tid_of_pat = np.repeat(np.arange(n), k)
    lens = pat_len[pats]
    flat_tid = np.repeat(tid_of_pat, lens)
    starts = np.repeat(pat_off[pats], lens)
    within = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens)
    flat_items = pat_items[starts + within]
    keep = rng.random(flat_items.size) > 0.25  # corruption: drop a quarter of pattern items
    noise_n = np.maximum(0, t_len - k * avg_pat * 3 // 4)
    noise_tid = np.repeat(np.arange(n), noise_n)
    noise_items = rng.integers(0, n_items, noise_tid.size)
    tid = np.concatenate([flat_tid[keep], noise_tid])
    items = np.concatenate([flat_items[keep], noise_items])
    key = np.unique(tid.astype(np.int64) * n_items + items)
    tid, items = key // n_items, (key % n_items).astype(np.uint32)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(tid, minlength=n), out=offsets[1:])
    from clusterlab import _core

    tmp = path.with_name(path.name + ".tmp")
    _core.write_fimi(str(tmp), offsets, items)
    os.replace(tmp, path)


def make_sparse(path: Path) -> None:
    """Sparse data with many items (issue 11): the T10I4D100K preset with 20,000 items and
    10,000 patterns (100,000 transactions, 11,036 distinct items)."""
    import clusterlab
    from clusterlab import _core

    b = clusterlab.generate("T10I4D100K", items=20000, patterns=10000, seed=0)
    tmp = path.with_name(path.name + ".tmp")
    _core.write_fimi(str(tmp), b.offsets, b.items)
    os.replace(tmp, path)


def make_seed000(path: Path) -> None:
    """Seed 000's own file: the project's generator, preset seed000 (10M transactions, seed 0)."""
    from clusterlab.data.generate import generate_file

    generate_file(path, "seed000", seed=0)


def data_path(name: str) -> Path:
    makers = {"seed000_1M.dat": make_seed000_style, "sparse11k.dat": make_sparse, "seed000.dat": make_seed000}
    if name not in makers:
        return shared_data() / name
    p = Path(tempfile.gettempdir()) / "clusterlab-bench" / name
    if not p.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
        print(f"generating {p} ...", file=sys.stderr, flush=True)  # progress: stdout may be --json's record
        makers[name](p)
    return p


def load_lists(path: str) -> list[list[int]]:
    """How a pyfim user loads a FIMI file: one list of ints per line."""
    with open(path) as f:
        return [[int(x) for x in line.split()] for line in f]


# ---- worker: one tool, one row, in its own process ---------------------------------------

def worker(tool: str, path: str, supp: float, runs: int) -> dict:
    # This script is named fim.py: keep it from shadowing pyfim's ``fim`` module.
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    import clusterlab
    from clusterlab.mining.sequential import min_count_of

    b = clusterlab.read_baskets(path)
    n = len(b)
    min_count = min_count_of(supp, n)
    if tool == "clusterlab":
        import pyarrow as pa

        # pyarrow imports pandas on its first numpy conversion (~0.6 s, ~40 MiB): a one-time
        # library load, done here like the anchors' imports, before memory and time are taken.
        pa.array(np.zeros(1))
        data = b

        def run():
            return clusterlab.mine(data, min_count)

        def count(r):
            return r.num_rows
    elif tool in ("clusterlab-lists", "clusterlab-file"):
        import pyarrow as pa

        pa.array(np.zeros(1))
        data = b.to_lists() if tool == "clusterlab-lists" else path

        def run():
            return clusterlab.mine(data, min_count)

        def count(r):
            return r.num_rows
    elif tool in ("pyfim", "pyfim-eclat", "pyfim-file", "pyfim-eclat-file"):
        import fim

        from_file = tool.endswith("-file")
        data = None if from_file else b.to_lists()
        fn = fim.eclat if tool.startswith("pyfim-eclat") else fim.fpgrowth
        everywhere = int(np.count_nonzero(np.bincount(b.items) == n)) if b.items.size else 0
        # pyfim leaves out the itemsets made only of items in every transaction: add them back.
        missing = (1 << everywhere) - 1

        def run():
            return fn(load_lists(path) if from_file else data, target="s", supp=-min_count, report="a")

        def count(r):
            return len(r) + missing
    elif tool == "mlxtend":
        import pandas as pd
        from mlxtend.frequent_patterns import fpgrowth

        n_items = int(b.items.max()) + 1
        dense = np.zeros((n, n_items), dtype=bool)
        dense[np.repeat(np.arange(n), np.diff(b.offsets)), b.items] = True
        used = np.flatnonzero(dense.any(axis=0))
        data = pd.DataFrame(dense[:, used], columns=used)
        del dense

        def run():
            return fpgrowth(data, min_support=min_count / n, use_colnames=True)

        def count(r):
            return len(r)
    elif tool == "efficient-apriori":
        from efficient_apriori import apriori

        data = [tuple(t) for t in b.to_lists()]

        def run():
            sets, _ = apriori(data, min_support=min_count / n, min_confidence=1.0, max_length=1000)
            return sets

        def count(r):
            return sum(len(v) for v in r.values())
    else:
        raise SystemExit(f"unknown tool {tool}")
    del b
    rss_loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    def cpu():
        u = resource.getrusage(resource.RUSAGE_SELF)
        return u.ru_utime + u.ru_stime

    times, cpus, counts = [], [], set()
    for k in range(runs):
        c0, t0 = cpu(), time.perf_counter()
        r = run()
        times.append(time.perf_counter() - t0)
        cpus.append(cpu() - c0)
        counts.add(count(r))
        del r
        if k == 0 and not tool.startswith("clusterlab") and times[0] > 10:
            break  # slow anchor: one run
    return {"tool": tool, "times": times, "median_s": statistics.median(times), "cpu_times": cpus,
            "median_cpu_s": statistics.median(cpus), "itemsets": sorted(counts),
            "min_count": min_count, "rss_loaded_bytes": rss_loaded,
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def run_worker(tool: str, path: Path, supp: float, runs: int) -> dict:
    cmd = [sys.executable, __file__, "--worker", tool, str(path), repr(supp), str(runs)]

    def limit():
        if not tool.startswith("clusterlab"):
            resource.setrlimit(resource.RLIMIT_AS, (MEM_LIMIT, MEM_LIMIT))

    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT.get(tool, 600), preexec_fn=limit)
    except subprocess.TimeoutExpired:
        return {"tool": tool, "error": f"timeout after {TIMEOUT.get(tool, 600)} s"}
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["no output"])[-1]
        return {"tool": tool, "error": f"exit {p.returncode}: {last[:200]}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    from clusterlab.bench import harness

    ap = harness.parser(__doc__, RESULTS / "fim.json", repeat=("--runs", 5),
                        repeat_help="timed runs per tool and row, the median kept (1 for an anchor over 10 s)")
    ap.add_argument("--worker", nargs=4, metavar=("TOOL", "PATH", "SUPP", "RUNS"), help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="three rows, 3 runs, clusterlab and pyfim only")
    ap.add_argument("--rows", help="comma-separated row numbers (0-based) to run")
    ap.add_argument("--tools", default=",".join(TOOLS), help="tools to run (default %(default)s)")
    ap.add_argument("--merge", action="store_true", help="keep the other rows of an existing output JSON")
    ap.add_argument("--reuse-anchors", metavar="JSON",
                    help="take mlxtend and efficient-apriori results (slow, and independent of clusterlab's "
                         "code) from an earlier run's JSON instead of rerunning them (marked 'reused')")
    a = ap.parse_args(argv)
    if a.worker:
        tool, path, supp, runs = a.worker
        print(json.dumps(worker(tool, path, float(supp), int(runs))))
        return
    run = harness.start(ap, repeat_flag="--runs", args=a)
    rows = ROWS
    tools = a.tools.split(",")
    runs = a.runs
    if a.quick:
        rows, tools, runs = [ROWS[0], ROWS[4], ROWS[5]], ["clusterlab", "pyfim"], 3
    if a.rows:
        rows = [ROWS[int(i)] for i in a.rows.split(",")]
    reuse = {}
    if a.reuse_anchors:
        for r in json.loads(Path(a.reuse_anchors).read_text())["rows"]:
            for tool in ("mlxtend", "efficient-apriori"):
                if tool in r["tools"]:
                    reuse[(r["row"], tool)] = {**r["tools"][tool], "reused": a.reuse_anchors}
    out = {"runs": runs, "rows": []}
    if a.merge and Path(a.output).exists():
        # Keep the rows of an earlier run that this run does not redo; each row keeps its own
        # load averages, and the earlier run's provenance is kept beside this run's.
        labels = {r[0] for r in rows}
        earlier = json.loads(Path(a.output).read_text())
        out["rows"] = [r for r in earlier["rows"] if r["row"] not in labels]
        if out["rows"]:
            out["merged_rows_provenance"] = earlier.get("provenance") or "not recorded"
    for label, name, supp in rows:
        path = data_path(name)
        row = {"row": label, "file": name, "min_support": supp, "tools": {}, "load_avg_start": os.getloadavg()}
        for tool in TOOLS if reuse else tools:
            if (label, tool) in reuse:
                r = reuse[(label, tool)]
            elif tool in tools:
                r = run_worker(tool, path, supp, runs)
            else:
                continue
            row["tools"][tool] = r
            shown = f"{r['median_s']:.3f} s, {r['peak_rss_bytes'] / 2**20:.0f} MiB, {r['itemsets']}" if "error" not in r else r["error"]
            run.say(f"{label:24s} {tool:18s} {shown}")
        row["load_avg_end"] = os.getloadavg()
        judge(row)
        out["rows"].append(row)
    order = {r[0]: k for k, r in enumerate(ROWS)}
    out["rows"].sort(key=lambda r: order.get(r["row"], len(order)))
    print_table(out, sys.stderr if a.json else sys.stdout)
    run.write(out)
    plot(out, Path(a.output).with_suffix(".png"))


def judge(row: dict) -> None:
    """Ratios against the anchors and whether each target is met."""
    t = row["tools"]
    ours = t.get("clusterlab", {})
    if "error" in ours or not ours:
        row["verdict"] = "clusterlab failed"
        return
    counts = {k: v["itemsets"] for k, v in t.items() if "itemsets" in v}
    row["counts_agree"] = len({tuple(c) for c in counts.values()}) == 1 and all(len(c) == 1 for c in counts.values())
    fims = [t[k]["median_s"] for k in ("pyfim", "pyfim-eclat") if "median_s" in t.get(k, {})]
    if fims:
        row["vs_pyfim_best"] = ours["median_s"] / min(fims)
        row["pyfim_target_met"] = row["vs_pyfim_best"] <= 0.8
        # CPU seconds (all our threads summed vs pyfim's one): robust to other load on the
        # machine, and charges us for every core we use.
        fcpu = [t[k]["median_cpu_s"] for k in ("pyfim", "pyfim-eclat") if "median_cpu_s" in t.get(k, {})]
        if fcpu:
            row["cpu_vs_pyfim_best"] = ours["median_cpu_s"] / min(fcpu)
    # The same input form on both sides: Python lists (our conversion included), and the file
    # (our read vs pyfim's load into lists).
    for form, ours_key, theirs in (("lists", "clusterlab-lists", ("pyfim", "pyfim-eclat")),
                                   ("file", "clusterlab-file", ("pyfim-file", "pyfim-eclat-file"))):
        best = [t[k]["median_s"] for k in theirs if "median_s" in t.get(k, {})]
        if best and "median_s" in t.get(ours_key, {}):
            row[f"vs_pyfim_best_{form}"] = t[ours_key]["median_s"] / min(best)
            row[f"pyfim_target_met_{form}"] = row[f"vs_pyfim_best_{form}"] <= 0.8
    m = t.get("mlxtend", {})
    if "median_s" in m:
        row["mlxtend_speedup"] = m["median_s"] / ours["median_s"]
        row["mlxtend_mem_ratio"] = ours["peak_rss_bytes"] / m["peak_rss_bytes"]
        # Memory the mining itself added on top of the loaded process (interpreter, libraries,
        # input): the whole-process peak is dominated by a ~100 MiB baseline every tool shares.
        row["mlxtend_mining_mem_ratio"] = mining_mem(ours) / max(mining_mem(m), 1)
        row["mlxtend_speed_target_met"] = row["mlxtend_speedup"] >= 30
        row["mlxtend_mem_target_met_peak"] = row["mlxtend_mem_ratio"] <= 0.2
        row["mlxtend_mem_target_met_mining"] = row["mlxtend_mining_mem_ratio"] <= 0.2
    elif m:
        row["mlxtend_note"] = m.get("error")
    e = t.get("efficient-apriori", {})
    if "median_s" in e:
        row["efficient_apriori_speedup"] = e["median_s"] / ours["median_s"]


def mining_mem(r: dict) -> int:
    return max(r["peak_rss_bytes"] - r["rss_loaded_bytes"], 0)


def print_table(out: dict, file=sys.stdout) -> None:
    hdr = f"{'row':24s} {'itemsets':>9s} {'ours s':>8s} {'pyfim s':>8s} {'eclat s':>8s} {'vs best':>7s} " \
          f"{'lists':>5s} {'file':>5s} " \
          f"{'cpu vs':>6s} {'mlxtend s':>9s} {'x':>6s} {'mem':>5s} {'minmem':>6s} {'eff-apr s':>9s} agree"
    print(hdr, file=file)
    for r in out["rows"]:
        t = r["tools"]

        def s(k, t=t):
            return f"{t[k]['median_s']:.3f}" if "median_s" in t.get(k, {}) else "-"
        print(f"{r['row']:24s} {t['clusterlab'].get('itemsets', ['-'])[0]!s:>9s} {s('clusterlab'):>8s} {s('pyfim'):>8s} "
              f"{s('pyfim-eclat'):>8s} {r.get('vs_pyfim_best', float('nan')):7.2f} "
              f"{r.get('vs_pyfim_best_lists', float('nan')):5.2f} {r.get('vs_pyfim_best_file', float('nan')):5.2f} "
              f"{r.get('cpu_vs_pyfim_best', float('nan')):6.2f} {s('mlxtend'):>9s} "
              f"{r.get('mlxtend_speedup', float('nan')):6.0f} {r.get('mlxtend_mem_ratio', float('nan')):5.2f} "
              f"{r.get('mlxtend_mining_mem_ratio', float('nan')):6.3f} "
              f"{s('efficient-apriori'):>9s} {r.get('counts_agree')}", file=file)


def plot(out: dict, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    rows = out["rows"]
    tools = [k for k in TOOLS if any(k in r["tools"] for r in rows)]
    fig, ax = plt.subplots(figsize=(11, 4.5))
    w = 0.8 / len(tools)
    for j, tool in enumerate(tools):
        ys = [r["tools"].get(tool, {}).get("median_s", np.nan) for r in rows]
        ax.bar(np.arange(len(rows)) + j * w, ys, w, label=tool)
    ax.set_yscale("log")
    ax.set_xticks(np.arange(len(rows)) + w * (len(tools) - 1) / 2)
    ax.set_xticklabels([r["row"] for r in rows], rotation=20, ha="right")
    ax.set_ylabel("median time to a materialized result (s, log)")
    ax.set_title("Frequent itemset mining (missing bar: timeout or out of memory)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    from clusterlab._atomic import atomic_path

    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")


if __name__ == "__main__":
    main()
