"""Compute replay: a recorded NPB run's messages re-sent over another network, each rank's
compute between messages replaced by a sleep of the CPU time it measured.

Two cores cannot compute for 8 ranks: a real 8-rank run here measures the CPU, not the
network. ``record`` runs the kernel for real (threads; every rank's compute segments measured
as its own thread's CPU time, what the rank needs on a core of its own) and keeps each rank's
call sequence; ``replay_rank`` (a rank function) sleeps each segment and sends/receives the
same messages (same peer, tag and size, zero-filled) on whatever communicator it runs on, so 8
ranks on two cores load the network as 8 machines would. What it does not model: cache and
memory effects of a core of one's own (the CPU time was measured on a shared one) and the
CPU cost of communication (the replay's own sends and receives pay it again).

>>> rec = record("ep", "S", 2)
>>> rec["verified"], len(rec["events"]), rec["nprocs"]
(True, 2, 2)
>>> from clusterlab.comm.inproc import run_threads
>>> out = run_threads(replay_rank, 2, rec["events"])
>>> out[0]["seconds"] >= 0 and out[0]["messages"] == len(rec["events"][0])
True
"""

from __future__ import annotations

import json
import time

import numpy as np

from clusterlab.errors import ConfigError

SLEEP_FLOOR = 200e-6  # shorter segments are carried over (sleep() itself costs ~50-100 us)


def record(kernel: str, cls: str, n: int, timeout: float = 1800.0) -> dict:
    """Run ``kernel`` class ``cls`` on ``n`` in-process ranks with tracing: the result record
    (``seconds``, ``verified``, ``ranks`` ...) with ``events`` (per rank, its calls) and
    ``cpu_bound``: the ranks' compute took longer on the wall clock than on their CPUs by more
    than a tenth (they waited for a core)."""
    from clusterlab.npb import run

    res = run(kernel, cls, n=n, events=True, timeout=timeout)
    d = res.to_dict(events=True)
    wall = sum(r["compute_s"] for r in res.ranks)
    cpu = sum(r["compute_cpu_s"] for r in res.ranks)
    d["cpu_bound"] = bool(wall > 1.1 * cpu)
    d["compute_cpu_s_max"] = max(r["compute_cpu_s"] for r in res.ranks)
    return d


def save_events(events: list[list], path: str) -> str:
    """Write a recording's events (JSON) for ranks in other processes: command lines cannot
    carry thousands of calls per rank."""
    from clusterlab._atomic import atomic_open

    with atomic_open(path) as f:
        json.dump(events, f)
    return path


def replay_rank(comm, events: list[list] | str, compute_scale: float = 1.0) -> dict:
    """Rank ``comm.rank``'s part of a replay: its recorded calls with the compute slept
    (``events``: per rank, or the path of a file ``save_events`` wrote). Returns the replay's
    wall seconds (between two barriers, as NPB times its region)."""
    if isinstance(events, str):
        with open(events) as f:
            events = json.load(f)
    mine = events[comm.rank]
    if len(events) != comm.size:
        raise ConfigError(f"the recording has {len(events)} ranks, this job {comm.size}")
    payloads: dict[int, np.ndarray] = {}
    comm.barrier()
    t0, started = time.perf_counter(), time.time()
    carry = 0.0
    for cpu_before, kind, peer, tag, size in ((e[1], e[2], e[3], e[4], e[5]) for e in mine):
        carry += cpu_before * compute_scale
        if carry >= SLEEP_FLOOR:
            s0 = time.perf_counter()
            time.sleep(carry)
            carry -= time.perf_counter() - s0  # an oversleep is taken off the next segment
        if kind == "send":
            buf = payloads.get(size)
            if buf is None:
                buf = payloads[size] = np.zeros(size, dtype=np.uint8)
            comm.send(peer, buf, tag)
        else:
            comm.recv(peer, tag)
    if carry > 0:
        time.sleep(carry)
    comm.barrier()
    return {"rank": comm.rank, "seconds": time.perf_counter() - t0, "messages": len(mine), "started": started}
