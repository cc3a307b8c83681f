"""Broadcast over a point-to-multipoint channel (seed 002's MPI over ATM): the root sends each
frame once to the communicator's multicast group (``comm.multicast()``: the switch replicates it
to every member's port), made reliable by NAKs and retransmission over the point-to-point
connections, as the seed's protocol did (data on the point-to-multipoint VC, control messages
on the bidirectional point-to-point ones; a retransmission by whichever is shorter).

Per call:

1. the root sends every receiver the call's header over point-to-point (size, frames, frame
   size, window, dtype and shape);
2. window by window (``window`` frames, a quarter of the smallest receive buffer the group
   reported, so a window waits in the kernel if a receiver is not scheduled), the root sends
   each frame to the group, then an end-of-window datagram;
3. each receiver takes frames until it has the window (or the end marker, or nothing came for
   ``IDLE`` seconds) and reports the frames it misses (a NAK list; empty: it has them all);
4. the root answers each report: done, or retry with the frames only this receiver misses
   attached (point-to-point), and sends the frames several receivers miss to the group again
   (then the end marker); receivers that retried report again; at most ``MAX_ROUNDS`` rounds.

A datagram is ``<IIII`` (call number, frame index, frame count, window end) + data; the receiver
keeps one only if it belongs to this call, its index is in range and its length is what that
frame must have (the group already checked the sender's MAC and the size), so stray and late
datagrams of earlier calls are ignored. The algorithm never sees a socket; the transport's
counters (``comm.multicast().counters``) count frames sent, received, rejected and resent.

The cost model prices it (``pattern``) but never picks it (``AUTO = False``): it needs a
multicast channel, which only testbed hosts and the in-process backend have.

>>> from clusterlab.comm.inproc import run_threads
>>> data = bytes(range(256)) * 300
>>> run_threads(lambda c: run(c, data if c.rank == 1 else None, root=1) == data, 4, multicast_loss=0.2)
[True, True, True, True]
"""

from __future__ import annotations

import math
import struct

import numpy as np

from clusterlab.comm.collectives._common import TAG, Pattern, as_sent, check_root
from clusterlab.comm.collectives._pack import pack, unpack
from clusterlab.comm.errors import ProtocolError

OP, NAME = "bcast", "p2mp"
AUTO = False           # never the cost model's pick: it needs a multicast channel
FRAME = struct.Struct("<IIII")
END = 0xFFFFFFFF       # frame index of the end-of-window marker
IDLE = 0.2             # seconds a receiver waits for a frame before reporting what it misses
MAX_ROUNDS = 64        # report rounds per window before giving up
MIN_WINDOW = 4


def _flat(data):
    arr = np.asarray(data) if isinstance(data, (np.ndarray, np.generic)) else None
    if arr is not None:
        return arr, np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    mv = memoryview(data).cast("B") if memoryview(data).c_contiguous else memoryview(bytes(data))
    return None, np.frombuffer(mv, np.uint8)


def _frame(flat: np.ndarray, call: int, i: int, count: int, hi: int, chunk: int):
    return FRAME.pack(call, i, count, hi), flat[i * chunk:(i + 1) * chunk]


def run(comm, data, root: int = 0):
    check_root(comm, root)
    if comm.size == 1:
        if data is None:
            raise ValueError("the root of a broadcast must pass data")
        return data
    group = comm.multicast()  # every rank, in call order: opened on first use
    group.calls = call = (group.calls + 1) & 0xFFFFFFFF
    if comm.rank == root:
        if data is None:
            raise ValueError("the root of a broadcast must pass data")
        _send(comm, group, call, data)
        return data
    return _receive(comm, group, call, root)


def _send(comm, group, call: int, data) -> None:
    arr, flat = _flat(data)
    size = flat.size
    chunk = group.max_payload - FRAME.size
    count = -(-size // chunk)
    window = max(MIN_WINDOW, group.receive_buffer // (4 * group.max_payload))
    shape = list(arr.shape) if arr is not None else []
    template = np.empty(0, arr.dtype) if arr is not None else b""
    head = pack([np.array([call, size, count, chunk, window, len(shape), *shape], dtype=np.int64), template])
    peers = [r for r in range(comm.size) if r != comm.rank]
    for r in peers:
        comm.send(r, head, TAG)
    for lo in range(0, count, window):
        hi = min(lo + window, count)
        for i in range(lo, hi):
            group.send(*_frame(flat, call, i, count, hi, chunk))
        group.send(FRAME.pack(call, END, count, hi))
        waiting = peers
        for _ in range(MAX_ROUNDS):
            need: dict[int, np.ndarray] = {}
            for r in waiting:
                got = comm.recv(r, TAG)
                if not isinstance(got, np.ndarray) or got.dtype != np.int64 or got.ndim != 1 or got.size < 1 \
                        or int(got[0]) != call:
                    raise ProtocolError(f"p2mp bcast: rank {r} sent a malformed report")
                missing = got[1:]
                if missing.size and (missing.min() < lo or missing.max() >= hi):
                    raise ProtocolError(f"p2mp bcast: rank {r} reported frames outside the window {lo}..{hi - 1}")
                if missing.size:
                    need[r] = np.unique(missing)
            idx, counts = (np.unique(np.concatenate(list(need.values())), return_counts=True) if need
                           else (np.empty(0, np.int64), np.empty(0, np.int64)))
            again = idx[counts >= 2]  # missed by several receivers: once more to the group
            once = set(idx[counts == 1].tolist())  # missed by one: straight to it
            for r in waiting:
                if r not in need:
                    comm.send(r, np.array([call, 0], dtype=np.int64), TAG)
                    continue
                direct = [i for i in need[r].tolist() if i in once]
                comm.send(r, np.array([call, 1, *direct], dtype=np.int64), TAG)
                for i in direct:
                    comm.send(r, flat[i * chunk:(i + 1) * chunk], TAG)
                group.counters["resent_direct"] += len(direct)
            if not need:
                break
            for i in again.tolist():
                group.send(*_frame(flat, call, i, count, hi, chunk))
            group.counters["resent_multicast"] += len(again)
            if again.size:
                group.send(FRAME.pack(call, END, count, hi))
            waiting = list(need)
        else:
            raise ProtocolError(f"p2mp bcast: ranks {waiting} still miss frames of {lo}..{hi - 1} "
                                f"after {MAX_ROUNDS} rounds")


def _receive(comm, group, call: int, root: int):
    items = unpack(comm.recv(root, TAG))
    if len(items) != 2 or not isinstance(items[0], np.ndarray) or items[0].size < 6:
        raise ProtocolError(f"p2mp bcast: malformed header from root {root}")
    h = [int(x) for x in items[0]]
    got_call, size, count, chunk, window, ndim = h[:6]
    shape = tuple(h[6:6 + ndim])
    if got_call != call or size < 0 or chunk < 1 or window < 1 or count != -(-size // chunk) or len(shape) != ndim \
            or chunk > group.max_payload - FRAME.size:
        raise ProtocolError(f"p2mp bcast: inconsistent header from root {root}")
    out = np.empty(size, np.uint8)
    have = np.zeros(count, dtype=bool)

    def length(i: int) -> int:
        return min(chunk, size - i * chunk)

    for lo in range(0, count, window):
        hi = min(lo + window, count)
        while True:
            while not have[lo:hi].all():
                d = group.recv(IDLE)
                if d is None:
                    break
                if len(d) < FRAME.size:
                    continue
                c, i, n, end = FRAME.unpack_from(d)
                if c != call or n != count:
                    continue  # a late datagram of an earlier call, or not ours
                if i == END:
                    if end == hi:
                        break
                    continue
                if i < count and len(d) - FRAME.size == length(i) and not have[i]:
                    out[i * chunk:i * chunk + length(i)] = np.frombuffer(d, np.uint8, offset=FRAME.size)
                    have[i] = True
            missing = np.flatnonzero(~have[lo:hi]) + lo
            comm.send(root, np.concatenate([[call], missing]).astype(np.int64), TAG)
            ctl = comm.recv(root, TAG)
            if not isinstance(ctl, np.ndarray) or ctl.dtype != np.int64 or ctl.ndim != 1 or ctl.size < 2 \
                    or int(ctl[0]) != call or int(ctl[1]) not in (0, 1):
                raise ProtocolError(f"p2mp bcast: malformed answer from root {root}")
            if int(ctl[1]) == 0:
                break
            for i in ctl[2:].tolist():
                if not lo <= i < hi:
                    raise ProtocolError(f"p2mp bcast: root {root} sent frame {i} outside the window")
                seg = comm.recv(root, TAG)
                if len(seg) != length(i):
                    raise ProtocolError(f"p2mp bcast: frame {i} from root {root} has {len(seg)} bytes, "
                                        f"expected {length(i)}")
                out[i * chunk:i * chunk + length(i)] = np.frombuffer(seg, np.uint8) \
                    if not isinstance(seg, np.ndarray) else seg.reshape(-1).view(np.uint8)
                have[i] = True
    return as_sent(out, items[1], size, shape, "p2mp bcast")


def pattern(m: float, n: int) -> Pattern:
    """The root sends the data once (the switch replicates it) in frames of 9120 bytes (MTU
    9180) and an end marker (one window up to several MiB), plus a header, a report and an
    answer per receiver; nothing lost. Sent bytes and messages, datagrams included; the group's
    opening (once per communicator, or per call with per-call connections) is not priced."""
    frames = max(1, math.ceil(m / 9120)) + 1
    return Pattern(hops=4, sends=3 * (n - 1) + frames, bytes=m, peers=n - 1,
                   total=m, total_messages=3 * (n - 1) + frames)
