"""What every NPB kernel shares: the problem classes, the traced communicator (per-rank
compute time between messages, bytes and messages), the timed region, relative-error checks
and the result record with NPB's report.

>>> check_class("ep", "S")
'S'
>>> rel_error(8.5971775078648, 8.5971775078648)
0.0
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from clusterlab.comm.communicator import Communicator, nbytes
from clusterlab.errors import ConfigError

KERNELS = ("ep", "is", "cg", "mg", "ft", "lu", "sp")
CLASSES = ("S", "W", "A")


def aligned(data):
    """A received array as the Rust kernels take it: C-contiguous and aligned. The MPI backend
    can hand back a float64 array viewing a message buffer at an offset that is not a multiple
    of 8 (MG's halo faces and CG's vectors then failed with "not contiguous or is misaligned"
    on 2-8 MPI ranks); it is copied only then.

    >>> raw = np.zeros(17, dtype=np.uint8)
    >>> a = raw[1:].view(np.float64)
    >>> a.flags.aligned, aligned(a).flags.aligned, aligned(raw) is raw
    (False, True, True)
    """
    if isinstance(data, np.ndarray) and not (data.flags.aligned and data.flags.c_contiguous):
        return np.require(data, requirements="CA")
    return data


def check_class(kernel: str, cls: str) -> str:
    """The class letter, upper case, or ConfigError naming the accepted ones."""
    c = str(cls).upper()
    if c not in CLASSES:
        raise ConfigError(f"{kernel.upper()} class {cls!r} is not one of {', '.join(CLASSES)}")
    return c


def is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def rel_error(value: float, reference: float) -> float:
    return abs((value - reference) / reference)


class TracedComm(Communicator):
    """A Communicator that passes every point-to-point call through to ``inner`` and, between
    ``start()`` and ``stop()``, records this rank's compute time between messages, the time
    spent in each call, and the bytes and messages sent and received. Collectives run over
    this object, so their messages are recorded one by one.

    Compute is measured both as wall-clock time and as this thread's CPU time: on an
    oversubscribed machine (more ranks than cores) the CPU time is what the rank would need
    on a core of its own.

    ``events`` (for replaying the compute over another network): one row per call,
    ``[compute_s_before, compute_cpu_s_before, "send"|"recv", peer, tag, bytes, call_s]``.
    """

    def __init__(self, inner: Communicator):
        self.inner = inner
        self.rank, self.size = inner.rank, inner.size
        self.default_timeout = inner.default_timeout
        self._on = False
        self._reset()

    def _reset(self) -> None:
        self.events: list[list] = []
        self.compute_s = self.compute_cpu_s = self.comm_s = 0.0
        self.bytes_sent = self.bytes_received = self.messages_sent = self.messages_received = 0
        self._mark = time.perf_counter()
        self._cpu_mark = time.thread_time()

    def start(self) -> None:
        self._reset()
        self._on = True

    def stop(self) -> None:
        if self._on:
            self.compute_s += time.perf_counter() - self._mark
            self.compute_cpu_s += time.thread_time() - self._cpu_mark
            self._on = False

    def _record(self, kind: str, peer: int, tag: int, size: int, t0: float, c0: float) -> None:
        t1, c1 = time.perf_counter(), time.thread_time()
        before, cpu_before = t0 - self._mark, c0 - self._cpu_mark
        self.compute_s += before
        self.compute_cpu_s += cpu_before
        self.comm_s += t1 - t0
        self.events.append([before, cpu_before, kind, peer, tag, size, t1 - t0])
        self._mark, self._cpu_mark = t1, c1

    def _send(self, dest, data, tag):
        t0, c0 = time.perf_counter(), time.thread_time()
        self.inner.send(dest, data, tag)
        if self._on:
            size = nbytes(data)
            self.bytes_sent += size
            self.messages_sent += 1
            self._record("send", dest, tag, size, t0, c0)

    def _recv(self, source, tag, timeout):
        t0, c0 = time.perf_counter(), time.thread_time()
        data = aligned(self.inner.recv(source, tag, timeout))
        if self._on:
            size = nbytes(data)
            self.bytes_received += size
            self.messages_received += 1
            self._record("recv", source, tag, size, t0, c0)
        return data

    def _recv_any(self, tag, timeout):
        t0, c0 = time.perf_counter(), time.thread_time()
        source, data = self.inner.recv_any(tag, timeout)
        data = aligned(data)
        if self._on:
            size = nbytes(data)
            self.bytes_received += size
            self.messages_received += 1
            self._record("recv", source, tag, size, t0, c0)
        return source, data

    def close(self) -> None:  # the inner communicator belongs to the caller
        pass

    def stats(self) -> dict:
        return self.inner.stats()

    def summary(self) -> dict:
        """This rank's counters over the timed region."""
        return {"rank": self.rank, "compute_s": self.compute_s, "compute_cpu_s": self.compute_cpu_s,
                "comm_s": self.comm_s,
                "bytes_sent": self.bytes_sent, "messages_sent": self.messages_sent,
                "bytes_received": self.bytes_received, "messages_received": self.messages_received}


def begin_timed(comm: TracedComm) -> float:
    """NPB's start of the timed region: a barrier, then the clock (and the trace) start."""
    comm.barrier()
    comm.start()
    return time.perf_counter()


def end_timed(comm: TracedComm, t0: float) -> float:
    t = time.perf_counter() - t0
    comm.stop()
    return t


def exact_sum(values: np.ndarray) -> float:
    """Left-to-right sum in the order given (numpy's own sum is pairwise), so the caller
    decides the order and it never depends on how the data was split."""
    s = 0.0
    for v in np.asarray(values, dtype=np.float64).tolist():
        s += v
    return s


@dataclass
class Outcome:
    """What a kernel returns on each rank: its timed seconds and, on rank 0, NPB's
    verification (``values``: each checked quantity, its reference and relative error)."""

    seconds: float
    verified: bool = False
    values: dict[str, Any] = field(default_factory=dict)


@dataclass
class NpbResult:
    """One NPB run: NPB's report fields plus per-rank compute/communication figures.

    ``seconds`` is NPB's time (the slowest rank's timed region); ``mops`` NPB's Mop/s total
    (same operation counts as NPB). ``ranks`` has, per rank, ``seconds``, ``compute_s``
    (wall time between messages), ``compute_cpu_s`` (CPU time of the same), ``comm_s``, bytes
    and messages; ``events`` (when traced) the
    per-rank call sequence for compute replay.
    """

    kernel: str
    cls: str
    size: str
    iterations: int
    nprocs: int
    backend: str
    seconds: float
    mops: float
    optype: str
    verified: bool
    verification: dict[str, Any]
    ranks: list[dict]
    events: list[list] | None = None

    @property
    def mops_per_process(self) -> float:
        return self.mops / self.nprocs

    def to_dict(self, events: bool = False) -> dict:
        d = asdict(self)
        d["class"] = d.pop("cls")
        d["mops_per_process"] = self.mops_per_process
        if not events:
            d.pop("events")
        return d

    def report(self) -> str:
        """NPB's closing report (``print_results``), plus the per-rank compute and traffic."""
        rows = [("Class", self.cls), ("Size", self.size), ("Iterations", self.iterations),
                ("Time in seconds", f"{self.seconds:.2f}"), ("Total processes", self.nprocs),
                ("Mop/s total", f"{self.mops:.2f}"), ("Mop/s/process", f"{self.mops_per_process:.2f}"),
                ("Operation type", self.optype),
                ("Verification", "SUCCESSFUL" if self.verified else "UNSUCCESSFUL"),
                ("Backend", self.backend)]
        out = [f" {self.kernel} Benchmark Completed."]
        out += [f" {k:<16}= {str(v):>24}" for k, v in rows]
        for name, v in self.verification.items():
            if isinstance(v, dict) and "value" in v:
                out.append(f" {name}: {v['value']!r} (reference {v['reference']!r}, error {v['error']:.3e})")
        if self.ranks:
            out.append(" rank  compute_s    cpu_s     comm_s   bytes_sent  messages")
        for r in self.ranks:
            out.append(f" {r['rank']:>4} {r['compute_s']:>10.4f} {r['compute_cpu_s']:>8.4f} {r['comm_s']:>10.4f}"
                       f" {r['bytes_sent']:>12,} {r['messages_sent']:>9,}")
        return "\n".join(out)
