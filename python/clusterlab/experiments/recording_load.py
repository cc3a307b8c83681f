"""How much of the machine other processes took while a compute replay's recording ran.

A recording's per-rank CPU gaps are replayed as they were measured: if other work shared the
cores during the recording, the gaps come out too long and every replay of it inherits that.
``measure()`` brackets the recording: the machine's busy CPU seconds (/proc/stat: user, nice,
system, irq, softirq, steal) minus the recording job's own (this process's ``RUSAGE_SELF`` and
its reaped children's ``RUSAGE_CHILDREN``: the ranks are children the launcher waits for) are
the foreign CPU seconds; ``foreign_cpu_share`` is them over wall seconds x CPUs. Foreign work
only slows the recording where it needed the cores the ranks ran on: a job that kept fewer cores
busy than the machine has (one rank on two cores) left the others to it. ``displaced_cpu_share``
counts the foreign CPU beyond those spare cores (the job's cores: its ranks, or the cores its
CPU seconds show it kept busy if more, at most the machine's). The numbers go to
``recording.json`` in the recording's directory; a displaced share above ``FOREIGN_CPU_WARN``
makes the recording noisy (a warning on stderr, a line in the study's report).

>>> before = Snapshot(ticks={"user": 1000, "system": 100, "irq": 0, "softirq": 0, "steal": 0},
...                   wall=10.0, self_cpu=1.0, children_cpu=5.0, load1=0.5)
>>> after = Snapshot(ticks={"user": 1700, "system": 200, "irq": 0, "softirq": 0, "steal": 0},
...                  wall=15.0, self_cpu=1.5, children_cpu=10.5, load1=1.9)
>>> m = foreign_load(before, after, cpus=2, hz=100, ranks=4)
>>> m["machine_busy_cpu_s"], m["job_cpu_s"], m["foreign_cpu_share"], m["displaced_cpu_share"]
(8.0, 6.0, 0.2, 0.2)
>>> foreign_load(before, after, cpus=2, hz=100, ranks=1)["displaced_cpu_share"]  # the other core was free
0.0
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import time

from clusterlab._atomic import atomic_open
from clusterlab.monitor.procfs import parse_cpu

FOREIGN_CPU_WARN = 0.10  # a recording with more of the machine's CPU going elsewhere is noisy
RECORDING_FILE = "recording.json"
# ``parse_cpu``'s user already includes nice
BUSY_FIELDS = ("user", "system", "irq", "softirq", "steal")


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """/proc/stat's aggregate CPU ticks, a monotonic clock, this process's and its reaped
    children's CPU seconds, and the 1-minute load, at one moment."""
    ticks: dict
    wall: float
    self_cpu: float
    children_cpu: float
    load1: float | None


def _cpu_s(ru) -> float:
    return ru.ru_utime + ru.ru_stime


def snapshot() -> Snapshot:
    with open("/proc/stat") as f:
        ticks = parse_cpu(f.read())
    try:
        load1 = round(os.getloadavg()[0], 2)
    except OSError:  # pragma: no cover - no load average
        load1 = None
    return Snapshot(ticks=ticks, wall=time.monotonic(), self_cpu=_cpu_s(resource.getrusage(resource.RUSAGE_SELF)),
                    children_cpu=_cpu_s(resource.getrusage(resource.RUSAGE_CHILDREN)), load1=load1)


def foreign_load(before: Snapshot, after: Snapshot, cpus: int, hz: float, ranks: int | None = None) -> dict:
    """The numbers of ``recording.json`` from two snapshots (``hz``: clock ticks per second;
    ``ranks``: the recording's, None: as many as the machine's CPUs). The foreign share is
    clamped at 0: the two clocks' granularity can make the job's CPU exceed the machine's busy
    time by a little."""
    busy = sum(after.ticks.get(k, 0) - before.ticks.get(k, 0) for k in BUSY_FIELDS) / hz
    job = (after.self_cpu - before.self_cpu) + (after.children_cpu - before.children_cpu)
    wall = after.wall - before.wall
    foreign = max(0.0, busy - job)
    ok = wall > 0 and cpus > 0
    share = foreign / (wall * cpus) if ok else 0.0
    used = min(float(cpus), max(float(ranks if ranks else cpus), job / wall if ok else 0.0))
    displaced = max(0.0, foreign - (cpus - used) * wall) / (wall * cpus) if ok else 0.0
    return {"wall_s": round(wall, 3), "job_cpu_s": round(job, 3), "machine_busy_cpu_s": round(busy, 3),
            "foreign_cpu_s": round(foreign, 3), "foreign_cpu_share": round(share, 4),
            "displaced_cpu_share": round(displaced, 4), "ranks": ranks, "cpus": cpus,
            "load_before": before.load1, "load_after": after.load1}


def noisy_share(numbers: dict | None) -> float | None:
    """The share that says whether a recording is noisy: the displaced one, or for a recording
    made before it was measured the foreign one (None: nothing measured).

    >>> noisy_share({"foreign_cpu_share": 0.17, "displaced_cpu_share": 0.0}), noisy_share({"foreign_cpu_share": 0.2})
    (0.0, 0.2)
    """
    if not numbers:
        return None
    share = numbers.get("displaced_cpu_share")
    return numbers.get("foreign_cpu_share") if share is None else share


def measure(before: Snapshot, ranks: int | None = None) -> dict:
    """``foreign_load`` from ``before`` to now, on this machine."""
    return foreign_load(before, snapshot(), os.cpu_count() or 1, os.sysconf("SC_CLK_TCK"), ranks=ranks)


def write(directory: str | os.PathLike, numbers: dict) -> None:
    with atomic_open(os.path.join(directory, RECORDING_FILE)) as f:
        json.dump(numbers, f, indent=1)


def read(directory: str | os.PathLike) -> dict | None:
    """The recording's numbers, or None (a recording made before they were measured)."""
    try:
        with open(os.path.join(directory, RECORDING_FILE)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def is_noisy(share) -> bool:
    return isinstance(share, (int, float)) and not isinstance(share, bool) and share > FOREIGN_CPU_WARN


def warning(ranks: int, share: float) -> str:
    """The warning for a noisy recording; ``share``: ``noisy_share``'s.

    >>> warning(16, 0.283)
    "recording of 16 ranks: 28% of the machine's CPU went to other processes; its replays will be too slow — record on a quiet machine"
    """
    return (f"recording of {ranks} ranks: {share:.0%} of the machine's CPU went to other processes; its replays "
            "will be too slow — record on a quiet machine")
