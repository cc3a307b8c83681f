"""Ping-pong between two ranks, NetPIPE's method.

Message sizes are the powers of two and each perturbed by -3 and +3 bytes (NetPIPE's default
perturbation, which exposes buffer-size cliffs a power-of-two sweep would hide). For every size
rank 0 sends, rank 1 echoes; the number of repetitions is adapted so one trial lasts about
``trial_time`` seconds (from the previous size's time, as NetPIPE does); the best of ``trials``
trials is reported. Columns: ``bytes``, ``mbps`` (Mbit/s), ``usec`` (half a round trip).

``write_np_out`` writes the rows in NetPIPE's three-column ``np.out`` format (bytes, Mbit/s,
seconds), so NetPIPE's plotting scripts read both.

>>> sizes(1, 64)
[1, 2, 4, 5, 7, 8, 11, 13, 16, 19, 29, 32, 35, 61, 64]
>>> from clusterlab.comm.inproc import run_threads
>>> rows = run_threads(pingpong, 2, [1, 1000], trial_time=0.001)[0]
>>> [r["bytes"] for r in rows], all(r["usec"] > 0 and r["mbps"] > 0 for r in rows)
([1, 1000], True)
"""

from __future__ import annotations

import struct
import time

import numpy as np

from clusterlab._atomic import atomic_open
from clusterlab.errors import ConfigError

CTRL_TAG = 1 << 29  # repetition counts, rank 0 -> rank 1
DATA_TAG = (1 << 29) + 1


def sizes(lo: int = 1, hi: int = 1 << 20, perturbation: int = 3) -> list[int]:
    """Powers of two in [lo, hi] and each +-perturbation (kept when inside [lo, hi])."""
    if lo < 1 or hi < lo:
        raise ConfigError(f"ping-pong sizes need 1 <= lo <= hi, got {lo}..{hi}")
    out = set()
    k = 1
    while k <= hi:
        for s in (k - perturbation, k, k + perturbation):
            if lo <= s <= hi:
                out.add(s)
        k <<= 1
    return sorted(out)


def pingpong(comm, sizes: list[int], trial_time: float = 0.05, trials: int = 3, min_reps: int = 2,
             max_reps: int = 20000, peer: int = 1) -> list[dict] | None:
    """Run the ping-pong between rank 0 and ``peer``; rank 0 returns the rows, others None
    (ranks other than 0 and ``peer`` do nothing)."""
    if comm.size < 2:
        raise ConfigError("ping-pong needs at least 2 ranks")
    if trials < 1 or not trial_time > 0:
        raise ConfigError(f"ping-pong needs trials >= 1 and trial time > 0 (got {trials}, {trial_time})")
    if comm.rank not in (0, peer):
        return None
    rows = []
    last_t = 20e-6
    for nb in sizes:
        buf = np.zeros(nb, dtype=np.uint8)  # a buffer, as NetPIPE sends (received in place, no extra copy)
        if comm.rank == 0:
            reps = int(min(max_reps, max(min_reps, trial_time / (2 * last_t))))
            comm.send(peer, struct.pack("<QQ", reps, trials), CTRL_TAG)
            # one untimed exchange: connection warm-up, buffer allocation
            comm.send(peer, buf, DATA_TAG)
            comm.recv(peer, DATA_TAG)
            best = float("inf")
            for _ in range(trials):
                t0 = time.perf_counter()
                for _ in range(reps):
                    comm.send(peer, buf, DATA_TAG)
                    comm.recv(peer, DATA_TAG)
                best = min(best, (time.perf_counter() - t0) / reps / 2)
            last_t = best
            rows.append({"bytes": nb, "mbps": nb * 8 / best / 1e6, "usec": best * 1e6, "reps": reps})
        else:
            reps, ntrials = struct.unpack("<QQ", comm.recv(0, CTRL_TAG))
            for _ in range(1 + reps * ntrials):
                comm.send(0, comm.recv(0, DATA_TAG), DATA_TAG)
    return rows if comm.rank == 0 else None


def write_np_out(rows: list[dict], path) -> None:
    """NetPIPE's ``np.out``: bytes, Mbit/s, seconds (half round trip), one size per line."""
    with atomic_open(path) as f:
        for r in rows:
            f.write(f"{r['bytes']:8d} {r['mbps']:f} {r['usec'] * 1e-6:12.8f}\n")


def burst(comm, count: int = 2000, trials: int = 3, peer: int = 1) -> float | None:
    """Seconds per message when rank 0 sends ``count`` 1-byte messages back to back (``peer``
    acknowledges the last): the per-message CPU overhead (LogP's o) that messages pay even
    when they overlap in flight. Best of ``trials``; rank 0 returns it, others None.

    >>> from clusterlab.comm.inproc import run_threads
    >>> run_threads(burst, 2, 50)[0] > 0
    True
    """
    if comm.rank not in (0, peer):
        return None
    one = np.zeros(1, dtype=np.uint8)
    best = float("inf")
    for _ in range(trials):
        if comm.rank == 0:
            t0 = time.perf_counter()
            for _ in range(count):
                comm.send(peer, one, DATA_TAG)
            comm.recv(peer, CTRL_TAG)
            best = min(best, (time.perf_counter() - t0) / count)
        else:
            for _ in range(count):
                comm.recv(0, DATA_TAG)
            comm.send(0, b"k", CTRL_TAG)
    return best if comm.rank == 0 else None


def calibrate(comm, sizes: list[int], trial_time: float = 0.05) -> dict | None:
    """What the cost model is fitted from: ping-pong rows and the burst overhead (rank 0)."""
    rows = pingpong(comm, sizes, trial_time)
    o = burst(comm)
    return {"rows": rows, "overhead": o} if comm.rank == 0 else None
