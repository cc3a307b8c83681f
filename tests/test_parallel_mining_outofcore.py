"""Parallel mining within a memory bound per rank (``mine --nodes N --memory SIZE``,
``run_parallel(..., output=, memory=)``): rank 0's file is byte-identical to the in-memory
run's written with ``-o``, for every algorithm and node count; a rank past the bound stops
the job with one error; rules with multi-item consequents out of core equal ``rules()``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import clusterlab
import clusterlab.mining.parallel.outofcore as outofcore
import clusterlab.mining.stream as stream
from clusterlab.cli import main
from clusterlab.cluster import InProcess
from clusterlab.errors import ConfigError
from clusterlab.mining.parallel import run_parallel
from clusterlab.mining.stream import mine_to_parquet, rules_to_parquet
from tests.test_mining import shared_data
from tests.test_mining_stream import rule_rows


def run(capsys, *args):
    with pytest.raises(SystemExit) as e:
        main(list(args))
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


@pytest.fixture
def small_blocks(monkeypatch):
    """Row groups of 500 rows, merge blocks of a few rows and PFP chunks of ~700 itemsets (a
    top-level item's are never split): many of each on a small result."""
    monkeypatch.setattr(stream, "ROW_GROUP", 500)
    monkeypatch.setattr(stream, "MERGE_BLOCK_BYTES", 600)
    monkeypatch.setattr(outofcore, "CHUNK_MAX", 700)
    return 500


@settings(max_examples=60, deadline=None)
@given(rows=st.sets(st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 5)), max_size=120),
       sources=st.integers(1, 5), block=st.integers(1, 9), seed=st.integers(0, 1000), itemsets=st.booleans())
def test_merger_gives_every_row_of_sorted_sources_in_order(rows, sources, block, seed, itemsets):
    """Any rows with numpy's lexsort; rows whose values ascend (itemsets) with the core's sort."""
    if itemsets:
        rows = {tuple(sorted(r)) for r in rows if len(set(r)) == 3}
    rows = np.array(sorted(rows), dtype=np.uint32).reshape(-1, 3)
    owner = np.random.default_rng(seed).integers(0, sources, rows.shape[0])

    def source(s):
        mine = rows[owner == s]
        pos = [0]

        def read():
            part = mine[pos[0]:pos[0] + block]
            pos[0] += block
            return part, part[:, 0].astype(np.uint64) * 7 + part[:, 2]

        return read

    m = outofcore.Merger([source(s) for s in range(sources)], 3, itemsets=itemsets)
    got, counts = [], []
    while True:
        items, c = m.next()
        if c.size == 0:
            break
        got.append(items)
        counts.append(c)
    got = np.concatenate(got) if got else np.zeros((0, 3), np.uint32)
    assert got.tolist() == rows.tolist()
    assert np.concatenate(counts).tolist() == (rows[:, 0].astype(np.uint64) * 7 + rows[:, 2]).tolist() if counts else True


@pytest.mark.parametrize("algorithm", ["hpa", "hpa-eld", "cd", "pfp"])
@pytest.mark.parametrize("nodes", [1, 3])
def test_streamed_file_is_the_in_memory_file_byte_for_byte(tmp_path, small_blocks, algorithm, nodes):
    chess = shared_data("chess.dat")
    # 80%: 8,227 itemsets in 17 row groups of 500 (75% gave 20,993 and took HPA 2.4x as long)
    ref = run_parallel(chess, nodes, algorithm, 0.8, cluster=InProcess())
    pq.write_table(ref.table, tmp_path / "ref.parquet", row_group_size=small_blocks)
    r = run_parallel(chess, nodes, algorithm, 0.8, cluster=InProcess(), output=tmp_path / "got.parquet",
                     memory=4 << 30)
    assert r.table.num_rows == 0 and r.streamed["itemsets"] == ref.table.num_rows == 8227
    assert r.streamed["row_groups"] == 17
    assert (tmp_path / "got.parquet").read_bytes() == (tmp_path / "ref.parquet").read_bytes()
    if algorithm == "pfp":  # every rank's itemsets went through disk: 4 bytes an item, 8 a count
        lens = {int(k): v for k, v in r.streamed["itemsets_by_length"].items()}
        assert r.streamed["spilled_bytes"] == sum(v * (4 * k + 8) for k, v in lens.items())
        assert r.streamed["runs"] >= 5  # the kernel handed its itemsets over in chunks (sorted runs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["got.parquet", "ref.parquet"]


def test_levels_written_out_are_not_held():
    """HPA and CD keep only the last pass's itemsets once they go to a file."""
    written = []

    class Out:
        def begin(self, n, min_count):
            written.append(("begin", n, min_count))

        def level(self, k, items, counts):
            written.append((k, items.tolist(), counts.tolist()))

    freq = np.array([10, 20, 30], dtype=np.uint32)
    levels = outofcore.Levels(freq, np.array([5, 6, 7], dtype=np.uint64), 9, 2, Out())
    levels.append((np.array([0, 1, 0, 2], dtype=np.uint32), np.array([3, 2], dtype=np.uint64)))
    levels.append((np.array([0, 1, 2], dtype=np.uint32), np.array([2], dtype=np.uint64)))
    assert written == [("begin", 9, 2), (1, [10, 20, 30], [5, 6, 7]), (2, [10, 20, 10, 30], [3, 2]),
                       (3, [10, 20, 30], [2])]
    assert levels[-1][1].tolist() == [2]
    with pytest.raises(RuntimeError, match="level 2 was written out"):
        levels[1]
    assert levels.result()[2].size == 0
    kept = outofcore.Levels(freq, np.array([5, 6, 7], dtype=np.uint64), 9, 2)
    kept.append((np.array([0, 1], dtype=np.uint32), np.array([3], dtype=np.uint64)))
    assert kept.result()[1].tolist() == [10, 20, 30, 10, 20]


@pytest.mark.parametrize("algorithm", ["hpa", "pfp"])
def test_cli_nodes_memory_writes_the_same_file_on_processes(capsys, tmp_path, algorithm):
    """Ranks as processes on the TCP mesh, labelled CSV input: the same bytes as without --memory."""
    rng = np.random.default_rng(5)
    lines = ["transaction_id,item"] + [f"{t},item{x}" for t in range(300) for x in
                                        sorted(set(rng.integers(0, 12, rng.integers(1, 8)).tolist()))]
    (tmp_path / "b.csv").write_text("\n".join(lines) + "\n")
    common = ["mine", str(tmp_path / "b.csv"), "-s", "0.05", "-n", "3", "-a", algorithm, "-q"]
    code, _, err = run(capsys, *common, "-o", str(tmp_path / "mem.parquet"))
    assert code == 0, err
    # its own process: --memory bounds the whole process, and a test worker's own memory is not the job's
    # (in CI's worker the rules step met 637 MiB of it)
    p = subprocess.run([sys.executable, "-m", "clusterlab", *common, "-o", str(tmp_path / "ooc.parquet"), "--memory",
                        "512MiB", "--json", "--rules", "--consequents", "multi", "--min-confidence", "0.4"],
                       capture_output=True, text=True, timeout=300)
    code, out, err = p.returncode, p.stdout, p.stderr
    assert code == 0, err
    s = json.loads(out)
    assert (tmp_path / "ooc.parquet").read_bytes() == (tmp_path / "mem.parquet").read_bytes()
    ref = pq.read_table(tmp_path / "mem.parquet")
    assert s["itemsets"] == ref.num_rows > 50 and s["memory_bytes"] == 512 << 20
    assert all(p < 512 << 20 for p in s["ranks_peak_rss_bytes"])
    assert (s["spilled_bytes"] > 0) == (algorithm == "pfp")
    rules = clusterlab.rules(ref, min_confidence=0.4, consequents="multi")
    got = pq.read_table(tmp_path / "ooc.rules.parquet")
    assert s["rules"] == rules.num_rows > 0 and rule_rows(got) == rule_rows(rules)
    assert pq.read_table(tmp_path / "ooc.rules.parquet").schema.metadata == rules.schema.metadata


@pytest.mark.parametrize("algorithm", ["cd", "pfp"])
def test_a_rank_past_the_bound_stops_the_job_in_one_line(capsys, tmp_path, monkeypatch, algorithm):
    """8 MiB per rank (below what any interpreter takes): every rank process is over it at its
    first check; the ranks agree, the job ends with one line naming a rank, nothing is left."""
    monkeypatch.setattr(stream, "MIN_MEMORY", 1 << 20)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    out = tmp_path / "x.parquet"
    code, _, err = run(capsys, "mine", str(shared_data("chess.dat")), "-s", "0.8", "-n", "2", "-a", algorithm,
                       "-q", "-o", str(out), "--memory", "8MiB")
    assert code == 2, err
    assert "memory: rank 0 reached" in err and "over the --memory of 8 MiB" in err
    assert len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_bound_is_checked_where_ranks_share_a_process(tmp_path, monkeypatch):
    monkeypatch.setattr(stream, "MIN_MEMORY", 1 << 20)
    with pytest.raises(ConfigError, match=r"rank \d reached .* over the --memory of 2 MiB"):
        run_parallel(shared_data("chess.dat"), 2, "pfp", 0.8, cluster=InProcess(), output=tmp_path / "x.parquet",
                     memory=2 << 20)
    assert not os.listdir(tmp_path)
    with pytest.raises(ConfigError, match="give output"):
        run_parallel(shared_data("chess.dat"), 2, "pfp", 0.8, cluster=InProcess(), memory=1 << 30)


baskets = st.lists(st.lists(st.integers(0, 9), max_size=8), min_size=1, max_size=30)


@settings(max_examples=15, deadline=None)
@given(txs=baskets, min_count=st.integers(1, 4), conf=st.sampled_from([0.0, 0.3, 0.5, 0.8, 1.0]),
       lift=st.sampled_from([None, 1.0]), bucket_bytes=st.sampled_from([1, 300, 1 << 28]), labelled=st.booleans(),
       row_group=st.sampled_from([3, 1 << 20]), small_runs=st.booleans())
def test_multi_consequent_rules_out_of_core_equal_in_memory(tmp_path_factory, txs, min_count, conf, lift,
                                                            bucket_bytes, labelled, row_group, small_runs):
    """rules(consequents="multi") out of core is the in-memory table written with
    ``pq.write_table``, byte for byte (its order too), also through runs of 3 rules."""
    assume(any(txs))
    if labelled:
        txs = [[f"i{x}" for x in t] for t in txs]
    d = tmp_path_factory.mktemp("m")
    mine_to_parquet(txs, d / "sets.parquet", min_support=min_count)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stream, "RULES_BUCKET_BYTES", bucket_bytes)
        mp.setattr(stream, "ROW_GROUP", row_group)
        if small_runs:  # (with a bucket budget of 1 or 300 bytes: runs of 3 rules)
            mp.setattr(stream, "RULES_RUN_MIN", 3)
        s = rules_to_parquet(d / "sets.parquet", d / "rules.parquet", min_confidence=conf, min_lift=lift,
                             consequents="multi")
    ref = clusterlab.rules(clusterlab.mine(txs, min_count), min_confidence=conf, min_lift=lift, consequents="multi")
    pq.write_table(ref, d / "ref.parquet", row_group_size=row_group)
    assert (d / "rules.parquet").read_bytes() == (d / "ref.parquet").read_bytes() and s["rules"] == ref.num_rows
    assert sorted(p.name for p in d.iterdir()) == ["ref.parquet", "rules.parquet", "sets.parquet"]


def test_multi_consequent_rules_of_chess_out_of_core(tmp_path):
    """Consequents of up to 5+ items (chess at 85%, confidence 0.9), as rules() gives them."""
    chess = shared_data("chess.dat")
    mine_to_parquet(chess, tmp_path / "c.parquet", min_support=0.85)
    s = rules_to_parquet(tmp_path / "c.parquet", tmp_path / "r.parquet", min_confidence=0.9, consequents="multi",
                         memory=1 << 30)
    ref = clusterlab.rules(tmp_path / "c.parquet", min_confidence=0.9, consequents="multi")
    inmem = clusterlab.rules(clusterlab.mine(chess, 0.85), min_confidence=0.9, consequents="multi")
    assert s["rules"] == ref.num_rows == inmem.num_rows > 10_000
    assert max(len(c) for c in ref["consequent"].to_pylist()) >= 5
    pq.write_table(inmem, tmp_path / "inmem.parquet")
    assert (tmp_path / "r.parquet").read_bytes() == (tmp_path / "inmem.parquet").read_bytes()
    assert ref.equals(inmem)


@settings(max_examples=60, deadline=None)
@given(sets=st.sets(st.frozensets(st.integers(0, 9), min_size=1, max_size=4), max_size=60), k=st.integers(2, 5))
def test_join_bound_bounds_the_candidates(sets, k):
    """``join_bound`` counts what the Apriori join can make: never fewer than the candidates
    (after the prune) that ``hpa_candidates`` makes from the same large (k-1)-itemsets."""
    from clusterlab import _core

    rows = sorted(tuple(sorted(s)) for s in sets if len(s) == k - 1)
    prev = np.array(rows, dtype=np.uint32).ravel() if rows else np.zeros(0, dtype=np.uint32)
    made = _core.hpa_candidates(prev, k - 1, 1, 0).size // k if prev.size else 0
    bound = outofcore.join_bound(prev, k)
    assert bound.size == len(rows) and (bound >= 0).all() and int(bound.sum()) >= made
    if k == 2:
        assert int(bound.sum()) == len(rows) * (len(rows) - 1) // 2 == made


def _dense(path, items=1000, transactions=100):
    """Every item in ~95% of the transactions: pass 3 would hold C(items, 3) candidates."""
    rng = np.random.default_rng(1)
    path.write_text("\n".join(" ".join(map(str, np.flatnonzero(rng.random(items) < 0.95)))
                              for _ in range(transactions)) + "\n")
    return path


@pytest.mark.parametrize("algorithm", ["hpa", "cd"])
def test_a_pass_that_cannot_fit_is_refused_before_it_runs(capsys, tmp_path, algorithm):
    """Pass 3 of 1000 items all frequent in pairs is ~166M candidates (gigabytes on each
    rank): with --memory 256MiB the job stops before making them, in one line naming
    --memory and what would fit, with no file left (not an out-of-memory abort mid-pass)."""
    data = _dense(tmp_path / "dense.dat")
    out = tmp_path / "x.parquet"
    code, _, err = run(capsys, "mine", str(data), "-s", "0.5", "--nodes", "2", "-a", algorithm, "-o", str(out),
                       "--memory", "256MiB", "-q")
    assert code == 2, err
    line = err.strip()
    assert len(line.splitlines()) == 1 and "memory: pass 3 would need about" in line
    assert "over the --memory of 256 MiB" in line and "give --memory" in line and "MiB or more (per rank)" in line
    fit = int(line.split("give --memory ")[1].split("MiB")[0])
    assert fit > 2048  # gigabytes: the candidates alone take ~1.6e8 x 48 bytes (HPA: half on each rank)
    assert not out.exists()


def test_rank_0s_row_group_past_the_bound_is_refused(tmp_path, monkeypatch):
    """Rank 0's row groups are the in-memory file's (1 Mi itemsets): one that would take it past
    --memory is refused before it is built, one error for the job, no file left."""
    data = tmp_path / "d.dat"
    data.write_text("1 2 3\n1 2\n2 3\n1 2 3\n")
    # 16 GiB a row: any row group is past any bound, while the bound (16 GiB, in-process ranks:
    # this test process's own peak counts) is far above what a loaded test worker has reached
    monkeypatch.setattr(stream, "ROW_GROUP_ROW_BYTES", 1 << 34)
    with pytest.raises(ConfigError, match=r"memory: rank 0 writing a row group .* give --memory \d+MiB or more"):
        run_parallel(data, nodes=2, algorithm="cd", min_support=2, cluster=InProcess(), output=tmp_path / "x.parquet",
                     memory=16 << 30)
    assert not (tmp_path / "x.parquet").exists()
