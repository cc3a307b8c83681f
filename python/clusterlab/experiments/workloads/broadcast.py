"""Seed 000's all-to-all broadcast (barrier, ``size`` bytes to every other rank, barrier), as a
study workload over ``clusterlab.bench.alltoall_broadcast``.

One job per point runs the warm-up and the timed rounds on one mesh (the connections and their
RTT estimates carry over from round to round, as in a program that broadcasts repeatedly).
Each round is a row: ``seconds`` (slowest rank, undilated), ``retransmissions``, ``timeouts``,
their per-node averages (seed 000 Figs. 4-5 plot retransmissions per node, cluster average),
per-host lists and switch drops on the testbed, the rank function's time attribution per rank
(``per_rank``) and the slowest rank's split as ``time_rto_wait`` / ``time_transfer``, and
whatever else the rank function measures.

>>> w = alltoall_broadcast(size="50KB")
>>> w.name, w.params["size"], w.params["order"]
('alltoall_broadcast', '50KB', 'same')
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile

from clusterlab.errors import ConfigError
from clusterlab.experiments.spec import Workload
from clusterlab.rendezvous.errors import CommError
from clusterlab.units import parse_duration, parse_size

# A round that waits out the longest backoff the kernel allows (MAX 120 s) still ends.
ROUND_TIMEOUT = 300.0


def alltoall_broadcast(size: str = "50KB", order: str = "same", round_timeout: str = "300s") -> Workload:
    """Every rank sends ``size`` bytes to every other rank between two barriers. ``order``:
    ``same`` (all start with rank 0: incast) or ``shifted`` (rank r starts with r+1).
    ``round_timeout`` (undilated): a round still unfinished then fails the point (a study that
    sweeps into a regime where flows never recover, e.g. synchronised retransmissions that lose
    the same cells every time, says so instead of waiting out the kernel's retries)."""
    if order not in ("same", "shifted"):
        raise ConfigError(f"order must be same or shifted, got {order!r}")
    if parse_size(size, "size") < 1:
        raise ConfigError(f"size must be at least 1 byte, got {size!r}")
    t = parse_duration(round_timeout, "round_timeout")
    if not 0 < t <= ROUND_TIMEOUT:
        raise ConfigError(f"round_timeout must be above 0 and at most {ROUND_TIMEOUT:g}s, got {round_timeout!r}")
    return Workload("alltoall_broadcast", {"size": size, "order": order, "round_timeout": round_timeout},
                    check=lambda p: alltoall_broadcast(**p) and None)


def memory_available() -> int | None:
    """MemAvailable of this machine in bytes (None if unknown)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_memory(nbytes: int, ranks: int) -> None:
    """Refuse a broadcast whose buffers do not fit: every rank holds its block and the blocks
    it receives from the others (ranks x size each, ranks^2 x size on this machine)."""
    need = nbytes * ranks * ranks
    avail = memory_available()
    if avail is not None and need > avail // 2:
        raise ConfigError(f"size {nbytes} bytes on {ranks} ranks needs about {need / 1e9:.3g} GB of buffers "
                          f"({ranks}^2 x size), more than half of the {avail / 1e9:.3g} GB this machine has free")


def execute(session, params: dict, reps: int, warmup: int):
    from clusterlab.bench.alltoall_broadcast import alltoall_broadcast as rank_fn

    nbytes = parse_size(params["size"])
    if params["order"] not in ("same", "shifted"):
        raise ConfigError(f"order must be same or shifted, got {params['order']!r}")
    if session.ranks < 2:
        raise ConfigError(f"the broadcast needs at least 2 ranks, got {session.ranks}")
    k = session.dilation
    per_round = parse_duration(params.get("round_timeout", "300s"), "round_timeout") * k
    fd, progress = tempfile.mkstemp(prefix="clusterlab-broadcast-", suffix=".jsonl")
    os.close(fd)
    try:
        out = session.run(rank_fn, nbytes, reps, params["order"], warmup, session.per_host_counters,
                          session.switch_ns, per_round, progress, timeout=60 + per_round * (reps + warmup))[0]
    except (KeyboardInterrupt, CommError):  # Ctrl-C, SIGTERM or a failed rank: the rounds rank 0 finished
        yield from _rows(_finished(progress), k, session)
        raise
    finally:
        with contextlib.suppress(OSError):
            os.unlink(progress)
    yield from _rows(out, k, session)


def _finished(path: str) -> list[dict]:
    out = []
    with contextlib.suppress(OSError), open(path) as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except ValueError:  # a line cut by the kill
                break
    return out


def _rows(out: list[dict], k: float, session):
    from clusterlab.bench.alltoall_broadcast import undilate

    n = session.ranks
    for row in undilate(out, k):
        per_rank = row.pop("ranks", None)  # the column "ranks" is the point's rank count
        if per_rank:
            row["per_rank"] = per_rank
            slowest = max(per_rank, key=lambda x: x["seconds"])  # its time is the round's
            row["time_rto_wait"] = slowest["rto_wait_s"]
            row["time_transfer"] = slowest["transfer_s"]
            row["max_rto_wait_seconds"] = max(x["rto_wait_s"] for x in per_rank)
        if session.per_host_counters:
            row["retransmissions_per_node"] = row["retransmissions"] / n
            row["timeouts_per_node"] = row["timeouts"] / n
        yield row
