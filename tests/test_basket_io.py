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


# --- sparse item ids: memory follows the distinct items, not the largest id -------------

def _cli(*args, env=None, stdin=None, input=None, timeout=60, mem_gib=None):
    """Run the CLI in a subprocess, optionally under an address-space cap (so a dense
    allocation over the id range fails fast instead of eating the machine)."""
    import os
    import resource

    def cap():
        if mem_gib:
            lim = mem_gib << 30
            resource.setrlimit(resource.RLIMIT_AS, (lim, lim))

    return subprocess.run([sys.executable, "-m", "clusterlab", *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, stdin=stdin, input=input, timeout=timeout,
                          preexec_fn=cap)


@pytest.mark.parametrize("big", [4294967295, 500000000])
def test_stats_of_huge_sparse_ids_in_small_memory(tmp_path, big):
    import json

    p = write(tmp_path, "sparse.dat", f"1 {big}\n{big} 2\n".encode())
    r = _cli("stats", p, "--json", mem_gib=3)
    assert r.returncode == 0, r.stderr[-500:]
    s = json.loads(r.stdout)
    assert (s["transactions"], s["distinct_items"]) == (2, 3)
    assert [(m["item"], m["count"]) for m in s["most_frequent"]] == [(big, 2), (1, 1), (2, 1)]
    code = (f"import clusterlab; b = clusterlab.Baskets.from_lists([[1, {big}], [{big}, 2]]); "
            "c, ids = b.compact(); print(b.n_items, c.to_lists(), ids.tolist())")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       preexec_fn=lambda: __import__("resource").setrlimit(
                           __import__("resource").RLIMIT_AS, (3 << 30, 3 << 30)))
    assert r.returncode == 0, r.stderr[-500:]
    assert r.stdout.strip() == f"3 [[0, 2], [1, 2]] [1, 2, {big}]"


@settings(max_examples=40, deadline=None)
@given(txs, st.sampled_from([1, 7, 4096, 1 << 20]))
def test_compact_is_order_preserving(lists, scale):
    b = Baskets.from_lists([[x * scale % (2**32) for x in t] for t in lists])
    c, ids = b.compact()
    assert ids.dtype == np.uint32 and np.all(np.diff(ids.astype(np.int64)) > 0)
    assert [[int(ids[i]) for i in t] for t in c.to_lists()] == b.to_lists()
    assert c.n_items == b.n_items == ids.size
    assert b.stats(top=3)["most_frequent"] == [
        {**m, "item": int(ids[m["item"]])} for m in c.stats(top=3)["most_frequent"]]


def test_compact_keeps_labels_and_skips_dense():
    b = Baskets.from_lists([["b", "a"], ["c"]])
    c, ids = b.compact()
    assert c is b and ids.tolist() == [0, 1, 2]
    lb = Baskets(np.array([0, 2, 3]), np.array([0, 2, 2], dtype=np.uint32), ["x", "y", "z"])
    c, ids = lb.compact()
    assert c.to_lists(labels=True) == lb.to_lists(labels=True) and ids.tolist() == [0, 2]


# --- input that is not a regular file ---------------------------------------------------

def test_stdin_pipe_is_streamed(tmp_path):
    import json

    data = b"1 2 3\n2 3\n\n7\n" * 1000
    r = _cli("stats", "/dev/stdin", "--json", input=data.decode())
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert (s["transactions"], s["distinct_items"], s["empty_transactions"]) == (4000, 4, 1000)
    # An error in a streamed input still names its line.
    r = _cli("stats", "/dev/stdin", input="1 2\n" * 10 + "3 x\n")
    assert r.returncode == 2 and r.stderr.strip().endswith("/dev/stdin:11:3: not an integer item: unexpected 'x'")


def test_pipe_descriptors_in_process(tmp_path):
    import os
    import threading

    payload = b"".join(b"%d %d\n" % (k, k + 1) for k in range(300_000))  # several pipe buffers
    for fmt, text in (("fimi", payload), ("csv", b"transaction_id,item\n1,milk\n2,bread\n1,eggs\n")):
        r, w = os.pipe()
        t = threading.Thread(target=lambda w=w, text=text: (os.write(w, text) if len(text) < 4096
                                                             else _write_all(w, text), os.close(w)))
        t.start()
        try:
            b = read_baskets(f"/dev/fd/{r}", format=fmt)
        finally:
            t.join()
            os.close(r)
        if fmt == "fimi":
            assert len(b) == 300_000 and b[-1].tolist() == [299_999, 300_000]
        else:
            assert b.to_lists(labels=True) == [["eggs", "milk"], ["bread"]]


def _write_all(fd, data):
    import os

    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def test_proc_file_is_read(tmp_path):
    from pathlib import Path

    p = Path("/proc/sys/kernel/pid_max")
    if not p.exists():
        pytest.skip("no /proc/sys/kernel/pid_max")
    assert p.stat().st_size == 0  # why it read as 0 transactions before
    b = read_baskets(p)
    assert b.to_lists() == [[int(p.read_text())]]


def test_fifo_without_writer_times_out_with_a_message(tmp_path):
    import os
    import time

    fifo = tmp_path / "f.dat"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    r = _cli("stats", fifo, env={"CLUSTERLAB_FIFO_TIMEOUT": "1.5"}, timeout=30)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert lines[0].startswith(f"clusterlab: waiting for a writer to open FIFO {fifo}")
    assert lines[-1] == (f"clusterlab: error: {fifo}:0:0: no writer opened this FIFO within 1.5 s "
                         "(set CLUSTERLAB_FIFO_TIMEOUT=SECONDS to wait longer)")
    assert time.monotonic() - t0 < 20


def test_fifo_with_a_writer_is_read(tmp_path):
    import os
    import threading

    fifo = tmp_path / "f.dat"
    os.mkfifo(fifo)

    def writer():
        with open(fifo, "wb") as f:
            f.write(b"1 2\n3\n")

    t = threading.Thread(target=writer, daemon=True)  # never keeps pytest alive if the read fails
    t.start()
    try:
        assert read_baskets(fifo).to_lists() == [[1, 2], [3]]
    finally:
        t.join(10)


def test_directory_and_ranges_of_pipes_are_refused(tmp_path):
    with pytest.raises(BasketFormatError, match="is a directory"):
        read_baskets(tmp_path)
    r = _cli("stats", tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "is a directory" in r.stderr
    with pytest.raises(BasketFormatError, match="regular file"):
        read_partition("/dev/null", 0, 2)


# --- Parquet: exactly integers 0..4294967295 or strings ----------------------------------

def _parquet(tmp_path, name, table):
    import pyarrow.parquet as pq

    p = tmp_path / name
    pq.write_table(table, p)
    return p


@pytest.mark.parametrize("columns, row, col, what", [
    ({"transaction_id": [1, 1, 2], "item": [1, -3, 2]}, 2, 2, "item -3 is outside 0..4294967295"),
    ({"transaction_id": [1, 2], "item": [1, 2**33]}, 2, 2, "item 8589934592 is outside"),
    ({"transaction_id": [[1], [2]], "item": [1, 2]}, 1, 1, "transaction ids of type list"),
    ({"transaction_id": [1, None], "item": [1, 2]}, 2, 1, "null transaction id"),
    ({"transaction_id": [1, 2], "item": ["a", None]}, 2, 2, "null item"),
    ({"transaction_id": [1, 2], "item": [1.0, 2.5]}, 1, 2, "items of type double are not accepted"),
    ({"transaction_id": [1, 2], "item": [True, False]}, 1, 2, "items of type bool"),
    ({"items": [[[1, 2]], [[3]]]}, 1, 1, "nested lists are not items"),
    ({"items": [[1, 2], None]}, 2, 1, "null transaction"),
    ({"items": [[1, 2], [3, None]]}, 2, 1, "null item"),
    ({"items": [[1, 2], [], [3, -1]]}, 3, 1, "item -1 is outside"),
    ({"items": [[1.5]]}, 1, 1, "items of type double"),
])
def test_parquet_refuses_what_is_not_an_item(tmp_path, columns, row, col, what):
    import pyarrow as pa

    p = _parquet(tmp_path, "bad.parquet", pa.table(columns))
    with pytest.raises(BasketFormatError) as ei:
        read_baskets(p)
    e = ei.value
    assert (e.line, e.column) == (row, col), str(e)
    assert what in e.message and f"row {row}" in e.message
    name = list(columns)[col - 1]
    assert f"column {name!r}" in e.message
    r = _cli("stats", p)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_parquet_accepts_integer_types_strings_and_dictionaries(tmp_path):
    import pyarrow as pa

    for t in (pa.uint8(), pa.int16(), pa.int64(), pa.uint64()):
        p = _parquet(tmp_path, "a.parquet", pa.table({"items": pa.array([[3, 1, 3], [], [2]], pa.list_(t))}))
        b = read_baskets(p)
        assert b.to_lists() == [[1, 3], [], [2]] and b.labels is None and b.duplicates_dropped == 1
    d = pa.array(["b", "a", "b"]).dictionary_encode()
    p = _parquet(tmp_path, "d.parquet", pa.table({"transaction_id": ["x", "y", "x"], "item": d}))
    assert read_baskets(p).to_lists(labels=True) == [["b"], ["a"]]
    p = _parquet(tmp_path, "l.parquet", pa.table({"transaction_id": [7, 5, 7], "item": [4294967295, 0, 1]}))
    assert read_baskets(p).to_lists() == [[1, 4294967295], [0]]


# --- CSV quotes and the stats CLI's settings --------------------------------------------

@pytest.mark.parametrize("data, line, col", [
    (b'transaction_id,item\n1,a\n2,"b\n3,c\n', 3, 2),
    (b'transaction_id,item\n1,a\n"2,b\n', 3, 1),
    (b'"transaction_id,item\n1,a\n', 1, 1),
])
def test_csv_unterminated_quote(tmp_path, data, line, col):
    p = write(tmp_path, "q.csv", data)
    with pytest.raises(BasketFormatError) as ei:
        read_baskets(p)
    assert (ei.value.line, ei.value.column) == (line, col)
    assert "unterminated quote" in ei.value.message


def test_stats_top_must_not_be_negative(tmp_path):
    p = write(tmp_path, "b.dat", b"1 2\n")
    r = _cli("stats", p, "--top", "-1")
    assert r.returncode == 2
    assert r.stderr == "clusterlab: error: --top must be >= 0, got -1\n"
    with pytest.raises(clusterlab.ConfigError, match="top"):
        Baskets.from_lists([[1]]).stats(top=-1)
    assert _cli("stats", p, "--top", "0").returncode == 0


# --- Python transactions: converted in Rust, columns without copies ---------------------

def test_from_lists_accepts_sequences_numpy_and_columns():
    import pandas as pd
    import polars as pl
    import pyarrow as pa

    want = [[1, 3], [], [2]]
    gens = (x for x in [[3, 1, 3], (), {2}])
    for src in ([[3, 1, 3], [], [2]], ((3, 1, 3), (), (2,)), gens, [np.array([3, 1, 3]), np.array([], np.int64),
                                                                   np.array([2], np.uint8)],
                [[np.int64(3), 1, 3], [], [np.uint32(2)]], pa.array([[3, 1, 3], [], [2]]),
                pa.chunked_array([pa.array([[3, 1, 3]]), pa.array([[], [2]])]), pl.Series([[3, 1, 3], [], [2]]),
                pd.Series([[3, 1, 3], [], [2]]), pd.Series([[3, 1, 3], [], [2]], dtype=pd.ArrowDtype(pa.list_(pa.int64())))):
        b = Baskets.from_lists(src)
        assert b.to_lists() == want and b.labels is None, type(src)
    assert Baskets.from_lists(np.array([[3, 1], [2, 2]])).to_lists() == [[1, 3], [2]]
    b = Baskets.from_lists(pl.Series([["milk", "bread"], ["bread"]]))
    assert b.labels == ["bread", "milk"] and b.to_lists() == [[0, 1], [0]]
    # Mixed ints and strings: every item is a label (ints by their decimal text), as sorted() orders them.
    b = Baskets.from_lists([[10, "a"], [2, "10"]])
    assert b.labels == ["10", "2", "a"] and b.to_lists(labels=True) == [["10", "a"], ["10", "2"]]


def test_from_lists_uses_canonical_arrow_buffers_without_copy():
    import pyarrow as pa

    col = pa.array([[1, 5], [2], []], pa.large_list(pa.uint32()))
    b = Baskets.from_lists(col)
    values = np.frombuffer(col.buffers()[3], dtype=np.uint32)
    assert np.shares_memory(b.items, values) and b.to_lists() == [[1, 5], [2], []]


@pytest.mark.parametrize("src, what", [
    ([[1, 2.5]], "transactions[0][1] = 2.5 (float) is not an item"),
    ([[1], [None]], "transactions[1][0] = None (NoneType) is not an item"),
    ([[1, [2, 3]]], "transactions[0][1] = [2, 3] (list)"),
    ([[1, -1]], "transactions[0][1] = -1 (int) is outside 0..4294967295"),
    ([[2**32]], "is outside 0..4294967295"),
    ([[2**70]], "is outside 0..4294967295"),
    (["abc"], "transactions[0] is a str"),
    ([[1], 5], "transactions[1] = 5 is not a collection"),
    ([np.array([1, -2])], "transactions[0][1] = -2 is outside"),
    (np.array([[1, -2]]), "transactions[0][1] = -2 is outside"),
])
def test_from_lists_refuses_non_items(src, what):
    with pytest.raises(clusterlab.ConfigError) as ei:
        Baskets.from_lists(src)
    assert what in str(ei.value)


def test_from_lists_refuses_bad_arrow_columns():
    import pyarrow as pa

    for col, what in ((pa.array([[1], None]), "transactions[1]: null transaction"),
                      (pa.array([[1.5]]), "items of type double"), (pa.array([1, 2]), "not a list column"),
                      (pa.array([[1, -1]]), "transactions[0]: item -1 is outside")):
        with pytest.raises(clusterlab.ConfigError, match=__import__("re").escape(what)):
            Baskets.from_lists(col)
    with pytest.raises(clusterlab.ConfigError, match="cannot read baskets from a int"):
        clusterlab.mine(5)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.one_of(st.integers(0, 2**32 - 1), st.text(max_size=3)), max_size=6), max_size=20))
def test_from_lists_matches_python_reference(lists):
    b = Baskets.from_lists(lists)
    if all(isinstance(x, int) for t in lists for x in t):
        assert b.labels is None and b.to_lists() == [sorted(set(t)) for t in lists]
    else:
        labels = sorted({str(x) for t in lists for x in t})
        assert b.labels == labels
        assert b.to_lists(labels=True) == [sorted({str(x) for x in t}) for t in lists]
    assert b.duplicates_dropped == sum(len(t) - len({str(x) for x in t}) for t in lists)


# --- per-rank reading: own byte range, the partition index, CSV and Parquet shares ------

def test_read_partition_uses_the_index(tmp_path):
    import json

    from clusterlab.data.generate import generate_file, index_path_for

    p = tmp_path / "g.dat"
    r = generate_file(p, "T10I4D1K", items=100, partitions=3)
    whole = read_baskets(p).to_lists()
    for rank, part in enumerate(r.partitions):
        got = read_partition(p, rank, 3).to_lists()
        lo = part["first_transaction"]
        assert got == whole[lo:lo + part["transactions"]]
    # Uneven lines: equal transaction counts differ from an equal byte split.
    q = write(tmp_path, "u.dat", b"1 2 3 4 5 6 7 8 9 10 11 12\n" * 10 + b"1\n" * 10)
    size = q.stat().st_size
    assert len(read_partition(q, 0, 2)) != 10
    idx = {"format": "clusterlab-partition-index/1", "file": "u.dat", "bytes": size, "transactions": 20,
           "partitions": [{"rank": 0, "start": 0, "end": 270, "first_transaction": 0, "transactions": 10},
                          {"rank": 1, "start": 270, "end": size, "first_transaction": 10, "transactions": 10}]}
    index_path_for(q).write_text(json.dumps(idx))
    assert [len(read_partition(q, k, 2)) for k in (0, 1)] == [10, 10]
    assert sum(len(read_partition(q, k, 3)) for k in range(3)) == 20  # other rank counts: byte split
    # An index that does not match the file is refused, naming it.
    q.write_bytes(q.read_bytes() + b"5\n")
    with pytest.raises(clusterlab.ConfigError, match="u.dat.index.json"):
        read_partition(q, 1, 2)


def test_partition_errors_name_the_file_line(tmp_path):
    lines = [b"%d %d" % (k, k + 1) for k in range(5000)]
    lines[4321] = b"7 -8"
    p = write(tmp_path, "e.dat", b"\n".join(lines) + b"\n")
    with pytest.raises(BasketFormatError) as ei:
        read_partition(p, 1, 2)
    assert (ei.value.line, ei.value.column) == (4322, 3)
    assert len(read_partition(p, 0, 2)) > 0


def test_csv_and_parquet_partitions_tile_transactions(tmp_path):
    import pyarrow as pa

    rng = np.random.default_rng(3)
    tids = rng.integers(0, 40, 300)
    items = [f"i{k}" for k in rng.integers(0, 25, 300)]
    csv = tmp_path / "b.csv"
    csv.write_text("transaction_id,item\n" + "".join(f"{t},{i}\n" for t, i in zip(tids, items, strict=True)))
    long_pq = _parquet(tmp_path, "long.parquet", pa.table({"transaction_id": tids, "item": items}))
    whole_lists = read_baskets(csv).to_lists(labels=True)
    int_lists = [[int(x) for x in rng.integers(0, 50, rng.integers(0, 6))] for _ in range(97)]
    import pyarrow.parquet as pq

    list_pq = tmp_path / "list.parquet"
    pq.write_table(pa.table({"items": pa.array(int_lists, pa.list_(pa.int64()))}), list_pq, row_group_size=10)
    for path, want in ((csv, whole_lists), (long_pq, whole_lists),
                       (list_pq, [sorted(set(t)) for t in int_lists])):
        whole = read_baskets(path)
        for size in (1, 2, 3, 5):
            parts = [read_partition(path, r, size) for r in range(size)]
            assert all(b.labels == whole.labels for b in parts)
            assert [t for b in parts for t in b.to_lists(labels=True)] == want, (path, size)


def test_renumber_to_a_union_of_ranks_ids():
    a, b = Baskets.from_lists([[5, 4294967295]]), Baskets.from_lists([[9, 5]])
    union = np.union1d(a.compact()[1], b.compact()[1])
    assert a.renumber(union).to_lists() == [[0, 2]] and b.renumber(union).to_lists() == [[0, 1]]
    with pytest.raises(clusterlab.ConfigError, match="item 9 is not among the ids"):
        b.renumber([5, 4294967295])
