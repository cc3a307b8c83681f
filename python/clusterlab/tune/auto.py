"""``clusterlab tune auto``: search transport settings for a workload with a budget in runs.

A *space* is a grid of knobs, each with a few values (``rto_min=5ms,40ms,200ms;congestion=
cubic,reno;order=same,shifted``): the ``TransportConfig`` fields (RTO minimum, buffers,
congestion control, ...) and the workload's own knobs (the all-to-all broadcast's send
``order``, i.e. its collective algorithm). A *run* is one timed repetition of the workload at
one setting; the objective is its time (lower is better).

``full_grid`` runs every setting the same number of times. ``successive_halving`` (Karnin,
Koren and Somekh 2013, with a reduction factor ``eta``) spends a fixed budget of runs in rounds:
every setting still in the race gets the same share of the round's runs, then the best
``1/eta`` (by mean time over all their runs so far) go on, so the budget goes to the settings
that look good and the poor ones are dropped after a run or two. With ``R`` runs per setting
in the full grid, a budget of ``N * R / 4`` runs is a quarter of the grid's cost.

The search itself never touches a network: it takes an ``objective(setting, runs) -> [seconds,
...]``. ``incast_objective`` is the one ``clusterlab tune auto`` uses: seed 000's all-to-all
broadcast on a namespace testbed, one job (a fresh mesh with the setting's socket options) per
visit of a setting.

>>> space = parse_space("rto_min=5ms,200ms;order=same,shifted")
>>> [to_text(s) for s in settings(space)]
['rto_min=5ms,order=same', 'rto_min=5ms,order=shifted', 'rto_min=200ms,order=same', 'rto_min=200ms,order=shifted']
>>> cost = {"rto_min=5ms,order=same": 1.0, "rto_min=5ms,order=shifted": 0.5,
...         "rto_min=200ms,order=same": 3.0, "rto_min=200ms,order=shifted": 2.0}
>>> res = successive_halving(settings(space), lambda s, k: [cost[to_text(s)]] * k, budget=6, eta=2)
>>> to_text(res["chosen"]), res["runs"]
('rto_min=5ms,order=shifted', 6)
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections.abc import Callable, Sequence

import numpy as np

from clusterlab.errors import ConfigError
from clusterlab.net.transport_config import TransportConfig, check_name

# The workloads' own knobs (everything else is a TransportConfig field): the all-to-all
# broadcast's send order; the HPA job's allreduce algorithm (``auto``: the cost model's pick)
# and its message block size (any size from 64 bytes to 64 MiB).
WORKLOAD_KNOBS = {"order": ("same", "shifted")}
HPA_KNOBS = {"allreduce": None, "block": None}
WORKLOADS = ("alltoall_broadcast", "hpa")
DEFAULT_SPACE = "rto_min=5ms,40ms,200ms;congestion=cubic,reno;sndbuf=default,32KiB;order=same,shifted"
HPA_SPACE = "rto_min=5ms,200ms;congestion=cubic,reno;sndbuf=default,32KiB;allreduce=auto,ring;block=8KiB,64KiB"
# What "the defaults" are: the kernel's socket settings and the workload's own defaults.
DEFAULT_SETTING = {"order": "same"}
HPA_DEFAULTS = {"allreduce": "auto", "block": "8KiB"}

Setting = dict  # knob -> value text, in the space's knob order
Objective = Callable[[Setting, int], list]


def _check_hpa_knob(key: str, v: str) -> None:
    from clusterlab.units import parse_size

    if key == "allreduce":
        from clusterlab.comm.collectives import ALGORITHMS

        if v != "auto" and v not in ALGORITHMS["allreduce"]:
            raise ConfigError(f"--grid allreduce={v}: allreduce is auto or one of {', '.join(sorted(ALGORITHMS['allreduce']))}")
        return
    try:
        n = parse_size(v)
    except (ConfigError, ValueError):
        n = 0
    if not 64 <= n <= 64 << 20:
        raise ConfigError(f"--grid block={v}: HPA's message block is a size from 64 bytes to 64MiB")


def workload_knobs(workload: str) -> dict:
    if workload not in WORKLOADS:
        raise ConfigError(f"--workload {workload!r}: one of {', '.join(WORKLOADS)}")
    return WORKLOAD_KNOBS if workload == "alltoall_broadcast" else HPA_KNOBS


def parse_space(text: str, workload: str = "alltoall_broadcast") -> dict[str, list[str]]:
    """``knob=v1,v2;knob=...`` -> ``{knob: [values]}``. Every value is checked now (a
    TransportConfig knob through its one parser, ``order`` against its choices), so a bad
    grid fails before anything runs.

    >>> parse_space("rto_min=5ms,200ms;congestion=reno")
    {'rto_min': ['5ms', '200ms'], 'congestion': ['reno']}
    >>> parse_space("allreduce=auto,ring;block=8KiB", workload="hpa")
    {'allreduce': ['auto', 'ring'], 'block': ['8KiB']}
    >>> parse_space("rto_min=300ms")
    Traceback (most recent call last):
    ...
    clusterlab.errors.ConfigError: --grid rto_min=300ms: rto_min 300ms exceeds what TCP_RTO_MIN_US accepts (5ms..200ms); ...
    """
    own = workload_knobs(workload)
    space: dict[str, list[str]] = {}
    for part in (p.strip() for p in str(text).split(";")):
        if not part:
            continue
        if "=" not in part:
            raise ConfigError(f"--grid {part!r} is not knob=value,value,... (knobs separated by ';')")
        key, vals = (x.strip() for x in part.split("=", 1))
        key = check_name(key, "--grid knob")
        values = [v.strip() for v in vals.split(",") if v.strip()]
        if not values:
            raise ConfigError(f"--grid {key}: no values")
        if key in space:
            raise ConfigError(f"--grid {key} given twice")
        if len(set(values)) != len(values):
            raise ConfigError(f"--grid {key}: repeated value in {','.join(values)}")
        for v in values:
            if key in own and own is HPA_KNOBS:
                _check_hpa_knob(key, v)
            elif key in own:
                if v not in own[key]:
                    raise ConfigError(f"--grid {key}={v}: {key} is one of {', '.join(own[key])}")
            elif key in WORKLOAD_KNOBS or key in HPA_KNOBS:
                raise ConfigError(f"--grid {key}: not a knob of the {workload} workload")
            elif key == "place":
                raise ConfigError("--grid place: the search sets socket options (place is not a knob)")
            else:
                try:
                    TransportConfig.parse({key: v}, place="socket")
                except ConfigError as e:
                    raise ConfigError(f"--grid {key}={v}: {e}") from None
        space[key] = values
    if not space:
        raise ConfigError("--grid is empty (give knob=value,value;...)")
    return space


def settings(space: dict[str, list[str]]) -> list[Setting]:
    """Every combination, the first knob varying slowest."""
    keys = list(space)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(space[k] for k in keys))]


def to_text(setting: Setting) -> str:
    return ",".join(f"{k}={v}" for k, v in setting.items())


def transport_of(setting: Setting) -> TransportConfig:
    """The socket settings of ``setting`` (its workload knobs left out)."""
    return TransportConfig.parse({k: v for k, v in setting.items() if k not in WORKLOAD_KNOBS and k not in HPA_KNOBS},
                                 place="socket")


def check_dilation(cands: list[Setting], dilation: float) -> None:
    """Refuses a setting whose timers the kernel cannot take at ``dilation`` (before anything is built)."""
    if dilation == 1.0:
        return
    for c in cands:
        why = transport_of(c).with_place("testbed").why_not(dilation)
        if why:
            raise ConfigError(f"--dilation {dilation:g}: setting {to_text(c)}: {why}")


TIMER_FIELDS = ("rto_min", "rto_min_jitter", "rto_max", "rto_max_jitter", "rto_max_offset")


def apply_setting(tb, setting: Setting) -> TransportConfig:
    """The socket settings a run of ``setting`` on testbed ``tb`` uses. Dilated, its RTO bounds
    go to the hosts' sysctls instead, times the dilation (socket options take 5-200 ms only);
    set for every setting, so one left unset runs with the kernel's (the MIN x the dilation)."""
    cfg = transport_of(setting)
    if tb.topo.dilation == 1.0:
        return cfg
    timers = TransportConfig(**{f: getattr(cfg, f) for f in TIMER_FIELDS}, seed=cfg.seed)
    tb.set_timers(timers)
    return dataclasses.replace(cfg, rto_min=None, rto_min_jitter=0.0, rto_max=None, rto_max_jitter=0.0,
                               rto_max_offset=None)


def _stats(xs: Sequence[float]) -> dict:
    """Mean, median and a 95% confidence interval of the mean (Student's t), seconds."""
    a = np.asarray(xs, dtype=float)
    out = {"runs": int(a.size), "mean": float(a.mean()), "median": float(np.median(a)),
           "min": float(a.min()), "max": float(a.max())}
    if a.size > 1:
        from scipy import stats

        half = float(stats.t.ppf(0.975, a.size - 1) * a.std(ddof=1) / math.sqrt(a.size))
        out["ci95"] = [out["mean"] - half, out["mean"] + half]
    return out


class _Ledger:
    """Every run's time per setting, and the order in which the runs were made."""

    def __init__(self, objective: Objective):
        self.objective = objective
        self.times: dict[str, list[float]] = {}
        self.visits: list[dict] = []
        self.seconds = 0.0

    def run(self, s: Setting, k: int) -> None:
        t0 = time.perf_counter()
        got = [float(x) for x in self.objective(s, k)]
        self.seconds += time.perf_counter() - t0
        if len(got) != k:
            raise RuntimeError(f"objective returned {len(got)} times for {k} runs of {to_text(s)}")
        self.times.setdefault(to_text(s), []).extend(got)
        self.visits.append({"setting": to_text(s), "runs": k})

    def mean(self, s: Setting) -> float:
        return float(np.mean(self.times[to_text(s)]))

    @property
    def runs(self) -> int:
        return sum(len(v) for v in self.times.values())


def full_grid(candidates: list[Setting], objective: Objective, runs: int) -> dict:
    """Every setting ``runs`` times; ``chosen`` has the lowest mean."""
    if runs < 1:
        raise ConfigError(f"--runs must be >= 1, got {runs}")
    led = _Ledger(objective)
    for s in candidates:
        led.run(s, runs)
    ranked = sorted(candidates, key=lambda s: (led.mean(s), to_text(s)))
    return {"method": "full_grid", "chosen": ranked[0], "runs": led.runs, "visits": len(led.visits),
            "seconds": led.seconds, "settings": len(candidates),
            "table": [{"setting": to_text(s), **_stats(led.times[to_text(s)]), "times": led.times[to_text(s)]}
                      for s in ranked]}


def successive_halving(candidates: list[Setting], objective: Objective, budget: int, eta: int = 2) -> dict:
    """Budgeted successive halving: ``ceil(log_eta N)`` rounds, each with an equal share of
    the runs left (at least one run per setting still in the race); after each round the best
    ``ceil(n / eta)`` settings by mean time over all their runs go on. Never runs more than
    ``budget`` runs; ``chosen`` is the best of the last round."""
    n = len(candidates)
    if n == 0:
        raise ConfigError("no settings to search")
    if eta < 2:
        raise ConfigError(f"--eta must be >= 2, got {eta}")
    if budget < n:
        raise ConfigError(f"--budget {budget} runs is below one run per setting ({n} settings)")
    led = _Ledger(objective)
    alive = list(candidates)
    rounds = max(1, math.ceil(math.log(n, eta) - 1e-9))
    history = []
    for r in range(rounds):
        left = budget - led.runs
        each = max(1, left // (rounds - r) // len(alive))
        if each * len(alive) > left:
            each = left // len(alive)
        if each == 0:
            break
        for s in alive:
            led.run(s, each)
        ranked = sorted(alive, key=lambda s: (led.mean(s), to_text(s)))
        history.append({"round": r, "settings": len(alive), "runs_each": each,
                        "means": {to_text(s): led.mean(s) for s in ranked}})
        if r < rounds - 1:
            alive = ranked[:max(1, math.ceil(len(alive) / eta))]
        else:
            alive = ranked
    chosen = min(alive, key=lambda s: (led.mean(s), to_text(s)))
    warnings = []
    if len(history) < rounds:  # the budget ran out: the later rounds, which tell close settings apart, never ran
        warnings.append(f"the budget of {budget} runs allowed {len(history)} of the search's {rounds} rounds: the "
                        f"choice rests on {history[-1]['runs_each']} run(s) per setting of the last round; raise --budget")
    return {"method": "successive_halving", "eta": eta, "budget": budget, "chosen": chosen, "runs": led.runs,
            "visits": len(led.visits), "seconds": led.seconds, "settings": n, "rounds": history, "warnings": warnings,
            "table": [{"setting": k, **_stats(v), "times": v}
                      for k, v in sorted(led.times.items(), key=lambda kv: (np.mean(kv[1]), kv[0]))]}


def compare(search: dict, grid: dict) -> dict:
    """How the search did against the full grid: the grid's mean time of the setting the search
    chose over the grid's best mean, and the share of the grid's runs it used."""
    by = {row["setting"]: row["mean"] for row in grid["table"]}
    best = grid["table"][0]
    got = by[to_text(search["chosen"])]
    return {"search_chose": to_text(search["chosen"]), "grid_best": best["setting"],
            "chosen_over_best": got / best["mean"], "runs_share": search["runs"] / grid["runs"],
            "search_runs": search["runs"], "grid_runs": grid["runs"]}


def replay(grid: dict, budget: int, eta: int = 2, trials: int = 1000, seed: int = 0) -> dict:
    """Successive halving replayed on a full grid's measured runs (each run drawn at random,
    with replacement, from the setting's measured times): how often the search lands within
    10% of the grid's best mean. Offline; no network."""
    rng = np.random.default_rng(seed)
    pools = {row["setting"]: np.asarray(row["times"], dtype=float) for row in grid["table"]}
    best = min(float(np.mean(v)) for v in pools.values())
    cands = [dict(p.split("=", 1) for p in name.split(",")) for name in pools]
    ratios = []
    for _ in range(trials):
        res = successive_halving(cands, lambda s, k: list(rng.choice(pools[to_text(s)], size=k)), budget, eta)
        ratios.append(float(np.mean(pools[to_text(res["chosen"])])) / best)
    r = np.asarray(ratios)
    return {"trials": trials, "budget": budget, "eta": eta, "within_10pct": float((r <= 1.10).mean()),
            "median_ratio": float(np.median(r)), "worst_ratio": float(r.max())}


# --- the workload: seed 000's all-to-all broadcast on a namespace testbed -------------------------
def incast_objective(tb, size: int, warmup: int = 1, timeout: float = 600.0) -> Objective:
    """Runs of the all-to-all broadcast of ``size`` bytes per pair on testbed ``tb`` (all its
    hosts): one job per call, a fresh mesh with the setting's socket options, ``warmup``
    untimed rounds, then ``k`` timed rounds; each run's time is the slowest rank's."""
    from clusterlab.bench.alltoall_broadcast import alltoall_broadcast, undilate

    def objective(s: Setting, k: int) -> list[float]:
        cfg = apply_setting(tb, s)
        out = tb.run(alltoall_broadcast, tb.topo.hosts, size, k, s.get("order", "same"), warmup, True,
                     tb.switch.ns, config=cfg, timeout=timeout, setup_timeout=max(60.0, 3.0 * tb.topo.hosts))[0]
        return [r["seconds"] for r in undilate(out, tb.topo.dilation)]

    return objective


# --- the workload: an HPA job on a namespace testbed ---------------------------------------------
def hpa_runs(comm, path: str, min_support: float, block_bytes: int, allreduce: str, runs: int, warmup: int):
    """One rank of ``warmup + runs`` HPA jobs on the same mesh, one after another (the input is
    read again by each). Rank 0 returns ``{"seconds": [...], "itemsets": [...]}``: each timed
    job's time (the slowest rank's, read to result) and its number of frequent itemsets."""
    import dataclasses

    from clusterlab.comm import costmodel
    from clusterlab.mining.parallel import ParallelConfig
    from clusterlab.mining.parallel.driver import rank_run

    if allreduce != "auto":  # every rank makes the same choice: the model is process-wide and the same
        costmodel.use(dataclasses.replace(costmodel.current(), fixed={"allreduce": allreduce}))
    config = ParallelConfig(block_bytes=int(block_bytes))
    seconds, itemsets = [], []
    for i in range(warmup + runs):
        table, _passes, ranks = rank_run(comm, path, "hpa", min_support, config)
        if comm.rank == 0 and i >= warmup:
            seconds.append(max(r["job_s"] for r in ranks))
            itemsets.append(int(table.num_rows))
    return {"seconds": seconds, "itemsets": itemsets} if comm.rank == 0 else None


def hpa_objective(tb, path: str, min_support: float, warmup: int = 1, timeout: float = 600.0) -> Objective:
    """Runs of an HPA job mining ``path`` at ``min_support`` on all of testbed ``tb``'s hosts: one
    launch per call (a fresh mesh with the setting's socket options), ``warmup`` untimed jobs,
    then ``k`` timed jobs. Every job must find the same itemsets (``objective.itemsets``)."""
    from clusterlab.units import parse_size

    def objective(s: Setting, k: int) -> list[float]:
        out = tb.run(hpa_runs, tb.topo.hosts, path, min_support, parse_size(s.get("block", HPA_DEFAULTS["block"])),
                     s.get("allreduce", "auto"), k, warmup, config=apply_setting(tb, s), timeout=timeout,
                     setup_timeout=max(60.0, 3.0 * tb.topo.hosts))[0]
        objective.itemsets.update(out["itemsets"])
        if len(objective.itemsets) > 1:
            raise RuntimeError(f"HPA found different itemset counts at different settings: {sorted(objective.itemsets)}")
        return [t / tb.topo.dilation for t in out["seconds"]]  # undilated, as the broadcast's

    objective.itemsets = set()
    return objective


def watched(objective: Objective, tb, watch) -> tuple[Objective, dict]:
    """``objective`` with each call (a visit) inside ``watch(tb, setting)`` when given, and the
    record its visits go to: ``{"phase": ..., "visits": [...]}`` (set ``phase`` before a phase)."""
    rec: dict = {"phase": "search", "visits": []}
    if watch is None:
        return objective, rec

    def run(s: Setting, k: int) -> list[float]:
        with watch(tb, s) as facts:
            got = objective(s, k)
        rec["visits"].append({"setting": to_text(s), "phase": rec["phase"], "runs": k, **facts})
        return got

    return run, rec


def _loadavg() -> list[float]:
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def tune_auto(*, hosts: int = 16, rate: str = "155Mbit", buffer: str = "64KB", mtu: int = 9000, size: int = 50_000,
              space: str = DEFAULT_SPACE, runs: int = 8, budget: int | None = None, eta: int = 2, grid: bool = False,
              confirm: int = 5, warmup: int = 1, name: str | None = None, search: bool = True,
              workload: str = "alltoall_broadcast", data: str = "seed000:50K", min_support: float = 0.01,
              cache_dir: str = "runs/cache", dilation: float = 1.0, watch=None) -> dict:
    """Search ``space`` for the all-to-all broadcast on a fresh testbed of ``hosts`` hosts
    (root): successive halving within ``budget`` runs (default: a quarter of the full grid's
    ``settings x runs``), then ``confirm`` runs each of the chosen setting and the defaults
    (gain with 95% confidence intervals); with ``grid`` also the full grid on the same testbed,
    and how the search compares to it (``search=False``: the full grid alone).

    ``workload="hpa"``: the objective is an HPA job mining ``data`` (a FIMI file, or a generator
    name with a size such as ``seed000:50K``, generated once into ``cache_dir``) at
    ``min_support`` on all hosts; ``size`` is not used. ``dilation``: the testbed's (link rates
    / k, every setting's RTO bounds x k as the hosts' sysctls); times are reported undilated.

    ``watch(tb, setting)``: a context manager around each visit of a setting (one launch of the
    workload: its warm-up and runs) yielding a dict it fills when the visit ends; each visit's
    dict, with its setting, phase (search, confirm, grid) and runs, is kept in ``visits`` (the
    CLI's ``diagnose.search.observe_visit``: what the fidelity check of the search reads)."""
    from clusterlab.cluster.testbed import StarTopo, TestbedNetwork

    sp = parse_space(space, workload)
    cands = settings(sp)
    if runs < 1:
        raise ConfigError(f"--runs must be >= 1, got {runs}")
    if budget is None:
        budget = max(len(cands), len(cands) * runs // 4)
    if confirm < 0:
        raise ConfigError(f"--confirm must be >= 0, got {confirm}")
    topo = StarTopo(hosts=hosts, rate=rate, buffer=buffer, mtu=mtu, dilation=dilation)
    check_dilation(cands, dilation)
    if workload == "hpa":
        from clusterlab.experiments.workloads.mining import resolve_data
        from clusterlab.mining.sequential import min_count_of

        min_count_of(min_support, 1)  # a bad support fails before the testbed is built
        path = resolve_data(data, cache_dir)
        about = {"name": "hpa", "data": data, "path": path, "min_support": min_support, "warmup_per_visit": warmup}
    else:
        about = {"name": "alltoall_broadcast", "size": size, "warmup_per_visit": warmup}
    out: dict = {"workload": about,
                 "testbed": {"hosts": hosts, "rate": rate, "buffer": buffer, "mtu": mtu, "dilation": dilation},
                 "space": sp,
                 "runs_per_setting_in_grid": runs, "loadavg_before": _loadavg(),
                 "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    t0 = time.perf_counter()
    with TestbedNetwork(topo, name=name) as tb:
        measure = (hpa_objective(tb, path, min_support, warmup) if workload == "hpa"
                   else incast_objective(tb, size, warmup))
        objective, phase = watched(measure, tb, watch)
        if search:
            out["search"] = successive_halving(cands, objective, budget, eta)
        if search and confirm:
            own = workload_knobs(workload)
            default = {**{k: "default" for k in sp if k not in own},
                       **(HPA_DEFAULTS if workload == "hpa" else DEFAULT_SETTING)}
            phase["phase"] = "confirm"
            chosen_t = objective(out["search"]["chosen"], confirm)
            default_t = objective(default, confirm)
            a, b = _stats(chosen_t), _stats(default_t)
            out["confirm"] = {"chosen": {"setting": to_text(out["search"]["chosen"]), **a, "times": chosen_t},
                              "defaults": {"setting": "default", **b, "times": default_t},
                              "speedup": b["mean"] / a["mean"]}
        if grid:
            phase["phase"] = "grid"
            out["grid"] = full_grid(cands, objective, runs)
            if search:
                out["comparison"] = compare(out["search"], out["grid"])
    if "grid" in out:
        out["replay"] = replay(out["grid"], budget, eta)
    for key in ("search", "grid"):
        if key in out:
            out[key]["chosen"] = to_text(out[key]["chosen"])
    if workload == "hpa":
        out["workload"]["itemsets"] = sorted(measure.itemsets)
    if watch is not None:
        out["visits"] = phase["visits"]
    out["seconds"] = time.perf_counter() - t0
    out["loadavg_after"] = _loadavg()
    return out
