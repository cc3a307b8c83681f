"""mine() and rules(): equal to brute force (hypothesis), to each other, to pyfim on the FIMI
datasets, and rules equal to brute force and to mlxtend."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import clusterlab
from clusterlab import _core
from clusterlab.errors import BasketFormatError, ConfigError, TooManyItemsets
from clusterlab.mining.sequential import min_count_of
from tests.conftest import SHARED_DATA

ALGOS = ("apriori", "fpgrowth", "eclat", "lcm")


def shared_data(name: str) -> Path:
    """../shared/data beside the checkout, or /work/shared/data when run from a worktree."""
    for d in (SHARED_DATA, *(p / "shared" / "data" for p in Path(__file__).resolve().parents)):
        if (d / name).exists():
            return d / name
    pytest.skip(f"{name} not found in a shared/data directory above the checkout")


def brute(txs, min_count):
    """All frequent itemsets {tuple: count} by enumerating every subset of every transaction."""
    counts: dict = {}
    for t in txs:
        t = sorted(set(t))
        for k in range(1, len(t) + 1):
            for c in itertools.combinations(t, k):
                counts[c] = counts.get(c, 0) + 1
    return {c: n for c, n in counts.items() if n >= min_count}


def closed_of(sets, maximal=False):
    out = {}
    for c, n in sets.items():
        sup = [d for d in sets if len(d) == len(c) + 1 and set(c) <= set(d)]
        if maximal and not sup or not maximal and all(sets[d] != n for d in sup):
            out[c] = n
    return out


def as_dict(table):
    return {tuple(i): c for i, c in zip(table["items"].to_pylist(), table["count"].to_pylist(), strict=True)}


def canonical_rows(d):
    return sorted(d.items(), key=lambda kv: (len(kv[0]), kv[0]))


baskets = st.lists(st.lists(st.integers(0, 11), max_size=8), min_size=0, max_size=30)


@settings(max_examples=60, deadline=None)
@given(txs=baskets, min_count=st.integers(1, 4), target=st.sampled_from(["all", "closed", "maximal"]),
       min_len=st.integers(1, 3), span=st.one_of(st.none(), st.integers(0, 3)))
def test_all_algorithms_equal_brute_force(txs, min_count, target, min_len, span):
    want = brute(txs, min_count)
    if target != "all":
        want = closed_of(want, target == "maximal")
    max_len = None if span is None else min_len + span
    want = {c: n for c, n in want.items() if len(c) >= min_len and (max_len is None or len(c) <= max_len)}
    for algo in ALGOS:
        t = clusterlab.mine(txs, min_support=min_count, algorithm=algo, target=target, min_len=min_len,
                            max_len=max_len)
        got = list(zip(map(tuple, t["items"].to_pylist()), t["count"].to_pylist(), strict=True))
        assert got == canonical_rows(want), algo  # same sets, same counts, canonical order
        if txs:
            assert t["support"].to_pylist() == [c / len(txs) for _, c in got]


@settings(max_examples=30, deadline=None)
@given(txs=baskets, min_count=st.integers(1, 3), conf=st.sampled_from([0.0, 0.3, 0.6, 1.0]),
       multi=st.booleans())
def test_rules_equal_brute_force(txs, min_count, conf, multi):
    sets = brute(txs, min_count)
    n = len(txs)
    want = {}
    for s, c in sets.items():
        for k in range(1, len(s)):
            if not multi and k > 1:
                break
            for cons in itertools.combinations(s, k):
                ante = tuple(x for x in s if x not in cons)
                if c / sets[ante] >= conf:
                    want[(ante, cons)] = (c / n, c / sets[ante], c / sets[ante] / (sets[cons] / n))
    if not txs:
        return
    t = clusterlab.mine(txs, min_support=min_count)
    r = clusterlab.rules(t, min_confidence=conf, consequents="multi" if multi else "single")
    got = {(tuple(a), tuple(c)): (s, f, lift) for a, c, s, f, lift in zip(
        r["antecedent"].to_pylist(), r["consequent"].to_pylist(), r["support"].to_pylist(),
        r["confidence"].to_pylist(), r["lift"].to_pylist(), strict=True)}
    assert got.keys() == want.keys()
    for k, v in want.items():
        assert got[k] == pytest.approx(v)


def test_threads_do_not_change_bytes():
    rng = np.random.default_rng(5)
    txs = [rng.choice(40, size=rng.integers(0, 15), replace=False).tolist() for _ in range(2000)]
    for algo in ALGOS:
        one = clusterlab.mine(txs, 0.02, algorithm=algo, threads=1)
        two = clusterlab.mine(txs, 0.02, algorithm=algo, threads=2)
        assert one.num_rows > 500 and one.equals(two)


def test_labels_support_fraction_and_metadata():
    t = clusterlab.mine([["milk", "bread"], ["bread"], ["milk", "bread", "eggs"], []], min_support=0.5)
    assert t.to_pydict() == {"items": [["bread"], ["milk"], ["bread", "milk"]], "count": [3, 2, 2],
                             "support": [0.75, 0.5, 0.5]}
    assert t.schema.field("items").type == pa.large_list(pa.string())
    assert clusterlab.mining.table_info(t)["n_transactions"] == 4
    df = t.to_pandas()
    assert df["count"].dtype == np.int64
    import polars as pl

    assert pl.from_arrow(t)["count"].to_list() == [3, 2, 2]


def test_min_support_rounding():
    assert min_count_of(0.01, 100_000) == 1000  # exactly 1%, not 1001 by float error
    assert min_count_of(0.007, 1_000_000) == 7000
    assert min_count_of(0.0001, 10) == 1
    assert min_count_of(3, 10) == min_count_of(3.0, 10) == 3


@pytest.mark.parametrize("kw, match", [
    ({"min_support": 0}, "min_support must be > 0"),
    ({"min_support": 2.5}, "whole number"),
    ({"min_support": "1%"}, "must be a number"),
    ({"algorithm": "magic"}, "unknown algorithm"),
    ({"target": "open"}, "unknown target"),
    ({"min_len": 0}, "min_len"),
    ({"min_len": 3, "max_len": 2}, "max_len"),
    ({"threads": 0}, "threads"),
])
def test_bad_arguments_are_config_errors(kw, match):
    with pytest.raises(ConfigError, match=match):
        clusterlab.mine([[1, 2]], **kw)


def test_missing_file_names_it(tmp_path):
    with pytest.raises(BasketFormatError, match="no such file"):
        clusterlab.mine(tmp_path / "nope.dat")
    bad = tmp_path / "bad.dat"
    bad.write_text("1 2\n3 x\n")
    with pytest.raises(BasketFormatError, match=r"bad.dat:2"):
        clusterlab.mine(bad)


def test_rules_refuse_incomplete_tables():
    t = clusterlab.mine([[1, 2], [1, 2, 3]], min_support=1, target="closed")
    with pytest.raises(ConfigError, match="closed"):
        clusterlab.rules(t)
    t = clusterlab.mine([[1, 2], [1, 2, 3]], min_support=1, min_len=2)
    with pytest.raises(ConfigError, match="min_len"):
        clusterlab.rules(t)
    stripped = t.replace_schema_metadata(None)
    with pytest.raises(ConfigError, match="missing"):
        clusterlab.rules(stripped, n_transactions=2)
    with pytest.raises(ConfigError, match="n_transactions"):
        clusterlab.rules(clusterlab.mine([[1, 2]], 1).replace_schema_metadata(None))


def test_rules_filters_and_metrics():
    txs = [[1, 2], [1, 2], [1, 2, 3], [3], [2, 3], [1]]
    t = clusterlab.mine(txs, min_support=1)
    r = clusterlab.rules(t, min_confidence=0.5, min_lift=1.0)
    assert min(r["lift"].to_pylist()) >= 1.0
    row = r.filter(pa.compute.equal(r["count"], 3)).to_pylist()
    # {1} -> {2}: support 3/6, confidence 3/4, lift 0.75/(4/6), leverage 0.5 - (4/6)(4/6)
    one_two = next(x for x in row if x["antecedent"] == [1] and x["consequent"] == [2])
    assert one_two["confidence"] == pytest.approx(0.75)
    assert one_two["leverage"] == pytest.approx(0.5 - 4 / 6 * 4 / 6)
    assert one_two["conviction"] == pytest.approx((1 - 4 / 6) / (1 - 0.75))
    sure = clusterlab.rules(clusterlab.mine([[1, 2], [1, 2]], 1), min_confidence=1.0)
    assert sure["conviction"].to_pylist() == [math.inf, math.inf]


def test_rules_equal_mlxtend():
    mlx = pytest.importorskip("mlxtend.frequent_patterns")
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(11)
    txs = [sorted(rng.choice(12, size=rng.integers(1, 7), replace=False).tolist()) for _ in range(300)]
    onehot = pd.DataFrame([[i in t for i in range(12)] for t in txs], columns=list(range(12)))
    fi = mlx.fpgrowth(onehot, min_support=0.1, use_colnames=True)
    # mlxtend divides rounded supports, so a confidence of exactly 0.4 (32/80) comes out as
    # 0.39999 and is dropped; ours divides counts. Use a threshold no rule sits on.
    want_r = mlx.association_rules(fi, num_itemsets=len(fi), metric="confidence", min_threshold=0.33)
    sets = clusterlab.mine(txs, min_support=0.1)
    assert len(fi) == sets.num_rows
    r = clusterlab.rules(sets, min_confidence=0.33, consequents="multi").to_pandas()
    key = lambda a, c: (tuple(sorted(a)), tuple(sorted(c)))  # noqa: E731
    want = {key(a, c): row for a, c, row in zip(want_r["antecedents"], want_r["consequents"],
                                                 want_r.itertuples(index=False), strict=True)}
    got = {key(a, c): row for a, c, row in zip(r["antecedent"], r["consequent"], r.itertuples(index=False), strict=True)}
    assert got.keys() == want.keys() and len(got) > 20
    for k, g in got.items():
        w = want[k]
        assert (g.support, g.confidence, g.lift, g.leverage) == pytest.approx(
            (w.support, w.confidence, w.lift, w.leverage))
        assert g.conviction == pytest.approx(w.conviction) or (math.isinf(g.conviction) and math.isinf(w.conviction))


# --- equal to pyfim 6.28 on the FIMI datasets -------------------------------------------------

@pytest.fixture(scope="module")
def datasets():
    cache: dict = {}

    def get(name):
        if name not in cache:
            b = clusterlab.read_baskets(shared_data(f"{name}.dat"))
            cache[name] = (b, b.to_lists(), np.bincount(b.items))
        return cache[name]

    return get


def pyfim_csr(result):
    """pyfim's [(items, count), ...] in our canonical CSR form."""
    lens = np.fromiter((len(s) for s, _ in result), dtype=np.int64, count=len(result))
    offsets = np.zeros(len(result) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    items = np.fromiter((i for s, _ in result for i in s), dtype=np.uint32, count=int(offsets[-1]))
    counts = np.fromiter((c for _, c in result), dtype=np.uint64, count=len(result))
    return _core.canonical_itemsets(offsets, items, counts)


def drop_pyfim_quirk(table, item_counts, n):
    """pyfim (apriori/eclat/fpgrowth, 6.28) leaves out itemsets made only of items that occur in
    every transaction (e.g. {85} in mushroom.dat); drop them from ours before comparing."""
    everywhere = np.flatnonzero(item_counts == n)
    if everywhere.size == 0:
        return table
    keep = [not set(s) <= set(everywhere.tolist()) for s in table["items"].to_pylist()]
    return table.filter(pa.array(keep))


CASES = [  # (dataset, min support %, targets, algorithms)
    ("T10I4D100K", 1.0, "scm", ALGOS),
    ("T10I4D100K", 0.5, "s", ALGOS),
    ("T10I4D100K", 0.1, "scm", ("fpgrowth", "eclat")),
    ("chess", 80.0, "scm", ALGOS),
    ("chess", 65.0, "s", ("fpgrowth", "eclat")),
    ("mushroom", 30.0, "scm", ALGOS),
    ("mushroom", 15.0, "s", ("fpgrowth", "eclat")),
]


@pytest.mark.parametrize("name, supp, targets, algos", CASES, ids=[f"{c[0]}-{c[1]}%" for c in CASES])
def test_equal_to_pyfim(datasets, name, supp, targets, algos):
    fim = pytest.importorskip("fim")
    b, lists, item_counts = datasets(name)
    n = len(b)
    for tchar in targets:
        target = {"s": "all", "c": "closed", "m": "maximal"}[tchar]
        min_count = min_count_of(supp / 100, n)
        ref = fim.fpgrowth(lists, target=tchar, supp=-min_count, report="a")
        ro, ri, rc = pyfim_csr(ref)
        for algo in algos:
            t = clusterlab.mine(b, min_support=min_count, algorithm=algo, target=target)
            t = drop_pyfim_quirk(t, item_counts, n)
            o, i, c = pyfim_csr(list(zip(t["items"].to_pylist(), t["count"].to_pylist(), strict=True)))
            assert np.array_equal(o, ro) and np.array_equal(i, ri) and np.array_equal(c, rc), (name, supp, target, algo)


def test_known_figures(datasets):
    b, _, _ = datasets("T10I4D100K")
    assert clusterlab.mine(b, 0.01).num_rows == 385
    assert [clusterlab.mine(b, 0.001, target=t).num_rows for t in ("all", "closed", "maximal")] == [27532, 26806, 4054]
    b, _, counts = datasets("mushroom")
    assert counts[85] == len(b) and clusterlab.mine(b, 0.1).to_pydict()["items"].count([85]) == 1


# --- limits and odd input ----------------------------------------------------------------------

@pytest.mark.parametrize("algo", ALGOS)
def test_pattern_explosion_is_a_clear_error(algo):
    """One 100-item transaction at support 1 holds 2^100 itemsets: every thread stops and the
    error names the count reached and what to change (it used to hit a Rust assert)."""
    import time

    t0 = time.perf_counter()
    with pytest.raises(TooManyItemsets, match="max_len") as e:
        clusterlab.mine([list(range(100)), list(range(40, 140))], min_support=1, algorithm=algo, threads=2)
    assert time.perf_counter() - t0 < 20
    assert isinstance(e.value, ConfigError) and e.value.limit == 20_000_000 and e.value.reached <= e.value.limit
    # A lower cap stops an ordinary run; max_len keeps the explosion in bounds.
    txs = [[1, 2, 3, 4], [1, 2, 3], [2, 3, 4]]
    with pytest.raises(TooManyItemsets, match="limit of 5"):
        clusterlab.mine(txs, 1, algorithm=algo, max_itemsets=5)
    assert clusterlab.mine(txs, 1, algorithm=algo, max_itemsets=None).num_rows == 15
    assert clusterlab.mine([list(range(100))], 1, algorithm=algo, max_len=2).num_rows == 100 + 4950
    with pytest.raises(ConfigError, match="max_itemsets"):
        clusterlab.mine(txs, 1, max_itemsets=0)


def test_pattern_explosion_cli_is_one_line(tmp_path):
    import subprocess
    import sys

    f = tmp_path / "long.dat"
    f.write_text(" ".join(map(str, range(100))) + "\n")
    p = subprocess.run([sys.executable, "-m", "clusterlab", "mine", str(f), "-s", "1"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "too many itemsets" in p.stderr and "--max-len" in p.stderr


@pytest.mark.parametrize("algo", ALGOS)
def test_largest_item_id_costs_nothing(algo):
    """Kernels recode items: item 4294967295 must not size any table (it used to allocate 32 GiB)."""
    txs = [[1, 4294967295], [4294967295, 7], [1, 7, 4294967295]]
    t = clusterlab.mine(txs, 1, algorithm=algo)
    assert as_dict(t) == brute(txs, 1)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0, "1", True])
def test_rules_refuse_invalid_min_lift(bad):
    sets = clusterlab.mine([[1, 2], [1, 2], [1]], 1)
    with pytest.raises(ConfigError, match=r"min_lift must be a finite number >= 0"):
        clusterlab.rules(sets, min_lift=bad)
    with pytest.raises(ConfigError, match=r"min_confidence"):
        clusterlab.rules(sets, min_confidence=math.nan)


def test_auto_model_picks_the_measured_fastest_on_its_rows():
    """The model behind algorithm="auto" is a table fitted by bench/auto_model.py: on every
    measured row it picks the kernel measured fastest there, and that is not one fixed kernel
    for all data unless the measurements say so."""
    from clusterlab.mining.auto_model import ROWS
    from clusterlab.mining.choose import choose

    assert len(ROWS) >= 5, "bench/auto_model.py has not written the model yet"
    for r in ROWS:
        assert r["fastest"] == min(r["cpu_s"], key=r["cpu_s"].get), r["row"]
        assert choose(r["features"]) == r["fastest"], r["row"]


def test_auto_features_of_a_measured_row_match_the_table():
    """Features computed now from the data of a measured row are the ones the model was fitted
    with, so mine(algorithm="auto") on that data runs the kernel measured fastest there."""
    from clusterlab.mining.auto_model import ROWS
    from clusterlab.mining.choose import features
    from clusterlab.mining.sequential import choose_algorithm

    b = clusterlab.read_baskets(shared_data("T10I4D100K.dat"))
    for r in ROWS:
        if not r["row"].startswith("T10I4D100K "):
            continue
        mc = min_count_of(float(r["row"].split()[1].rstrip("%")) / 100, len(b))
        assert np.allclose(features(b, mc), r["features"], atol=1e-3), r["row"]
        assert choose_algorithm(b, mc) == r["fastest"]
        assert clusterlab.mining.table_info(clusterlab.mine(b, mc))["algorithm"] == r["fastest"]
