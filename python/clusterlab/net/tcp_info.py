"""Read the kernel's ``struct tcp_info`` for a connected TCP socket (``getsockopt TCP_INFO``).

The layout is ``include/uapi/linux/tcp.h``; the kernel copies ``min(len, sizeof)`` bytes, so
an older kernel returns a prefix and fields beyond it are simply absent from the result.
Offsets (bytes), all little-endian on x86-64/arm64::

      0 u8  state, ca_state, retransmits, probes, backoff, options, wscale(4+4), app_limited
      8 u32 rto (us)          12 ato            16 snd_mss        20 rcv_mss
     24 u32 unacked           28 sacked         32 lost           36 retrans        40 fackets
     44 u32 last_data_sent    48 last_ack_sent  52 last_data_recv 56 last_ack_recv  (ms)
     60 u32 pmtu              64 rcv_ssthresh   68 rtt (us)       72 rttvar (us)
     76 u32 snd_ssthresh      80 snd_cwnd       84 advmss         88 reordering
     92 u32 rcv_rtt           96 rcv_space     100 total_retrans
    104 u64 pacing_rate      112 max_pacing_rate 120 bytes_acked  128 bytes_received
    136 u32 segs_out         140 segs_in       144 notsent_bytes  148 min_rtt
    152 u32 data_segs_in     156 data_segs_out 160 u64 delivery_rate
    168 u64 busy_time        176 rwnd_limited  184 sndbuf_limited (us)
    192 u32 delivered        196 delivered_ce  200 u64 bytes_sent 208 u64 bytes_retrans
    216 u32 dsack_dups       220 reord_seen    224 rcv_ooopack    228 snd_wnd   232 rcv_wnd
    236 u32 rehash           240 u16 total_rto 242 u16 total_rto_recoveries
    244 u32 total_rto_time (ms)  248 u32 received_ce   (6.7+: total_rto*; 6.18: AccECN to 280)

>>> import socket
>>> srv = socket.create_server(("127.0.0.1", 0))
>>> a = socket.create_connection(srv.getsockname()); b, _ = srv.accept()
>>> info = read(a)
>>> info["state"], info["rto_us"] > 0, STATES[info["state"]]
(1, True, 'ESTABLISHED')
>>> for s in (a, b, srv): s.close()
"""

from __future__ import annotations

import functools
import socket
import struct

# (name, struct code, offset). The names drop the ``tcpi_`` prefix; times keep their unit.
FIELDS: list[tuple[str, str, int]] = [
    ("state", "B", 0), ("ca_state", "B", 1), ("retransmits", "B", 2), ("probes", "B", 3),
    ("backoff", "B", 4), ("options", "B", 5),
    ("rto_us", "I", 8), ("ato_us", "I", 12), ("snd_mss", "I", 16), ("rcv_mss", "I", 20),
    ("unacked", "I", 24), ("sacked", "I", 28), ("lost", "I", 32), ("retrans", "I", 36),
    ("last_data_sent_ms", "I", 44), ("last_data_recv_ms", "I", 52),
    ("pmtu", "I", 60), ("rcv_ssthresh", "I", 64), ("rtt_us", "I", 68), ("rttvar_us", "I", 72),
    ("snd_ssthresh", "I", 76), ("snd_cwnd", "I", 80), ("advmss", "I", 84), ("reordering", "I", 88),
    ("rcv_rtt_us", "I", 92), ("rcv_space", "I", 96), ("total_retrans", "I", 100),
    ("pacing_rate", "Q", 104), ("bytes_acked", "Q", 120), ("bytes_received", "Q", 128),
    ("segs_out", "I", 136), ("segs_in", "I", 140), ("notsent_bytes", "I", 144), ("min_rtt_us", "I", 148),
    ("data_segs_in", "I", 152), ("data_segs_out", "I", 156), ("delivery_rate", "Q", 160),
    ("busy_time_us", "Q", 168), ("rwnd_limited_us", "Q", 176), ("sndbuf_limited_us", "Q", 184),
    ("delivered", "I", 192), ("bytes_sent", "Q", 200), ("bytes_retrans", "Q", 208),
    ("dsack_dups", "I", 216), ("reord_seen", "I", 220), ("rcv_ooopack", "I", 224),
    ("snd_wnd", "I", 228), ("rcv_wnd", "I", 232), ("rehash", "I", 236),
    ("total_rto", "H", 240), ("total_rto_recoveries", "H", 242), ("total_rto_time_ms", "I", 244),
]
_COMPILED = [(name, struct.Struct("<" + code), off) for name, code, off in FIELDS]
MAX_LEN = 512  # generous: the kernel never copies more than its own sizeof (280 on 6.18)

STATES = {1: "ESTABLISHED", 2: "SYN_SENT", 3: "SYN_RECV", 4: "FIN_WAIT1", 5: "FIN_WAIT2",
          6: "TIME_WAIT", 7: "CLOSE", 8: "CLOSE_WAIT", 9: "LAST_ACK", 10: "LISTEN", 11: "CLOSING"}


@functools.lru_cache(maxsize=16)
def _layout(length: int) -> tuple[tuple[str, ...], struct.Struct]:
    """The fields a buffer of ``length`` bytes holds, and one struct reading them all (pad bytes
    between them): a run's statistics read every peer connection at each pass boundary, 100
    peers at 100 ranks, and one unpack is ~10x fewer calls than one per field."""
    names, fmt, pos = [], "<", 0
    for name, st, off in _COMPILED:
        if off + st.size > length:
            break
        fmt += "x" * (off - pos) + st.format[1:]
        names.append(name)
        pos = off + st.size
    return tuple(names), struct.Struct(fmt)


def parse(raw: bytes) -> dict[str, int]:
    """Fields of a raw ``tcp_info`` buffer; fields past its end are left out.

    >>> parse(bytes(104))["total_retrans"], "bytes_acked" in parse(bytes(104))
    (0, False)
    """
    names, st = _layout(len(raw))
    return dict(zip(names, st.unpack_from(raw), strict=True))


def read(sock: socket.socket) -> dict[str, int]:
    """``TCP_INFO`` of ``sock`` as a dict (empty if the socket is not TCP or already closed)."""
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, MAX_LEN)
    except OSError:
        return {}
    return parse(raw)


# --- retransmission counters of a set of connections (time attribution) -----------------------
RTO_COUNTERS = ("total_retrans", "total_rto", "total_rto_recoveries", "total_rto_time_ms")


def rto_counters(socks) -> dict:
    """The cumulative retransmission counters of each connection, and its current RTO.

    ``socks``: a mapping ``key -> socket`` (or ``key -> TCP_INFO dict`` already read, e.g. a
    communicator's ``stats()["peers"][p]["tcp_info"]``), or an iterable (keys 0, 1, ...).
    Returns ``key -> {"total_retrans", "total_rto", "total_rto_recoveries",
    "total_rto_time_ms", "rto_us"}``; a closed socket, or a kernel older than 6.7 (no
    ``total_rto*``), gives the fields it has.

    >>> import socket
    >>> srv = socket.create_server(("127.0.0.1", 0))
    >>> a = socket.create_connection(srv.getsockname()); b, _ = srv.accept()
    >>> c = rto_counters({"peer": a})
    >>> c["peer"]["total_rto"], c["peer"]["rto_us"] > 0
    (0, True)
    >>> for s in (a, b, srv): s.close()
    """
    items = socks.items() if hasattr(socks, "items") else enumerate(socks)
    out = {}
    for key, s in items:
        info = s if isinstance(s, dict) else read(s)
        out[key] = {k: info[k] for k in RTO_COUNTERS + ("rto_us",) if k in info}
    return out


def rto_delta(before: dict, after: dict) -> dict:
    """What happened between two ``rto_counters`` readings of the same connections.

    ``per_connection``: each counter's increase; ``total``: their sums; ``rto_wait_s``: an
    estimate of the longest time one connection waited on retransmission timeouts (its
    ``total_rto_time`` increase, which the kernel counts from the first timeout of a recovery
    to its end, plus one current RTO per recovery for the wait before that first timeout).
    Connections send in parallel, so the longest one, not the sum, is what delays the sender.
    ``rto_time_per_recovery_s``: the longest time a connection spent per recovery after its first
    timeout (``total_rto_time`` over ``total_rto_recoveries``): a retransmission that gets through
    ends its recovery within a round trip; one that times out again waits twice the RTO first
    (exponential backoff), so a recovery longer than one RTO had a doubled timer.

    >>> b = {1: {"total_retrans": 2, "total_rto": 1, "total_rto_recoveries": 1, "total_rto_time_ms": 0, "rto_us": 8000}}
    >>> a = {1: {"total_retrans": 5, "total_rto": 3, "total_rto_recoveries": 2, "total_rto_time_ms": 30, "rto_us": 8000}}
    >>> d = rto_delta(b, a)
    >>> d["total"]["total_rto"], d["total"]["total_rto_time_ms"], d["rto_wait_s"]
    (2, 30, 0.038)
    """
    per, total, wait, episode = {}, dict.fromkeys(RTO_COUNTERS, 0), 0.0, 0.0
    for key, a in after.items():
        b = before.get(key, {})
        d = {k: a[k] - b.get(k, 0) for k in RTO_COUNTERS if k in a}
        per[key] = d
        for k, v in d.items():
            total[k] += v
        w = d.get("total_rto_time_ms", 0) / 1e3 + d.get("total_rto_recoveries", 0) * a.get("rto_us", 0) / 1e6
        wait = max(wait, w)
        if d.get("total_rto_recoveries", 0) > 0:
            episode = max(episode, max(0, d.get("total_rto_time_ms", 0)) / 1e3 / d["total_rto_recoveries"])
    return {"per_connection": per, "total": total, "rto_wait_s": round(wait, 6),
            "rto_time_per_recovery_s": round(episode, 6)}
