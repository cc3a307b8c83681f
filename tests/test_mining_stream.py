"""Itemsets streamed to Parquet (``mine_to_parquet``, ``clusterlab mine --memory``): the same
rows, counts and metadata as the in-memory ``mine()``, written in row groups as found."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import clusterlab
from clusterlab import _core
from clusterlab.cli import main
from clusterlab.errors import ConfigError, TooManyItemsets
from clusterlab.mining.result import table_csr
from clusterlab.mining.stream import mine_to_parquet, rules_to_parquet
from tests.test_mining import ALGOS, shared_data


def canonical(table):
    """(offsets, items, counts) of an itemset table, sorted by (length, items)."""
    o, i, c, _ = table_csr(table)
    return [a.tolist() for a in _core.canonical_itemsets(o, i, c)]


baskets = st.lists(st.lists(st.integers(0, 11), max_size=8), min_size=0, max_size=30)


@settings(max_examples=60, deadline=None)
@given(txs=baskets, min_count=st.integers(1, 4), algo=st.sampled_from(ALGOS), span=st.integers(0, 3),
       min_len=st.integers(1, 3), chunk=st.sampled_from([1, 3, 1 << 17]), row_group=st.sampled_from([2, 7, 1 << 20]),
       labelled=st.booleans())
def test_streamed_file_is_the_in_memory_file_byte_for_byte(tmp_path_factory, txs, min_count, algo, span, min_len,
                                                          chunk, row_group, labelled):
    """The streamed file is ``mine()``'s table written with ``pq.write_table`` (what ``mine -o``
    writes), byte for byte: canonical order, schema, metadata, row groups. Small chunks make
    sorted runs of 8 x chunk itemsets, spilled and merged; small row groups split them."""
    import pyarrow.parquet as pq

    import clusterlab.mining.stream as stream

    d = tmp_path_factory.mktemp("s")
    max_len = None if span == 0 else max(span, min_len)
    if labelled:
        txs = [[f"i{x}" for x in t] for t in txs]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stream, "CHUNK", chunk)
        mp.setattr(stream, "ROW_GROUP", row_group)
        s = mine_to_parquet(txs, d / "streamed.parquet", min_support=min_count, algorithm=algo, min_len=min_len,
                            max_len=max_len)
    ref = clusterlab.mine(txs, min_count, algorithm=algo, min_len=min_len, max_len=max_len)
    pq.write_table(ref, d / "memory.parquet", row_group_size=row_group)
    assert (d / "streamed.parquet").read_bytes() == (d / "memory.parquet").read_bytes()
    assert s["itemsets"] == ref.num_rows
    groups = pq.ParquetFile(d / "streamed.parquet").metadata.num_row_groups
    assert s["row_groups"] == (groups if ref.num_rows else 0)  # (no rows: one empty group, as write_table's)
    assert (s["runs"] > 0) == (ref.num_rows >= 8 * chunk)  # runs of 8 x chunk: one only in memory
    assert sorted(p.name for p in d.iterdir()) == ["memory.parquet", "streamed.parquet"]  # the spill is gone


def test_one_thread_streams_the_same_file_every_run_and_labels_survive(tmp_path):
    txs = [["milk", "bread"], ["bread", "eggs"], ["milk", "bread", "eggs"], ["eggs"]]
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    mine_to_parquet(txs, a, min_support=1, algorithm="eclat")
    mine_to_parquet(txs, b, min_support=1, algorithm="eclat")
    assert a.read_bytes() == b.read_bytes()
    got = pq.read_table(a)
    ref = clusterlab.mine(txs, 1, algorithm="eclat")
    assert sorted(zip(got["items"].to_pylist(), got["count"].to_pylist(), strict=True)) == \
        sorted(zip(ref["items"].to_pylist(), ref["count"].to_pylist(), strict=True))


def test_chess_streams_in_many_row_groups_within_memory(tmp_path):
    chess = shared_data("chess.dat")
    out = tmp_path / "chess.parquet"
    s = mine_to_parquet(chess, out, min_support=0.7, algorithm="fpgrowth", memory=1 << 30)
    ref = clusterlab.mine(chess, 0.7, algorithm="fpgrowth")
    assert s["itemsets"] == ref.num_rows > 40_000 and s["row_groups"] >= 1
    assert canonical(pq.read_table(out)) == canonical(ref)
    assert s["peak_rss_bytes"] < 1 << 30


def test_a_failing_writer_stops_the_kernel_and_leaves_no_file(tmp_path):
    out = tmp_path / "sets.parquet"
    calls = []

    def progress(n, seconds, rss):
        calls.append(n)
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        mine_to_parquet(shared_data("chess.dat"), out, min_support=0.6, algorithm="eclat", progress=progress)
    assert len(calls) == 1 and not out.exists() and not list(tmp_path.iterdir())


def test_memory_limit_is_a_clear_error(tmp_path, monkeypatch):
    import clusterlab.mining.stream as stream

    # 16 MiB: below what the interpreter alone takes: refused up front, naming what would fit.
    monkeypatch.setattr(stream, "MIN_MEMORY", 1 << 20)
    with pytest.raises(ConfigError, match=r"^--memory 16 MiB cannot hold this run: .* give --memory \d+MiB or more$"):
        mine_to_parquet(shared_data("chess.dat"), tmp_path / "x.parquet", min_support=0.6, memory=16 << 20)
    # Past the up-front check (here skipped), the first chunk is over it: the run stops.
    monkeypatch.setattr(stream, "check_fits", lambda *a: None)
    with pytest.raises(ConfigError, match="over the --memory"):
        mine_to_parquet(shared_data("chess.dat"), tmp_path / "x.parquet", min_support=0.6, memory=16 << 20)
    monkeypatch.undo()
    with pytest.raises(ConfigError, match="at least 256 MiB"):
        mine_to_parquet([[1]], tmp_path / "x.parquet", min_support=1, memory=1 << 20)
    with pytest.raises(TooManyItemsets):
        mine_to_parquet(shared_data("chess.dat"), tmp_path / "x.parquet", min_support=0.6, max_itemsets=1000)
    assert not (tmp_path / "x.parquet").exists()


def rule_rows(table):
    """Every rule as (antecedent set, consequent, count, support, confidence, lift, leverage, conviction)."""
    d = table.to_pydict()
    return sorted((tuple(sorted(map(str, a))), tuple(map(str, c)), *rest) for a, c, *rest in
                  zip(d["antecedent"], d["consequent"], d["count"], d["support"], d["confidence"], d["lift"],
                      d["leverage"], d["conviction"], strict=True))


@settings(max_examples=40, deadline=None)
@given(txs=baskets, min_count=st.integers(1, 4), conf=st.sampled_from([0.0, 0.3, 0.5, 0.8, 1.0]),
       lift=st.sampled_from([None, 0.0, 1.0, 1.5]), bucket_bytes=st.sampled_from([1, 200, 1 << 28]),
       labelled=st.booleans(), row_group=st.sampled_from([3, 1 << 20]), small_runs=st.booleans())
def test_rules_out_of_core_equal_in_memory(tmp_path_factory, txs, min_count, conf, lift, bucket_bytes, labelled,
                                           row_group, small_runs):
    """Rules derived from the streamed itemset file through buckets on disk (a budget of one
    byte: a bucket per itemset's row at most) and sorted runs (``small_runs``: a few rules
    each) are rules() on the same itemsets written with ``pq.write_table``, byte for byte
    (multi-item consequents: ``test_parallel_mining_outofcore``)."""
    import clusterlab.mining.stream as stream

    assume(txs)  # no transactions: no rules either way (both refuse n_transactions 0)
    if labelled:
        txs = [[f"i{x}" for x in t] for t in txs]
    d = tmp_path_factory.mktemp("r")
    mine_to_parquet(txs, d / "sets.parquet", min_support=min_count)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stream, "RULES_BUCKET_BYTES", bucket_bytes)
        mp.setattr(stream, "ROW_GROUP", row_group)
        if small_runs:  # (with a bucket budget of 1 or 200 bytes: runs of 3 rules)
            mp.setattr(stream, "RULES_RUN_MIN", 3)
        s = rules_to_parquet(d / "sets.parquet", d / "rules.parquet", min_confidence=conf, min_lift=lift)
    ref = clusterlab.rules(clusterlab.mine(txs, min_count), min_confidence=conf, min_lift=lift)
    pq.write_table(ref, d / "ref.parquet", row_group_size=row_group)
    assert (d / "rules.parquet").read_bytes() == (d / "ref.parquet").read_bytes()
    assert s["rules"] == ref.num_rows
    assert sorted(p.name for p in d.iterdir()) == ["ref.parquet", "rules.parquet", "sets.parquet"]  # no spill left
    # rules() of the file's path: out of core, the same table as of the table in memory.
    of_path = clusterlab.rules(d / "sets.parquet", min_confidence=conf, min_lift=lift)
    assert of_path.schema == ref.schema and of_path.equals(ref)


def test_rules_out_of_core_survive_hash_collisions(tmp_path, monkeypatch):
    """Every itemset hashed alike (one bucket, one hash): the matching falls back to raw keys."""
    import clusterlab.mining.stream as stream

    chess = shared_data("chess.dat")
    mine_to_parquet(chess, tmp_path / "s.parquet", min_support=0.85)
    monkeypatch.setattr(stream, "_hash", lambda rows: np.zeros(rows.shape[0], dtype=np.uint64))
    rules_to_parquet(tmp_path / "s.parquet", tmp_path / "r.parquet", min_confidence=0.9)
    ref = clusterlab.rules(clusterlab.mine(chess, 0.85), min_confidence=0.9)
    assert ref.num_rows > 100 and rule_rows(pq.read_table(tmp_path / "r.parquet")) == rule_rows(ref)


def test_rules_out_of_core_refuse_what_is_not_all_itemsets(tmp_path):
    import pyarrow as pa

    txs = [[1, 2, 3], [1, 2, 3], [1, 2], [3]]
    clusterlab.mining.stream.mine_to_parquet(txs, tmp_path / "all.parquet", min_support=2)
    full = pq.read_table(tmp_path / "all.parquet")
    # A subset of a frequent itemset left out: named, nothing written.
    drop = [i for i, x in enumerate(full["items"].to_pylist()) if sorted(x) == [1, 3]]
    pq.write_table(full.filter(pa.array([i not in drop for i in range(full.num_rows)])), tmp_path / "gap.parquet")
    with pytest.raises(ConfigError, match=r"itemset \[1, 3\].*missing"):
        rules_to_parquet(tmp_path / "gap.parquet", tmp_path / "r.parquet")
    pq.write_table(clusterlab.mine(txs, 2, target="closed"), tmp_path / "closed.parquet")
    with pytest.raises(ConfigError, match="closed"):
        rules_to_parquet(tmp_path / "closed.parquet", tmp_path / "r.parquet")
    (tmp_path / "junk.parquet").write_text("not parquet")
    with pytest.raises(ConfigError, match="cannot read itemsets"):
        rules_to_parquet(tmp_path / "junk.parquet", tmp_path / "r.parquet")
    with pytest.raises(ConfigError, match="min_confidence"):
        rules_to_parquet(tmp_path / "all.parquet", tmp_path / "r.parquet", min_confidence=2)
    assert not (tmp_path / "r.parquet").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["all.parquet", "closed.parquet", "gap.parquet", "junk.parquet"]


def run(capsys, *args):
    with pytest.raises(SystemExit) as e:
        main(list(args))
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_cli_memory_streams_to_parquet(capsys, tmp_path):
    """`mine -o X --memory SIZE` writes the file `mine -o X` writes, byte for byte."""
    t10 = shared_data("T10I4D100K.dat")
    out, ref_out = tmp_path / "t10.parquet", tmp_path / "ref.parquet"
    code, stdout, _ = run(capsys, "mine", str(t10), "-s", "0.5%", "-o", str(out), "--memory", "2GB", "--json")
    assert code == 0
    s = json.loads(stdout)
    assert run(capsys, "mine", str(t10), "-s", "0.5%", "-o", str(ref_out), "-q")[0] == 0
    assert out.read_bytes() == ref_out.read_bytes()
    assert s["itemsets"] == pq.ParquetFile(ref_out).metadata.num_rows and s["peak_rss_bytes"] < 2e9
    assert s["runs"] == 0 and s["spilled_bytes"] == 0  # one run: sorted and written from memory


@pytest.mark.parametrize("consequents", ["single", "multi"])
def test_cli_memory_rules_out_of_core(capsys, tmp_path, consequents):
    """`--memory --rules` writes the rule file `--rules` writes without it, byte for byte, for
    either --consequents (the sequential path once ignored --consequents there)."""
    t10 = shared_data("T10I4D100K.dat")
    common = ["-s", "0.5%", "--rules", "--min-confidence", "0.3", "--consequents", consequents]
    code, stdout, _ = run(capsys, "mine", str(t10), *common, "-o", str(tmp_path / "a.parquet"), "--memory", "1GB",
                          "--json")
    assert code == 0
    s = json.loads(stdout)
    assert run(capsys, "mine", str(t10), *common, "-o", str(tmp_path / "b.parquet"), "-q")[0] == 0
    assert s["rules_output"] == str(tmp_path / "a.rules.parquet") and s["rules"] > 0
    assert (tmp_path / "a.rules.parquet").read_bytes() == (tmp_path / "b.rules.parquet").read_bytes()
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    multi = pq.read_table(tmp_path / "a.rules.parquet")["consequent"].to_pylist()
    assert any(len(c) > 1 for c in multi) == (consequents == "multi")


@pytest.mark.parametrize("args, msg", [
    (["-o", "x.csv"], "give -o FILE.parquet"),
    ([], "give -o FILE.parquet"),
    (["-o", "x.parquet", "--target", "closed"], "drop --target"),
    (["-o", "x.parquet", "--rules", "--rules-output", "x.csv"], "give --rules-output FILE.parquet"),
    (["-o", "x.csv", "--nodes", "2"], "give -o FILE.parquet"),
    (["-o", "x.parquet", "--nodes", "2", "--target", "maximal"], "drop --target"),
    (["-o", "x.parquet", "--nodes", "2", "-a", "eclat"], "--algorithm eclat is sequential"),
    (["-o", "x.parquet", "--nodes", "2", "--min-len", "2"], "drop --target and --min-len"),
    (["-o", "x.parquet", "--nodes", "2", "--memory", "100MB"], "--memory 100MB: give at least 256 MiB"),
    (["-o", "x.parquet", "--memory", "lots"], "--memory: cannot read size 'lots'"),
    (["-o", "x.parquet", "--memory", "100MB"], "--memory 100MB: give at least 256 MiB"),
    (["-o", "x.parquet", "--memory", "0"], "--memory: '0' is below"),
    (["-o", "x.parquet", "--memory", "-2GB"], "--memory: '-2GB' must not be negative"),
    (["-o", "x.parquet", "--memory", "nan"], "--memory: 'nan' is not a finite"),
    (["-o", "x.parquet", "--memory", "1e99"], "--memory: '1e99' is too large"),
])
def test_cli_memory_refusals_are_one_line(capsys, tmp_path, args, msg):
    (tmp_path / "b.dat").write_text("1 2\n1 2\n")
    args = [a if not a.startswith("x.") else str(tmp_path / a) for a in args]
    if "--memory" not in args:
        args += ["--memory", "1GB"]
    code, _, err = run(capsys, "mine", str(tmp_path / "b.dat"), "-s", "1", *args)
    assert code == 2 and msg in err and len(err.strip().splitlines()) == 1


def test_a_row_group_past_the_bound_is_refused_before_it_is_built(tmp_path, monkeypatch):
    """The file's row groups are the in-memory run's (1 Mi itemsets): writing one costs
    hundreds of MB, so one that would pass --memory is refused, naming what would fit, before
    it is built (chess at 45% reached 414 MiB under --memory 300MiB before this check). Here
    every itemset is made to cost a GiB."""
    import clusterlab.mining.stream as stream

    monkeypatch.setattr(stream, "ROW_GROUP_ROW_BYTES", 1 << 30)
    with pytest.raises(ConfigError, match=r"^memory: writing a row group .* over the --memory of 1,024 MiB: "
                                          r"give --memory \d+MiB or more$"):
        mine_to_parquet([[1, 2], [1, 2], [2, 3]], tmp_path / "x.parquet", min_support=1, memory=1 << 30)
    assert not list(tmp_path.iterdir())
    s = mine_to_parquet([[1, 2], [1, 2], [2, 3]], tmp_path / "x.parquet", min_support=1)  # no bound: written
    assert s["itemsets"] == 5


@pytest.mark.parametrize("share", [0.6, 0.0])
def test_under_a_bound_a_run_grows_while_its_sort_fits(tmp_path, monkeypatch, share):
    """With room (2 GB) the whole result is one run past the smallest run size, sorted and
    written from memory; with no room (a run share of 0) every run of the smallest size is
    spilled. The file is the same either way."""
    import clusterlab.mining.stream as stream

    monkeypatch.setattr(stream, "CHUNK", 1 << 10)
    monkeypatch.setattr(stream, "run_rows_of", lambda memory: 1000)
    monkeypatch.setattr(stream, "RUN_SHARE", share)
    chess = shared_data("chess.dat")
    s = mine_to_parquet(chess, tmp_path / "got.parquet", min_support=0.75, memory=2 << 30)
    ref = clusterlab.mine(chess, 0.75)
    pq.write_table(ref, tmp_path / "ref.parquet")
    assert (tmp_path / "got.parquet").read_bytes() == (tmp_path / "ref.parquet").read_bytes()
    assert s["itemsets"] == ref.num_rows == 20993
    if share:
        assert s["runs"] == 0 and s["spilled_bytes"] == 0
    else:  # a spill at the first chunk that reaches 1000 itemsets: runs of 1000 or a bit more
        assert 10 <= s["runs"] <= ref.num_rows // 1000, s["runs"]
