"""The packed LUN layout (version 2, clusterlab.storage.source and clusterlab._core's packed
codec): round trips, decoding in pieces cut anywhere, every malformed byte refused in one line
naming the LUN, the partition and the offset, version 1 still readable, and mining from a
packed layout equal to mining the file (a local LUN file here; through the target in
test_storage_source.py, root)."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterlab import _core
from clusterlab.cluster import InProcess
from clusterlab.data.baskets import Baskets
from clusterlab.errors import ConfigError
from clusterlab.storage.source import (
    HEADER_BYTES,
    Region,
    check_layout,
    decode_pieces,
    pack_header,
    read_header,
    read_rank_baskets,
    read_rank_bytes,
    write_partitions,
)

U32_MAX = 4294967295  # the largest item id the FIMI parser accepts
items = st.one_of(st.integers(0, 1200), st.sampled_from([0, 1, 127, 128, 16383, 16384, U32_MAX - 1, U32_MAX]),
                  st.integers(0, U32_MAX))


def _long_transaction(seed: int) -> list[int]:
    """200-600 distinct items of the same mix as ``items`` (small, varint-boundary and full-range
    ids), drawn from ``seed``: Hypothesis draws a unique list item by item (about 2 s each)."""
    rng = random.Random(seed)
    edges = [0, 1, 127, 128, 16383, 16384, U32_MAX - 1, U32_MAX]
    out: set[int] = set()
    n = rng.randint(200, 600)
    while len(out) < n:
        kind = rng.randrange(3)
        out.add(rng.randint(0, 1200) if kind == 0 else rng.choice(edges) if kind == 1 else rng.randint(0, U32_MAX))
    return rng.sample(sorted(out), n)  # unsorted, as a caller may hand them over


transactions = st.lists(st.lists(items, max_size=40) | st.integers(0, 2**32).map(_long_transaction), max_size=60)


def _pack(b: Baskets) -> bytes:
    return _core.pack_baskets(b.offsets, b.items)


def _cut(data: bytes, rng: random.Random) -> list[bytes]:
    cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(0, 12)))) if len(data) > 1 else []
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


@settings(max_examples=150, deadline=None)
@given(transactions, st.integers(0, 2**32))
def test_round_trip_whole_and_cut_anywhere(lists, seed):
    b = Baskets.from_lists(lists)  # sorted and de-duplicated, as the FIMI parser leaves them
    data = _pack(b)
    region = Region(65536, len(data), len(b), 0)
    for pieces in ([data], _cut(data, random.Random(seed)), [data[i:i + 1] for i in range(len(data))]):
        got = decode_pieces(pieces, region, "x")
        assert got.offsets.dtype == np.int64 and got.items.dtype == np.uint32
        assert got.offsets.tolist() == b.offsets.tolist() and got.items.tolist() == b.items.tolist()


def test_known_bytes_and_density():
    b = Baskets.from_lists([[], [0, 1, 129], [U32_MAX]])
    assert _pack(b) == bytes([0, 3, 0, 0, 127, 1, 0xff, 0xff, 0xff, 0xff, 0x0f])
    # 1000 items, about 10 a transaction: about 1.1-1.3 bytes an item with the count
    rng = random.Random(2)
    big = Baskets.from_lists([rng.sample(range(1000), 10) for _ in range(2000)])
    assert 1.0 < len(_pack(big)) / big.items.size < 1.35
    with pytest.raises(ValueError, match="transaction 0 is not sorted"):
        _core.pack_baskets(np.array([0, 2]), np.array([5, 3], np.uint32))


@pytest.mark.parametrize("data, regionlen, tx, msg, offset", [
    (bytes([1, 0x80]), None, None, "truncated varint", 1),
    (bytes([0, 5, 1, 1]), None, None, "item count 5 runs past the region", 1),
    (bytes([2, 0xff, 0xff, 0xff, 0xff, 0x0f, 0]), None, None, "item id 4294967296 is above 4294967295", 6),
    (bytes([1, 0xff, 0xff, 0xff, 0xff, 0x10]), None, None, "varint longer than 5 bytes", 1),
    (bytes([3, 0x81, 0x01, 0x05]), None, None, "ends inside a transaction, 1 of its items missing", 4),
    (bytes([0, 0]), None, 3, "holds 2 transactions, its header says 3", 2),
    (bytes([0, 0]), 3, None, "ends after 2 of its 3 bytes", 2),
    (bytes([0, 0, 0]), 2, None, "past the region", 2),
])
def test_malformed_bytes_refused_naming_lun_partition_offset(data, regionlen, tx, msg, offset):
    region = Region(65536, len(data) if regionlen is None else regionlen, tx, 0)
    where = "iscsi://10.0.0.3:3260/iqn.x:y/1 (partition 2)"
    for pieces in ([data], [data[i:i + 1] for i in range(len(data))]):
        with pytest.raises(ConfigError) as e:
            decode_pieces(pieces, region, where)
        text = str(e.value)
        assert "\n" not in text and text.startswith(where + f", byte {offset}: ") and msg in text, text


def test_random_bytes_never_crash():
    rng = random.Random(5)
    for _ in range(3000):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        try:
            decode_pieces(_cut(data, rng), Region(0, len(data)), "x")
        except ConfigError as e:
            assert str(e).startswith("x, byte ")


def test_headers_of_both_versions():
    h = read_header(pack_header([Region(65536, 9, 4, 1), Region(131072, 0, 0, 0)], "packed"))
    assert (h.version, h.layout, h.regions[0]) == (2, "packed", Region(65536, 9, 4, 1))
    assert read_header(pack_header([(65536, 9)])).layout == "fimi"
    bad = bytearray(pack_header([Region(65536, 9, 4, 1)], "packed"))
    bad[16:20] = struct.pack("<I", 7)
    with pytest.raises(ConfigError, match="names encoding 7, not one this reader knows"):
        read_header(bytes(bad), "lun")
    bad[8:12] = struct.pack("<I", 3)
    with pytest.raises(ConfigError, match="version 3 with 1 partitions is not readable"):
        read_header(bytes(bad), "lun")
    with pytest.raises(ConfigError, match="layout must be one of packed, fimi, got 'zip'"):
        check_layout("zip")
    with pytest.raises(ConfigError, match="holds 1..127 partitions"):
        pack_header([Region(0, 0, 0, 0)] * 128, "packed")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    import clusterlab

    d = tmp_path_factory.mktemp("packed")
    p = d / "t.dat"
    clusterlab.generate_file(p, "T10I4D3K", items=200, seed=5)
    # duplicates, unsorted items, an empty line, a CRLF and no final newline: the parser's
    # normalisation must be what the packed layout stores
    with open(p, "ab") as f:
        f.write(b"7 3 7 3 1\n\n4294967295 0\r\n9 9")
    return p


@pytest.mark.parametrize("layout", ["packed", "fimi"])
def test_lun_file_reads_as_the_local_partitions(data, tmp_path, layout):
    from clusterlab.data import read_partition

    url = f"lunfile://{tmp_path}/lun.img"
    regions = write_partitions(url, data, 3, layout=layout)
    text = sum(e - s for s, e in __import__("clusterlab.storage.source", fromlist=["x"]).partition_ranges(data, 3))
    stored = sum(r.length for r in regions)
    assert (stored < text / 2) if layout == "packed" else stored == text
    for rank in range(3):
        want = read_partition(str(data), rank, 3, format="fimi")
        for segment in (4096, 1 << 21):
            got = read_rank_baskets(url, rank, 3, segment=segment)
            assert got.offsets.tolist() == want.offsets.tolist() and got.items.tolist() == want.items.tolist()
            assert got.duplicates_dropped == want.duplicates_dropped
    assert read_rank_baskets(url, 2, 3).duplicates_dropped >= 3  # the appended lines' duplicates
    with pytest.raises(ConfigError, match="holds 3 partitions, the job has 2 ranks"):
        read_rank_baskets(url, 0, 2)


def test_corrupt_packed_lun_file_names_lun_partition_and_offset(data, tmp_path):
    url = f"lunfile://{tmp_path}/lun.img"
    regions = write_partitions(url, data, 2)
    raw = bytearray(open(tmp_path / "lun.img", "rb").read())
    raw[regions[1].offset + 10] = 0xff  # a count or an id turned into a longer varint
    raw[regions[1].offset + 11] = 0xff
    raw[regions[1].offset + 12] = 0xff
    raw[regions[1].offset + 13] = 0xff
    raw[regions[1].offset + 14] = 0xff
    open(tmp_path / "lun.img", "wb").write(bytes(raw))
    assert read_rank_baskets(url, 0, 2).items.size > 0  # partition 0 untouched
    with pytest.raises(ConfigError, match=rf"^{url} \(partition 1\), byte 1[0-4]: ") as e:
        read_rank_baskets(url, 1, 2)
    assert "\n" not in str(e.value)
    # a file cut inside the data
    open(tmp_path / "cut.img", "wb").write(bytes(raw[:regions[1].offset + 5]))
    with pytest.raises(ConfigError, match="outside the LUN"):
        read_rank_baskets(f"lunfile://{tmp_path}/cut.img", 1, 2)
    with pytest.raises(ConfigError, match="no clusterlab partition header"):
        open(tmp_path / "zero.img", "wb").write(bytes(HEADER_BYTES))
        read_rank_baskets(f"lunfile://{tmp_path}/zero.img", 0, 2)


def test_packed_bytes_are_the_codec_of_the_partition(data, tmp_path):
    from clusterlab.data import read_partition

    url = f"lunfile://{tmp_path}/lun.img"
    write_partitions(url, data, 2)
    b = read_partition(str(data), 1, 2, format="fimi")
    assert read_rank_bytes(url, 1, 2) == _pack(b)


@pytest.mark.parametrize("algorithm", ["hpa", "pfp", "cd"])
def test_mining_a_packed_layout_equals_mining_the_file(data, tmp_path, algorithm):
    from clusterlab.mining.parallel.config import ParallelConfig
    from clusterlab.mining.parallel.driver import run_parallel

    url = f"lunfile://{tmp_path}/lun.img"
    write_partitions(url, data, 3)
    local = run_parallel(data, 3, algorithm, 0.02, cluster=InProcess())
    assert run_parallel(url, 3, algorithm, 0.02, cluster=InProcess()).table.equals(local.table)
    if algorithm == "hpa":
        rescanned = run_parallel(url, 3, algorithm, 0.02, cluster=InProcess(), config=ParallelConfig(rescan=True))
        assert rescanned.table.equals(local.table)


def test_bad_layout_and_lun_file_urls_are_refused(data, tmp_path):
    from clusterlab.storage.source import check_url

    with pytest.raises(ConfigError, match="layout must be one of packed, fimi, got 'text'"):
        write_partitions(f"lunfile://{tmp_path}/x.img", data, 2, layout="text")
    with pytest.raises(ConfigError, match="lunfile:///ABSOLUTE/PATH"):
        check_url("lunfile://rel/x.img", 2)
    with pytest.raises(ConfigError, match="no such file"):
        check_url(f"lunfile://{tmp_path}/none.img", 2)
