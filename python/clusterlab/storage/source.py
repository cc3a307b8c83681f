"""Mining input on an iSCSI LUN (issue 13, seed 001): each rank's partition of a FIMI file in
its own region of one shared LUN, read by the rank through the initiator in 64 KB blocks.

A source is named by a URL ``iscsi://ADDR:PORT/IQN/LUN`` (the IQN may contain ``:``; the
port defaults to 3260), e.g. the ``url`` of ``IscsiTarget(tb, shared=True).luns[0]``.

Layout of the LUN (all integers little-endian):

* bytes 0..4095, the header: ``b"CLABPART"``, u32 version (1), u32 number of partitions P
  (1..255), then P pairs (u64 offset, u64 length) in bytes; the rest is zero;
* partition r: ``length`` bytes of FIMI text (whole lines, exactly the bytes of the file's
  partition r) from ``offset``, a multiple of 64 KiB; the first starts at 64 KiB.

``write_partitions(url, path, parts)`` lays a FIMI file out so (the partition index of
``gen --partitions`` when it has ``parts`` partitions, else line-aligned equal byte shares);
``read_rank_baskets(url, rank, size)`` returns rank ``rank``'s transactions, the same
``Baskets`` as reading that partition from the local file. Both must run where the target is
reachable (in a testbed host's namespace: the ranks of ``run_parallel(..., testbed=NAME)``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from clusterlab.errors import ConfigError

MAGIC = b"CLABPART"
VERSION = 1
HEADER_BYTES = 4096
ALIGN = 64 << 10
READ_BLOCK = 64 << 10  # the seed's miners read in 64 KB blocks
CONNECTIONS = 4  # commands in flight per rank
MAX_PARTS = (HEADER_BYTES - 16) // 16


@dataclass(frozen=True)
class LunUrl:
    portal: str
    iqn: str
    lun: int

    def __str__(self) -> str:
        return f"iscsi://{self.portal}/{self.iqn}/{self.lun}"


def is_url(path) -> bool:
    """Whether ``path`` names an iSCSI source.

    >>> is_url("iscsi://10.0.0.3:3260/iqn.2026-11.org.clusterlab:t1.shared/1"), is_url("a.dat")
    (True, False)
    """
    return isinstance(path, str) and path.startswith("iscsi://")


def parse_url(url: str) -> LunUrl:
    """Split ``iscsi://ADDR[:PORT]/IQN/LUN``; a malformed URL is a ``ConfigError`` naming it.

    >>> parse_url("iscsi://10.0.0.3/iqn.2026-11.org.clusterlab:t1.shared/1")
    LunUrl(portal='10.0.0.3:3260', iqn='iqn.2026-11.org.clusterlab:t1.shared', lun=1)
    """
    rest = url[len("iscsi://"):] if is_url(url) else None
    parts = rest.split("/") if rest else []
    if len(parts) != 3 or not all(parts) or not parts[2].isdigit() or not parts[1].startswith("iqn."):
        raise ConfigError(f"{url}: an iSCSI source is iscsi://ADDR[:PORT]/IQN/LUN (IQN starting 'iqn.', LUN a number)")
    portal = parts[0] if ":" in parts[0] else f"{parts[0]}:3260"
    host, _, port = portal.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{url}: bad portal {parts[0]!r} (ADDR or ADDR:PORT)")
    return LunUrl(portal, parts[1], int(parts[2]))


def pack_header(regions: list[tuple[int, int]]) -> bytes:
    """The header block for partitions at ``regions`` [(offset, length)].

    >>> h = pack_header([(65536, 10), (131072, 5)])
    >>> len(h), unpack_header(h)
    (4096, [(65536, 10), (131072, 5)])
    """
    if not 1 <= len(regions) <= MAX_PARTS:
        raise ConfigError(f"a LUN holds 1..{MAX_PARTS} partitions, got {len(regions)}")
    body = MAGIC + struct.pack("<II", VERSION, len(regions)) + b"".join(struct.pack("<QQ", o, n) for o, n in regions)
    return body.ljust(HEADER_BYTES, b"\0")


def unpack_header(block: bytes, where: str = "the LUN") -> list[tuple[int, int]]:
    """[(offset, length)] of the partitions; ``ConfigError`` when ``block`` is not a header."""
    if len(block) < 16 or block[:8] != MAGIC:
        raise ConfigError(f"{where}: no clusterlab partition header (write_partitions lays the data out first)")
    version, n = struct.unpack_from("<II", block, 8)
    if version != VERSION or not 1 <= n <= MAX_PARTS:
        raise ConfigError(f"{where}: partition header version {version} with {n} partitions is not readable here")
    return [struct.unpack_from("<QQ", block, 16 + 16 * i) for i in range(n)]


def layout(lengths: list[int]) -> list[tuple[int, int]]:
    """Regions for partitions of ``lengths`` bytes: 64 KiB-aligned, in order, after the header.

    >>> layout([10, 65536, 1])
    [(65536, 10), (131072, 65536), (196608, 1)]
    """
    out, off = [], ALIGN
    for n in lengths:
        out.append((off, n))
        off += -(-n // ALIGN) * ALIGN if n else ALIGN
    return out


def lun_bytes_needed(lengths: list[int]) -> int:
    """LUN size that holds partitions of ``lengths`` bytes."""
    off, n = layout(lengths)[-1]
    return off + max(ALIGN, -(-n // ALIGN) * ALIGN)


def partition_ranges(path, parts: int) -> list[tuple[int, int]]:
    """The byte ranges of ``path``'s ``parts`` partitions: the partition index's when it has
    that many, else line-aligned equal byte shares (``clusterlab.data.partition.byte_ranges``)."""
    from clusterlab.data.generate import index_path_for, read_partition_index
    from clusterlab.data.partition import byte_ranges

    if index_path_for(path).exists():
        idx = read_partition_index(path)
        if len(idx) == parts:
            return [(int(p["start"]), int(p["end"])) for p in idx]
    return byte_ranges(path, parts)


def _open(url: LunUrl, connections: int = CONNECTIONS):
    from clusterlab.storage.iscsi import open_lun

    try:
        return open_lun(url.portal, url.iqn, url.lun, connections=connections)
    except OSError as e:
        raise ConfigError(f"{url}: {e}") from None


def write_partitions(url: str, path, parts: int, block: int = 1 << 20) -> list[tuple[int, int]]:
    """Write FIMI file ``path``'s ``parts`` partitions to the LUN at ``url`` in the layout above
    (the header last, so a LUN whose copy was interrupted has none). Returns the regions."""
    u = parse_url(url)
    ranges = partition_ranges(path, parts)
    regions = layout([e - s for s, e in ranges])
    with _open(u, 1) as lun:
        if lun_bytes_needed([n for _, n in regions]) > lun.size:
            raise ConfigError(f"{url}: the LUN has {lun.size} bytes; {path} in {parts} partitions needs "
                              f"{lun_bytes_needed([n for _, n in regions])}")
        lun.write(0, bytes(HEADER_BYTES))
        with open(path, "rb") as f:
            for (start, end), (off, _) in zip(ranges, regions, strict=True):
                f.seek(start)
                pos = start
                while pos < end:
                    chunk = f.read(min(block, end - pos))
                    if not chunk:
                        raise ConfigError(f"{path}: shorter than its partition index says")
                    pad = -len(chunk) % lun.block_length
                    lun.write(off + pos - start, chunk + bytes(pad))
                    pos += len(chunk)
        lun.write(0, pack_header(regions))
    return regions


def read_rank_bytes(url: str, rank: int, size: int, block: int = READ_BLOCK) -> bytes:
    """The FIMI bytes of partition ``rank`` of ``size`` on the LUN, read in ``block``-byte
    commands (several in flight)."""
    u = parse_url(url)
    if size < 1 or not 0 <= rank < size:
        raise ConfigError(f"rank {rank} is outside 0..{size - 1}")
    with _open(u) as lun:
        regions = unpack_header(lun.read(0, HEADER_BYTES), str(u))
        if len(regions) != size:
            raise ConfigError(f"{u}: the LUN holds {len(regions)} partitions, the job has {size} ranks "
                              f"(write_partitions with parts={size})")
        off, n = regions[rank]
        if n == 0:
            return b""
        padded = -(-n // lun.block_length) * lun.block_length
        if off % lun.block_length or off + padded > lun.size:
            raise ConfigError(f"{u}: partition {rank} ({off}+{n}) is outside the LUN's {lun.size} bytes")
        try:
            data = lun.read(off, padded, block)
        except OSError as e:
            raise ConfigError(f"{u}: reading partition {rank}: {e}") from None
    return data[:n]


def read_rank_baskets(url: str, rank: int, size: int):
    """Rank ``rank``'s transactions from the LUN (the same ``Baskets`` as
    ``clusterlab.data.read_partition`` of the file the LUN was written from)."""
    from clusterlab import _core
    from clusterlab.data.baskets import Baskets
    from clusterlab.data.io import _wrap_parse_error

    data = read_rank_bytes(url, rank, size)
    try:
        offsets, items, dropped = _core.parse_fimi(data)
    except _core.BasketParseError as e:
        raise _wrap_parse_error(f"{url} (partition {rank})", e) from None
    return Baskets._trusted(offsets, items, None, dropped)


def check_url(url: str, nodes: int) -> str:
    """Refuse a malformed URL before any rank starts (the LUN itself is only reachable from
    the testbed's hosts, so its header is checked by the ranks); returns the format."""
    parse_url(url)
    if not 1 <= nodes <= MAX_PARTS:
        raise ConfigError(f"{url}: a LUN holds 1..{MAX_PARTS} partitions, the job has {nodes} ranks")
    return "fimi"
