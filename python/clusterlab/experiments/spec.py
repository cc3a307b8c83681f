"""Studies as data: the cluster, the workload, the grid of settings, how often, what to report.

Nothing here touches the machine: a study expands into points (``Study.points``) and every
point's settings are checked (ranges the kernel accepts, the dilation that makes them
expressible) before anything runs. ``runner.run_study`` executes a study; ``clusters`` turns a
point into a running cluster; ``report`` draws it.

A study reads like a Mininet topology, and its cluster is the one a Python user runs ranks on
(``clusterlab.cluster.Testbed`` around the testbed's own ``StarTopo``):

>>> from clusterlab.experiments.workloads import alltoall_broadcast
>>> s = Study(name="demo", cluster=Testbed(StarTopo(hosts=16, rate="155Mbit", buffer="64KB"), dilation="auto"),
...           workload=alltoall_broadcast(size="50KB"),
...           grid=Grid(rto_min=["5ms", "200ms"], rto_max_offset=["100ms"]), repeat=10)
>>> [(p.settings["rto_min"], p.dilation) for p in s.points()]
[('5ms', 10.0), ('200ms', 4.0)]

MAX = MIN + 100 ms is below the 1 s the kernel's ``tcp_rto_max_ms`` accepts, so each point runs
under the smallest time dilation k (rates / k, timers x k) that makes it expressible. A fixed
dilation (the topology's own, 1 unless given) that cannot express a setting is refused, never
clamped:

>>> Study(name="x", cluster=Testbed(StarTopo(hosts=16)), workload=alltoall_broadcast(),
...       grid=Grid(rto_min=["200ms"], rto_max_offset=["100ms"])).points()
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: point 0 (rto_min=200ms, rto_max_offset=100ms): dilation 1 cannot express it: MAX 300ms x 1 is below the 1000 ms net.ipv4.tcp_rto_max_ms accepts (1000..120000 ms); needs dilation >= 3.33

The transport settings are the one ``TransportConfig`` (``transport=``, ``Grid(tcp=[...])``),
and every one of its fields is a setting by its own name; an old spelling is refused:

>>> s.with_settings({"rto_jitter": "100ms"})
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: --set 'rto_jitter' is now called 'rto_min_jitter'
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Callable, Iterable
from typing import Any

# A study's cluster is the cluster layer's own object (re-exported for studies): a Testbed around
# its StarTopo, or ranks on this machine (InProcess, Local, Mpirun: ``ranks`` their setting).
from clusterlab.cluster import InProcess, Local, Mpirun, Simulated, Testbed  # noqa: F401
from clusterlab.cluster.testbed import StarTopo  # noqa: F401
from clusterlab.cluster.testbed import dilation as _dilation
from clusterlab.errors import ConfigError
from clusterlab.experiments import kinds
from clusterlab.net.transport_config import TransportConfig, check_name, fmt_duration
from clusterlab.units import parse_duration, parse_float, parse_int

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
# A study's transport settings: every field of the one TransportConfig except where it applies
# (the cluster decides) and its label.
TCP_SETTINGS = tuple(f.name for f in dataclasses.fields(TransportConfig) if f.name not in ("place", "label"))


def _dur(v) -> float | None:
    return None if v is None else parse_duration(v)


def tcp_of(value) -> TransportConfig:
    """A grid's ``tcp`` value: a ``TransportConfig`` or its ``parse`` text."""
    return value if isinstance(value, TransportConfig) else TransportConfig.parse(value)


def setting_text(tcp: TransportConfig, name: str):
    """One transport setting as a study shows it (``200ms``, not 0.2; an unset jitter as None)."""
    v = getattr(tcp, name)
    if name.endswith("_jitter") and not v:
        return None
    if v is not None and name in ("rto_min", "rto_min_jitter", "rto_max", "rto_max_jitter", "rto_max_offset"):
        return fmt_duration(v)
    if v is not None and name in ("sndbuf", "rcvbuf"):
        return str(v)
    return v


# --- clusters ------------------------------------------------------------------------------------
def Loopback(ranks: int = 4) -> Local:  # noqa: N802  (a study's spelling of the cluster layer's Local)
    """Processes on this machine connected by clusterlab's TCP mesh over loopback:
    ``clusterlab.cluster.Local(ranks=ranks)``."""
    return Local(ranks=ranks)


def Mpi(ranks: int = 4) -> Mpirun:  # noqa: N802  (a study's spelling of the cluster layer's Mpirun)
    """Processes under mpiexec (MPICH through mpi4py) on this machine:
    ``clusterlab.cluster.Mpirun(ranks=ranks)``."""
    return Mpirun(ranks=ranks)


def study_cluster(c, study: str = "study"):
    """A study's ``cluster=``, checked: ``Testbed(StarTopo(...))``, or ``InProcess()``/``Local()``/
    ``Mpirun()`` (ranks on this machine; ``ranks`` a setting like every other, 4 unless given).
    The study holds the object itself (settings change copies of it).

    >>> study_cluster(Local()).kind, study_cluster(Local()).n_ranks(), study_cluster(InProcess(ranks=2)).n_ranks()
    ('loopback', 4, 2)
    """
    try:
        kind = kinds.of(c)
    except ConfigError:
        raise ConfigError(f"{study}: cluster must be {', '.join(k.spelling for k in kinds.KINDS[:-1])}, "
                          f"{kinds.KINDS[-1].spelling} (from clusterlab.cluster) or Loopback/Mpi/InProcess(ranks=...), "
                          f"got {c!r}") from None
    return kind.accept(c, study)


def kind_of(c) -> str:
    """``inprocess``, ``loopback``, ``mpi``, ``testbed`` or ``simulated``: where a study's ranks run."""
    return c.kind


CLUSTER_KINDS = kinds.SWAPPABLE  # the values of a grid axis ``cluster`` (``testbed``, ``simulated``)


def cluster_as(c, kind: str):
    """The study's cluster ``c`` as ``kind`` (a grid axis ``cluster: [testbed, simulated]``): the
    same topology and ranks on the testbed, or simulated (with ``c``'s own simulation settings
    when ``c`` is a ``Simulated``, uncalibrated otherwise).

    >>> t = Testbed(StarTopo(hosts=8), ranks=4)
    >>> cluster_as(t, "simulated"), cluster_as(cluster_as(t, "simulated"), "testbed")
    (Simulated(StarTopo(hosts=8, rate='155Mbit', switch='bridge'), ranks=4), Testbed(StarTopo(hosts=8, rate='155Mbit', switch='bridge'), ranks=4))
    """
    if kind not in CLUSTER_KINDS:
        raise ConfigError(f"grid axis cluster: each value must be one of {', '.join(CLUSTER_KINDS)}, got {kind!r}")
    if kind_of(c) == kind:
        return c
    if kinds.of(c).swappable and c.topo is not None:
        return kinds.by_name(kind).from_topo(c.topo, c.ranks)
    raise ConfigError(f"grid axis cluster swaps a Testbed(StarTopo(...)) and a Simulated one, not {c!r}")


def cluster_settings(c) -> dict:
    """The cluster's settings by name (a testbed's: its topology's, ranks, dilation...; on this
    machine: ranks)."""
    return c.settings()


def cluster_with(c, values: dict):
    """``c`` with the settings in ``values`` changed (only those that differ are applied)."""
    changed = {k: v for k, v in values.items() if cluster_settings(c).get(k) != v}
    if not changed:
        return c
    return c.with_settings(**changed)


def cluster_ranks(c) -> int:
    return c.n_ranks()


# --- dilation: the testbed's own rule (cluster.testbed.dilation), as studies have used it -------
dilation_bounds = _dilation.dilation_bounds
pick_dilation = _dilation.pick_dilation


# --- workloads and reports (data only; the code lives in workloads/ and report/) ----------------
@dataclasses.dataclass(frozen=True)
class Workload:
    """A rank function by name (``workloads.get(name)`` runs it) and its settings."""

    name: str
    params: dict = dataclasses.field(default_factory=dict)
    dilatable: bool = True  # False: it computes for real, which a dilated run would not slow down
    # Refuses a point's settings with the reason (ConfigError), so that a grid or --set value is
    # refused when the study expands, not when its point runs.
    check: Callable[[dict], None] | None = dataclasses.field(default=None, compare=False, repr=False)
    # Whether settings make it dilatable (e.g. mining's compute=real or replay), so that a point's
    # --set value changes ``dilatable`` with it; None: ``dilatable`` as given.
    dilatable_of: Callable[[dict], bool] | None = dataclasses.field(default=None, compare=False, repr=False)

    def with_params(self, **kw) -> Workload:
        unknown = set(kw) - set(self.params)
        if unknown:
            raise ConfigError(f"workload {self.name} has no setting {sorted(unknown)} (has {sorted(self.params)})")
        params = {**self.params, **kw}
        if self.check is not None:
            self.check(params)
        dilatable = self.dilatable if self.dilatable_of is None else bool(self.dilatable_of(params))
        return dataclasses.replace(self, params=params, dilatable=dilatable)


@dataclasses.dataclass(frozen=True)
class Plot:
    """One figure of a study's report. ``kind``: ``scatter`` (every repetition its own mark,
    medians joined along a numeric x, bars side by side along a categorical one), ``speedup`` (y's median at the smallest x over each repetition),
    ``per_pass`` (a list column drawn per pass), ``attribution`` (time split, when the workload
    returns ``time_*`` columns), ``improvement`` (each x's gain over the ``baseline`` value of x,
    in percent of the baseline's median: ``baseline / y - 1`` for a time, ``y / baseline - 1``
    with ``higher_is_better``)."""

    kind: str
    x: str | None = None
    y: str | None = None
    hue: str | None = None
    logx: bool = False
    logy: bool = False
    title: str = ""
    where: tuple = ()  # (column, value) pairs selecting rows
    baseline: object = None  # improvement: the value of x the others are measured against
    higher_is_better: bool = False  # improvement: y is a rate (bandwidth), not a time

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class SeedNumbers:
    """Put the seed paper's numbers (from its text) for ``figure`` beside ours."""

    seed: str
    figure: str

    def to_dict(self) -> dict:
        return {"kind": "seed_numbers", "seed": self.seed, "figure": self.figure}


def scatter(x: str, y: str, hue: str | None = None, logx: bool = False, logy: bool = False, title: str = "",
            where: dict | None = None) -> Plot:
    return Plot("scatter", x, y, hue, logx, logy, title, tuple((where or {}).items()))


def speedup(x: str, y: str = "seconds", hue: str | None = None, title: str = "", where: dict | None = None) -> Plot:
    return Plot("speedup", x, y, hue, False, False, title, tuple((where or {}).items()))


def per_pass(y: str, x: str | None = None, hue: str | None = None, title: str = "",
             where: dict | None = None) -> Plot:
    return Plot("per_pass", x, y, hue, False, False, title, tuple((where or {}).items()))


def attribution(x: str, hue: str | None = None, title: str = "") -> Plot:
    return Plot("attribution", x, None, hue, False, False, title)


def improvement(x: str, baseline, y: str = "seconds", hue: str | None = None, title: str = "",
                where: dict | None = None, higher_is_better: bool = False) -> Plot:
    """Each value of ``x`` against ``baseline`` (another value of ``x``, such as the default
    setting), as percent gained: the figure a tuning paper shows as "the benefits"."""
    return Plot("improvement", x, y, hue, False, False, title, tuple((where or {}).items()), baseline,
                bool(higher_is_better))


def seed_numbers(seed: str, figure: str) -> SeedNumbers:
    return SeedNumbers(seed, figure)


# --- grid and points -----------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Grid:
    """Axes of settings; points are their product, first axis outermost. An axis is the name
    of any setting of the cluster, the transport or the workload, with a list of values; the
    axis ``tcp`` takes whole ``TransportConfig`` values (or their ``parse`` text); an axis whose values are dicts sets several
    settings together (e.g. ``scale=[{"hosts": 16}, {"hosts": 100, "prefer_dilation": 10}]``).

    >>> len(Grid(rto_min=["5ms", "50ms"], hosts=[8, 16]).combinations())
    4
    """

    axes: dict = dataclasses.field(default_factory=dict)

    def __init__(self, axes: dict | None = None, **kw):
        object.__setattr__(self, "axes", {**(axes or {}), **kw})
        for k, v in self.axes.items():
            if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple)) or not v:
                raise ConfigError(f"grid axis {k!r} needs a non-empty list of values, got {v!r}")

    def combinations(self) -> list[dict]:
        names = list(self.axes)
        return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*self.axes.values())]


@dataclasses.dataclass(frozen=True)
class DilationCheck:
    """Run ``point`` at each of ``dilations`` and show that ``y``'s medians agree within ``within``."""

    point: dict
    dilations: tuple = (1, 4)
    within: float = 0.10
    y: str = "seconds"

    def to_dict(self) -> dict:
        return {"point": dict(self.point), "dilations": list(self.dilations), "within": self.within, "y": self.y}


@dataclasses.dataclass(frozen=True)
class Point:
    """One setting of a study, resolved: what the runner brings up and runs."""

    index: int
    settings: dict  # flat: every setting of cluster, transport and workload; the axes' labels
    cluster: Any
    tcp: TransportConfig  # placed where the point runs (socket, testbed; None in-process)
    workload: Workload
    dilation: float
    dilation_note: str
    check: str = ""

    @property
    def label(self) -> str:
        return self.settings.get("label", "")


STUDY_FIELDS = ("repeat", "warmup", "monitor", "monitor_interval")
# Settings whose default (None) does not show their type: an example value of it.
# ``algorithm`` is a name whose default may be "auto" (the cost model's pick), not dilation's "auto".
TYPE_OF = {"hosts": 1, "ranks": 1, "mtu": 1, "prefer_dilation": 1.0, "dilation": "auto", "seed": 1, "algorithm": "name"}


@dataclasses.dataclass(frozen=True)
class Study:
    """What to run: ``workload`` on ``cluster`` at every point of ``grid`` (plus the ``checks``),
    ``repeat`` timed repetitions after ``warmup`` untimed ones, the monitor on or off; ``quick``
    holds the settings ``--quick`` applies (as ``--set`` would); ``report`` the plots and the
    seed's numbers; ``notes`` what differs from the paper and why."""

    name: str
    cluster: Any  # a clusterlab.cluster object: Testbed(StarTopo(...)), InProcess(), Local(), Mpirun()
    workload: Workload
    grid: Grid = dataclasses.field(default_factory=Grid)
    transport: TransportConfig = dataclasses.field(default_factory=TransportConfig)
    repeat: int = 10
    warmup: int = 1
    monitor: bool = True
    monitor_interval: float = 0.1
    checks: tuple = ()
    quick: dict = dataclasses.field(default_factory=dict)
    report: tuple = ()
    title: str = ""
    notes: str = ""

    def __post_init__(self):
        if not NAME_RE.match(self.name):
            raise ConfigError(f"study name {self.name!r} must be lowercase letters, digits and '-'")
        object.__setattr__(self, "cluster", study_cluster(self.cluster, f"study {self.name}"))
        if not isinstance(self.repeat, int) or self.repeat < 1:
            raise ConfigError(f"repeat must be at least 1, got {self.repeat!r}")
        if not isinstance(self.warmup, int) or self.warmup < 0:
            raise ConfigError(f"warmup must be at least 0, got {self.warmup!r}")
        if not 0.005 <= self.monitor_interval <= 60:
            raise ConfigError(f"monitor_interval must be 0.005..60 s, got {self.monitor_interval}")
        owners = self._owners()
        for k in self.grid.axes:
            check_name(k.removeprefix("_fixed_"), f"study {self.name}: grid axis")
            if k == "cluster":
                for v in self.grid.axes[k]:
                    cluster_as(self.cluster, v)
                continue
            if (k != "tcp" and not k.startswith("_fixed_") and k not in owners
                    and not all(isinstance(v, dict) for v in self.grid.axes[k])):
                raise ConfigError(f"study {self.name}: grid axis {k!r} is not a setting ({self.known_settings()})")

    # --- settings by name ------------------------------------------------------------------------
    def _owners(self) -> dict[str, str]:
        owners: dict[str, str] = {}
        for where, names in (("cluster", tuple(cluster_settings(self.cluster))), ("transport", TCP_SETTINGS),
                             ("workload", tuple(self.workload.params)), ("study", STUDY_FIELDS)):
            for n in names:
                if n in owners:
                    raise ConfigError(f"setting {n!r} belongs to both the {owners[n]} and the {where}")
                owners[n] = where
        return owners

    def known_settings(self) -> str:
        return ", ".join(sorted([*self._owners(), "tcp", "cluster", "checks"]))

    def defaults(self) -> dict:
        """Every setting's value before the grid: cluster, transport, workload."""
        d = cluster_settings(self.cluster)
        d.update({f: setting_text(self.transport, f) for f in TCP_SETTINGS})
        d.update(self.workload.params)
        return d

    def with_settings(self, overrides: dict[str, str], source: str = "--set") -> Study:
        """A copy with ``key=value`` text applied (``--set``, ``--quick``): a study field
        (repeat, warmup, monitor, monitor_interval; checks=none leaves out the checks' points), a grid axis (comma-separated values; ``tcp``
        values separated by ';'), or any other setting (fixed for every point)."""
        s = self
        owners = self._owners()
        axes = dict(self.grid.axes)
        fixed: dict[str, Any] = {}
        for key, value in overrides.items():
            check_name(key, source)
            if key in STUDY_FIELDS:
                s = dataclasses.replace(s, **{key: coerce(value, getattr(self, key), f"{source} {key}")})
            elif key == "checks":  # none: leave the checks' points to another part of the study (merge)
                if value not in ("none", "all"):
                    raise ConfigError(f"{source} checks: none or all, got {value!r}")
                s = dataclasses.replace(s, checks=[] if value == "none" else self.checks)
            elif key == "tcp":
                axes["tcp"] = [tcp_of(v) for v in _split_list(value, ";")]
            elif key == "cluster":
                axes["cluster"] = _split_list(value, ",")
                for v in axes["cluster"]:
                    cluster_as(self.cluster, v)
            elif key in axes and all(isinstance(v, dict) for v in axes[key]):  # pick bundles by name
                want = _split_list(value, ",")
                kept = [v for v in axes[key] if v.get("name") in want]
                if len(kept) != len(want):
                    raise ConfigError(f"{source} {key}: choose among {[v.get('name') for v in axes[key]]}")
                axes[key] = kept
            elif key in axes:
                example = axes[key][0]
                axes[key] = [coerce(v, example, f"{source} {key}") for v in _split_list(value, ",")]
            elif key in owners:
                fixed[key] = coerce(value, TYPE_OF.get(key, self.defaults().get(key)), f"{source} {key}")
            else:
                raise ConfigError(f"{source} {key}: study {self.name} has no such setting "
                                  f"(settings: {self.known_settings()})")
        if fixed:
            for k in fixed:
                axes.pop(k, None)
            axes = {**axes, **{f"_fixed_{k}": [v] for k, v in fixed.items()}}
        return dataclasses.replace(s, grid=Grid(axes))

    def with_quick(self, skip=()) -> Study:
        """``quick`` applied, leaving out the settings in ``skip`` (those ``--set`` gives: a
        quick run with ``--set network=ethernet-10`` runs that network, not the quick one)."""
        quick = {k: v for k, v in self.quick.items() if k not in set(skip)}
        return self.with_settings(quick, source="--quick") if quick else self

    # --- expansion -------------------------------------------------------------------------------
    def points(self) -> list[Point]:
        """Every point of the grid, then the checks' points; duplicates are dropped. Each one
        checked; the first impossible one raises ``ConfigError`` naming it."""
        raw: list[tuple[dict, dict, str]] = []
        for combo in self.grid.combinations():
            raw.append((combo, {}, ""))
        fixed = {k: v[0] for k, v in self.grid.axes.items() if k.startswith("_fixed_")}
        for i, chk in enumerate(self.checks):
            for k in chk.dilations:
                point = {a: b for a, b in chk.point.items() if f"_fixed_{a}" not in fixed}
                raw.append(({**point, **fixed}, {"dilation": k}, f"dilation-{i}"))
        out: list[Point] = []
        seen = set()
        for combo, forced, check in raw:
            p = self._point(len(out), combo, forced, check)
            key = (repr(sorted((k, repr(v)) for k, v in p.settings.items() if k != "label")), check)
            if key in seen:
                continue
            seen.add(key)
            out.append(p)
        return out

    def _point(self, index: int, combo: dict, forced: dict, check: str) -> Point:
        owners = self._owners()
        values = self.defaults()
        tcp = self.transport
        if "tcp" in combo:  # whole settings first; single transport settings may then change them
            tcp = tcp_of(combo["tcp"])
            values.update({f: setting_text(tcp, f) for f in TCP_SETTINGS})
        assigned: list[tuple[str, Any]] = []
        for k, v in combo.items():
            if isinstance(v, dict):
                assigned += [(a, b) for a, b in v.items() if a != "name"]
            elif k not in ("tcp", "cluster"):
                assigned.append((k.removeprefix("_fixed_"), v))
        assigned += list(forced.items())
        desc = ", ".join(f"{k.removeprefix('_fixed_')}={v.get('name', v) if isinstance(v, dict) else v}"
                         for k, v in {**combo, **forced}.items() if not isinstance(v, TransportConfig))
        try:
            for k, v in assigned:
                check_name(k, "setting")
                if k not in owners or owners[k] == "study":
                    raise ConfigError(f"{k!r} is not a setting of this study ({self.known_settings()})")
                values[k] = v
            changed = {k: values[k] for k, _ in assigned if k in TCP_SETTINGS}
            if changed:  # the same settings with these changed (a changed setting makes the label wrong)
                tcp = dataclasses.replace(tcp, **changed, label=None)
            cluster = cluster_with(self.cluster, {f: values[f] for f in cluster_settings(self.cluster)})
            if "cluster" in combo:
                cluster = cluster_as(cluster, combo["cluster"])
            workload = self.workload.with_params(**{f: values[f] for f in self.workload.params})
            # the cluster at the point's dilation, the transport checked against what it can take
            cluster, dilation, note = kinds.of(cluster).resolve(cluster, tcp, workload)
        except ConfigError as e:
            raise ConfigError(f"point {index} ({desc or 'defaults'}): {e}") from None
        if kinds.of(cluster).place is not None:  # where its settings apply (no TCP in-process)
            tcp = tcp.with_place(kinds.of(cluster).place)
        # The label: each axis once, in grid order, showing what ran.
        shown: dict[str, Any] = {}
        for k, v in {**combo, **forced}.items():
            if k == "tcp":
                shown["tcp"] = tcp.describe()
            elif k == "cluster":
                shown["cluster"] = kind_of(cluster)
            elif isinstance(v, dict):
                over = [a for a in v if a != "name" and values[a] != v[a]]
                name = v.get("name") or ", ".join(f"{a}={b}" for a, b in v.items())
                # a setting given beside the axis overrides the entry's: say what holds
                shown[k] = (", ".join(f"{a}={values[a]}" for a in over) + f" (set; replaces {name!r})") if over else name
            elif not (k.startswith("_fixed_") and any(isinstance(b, dict) and k[7:] in b for b in combo.values())):
                shown[k.removeprefix("_fixed_")] = values.get(k.removeprefix("_fixed_"), v)
        settings = {"cluster": kind_of(cluster), **values, **{k: v for k, v in shown.items() if k not in values},
                    "dilation": dilation, "tcp": tcp.describe()}
        for f in ("rto_min", "rto_min_jitter", "rto_max", "rto_max_offset"):  # numbers to plot against
            settings[f"{f}_s"] = _dur(values[f])
        # no axis: what the one point ran (its TCP settings), not "defaults" for a tuned run
        settings["label"] = ", ".join(f"{k}={v}" for k, v in shown.items()) or f"TCP: {tcp.describe()}"
        return Point(index, settings, cluster, tcp, workload, dilation, note, check)

    def to_dict(self) -> dict:
        """Everything that defines the study, as JSON-able data (for meta.json)."""
        def enc(v):
            if isinstance(v, TransportConfig):
                return {"tcp": v.to_dict()}
            if isinstance(v, dict):
                return {k: enc(x) for k, x in v.items()}
            return v
        return {"name": self.name, "title": self.title, "cluster": {"kind": kind_of(self.cluster),
                **cluster_settings(self.cluster)},
                "workload": {"name": self.workload.name, "params": dict(self.workload.params),
                             "dilatable": self.workload.dilatable},
                "transport": self.transport.to_dict(),
                "grid": {k: [enc(v) for v in vals] for k, vals in self.grid.axes.items()},
                "checks": [c.to_dict() for c in self.checks], "repeat": self.repeat, "warmup": self.warmup,
                "monitor": self.monitor, "monitor_interval": self.monitor_interval, "quick": dict(self.quick),
                "report": [r.to_dict() for r in self.report], "notes": self.notes}


def _split_list(text: str, sep: str) -> list[str]:
    parts = [p.strip() for p in str(text).split(sep)]
    if not parts or any(p == "" for p in parts):
        raise ConfigError(f"empty value in list {text!r} (separate values by {sep!r})")
    return parts


def coerce(text, like, what: str = "value"):
    """``text`` as the type of ``like`` (the setting's current value): int, float, bool, or
    text; ``none``/``default`` give None.

    >>> coerce("3", 10), coerce("0.5", 1.0), coerce("off", True), coerce("5ms", None), coerce("none", "1s")
    (3, 0.5, False, '5ms', None)
    >>> coerce("x", 3, "--set repeat")
    Traceback (most recent call last):
    ...
    clusterlab.errors.ConfigError: --set repeat: 'x' is not an integer
    """
    if not isinstance(text, str):
        return text
    t = text.strip()
    if t.lower() in ("none", "default") and not isinstance(like, (bool, int, float)):
        return None
    if isinstance(like, bool):
        if t.lower() in ("1", "true", "yes", "on"):
            return True
        if t.lower() in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{what}: {text!r} is not true/false")
    if isinstance(like, int):
        return parse_int(t, what)
    if isinstance(like, float):
        if t == "auto":
            return t
        return parse_float(t, what)
    if like == "auto":
        if t == "auto":
            return t
        return parse_float(t, what)
    return t


def parse_settings(pairs: Iterable[str]) -> dict[str, str]:
    """``["k=v", ...]`` (``--set``) as a dict; a pair without '=' is an error naming it.

    >>> parse_settings(["repeat=3", "rto_min=5ms,50ms"])
    {'repeat': '3', 'rto_min': '5ms,50ms'}
    """
    out = {}
    for p in pairs:
        if "=" not in p:
            raise ConfigError(f"--set {p!r}: expected key=value")
        k, v = p.split("=", 1)
        out[k.strip()] = v.strip()
    return out
