"""Basket I/O: formats, conventions for odd input, and clear errors for bad input."""

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import clusterlab
from clusterlab import BasketFormatError, Baskets, read_baskets, write_baskets
from clusterlab.data import byte_ranges, read_partition

from .conftest import shared


def write(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


# --- documented conventions ------------------------------------------------------------

def test_conventions(tmp_path):
    p = write(tmp_path, "odd.dat", b"3 1 3 2\n\n4\t5   \r\n7")
    b = read_baskets(p)
    assert b.to_lists() == [[1, 2, 3], [], [4, 5], [7]]  # sorted, dedup'd, empty line kept
    assert b.duplicates_dropped == 1
    assert len(read_baskets(write(tmp_path, "empty.dat", b""))) == 0
    assert read_baskets(write(tmp_path, "nofinal.dat", b"1 2\n3")).to_lists() == [[1, 2], [3]]
    assert read_baskets(write(tmp_path, "trail.dat", b"1 2\n   ")).to_lists() == [[1, 2]]


# --- bad input: file, line, column, what ---------------------------------------------

@pytest.mark.parametrize("data, line, col, what", [
    (b"1 2\n3 abc\n", 2, 3, "not an integer"),
    (b"1 2\n3 -4\n", 2, 3, "negative"),
    (b"1\n4294967296\n", 2, 1, "larger than 4294967295"),
    (b"1 2\n\x00\x01\xff\n", 2, 1, "0x00"),
    (b"1 2\n5 3.5\n", 2, 4, "'.'"),
    (b"1 2\r3\n", 1, 4, "carriage return"),
])
def test_fimi_errors(tmp_path, data, line, col, what):
    p = write(tmp_path, "bad.dat", data)
    with pytest.raises(BasketFormatError) as ei:
        read_baskets(p)
    e = ei.value
    assert (e.path, e.line, e.column) == (str(p), line, col)
    assert what in e.message
    assert str(e).startswith(f"{p}:{line}:{col}:")


def test_binary_garbage(tmp_path):
    p = write(tmp_path, "garbage.dat", bytes(range(256)) * 50)
    with pytest.raises(BasketFormatError, match="garbage.dat:1:1"):
        read_baskets(p)


def test_missing_file(tmp_path):
    with pytest.raises(BasketFormatError, match="no such file"):
        read_baskets(tmp_path / "nope.dat")


@pytest.mark.parametrize("data, line, col, what", [
    (b"transaction_id,item\n1,milk\n2,\xff\xfe\n", 3, 2, "not UTF-8"),
    (b"tid,item\n1,milk\n", 1, 1, "missing column 'transaction_id'"),
    (b"transaction_id,item\n1,milk\n2\n", 3, 2, "expected at least 2"),
    (b"", 1, 1, "header"),
])
def test_csv_errors(tmp_path, data, line, col, what):
    p = write(tmp_path, "bad.csv", data)
    with pytest.raises(BasketFormatError) as ei:
        read_baskets(p)
    assert (ei.value.line, ei.value.column) == (line, col)
    assert what in ei.value.message


def test_cli_error_is_one_line(tmp_path):
    p = write(tmp_path, "bad.dat", b"1 2\n3 x\n")
    r = subprocess.run([sys.executable, "-m", "clusterlab", "stats", str(p)], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip() == f"clusterlab: error: {p}:2:3: not an integer item: unexpected 'x'"
    assert "Traceback" not in r.stderr


# --- formats round trip ---------------------------------------------------------------

def test_csv_strings_and_parquet_roundtrip(tmp_path):
    p = write(tmp_path, "b.csv", b"transaction_id,item\nt1,milk\nt2,bread\nt1,bread\nt3,eggs\n")
    b = read_baskets(p)
    assert b.labels == ["bread", "eggs", "milk"]
    assert b.to_lists(labels=True) == [["bread", "milk"], ["bread"], ["eggs"]]
    for name in ("out.parquet", "out.csv"):
        write_baskets(b, tmp_path / name)
        assert read_baskets(tmp_path / name).to_lists(labels=True) == b.to_lists(labels=True)
    with pytest.raises(clusterlab.ConfigError, match="FIMI"):
        write_baskets(b, tmp_path / "out.dat")


def test_parquet_errors(tmp_path):
    p = write(tmp_path, "x.parquet", b"not parquet at all")
    with pytest.raises(BasketFormatError, match="Parquet"):
        read_baskets(p)


txs = st.lists(st.lists(st.integers(0, 2**32 - 1), max_size=8), max_size=40)


@settings(max_examples=60, deadline=None)
@given(txs, st.integers(1, 7))
def test_fimi_roundtrip_and_ranges(tmp_path_factory, lists, parts):
    d = tmp_path_factory.mktemp("rt")
    b = Baskets.from_lists(lists)
    write_baskets(b, d / "b.dat")
    back = read_baskets(d / "b.dat")
    assert back == b
    assert back.to_lists() == [sorted(set(t)) for t in lists]
    # rank shares tile the transactions exactly, in order
    got = [t for r in range(parts) for t in read_partition(d / "b.dat", r, parts).to_lists()]
    assert got == back.to_lists()
    ranges = byte_ranges(d / "b.dat", parts)
    assert ranges[0][0] == 0 and all(a[1] == b_[0] for a, b_ in zip(ranges, ranges[1:], strict=False))


def test_stats_on_real_file():
    s = read_baskets(shared("T10I4D100K.dat")).stats(top=3)
    assert s["transactions"] == 100_000
    assert s["distinct_items"] == 870
    assert abs(s["average_length"] - 10.1) < 0.01
    assert [r["item"] for r in s["most_frequent"]] == [368, 529, 829]


def test_numpy_views_are_zero_copy_friendly():
    b = Baskets.from_lists([[1, 2], [3]])
    assert b.offsets.dtype == np.int64 and b.items.dtype == np.uint32
    assert b[1].tolist() == [3] and b[-1].tolist() == [3]
