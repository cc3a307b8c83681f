"""Cost model for collective algorithms: fit it from ping-pong, predict each algorithm, pick one.

Hockney's model with LogP's split of the per-message cost: a message of ``m`` bytes between two
ranks takes ``alpha + beta * m`` seconds (``alpha``: latency of one hop, the ping-pong's
zero-byte half round trip; ``beta``: seconds per byte), and every message a rank sends or
receives also costs it ``overhead`` of CPU, even when messages overlap in flight (what makes a
flat fan-out cheap for tiny messages and dear for many ranks). Combining ``m`` bytes in a
reduction, or copying them to pack several payloads into one message, takes ``gamma * m``;
opening a connection takes ``setup`` (seed 002's connection set-up cost, paid when connections
are not kept). Each algorithm module describes its critical path as a ``Pattern`` (hops,
messages of the busiest rank, bytes, reduced and copied bytes, connections); the prediction is
the dot product of the two.

Hockney assumes every link is independent (a switched cluster). When all ranks share one host
(the local cluster on loopback) they share its CPUs: with ``concurrency`` = c > 0 the byte
term is ``beta * max(critical-path bytes, total bytes / c)`` and the overhead term likewise
``overhead * max(busiest rank's messages, 2 * all messages / c)``. ``clusterlab tune model``
sets c to the CPU count for local jobs; 0 means independent links.

A namespace testbed is the other case: every host has its own shaped link (``concurrency`` 0)
but all hosts' ranks share the machine's ``cpus``. A step of an algorithm (one hop) then cannot
end before the CPUs have handled every message sent in it: with ``cpus`` = c > 0, each of the
``hops`` steps takes ``max(network, ceil(messages per step / c) * (cpu_message + cpu_byte *
bytes per message))``, where ``cpu_message`` and ``cpu_byte`` are the machine's CPU seconds
(both ends, kernel and ranks) per message and per byte, fitted from a ping-pong's busy CPU time
(``clusterlab.bench.collective_testbed.cpu_pingpong``). A ring allgather on 16 hosts sends 16
messages per step: 8 per CPU on 2 CPUs, which the link's time alone does not price.

Two testbed terms, both calibrated on the testbed apart from any collective they are judged on
(``collective_testbed.fit_model``):

- ``window``: the bytes one rank can hand to TCP for all its children at once and see leave its
  host in send order (TCP's initial window, 10 segments on Linux: 91 KB at MTU 9180). A
  schedule whose sends are all queued at once (the scatter-allgather bcast's ``at_once``
  scatter) then costs no more on the critical path than sending one after another; beyond it
  the flows share the link and the child sent first waits for the whole fan-out. Algorithms
  with several schedules get it as ``patterns(m, n, window)``.
- ``start_lateness``: how late the root leaves the barrier before a call, per host count (the
  median over barriers of the root's exit minus the earliest rank's, every rank reading the one
  CLOCK_MONOTONIC of the machine the testbed runs on: ``collective_testbed.barrier_exits``). A
  call timed from its own barrier, as OSU and the studies time it, is measured on the clock of
  ranks that left first and wait for the root's data; with 16 hosts' ranks on 2 CPUs the ranks
  are scheduled one after another out of the barrier (0.3 ms at 16 hosts). ``barrier_lateness(n)``
  is the term such a timing adds (``predict_from_barrier``); back-to-back timing does not pay
  it, and the model's picks never include it (it is the same for every algorithm).

A switch's output port holds ``port_buffer`` bytes (0: not modelled). An algorithm that has many
ranks send into one rank at the same moment (the direct reduce-scatter, a linear gather, an
all-at-once all-to-all: its pattern's ``incast``) overflows that port once the converging bytes
exceed it, and a loss there costs TCP's recovery, often a retransmission timeout: such a
schedule pays ``loss_penalty`` seconds more (on a testbed, Linux's RTO minimum), so an algorithm without
incast wins where the bytes are alike and the overflowing one only where the others move far
more. Measured on the testbed (155 Mbit/s at k = 3, 64 KB ports, a 1.3 MB all-reduce): ring
0.13 s at 16 hosts and 0.36 s at 100, the direct reduce-scatter and all-gather 0.40 and 0.49 s
with the same bytes (its slowest repetitions one timeout longer), the binomial reduce and
broadcast 0.73 and 2.1 s.

``m`` is what the operation's size means in OSU's benchmarks: the message for bcast, one
rank's chunk for scatter/gather/allgather/alltoall, the array for reduce/allreduce.

>>> m = CostModel(alpha=20e-6, beta=1e-9, gamma=0.1e-9, setup=100e-6, overhead=0, concurrency=0)
>>> round(m.predict("bcast", "binomial", 1 << 20, 8) * 1e6)   # 3 hops of 1 MiB
3206
>>> m.overhead = 5e-6
>>> m.pick("bcast", 64, 4), m.pick("bcast", 64, 64), m.pick("bcast", 1 << 24, 8)
('flat', 'binomial', 'scatter_allgather')
>>> fitted = fit([{"bytes": b, "usec": 20 + b * 1e-3} for b in (1, 1024, 65536, 1 << 20)])
>>> round(fitted.alpha * 1e6, 3), round(fitted.beta * 1e9, 3)
(20.0, 1.0)
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from clusterlab._atomic import atomic_open
from clusterlab.errors import ConfigError

_picks: dict[tuple, str] = {}
# op -> algorithm name -> its module (``pattern(m, n)``, optional ``patterns(m, n, window)`` of its
# schedules and ``EXACT``): filled by
# ``clusterlab.comm.collectives`` when it is imported (``register``), so that this module, the
# lower layer, never imports the algorithms that use it. ``clusterlab.comm`` imports them.
_ALGORITHMS: dict[str, dict] = {}
ENV = "CLUSTERLAB_COSTMODEL"  # path of a fitted model every rank loads (same file on every rank)
MODES = ("persistent", "per_call")  # connection modes (comm/tcp/percall.py)
FORMAT = "clusterlab-costmodel/1"


@dataclass
class CostModel:
    """Hockney parameters in seconds (``beta``, ``gamma`` per byte). The defaults are a fit of
    clusterlab's TCP mesh on the loopback of the (2-CPU) development machine, since the local
    cluster is the default one: a sensible start until ``clusterlab tune model`` fits the real
    thing (on a switched cluster, fit with ``--concurrency 0``)."""

    alpha: float = 40e-6
    beta: float = 0.5e-9
    gamma: float = 0.1e-9
    setup: float = 120e-6
    overhead: float = 15e-6
    concurrency: float = 2.0
    setup_cpus: float = 0.0  # > 0: every host's connection set-up shares this many CPUs (a testbed)
    call_setup: float = 0.0  # seconds a mesh costs whatever its connections (starting and closing it)
    cpus: float = 0.0  # > 0: every rank's messages share this many CPUs (a testbed), priced per step
    cpu_message: float = 0.0  # CPU seconds per message (both ends), when cpus > 0
    cpu_byte: float = 0.0  # CPU seconds per byte (both ends), when cpus > 0
    window: float = 0.0  # bytes a rank's fan-out leaves in send order (TCP's initial window); 0: none
    port_buffer: float = 0.0  # bytes a switch output port holds; > 0: incast beyond it pays loss_penalty
    loss_penalty: float = 0.0  # seconds an overflowing schedule pays (a retransmission timeout)
    start_lateness: dict = field(default_factory=dict)  # hosts (str) -> seconds the root leaves a barrier late
    announce: dict = field(default_factory=dict)  # hosts (str) -> seconds of a root's 1-byte word to every rank
    source: str = "default"
    details: dict = field(default_factory=dict)
    fixed: dict = field(default_factory=dict)  # op -> the algorithm ``pick`` always returns (a search's choice)

    def __post_init__(self):
        for k in ("alpha", "beta", "gamma", "setup", "overhead", "concurrency", "setup_cpus", "call_setup", "cpus",
                  "cpu_message",
                  "cpu_byte", "window", "port_buffer", "loss_penalty"):
            v = getattr(self, k)
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ConfigError(f"cost model parameter {k} must be a finite number >= 0, got {v!r}")
        if not isinstance(self.fixed, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                       for k, v in self.fixed.items()):
            raise ConfigError(f"cost model parameter fixed must map operations to algorithm names, got {self.fixed!r}")
        for name in ("start_lateness", "announce"):
            table = getattr(self, name)
            if not isinstance(table, dict) or not all(
                    isinstance(k, str) and k.isdigit() and int(k) >= 1 and isinstance(v, (int, float))
                    and math.isfinite(v) and v >= 0 for k, v in table.items()):
                raise ConfigError(f"cost model parameter {name} must map host counts (\"16\") to seconds >= 0, "
                                  f"got {table!r}")

    # --- prediction -----------------------------------------------------------------------
    def predict(self, op: str, algorithm: str, m: float, n: int, connected: bool = True) -> float:
        """Predicted seconds of ``algorithm`` for ``op`` on ``n`` ranks with size ``m`` bytes."""
        if n <= 1:
            return 0.0
        return min(self._price(p, connected) for p in _patterns(op, algorithm, float(m), n, self.window).values())

    def schedule(self, op: str, algorithm: str, m: float, n: int, connected: bool = True) -> str:
        """The cheapest of ``algorithm``'s schedules (its module's ``patterns``; ties: the
        first listed), or "" for an algorithm with one.

        >>> import clusterlab.comm.collectives
        >>> m = CostModel(alpha=30e-6, beta=50e-9, overhead=0, concurrency=0)
        >>> m.schedule("bcast", "scatter_allgather", 1 << 20, 16), m.schedule("bcast", "scatter_allgather", 64, 16)
        ('in_turn', 'at_once')
        """
        key = ("schedule", self.alpha, self.beta, self.gamma, self.setup, self.overhead, self.concurrency, self.cpus,
               self.cpu_message, self.cpu_byte, self.window, self.port_buffer, self.loss_penalty, op, algorithm, m, n,
               connected)
        hit = _picks.get(key)  # cached: every parent of a call asks (measured: 1.4 ms per 16-host call uncached)
        if hit is None:
            pats = _patterns(op, algorithm, float(m), n, self.window)
            hit = min(pats, key=lambda k: self._price(pats[k], connected))
            if len(_picks) > 4096:
                _picks.clear()
            _picks[key] = hit
        return hit

    def _price(self, p, connected: bool) -> float:
        sends, moved = p.sends, p.bytes
        if self.concurrency > 0:  # a send and a receive per message, on c CPUs
            sends = max(sends, 2 * p.total_messages / self.concurrency)
            moved = max(moved, p.total / self.concurrency)
        t = self.alpha * p.hops + self.overhead * sends + self.beta * moved
        if self.cpus > 0 and p.hops > 0 and p.total_messages > 0:
            t = max(t, p.hops * self.cpu_step(p.total_messages / p.hops, p.total / p.total_messages))
        t += self.gamma * (p.reduce_bytes + p.copies)
        if self.port_buffer > 0 and p.incast > self.port_buffer:
            t += self.loss_penalty
        return t if connected else t + self.setup * p.peers

    def cpu_step(self, messages: float, nbytes: float) -> float:
        """Seconds the shared CPUs need for one step of ``messages`` messages of ``nbytes``
        bytes each: each CPU handles ``ceil(messages / cpus)`` of them, one after another.

        >>> CostModel(cpus=2, cpu_message=30e-6, cpu_byte=10e-9).cpu_step(16, 4096) * 1e3   # 8 x 71 us
        0.56768
        """
        if self.cpus <= 0:
            return 0.0
        return math.ceil(messages / self.cpus - 1e-9) * (self.cpu_message + self.cpu_byte * nbytes)

    def table(self, op: str, m: float, n: int, connected: bool = True) -> dict[str, float]:
        """Predicted seconds of every algorithm of ``op``."""
        return {name: self.predict(op, name, m, n, connected) for name in sorted(_ALGORITHMS[_op(op)])}

    def pick(self, op: str, m: float, n: int, exact: bool = False, connected: bool = True) -> str:
        """The fastest algorithm (ties: alphabetical) among those a module does not exclude
        (``AUTO = False``: the point-to-multipoint bcast, which needs a multicast channel);
        ``exact`` keeps only algorithms whose floating-point sums are the rank-order sum bit for bit. Cached: collectives call it
        on every operation. An operation in ``fixed`` always gets that algorithm.

        >>> CostModel(fixed={"allreduce": "ring"}).pick("allreduce", 8, 4)
        'ring'
        """
        if op in self.fixed:
            _module(op, self.fixed[op])  # an unknown name fails here, with the choices
            return self.fixed[op]
        key = (self.alpha, self.beta, self.gamma, self.setup, self.overhead, self.concurrency, self.cpus,
               self.cpu_message, self.cpu_byte, self.window, self.port_buffer, self.loss_penalty, op, m, n, exact,
               connected)
        hit = _picks.get(key)
        if hit is not None:
            return hit
        names = [x for x in sorted(_ALGORITHMS[_op(op)]) if getattr(_ALGORITHMS[op][x], "AUTO", True)]
        if exact:
            names = [x for x in names if getattr(_ALGORITHMS[op][x], "EXACT", True)] or names
        best = min(names, key=lambda x: (self.predict(op, x, m, n, connected), x))
        if len(_picks) > 4096:
            _picks.clear()
        _picks[key] = best
        return best

    def picks(self, n: int, largest: int = 1 << 26) -> dict[str, list[str]]:
        """What this model makes of ``n`` ranks: for every operation, its pick (and that pick's
        schedule, and for reductions the exact pick) at each power of two from 1 byte to
        ``largest``. Two models with the same picks run the same messages (sizes between powers
        of two aside): what a compute recording is keyed by.

        >>> import clusterlab.comm.collectives
        >>> CostModel().picks(4)["allreduce"][:2]
        ['allgather/allgather', 'allgather/allgather']
        """
        out: dict[str, list[str]] = {}
        for op in sorted(_ALGORITHMS):
            row = []
            for e in range(largest.bit_length()):
                m = 1 << e
                name = self.pick(op, m, n)
                sched = self.schedule(op, name, m, n)
                exact = self.pick(op, m, n, exact=True) if op in ("allreduce", "reduce") else name
                row.append(f"{name}{'.' + sched if sched else ''}/{exact}")
            out[op] = row
        return out

    def overflows(self, op: str, algorithm: str, m: float, n: int) -> bool:
        """Whether every schedule of ``algorithm`` sends more bytes into one rank at once than a
        switch port holds (``port_buffer``; never when it is 0).

        >>> import clusterlab.comm.collectives
        >>> m = CostModel(port_buffer=64_000, loss_penalty=0.2)
        >>> m.overflows("allreduce", "reduce_scatter_allgather", 1.3e6, 100), m.overflows("allreduce", "ring", 1.3e6, 100)
        (True, False)
        """
        if self.port_buffer <= 0 or n <= 1:
            return False
        return all(p.incast > self.port_buffer for p in _patterns(op, algorithm, float(m), n, self.window).values())

    # --- connection modes (seed 002: set-up counted per call, or paid once) -----------------
    def setup_time(self, n: int) -> float:
        """Seconds a rank spends setting up its connections to the other ``n - 1`` ranks (the
        full mesh: what the persistent mesh pays once per job and per-call mode per call):
        ``call_setup`` (the mesh's fixed cost: starting its communicator, closing it) plus
        ``setup`` per connection. With ``setup_cpus`` = c > 0 the hosts share c CPUs (a testbed
        on one machine): the mesh's n(n-1)/2 set-ups cannot take less than their sum over c.

        >>> CostModel(setup=1e-3).setup_time(6), CostModel(setup=1e-3, setup_cpus=2).setup_time(6)
        (0.005, 0.0075)
        >>> round(CostModel(setup=1e-3, setup_cpus=2, call_setup=4e-3).setup_time(2), 4)
        0.005
        """
        if n <= 1:
            return 0.0
        per_rank = self.setup * (n - 1)
        if self.setup_cpus > 0:
            per_rank = max(per_rank, self.setup * n * (n - 1) / 2 / self.setup_cpus)
        return self.call_setup + per_rank

    def predict_mode(self, op: str, algorithm: str, m: float, n: int, mode: str = "persistent",
                     calls: int = 1) -> float:
        """Predicted seconds per call of ``algorithm`` in connection ``mode`` over a job of
        ``calls`` collective calls: ``per_call`` pays the set-up every call, ``persistent``
        once, spread over the calls."""
        if mode not in MODES:
            raise ValueError(f"unknown connection mode {mode!r} (one of {', '.join(MODES)})")
        if calls < 1:
            raise ValueError(f"calls must be >= 1, got {calls}")
        t = self.predict(op, algorithm, m, n)
        return t + (self.setup_time(n) if mode == "per_call" else self.setup_time(n) / calls)

    def barrier_lateness(self, n: int) -> float:
        """Seconds a call timed from its own barrier pays for the root leaving that barrier late on
        ``n`` hosts (``start_lateness``): the calibrated value, linear between calibrated host
        counts, the nearest one's outside them; 0 without a calibration.

        >>> m = CostModel(start_lateness={"4": 40e-6, "8": 50e-6, "16": 280e-6})
        >>> [round(m.barrier_lateness(n) * 1e6) for n in (2, 6, 12, 16, 32)]
        [40, 45, 165, 280, 280]
        """
        return _by_hosts(self.start_lateness, n)

    def announce_time(self, n: int) -> float:
        """Seconds the root's word of its pick to the other ``n - 1`` ranks adds to an automatic
        bcast or scatter (``clusterlab.comm.collectives``: one byte each before the algorithm,
        unless the pick is the same at every size or is the direct one): ``announce``, calibrated
        as a flat 1-byte bcast's time per call back to back, interpolated as
        ``barrier_lateness``; 0 without a calibration."""
        return _by_hosts(self.announce, n)

    def predict_from_barrier(self, op: str, algorithm: str, m: float, n: int, mode: str = "persistent") -> float:
        """Predicted seconds of one call of ``algorithm`` timed from a barrier before it, as the
        OSU-style benchmark times it: the call in connection ``mode`` (per-call: with its mesh's
        set-up) plus ``barrier_lateness(n)``. Back-to-back calls pay ``predict``'s alone.

        >>> m = CostModel(alpha=30e-6, beta=1e-8, overhead=0, concurrency=0, start_lateness={"16": 3e-4})
        >>> round((m.predict_from_barrier("bcast", "binomial", 4096, 16) - m.predict("bcast", "binomial", 4096, 16)) * 1e6)
        300
        """
        t = self.predict_mode(op, algorithm, m, n, "per_call") if mode == "per_call" else self.predict(op, algorithm,
                                                                                                           m, n)
        return t + self.barrier_lateness(n)

    def choose(self, op: str, m: float, n: int, exact: bool = False, calls: int = 1,
               modes: tuple[str, ...] = ("persistent", "per_call")) -> tuple[str, str, float]:
        """``(mode, algorithm, predicted seconds per call)``: the cheapest connection mode among
        ``modes`` and algorithm for ``op`` at size ``m`` on ``n`` ranks in a job of ``calls``
        calls. Over TCP the two modes move data alike, so the set-up decides: per-call costs
        the same for a one-call job and more for every further call (ties: persistent).

        >>> m = CostModel(setup=1e-3, concurrency=0)
        >>> m.choose("bcast", 1 << 20, 8, calls=100)[:2], m.choose("bcast", 1 << 20, 8, modes=("per_call",))[:2]
        (('persistent', 'binomial'), ('per_call', 'binomial'))
        """
        name = self.pick(op, m, n, exact)  # set-up does not depend on the algorithm
        best = min(modes, key=lambda mode: (self.predict_mode(op, name, m, n, mode, calls), mode != "persistent"))
        return best, name, self.predict_mode(op, name, m, n, best, calls)

    # --- persistence ------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"format": FORMAT, **asdict(self)}

    def save(self, path: str | os.PathLike) -> None:
        """Write the model as JSON, atomically."""
        with atomic_open(path) as f:
            json.dump(self.to_dict(), f, indent=2)
            f.write("\n")

    @classmethod
    def from_dict(cls, d: dict, where: str = "cost model") -> CostModel:
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise ConfigError(f"{where}: not a clusterlab cost model (expected \"format\": \"{FORMAT}\")")
        missing = [k for k in ("alpha", "beta", "gamma", "setup") if k not in d]
        if missing:
            raise ConfigError(f"{where}: missing {', '.join(missing)}")
        try:
            return cls(alpha=d["alpha"], beta=d["beta"], gamma=d["gamma"], setup=d["setup"],
                       overhead=d.get("overhead", 0.0), concurrency=d.get("concurrency", 0.0),
                       setup_cpus=d.get("setup_cpus", 0.0), call_setup=d.get("call_setup", 0.0),
                       cpus=d.get("cpus", 0.0),
                       cpu_message=d.get("cpu_message", 0.0), cpu_byte=d.get("cpu_byte", 0.0),
                       window=d.get("window", 0.0), port_buffer=d.get("port_buffer", 0.0),
                       loss_penalty=d.get("loss_penalty", 0.0), start_lateness=d.get("start_lateness") or {},
                       announce=d.get("announce") or {},
                       source=str(d.get("source", where)), details=dict(d.get("details") or {}),
                       fixed=d.get("fixed") or {})
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}") from None

    @classmethod
    def load(cls, path: str | os.PathLike) -> CostModel:
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise ConfigError(f"{path}: cannot read cost model: {e.strerror}") from None
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
        return cls.from_dict(d, str(path))


def _by_hosts(table: dict, n: int) -> float:
    """``table``'s value (host count as a string -> seconds) at ``n`` hosts: linear between its
    host counts, the nearest one's outside them, 0 for an empty table."""
    pts = sorted((int(k), float(v)) for k, v in table.items())
    if not pts:
        return 0.0
    if n <= pts[0][0]:
        return pts[0][1]
    for (n0, t0), (n1, t1) in zip(pts, pts[1:], strict=False):
        if n <= n1:
            return t0 + (t1 - t0) * (n - n0) / (n1 - n0)
    return pts[-1][1]


def register(modules: dict[str, dict]) -> None:
    """Make the algorithms ``modules`` (op -> name -> module with ``pattern(m, n)``) the ones
    this model prices and picks from; ``clusterlab.comm.collectives`` registers its own."""
    _ALGORITHMS.clear()
    _ALGORITHMS.update({op: dict(names) for op, names in modules.items()})
    _picks.clear()


def _op(op: str) -> str:
    if op not in _ALGORITHMS:
        raise ValueError(f"unknown collective {op!r} (one of {', '.join(sorted(_ALGORITHMS))})")
    return op


def _module(op: str, algorithm: str):
    names = _ALGORITHMS[_op(op)]
    if algorithm not in names:
        raise ValueError(f"unknown {op} algorithm {algorithm!r} (one of {', '.join(sorted(names))})")
    return names[algorithm]


# --- fitting ----------------------------------------------------------------------------------
def fit(rows: list[dict], setup_times: list[float] | None = None, gamma: float | None = None,
        source: str = "fit", concurrency: float = 0.0, overhead: float | None = None) -> CostModel:
    """Fit ``alpha`` and ``beta`` to ping-pong rows (``bytes``, ``usec`` = half round trip),
    minimising relative error so small and large messages count alike; ``setup`` is the
    median of ``setup_times`` (seconds per connection), ``gamma`` as given or measured here,
    ``concurrency`` as given (see the module docstring), ``overhead`` as given (seconds per
    message of a burst, ``bench.pingpong.burst``; default: a tenth of alpha)."""
    pts = [(float(r["bytes"]), float(r["usec"]) * 1e-6) for r in rows if float(r["usec"]) > 0]
    if len({b for b, _ in pts}) < 2:
        raise ConfigError("fitting a cost model needs ping-pong times for at least two message sizes")
    m = np.array([b for b, _ in pts])
    t = np.array([x for _, x in pts])
    a = np.stack([1 / t, m / t], axis=1)
    (alpha, beta), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    if alpha < 0:  # clamp, refit the other parameter alone
        alpha, beta = 0.0, float(np.sum(m / t) / np.sum((m / t) ** 2))
    if beta < 0:
        beta, alpha = 0.0, float(np.sum(1 / t) / np.sum((1 / t) ** 2))
    rel = np.abs(alpha + beta * m - t) / t
    setup = float(np.median(setup_times)) if setup_times else CostModel.setup
    return CostModel(alpha=float(alpha), beta=float(beta), gamma=measure_gamma() if gamma is None else gamma,
                     setup=setup, concurrency=concurrency, source=source,
                     overhead=float(alpha) / 10 if overhead is None else max(0.0, overhead),
                     details={"points": len(pts), "max_rel_error": round(float(rel.max()), 4),
                              "median_rel_error": round(float(np.median(rel)), 4),
                              "fitted_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})


def measure_gamma(nbytes: int = 1 << 22, repeat: int = 7) -> float:
    """Seconds per byte of an elementwise float64 sum into a fresh array (what reductions and
    packing pay: the work plus allocating and touching the output), median of ``repeat``."""
    a = np.ones(nbytes // 8)
    b = np.ones_like(a)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        np.add(a, b)
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) / nbytes


# --- the process-wide model -----------------------------------------------------------------
def _patterns(op: str, algorithm: str, m: float, n: int, window: float = 0.0) -> dict:
    """An algorithm's schedules by name: its module's ``patterns(m, n, window)``, else {"": ``pattern(m, n)``}."""
    mod = _module(op, algorithm)
    return mod.patterns(m, n, window) if hasattr(mod, "patterns") else {"": mod.pattern(m, n)}


_override: CostModel | None = None
_cache: dict[tuple, CostModel] = {}


def use(model: CostModel | None) -> None:
    """Make ``model`` the one collectives use in this process (None: back to $CLUSTERLAB_COSTMODEL
    or the default). Every rank must use the same model, or ranks would pick different algorithms."""
    global _override
    _override = model


def current() -> CostModel:
    """The model in force: ``use()``'s, else the file named by $CLUSTERLAB_COSTMODEL, else the default."""
    if _override is not None:
        return _override
    path = os.environ.get(ENV)
    if not path:
        return _cache.setdefault(("default",), CostModel())
    try:
        st = os.stat(path)
    except OSError as e:
        raise ConfigError(f"{ENV}={path}: cannot read cost model: {e.strerror}") from None
    key = (path, st.st_mtime_ns, st.st_size)
    if key not in _cache:
        _cache[key] = CostModel.load(path)
    return _cache[key]
