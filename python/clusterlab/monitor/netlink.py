"""A minimal rtnetlink client: interface counters (RTM_GETLINK, IFLA_STATS64) and qdisc
counters (RTM_GETQDISC, TCA_STATS) of one network namespace, without starting ``ip`` or ``tc``
(a process per sample per namespace would not keep up at 0.1 s with 100 hosts); and the
round-trip times of its established TCP connections (``SockDiag``: NETLINK_SOCK_DIAG, the
``tcp_info`` that ``ss -ti`` shows, in one dump).

A netlink socket belongs to the namespace it was created in, so the monitor creates one per
namespace (inside ``in_netns``) and keeps using it from anywhere.

>>> with Rtnl() as nl:            # the current namespace; works without root
...     links = nl.links()
>>> any(v["name"] == "lo" for v in links.values())
True
"""

from __future__ import annotations

import socket
import struct

NETLINK_ROUTE, NETLINK_SOCK_DIAG = 0, 4
SOCK_DIAG_BY_FAMILY, INET_DIAG_INFO = 20, 2
TCPF_ESTABLISHED = 1 << 1
_DIAG_REQ = struct.Struct("=BBBxI48x")  # inet_diag_req_v2: family, protocol, ext, pad, states, sockid (any)
_DIAG_MSG_LEN = 72  # inet_diag_msg: family state timer retrans, sockid (48: ports, addresses, if, cookie at 40), 5 u32
# tcp_info fields (clusterlab.net.tcp_info's offsets): rto, rtt, rttvar (us), segs_out, min_rtt (us)
_TCPI = ((8, "rto_us"), (68, "rtt_us"), (72, "rttvar_us"), (136, "segs_out"), (148, "min_rtt_us"))
RTM_GETLINK, RTM_GETQDISC = 18, 38
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
IFLA_IFNAME, IFLA_STATS64 = 3, 23
TCA_KIND, TCA_STATS = 1, 3
TC_H_ROOT = 0xFFFFFFFF
_NLH = struct.Struct("=IHHII")
_STATS64 = struct.Struct("=8Q")  # rx_packets tx_packets rx_bytes tx_bytes rx_errors tx_errors rx_dropped tx_dropped
_TCSTATS = struct.Struct("=QIIIIIII")  # bytes packets drops overlimits bps pps qlen backlog


def _attrs(buf: memoryview, off: int, end: int):
    while off + 4 <= end:
        ln, typ = struct.unpack_from("=HH", buf, off)
        if ln < 4:
            break
        yield typ & 0x3FFF, off + 4, off + ln
        off += (ln + 3) & ~3


class Rtnl:
    """A NETLINK_ROUTE socket in the current thread's namespace."""

    def __init__(self, timeout: float = 2.0, protocol: int = NETLINK_ROUTE):
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, protocol)
        self.sock.settimeout(timeout)
        self.sock.bind((0, 0))
        self.seq = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _dump(self, msg_type: int, body: bytes):
        self.seq += 1
        seq = self.seq
        self.sock.send(_NLH.pack(_NLH.size + len(body), msg_type, NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + body)
        while True:
            data = memoryview(self.sock.recv(1 << 20))
            off = 0
            while off + _NLH.size <= len(data):
                ln, typ, _flags, mseq, _pid = _NLH.unpack_from(data, off)
                if ln < _NLH.size:
                    return
                if mseq == seq:
                    if typ == NLMSG_DONE:
                        return
                    if typ == NLMSG_ERROR:
                        err = struct.unpack_from("=i", data, off + _NLH.size)[0]
                        if err:
                            raise OSError(-err, "netlink dump failed")
                        return
                    yield typ, data, off + _NLH.size, off + ln
                off += (ln + 3) & ~3

    def links(self) -> dict[int, dict]:
        """ifindex -> {name, rx_packets, tx_packets, rx_bytes, tx_bytes, rx_dropped, tx_dropped}."""
        out = {}
        for _typ, data, off, end in self._dump(RTM_GETLINK, struct.pack("=BxHiII", socket.AF_UNSPEC, 0, 0, 0, 0)):
            ifindex = struct.unpack_from("=i", data, off + 4)[0]
            d = {"name": ""}
            for a, s, e in _attrs(data, off + 16, end):
                if a == IFLA_IFNAME:
                    d["name"] = bytes(data[s:e]).split(b"\0")[0].decode()
                    if "rx_bytes" in d:
                        break
                elif a == IFLA_STATS64 and e - s >= _STATS64.size:
                    v = _STATS64.unpack_from(data, s)
                    d.update(rx_packets=v[0], tx_packets=v[1], rx_bytes=v[2], tx_bytes=v[3],
                             rx_dropped=v[6], tx_dropped=v[7])
                    if d["name"]:
                        break
            out[ifindex] = d
        return out

    def root_qdiscs(self) -> dict[int, dict]:
        """ifindex -> {kind, bytes, packets, drops, overlimits, qlen, backlog} of the root qdisc."""
        out = {}
        for _typ, data, off, end in self._dump(RTM_GETQDISC, struct.pack("=BxxxiIII", socket.AF_UNSPEC, 0, 0, 0, 0)):
            _fam, ifindex, _handle, parent, _info = struct.unpack_from("=BxxxiIII", data, off)
            if parent != TC_H_ROOT:
                continue
            d = {"kind": ""}
            for a, s, e in _attrs(data, off + 20, end):
                if a == TCA_KIND:
                    d["kind"] = bytes(data[s:e]).split(b"\0")[0].decode()
                elif a == TCA_STATS and e - s >= _TCSTATS.size:
                    v = _TCSTATS.unpack_from(data, s)
                    d.update(bytes=v[0], packets=v[1], drops=v[2], overlimits=v[3], qlen=v[6], backlog=v[7])
            out[ifindex] = d
        return out


class SockDiag(Rtnl):
    """A NETLINK_SOCK_DIAG socket in the current thread's namespace: ``tcp()`` dumps its
    established TCP connections with their ``tcp_info`` (no root needed for one's own namespace).

    >>> import socket
    >>> srv = socket.create_server(("127.0.0.1", 0))
    >>> a = socket.create_connection(srv.getsockname()); b, _ = srv.accept()
    >>> a.sendall(b"x" * 1000); _ = b.recv(1000)
    >>> with SockDiag() as d:
    ...     mine = [c for c in d.tcp() if c["sport"] == a.getsockname()[1]]
    >>> len(mine), mine[0]["rtt_us"] > 0, mine[0]["rto_us"] >= 200000, mine[0]["dst"]
    (1, True, True, '127.0.0.1')
    >>> for s in (a, b, srv): s.close()
    """

    def __init__(self, timeout: float = 2.0):
        super().__init__(timeout, NETLINK_SOCK_DIAG)

    def tcp(self, families=(socket.AF_INET, socket.AF_INET6)) -> list[dict]:
        """Each established TCP connection: ``cookie`` (the kernel's id of the socket), ``sport``,
        ``dport``, IPv4's ``src`` and ``dst`` addresses, and ``rto_us rtt_us rttvar_us segs_out
        min_rtt_us`` from its ``tcp_info``."""
        out = []
        for fam in families:
            req = _DIAG_REQ.pack(fam, socket.IPPROTO_TCP, 1 << (INET_DIAG_INFO - 1), TCPF_ESTABLISHED)
            for _typ, data, off, end in self._dump(SOCK_DIAG_BY_FAMILY, req):
                if end - off < _DIAG_MSG_LEN:
                    continue
                sport, dport = struct.unpack_from(">HH", data, off + 4)
                d = {"cookie": struct.unpack_from("=Q", data, off + 4 + 40)[0], "sport": sport, "dport": dport}
                if fam == socket.AF_INET:  # sockid: src at 4, dst at 20 (the first 4 of 16 bytes)
                    d["src"] = socket.inet_ntoa(bytes(data[off + 8:off + 12]))
                    d["dst"] = socket.inet_ntoa(bytes(data[off + 24:off + 28]))
                for a, s, e in _attrs(data, off + _DIAG_MSG_LEN, end):
                    if a == INET_DIAG_INFO and e - s >= 152:
                        for o, name in _TCPI:
                            d[name] = struct.unpack_from("=I", data, s + o)[0]
                if "rtt_us" in d:
                    out.append(d)
        return out


class QdiscDrops:
    """Callable giving the cumulative drops of each interface's root qdisc in namespace ``ns``
    (the testbed's switch: its port buffers). The socket is made inside ``ns`` once; calls
    then work from any namespace. Needs root when ``ns`` is given.

    >>> d = QdiscDrops(None)
    >>> isinstance(d(), dict)
    True
    """

    def __init__(self, ns: str | None):
        from clusterlab.net.netns import in_netns

        with in_netns(ns):
            self.nl = Rtnl()
        self.names = {i: d["name"] for i, d in self.nl.links().items()}

    def __call__(self) -> dict[str, int]:
        return {self.names.get(i, f"if{i}"): q.get("drops", 0) for i, q in self.nl.root_qdiscs().items()
                if q.get("kind") not in ("noqueue", "")}
