"""Packet-length histogram (seed 004's traffic monitor: packets and bytes per 64-byte length
bucket), counted from an AF_PACKET ring.

One TPACKET_V3 ring per capture point; a classic BPF filter drops outgoing copies in the kernel
and keeps only 64 bytes of each packet, so the ring holds thousands of packets per block and
the counting thread touches each packet once, reading its length and interface from the ring
header. On the testbed the capture point is the switch namespace: every packet a host sends
enters the switch once on that host's port, so each packet is counted exactly once, per
sending host (the analogue of seed 004's monitor bridging the link). On a two-site testbed a
frame to the far site enters the switch a second time, from the WAN line's port: those ports
are filtered out (the line counts what it carried itself). In a local run it is
``lo`` (each packet counted once, on receive).

What it can drop: when the counting thread falls behind and the ring (``ring_mb``) fills,
the kernel drops packets from the capture (never from the traffic) and counts them;
``drops`` reports that count, recorded as metric ``capture_drops``.

>>> bucket_of(60), bucket_of(64), bucket_of(9014), bucket_of(10**6)
(0, 1, 140, 1024)
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import select
import socket
import struct
import threading
import time

import numpy as np

from clusterlab import _core
from clusterlab.net.netns import in_netns

BUCKET = 64
NBUCKETS = 1025  # 0..65535 in 64-byte steps, the last one for anything longer
SOL_PACKET = 263
PACKET_RX_RING, PACKET_STATISTICS, PACKET_VERSION = 5, 6, 10
TPACKET_V3 = 2
TP_STATUS_USER = 1
ETH_P_ALL = 0x0003
SO_ATTACH_FILTER = 26
PACKET_OUTGOING = 4
# Frames entering the switch from a WAN line's ports were counted already, on the sending host's
# port, before they crossed the line: counting them again would double every WAN frame. The
# line counts what it carried itself (``clusterlab.monitor.wan``).
SKIP_IFACES = ("wan0", "wan1")  # cluster.testbed.link.WAN_PORTS


def bpf_filter(skip_ifindex: list[int]) -> list[tuple[int, int, int, int]]:
    """Classic BPF: drop outgoing copies and frames arriving on ``skip_ifindex``; keep 64 bytes.

    >>> len(bpf_filter([])), len(bpf_filter([7, 8]))
    (4, 7)
    """
    prog = []
    if skip_ifindex:
        prog.append((0x20, 0, 0, 0xFFFFF008))  # ld ifindex (SKF_AD_IFINDEX)
        for k, idx in enumerate(skip_ifindex):  # jeq idx -> the final "ret 0"
            prog.append((0x15, len(skip_ifindex) - k + 2, 0, idx))
    # ld pkttype; jeq OUTGOING -> drop; ret 64 (snap length); ret 0 (drop)
    return prog + [(0x20, 0, 0, 0xFFFFF004), (0x15, 1, 0, PACKET_OUTGOING), (0x06, 0, 0, 64), (0x06, 0, 0, 0)]


def bucket_of(length: int) -> int:
    """The 64-byte bucket of a frame length (Ethernet header included)."""
    return min(length // BUCKET, NBUCKETS - 1)


class PacketCapture:
    """Count frames per (interface, length bucket) in a thread. ``ns``: namespace to capture
    in (None: the current one); ``iface``: only this interface (None: all of them)."""

    def __init__(self, ns: str | None = None, iface: str | None = None, ring_mb: int = 32,
                 block_kb: int = 256):
        self.ns, self.iface = ns, iface
        self.block_size = block_kb * 1024
        self.block_nr = max(2, ring_mb * 1024 // block_kb)
        self.counts: dict[int, list[int]] = {}
        self.nbytes: dict[int, list[int]] = {}
        self.drops = 0
        self.seen = 0
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cur = 0
        with in_netns(ns):
            self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            self.names = {i: n for i, n in socket.if_nameindex()}
        try:
            self._setup()
        except BaseException:
            self.sock.close()
            raise

    def _setup(self) -> None:
        s = self.sock
        skip = sorted(i for i, n in self.names.items() if n in SKIP_IFACES)
        ins = bpf_filter(skip)
        prog = b"".join(struct.pack("=HBBI", *x) for x in ins)
        self._prog = ctypes.create_string_buffer(prog, len(prog))
        s.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER,
                     struct.pack("@HP", len(ins), ctypes.addressof(self._prog)))
        s.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V3)
        frame = 2048
        req = struct.pack("=7I", self.block_size, self.block_nr, frame, self.block_size * self.block_nr // frame,
                          20, 0, 0)  # retire a partly filled block after 20 ms
        s.setsockopt(SOL_PACKET, PACKET_RX_RING, req)
        if self.iface is not None:
            s.bind((self.iface, ETH_P_ALL))
        self.ring = mmap.mmap(s.fileno(), self.block_size * self.block_nr, mmap.MAP_SHARED,
                              mmap.PROT_READ | mmap.PROT_WRITE)

    def start(self) -> PacketCapture:
        self._thread = threading.Thread(target=self._loop, name=f"capture-{self.ns or 'local'}", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        ring, bs = self.ring, self.block_size
        poller = select.poll()
        poller.register(self.sock.fileno(), select.POLLIN | select.POLLERR)
        self._cur = cur = 0
        unpack = struct.unpack_from
        while not self._stop.is_set():
            base = cur * bs
            status = unpack("=I", ring, base + 8)[0]
            if not status & TP_STATUS_USER:
                poller.poll(100)
                continue
            num, first = unpack("=II", ring, base + 12)
            # the block's packets counted in Rust: the former Python loop per packet took 8.5x the
            # CPU (2M small packets on loopback in 4 s: the monitor's process 1.36 -> 0.16 CPU-s),
            # CPU the emulation needs at 100 hosts (2.3M packets a point; the ring overflowed)
            local = _core.tpacket_block_counts(np.frombuffer(ring, dtype=np.uint8, count=bs, offset=base), first, num)
            struct.pack_into("=I", ring, base + 8, 0)  # hand the block back to the kernel
            with self.lock:
                self.seen += num
                for ifindex, b, n, nb in local:
                    if ifindex not in self.counts:
                        self.counts[ifindex] = [0] * NBUCKETS
                        self.nbytes[ifindex] = [0] * NBUCKETS
                    self.counts[ifindex][b] += n
                    self.nbytes[ifindex][b] += nb
            self._cur = cur = (cur + 1) % self.block_nr

    def drain(self, timeout: float = 2.0) -> None:
        """Wait until the counting thread has caught up with what the kernel captured so far
        (at most ``timeout`` s; a busy machine can starve the thread)."""
        time.sleep(0.05)  # the kernel retires a partly filled block after 20 ms
        end = time.monotonic() + timeout
        while time.monotonic() < end and self._thread is not None and self._thread.is_alive():
            if not struct.unpack_from("=I", self.ring, self._cur * self.block_size + 8)[0] & TP_STATUS_USER:
                return
            time.sleep(0.01)

    def snapshot(self) -> dict[str, tuple[list[int], list[int]]]:
        """Cumulative (packets, bytes) per bucket for each interface name; updates ``drops``."""
        with contextlib.suppress(OSError):
            _pk, drops, _fr = struct.unpack("=III", self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 12))
            self.drops += drops  # the kernel resets its counter on every read
        with self.lock:
            return {self._name(i): (list(c), list(self.nbytes[i])) for i, c in self.counts.items()}

    def _name(self, ifindex: int) -> str:
        if ifindex not in self.names:
            with contextlib.suppress(OSError), in_netns(self.ns):
                self.names.update({i: n for i, n in socket.if_nameindex()})
        return self.names.get(ifindex, f"if{ifindex}")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        with contextlib.suppress(Exception):
            self.ring.close()
        self.sock.close()
