"""Mining input on an iSCSI LUN (issue 13, seed 001): each rank's partition of a FIMI file in
its own region of one shared LUN, read by the rank through the initiator in 64 KB blocks.

A source is named by a URL ``iscsi://ADDR:PORT/IQN/LUN`` (the IQN may contain ``:``; the
port defaults to 3260), e.g. the ``url`` of ``IscsiTarget(tb, shared=True).luns[0]``, or by
``lunfile:///PATH``: the same layout in a local file (reading the layout without the network).

Layout of the LUN (all integers little-endian). Version 1, ``layout="fimi"``:

* bytes 0..4095, the header: ``b"CLABPART"``, u32 version (1), u32 number of partitions P
  (1..255), then P pairs (u64 offset, u64 length) in bytes; the rest is zero;
* partition r: ``length`` bytes of FIMI text (whole lines, exactly the bytes of the file's
  partition r) from ``offset``, a multiple of 64 KiB; the first starts at 64 KiB.

Version 2, ``layout="packed"`` (the default): the header is ``b"CLABPART"``, u32 version (2),
u32 P (1..127), u32 encoding (1: varint-delta baskets), u32 0, then P records (u64 offset,
u64 length, u64 transactions, u64 duplicate items dropped by the parse); partition r holds
the transactions that reading the file's partition r gives, packed
(``clusterlab._core.pack_baskets``: per transaction a LEB128 item count, then the first id
and each next id's gap minus 1), about a third of the text's bytes, placed as in version 1.

``write_partitions(url, path, parts, layout=)`` lays a FIMI file out so (the partition index
of ``gen --partitions`` when it has ``parts`` partitions, else line-aligned equal byte
shares); ``read_rank_baskets(url, rank, size)`` returns rank ``rank``'s transactions from
either version, the same ``Baskets`` as reading that partition from the local file. On a LUN
both must run where the target is reachable (in a testbed host's namespace: the ranks of
``run_parallel(..., cluster=Testbed(NAME))``).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import struct
import threading
from dataclasses import dataclass

from clusterlab.errors import ConfigError

MAGIC = b"CLABPART"
FIMI_VERSION, PACKED_VERSION = 1, 2
VERSION = FIMI_VERSION  # the text layout's version
LAYOUTS = {"packed": PACKED_VERSION, "fimi": FIMI_VERSION}  # the first is the default
ENCODINGS = {1: "varint-delta baskets"}  # version 2's encodings by number
HEADER_BYTES = 4096
ALIGN = 64 << 10
READ_BLOCK = 64 << 10  # the seed's miners read in 64 KB blocks
CONNECTIONS = 4  # commands in flight per rank
SEGMENT = 2 << 20  # read ahead in pieces of this size, parsed while the next one arrives
MAX_PARTS = (HEADER_BYTES - 16) // 16
MAX_PACKED_PARTS = (HEADER_BYTES - 24) // 32
FILE_SCHEME = "lunfile://"


@dataclass(frozen=True)
class Region:
    """One partition: ``length`` bytes at ``offset``; version 2 also records its transactions
    and the duplicate items the parse dropped (None in version 1)."""

    offset: int
    length: int
    transactions: int | None = None
    dropped: int | None = None


@dataclass(frozen=True)
class LunHeader:
    """A LUN's header: its layout's version and the partitions' regions."""

    version: int
    regions: list

    @property
    def layout(self) -> str:
        return "fimi" if self.version == FIMI_VERSION else "packed"


def check_layout(layout: str) -> int:
    """The header version of ``layout``; anything else is refused in one line.

    >>> check_layout("packed"), check_layout("fimi")
    (2, 1)
    """
    if layout not in LAYOUTS:
        raise ConfigError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    return LAYOUTS[layout]


@dataclass(frozen=True)
class LunUrl:
    portal: str
    iqn: str
    lun: int
    block: int = READ_BLOCK
    connections: int = CONNECTIONS

    def __str__(self) -> str:
        query = [f"{k}={getattr(self, k)}" for k, d in (("block", READ_BLOCK), ("connections", CONNECTIONS))
                 if getattr(self, k) != d]
        return f"iscsi://{self.portal}/{self.iqn}/{self.lun}" + ("?" + "&".join(query) if query else "")


def is_url(path) -> bool:
    """Whether ``path`` names a LUN source (iSCSI, or a local file holding the layout).

    >>> is_url("iscsi://10.0.0.3:3260/iqn.2026-11.org.clusterlab:t1.shared/1"), is_url("a.dat")
    (True, False)
    >>> is_url("lunfile:///var/tmp/lun.img")
    True
    """
    return isinstance(path, str) and path.startswith(("iscsi://", FILE_SCHEME))


def file_path(url: str) -> str | None:
    """The local path of a ``lunfile://`` source (None for iSCSI); a relative one is refused.

    >>> file_path("lunfile:///var/tmp/lun.img"), file_path("iscsi://10.0.0.3/iqn.a:b/1")
    ('/var/tmp/lun.img', None)
    """
    if not url.startswith(FILE_SCHEME):
        return None
    path = url[len(FILE_SCHEME):]
    if not path.startswith("/"):
        raise ConfigError(f"{url}: a LUN file is lunfile:///ABSOLUTE/PATH")
    return path


def parse_url(url: str) -> LunUrl:
    """Split ``iscsi://ADDR[:PORT]/IQN/LUN[?block=BYTES&connections=K]``; a malformed URL is
    a ``ConfigError`` naming it. ``block``: bytes per READ command (a multiple of 512 up to
    4 MiB; default 64 KiB as the seed's miners read); ``connections``: commands in flight (1..64,
    default 4).

    >>> parse_url("iscsi://10.0.0.3/iqn.2026-11.org.clusterlab:t1.shared/1")
    LunUrl(portal='10.0.0.3:3260', iqn='iqn.2026-11.org.clusterlab:t1.shared', lun=1, block=65536, connections=4)
    >>> str(parse_url("iscsi://10.0.0.3/iqn.2026-11.org.clusterlab:t1.shared/1?block=262144"))
    'iscsi://10.0.0.3:3260/iqn.2026-11.org.clusterlab:t1.shared/1?block=262144'
    """
    rest = url[len("iscsi://"):] if isinstance(url, str) and url.startswith("iscsi://") else None
    rest, _, query = rest.partition("?") if rest else (rest, "", "")
    options = {}
    for kv in query.split("&") if query else []:
        key, _, value = kv.partition("=")
        limits = {"block": (512, 4 << 20), "connections": (1, 64)}.get(key)
        if limits is None or not value.isdigit() or not limits[0] <= int(value) <= limits[1] or (
                key == "block" and int(value) % 512):
            raise ConfigError(f"{url}: bad option {kv!r} (block=BYTES, a multiple of 512 up to 4194304; "
                              "connections=1..64)")
        options[key] = int(value)
    parts = rest.split("/") if rest else []
    if len(parts) != 3 or not all(parts) or not parts[2].isdigit() or not parts[1].startswith("iqn."):
        raise ConfigError(f"{url}: an iSCSI source is iscsi://ADDR[:PORT]/IQN/LUN (IQN starting 'iqn.', LUN a number)")
    portal = parts[0] if ":" in parts[0] else f"{parts[0]}:3260"
    host, _, port = portal.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{url}: bad portal {parts[0]!r} (ADDR or ADDR:PORT)")
    return LunUrl(portal, parts[1], int(parts[2]), **options)


def pack_header(regions: list, layout: str = "fimi") -> bytes:
    """The header block for partitions at ``regions``: [(offset, length)] for ``fimi``,
    [Region] with transactions and dropped duplicates for ``packed``.

    >>> h = pack_header([(65536, 10), (131072, 5)])
    >>> len(h), unpack_header(h)
    (4096, [(65536, 10), (131072, 5)])
    >>> read_header(pack_header([Region(65536, 7, 3, 0)], "packed"))
    LunHeader(version=2, regions=[Region(offset=65536, length=7, transactions=3, dropped=0)])
    """
    version = check_layout(layout)
    limit = MAX_PARTS if version == FIMI_VERSION else MAX_PACKED_PARTS
    if not 1 <= len(regions) <= limit:
        raise ConfigError(f"a LUN of layout {layout} holds 1..{limit} partitions, got {len(regions)}")
    if version == FIMI_VERSION:
        body = MAGIC + struct.pack("<II", version, len(regions)) + b"".join(
            struct.pack("<QQ", r.offset, r.length) if isinstance(r, Region) else struct.pack("<QQ", *r)
            for r in regions)
    else:
        body = MAGIC + struct.pack("<IIII", version, len(regions), 1, 0) + b"".join(
            struct.pack("<QQQQ", r.offset, r.length, r.transactions, r.dropped) for r in regions)
    return body.ljust(HEADER_BYTES, b"\0")


def read_header(block: bytes, where: str = "the LUN") -> LunHeader:
    """The header of either version; ``ConfigError`` (one line, naming ``where``) when
    ``block`` is not one this reader knows."""
    if len(block) < 24 or block[:8] != MAGIC:
        raise ConfigError(f"{where}: no clusterlab partition header (write_partitions lays the data out first)")
    version, n = struct.unpack_from("<II", block, 8)
    if version == FIMI_VERSION and 1 <= n <= MAX_PARTS and len(block) >= 16 + 16 * n:
        return LunHeader(version, [Region(*struct.unpack_from("<QQ", block, 16 + 16 * i)) for i in range(n)])
    if version == PACKED_VERSION and 1 <= n <= MAX_PACKED_PARTS and len(block) >= 24 + 32 * n:
        (encoding,) = struct.unpack_from("<I", block, 16)
        if encoding not in ENCODINGS:
            raise ConfigError(f"{where}: partition header version 2 names encoding {encoding}, not one this "
                              f"reader knows ({', '.join(f'{k}: {v}' for k, v in ENCODINGS.items())})")
        return LunHeader(version, [Region(*struct.unpack_from("<QQQQ", block, 24 + 32 * i)) for i in range(n)])
    raise ConfigError(f"{where}: partition header version {version} with {n} partitions is not readable here "
                      f"(version 1: fimi, up to {MAX_PARTS} partitions; 2: packed, up to {MAX_PACKED_PARTS})")


def unpack_header(block: bytes, where: str = "the LUN") -> list[tuple[int, int]]:
    """[(offset, length)] of the partitions (either version); ``ConfigError`` when ``block``
    is not a header."""
    return [(r.offset, r.length) for r in read_header(block, where).regions]


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
    """LUN size that holds partitions of ``lengths`` bytes of FIMI text in either layout (a
    packed partition is at most one byte longer than its text: a varint takes no more bytes
    than the id's decimal digits and the separators go; only a last line without a newline
    gains its count's byte)."""
    off, n = layout([k + 1 for k in lengths])[-1]
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


def _open(url: LunUrl, connections: int | None = None):
    from clusterlab.storage.iscsi import open_lun

    try:
        return open_lun(url.portal, url.iqn, url.lun, connections=connections or url.connections)
    except OSError as e:
        raise ConfigError(f"{url}: {e}") from None


_SESSIONS: dict = {}  # (url, rank, thread) -> a logged-in Lun kept for the rank's next read (rescans)


@contextlib.contextmanager
def _session(u: LunUrl, rank: int):
    """A LUN logged in for rank ``rank`` of this thread and its header block: the one kept from
    the rank's previous read when it still answers (as a kernel initiator stays logged in
    between reads), else a new login. Kept for the next read when the caller finishes cleanly,
    closed when it fails; all are closed when the process exits."""
    key = (u, rank, threading.get_ident())
    lun = _SESSIONS.pop(key, None)
    header = None
    if lun is not None:
        try:
            header = lun.read(0, HEADER_BYTES)
        except OSError:  # the target went away or restarted since: log in again
            lun.close()
            lun = None
    if lun is None:
        lun = _open(u)
    ok = False
    try:
        if header is None:
            header = lun.read(0, HEADER_BYTES)
        yield lun, header
        ok = True
    finally:
        if ok:
            _SESSIONS[key] = lun
        else:
            lun.close()


@atexit.register
def _close_sessions(timeout: float = 2.0) -> None:
    """Log the kept sessions out, giving up after ``timeout`` s: a target that is gone (its
    testbed removed) never answers the logout, and the process must still exit (the closing
    thread is a daemon; the kernel closes its sockets)."""
    luns = list(_SESSIONS.values())
    _SESSIONS.clear()

    def close_all() -> None:
        for lun in luns:
            with contextlib.suppress(Exception):
                lun.close()

    t = threading.Thread(target=close_all, name="lun-logout", daemon=True)
    t.start()
    t.join(timeout)


def _packed_partitions(path, parts: int):
    """Each partition of FIMI file ``path`` as the transactions a rank reading it locally gets
    (``clusterlab.data.read_partition``), packed: yields (bytes, transactions, dropped)."""
    from clusterlab import _core
    from clusterlab.data import read_partition

    for r in range(parts):
        b = read_partition(os.fspath(path), r, parts, format="fimi")
        yield _core.pack_baskets(b.offsets, b.items), len(b), int(b.duplicates_dropped)


def _partition_data(path, parts: int, version: int, block: int):
    """(regions, chunks): the layout's regions, and per region an iterator of its bytes."""
    if version == PACKED_VERSION:
        packed = list(_packed_partitions(path, parts))
        spots = layout([len(p) for p, _, _ in packed])
        regions = [Region(o, n, t, d) for (o, n), (_, t, d) in zip(spots, packed, strict=True)]
        return regions, [iter([p]) if p else iter([]) for p, _, _ in packed]
    ranges = partition_ranges(path, parts)

    def text(start: int, end: int):
        with open(path, "rb") as f:
            f.seek(start)
            pos = start
            while pos < end:
                chunk = f.read(min(block, end - pos))
                if not chunk:
                    raise ConfigError(f"{path}: shorter than its partition index says")
                yield chunk
                pos += len(chunk)

    return [Region(o, n) for o, n in layout([e - s for s, e in ranges])], [text(s, e) for s, e in ranges]


def write_partitions(url: str, path, parts: int, block: int = 1 << 20, layout: str = "packed") -> list[Region]:
    """Write FIMI file ``path``'s ``parts`` partitions to the LUN at ``url`` (or the local file
    of a ``lunfile://`` URL) in ``layout`` ``packed`` (version 2) or ``fimi`` (version 1, the
    text). The header goes last, so a LUN whose copy was interrupted has none (a local file is
    written atomically). Returns the regions."""
    version = check_layout(layout)
    limit = MAX_PARTS if version == FIMI_VERSION else MAX_PACKED_PARTS
    if not 1 <= parts <= limit:
        raise ConfigError(f"a LUN of layout {layout} holds 1..{limit} partitions, got {parts}")
    local = file_path(url)
    u = None if local else parse_url(url)
    regions, chunks = _partition_data(path, parts, version, block)
    need = lun_bytes_needed([r.length for r in regions])
    if local:
        from clusterlab._atomic import atomic_open

        with atomic_open(local, "wb") as f:
            f.write(bytes(HEADER_BYTES))
            for r, data in zip(regions, chunks, strict=True):
                f.seek(r.offset)
                for chunk in data:
                    f.write(chunk)
            f.truncate(need)
            f.seek(0)
            f.write(pack_header(regions, layout))
        return regions
    with _open(u, 1) as lun:
        if need > lun.size:
            raise ConfigError(f"{url}: the LUN has {lun.size} bytes; {path} in {parts} partitions needs {need}")
        lun.write(0, bytes(HEADER_BYTES))
        for r, data in zip(regions, chunks, strict=True):
            pos = r.offset
            for chunk in data:
                for k in range(0, len(chunk), block):  # at most ``block`` bytes per WRITE
                    piece = chunk[k:k + block]
                    lun.write(pos, piece + bytes(-len(piece) % lun.block_length))
                    pos += len(piece)
        lun.write(0, pack_header(regions, layout))
    return regions


def _segments(lun, off: int, length: int, block: int, segment: int, timeout: float):
    """The bytes of ``lun`` at ``off..off+length`` as ``segment``-byte pieces, in order, each
    read (``block``-byte commands over the LUN's sessions) by a thread of its own while the
    caller works on the previous one. Closing the generator early stops that thread."""
    import queue

    pieces: queue.Queue = queue.Queue(maxsize=2)  # one being used, one read ahead
    stop = threading.Event()

    def reader() -> None:
        try:
            for pos in range(off, off + length, segment):
                if stop.is_set():
                    return
                n = min(segment, off + length - pos)
                pieces.put(lun.read(pos, n, block if n > block else 0))
            pieces.put(None)
        except BaseException as e:  # handed to the caller, who raises it
            pieces.put(e)

    t = threading.Thread(target=reader, name="lun-readahead", daemon=True)
    t.start()
    try:
        while True:
            try:
                piece = pieces.get(timeout=timeout)
            except queue.Empty:
                raise ConfigError(f"no data from the LUN in {timeout:g} s") from None
            if piece is None:
                return
            if isinstance(piece, BaseException):
                raise piece
            yield piece
    finally:
        stop.set()
        while t.is_alive():  # unblock a reader waiting on a full queue, then let it finish
            try:
                pieces.get(timeout=0.1)
            except queue.Empty:
                pass
        t.join(timeout)


def read_rank_bytes(url: str, rank: int, size: int, block: int | None = None) -> bytes:
    """The stored bytes of partition ``rank`` of ``size`` (FIMI text or packed, as the layout
    has them), read in ``block``-byte commands (default: the URL's), several in flight."""
    with _rank_pieces(url, rank, size, block, segment=1 << 62) as (_, _, pieces):
        return b"".join(pieces)


def _file_pieces(f, off: int, length: int, segment: int):
    """The bytes of open file ``f`` at ``off..off+length`` in ``segment``-byte pieces."""
    for pos in range(off, off + length, segment):
        n = min(segment, off + length - pos)
        piece = os.pread(f.fileno(), n, pos)
        if len(piece) != n:
            raise ConfigError(f"{f.name}: ends inside partition data at byte {pos + len(piece)}")
        yield piece


def _region(header: LunHeader, where: str, rank: int, size: int, block_length: int, total: int) -> Region:
    if len(header.regions) != size:
        raise ConfigError(f"{where}: the LUN holds {len(header.regions)} partitions, the job has {size} ranks "
                          f"(write_partitions with parts={size})")
    r = header.regions[rank]
    padded = -(-r.length // block_length) * block_length
    if r.offset % block_length or r.offset + padded > total:
        raise ConfigError(f"{where}: partition {rank} ({r.offset}+{r.length}) is outside the LUN's {total} bytes")
    return r


@contextlib.contextmanager
def _rank_pieces(url: str, rank: int, size: int, block: int | None, segment: int):
    """(header, region, pieces) of partition ``rank``: the pieces its bytes arrive in (see
    ``_segments``; the last is cut to the length) from the LUN or the local file."""
    if size < 1 or not 0 <= rank < size:
        raise ConfigError(f"rank {rank} is outside 0..{size - 1}")
    local = file_path(url)
    if local:
        try:
            f = open(local, "rb")
        except OSError as e:
            raise ConfigError(f"{url}: cannot read: {e.strerror or e}") from None
        with f:
            header = read_header(os.pread(f.fileno(), HEADER_BYTES, 0), url)
            r = _region(header, url, rank, size, 1, os.fstat(f.fileno()).st_size)
            yield header, r, _file_pieces(f, r.offset, r.length, segment)
        return
    u = parse_url(url)
    block = block or u.block
    with _session(u, rank) as (lun, header_block):
        header = read_header(header_block, str(u))
        r = _region(header, str(u), rank, size, lun.block_length, lun.size)

        def pieces():
            if r.length == 0:
                return
            padded = -(-r.length // lun.block_length) * lun.block_length
            left = r.length
            try:
                with contextlib.closing(_segments(lun, r.offset, padded, block, max(block, segment // block * block),
                                                  timeout=120.0)) as segs:
                    for piece in segs:
                        yield piece[:left] if len(piece) > left else piece
                        left -= len(piece)
            except OSError as e:
                raise ConfigError(f"{u}: reading partition {rank}: {e}") from None

        with contextlib.closing(pieces()) as gen:
            yield header, r, gen


def parse_pieces(pieces, where: str):
    """FIMI text arriving as ``pieces`` (bytes cut anywhere) parsed into one ``Baskets``,
    whole lines at a time as they arrive: the same as parsing the joined text; a parse error
    names ``where`` and the line counted from the first piece.

    >>> parse_pieces([b"1 2\\n3", b" 4\\n", b"5"], "x").to_lists()
    [[1, 2], [3, 4], [5]]
    """
    import numpy as np

    from clusterlab import _core
    from clusterlab.data.baskets import Baskets
    from clusterlab.data.io import _wrap_parse_error

    offs, items, dropped, lines, n_items = [np.zeros(1, np.int64)], [], 0, 0, 0
    carry = b""

    def parse(text: bytes) -> None:
        nonlocal dropped, lines, n_items
        try:
            o, i, d = _core.parse_fimi(text)
        except _core.BasketParseError as e:
            message, line, column = e.args
            e.args = (message, line + lines, column)
            raise _wrap_parse_error(where, e) from None
        offs.append(o[1:] + n_items)
        items.append(i)
        n_items += i.size
        dropped += d
        # Every line ending in a newline is one transaction (an empty one too), so the lines
        # parsed are the transactions (scanning the text for newlines cost 5 ms per 10 MB).
        lines += o.size - 1

    for piece in pieces:
        # One copy of a piece's whole lines (parse_fimi takes bytes), none of the piece itself:
        # the line cut by the previous piece is joined on its own.
        first = piece.find(b"\n") + 1
        if not first:
            carry += piece
            continue
        if carry:
            parse(carry + piece[:first])
        else:
            first = 0
        cut = piece.rfind(b"\n") + 1  # whole lines now; the rest waits for the next piece
        if cut > first:
            parse(piece if first == 0 and cut == len(piece) else piece[first:cut])
        carry = piece[cut:]
    if carry:
        parse(carry)
    return Baskets._trusted(np.concatenate(offs), np.concatenate(items) if items else np.zeros(0, np.uint32),
                            None, dropped)


def decode_pieces(pieces, region: Region, where: str):
    """Packed bytes of ``region`` arriving as ``pieces`` (cut anywhere) decoded into one
    ``Baskets`` as they arrive (in Rust, without the GIL); malformed bytes are a one-line
    ``ConfigError`` naming ``where`` and the byte's offset in the partition.

    >>> from clusterlab import _core
    >>> import numpy as np
    >>> data = _core.pack_baskets(np.array([0, 2, 2, 3]), np.array([1, 5, 7], np.uint32))
    >>> decode_pieces([data[:2], data[2:]], Region(65536, len(data), 3, 0), "x").to_lists()
    [[1, 5], [], [7]]
    """
    from clusterlab import _core
    from clusterlab.data.baskets import Baskets

    dec = _core.PackedDecoder(region.length)
    try:
        for piece in pieces:
            dec.feed(piece)
        offsets, items = dec.finish(region.transactions)
    except _core.PackedFormatError as e:
        message, offset = e.args
        raise ConfigError(f"{where}, byte {offset}: {message}") from None
    return Baskets._trusted(offsets, items, None, region.dropped or 0)


def read_rank_baskets(url: str, rank: int, size: int, block: int | None = None, segment: int = SEGMENT):
    """Rank ``rank``'s transactions from the LUN (the same ``Baskets`` as
    ``clusterlab.data.read_partition`` of the file the LUN was written from), either layout.

    ``block``: bytes per READ command (default: the URL's). Read and decode overlap: the
    partition arrives in ``segment``-byte pieces, read ahead by a thread while what has
    arrived is parsed (text) or decoded (packed), both without the GIL, so the rank's read
    takes about the longer of the two, not their sum."""
    with _rank_pieces(url, rank, size, block, segment) as (header, region, pieces):
        where = f"{url} (partition {rank})"
        if header.version == PACKED_VERSION:
            return decode_pieces(pieces, region, where)
        return parse_pieces(pieces, where)


def check_url(url: str, nodes: int) -> str:
    """Refuse a malformed URL before any rank starts (a LUN is only reachable from the
    testbed's hosts, so its header is checked by the ranks; a LUN file's existence is checked
    here); returns the format."""
    local = file_path(url)
    if local is None:
        parse_url(url)
    elif not os.path.isfile(local):
        raise ConfigError(f"{url}: no such file")
    if not 1 <= nodes <= MAX_PARTS:
        raise ConfigError(f"{url}: a LUN holds 1..{MAX_PARTS} partitions, the job has {nodes} ranks")
    return "fimi"
