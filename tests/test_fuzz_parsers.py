"""Bounded fuzz of the FIMI and CSV basket parsers (``clusterlab._core.parse_fimi`` and
``parse_csv_baskets``): mutated valid files must either parse or raise ``BasketParseError``
with a sane line and column, never crash. Also the streamed FIMI reader (pipes), the CSV
quote rule, Python-list conversion (``Baskets.from_lists``) and Parquet columns of random
types: each accepts exactly what its reference accepts, or refuses with a one-line error.

The FIMI parser is checked differentially against ``reference_fimi``, a slow line-by-line
Python reading of the conventions in docs/formats.md: same transactions on success, same
line and column on error. The CSV parser is checked for invariants. ``bench/fuzz_parsers.py``
runs the same checks for longer (with atheris when it is installed).
"""

from __future__ import annotations

import random
import re

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterlab import _core

U32_MAX = 0xFFFFFFFF

FIMI_SEEDS = [
    b"1 2 3\n4 5\n\n6\n",
    b"10 20 30 40\r\n5 5 5\r\n7\t8  \n",
    b"0\n4294967295\n1 2",
    b"3 1 2\n2 1\n100000 99999\n",
    b"",
]

CSV_SEEDS = [
    b"transaction_id,item\n1,milk\n1,bread\n2,bread\n",
    b"\xef\xbb\xbftransaction_id,item,qty\nt1,10,1\nt2,2,3\nt1,2,1\n",
    b'transaction_id,item\n"a,b","x ""y"""\n"a,b",z\r\n\n3,4\n',
]

# Bytes and tokens that hit the parsers' edge cases; the first ones keep a FIMI file valid,
# so that mutants explore both the accepting and the rejecting paths.
FIMI_TOKENS = [b"\n", b" ", b"\t", b"0", b"7", b"42", b"4294967295", b"\r\n", b"1 2 3\n", b"\n\n",
               b"\r", b"-", b"4294967296", b"99999999999999999999", b"\x00", b"\xff", b"a", b"."]
CSV_TOKENS = [b"\n", b"\r\n", b",", b'"', b'""', b"a", b"10", b" ", b"\xef\xbb\xbf", b"\xc3\xa9", b"\xff",
              b"\x00", b"transaction_id", b"item", b"t1,x\n"]
SAFE_FIMI = b"0123456789 \n"


def mutate(data: bytes, rng: random.Random, steps: int, tokens=FIMI_TOKENS, alphabet: bytes = b"") -> bytes:
    """Apply ``steps`` random edits: set or insert a byte (from ``alphabet`` when given, half
    of the time), delete a span, duplicate a span, splice a token."""
    buf = bytearray(data)

    def byte() -> int:
        return rng.choice(alphabet) if alphabet and rng.random() < 0.5 else rng.randrange(256)

    for _ in range(steps):
        op = rng.randrange(6)
        pos = rng.randrange(len(buf) + 1)
        if op == 0 and buf:
            buf[min(pos, len(buf) - 1)] = byte()
        elif op == 1:
            buf[pos:pos] = bytes([byte()])
        elif op == 2 and buf:
            del buf[pos:pos + rng.randrange(1, 8)]
        elif op == 3 and buf:
            a = rng.randrange(len(buf))
            buf[pos:pos] = buf[a:a + rng.randrange(1, 32)]
        else:
            tok = rng.choice(tokens[:8] if rng.random() < 0.75 else tokens)  # mostly the first tokens
            buf[pos:pos] = tok
    return bytes(buf)


def mutate_csv(data: bytes, rng: random.Random, steps: int) -> bytes:
    """Mutate mostly the rows: a broken header stops the parser before the rows."""
    if rng.random() < 0.2:
        return mutate(data, rng, steps, CSV_TOKENS)
    header, _, body = data.partition(b"\n")
    return header + b"\n" + mutate(body, rng, steps, CSV_TOKENS, b"abc123,\n ")


_PLAIN = re.compile(rb"[ \t]*(?:[0-9]{1,9}[ \t]+)*(?:[0-9]{1,9})?[ \t]*\r?")


def reference_fimi(data: bytes):
    """Transactions as sorted lists, or ``("error", line, column)`` for the first fault."""
    txs = []
    lines = data.split(b"\n")
    for ln, line in enumerate(lines, 1):
        terminated = ln < len(lines)
        if _PLAIN.fullmatch(line):  # fast path for clean lines (short items cannot overflow)
            items = [int(x) for x in line.split()]
            if terminated or items:
                txs.append(sorted(set(items)))
            continue
        items = []
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            if 48 <= c <= 57:
                j = i
                while j < n and 48 <= line[j] <= 57:
                    j += 1
                if int(line[i:j]) > U32_MAX:
                    return ("error", ln, i + 1)
                if j < n and line[j] not in b" \t\r":
                    return ("error", ln, j + 1)
                items.append(int(line[i:j]))
                i = j
            elif c in b" \t":
                i += 1
            elif c == 13 and i + 1 == n:  # CR as the line's last byte: CRLF, or CR at end of file
                i += 1
            else:
                return ("error", ln, i + 1)
        if terminated or items:
            txs.append(sorted(set(items)))
    return txs


def check_fimi(data: bytes) -> None:
    expected = reference_fimi(data)
    try:
        offsets, items, _dropped = _core.parse_fimi(data)
    except _core.BasketParseError as e:
        message, line, column = e.args
        assert isinstance(expected, tuple), f"parser rejected what the reference accepts: {message}"
        assert (line, column) == expected[1:], (message, line, column, expected)
        assert message
        return
    assert not isinstance(expected, tuple), f"parser accepted what the reference rejects at {expected[1:]}"
    got = [items[offsets[k]:offsets[k + 1]].tolist() for k in range(len(offsets) - 1)]
    assert got == expected


def quote_left_open(data: bytes) -> bool:
    """Whether a quote that opens a field (its first byte) is never closed (RFC 4180 as the
    csv crate reads it: ``""`` inside is a quote, CR or LF end a record)."""
    state = "start"
    for c in data:
        if state == "quoted":
            state = "after" if c == 34 else "quoted"
        elif state == "after" and c == 34:
            state = "quoted"
        elif state == "start" and c == 34:
            state = "quoted"
        elif c in b",\r\n":
            state = "start"
        else:
            state = "field"
    return state == "quoted"


def check_csv(data: bytes) -> None:
    lines = data.count(b"\n") + 1
    try:
        offsets, items, labels, tids = _core.parse_csv_baskets(data)
    except _core.BasketParseError as e:
        message, line, column = e.args
        assert message
        assert 1 <= line <= lines + 1, (message, line, lines)
        assert column >= 1, (message, column)
        return
    assert not quote_left_open(data), "accepted a quote that is never closed"
    assert offsets[0] == 0 and offsets[-1] == items.size and np.all(np.diff(offsets) >= 0)
    assert len(tids) == offsets.size - 1 == len(set(tids))
    assert items.size == 0 or int(items.max()) < len(labels)
    assert len(set(labels)) == len(labels)
    for k in range(offsets.size - 1):
        t = items[offsets[k]:offsets[k + 1]].astype(np.int64)
        assert np.all(np.diff(t) > 0)


def test_reference_agrees_on_the_documented_cases():
    assert reference_fimi(b"1 2 3\n\n4\t5  \r\n3 1 3\n7") == [[1, 2, 3], [], [4, 5], [1, 3], [7]]
    assert reference_fimi(b"1\n   ") == [[1]]
    assert reference_fimi(b"1 2\n3 x4\n") == ("error", 2, 3)
    assert reference_fimi(b"1\r2\n") == ("error", 1, 2)
    for data in (b"1 2 3\n\n4\t5  \r\n3 1 3\n7", b"1 2\n3 x4\n", b"1\r2\n", b"1\r", b"4294967296 x"):
        check_fimi(data)


fuzz = settings(max_examples=600, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])


@fuzz
@given(seed=st.sampled_from(FIMI_SEEDS), rnd=st.randoms(use_true_random=False), steps=st.integers(1, 12))
def test_fimi_parser_survives_mutations(seed, rnd, steps):
    check_fimi(mutate(seed, rnd, steps, FIMI_TOKENS, SAFE_FIMI))


@fuzz
@given(data=st.binary(max_size=200))
def test_fimi_parser_survives_random_bytes(data):
    check_fimi(data)


@fuzz
@given(seed=st.sampled_from(CSV_SEEDS), rnd=st.randoms(use_true_random=False), steps=st.integers(1, 12))
def test_csv_parser_survives_mutations(seed, rnd, steps):
    check_csv(mutate_csv(seed, rnd, steps))


def test_fimi_errors_past_chunk_boundaries():
    """Inputs over 2 MB are parsed in parallel chunks: an error anywhere, and the lines around
    chunk boundaries, must come out as from one sequential pass."""
    rng = np.random.default_rng(7)
    lengths = rng.integers(0, 20, 50_000)
    words = rng.integers(0, 5000, int(lengths.sum())).astype(str)
    ends = np.cumsum(lengths)
    data = ("\n".join(" ".join(words[e - n:e]) for n, e in zip(lengths, ends, strict=True)) + "\n").encode()
    assert len(data) > 2_100_000  # two or more chunks
    check_fimi(data)
    for where, bad in ((0.5, b"x"), (0.999, b"\r")):
        pos = int(len(data) * where)
        check_fimi(data[:pos] + bad + data[pos:])
    check_fimi(data[:int(len(data) * 0.75)])  # cut anywhere, including inside an item


def test_quote_reference():
    assert quote_left_open(b'a,"b') and quote_left_open(b'"x""') and quote_left_open(b'1,"a\n2')
    assert not quote_left_open(b'a,b"c') and not quote_left_open(b'"a""b"') and not quote_left_open(b'"a"\n"b"')


@fuzz
@given(seed=st.sampled_from(CSV_SEEDS), rnd=st.randoms(use_true_random=False), steps=st.integers(1, 6),
       cut=st.floats(0, 1))
def test_csv_parser_refuses_open_quotes(seed, rnd, steps, cut):
    data = mutate_csv(seed, rnd, steps)
    data = data[:int(len(data) * cut)] + b'"' + data[int(len(data) * cut):]
    check_csv(data)


def _through_pipe(data: bytes):
    """``_core.read_fimi_fd`` on a pipe fed by a thread: the streamed reader."""
    import os
    import threading

    r, w = os.pipe()

    def feed():
        view = memoryview(data)
        while view:
            view = view[os.write(w, view):]
        os.close(w)

    t = threading.Thread(target=feed)
    t.start()
    try:
        return _core.read_fimi_fd(r)
    finally:
        t.join()
        os.close(r)


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.sampled_from(FIMI_SEEDS), rnd=st.randoms(use_true_random=False), steps=st.integers(1, 12))
def test_streamed_fimi_equals_in_memory_parse(seed, rnd, steps):
    data = mutate(seed, rnd, steps, FIMI_TOKENS, SAFE_FIMI)
    try:
        want = _core.parse_fimi(data)
    except _core.BasketParseError as e:
        try:
            _through_pipe(data)
        except _core.BasketParseError as got:
            assert got.args == e.args
            return
        raise AssertionError(f"stream accepted what the parser rejects: {e.args}") from None
    got = _through_pipe(data)
    assert all(np.array_equal(a, b) for a, b in zip(got[:2], want[:2], strict=True)) and got[2] == want[2]


ITEMS = st.one_of(st.integers(-3, 2**32 + 3), st.text(max_size=3), st.floats(allow_nan=False), st.none(),
                  st.lists(st.integers(0, 3), max_size=2), st.booleans())


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.lists(ITEMS, max_size=5), max_size=8))
def test_from_lists_accepts_exactly_ints_and_strings(lists):
    """Reference: ints 0..2**32-1 (bools are ints) and strings are items; anything else is a
    ConfigError naming the first bad position."""
    from clusterlab import Baskets, ConfigError

    def ok(x):
        return isinstance(x, str) or (isinstance(x, int) and 0 <= x <= U32_MAX)

    bad = next(((t, k) for t, tx in enumerate(lists) for k, x in enumerate(tx) if not ok(x)), None)
    if bad is not None:
        try:
            Baskets.from_lists(lists)
        except ConfigError as e:
            assert str(e).startswith(f"transactions[{bad[0]}][{bad[1]}]"), (str(e), bad)
            assert "\n" not in str(e)
            return
        raise AssertionError(f"accepted {lists[bad[0]][bad[1]]!r}")
    b = Baskets.from_lists(lists)
    if any(isinstance(x, str) for tx in lists for x in tx):
        assert b.to_lists(labels=True) == [sorted({str(int(x)) if not isinstance(x, str) else x for x in tx})
                                           for tx in lists]
    else:
        assert b.to_lists() == [sorted({int(x) for x in tx}) for tx in lists]


PARQUET_TYPES = ["int8", "uint16", "int64", "uint64", "float64", "bool_", "string", "large_string", "binary"]


@settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(PARQUET_TYPES), layout=st.sampled_from(["list", "long"]),
       values=st.lists(st.one_of(st.none(), st.integers(-5, 2**33)), min_size=1, max_size=12))
def test_parquet_columns_of_any_type(tmp_path_factory, kind, layout, values):
    """Integer and string items are read exactly; other types, nulls and out-of-range ids are
    a one-line BasketFormatError naming the column and row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from clusterlab import BasketFormatError, read_baskets

    t = getattr(pa, kind)()
    py = [None if v is None else (v if pa.types.is_integer(t) else
                                  bool(v % 2) if kind == "bool_" else float(v) if kind == "float64" else
                                  str(v).encode() if kind == "binary" else str(v)) for v in values]
    try:
        arr = pa.array(py, t)
    except (pa.ArrowInvalid, OverflowError):
        return  # the value does not fit the type: nothing to write
    if layout == "list":
        table = pa.table({"items": pa.ListArray.from_arrays(pa.array([0, len(py) // 2, len(py)], pa.int32()), arr)})
    else:
        table = pa.table({"transaction_id": [k % 3 for k in range(len(py))], "item": arr})
    p = tmp_path_factory.mktemp("pq") / "f.parquet"
    pq.write_table(table, p)
    ok_type = pa.types.is_integer(t) or kind in ("string", "large_string")
    ok_values = all(v is not None and (not pa.types.is_integer(t) or 0 <= v <= U32_MAX) for v in py)
    try:
        b = read_baskets(p)
    except BasketFormatError as e:
        assert not (ok_type and ok_values), str(e)
        assert "column 'item" in str(e) and "\n" not in str(e)
        return
    assert ok_type and ok_values
    assert sum(len(x) for x in b.to_lists()) == len(b.items) <= len(py)
