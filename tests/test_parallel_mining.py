"""Parallel miners (HPA, HPA-ELD, Count Distribution, PFP) give exactly the sequential result,
whatever the node count and backend."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterlab import _core
from clusterlab.cluster import InProcess, Local, Mpirun
from clusterlab.data import read_baskets
from clusterlab.errors import BasketFormatError, ConfigError
from clusterlab.mining import mine
from clusterlab.mining.parallel import ALGORITHMS, ParallelConfig, min_count_of, mine_parallel
from clusterlab.mining.result import table_info

from .conftest import shared


def write(tmp_path, txs, name="b.dat"):
    p = tmp_path / name
    p.write_text("".join(" ".join(map(str, t)) + "\n" for t in txs))
    return p


def sequential(path, min_support):
    """The sequential engine's itemsets (Rust FP-growth, one thread) as {itemset: count}."""
    b = read_baskets(path)
    mc = min_count_of(min_support, len(b))
    o, i, c = _core.mine_itemsets(b.offsets, b.items, mc, "fpgrowth", threads=1)
    return {tuple(i[o[k]:o[k + 1]].tolist()): int(c[k]) for k in range(c.size)}


def brute(txs, min_count):
    cnt = Counter()
    for t in txs:
        s = sorted(set(t))
        for r in range(1, len(s) + 1):
            cnt.update(itertools.combinations(s, r))
    return {k: v for k, v in cnt.items() if v >= min_count}


def as_dict(table):
    return {tuple(r["items"]): r["count"] for r in table.to_pylist()}


def canonical(table):
    rows = [tuple(r) for r in table.column("items").to_pylist()]
    return rows == sorted(rows, key=lambda s: (len(s), s))


@pytest.fixture(scope="module")
def t10(tmp_path_factory):
    """A T10I4 Quest workload of 20,000 transactions over 500 items (generated, seed 7)."""
    from clusterlab.data.generate import generate_file

    p = tmp_path_factory.mktemp("t10") / "t10i4_20k.dat"
    generate_file(p, "T10I4D100K", transactions=20000, items=500, seed=7)
    return p


def test_real_t10i4d100k_at_one_percent():
    """385 frequent itemsets at 1% (the figure in ../shared/data/README.md)."""
    table, _ = mine_parallel(shared("T10I4D100K.dat"), nodes=2, algorithm="hpa", min_support=0.01,
                             cluster=InProcess())
    assert table.num_rows == 385


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("nodes", [1, 2, 3, 4, 5])
def test_equal_to_sequential_inproc(t10, algorithm, nodes):
    table, passes = mine_parallel(t10, nodes=nodes, algorithm=algorithm, min_support=0.005, cluster=InProcess(),
                                  config=ParallelConfig(block_bytes=512, read_block_bytes=4096))
    want = sequential(t10, 0.005)
    assert as_dict(table) == want
    assert canonical(table)
    assert table_info(table)["n_transactions"] == 20000
    assert passes[0]["pass"] == 1 and passes[0]["large"] == sum(1 for k in want if len(k) == 1)


def same_as_sequential(table, seq):
    """Columns byte-identical to clusterlab.mine's; metadata equal but for the algorithm name."""
    assert table.schema.remove_metadata() == seq.schema.remove_metadata()
    assert table.equals(seq.replace_schema_metadata(table.schema.metadata))
    a, b = table_info(table), table_info(seq)
    a.pop("algorithm"), b.pop("algorithm")
    assert a == b


def test_same_bytes_as_clusterlab_mine_for_every_node_count(t10):
    seq = mine(t10, min_support=0.01, threads=1)
    for alg in ALGORITHMS:
        for n in (1, 2, 3):
            t, _ = mine_parallel(t10, nodes=n, algorithm=alg, min_support=0.01, cluster=InProcess())
            same_as_sequential(t, seq)


def test_hpa_traffic_is_blocked_and_counted(t10):
    _, passes = mine_parallel(t10, nodes=3, algorithm="hpa", min_support=0.005, cluster=InProcess(),
                              config=ParallelConfig(block_bytes=1024, partition="itemset", local_pairs=False))
    p2 = passes[1]
    assert p2["pass"] == 2 and p2["candidates"] > 0
    assert p2["itemsets_sent"] > 0
    # Every block is at most 1 KB, so at least this many messages went out.
    assert p2["messages_sent"] >= p2["itemsets_sent"] * 4 // 1024  # pairs of 2-byte ranks, 1 KB blocks
    assert p2["bytes_sent"] >= p2["itemsets_sent"] * 4


def test_hpa_itemset_blocks_over_tcp_same_as_in_process(t10):
    """Seed 000's scheme over the TCP mesh (blocks sent by ``send_many``, received by
    ``recv_many`` and counted in batches) gives the same bytes and routes the same itemsets
    as the in-process run (one call per block)."""
    config = ParallelConfig(block_bytes=256, read_block_bytes=4096, partition="itemset", local_pairs=False)
    t_in, p_in = mine_parallel(t10, nodes=2, algorithm="hpa", min_support=0.005, cluster=InProcess(), config=config)
    t_tcp, p_tcp = mine_parallel(t10, nodes=2, algorithm="hpa", min_support=0.005, cluster=Local(), config=config)
    assert t_tcp.equals(t_in)
    assert [p["itemsets_sent"] for p in p_tcp] == [p["itemsets_sent"] for p in p_in]
    # Every block went as its own message (pairs of 2-byte ranks, 256-byte blocks).
    assert p_tcp[1]["messages_sent"] >= p_tcp[1]["itemsets_sent"] * 4 // 256 > 100
    # ... but from one communicator call per read block, not one per block.
    assert 0 < p_tcp[1]["send_calls"] * 4 < p_tcp[1]["messages_sent"]
    assert [p["send_calls"] for p in p_tcp] == [p["send_calls"] for p in p_in]


def test_node_without_transactions_and_pass_without_candidates(tmp_path):
    # Two lines for five nodes: three ranks read nothing. Pass 3 has a single candidate, so
    # at least four of five ranks own no candidate in it.
    txs = [[1, 2, 3, 9], [1, 2, 3]]
    p = write(tmp_path, txs)
    for alg in ALGORITHMS:
        table, passes = mine_parallel(p, nodes=5, algorithm=alg, min_support=2, cluster=InProcess())
        assert as_dict(table) == brute(txs, 2), alg
    _, passes = mine_parallel(p, nodes=5, algorithm="hpa", min_support=2, cluster=InProcess())
    assert [(s["pass"], s["candidates"], s["large"]) for s in passes] == [(1, 4, 3), (2, 3, 3), (3, 1, 1)]


def test_empty_and_nothing_frequent(tmp_path):
    p = write(tmp_path, [[1], [2], [3]])
    for alg in ALGORITHMS:
        table, _ = mine_parallel(p, nodes=2, algorithm=alg, min_support=2, cluster=InProcess())
        assert table.num_rows == 0
    e = tmp_path / "empty.dat"
    e.write_text("")
    table, _ = mine_parallel(e, nodes=3, algorithm="hpa", min_support=0.5, cluster=InProcess())
    assert table.num_rows == 0


def test_partition_files(tmp_path):
    txs = [[1, 2], [1, 2, 3], [2, 3], [1, 3], [1, 2, 3]]
    write(tmp_path, txs[:2], "part0.dat")
    write(tmp_path, txs[2:], "part1.dat")
    table, _ = mine_parallel(str(tmp_path / "part{rank}.dat"), nodes=2, algorithm="hpa", min_support=2,
                             cluster=InProcess())
    assert as_dict(table) == brute(txs, 2)


def test_max_len_and_eld_budget(t10):
    want = {k: v for k, v in sequential(t10, 0.005).items() if len(k) <= 2}
    for alg in ALGORITHMS:
        t, _ = mine_parallel(t10, nodes=2, algorithm=alg, min_support=0.005, cluster=InProcess(),
                             config=ParallelConfig(max_len=2))
        assert as_dict(t) == want, alg
    # Every candidate replicated (huge budget) and none (zero budget) agree.
    a, _ = mine_parallel(t10, nodes=3, algorithm="hpa-eld", min_support=0.005, cluster=InProcess(),
                         config=ParallelConfig(eld_max=10**9))
    b, _ = mine_parallel(t10, nodes=3, algorithm="hpa-eld", min_support=0.005, cluster=InProcess(),
                         config=ParallelConfig(eld_max=0))
    assert a.equals(b)


def test_bad_input_and_settings(tmp_path):
    bad = tmp_path / "bad.dat"
    bad.write_text("1 2\n3 x\n")
    with pytest.raises(BasketFormatError, match="bad.dat:2:3"):
        mine_parallel(bad, nodes=1, algorithm="hpa", min_support=1, cluster=InProcess())
    with pytest.raises(ConfigError, match="unknown parallel algorithm"):
        mine_parallel(bad, nodes=1, algorithm="nope", min_support=1, cluster=InProcess())
    with pytest.raises(ConfigError, match="block_bytes"):
        mine_parallel(bad, nodes=1, min_support=1, cluster=InProcess(), config=ParallelConfig(block_bytes=4))
    with pytest.raises(ConfigError, match="no such file"):
        mine_parallel(tmp_path / "missing.dat", nodes=2, min_support=1, cluster=InProcess())
    with pytest.raises(ConfigError, match="min_support"):
        min_count_of(1.5, 10)
    with pytest.raises(ConfigError, match="min_support"):
        mine_parallel(write(tmp_path, [[1, 2]], "ok.dat"), nodes=2, min_support=-1, cluster=InProcess())


@pytest.mark.parametrize("nodes", [2, 3, 4])
def test_prefix_and_itemset_partitions_agree_and_prefix_sends_less(t10, nodes):
    want = sequential(t10, 0.005)
    sent = {}
    for part in ("prefix", "itemset"):
        table, passes = mine_parallel(t10, nodes=nodes, algorithm="hpa", min_support=0.005, cluster=InProcess(),
                                      config=ParallelConfig(block_bytes=512, read_block_bytes=4096, partition=part,
                                                            local_pairs=False))
        assert as_dict(table) == want
        sent[part] = sum(p["bytes_sent"] for p in passes[1:])
    assert 0 < sent["prefix"] < sent["itemset"] / 2
    with pytest.raises(ConfigError, match="partition"):
        mine_parallel(t10, nodes=2, min_support=0.01, cluster=InProcess(), config=ParallelConfig(partition="hash"))


@pytest.mark.parametrize("algorithm", ["hpa", "cd"])
def test_local_pairs_and_counting_modes_agree_and_pass_2_ships_no_pair(t10, algorithm):
    """Pass 2 counted on every rank and all-reduced (default) equals shipping every pair, and
    sends a fixed triangle of counts instead of pairs; CD's tid-lists equal its trie walk."""
    want = sequential(t10, 0.005)
    runs = {}
    for local in (True, False):
        for counting in ("tidlist", "trie"):
            table, passes = mine_parallel(t10, nodes=3, algorithm=algorithm, min_support=0.005, cluster=InProcess(),
                                          config=ParallelConfig(local_pairs=local, counting=counting))
            assert as_dict(table) == want, (local, counting)
            runs[local, counting] = passes
    p2 = runs[True, "tidlist"][1]
    assert p2["pass"] == 2 and p2["itemsets_sent"] == 0 and p2["candidates"] == p2["ranks"][0]["candidates"]
    if algorithm == "hpa":
        assert runs[False, "trie"][1]["itemsets_sent"] > 0
    with pytest.raises(ConfigError, match="counting"):
        ParallelConfig(counting="bitset").check()


def test_pfp_kernels_agree(t10):
    """PFP's local mining: tid-lists (default, the fastest) = FP-tree = the sequential FP-growth."""
    want = sequential(t10, 0.005)
    for kernel in ("vertical", "fptree", "fpgrowth"):
        for nodes in (1, 3):
            table, _ = mine_parallel(t10, nodes=nodes, algorithm="pfp", min_support=0.005, cluster=InProcess(),
                                     config=ParallelConfig(pfp_kernel=kernel))
            assert as_dict(table) == want and canonical(table), (kernel, nodes)
    with pytest.raises(ConfigError, match="pfp_kernel"):
        ParallelConfig(pfp_kernel="magic").check()


def test_pair_and_tidlist_kernels_reject_bad_input():
    with pytest.raises(ValueError, match="below n"):
        _core.count_pairs(np.array([0, 2], np.int64), np.array([0, 5], np.uint32), 3)
    with pytest.raises(ValueError, match="ascending"):
        _core.count_pairs(np.array([0, 2], np.int64), np.array([2, 1], np.uint32), 3)
    lists = _core.TidLists.of_items(np.array([0, 2], np.int64), np.array([0, 1], np.uint32), np.ones(2, bool))
    with pytest.raises(ValueError, match="no list"):
        lists.extend(np.array([0, 7], np.uint32))
    assert lists.extend(np.array([0, 1], np.uint32)).counts().tolist() == [1]


def test_prefix_owners_reject_malformed_records():
    prev = np.arange(3, dtype=np.uint32)
    owners = np.array([0, 1, 0], dtype=np.uint32)
    own = _core.hpa_prefix_candidates(prev, 1, owners, 0)
    assert own.tolist() == [0, 1, 0, 2]
    table = _core.CandidateTable(2, own, 3)
    r = _core.HpaRouter(2, 2, 0, prev, table, None, 64, True, 4, owners)
    for bad in ([3, 0, 1], [2, 1, 0], [2, 0, 7], [0]):
        with pytest.raises(ValueError, match="record"):
            r.count_records(np.array(bad, dtype=np.uint32).tobytes())
    with pytest.raises(ValueError, match="whole number"):
        r.count_records(b"\x00" * 5)
    r.count_records(np.array([3, 0, 1, 2, 2, 1, 2], dtype=np.uint32).tobytes())
    assert r.local_counts().tolist() == [1, 1]


def test_owner_rejects_malformed_blocks():
    table = _core.CandidateTable(2, np.array([0, 1, 0, 2], dtype=np.uint32))
    with pytest.raises(ValueError, match="whole number"):
        table.count_block(b"\x00" * 12)
    assert table.count_block(np.array([0, 2, 0, 2, 5, 6], dtype=np.uint32).tobytes()) == 1
    assert table.counts().tolist() == [0, 2]


def test_owner_hash_is_the_documented_one():
    # hpa/hash.rs: h = 0x243F6A8885A308D3 ^ len; h = (h ^ x) * 0x9E3779B97F4A7C15; h ^= h >> 29
    def h(items):
        v = 0x243F6A8885A308D3 ^ len(items)
        for x in items:
            v = ((v ^ x) * 0x9E3779B97F4A7C15) & (2**64 - 1)
            v ^= v >> 29
        return v
    for items in ([1, 2], [0, 5, 9], [7]):
        for parts in (1, 2, 5):
            assert _core.hpa_owner(items, parts) == ((h(items) >> 32) * parts) >> 32


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(txs=st.lists(st.lists(st.integers(0, 9), max_size=7), max_size=25),
       nodes=st.integers(1, 4), algorithm=st.sampled_from(ALGORITHMS), min_count=st.integers(1, 4),
       partition=st.sampled_from(["prefix", "itemset"]))
def test_hypothesis_equals_brute_force(tmp_path, txs, nodes, algorithm, min_count, partition):
    p = write(tmp_path, txs, f"h{nodes}{algorithm}.dat")
    table, _ = mine_parallel(p, nodes=nodes, algorithm=algorithm, min_support=min_count, cluster=InProcess(),
                             config=ParallelConfig(block_bytes=16, read_block_bytes=64, eld_max=5,
                                                   partition=partition))
    assert as_dict(table) == brute(txs, min_count)
    assert canonical(table)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_tcp_backend_equals_sequential(t10, algorithm):
    seq = mine(t10, min_support=0.01, threads=1)
    t, passes = mine_parallel(t10, nodes=3, algorithm=algorithm, min_support=0.01, cluster=Local())
    same_as_sequential(t, seq)
    assert passes[-1]["pass"] >= 2


@pytest.mark.parametrize("algorithm", ["hpa", "pfp"])
def test_mpi_backend_equals_sequential(t10, algorithm):
    pytest.importorskip("mpi4py")
    seq = mine(t10, min_support=0.01, threads=1)
    t, _ = mine_parallel(t10, nodes=2, algorithm=algorithm, min_support=0.01, cluster=Mpirun())
    same_as_sequential(t, seq)


def test_runs_as_a_program_under_mpiexec(t10, tmp_path):
    """``mpiexec -n 2 clusterlab mine FILE -a hpa-eld``: each rank joins world(), they mine
    together, rank 0 writes the result (the module's own argparse entry point is gone: the
    command is the one way to run it as a program)."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    import pyarrow.parquet as pq

    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
    if mpiexec is None:
        pytest.skip("mpiexec not installed (pip extra clusterlab[mpi])")
    out = tmp_path / "o.parquet"
    r = subprocess.run([mpiexec, "-n", "2", sys.executable, "-m", "clusterlab", "mine", str(t10),
                        "--algorithm", "hpa-eld", "--min-support", "0.01", "-o", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "x2 (launched)" in r.stdout
    same_as_sequential(pq.read_table(out), mine(t10, min_support=0.01, threads=1))


def test_time_of_every_pass_and_rank_is_attributed(t10):
    """Wall time split into computation, transfer and RTO waits, per pass and per rank, from
    the rank's own clock (and TCP_INFO for the RTO part)."""
    from clusterlab.mining.parallel import run_parallel

    r = run_parallel(t10, nodes=3, algorithm="hpa", min_support=0.01, cluster=Local(),
                     config=ParallelConfig(partition="itemset", local_pairs=False))
    assert len(r.passes) >= 3
    for p in r.passes:
        assert [x["rank"] for x in p["ranks"]] == [0, 1, 2]
        for x in p["ranks"]:
            assert x["t_compute"] >= 0 and x["t_comm"] >= 0 and x["t_transfer"] >= 0
            assert x["t_compute"] + x["t_comm"] == pytest.approx(x["t_total"], abs=1e-9)
            assert 0 <= x["t_rto"] <= x["t_comm"] + 1e-12
        assert p["t_compute"] == max(x["t_compute"] for x in p["ranks"])
        assert isinstance(p["cpu_bound"], bool) and p["cpu_cores_busy"] >= 0
    assert sum(x["t_comm"] for p in r.passes for x in p["ranks"]) > 0
    assert sum(x["t_compute"] for p in r.passes for x in p["ranks"]) > 0


def test_rto_waits_are_the_longest_stall_a_rank_sees():
    from clusterlab.mining.parallel.passes import attribute_time

    # Rank 0's connection to rank 2 stalled 300 ms: rank 2 (receiving) and rank 0 (sending)
    # waited at most that long, never longer than they spent communicating; rank 1 did not.
    peer = np.zeros((3, 3))
    peer[0, 2] = 300.0
    t_rto = attribute_time(np.ones(3), np.array([0.5, 0.5, 0.2]), peer)
    assert t_rto.tolist() == [0.3, 0.0, 0.2]


@pytest.mark.parametrize("algorithm, config", [
    ("hpa", ParallelConfig(partition="itemset", local_pairs=False, block_bytes=1024)),
    ("cd", ParallelConfig()),
    ("pfp", ParallelConfig()),
])
def test_replay_sends_the_same_bytes_per_pass_as_the_real_run(t10, tmp_path, algorithm, config):
    """Compute replay on loopback: the same messages per pass, waiting instead of computing."""
    import json

    from clusterlab.mining.parallel import replay_parallel, run_parallel

    rec = tmp_path / "rec"
    real = run_parallel(t10, nodes=3, algorithm=algorithm, min_support=0.01, cluster=Local(), config=config, record=rec)
    assert sorted(p.name for p in rec.iterdir()) == ["job.json", "rank0.json", "rank1.json", "rank2.json"]
    assert json.loads((rec / "job.json").read_text())["nodes"] == 3
    for compute, scale in (("wall", 1.0), ("cpu", 0.5)):
        rp = replay_parallel(rec, Local(), compute=compute, scale=scale)
        assert [p["pass"] for p in rp.passes] == [p["pass"] for p in real.passes]
        assert [p["bytes_sent"] for p in rp.passes] == [p["bytes_sent"] for p in real.passes]
        assert [p["messages_sent"] for p in rp.passes] == [p["messages_sent"] for p in real.passes]
        assert [[x["bytes_sent"] for x in p["ranks"]] for p in rp.passes] == \
            [[x["bytes_sent"] for x in p["ranks"]] for p in real.passes]
        assert rp.job_s > 0 and rp.compute == compute


def test_replay_refuses_what_it_cannot_replay(tmp_path, t10):
    from clusterlab.comm.inproc import run_threads
    from clusterlab.mining.parallel import replay_parallel, run_parallel
    from clusterlab.mining.parallel.trace import replay_rank

    with pytest.raises(ConfigError, match="no recorded trace"):
        replay_parallel(tmp_path / "nothing")
    rec = tmp_path / "rec"
    run_parallel(t10, nodes=2, algorithm="cd", min_support=0.02, cluster=InProcess(), record=rec)
    with pytest.raises(ConfigError, match="compute"):
        replay_parallel(rec, compute="guess")
    with pytest.raises(ConfigError, match="recorded on 2 ranks"):
        run_threads(lambda c: replay_rank(c, rec), 3)
    (rec / "rank1.json").write_text("{")
    with pytest.raises(ConfigError, match="not a readable trace"):
        replay_parallel(rec, cluster=InProcess())


def test_a_replays_timeout_leaves_room_for_the_computation_it_waits(tmp_path, t10, monkeypatch):
    """The default timeout of a replay is 300 s plus twice the longest computation a rank waits
    (its gaps times the scales): a 100x slower CPU, dilated, must not time out where the job is
    merely long."""
    import json

    from clusterlab.mining.parallel import replay_parallel, run_parallel
    from clusterlab.mining.parallel.trace import compute_owed

    rec = tmp_path / "rec"
    run_parallel(t10, nodes=2, algorithm="cd", min_support=0.02, cluster=InProcess(), record=rec)
    gaps = [sum(e[2] for e in json.loads((rec / f"rank{r}.json").read_text())["events"] if e[0] == "gap")
            for r in range(2)]
    assert compute_owed(rec, "cpu") == pytest.approx(max(gaps))
    assert compute_owed(rec, "cpu", 1e6, 1e6) == pytest.approx(1e6 * max(gaps)) and max(gaps) > 0
    seen = {}

    def run(self, fn, n, *args, timeout=None, **kw):
        seen["timeout"], seen["wait_s"] = timeout, args[-1]
        raise RuntimeError("stop")

    monkeypatch.setattr(InProcess, "run", run)
    with pytest.raises(RuntimeError, match="stop"):
        replay_parallel(rec, cluster=InProcess(), compute="cpu", scale=1e6)
    assert seen["timeout"] == pytest.approx(300.0 + 2.0 * compute_owed(rec, "cpu", 1e6))
    assert seen["wait_s"] == pytest.approx(compute_owed(rec, "cpu", 1e6))
    with pytest.raises(RuntimeError, match="stop"):
        replay_parallel(rec, cluster=InProcess(), compute="cpu", scale=1e6, timeout=5.0)
    assert seen["timeout"] == 5.0
    # each rank's receives wait as long as a peer's scaled computation may take
    from clusterlab.comm.inproc import run_threads
    from clusterlab.mining.parallel.trace import replay_rank

    assert run_threads(lambda c: (replay_rank(c, rec, "cpu", 1.0, None, 1000.0), c.default_timeout)[1], 2) == [2060.0] * 2


@pytest.mark.parametrize("spread", [1, 1000, 1 << 20])
def test_item_counts_dense_and_sparse_agree(spread):
    """Pass 1's two ways (a dense count vector all-reduced, or each rank's (id, count) lists
    all-gathered) give the same counts; which one runs follows the ids' density: dense ids take
    the all-reduce, sparse ones (1000 or 2^20 apart) the all-gather."""
    from clusterlab.comm.inproc import run_threads
    from clusterlab.mining.parallel.passes import global_item_counts

    rng = np.random.default_rng(7)
    items = [np.sort(rng.choice(60, size=40, replace=False)).astype(np.uint32) * spread for _ in range(3)]
    want = Counter(int(x) for a in items for x in a)

    class Counting:
        def __init__(self, comm):
            self.comm, self.calls = comm, Counter()

        def __getattr__(self, name):
            attr = getattr(self.comm, name)
            if callable(attr):
                def call(*a, **k):
                    self.calls[name] += 1
                    return attr(*a, **k)
                return call
            return attr

    def job(comm):
        c = Counting(comm)
        ids, counts = global_item_counts(c, items[comm.rank], n_tx=100)
        return dict(zip(ids.tolist(), counts.tolist(), strict=True)), counts.dtype, dict(c.calls)

    for got, dtype, calls in run_threads(job, 3):
        assert got == dict(want) and dtype == np.uint64
        assert ("allgather" in calls) == (spread > 1), calls
