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


def parse(raw: bytes) -> dict[str, int]:
    """Fields of a raw ``tcp_info`` buffer; fields past its end are left out.

    >>> parse(bytes(104))["total_retrans"], "bytes_acked" in parse(bytes(104))
    (0, False)
    """
    out = {}
    for name, st, off in _COMPILED:
        if off + st.size <= len(raw):
            out[name] = st.unpack_from(raw, off)[0]
    return out


def read(sock: socket.socket) -> dict[str, int]:
    """``TCP_INFO`` of ``sock`` as a dict (empty if the socket is not TCP or already closed)."""
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, MAX_LEN)
    except OSError:
        return {}
    return parse(raw)
