"""Fit the model behind ``mine(algorithm="auto")``: time every kernel on measured rows.

Not a test. For each row (sparse, dense and seed000-style data at several supports) every
kernel mines the same in-memory Baskets on one thread; the best of ``--runs`` CPU times
(``time.process_time``: robust to other load on a shared machine) is kept. Writes the
measurements with the harness's provenance (commit, machine, load, spare CPU, autogroup) to
``bench/results/auto_model.json`` and the model table (features + fastest kernel per row) to
``python/clusterlab/mining/auto_model.py``, which ``clusterlab.mining.choose`` reads:

    .venv/bin/python bench/auto_model.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from fim import data_path  # noqa: E402  (bench/fim.py: the same data files and generators)

ALGOS = ("apriori", "eclat", "fpgrowth", "lcm")
# (label, file as bench/fim.py names it, min support)
ROWS = [
    ("T10I4D100K 1%", "T10I4D100K.dat", 0.01),
    ("T10I4D100K 0.1%", "T10I4D100K.dat", 0.001),
    ("T10I4D100K 0.02%", "T10I4D100K.dat", 0.0002),
    ("sparse 11k 0.05%", "sparse11k.dat", 0.0005),
    ("sparse 11k 0.02%", "sparse11k.dat", 0.0002),
    ("chess 80%", "chess.dat", 0.8),
    ("chess 60%", "chess.dat", 0.6),
    ("mushroom 10%", "mushroom.dat", 0.1),
    ("seed000-style 1M 0.7%", "seed000_1M.dat", 0.007),
    ("seed000 10M 0.7%", "seed000.dat", 0.007),
]
# Apriori explodes on dense data at low support: its time there is not worth waiting for.
SLOW = 20.0


def main(argv=None) -> None:
    from clusterlab._atomic import atomic_open, check_output
    from clusterlab.bench import harness
    from clusterlab.errors import ConfigError

    ap = harness.parser(__doc__, ROOT / "bench" / "results" / "auto_model.json", repeat=("--runs", 3),
                        repeat_help="CPU timings per kernel and row, the best kept")
    ap.add_argument("--model", default=str(ROOT / "python" / "clusterlab" / "mining" / "auto_model.py"),
                    help="the model table written for clusterlab.mining.choose (default %(default)s)")
    run = harness.start(ap, argv, repeat_flag="--runs")
    a = run.args
    try:
        check_output(a.model, "--model")
    except ConfigError as e:
        ap.exit(2, f"{ap.prog}: {e}\n")
    import clusterlab
    from clusterlab.mining.choose import FEATURES, features
    from clusterlab.mining.sequential import min_count_of

    # One-time library loads (pyarrow's first numpy conversion imports pandas) before timing.
    for algo in ALGOS:
        clusterlab.mine([[1, 2], [1, 2, 3]], 1, algorithm=algo)
    out = {"runs": a.runs, "rows": []}
    for label, name, supp in ROWS:
        b = clusterlab.read_baskets(data_path(name))
        mc = min_count_of(supp, len(b))
        row = {"row": label, "min_count": mc, "features": list(features(b, mc)), "cpu_s": {}, "itemsets": {}}
        for algo in ALGOS:
            best = None
            for _ in range(a.runs):
                c0 = time.process_time()
                r = clusterlab.mine(b, mc, algorithm=algo, threads=1, max_itemsets=None)
                c = time.process_time() - c0
                row["itemsets"][algo] = r.num_rows
                best = c if best is None else min(best, c)
                if c > SLOW:
                    break
            row["cpu_s"][algo] = best
        row["fastest"] = min(ALGOS, key=lambda k: row["cpu_s"][k])
        assert len(set(row["itemsets"].values())) == 1, f"{label}: kernels disagree {row['itemsets']}"
        run.say(f"{label:24s} " + " ".join(f"{k} {v:.3f}" for k, v in row["cpu_s"].items()) + f"  -> {row['fastest']}")
        out["rows"].append(row)
    prov = run.provenance()
    lines = ['"""The measured rows of the "auto" model, written by bench/auto_model.py (do not edit).', "",
             f"Features: {', '.join(FEATURES)}. Load average {prov['load_before']} -> {prov['load_after']}.",
             '"""', "", "ROWS = ["]
    for r in out["rows"]:
        cpu = ", ".join(f'"{k}": {v:.4f}' for k, v in r["cpu_s"].items())
        lines.append(f'    {{"row": "{r["row"]}", "features": [{", ".join(f"{x:.4f}" for x in r["features"])}],')
        lines.append(f'     "cpu_s": {{{cpu}}}, "fastest": "{r["fastest"]}"}},')
    lines.append("]")
    with atomic_open(a.model, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    run.write(out)


if __name__ == "__main__":
    main()
