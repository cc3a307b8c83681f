"""Where a rank's time goes, and compute replay.

``TracedComm`` wraps a rank's communicator: it adds up the time spent inside communication
calls (the rest of a pass is computation, on the rank's own clock) and, when recording, logs
every call in order: the computation gap before it (wall and CPU seconds, and the part of
that CPU the job spent on its own runtime rather than on mining: see ``runtime()``),
point-to-point sends (destination, tag, payload shape), receives, and collectives
(operation, payload shapes). Pass boundaries are logged too.

``replay_rank`` plays such a log back on a real communicator (the TCP mesh on loopback or on
a testbed): it sends exactly the same messages and runs the same collectives with payloads of
the same sizes, in the same order, while it *waits* its recorded computation instead of
computing (``compute="wall"``: the gap as measured; ``"cpu"``: the CPU seconds the rank used
in it, what it would take on a core of its own; times ``scale``). So a job recorded on this
machine can be replayed on hosts whose CPUs this machine does not have.

``scale`` stands for a slower CPU running the same program, so it multiplies the mining work
only. The runtime part of a gap (the per-pass statistics: a TCP_INFO read per peer connection,
which grows with the ranks; HPA's prefix partitioning step, which the seed's hash partitioning
does not have; HPA's receive loop, which between its calls only hands blocks to the counting
thread; pass 1's sum of the ranks' item counts; the CPU of the communicator's own threads, the
TCP mesh's drainer) is work of this implementation, not of the program the scale emulates: it
is paid times ``runtime_scale`` (default: ``scale``, everything alike). So is the recording's
own loop between the messages of one ``send_many``, which the real run sends in one call.

>>> from clusterlab.comm.inproc import run_threads
>>> import numpy as np, tempfile
>>> d = tempfile.mkdtemp()
>>> def job(comm):
...     t = TracedComm(comm, record=True)
...     t.mark_pass(1)
...     s = t.allreduce(np.ones(4, np.int64), "sum")
...     if comm.rank == 0:
...         t.send(1, b"abc", 7)
...     else:
...         t.recv(0, 7)
...     t.end_pass()
...     t.save(d)
...     return int(s.sum())
>>> run_threads(job, 2)
[8, 8]
>>> run_threads(lambda comm: replay_rank(comm, d)["passes"][0]["pass"], 2)
[1, 1]
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time

import numpy as np

from clusterlab.comm.errors import CommTimeout
from clusterlab.errors import ConfigError

TRACE_FORMAT = "clusterlab-mining-trace/2"  # /2: gaps carry their runtime CPU (a 4th field)
TRACE_FORMATS = ("clusterlab-mining-trace/1", TRACE_FORMAT)  # what replay_rank reads
# Computation owed below this many seconds is carried over instead of slept (see replay_rank).
SLEEP_MIN = 0.002


def payload_spec(data) -> list:
    """What a payload looks like on the wire, without its content."""
    if data is None:
        return ["none"]
    if isinstance(data, np.ndarray):
        return ["array", data.dtype.str, list(data.shape)]
    return ["bytes", memoryview(data).nbytes]


def payload_of(spec: list):
    """A payload of zeros shaped as ``spec`` says."""
    if spec[0] == "none":
        return None
    if spec[0] == "array":
        return np.zeros(spec[2], dtype=np.dtype(spec[1]))
    return bytes(spec[1])


class TracedComm:
    """A communicator that times (and optionally records) every communication call; anything
    else is delegated to the wrapped one."""

    def __init__(self, inner, record: bool = False):
        self.inner = inner
        self.record = record
        self.comm_s = 0.0
        self.events: list = []
        # The communicator's own threads (the TCP mesh's drainer reads the sockets while the
        # program is away from calls): their CPU in a gap is runtime too.
        self._bg_clocks = [time.pthread_getcpuclockid(t.ident) for t in
                           (getattr(inner, "background_threads", lambda: [])() if record else [])
                           if t.ident is not None and hasattr(time, "pthread_getcpuclockid")]
        self._t = time.perf_counter()
        self._c = time.process_time()
        self._tt = time.thread_time()
        self._b = self._background_cpu()
        self._in_runtime = False  # inside a runtime() region

    def __getattr__(self, name):
        return getattr(self.inner, name)

    @property
    def rank(self):
        return self.inner.rank

    @property
    def size(self):
        return self.inner.size

    @contextlib.contextmanager
    def runtime(self):
        """A region of the rank's computation that is this implementation's runtime, not the
        mining (statistics, Python bookkeeping): the CPU seconds this thread spends in it
        outside communication calls are logged apart in its gaps, and a replay pays them times
        ``runtime_scale``, not ``scale``. The gap under way is closed on entry and on exit, so
        computation before and after the region stays mining; other threads' CPU (HPA's
        counting thread) stays mining too. Calls inside stay communication."""
        if self._in_runtime:  # nested
            yield
            return
        self._gap()
        self._in_runtime = True
        try:
            yield
        finally:
            self._gap()
            self._in_runtime = False

    def _background_cpu(self) -> float:
        total = 0.0
        for clock in self._bg_clocks:
            try:
                total += time.clock_gettime(clock)
            except OSError:  # the thread ended (the communicator closed)
                pass
        return total

    def _gap(self) -> None:
        t, c, tt, b = time.perf_counter(), time.process_time(), time.thread_time(), self._background_cpu()
        if self.record and (t - self._t) > 0:
            # ["gap", wall, cpu, runtime cpu (part of cpu)]
            runtime = max(0.0, b - self._b) + (tt - self._tt if self._in_runtime else 0.0)
            self.events.append(["gap", t - self._t, c - self._c, min(c - self._c, runtime)])
        self._t, self._c, self._tt, self._b = t, c, tt, b

    def _timed(self, event: list, fn, *args, **kw):
        self._gap()
        try:
            return fn(*args, **kw)
        finally:
            t = time.perf_counter()
            self.comm_s += t - self._t
            if self.record:
                # The call's own wall and CPU seconds, last: what the replay compares itself with.
                event += [t - self._t, time.process_time() - self._c]
                self.events.append(event)
            self._t, self._c, self._tt, self._b = t, time.process_time(), time.thread_time(), self._background_cpu()

    # --- pass boundaries -----------------------------------------------------------------
    def mark_pass(self, k: int) -> None:
        self._gap()
        if self.record:
            self.events.append(["pass", int(k)])

    def end_pass(self) -> None:
        self._gap()
        if self.record:
            self.events.append(["end"])

    # --- point to point ------------------------------------------------------------------
    def send(self, dest: int, data, tag: int = 0) -> None:
        return self._timed(["send", dest, tag, payload_spec(data)], self.inner.send, dest, data, tag)

    def send_many(self, blocks, tag: int = 0) -> int:
        if self.record:  # a replay takes one event per message; this loop is the recording's own
            with self.runtime():
                for dest, data in blocks:
                    self.send(dest, data, tag)
            return len(blocks)
        return self._timed(["send_many"], self.inner.send_many, blocks, tag)

    def recv(self, source: int, tag: int = 0, timeout: float | None = None):
        return self._timed(["recv", source, tag], self.inner.recv, source, tag, timeout)

    def recv_any(self, tag: int = 0, timeout: float | None = None):
        ev = ["recv_any", tag, True]
        try:
            return self._timed(ev, self.inner.recv_any, tag, timeout)
        except CommTimeout:
            ev[2] = False  # a poll that found nothing: replayed as nothing
            raise

    def recv_many(self, tag: int = 0, timeout: float | None = None, max: int = 1024):
        if self.record:  # a replay takes one event per message
            return [self.recv_any(tag, timeout)]
        return self._timed(["recv_many"], self.inner.recv_many, tag, timeout, max)

    # --- collectives ---------------------------------------------------------------------
    def barrier(self, algorithm=None):
        return self._timed(["barrier"], self.inner.barrier, algorithm)

    def bcast(self, data, root: int = 0, algorithm=None):
        return self._timed(["bcast", payload_spec(data), root], self.inner.bcast, data, root, algorithm)

    def gather(self, data, root: int = 0, algorithm=None):
        return self._timed(["gather", payload_spec(data), root], self.inner.gather, data, root, algorithm)

    def allgather(self, data, algorithm=None):
        return self._timed(["allgather", payload_spec(data)], self.inner.allgather, data, algorithm)

    def alltoall(self, chunks, algorithm=None):
        return self._timed(["alltoall", [payload_spec(c) for c in chunks]], self.inner.alltoall, chunks, algorithm)

    def allreduce(self, array, op: str = "sum", algorithm=None):
        return self._timed(["allreduce", payload_spec(np.ascontiguousarray(array)), op], self.inner.allreduce, array,
                           op, algorithm)

    def reduce(self, array, op: str = "sum", root: int = 0, algorithm=None):
        return self._timed(["reduce", payload_spec(np.ascontiguousarray(array)), op, root], self.inner.reduce, array,
                           op, root, algorithm)

    def save(self, directory, meta: dict | None = None) -> None:
        """Write this rank's log as ``DIR/rank{r}.json`` (atomically)."""
        from clusterlab._atomic import atomic_open

        self._gap()  # the computation after the last call (building the result) is the job's too
        os.makedirs(directory, exist_ok=True)
        with atomic_open(os.path.join(directory, f"rank{self.rank}.json")) as f:
            json.dump({"format": TRACE_FORMAT, "rank": self.rank, "size": self.size, "meta": meta or {},
                       "events": self.events}, f)


def load_trace(directory, rank: int) -> dict:
    """Rank ``rank``'s recorded log (``ConfigError`` naming what is missing or wrong)."""
    p = os.path.join(directory, f"rank{rank}.json")
    try:
        with open(p, encoding="utf-8") as f:
            t = json.load(f)
    except FileNotFoundError:
        raise ConfigError(f"{p}: no recorded trace (record a run with record=DIR first)") from None
    except (OSError, ValueError) as e:
        raise ConfigError(f"{p}: not a readable trace: {e}") from None
    if t.get("format") not in TRACE_FORMATS or t.get("rank") != rank:
        raise ConfigError(f"{p}: not a {TRACE_FORMAT} trace of rank {rank}")
    return t


def recorded_size(directory) -> int:
    """The number of ranks a trace directory was recorded with."""
    return int(load_trace(directory, 0)["size"])


def compute_owed(directory, compute: str = "wall", scale: float = 1.0, runtime_scale: float | None = None) -> float:
    """The longest computation any rank of a recording waits when replayed so (``replay_rank``'s
    arithmetic, calls not counted): what a replay's timeout must leave room for (a 10M
    transaction run at 16 ranks, 100x slower and dilated 3x, waits 270 s on its gaps alone)."""
    runtime_scale = scale if runtime_scale is None else runtime_scale
    col = 1 if compute == "wall" else 2
    longest = 0.0
    for r in range(recorded_size(directory)):
        owed = 0.0
        for ev in load_trace(directory, r)["events"]:
            if ev[0] == "gap":
                rt = min(ev[3], ev[col]) if len(ev) > 3 else 0.0
                owed += (ev[col] - rt) * scale + rt * runtime_scale
        longest = max(longest, owed)
    return longest


# How a replayed rank pays a computation gap: "wall" sleeps the gap as measured, "cpu" sleeps
# the CPU seconds the rank used in it (a core of its own), "spin" burns those CPU seconds on
# this machine's cores, and also the CPU the real process used during a call beyond what the
# replayed call used (so the replay loads the machine as the real run did: the like-with-like
# validation on a machine with fewer cores than ranks).
COMPUTE_MODES = ("wall", "cpu", "spin")
_BURN = bytes(1 << 16)


def _sleep(seconds: float) -> float:
    t = time.perf_counter()
    time.sleep(seconds)
    return time.perf_counter() - t


def burn_cpu(seconds: float) -> float:
    """Use about ``seconds`` of this process's CPU time (in slices of ~0.1 ms that release the
    GIL, so the rank's other threads run as they did); returns the CPU seconds used. Counted on
    this thread's clock: ranks that are threads of one process each burn their own.

    >>> burn_cpu(0.01) >= 0.01
    True
    """
    c0 = time.thread_time()
    while time.thread_time() - c0 < seconds:
        hashlib.sha256(_BURN)
    return time.thread_time() - c0


def replay_rank(comm, directory, compute: str = "wall", scale: float = 1.0,
                runtime_scale: float | None = None, wait_s: float | None = None) -> dict:
    """Play rank ``comm.rank``'s recorded log back on ``comm`` (see the module docstring): each
    gap's mining computation is paid times ``scale``, its runtime part times ``runtime_scale``
    (None: ``scale``). ``wait_s``: the longest computation any rank waits (``compute_owed``): a
    receive may wait for a peer's scaled computation, so the comm's timeout is raised to 60 s
    plus twice it for the replay (a peer that dies still fails the wait at once). Returns ``{"rank", "job_s", "passes": [{"pass", "t_total", "t_wait_compute", "t_comm",
    "bytes_sent", "messages_sent", "retransmissions", "timeouts", "rto_time_ms"}]}``."""
    from clusterlab.mining.parallel.passes import comm_counters

    if compute not in COMPUTE_MODES:
        raise ConfigError(f"compute must be one of {', '.join(COMPUTE_MODES)}, got {compute!r}")
    runtime_scale = scale if runtime_scale is None else runtime_scale
    for name, v in (("scale", scale), ("runtime_scale", runtime_scale)):
        if not (isinstance(v, (int, float)) and np.isfinite(v) and v >= 0):
            raise ConfigError(f"{name} must be a finite number >= 0, got {v!r}")
    trace = load_trace(directory, comm.rank)
    if wait_s and hasattr(comm, "default_timeout"):
        comm.default_timeout = max(comm.default_timeout, 60.0 + 2.0 * wait_s)
    if trace["size"] != comm.size:
        raise ConfigError(f"{directory} was recorded on {trace['size']} ranks; replay it on as many, not {comm.size}")
    col = 1 if compute == "wall" else 2
    pay = burn_cpu if compute == "spin" else _sleep
    passes: list = []
    row: dict | None = None
    base: dict = {}
    if comm.size > 1:
        comm.barrier()
    t_job = time.perf_counter()
    # Computation still owed. Gaps are paid in sleeps of at least SLEEP_MIN, and an oversleep
    # is credited to the next ones: thousands of microsecond gaps (HPA sends a block every few)
    # slept one by one would each oversleep by the scheduler's latency, milliseconds on a
    # loaded machine, and the replay would run long.
    owed = 0.0
    for ev in trace["events"]:
        kind = ev[0]
        t = time.perf_counter()
        if kind == "gap":
            # The runtime part (CPU seconds; older traces have none) out of the gap's own
            # measure, so the mining part alone takes the CPU's scale.
            rt = min(ev[3], ev[col]) if len(ev) > 3 else 0.0
            owed += (ev[col] - rt) * scale + rt * runtime_scale
            if owed >= SLEEP_MIN:
                owed -= pay(owed)
            if row is not None:
                row["t_wait_compute"] += time.perf_counter() - t
            continue
        if kind == "pass":
            row = {"pass": ev[1], "t_wait_compute": 0.0, "t_comm": 0.0, "_t0": t}
            base = comm_counters(comm)
            continue
        if kind == "end":
            if row is not None:
                row["t_total"] = time.perf_counter() - row.pop("_t0")
                now = comm_counters(comm)
                for f in ("bytes_sent", "messages_sent", "retransmissions", "timeouts", "rto_time_ms"):
                    row[f] = now[f] - base[f]
                passes.append(row)
            row = None
            continue
        c = time.process_time()
        _replay_call(comm, ev)
        if compute == "spin" and len(ev) == _CALL_FIELDS[kind] + 2:
            # What the real process computed while this call waited (HPA counts received blocks
            # on another thread) and the replayed call did not: owed like a gap.
            owed += max(0.0, ev[-1] * scale - (time.process_time() - c))
        if row is not None:
            row["t_comm"] += time.perf_counter() - t
    return {"rank": comm.rank, "job_s": time.perf_counter() - t_job, "passes": passes}


# Fields of each call's event before the wall and CPU seconds recorded after them.
_CALL_FIELDS = {"send": 4, "recv": 3, "recv_any": 3, "barrier": 1, "bcast": 3, "gather": 3, "allgather": 2,
                "alltoall": 2, "allreduce": 3, "reduce": 4}


def _replay_call(comm, ev: list) -> None:
    kind = ev[0]
    if kind == "send":
        comm.send(ev[1], payload_of(ev[3]), ev[2])
    elif kind == "recv":
        comm.recv(ev[1], ev[2])
    elif kind == "recv_any":
        if ev[2]:
            comm.recv_any(ev[1])
    elif kind == "barrier":
        comm.barrier()
    elif kind == "bcast":
        comm.bcast(payload_of(ev[1]), ev[2])
    elif kind == "gather":
        comm.gather(payload_of(ev[1]), ev[2])
    elif kind == "allgather":
        comm.allgather(payload_of(ev[1]))
    elif kind == "alltoall":
        comm.alltoall([payload_of(s) for s in ev[1]])
    elif kind == "allreduce":
        comm.allreduce(payload_of(ev[1]), ev[2])
    elif kind == "reduce":
        comm.reduce(payload_of(ev[1]), ev[2], ev[3])
    else:
        raise ConfigError(f"unknown event {kind!r} in a trace")
