"""Rate-paced broadcast (seed 002): the root sends to every receiver at the rate of the slowest
one, so that no receiver's buffer overflows; lost data is TCP's to retransmit.

Seed 002 chooses "the optimal send rate from the node's receive speed, the communication
buffer size and the data size" and, for a broadcast, "the rate of the node with the lowest
receive speed". The rule used here (:func:`paced_rate`): a receiver that drains ``r`` bytes/s
into a buffer of ``B`` bytes, fed at ``R > r``, fills it at ``R - r``; it must not overflow
before the ``D`` bytes are through, i.e. ``(R - r) * D / R <= B``, so
``R_i = r_i * D / (D - B_i)`` (no limit when ``D <= B_i``), and the root sends at
``min_i R_i``.

Steps: the root announces the size; sends the first ``PROBE`` segments to everyone unpaced;
each receiver measures how fast they arrived (its receive speed) and replies with it and its
receive buffer (``comm.receive_buffer``); the root sets the rate through the communicator
(``comm.pace``: on TCP the kernel paces the connection, elsewhere sends are delayed) and sends
the rest, segment by segment to every receiver in turn (the root replicates, as a
point-to-multipoint connection would in the switch). The algorithm never sees a socket.

>>> paced_rate([100e6, 40e6], [1 << 20, 1 << 20], 8 << 20) / 1e6   # 40 MB/s * 8 / 7
45.714285714285715
>>> paced_rate([40e6], [16 << 20], 8 << 20)                          # it all fits: no limit
inf
>>> from clusterlab.comm.inproc import run_threads
>>> data = bytes(range(256)) * 1000
>>> run_threads(lambda c: run(c, data if c.rank == 0 else None) == data, 3)
[True, True, True]
"""

from __future__ import annotations

import math
import time

import numpy as np

from clusterlab.comm.collectives._common import TAG, Pattern, as_sent, check_root
from clusterlab.comm.collectives._pack import pack, unpack
from clusterlab.comm.errors import ProtocolError

OP, NAME = "bcast", "paced"
SEGMENT = 64 * 1024   # bytes per message
PROBE = 4             # segments sent unpaced to measure each receiver's speed


def paced_rate(rates, buffers, size: float) -> float:
    """The send rate (bytes/s) at which no receiver overflows while ``size`` bytes go through:
    ``min_i rates[i] * size / (size - buffers[i])`` over receivers whose buffer cannot hold it
    all (``inf`` when every buffer can, or a speed is unknown: ``inf``)."""
    best = math.inf
    for r, b in zip(rates, buffers, strict=True):
        if size > b and math.isfinite(r):
            best = min(best, r * size / (size - b))
    return best


def _segments(n: int) -> int:
    return -(-n // SEGMENT)


def run(comm, data, root: int = 0):
    check_root(comm, root)
    n = comm.size
    if comm.rank == root:
        if data is None:
            raise ValueError("the root of a broadcast must pass data")
        if n == 1:
            return data
        arr = np.asarray(data) if isinstance(data, (np.ndarray, np.generic)) else None
        flat = np.ascontiguousarray(arr).reshape(-1).view(np.uint8) if arr is not None else \
            np.frombuffer(memoryview(data).cast("B") if memoryview(data).c_contiguous else bytes(data), np.uint8)
        size = flat.size
        template = np.empty(0, arr.dtype) if arr is not None else b""
        shape = list(arr.shape) if arr is not None else []
        head = pack([np.array([size, len(shape), *shape], dtype=np.int64), template])
        peers = [r for r in range(n) if r != root]
        for r in peers:
            comm.send(r, head, TAG)
        nseg, probe = _segments(size), min(PROBE, _segments(size))
        for k in range(probe):
            for r in peers:
                comm.send(r, flat[k * SEGMENT:(k + 1) * SEGMENT], TAG)
        rates, buffers = [], []
        for r in peers:
            got = comm.recv(r, TAG)
            if not isinstance(got, np.ndarray) or got.dtype != np.float64 or got.shape != (2,):
                raise ProtocolError(f"paced bcast: rank {r} sent a malformed speed report")
            rates.append(float(got[0]))
            buffers.append(float(got[1]))
        rest = size - probe * SEGMENT
        rate = paced_rate(rates, buffers, rest) if rest > 0 else math.inf
        if math.isfinite(rate):
            for r in peers:
                comm.pace(r, rate)
        try:
            for k in range(probe, nseg):
                for r in peers:
                    comm.send(r, flat[k * SEGMENT:(k + 1) * SEGMENT], TAG)
        finally:
            if math.isfinite(rate):
                for r in peers:
                    comm.pace(r, None)
        return data
    items = unpack(comm.recv(root, TAG))
    if len(items) != 2 or not isinstance(items[0], np.ndarray) or items[0].size < 2:
        raise ProtocolError(f"paced bcast: malformed announcement from root {root}")
    size, ndim = int(items[0][0]), int(items[0][1])
    shape = tuple(int(x) for x in items[0][2:2 + ndim])
    if size < 0 or len(shape) != ndim:
        raise ProtocolError(f"paced bcast: malformed announcement from root {root}")
    out = np.empty(size, np.uint8)
    nseg, probe = _segments(size), min(PROBE, _segments(size))
    stamps = []
    for k in range(nseg):
        if k == probe:  # the probe is in: report this rank's receive speed and buffer
            speed = (probe - 1) * SEGMENT / (stamps[-1] - stamps[0]) if probe >= 2 and stamps[-1] > stamps[0] \
                else math.inf
            comm.send(root, np.array([speed, comm.receive_buffer(root) or 0], dtype=np.float64), TAG)
        seg = comm.recv(root, TAG)
        if k < probe:
            stamps.append(time.perf_counter())
        want = min(SEGMENT, size - k * SEGMENT)
        if len(seg) != want:
            raise ProtocolError(f"paced bcast: segment {k} from root {root} has {len(seg)} bytes, expected {want}")
        out[k * SEGMENT:k * SEGMENT + want] = np.frombuffer(seg, np.uint8) if not isinstance(seg, np.ndarray) else seg
    if nseg == probe:  # everything fitted in the probe (or nothing to send): report anyway
        comm.send(root, np.array([math.inf, comm.receive_buffer(root) or 0], dtype=np.float64), TAG)
    return as_sent(out, items[1], size, shape, "paced bcast")


def pattern(m: float, n: int) -> Pattern:
    seg = _segments(int(m))
    per_peer = 2 + seg  # announcement, report, segments
    return Pattern(hops=3 + max(seg - PROBE, 0), sends=(n - 1) * per_peer, bytes=(n - 1) * m, peers=n - 1,
                   total=(n - 1) * (m + 100), total_messages=(n - 1) * per_peer)
