"""Input from Python lists, side by side: clusterlab's list conversion vs pyfim's mining.

Not a test. Issue 11's target: ``clusterlab.mine(list_of_lists)`` spends at most 0.2x of
pyfim 6.28's mining time on the same lists converting them (``Baskets.from_lists``, which
``mine`` calls on a list). For each row the lists are built once; then, interleaved in one
process, ``repeat`` times each: the conversion, pyfim eclat and pyfim fpgrowth on the same
lists (``report="a"``, absolute minimum count as clusterlab computes it). The ratio is the
median conversion time over the median of pyfim's faster algorithm. Also timed: conversion
of the same transactions as a pyarrow list column and as string items. The record carries
the harness's provenance (``clusterlab.bench.harness``: commit, machine, load before and
after, spare CPU, autogroup; the machine is shared: ratios, not absolute times).

    .venv/bin/python bench/lists.py            # writes bench/results/lists.json
    .venv/bin/python bench/lists.py --quick    # one row, 3 repeats
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
TARGET = 0.2


def shared_data() -> Path:
    for p in Path(__file__).resolve().parents:
        if (p / "shared" / "data" / "T10I4D100K.dat").exists():
            return p / "shared" / "data"
    sys.exit("cannot find shared/data/T10I4D100K.dat above this checkout")


def timed(fn, arg) -> float:
    t0 = time.perf_counter()
    fn(arg)
    return time.perf_counter() - t0


def rows(quick: bool):
    import clusterlab

    sparse = clusterlab.generate("T10I4D100K", items=20000, patterns=10000, seed=0)
    t10 = clusterlab.read_baskets(shared_data() / "T10I4D100K.dat")
    out = [("sparse T10I4D100K N=20000 L=10000 0.05%", sparse, 0.0005),
           ("sparse T10I4D100K N=20000 L=10000 0.02%", sparse, 0.0002),
           ("T10I4D100K 0.05%", t10, 0.0005)]
    return out[:1] if quick else out


def main(argv=None) -> None:
    from clusterlab.bench import harness

    ap = harness.parser(__doc__, RESULTS / "lists.json", repeat=("--repeat", 5),
                        repeat_help="timings of each conversion and each pyfim algorithm per row")
    ap.add_argument("--quick", action="store_true", help="one row, 3 repeats")
    run = harness.start(ap, argv, repeat_flag="--repeat")
    args = run.args
    # bench/fim.py sits beside this script: import pyfim's ``fim``, not it.
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    import pyarrow as pa

    import fim
    from clusterlab import Baskets
    from clusterlab.mining.sequential import min_count_of

    repeat = 3 if args.quick else args.repeat
    results = []
    for label, baskets, support in rows(args.quick):
        lists = baskets.to_lists()
        strings = [[f"i{x}" for x in t] for t in lists]
        column = pa.array(lists, pa.large_list(pa.uint32()))
        count = min_count_of(support, len(lists))
        times: dict[str, list[float]] = {k: [] for k in ("convert", "convert_strings", "convert_arrow",
                                                          "pyfim_eclat", "pyfim_fpgrowth")}
        n_sets = None
        for _ in range(repeat):
            times["convert"].append(timed(Baskets.from_lists, lists))
            times["convert_strings"].append(timed(Baskets.from_lists, strings))
            times["convert_arrow"].append(timed(Baskets.from_lists, column))
            for name, alg in (("pyfim_eclat", fim.eclat), ("pyfim_fpgrowth", fim.fpgrowth)):
                t0 = time.perf_counter()
                r = alg(lists, supp=-count, report="a")
                times[name].append(time.perf_counter() - t0)
                n_sets = len(r)
        med = {k: statistics.median(v) for k, v in times.items()}
        best = min(med["pyfim_eclat"], med["pyfim_fpgrowth"])
        row = {"row": label, "transactions": len(lists), "distinct_items": baskets.n_items,
               "min_support": support, "min_count": count, "pyfim_itemsets": n_sets,
               "median_s": med, "runs_s": times, "pyfim_best_s": best,
               "ratio_convert_to_pyfim": med["convert"] / best,
               "ratio_convert_strings_to_pyfim": med["convert_strings"] / best,
               "ratio_convert_arrow_to_pyfim": med["convert_arrow"] / best,
               "target": TARGET, "met": med["convert"] / best <= TARGET}
        results.append(row)
        run.say(f"{label:45s} convert {med['convert']:.3f} s (strings {med['convert_strings']:.3f}, arrow "
                f"{med['convert_arrow'] * 1e3:.2f} ms)  pyfim best {best:.3f} s  ratio {row['ratio_convert_to_pyfim']:.3f}"
                f"  {'met' if row['met'] else 'MISSED'}")
    doc = {"bench": "lists", "what": "Baskets.from_lists (mine(list_of_lists)'s conversion) vs pyfim 6.28 mining "
                                     "on the same lists; medians, interleaved in one process",
           "repeat": repeat, "rows": results}
    run.write(doc)


if __name__ == "__main__":
    main()
