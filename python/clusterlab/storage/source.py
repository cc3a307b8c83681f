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

import atexit
import contextlib
import struct
import threading
from dataclasses import dataclass

from clusterlab.errors import ConfigError

MAGIC = b"CLABPART"
VERSION = 1
HEADER_BYTES = 4096
ALIGN = 64 << 10
READ_BLOCK = 64 << 10  # the seed's miners read in 64 KB blocks
CONNECTIONS = 4  # commands in flight per rank
SEGMENT = 2 << 20  # read ahead in pieces of this size, parsed while the next one arrives
MAX_PARTS = (HEADER_BYTES - 16) // 16


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
    """Whether ``path`` names an iSCSI source.

    >>> is_url("iscsi://10.0.0.3:3260/iqn.2026-11.org.clusterlab:t1.shared/1"), is_url("a.dat")
    (True, False)
    """
    return isinstance(path, str) and path.startswith("iscsi://")


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
    rest = url[len("iscsi://"):] if is_url(url) else None
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
    """The FIMI bytes of partition ``rank`` of ``size`` on the LUN, read in ``block``-byte
    commands (default: the URL's ``block``), several in flight."""
    with contextlib.closing(_rank_pieces(url, rank, size, block, segment=1 << 62)) as pieces:
        return b"".join(pieces)


def _rank_pieces(url: str, rank: int, size: int, block: int | None, segment: int):
    """Partition ``rank``'s bytes as pieces (see ``_segments``); the last is cut to the length."""
    u = parse_url(url)
    block = block or u.block
    if size < 1 or not 0 <= rank < size:
        raise ConfigError(f"rank {rank} is outside 0..{size - 1}")
    with _session(u, rank) as (lun, header):
        regions = unpack_header(header, str(u))
        if len(regions) != size:
            raise ConfigError(f"{u}: the LUN holds {len(regions)} partitions, the job has {size} ranks "
                              f"(write_partitions with parts={size})")
        off, n = regions[rank]
        if n == 0:
            return
        padded = -(-n // lun.block_length) * lun.block_length
        if off % lun.block_length or off + padded > lun.size:
            raise ConfigError(f"{u}: partition {rank} ({off}+{n}) is outside the LUN's {lun.size} bytes")
        segment = max(block, segment // block * block)
        left = n
        try:
            for piece in _segments(lun, off, padded, block, segment, timeout=120.0):
                yield piece[:left] if len(piece) > left else piece
                left -= len(piece)
        except OSError as e:
            raise ConfigError(f"{u}: reading partition {rank}: {e}") from None


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


def read_rank_baskets(url: str, rank: int, size: int, block: int | None = None, segment: int = SEGMENT):
    """Rank ``rank``'s transactions from the LUN (the same ``Baskets`` as
    ``clusterlab.data.read_partition`` of the file the LUN was written from).

    ``block``: bytes per READ command (default: the URL's). Read and parse overlap: the partition arrives in ``segment``-byte pieces, read ahead by a
    thread while the whole lines received so far are parsed (both without the GIL), so the
    rank's read takes about the longer of the two, not their sum."""
    with contextlib.closing(_rank_pieces(url, rank, size, block, segment)) as pieces:
        return parse_pieces(pieces, f"{url} (partition {rank})")


def check_url(url: str, nodes: int) -> str:
    """Refuse a malformed URL before any rank starts (the LUN itself is only reachable from
    the testbed's hosts, so its header is checked by the ranks); returns the format."""
    parse_url(url)
    if not 1 <= nodes <= MAX_PARTS:
        raise ConfigError(f"{url}: a LUN holds 1..{MAX_PARTS} partitions, the job has {nodes} ranks")
    return "fimi"
