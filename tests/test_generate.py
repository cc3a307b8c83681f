"""The IBM Quest generator: statistics against the real T10I4D100K, determinism, partitions,
parameter errors, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import clusterlab
from clusterlab import _core
from clusterlab.data.generate import (
    PRESETS,
    QuestParams,
    generate,
    generate_file,
    parse_name,
    quest_params,
    read_partition_index,
)
from clusterlab.data.io import read_fimi
from clusterlab.errors import ConfigError


def real_t10() -> Path:
    """../shared/data/T10I4D100K.dat seen from the checkout, from a worktree beside it, or from
    $CLUSTERLAB_SHARED_DATA; skip with the reason when absent."""
    env = os.environ.get("CLUSTERLAB_SHARED_DATA")
    candidates = [Path(env) / "T10I4D100K.dat"] if env else []
    candidates += [p / "shared" / "data" / "T10I4D100K.dat" for p in Path(__file__).resolve().parents]
    for c in candidates:
        if c.exists():
            return c
    pytest.skip("T10I4D100K.dat not found in ../shared/data (nor $CLUSTERLAB_SHARED_DATA); "
                "the statistical check compares against the real file")


def frequent_count(baskets, support_percent: float) -> int:
    from fim import fpgrowth

    return len(fpgrowth(baskets.to_lists(), target="s", supp=support_percent, zmin=1, report="a"))


@pytest.mark.slow
def test_statistics_match_the_real_t10i4d100k():
    real = clusterlab.read_baskets(real_t10())
    real_avg = real.stats()["average_length"]
    assert abs(real_avg - 10.1) < 0.01  # the file the targets were taken from
    b = clusterlab.generate("T10I4D100K", items=1000, seed=0)
    s = b.stats()
    assert s["transactions"] == 100_000
    assert abs(s["average_length"] - 10.1) <= 0.03 * 10.1, s["average_length"]
    assert 800 <= s["distinct_items"] <= 900, s["distinct_items"]
    f1 = frequent_count(b, 1)
    assert 330 <= f1 <= 450, f1
    f01 = frequent_count(b, 0.1)
    assert 20_000 <= f01 <= 38_000, f01


def test_files_identical_whatever_the_thread_count(tmp_path):
    a = generate_file(tmp_path / "a.dat", "T10I4D30K", seed=5, threads=1)
    b = generate_file(tmp_path / "b.dat", "T10I4D30K", seed=5, threads=2)
    assert a.bytes == b.bytes == (tmp_path / "a.dat").stat().st_size
    assert (tmp_path / "a.dat").read_bytes() == (tmp_path / "b.dat").read_bytes()
    # The in-memory generator makes the same transactions as the file.
    mem = generate("T10I4D30K", seed=5, threads=2)
    assert mem == read_fimi(tmp_path / "a.dat")
    assert mem == generate("T10I4D30K", seed=5, threads=1)


def test_seed_and_parameters_change_the_output():
    a = generate("T5I2D5K", seed=1)
    assert a != generate("T5I2D5K", seed=2)
    assert a != generate("T5I2D5K", seed=1, correlation=0.1)
    assert a == generate("T5I2D5K", seed=1)


def test_transactions_are_valid_and_sized():
    b = generate("T10I4D20K", items=300, seed=3)
    assert len(b) == 20_000
    assert b.items.max() < 300
    for t in (b[k] for k in range(0, 20_000, 97)):
        assert len(t) >= 1
        assert np.all(np.diff(t.astype(np.int64)) > 0)
    avg = b.items.size / len(b)
    assert 9.5 < avg < 10.7


@settings(max_examples=25, deadline=None)
@given(d=st.integers(0, 9000), t=st.floats(1, 30), i=st.floats(1, 12), n=st.integers(1, 500),
       npat=st.integers(1, 300), corr=st.floats(0, 1), cm=st.floats(0, 1), seed=st.integers(0, 2**64 - 1))
def test_any_valid_parameters_give_valid_baskets(d, t, i, n, npat, corr, cm, seed):
    kw = dict(transactions=d, avg_len=t, avg_pattern_len=i, items=n, patterns=npat, correlation=corr,
              corruption_mean=cm, seed=seed)
    b = generate("T10I4D1K", threads=1, **kw)
    assert len(b) == d
    assert b.items.size == 0 or int(b.items.max()) < n
    diffs = np.diff(b.items.astype(np.int64))
    starts = b.offsets[1:-1]
    inside = np.ones(diffs.size, dtype=bool)
    inside[starts[(starts > 0) & (starts <= diffs.size)] - 1] = False
    assert np.all(diffs[inside] > 0)  # sorted and unique within each transaction
    assert b == generate("T10I4D1K", threads=2, **kw)


def test_patterns_follow_the_model():
    g = quest_params("T10I4D1K", patterns=5000, seed=9).core()
    offsets, items, weights, corruption = g.patterns()
    sizes = np.diff(offsets)
    assert sizes.min() >= 1 and abs(sizes.mean() - 4) < 0.1
    assert abs(weights.sum() - 1) < 1e-9
    assert corruption.min() >= 0 and corruption.max() <= 1 and abs(np.median(corruption) - 0.5) < 0.01
    assert abs(corruption.std() - 0.1) < 0.01


def test_partitions_tile_the_file(tmp_path):
    path = tmp_path / "t.dat"
    r = generate_file(path, "T8I3D10K", seed=2, partitions=3)
    parts = read_partition_index(path)
    assert parts == r.partitions and r.index_path == tmp_path / "t.dat.index.json"
    assert [p["transactions"] for p in parts] == [3333, 3333, 3334]
    assert parts[0]["start"] == 0 and parts[-1]["end"] == path.stat().st_size
    data = path.read_bytes()
    whole = read_fimi(path)
    got = []
    for p in parts:
        assert p["start"] == 0 or data[p["start"] - 1:p["start"]] == b"\n"
        piece = read_fimi(path, p["start"], p["end"])
        assert len(piece) == p["transactions"]
        got.extend(piece.to_lists())
    assert got == whole.to_lists()
    doc = json.loads(r.index_path.read_text())
    assert doc["generator"]["seed"] == 2 and doc["generator"]["name"] == "T8I3D10K"
    # A replaced data file no longer matches its index.
    path.write_text("1 2\n")
    with pytest.raises(ConfigError, match="regenerate"):
        read_partition_index(path)


def test_chunked_file_equals_one_pass(tmp_path):
    """generate_file appends chunks of blocks; a size not a multiple of the block size and
    larger than one chunk still gives the same bytes as the in-memory generator."""
    d = _core.QuestGenerator.block * 64 + 1234
    r = generate_file(tmp_path / "c.dat", "T3I2D1K", transactions=d, seed=4, partitions=2)
    assert read_fimi(r.path) == generate("T3I2D1K", transactions=d, seed=4)
    assert sum(p["transactions"] for p in r.partitions) == d


def test_names_and_presets():
    assert parse_name("T10I4D100K") == {"avg_len": 10.0, "avg_pattern_len": 4.0, "transactions": 100_000}
    assert parse_name("t20.i6.d1m")["transactions"] == 1_000_000
    assert parse_name("T10I4D10MN5KL1K") == {"avg_len": 10.0, "avg_pattern_len": 4.0, "transactions": 10_000_000,
                                             "items": 5000, "patterns": 1000}
    assert parse_name("T2.5I1.5D10")["avg_len"] == 2.5
    p = quest_params("seed000")
    assert (p.transactions, p.items) == (10_000_000, 5000) and p.name == "T15I4D10M"
    assert PRESETS["seed000"]["transactions"] == 10_000_000
    assert QuestParams().name == "T10I4D100K"


@pytest.mark.parametrize("name, msg", [
    ("T10I4", "lacks D"),
    ("I4D100K", "lacks T"),
    ("T10I4D100X", "not of the form"),
    ("T10I4D100K!", "not of the form"),
    ("", "not of the form"),
    ("T10T4D1K", "gives T twice"),
    ("T10I4D1.5K", "D1500"),  # fine: 1.5K = 1500
    ("T10I4D1.5", "whole number"),
    ("T0I4D1K", "avg_len"),
    ("T10I0.5D1K", "avg_pattern_len"),
])
def test_bad_names_are_config_errors(name, msg):
    if msg == "D1500":
        assert parse_name(name)["transactions"] == 1500
        return
    with pytest.raises(ConfigError, match=msg):
        quest_params(name)


@pytest.mark.parametrize("kw, msg", [
    (dict(items=0), "items must be an integer >= 1"),
    (dict(items=-5), "items must be an integer >= 1"),
    (dict(items=2.5), "items must be an integer"),
    (dict(patterns=0), "patterns must be an integer >= 1"),
    (dict(transactions=-1), "transactions must be an integer >= 0"),
    (dict(seed=-1), "seed must be an integer >= 0"),
    (dict(correlation=1.5), "correlation must be in 0..1"),
    (dict(corruption_mean=-0.1), "corruption_mean must be in 0..1"),
    (dict(avg_len=float("nan")), "avg_len must be a finite number"),
    (dict(avg_len="ten"), "avg_len must be a number"),
    (dict(threads=0), "threads must be an integer >= 1"),
])
def test_bad_parameters_are_config_errors(kw, msg):
    with pytest.raises(ConfigError, match=msg):
        generate("T10I4D1K", **kw)


def test_unknown_parameter_is_named():
    with pytest.raises(ConfigError, match="unknown generator parameter 'bogus'"):
        quest_params("T10I4D1K", bogus=1)


def test_bad_partitions(tmp_path):
    for bad in (0, -1, 2000, 1.5):
        with pytest.raises(ConfigError, match="partitions must be"):
            generate_file(tmp_path / "x.dat", "T5I2D1K", partitions=bad)
    assert not (tmp_path / "x.dat").exists()


def test_failed_write_leaves_nothing(tmp_path):
    (tmp_path / "blocker").write_text("a file where a directory should be")
    with pytest.raises(OSError):
        generate_file(tmp_path / "blocker" / "x.dat", "T5I2D1K")
    assert sorted(os.listdir(tmp_path)) == ["blocker"]


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "clusterlab", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def test_cli_writes_the_workload_and_a_summary(tmp_path):
    r = _cli("gen", "T5I2D3K", "--items", "200", "-o", "w.dat", "--seed", "3", "--threads", "2",
             "--partitions", "2", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "w.dat: T5I2D3K N=200 L=2000 seed=3: 3,000 transactions" in r.stdout
    assert read_fimi(tmp_path / "w.dat") == generate("T5I2D3K", items=200, seed=3)
    assert len(read_partition_index(tmp_path / "w.dat")) == 2
    r = _cli("gen", "T5I2D1K", cwd=tmp_path)  # default output name
    assert r.returncode == 0 and (tmp_path / "T5I2D1K.dat").exists()


@pytest.mark.parametrize("args, msg", [
    (("gen", "T10I4"), "lacks D"),
    (("gen",), "give a workload NAME"),
    (("gen", "T10I4D1K", "--preset", "seed000"), "either a workload NAME or --preset"),
    (("gen", "T10I4D1K", "--items", "0"), "items must be"),
    (("gen", "T10I4D1K", "--threads", "0"), "threads must be"),
])
def test_cli_errors_are_one_line(tmp_path, args, msg):
    r = _cli(*args, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert msg in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0
