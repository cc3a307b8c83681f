"""``Simulated``: a testbed topology run in SimGrid's flow-level network model instead of
namespaces (see docs/simulation.md).

The same ``Cluster`` interface as the others: ``run(fn, n, *args)`` returns what ``fn`` returns
on each rank. A simulated rank runs no Python of the caller's: the cluster knows the rank
functions it has a model of (``MODELS``: the all-to-all broadcast and the ping-pong of
``clusterlab.bench``, rank 0's rows and None on the other ranks; a recorded parallel mining job's
replay, ``replay_parallel``'s ranks, every rank's result), runs that model in the engine, and
returns what the real function returns, in the same shape. Any other function is refused
by name. ``launch`` (a program) is refused: there is no program to run.

>>> from clusterlab.cluster.testbed import StarTopo
>>> s = Simulated(StarTopo(hosts=8, rate="155Mbit"))
>>> s, s.n_ranks(), s.kind
(Simulated(StarTopo(hosts=8, rate='155Mbit', switch='bridge')), 8, 'simulated')
>>> s.with_settings(hosts=16, bandwidth_factor=0.9).settings()["bandwidth_factor"]
0.9
>>> s.engine_config()["network/bandwidth-factor"]   # uncalibrated: the payload share of a 9000-byte MTU
0.9927
>>> Simulated(StarTopo(hosts=4), latency_factor=0)
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: latency_factor must be a number above 0 (up to 1000), got 0
"""

from __future__ import annotations

import dataclasses
import json

from clusterlab.cluster.simulated.platform import DEFAULT_LATENCY, Platform, payload_fraction
from clusterlab.cluster.testbed.topo import StarTopo
from clusterlab.errors import ConfigError
from clusterlab.net.transport_config import KERNEL_RTO_MAX, KERNEL_RTO_MIN
from clusterlab.units import parse_duration

# The mesh's frame header before each payload (rendezvous.frames.HEADER, 24 bytes, and an
# array's dtype and shape): what every simulated message carries besides its bytes.
MESSAGE_HEADER = 40
BROADCAST = "clusterlab.bench.alltoall_broadcast:alltoall_broadcast"
PINGPONG = "clusterlab.bench.pingpong:pingpong"
REPLAY = "clusterlab.mining.parallel.driver:replay_job"  # replay_parallel's ranks (compute replay)
MODELS = (BROADCAST, PINGPONG, REPLAY)


def _factor(v, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1000:
        raise ConfigError(f"{name} must be a number above 0 (up to 1000), got {v!r}")
    return float(v)


class Simulated:
    """Rank i on host i of ``topo`` (a ``StarTopo``), simulated. ``latency``: each link's one-way
    latency (the topology names none; a veth hop plus the switch's forwarding). The engine's
    network factors: ``latency_factor`` (every route's latency x it, the WAN's too) and
    ``bandwidth_factor`` (every flow's share of a link x it; None: the payload share of a full
    segment, ``platform.payload_fraction``). ``overhead``: a rank's own time per message sent or
    received in a broadcast round (seconds or ``30us``), and ``overhead_per_byte`` (seconds per
    byte) more, one message after the other (LogGP's o and G; the ping-pong has neither: its
    per-message time is in the latency it was calibrated with). ``loss_model``: add the fitted
    loss/timeout model's RTO wait to each broadcast round (``loss.py``; True by default; False:
    the flows' time alone). ``calibration``: a record
    ``clusterlab tune sim`` wrote (its fitted latency, factors and overhead), which sets them. ``ranks``: how many ranks run by
    default (one per host). ``timeout``: the engine's wall-clock limit per call, seconds."""

    kind = "simulated"
    name = "simulated"
    size = None
    multicast = False  # the flow model has no multicast group
    __test__ = False
    # The testbed's settings by name (a study's grid may swap one cluster for the other;
    # dilation is accepted and has no effect: the simulation runs undilated), then its own.
    from clusterlab.cluster.api import Testbed as _Testbed

    OWN = ("latency", "latency_factor", "bandwidth_factor", "overhead", "overhead_per_byte", "loss_model")
    SETTINGS = (*_Testbed.SETTINGS, *OWN)
    del _Testbed

    def __init__(self, topo: StarTopo, *, ranks: int | None = None, latency=None, latency_factor=None,
                 bandwidth_factor=None, overhead=None, overhead_per_byte=None, loss_model=True, calibration=None,
                 timeout: float = 3600.0):
        if not isinstance(topo, StarTopo):
            raise ConfigError(f"Simulated(topo): topo must be a StarTopo (from clusterlab.cluster.testbed), got {topo!r}")
        self.calibration = None
        if calibration is not None:
            cal = load_calibration(calibration)
            self.calibration = cal.get("source", str(calibration))
            fit = cal["fit"]
            latency = fit["latency"] if latency is None else latency
            latency_factor = fit["latency_factor"] if latency_factor is None else latency_factor
            bandwidth_factor = fit["bandwidth_factor"] if bandwidth_factor is None else bandwidth_factor
            overhead = fit.get("overhead", 0.0) if overhead is None else overhead
            overhead_per_byte = fit.get("overhead_per_byte", 0.0) if overhead_per_byte is None else overhead_per_byte
        self.topo = topo
        self.latency = DEFAULT_LATENCY if latency is None else latency
        parse_duration(self.latency, "latency")
        self.latency_factor = 1.0 if latency_factor is None else _factor(latency_factor, "latency_factor")
        self.bandwidth_factor = None if bandwidth_factor is None else _factor(bandwidth_factor, "bandwidth_factor")
        self.overhead = 0.0 if overhead is None else parse_duration(overhead, "overhead")
        if not 0 <= self.overhead <= 1.0:
            raise ConfigError(f"overhead must be 0..1s per message, got {overhead!r}")
        g = 0.0 if overhead_per_byte is None else overhead_per_byte
        if isinstance(g, bool) or not isinstance(g, (int, float)) or not 0 <= g <= 1e-3:
            raise ConfigError(f"overhead_per_byte must be 0..1e-3 seconds per byte, got {overhead_per_byte!r}")
        self.overhead_per_byte = float(g)
        from clusterlab.net.transport_config import _bool

        self.loss_model = _bool(loss_model, "loss_model")  # a grid's or --set's "false" too
        if ranks is not None and (isinstance(ranks, bool) or not isinstance(ranks, int) or not 1 <= ranks <= topo.hosts):
            raise ConfigError(f"ranks must be 1..hosts ({topo.hosts}), got {ranks!r}")
        self.ranks, self.timeout = ranks, float(timeout)
        self._replayed = None  # (key, result) of the last replay
        self.platform = Platform.of(topo, latency=self.latency)

    def __repr__(self) -> str:
        t = self.topo
        defaults = {f.name: f.default for f in dataclasses.fields(t) if f.init}
        shown = ", ".join(f"{k}={getattr(t, k)!r}" for k in defaults
                          if k in ("hosts", "rate", "switch") or (getattr(t, k) != defaults[k] and k != "mtu"))
        extra = "".join(f", {k}={v!r}" for k, v in (("ranks", self.ranks), ("calibration", self.calibration))
                        if v is not None)
        return f"Simulated(StarTopo({shown}){extra})"

    # --- settings by name (as the testbed's) ------------------------------------------------
    def n_hosts(self) -> int:
        return self.topo.hosts

    def n_ranks(self) -> int:
        return self.ranks if self.ranks is not None else self.n_hosts()

    def settings(self) -> dict:
        from clusterlab.cluster.api import Testbed

        d = Testbed(self.topo, ranks=self.ranks).settings()
        d.update(latency=self.latency, latency_factor=self.latency_factor, bandwidth_factor=self.bandwidth_factor,
                 overhead=self.overhead, overhead_per_byte=self.overhead_per_byte, loss_model=self.loss_model)
        return {k: d[k] for k in self.SETTINGS}

    def with_settings(self, **values) -> Simulated:
        """A copy with settings changed by name (the testbed's, checked by ``Testbed``, and
        ``latency``, ``latency_factor``, ``bandwidth_factor``, ``overhead``, ``overhead_per_byte``, ``loss_model``)."""
        from clusterlab.cluster.api import Testbed

        unknown = set(values) - set(self.SETTINGS)
        if unknown:
            raise ConfigError(f"a simulated cluster has no setting {sorted(unknown)} (has {', '.join(self.SETTINGS)})")
        own = {k: values.pop(k) for k in self.OWN if k in values}
        tb = Testbed(self.topo, ranks=self.ranks).with_settings(**values) if values else None
        c = Simulated(tb.topo if tb else self.topo, ranks=tb.ranks if tb else self.ranks,
                      latency=own.get("latency", self.latency),
                      latency_factor=own.get("latency_factor", self.latency_factor),
                      bandwidth_factor=own.get("bandwidth_factor", self.bandwidth_factor),
                      overhead=own.get("overhead", self.overhead),
                      overhead_per_byte=own.get("overhead_per_byte", self.overhead_per_byte),
                      loss_model=own.get("loss_model", self.loss_model), timeout=self.timeout)
        c.calibration = self.calibration if not set(own) - {"loss_model"} else None
        return c

    def check(self) -> None:
        """Nothing to start on this machine: the topology and factors were checked when made."""

    def describe(self) -> str:
        """What is simulated, in words (a report's "What was simulated")."""
        f = self.engine_config()
        return (("SimGrid's flow model (max-min sharing, no packet loss) plus a fitted loss/timeout model's RTO "
                 "wait per broadcast round: links " if self.loss_model else
                 "SimGrid's flow model (max-min sharing, no packet loss, no loss model): links ")
                + f"{self.topo.rate} split duplex, {self.latency} each, non-blocking switch backplane"
                + (f", two sites joined by a {self.topo.wan_rate} line of {self.topo.wan_delay}" if self.topo.sites else "")
                + f"; latency factor {f['network/latency-factor']:g}, bandwidth factor {f['network/bandwidth-factor']:g}"
                + f", {self.overhead * 1e6:.3g} us per message and {self.overhead_per_byte * 1e9:.3g} ns per byte "
                  "and rank in a broadcast; a mining replay: its flows and each rank's recorded computation slept"
                + (", plus the loss model's wait after each all-at-once exchange" if self.loss_model else "")
                + (f" (calibration {self.calibration})" if self.calibration else " (uncalibrated)"))

    def engine_config(self) -> dict:
        """SimGrid's ``--cfg`` settings for this cluster: the CM02 max-min model with the
        network factors, no reverse (ACK) traffic."""
        bw = self.bandwidth_factor if self.bandwidth_factor is not None else round(payload_fraction(self.topo), 4)
        return {"network/model": "CM02", "network/latency-factor": self.latency_factor,
                "network/bandwidth-factor": bw, "network/crosstraffic": 0}

    # --- running ----------------------------------------------------------------------------
    def simulate(self, work: dict, n: int) -> dict:
        """Run one engine job (``engine.py``'s kinds) on hosts 0..n-1; the engine's result."""
        from clusterlab.cluster.simulated.run import run_engine

        lo = 1 if work["kind"] == "replay" else 2
        if not lo <= n <= self.topo.hosts:
            raise ConfigError(f"ranks must be {lo}..hosts ({self.topo.hosts}), got {n}")
        return run_engine(self.platform.xml(), list(self.platform.hosts[:n]),
                          {"header": MESSAGE_HEADER, **({"overhead": self.overhead,
                                                         "overhead_per_byte": self.overhead_per_byte}
                                                        if work["kind"] == "alltoall_broadcast" else {}), **work},
                          self.engine_config(), timeout=self.timeout)

    def run(self, fn, n, *args, transport=None, timeout: float | None = 300.0, kwargs=None, **options) -> list:
        """``fn``'s result on each rank, from its model (``MODELS``); ``n`` None: ``n_ranks()``.
        ``transport`` may set only what the loss model takes (``rto_min``, ``rto_max``, ``stack``,
        with ``loss_model`` on): the flow model has no TCP timers or buffers. A replay takes them
        too: each all-at-once exchange pays the loss model's wait (``replay.py``)."""
        from clusterlab.comm.places import has_knobs

        timers = self._timers(transport)
        if has_knobs(transport) and timers is None:
            raise ConfigError(f"the simulated cluster's flow model has no TCP timers, buffers or stacks (its flows "
                              f"never lose a packet), so transport settings ({transport.describe()}) would be ignored: "
                              "run it with the default transport (with loss_model on, rto_min, rto_max and stack "
                              "reach its loss/timeout model)")
        if kwargs:
            raise ConfigError("a simulated rank function takes its arguments positionally")
        name = f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"
        if name not in MODELS:
            raise ConfigError(f"the simulated cluster runs only the rank functions it has a model of "
                              f"({', '.join(MODELS)}), not {name}")
        n = n or self.n_ranks()
        if name == REPLAY:
            return self._replay(n, *args, timers=timers or {})
        if name == BROADCAST:
            rows = self._broadcast(n, *args, timers=timers or {})
        else:
            rows = self._pingpong(n, *args)
        return [rows] + [None] * (n - 1)

    def launch(self, argv, n, *, transport=None, timeout=None, **options):
        raise ConfigError("a simulated cluster runs models of rank functions (Simulated.run), not programs")

    def _timers(self, transport) -> dict | None:
        """The TCP settings the loss model takes (``rto_min``, ``rto_max``, ``stack``) when
        ``transport`` sets nothing else and the loss model is on; None otherwise."""
        if transport is None:
            return {}
        if not self.loss_model or transport.rto_min_jitter or transport.rto_max_jitter or \
                transport.rto_max_offset is not None:
            return None if not transport.is_default() else {}
        rest = dataclasses.replace(transport, rto_min=None, rto_max=None, stack=None, seed=0, place=None, label=None)
        if not rest.is_default():
            return None
        return {k: getattr(transport, k) for k in ("rto_min", "rto_max", "stack") if getattr(transport, k) is not None}

    def loss_wait(self, n: int, size: int, timers: dict | None = None) -> tuple[float, float]:
        """The loss model's (RTO wait on the critical path, timeouts) for one broadcast round of
        ``n`` ranks and ``size``-byte blocks; (0, 0) with ``loss_model`` off."""
        from clusterlab.cluster.simulated.loss import LossModel

        if not self.loss_model:
            return 0.0, 0.0
        t = timers or {}
        m = LossModel()
        shape = {"hosts": n, "size": int(size), "buffer": self.topo.buffer_bytes, "stack": t.get("stack", "linux"),
                 "switch": self.topo.switch}
        return (m.rto_wait(**shape, rto_min=t.get("rto_min", KERNEL_RTO_MIN), rto_max=t.get("rto_max", KERNEL_RTO_MAX)),
                m.timeouts(**shape))

    def _broadcast(self, n, size, reps, order="same", warmup=1, per_host_counters=True, drops=None, timeout=120.0,
                   progress=None, timers=None):
        from clusterlab.bench.alltoall_broadcast import ORDERS

        if order not in ORDERS:
            raise ConfigError(f"send order must be one of {', '.join(ORDERS)}, got {order!r}")
        if size < 0 or reps < 1 or warmup < 0:
            raise ConfigError(f"need size >= 0, reps >= 1, warmup >= 0 (got {size}, {reps}, {warmup})")
        # the model is deterministic: the warm-up rounds change nothing, so one round stands for all
        out = self.simulate({"kind": "alltoall_broadcast", "size": int(size), "rounds": 1, "order": order}, n)
        per = out["seconds"][0]
        # the flows never lose a byte; the loss model's expected wait on the critical path is added
        # to the round (and to every rank: each waits for the round's last message)
        wait, timeouts = self.loss_wait(n, size, timers)
        rows = []
        for rep in range(reps):
            row = {"rep": rep, "seconds": max(per) + wait, "rank0_seconds": per[0] + wait, "simulated": True,
                   "flow_seconds": max(per), "loss_model_rto_wait_s": wait, "loss_model_timeouts": timeouts,
                   "time_model": ("flow time + the fitted loss model's expected RTO wait (loss.py)"
                                  if self.loss_model else "flow time only (loss_model off)"),
                   "engine_wall_seconds": out["engine"]["wall_seconds"],
                   "ranks": [{"rank": r, "seconds": round(s + wait, 9), "rto_wait_s": round(wait, 9),
                              "transfer_s": round(s, 9), "rto": 0, "rto_recoveries": 0, "rto_time_ms": 0, "retrans": 0}
                             for r, s in enumerate(per)]}
            rows.append(row)
            if progress:
                with open(progress, "a") as f:
                    f.write(json.dumps(row) + "\n")
        return rows

    def _replay(self, n, directory, compute="wall", scale=1.0, runtime_scale=None, wait_s=None, timers=None) -> list:
        """``replay_rank``'s result on each rank, simulated: the recording's messages as flows,
        each rank's computation slept (``replay.translate``), and with ``loss_model`` on the
        expected RTO wait of each all-at-once exchange (the loss model with ``timers``). Deterministic:
        the last answer is kept and given again for the same recording and settings (a study's
        repetitions)."""
        import os

        from clusterlab.cluster.simulated.replay import translate
        from clusterlab.mining.parallel.trace import recorded_size

        directory = os.path.abspath(os.fspath(directory))
        recorded = recorded_size(directory)
        if recorded != n:
            raise ConfigError(f"{directory} was recorded on {recorded} ranks; replay it on as many, not {n}")
        stamp = [os.stat(os.path.join(directory, f"rank{r}.json")).st_mtime_ns for r in range(n)]
        timers = timers or {}
        key = json.dumps([directory, stamp, compute, scale, runtime_scale, n, self.engine_config(),
                          self.platform.xml(), self.loss_model, timers], sort_keys=True)
        if self._replayed is not None and self._replayed[0] == key:
            return self._replayed[1]
        t = translate(directory, compute, scale, runtime_scale,
                      exchange_loss=(lambda hosts, size: self.loss_wait(hosts, size, timers)) if self.loss_model else None)
        out = self.simulate({"kind": "replay", "ranks": t["ranks"]}, n)
        model = ("flow time + replayed computation + the fitted loss model's expected RTO wait after each all-at-once "
                 "exchange, priced as a broadcast round of its fan-in and block (loss.py; streamed blocks not priced)"
                 if self.loss_model else "flow time + replayed computation (loss_model off: no RTO waited)")
        per_rank = []
        for r, res in enumerate(out["ranks"]):
            passes = [{**p, "retransmissions": 0, "timeouts": round(p.get("timeouts", 0.0), 3),
                       "rto_time_ms": round(p.get("t_rto_wait", 0.0) * 1000.0, 3)} for p in res["passes"]]
            per_rank.append({"rank": r, "job_s": res["job_s"], "passes": passes, "simulated": True,
                             "time_model": model, "compute_s": t["compute_s"][r],
                             "collectives": t["collectives"], "substituted": t["substituted"], "loss": t["loss"],
                             "engine_wall_seconds": out["engine"]["wall_seconds"]})
        self._replayed = (key, per_rank)
        return per_rank

    def _pingpong(self, n, sizes, trial_time=0.05, trials=3, min_reps=2, max_reps=20000, peer=1):
        if peer != 1:
            raise ConfigError("the simulated ping-pong runs between ranks 0 and 1 (peer=1)")
        out = self.simulate({"kind": "pingpong", "sizes": [int(s) for s in sizes]}, 2)
        return [{"bytes": r["bytes"], "mbps": r["bytes"] * 8 / r["seconds"] / 1e6, "usec": r["seconds"] * 1e6,
                 "reps": 1} for r in out["rows"]]


def load_calibration(source) -> dict:
    """A calibration record (``clusterlab tune sim``'s JSON: ``fit`` holds ``latency``,
    ``latency_factor``, ``bandwidth_factor``), from a path or as a dict."""
    if isinstance(source, dict):
        cal = source
    else:
        try:
            with open(source) as f:
                cal = json.load(f)
        except OSError as e:
            raise ConfigError(f"calibration {source}: {e.strerror}") from None
        except ValueError:
            raise ConfigError(f"calibration {source}: not JSON (a record `clusterlab tune sim` writes)") from None
        cal = {**cal, "source": str(source)}
    fit = cal.get("fit") if isinstance(cal, dict) else None
    if not isinstance(fit, dict) or not {"latency", "latency_factor", "bandwidth_factor"} <= set(fit):
        raise ConfigError(f"calibration {source}: no 'fit' with latency, latency_factor and bandwidth_factor "
                          "(a record `clusterlab tune sim` writes)")
    return cal
