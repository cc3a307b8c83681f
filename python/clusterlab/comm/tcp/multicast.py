"""The TCP mesh's point-to-multipoint group: UDP datagrams to an IP multicast group on the
testbed's switch, which replicates each frame to every member's port (the ATM cell switch floods
a group address to the site's ports as a point-to-multipoint VC; the bridge floods or snoops).

Safety, as the project holds it for anything read off a network:

- **Only inside a testbed host, never on loopback:** a rank whose mesh address is a loopback
  address, or whose process is not in one of the testbed's named network namespaces
  (``/run/netns/clab-*``), refuses to open a group (``why_not``), so datagrams only travel on a
  testbed's links.
  TTL 1 (never routed), no loopback of our own datagrams, the group address administratively
  scoped (239.255.0.0/16) and drawn at random per group, its port too.
- **Authenticated and size-checked:** every datagram is ``MAC (16 bytes) || payload``, the MAC
  a keyed BLAKE2b of the payload with the group's 32-byte key (drawn by rank 0 and sent to every
  rank over the authenticated mesh); a datagram shorter than the MAC, longer than
  ``MAC + max_payload`` (the interface's MTU less IPv4 and UDP headers), or whose MAC does not
  match is dropped and counted (``counters["rejected"]``). Payloads are returned as bytes and
  never unpickled; what they mean is the algorithm's to check.
- **Every wait has a timeout:** ``recv(timeout)``.

The receive buffer is raised to ``RCVBUF`` bytes (``SO_RCVBUFFORCE`` where allowed, as root in a
testbed host) so that a burst of frames waits in the kernel while a rank is not scheduled.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import socket
import time

from clusterlab.comm.multicast import Group

MAC = 16
# The testbed's namespaces (``cluster.testbed.topo.PREFIX`` + "-"; a test checks they agree: the
# transport may not import the cluster layer above it).
TESTBED_NS_PREFIX = "clab-"
RCVBUF = 16 << 20
SNDBUF = 1 << 20
_IP_MTU = 14
_SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)


def _mac(key: bytes, data) -> bytes:
    return hashlib.blake2b(data, key=key, digest_size=MAC).digest()


def why_not(local: str) -> str | None:
    """Why a rank whose mesh address is ``local`` may not open a group here (None: it may)."""
    import ipaddress

    try:
        addr = ipaddress.ip_address(local)
    except ValueError:
        return f"mesh address {local!r} is not an IP address"
    if addr.version != 4:
        return f"mesh address {local} is not IPv4"
    if addr.is_loopback or addr.is_unspecified:
        return f"the mesh runs on {local} (loopback): multicast needs hosts on a testbed switch"
    name = testbed_namespace()
    if name is None:
        return ("this process is not in a testbed host's network namespace (one of /run/netns/"
                f"{TESTBED_NS_PREFIX}*): multicast only runs inside testbed hosts")
    return None


def testbed_namespace(run_netns: str = "/run/netns") -> str | None:
    """The name of the testbed namespace this process is in (a namespace ``ip netns`` made,
    named with the testbed's prefix), or None."""
    try:
        mine = os.stat("/proc/self/ns/net")
        names = os.listdir(run_netns)
    except OSError:
        return None
    for n in names:
        if n.startswith(TESTBED_NS_PREFIX):
            try:
                st = os.stat(os.path.join(run_netns, n))
            except OSError:
                continue
            if (st.st_ino, st.st_dev) == (mine.st_ino, mine.st_dev):
                return n
    return None


def interface_mtu(local: str, peer: str) -> int:
    """The path MTU from ``local`` towards ``peer`` (the interface's MTU on a testbed's link)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind((local, 0))
        s.connect((peer, 9))
        return int(s.getsockopt(socket.IPPROTO_IP, _IP_MTU))
    finally:
        s.close()


class UdpGroup(Group):
    """One rank's end: a UDP socket bound to (``group``, ``port``), a member of the group on the
    interface of ``local``; datagrams of at most ``mtu - 28`` bytes (IPv4 + UDP headers)."""

    def __init__(self, group: str, port: int, key: bytes, local: str, mtu: int):
        super().__init__()
        if len(key) != 32:
            raise ValueError("a group key has 32 bytes")
        self._key, self._dest = bytes(key), (group, port)
        self.max_payload = mtu - 28 - MAC
        if self.max_payload < 256:
            raise OSError(f"MTU {mtu} leaves too little room for a datagram")
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((group, port))
            s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton(group) + socket.inet_aton(local))
            s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(local))
            s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
            s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
            try:
                s.setsockopt(socket.SOL_SOCKET, _SO_RCVBUFFORCE, RCVBUF)
            except OSError:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SNDBUF)
        except BaseException:
            s.close()
            raise
        self._sock = s
        self.receive_buffer = s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) // 2
        self._buf = bytearray(MAC + self.max_payload + 1)  # one byte more: an oversized datagram shows

    def send(self, *parts) -> None:
        views = [memoryview(p).cast("B") for p in parts]
        size = sum(v.nbytes for v in views)
        if size > self.max_payload:
            raise ValueError(f"a datagram of {size} bytes is above the group's {self.max_payload}")
        h = hashlib.blake2b(key=self._key, digest_size=MAC)
        for v in views:
            h.update(v)
        self._sock.sendmsg([h.digest(), *views], [], 0, self._dest)
        self.counters["sent"] += 1
        self.counters["bytes_sent"] += size

    def recv(self, timeout: float) -> bytes | None:
        s = self._sock
        deadline = time.monotonic() + float(timeout)
        while True:
            t = deadline - time.monotonic()
            if t <= 0:
                return None
            s.settimeout(t)
            try:
                n = s.recv_into(self._buf)
            except (TimeoutError, BlockingIOError):
                return None
            view = memoryview(self._buf)
            if MAC < n <= MAC + self.max_payload and hmac.compare_digest(_mac(self._key, view[MAC:n]), view[:MAC]):
                self.counters["received"] += 1
                return bytes(view[MAC:n])
            self.counters["rejected"] += 1

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def opener(local: str, peer: str):
    """``multicast.open_group``'s opener for a rank at ``local`` (``peer``: another rank's address,
    for the MTU)."""
    def open_(group: str, port: int, key: bytes) -> UdpGroup:
        return UdpGroup(group, port, key, local, interface_mtu(local, peer))
    return open_


__all__ = ["MAC", "UdpGroup", "interface_mtu", "opener", "why_not"]
