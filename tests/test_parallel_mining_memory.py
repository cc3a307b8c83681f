"""What a parallel rank reads and holds: only its own share of the file, read slice by slice
into one CSR, reduced in place by pass 1 (a rank's peak memory was three times its share)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterlab.cluster import InProcess, Local
from clusterlab.comm.inproc import run_threads
from clusterlab.data import Baskets, read_partition
from clusterlab.data.io import read_fimi
from clusterlab.errors import BasketFormatError
from clusterlab.mining.parallel import ParallelConfig, mine_parallel, run_parallel
from clusterlab.mining.parallel.driver import read_rank_baskets
from clusterlab.mining.parallel.passes import PassStats, first_pass
from clusterlab.mining.parallel.reading import OwnedBaskets, read_fimi_compact

from .test_parallel_mining import as_dict, sequential, write

lines = st.lists(st.lists(st.integers(0, 40), max_size=9), min_size=0, max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(txs=lines, size=st.integers(1, 4), slice_bytes=st.integers(1, 64), blank=st.booleans())
def test_slices_read_exactly_the_ranges_lines(tmp_path, txs, size, slice_bytes, blank):
    """Slices tile the range's lines as one range read does (long lines, blank lines, duplicates)."""
    p = tmp_path / "s.dat"
    text = "".join(" ".join(map(str, t)) + ("\n\n" if blank and i % 3 == 0 else "\n") for i, t in enumerate(txs))
    p.write_text(text)
    n = len(text.encode())
    for r in range(size):
        lo, hi = n * r // size, n * (r + 1) // size
        want, got = read_fimi(p, lo, hi), read_fimi_compact(p, lo, hi, slice_bytes)
        assert got.to_lists() == want.to_lists()
        assert got.duplicates_dropped == want.duplicates_dropped
        assert got.offsets.dtype == np.int64 and got.items.dtype == np.uint32


def test_rank_share_follows_the_partition_index(tmp_path):
    """With `gen --partitions` P's index, P ranks read its ranges (equal transaction counts)."""
    from clusterlab.data.generate import generate_file

    p = tmp_path / "g.dat"
    generate_file(p, "T10I4D100K", transactions=3000, items=200, seed=3, partitions=3)
    for r in range(3):
        got = read_rank_baskets(p, r, 3)
        assert got.to_lists() == read_partition(p, r, 3).to_lists()
        assert len(got) == 1000


def test_a_rank_never_parses_before_its_start_and_errors_name_the_files_line(tmp_path):
    p = tmp_path / "bad.dat"
    head = "1 2\n" * 50 + "x y\n" + "3 4\n" * 49  # a bad line in rank 0's half only
    tail = "5 6\n" * 60 + "7 -8\n" + "9\n" * 39
    p.write_text(head + tail)
    start = len(head)
    ok = tmp_path / "ok.dat"
    ok.write_text(head + "5 6\n" * 100)  # both halves 400 bytes: rank 1 starts at line 101
    assert read_rank_baskets(ok, 1, 2).to_lists() == [[5, 6]] * 100  # never reads rank 0's bad line
    with pytest.raises(BasketFormatError) as e:
        read_fimi_compact(p, start, start + len(tail), slice_bytes=16)
    assert ":161:" in str(e.value) and "negative" in str(e.value)  # the file's own line 161
    with pytest.raises(BasketFormatError) as e:
        read_rank_baskets(ok, 0, 2)
    assert ":51:" in str(e.value)


def test_pass_one_reduces_a_ranks_own_share_in_place(tmp_path):
    """Same frequent items and reduced transactions as the copying reduction; the rank's
    own arrays are taken (no second copy), a caller's Baskets are never modified."""
    rng = np.random.default_rng(5)
    txs = [sorted(set(rng.integers(0, 30, rng.integers(0, 12)).tolist())) for _ in range(500)]
    p = write(tmp_path, txs)
    n = p.stat().st_size

    def job(comm, baskets):
        fp = first_pass(comm, baskets, 0.05, PassStats(comm))
        return fp.items.tolist(), fp.counts.tolist(), fp.offsets.tolist(), fp.ranks.tolist(), fp.ranks.base is None

    given_b = Baskets.from_lists(txs)
    before = given_b.items.copy()
    copied = run_threads(lambda c: job(c, given_b), 1)[0]
    assert np.array_equal(given_b.items, before)  # a caller's baskets are left alone
    owned = read_fimi_compact(p, 0, n)
    assert isinstance(owned, OwnedBaskets)
    in_place = run_threads(lambda c: job(c, owned), 1)[0]
    assert in_place[:4] == copied[:4]
    assert in_place[4]  # its own buffer, shrunk: not a view pinning the input's
    assert owned.items.size == 0 and len(owned) == 0  # handed over


@pytest.mark.parametrize("algorithm", ["hpa", "cd", "pfp", "hpa-eld"])
def test_results_unchanged_with_tiny_read_slices(tmp_path, monkeypatch, algorithm):
    """Slices of a few bytes (a line across many slices) give the sequential result."""
    from clusterlab.mining.parallel import reading

    monkeypatch.setattr(reading, "SLICE_BYTES", 7)
    rng = np.random.default_rng(11)
    txs = [sorted(set(rng.integers(0, 25, rng.integers(1, 15)).tolist())) for _ in range(400)]
    p = write(tmp_path, txs)
    table, _ = mine_parallel(p, nodes=3, algorithm=algorithm, min_support=0.04, cluster=InProcess(),
                             config=ParallelConfig(block_bytes=64, read_block_bytes=256))
    assert as_dict(table) == sequential(p, 0.04)


@pytest.mark.parametrize("prune", [True, False])
def test_itemset_partition_with_and_without_the_senders_prune(tmp_path, prune):
    """Seed 000's scheme (every pass shipped, or pass 2 local) with the prune at the sender
    applied only to subsets that leave the rank: still the sequential result."""
    rng = np.random.default_rng(2)
    txs = [sorted(set(rng.integers(0, 20, rng.integers(2, 12)).tolist())) for _ in range(600)]
    p = write(tmp_path, txs)
    want = sequential(p, 0.05)
    for local_pairs in (True, False):
        cfg = ParallelConfig(partition="itemset", local_pairs=local_pairs, prune=prune, block_bytes=32)
        for nodes in (2, 3):
            table, passes = mine_parallel(p, nodes=nodes, algorithm="hpa", min_support=0.05, cluster=InProcess(),
                                          config=cfg)
            assert as_dict(table) == want
            assert sum(x["bytes_sent"] for x in passes[2:]) > 0 or len(passes) <= 2


def test_a_ranks_peak_memory_stays_near_its_share(tmp_path):
    """Peak over a tiny job's peak stays under 2x the rank's CSR share (it was ~3x: the mapped
    range plus the parse's join copy plus pass 1's reduced copy)."""
    from clusterlab.data.generate import generate_file

    big = tmp_path / "big.dat"
    generate_file(big, "seed000", transactions=600_000, seed=1)
    tiny = write(tmp_path, [[1, 2], [1, 2, 3]] * 10, "tiny.dat")
    base = run_parallel(tiny, nodes=1, algorithm="cd", min_support=0.5, cluster=Local()).ranks[0]["peak_rss_bytes"]
    r = run_parallel(big, nodes=1, algorithm="cd", min_support=0.01, cluster=Local()).ranks[0]
    assert r["csr_bytes"] > 30 * 2**20
    assert r["peak_rss_bytes"] - base < 2.0 * r["csr_bytes"], (r, base)


def test_a_missing_rank_file_is_one_error_line(tmp_path):
    """A rank's own file that vanished after the launcher's check: the error names it."""
    with pytest.raises(BasketFormatError, match=r"part1.dat:0:0: no such file"):
        read_rank_baskets(tmp_path / "part{rank}.dat", 1, 2)
    p = write(tmp_path, [[1, 2], [2, 3]], "part0.dat")
    assert read_rank_baskets(tmp_path / "part{rank}.dat", 0, 2).to_lists() == read_fimi(p).to_lists()
