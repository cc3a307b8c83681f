"""The report of a study run: its plots (every repetition drawn as its own mark), a table per
point, the dilation checks, the seed's numbers beside ours, and what was emulated, as
``report.md`` and ``report.html`` in the run directory.

``render(run_dir)`` reads only the run directory (``table.parquet``, ``meta.json`` and, when
there, ``monitor.parquet``): a run can be re-reported anywhere, whatever the study file says
today. When the monitor sampled per-host CPU (the storage studies, seed 001), each point gets
Ganglia-style panels (``report.monitor_plots.storage_panels``: the target's network, CPU and
storage I/O, an initiator's CPU, over time) and a table of their means.
"""

from __future__ import annotations

import html
import json
import statistics
from pathlib import Path

from clusterlab.errors import ConfigError
from clusterlab.experiments import kinds
from clusterlab.monitor.procfs import CPU_BOUND_SPARE

MARKERS = "osD^v<>ph*X"


def _pct(x) -> str:
    return "-" if x is None else f"{x:.0%}"


def require_matplotlib():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("plots need matplotlib, which is not installed: pip install matplotlib "
                          "(from a clone: pip install '.[report]')") from None
    return plt


def load_run(run_dir) -> tuple[list[dict], dict]:
    """The repetitions and meta.json of a run directory; a damaged one is refused in one line
    naming the file (a torn table.parquet falls back to table.csv, which holds the same rows)."""
    d = Path(run_dir)
    try:
        meta = json.loads((d / "meta.json").read_text())
    except FileNotFoundError:
        raise ConfigError(f"{d}: no meta.json (not a study run directory)") from None
    except OSError as e:
        raise ConfigError(f"{d / 'meta.json'}: cannot read: {e.strerror or e}") from None
    except ValueError as e:
        raise ConfigError(f"{d / 'meta.json'}: not JSON ({e})") from None
    if not isinstance(meta, dict):
        raise ConfigError(f"{d / 'meta.json'}: not a run's meta.json (a JSON object), got {type(meta).__name__}")
    for key, kind in (("spec", dict), ("points", list), ("emulated", dict), ("machine", dict)):
        if key in meta and not isinstance(meta[key], kind):
            raise ConfigError(f"{d / 'meta.json'}: {key!r} must be a JSON {'object' if kind is dict else 'array'}")
    rows: list[dict] | None = None
    errors = []
    for name in ("table.parquet", "table.csv"):  # the CSV: a run kept without its Parquet
        path = d / name
        if not path.exists():
            continue
        try:
            if name.endswith(".parquet"):
                import pyarrow.parquet as pq

                # one file: ParquetFile, not read_table (whose dataset layer imports pandas, 0.35 s a process)
                with pq.ParquetFile(path) as f:
                    rows = f.read().to_pylist()
            else:
                import pyarrow.csv as pcsv

                rows = pcsv.read_csv(path).to_pylist()
            break
        except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
            errors.append(f"{path}: cannot read ({' '.join(str(e).split())[:200]})")
    if rows is None:
        if errors:
            raise ConfigError("; ".join(errors))
        if meta.get("points"):
            raise ConfigError(f"{d}: no table.parquet or table.csv beside meta.json (the repetitions are missing)")
        rows = []
    return rows, meta


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _list(v):
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            return None
    return v if isinstance(v, list) else None


def _label(col: str | None) -> str:
    names = {"rto_max_s": "MAX [s]", "rto_min_s": "MIN (X) [s]", "seconds": "time [s]", "ranks": "hosts",
             "retransmissions_per_node": "retransmissions per node", "timeouts_per_node": "RTO timeouts per node",
             "stack": "TCP stack", "tcp": "TCP settings", "rto_min_jitter": "MIN jitter", "label": "setting"}
    return names.get(col, (col or "").replace("_by_pass", " per pass"))


def hue_name(hue: str | None) -> str:
    """The legend's title: the variable(s) one line or bar group per value stands for.

    >>> hue_name("switch+stack+scale")
    'switch / TCP stack / scale'
    """
    return " / ".join(_label(h) for h in hue.split("+")) if hue else ""


# A tick label longer than this becomes a short key (A, B, ...) explained beside the axes.
TICK_LABEL_MAX = 24


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _values(rows, col) -> list:
    return list(dict.fromkeys(r.get(col) for r in rows if r.get(col) not in (None, "")))


def _determined_by(rows, col, shown) -> bool:
    """Whether ``col`` is a function of the ``shown`` columns over these rows (so the x axis or
    the legend already tells it)."""
    if not shown:
        return False
    keys = {tuple(str(r.get(s)) for s in shown) for r in rows}
    return len(keys) == len({(tuple(str(r.get(s)) for s in shown), str(r.get(col))) for r in rows})


def setup_caption(rows, meta, shown=(), where=()) -> str:
    """The set-up of the plotted rows in one line: hosts, link rate, buffer per port, switch,
    dilation and TCP settings they share (a setting that varies with the x axis or the legend
    is left to them; one that varies otherwise lists its values), then the ``where`` filter.

    >>> setup_caption([{"cluster": "testbed", "hosts": 16, "rate": "155Mbit", "buffer": "64KB", "switch": "atm",
    ...                 "dilation": 10.0, "tcp": "MAX = MIN + 100ms", "rto_min": "5ms"}], {}, shown=["rto_min"])
    '16 hosts, 155Mbit links, 64KB buffer per port, atm switch, dilation k=10; TCP: MAX = MIN + 100ms'
    """
    shown = [c for h in shown if h for c in str(h).split("+")]
    cluster = (meta.get("spec") or {}).get("cluster") or {}
    kind = (_values(rows, "cluster") or [cluster.get("kind")])[0]
    parts = []

    def one(col, fmt, fallback=None):
        if col in shown:
            return
        vals = _values(rows, col)
        if not vals and fallback not in (None, ""):
            vals = [fallback]
        if not vals or (len(vals) > 1 and _determined_by(rows, col, shown)):
            return
        parts.append(fmt.format(", ".join(_fmt(v) for v in vals)) + (" (varies)" if len(vals) > 1 else ""))

    k = kinds.by_name(kind)
    if k is not None and k.caption_network:
        if "hosts" not in shown and "ranks" not in shown:
            one("hosts" if _values(rows, "hosts") else "ranks", "{} hosts")
        one("rate", "{} links", cluster.get("rate"))
        one("buffer", "{} buffer per port", cluster.get("buffer"))
        one("switch", "{} switch", cluster.get("switch"))
        if "dilation" not in shown:
            ks = _values(rows, "dilation")
            if len(ks) == 1:
                parts.append(f"dilation k={_fmt(float(ks[0]))}")
            elif ks:  # per point (each marked k= where drawn)
                parts.append("dilation k per point (" + ", ".join(_fmt(float(k)) for k in sorted(ks)) + ")")
    elif kind:
        words = k.ranks_words if k is not None else f"{kind} ranks"
        if "ranks" not in shown and "hosts" not in shown:
            one("ranks", "{} " + words)
        else:
            parts.append(words)
    text = ", ".join(parts)
    if "tcp" not in shown:
        tcp = _values(rows, "tcp")
        if len(tcp) == 1:
            text += f"; TCP: {tcp[0]}"
    if where:
        text += "; " + ", ".join(f"{a}={_fmt(b)}" for a, b in where)
    return text


def _titled(ax, title: str, caption: str) -> None:
    ax.set_title(title + (f"\n{caption}" if caption else ""), fontsize=8.5)


def category_ticks(ax, cats: list[str]) -> list[str]:
    """Tick labels for categories: as they are when short, else short keys (A, B, ...) with
    the key written under the axes. Returns the labels drawn."""
    import textwrap

    long = any(len(c) > TICK_LABEL_MAX for c in cats)
    keys = [chr(ord("A") + i) if i < 26 else f"Z{i - 25}" for i in range(len(cats))] if long else list(cats)
    ax.set_xticks(range(len(cats)), keys, fontsize=7)
    if long:
        note = "\n".join(textwrap.shorten(f"{k}: {c}", 110) for k, c in zip(keys, cats, strict=True))
        ax.text(0.0, -0.19, note, transform=ax.transAxes, ha="left", va="top", fontsize=6.5)
    return keys


def _save(plt, fig, path: Path) -> None:
    from clusterlab._atomic import atomic_path

    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")
    plt.close(fig)


def _hue_of(r, hue):
    """A row's hue value; ``hue="stack+scale"`` combines columns ("seed-era / 16 hosts")."""
    if hue and "+" in hue:
        return " / ".join(str(r.get(h)) for h in hue.split("+") if r.get(h) not in (None, ""))
    return r.get(hue)


def _hues(rows, hue):
    return list(dict.fromkeys(_hue_of(r, hue) for r in rows)) if hue else [None]


def _hue_label(h, hue, among=()) -> str:
    """A line's legend entry: its hue value; a value left unset (None: the kernel's or the
    tool's default) says so; no hue at all: the line is the median. A hue of whole settings
    ("a=1, b=2", a point's label) shows only the settings that differ ``among`` the lines.

    >>> _hue_label("op=bcast, connections=persistent, hosts=3", "label",
    ...            ["op=bcast, connections=persistent, hosts=3", "op=bcast, connections=per_call, hosts=3"])
    'connections=persistent'
    """
    if hue is None:
        return "median"
    if h is None:
        return "not set (default)"
    pairs = [str(v).split(", ") for v in among if v is not None]
    if len(pairs) > 1 and all(all("=" in kv for kv in p) for p in pairs):
        common = set.intersection(*(set(p) for p in pairs))
        own = [kv for kv in str(h).split(", ") if kv not in common]
        if own:
            return ", ".join(own)
    return _fmt(h)


def _legend(ax, hue, **kw) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, title=hue_name(hue) or None, title_fontsize=7, **kw)


BYTE_COLUMNS = ("bytes", "size", "message_bytes", "block")


def _bytes_said(v: float) -> str:
    """A byte count as a reader writes it on an axis.

    >>> [_bytes_said(v) for v in (1, 4096, 65536, 1 << 20, 1536, 3e9)]
    ['1 B', '4 KiB', '64 KiB', '1 MiB', '1.5 KiB', '2.79 GiB']
    """
    for unit, n in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if v >= n:
            return f"{v / n:.3g} {unit}"
    return f"{v:g} B"


def _plain_log_ticks(axis, at: list, col: str) -> None:
    """A log axis labelled in plain numbers (0.01, 1, 100; "64 KiB" for bytes) instead of
    powers of ten; a byte axis ticked at the sizes measured (the seed's sizes), when few."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    byte = col in BYTE_COLUMNS
    if byte and 1 < len(at) <= 12:
        axis.set_major_locator(FixedLocator(at))
        axis.set_minor_formatter(NullFormatter())
    axis.set_major_formatter(FuncFormatter(lambda v, _: _bytes_said(v) if byte else f"{v:g}"))


def plot_scatter(plt, rows, spec, title, path, caption="") -> None:
    """Every repetition its own mark. A numeric x joins each line's medians; a categorical x
    (kernels, networks, settings) draws each hue's median as a bar, side by side per category,
    with no line joining the categories."""
    x, y, hue = spec["x"], spec["y"], spec.get("hue")
    fig, ax = plt.subplots(figsize=(7, 4.6))
    categorical = not all(_num(r.get(x)) for r in rows)
    cats = list(dict.fromkeys(str(r.get(x)) for r in rows)) if categorical else []
    hues = _hues(rows, hue)
    width = 0.8 / max(1, len(hues))
    for hi, h in enumerate(hues):
        rs = [r for r in rows if (hue is None or _hue_of(r, hue) == h) and _num(r.get(y))]
        color = f"C{hi % 10}"
        name = _hue_label(h, hue, hues)
        shift = (hi - (len(hues) - 1) / 2) * width
        for r in rs:  # every repetition its own mark (marker = repetition number)
            xv = cats.index(str(r[x])) + shift if categorical else r[x]
            cpu = r.get("cpu_bound")
            ax.scatter([xv], [r[y]], marker=MARKERS[int(r.get("rep", 0)) % len(MARKERS)], s=26,
                       facecolors="none" if cpu else color, edgecolors=color, linewidths=0.9, zorder=3)
        xs = sorted({r[x] for r in rs}, key=lambda v: cats.index(str(v)) if categorical else v)
        med = [statistics.median(r[y] for r in rs if r[x] == xx) for xx in xs]
        if categorical:
            ax.bar([cats.index(str(v)) + shift for v in xs], med, width * 0.9, color=color, alpha=0.35,
                   edgecolor=color, label=name)
            xpos = [cats.index(str(v)) + shift for v in xs]
        else:
            xpos = xs
            ax.plot(xpos, med, color=color, lw=1, label=name)
        for xx, xp, m in zip(xs, xpos, med, strict=True):
            k = next((r.get("dilation") for r in rs if r[x] == xx), 1.0)
            if k and k != 1.0:
                ax.annotate(f"k={k:g}", (xp, m), textcoords="offset points", xytext=(3, 5), fontsize=7, color=color)
    if categorical:
        category_ticks(ax, cats)
    if spec.get("logx") and not categorical:
        ax.set_xscale("log")
        _plain_log_ticks(ax.xaxis, sorted({r[x] for r in rows if _num(r.get(x))}), x)
    if spec.get("logy"):
        ax.set_yscale("log")
        _plain_log_ticks(ax.yaxis, [], y)
    ax.set_xlabel(_label(x))
    ax.set_ylabel(_label(y))
    _titled(ax, title, caption)
    ax.grid(alpha=0.3)
    _legend(ax, hue)
    what = "bar = median" if categorical else "line = median"
    # under the axes, where it hides no data
    ax.text(1.0, -0.13, f"{what}; marker = repetition; hollow = CPU-bound; k = dilation", transform=ax.transAxes,
            ha="right", va="top", fontsize=6, color="grey")
    _save(plt, fig, path)


def plot_speedup(plt, rows, spec, title, path, caption="") -> None:
    x, y, hue = spec["x"], spec.get("y") or "seconds", spec.get("hue")
    fig, ax = plt.subplots(figsize=(6, 4.6))
    allx = sorted({r[x] for r in rows if _num(r.get(x))})
    top = 1.0
    lines = []
    for hi, h in enumerate(_hues(rows, hue)):
        rs = [r for r in rows if (hue is None or _hue_of(r, hue) == h) and _num(r.get(y)) and r[y] > 0]
        xs = sorted({r[x] for r in rs})
        if xs:
            lines.append((hi, h, rs, xs))
    # each line from its own smallest host count (a line run from 16 hosts starts at speedup 16)
    starts = {xs[0] for _, _, _, xs in lines}
    for hi, h, rs, xs in lines:
        base = statistics.median(r[y] for r in rs if r[x] == xs[0]) * xs[0]
        top = max(top, *(base / r[y] for r in rs))
        for r in rs:
            ax.scatter([r[x]], [base / r[y]], marker=MARKERS[int(r.get("rep", 0)) % len(MARKERS)], s=24,
                       facecolors="none" if r.get("cpu_bound") else f"C{hi % 10}", edgecolors=f"C{hi % 10}")
        ax.plot(xs, [base / statistics.median(r[y] for r in rs if r[x] == xx) for xx in xs], color=f"C{hi % 10}",
                label=_hue_label(h, hue, [ln[1] for ln in lines]) + (f" (from {_fmt(xs[0])})" if len(starts) > 1 else ""))
    if allx:
        ax.plot(allx, allx, ls=":", color="grey", label="ideal")
        ax.set_ylim(0, top * 1.15)  # the data's scale: the ideal line leaves the plot where it outgrows it
    ax.set_xlabel(_label(x))
    if len(starts) > 1:
        ax.set_ylabel(f"speedup (from each line's first x: x0 * {_label(y)} at x0 / {_label(y)})")
    else:
        ax.set_ylabel(f"speedup ({_label(y)} at {allx[0] if allx else 1} host(s) / {_label(y)})")
    _titled(ax, title, caption)
    ax.grid(alpha=0.3)
    # many lines: the legend under the axes, where it hides none of them (inside, "best" put it
    # over the fastest lines' ends)
    _legend(ax, hue, **({"loc": "upper center", "bbox_to_anchor": (0.5, -0.13)} if len(lines) > 3 else {}))
    _save(plt, fig, path)


def improvements(rows, x: str, y: str, baseline, hue: str | None = None, higher_is_better: bool = False) -> dict:
    """Per hue, per value of ``x`` other than ``baseline``: (median gain, each repetition's
    gain), in percent of the baseline's median (``baseline / y - 1`` for a time; ``y /
    baseline - 1`` for a rate). A hue without the baseline is left out.

    >>> rows = [{"b": "auto", "s": 10.0}, {"b": "16K", "s": 8.0}, {"b": "16K", "s": 5.0}]
    >>> g = improvements(rows, "b", "s", "auto")[None]["16K"]
    >>> round(g[0], 1), g[1]          # the median time 6.5 s against 10 s; each repetition's
    (53.8, [25.0, 100.0])
    """
    out: dict = {}
    for h in _hues(rows, hue):
        rs = [r for r in rows if (hue is None or _hue_of(r, hue) == h) and _num(r.get(y)) and r[y] > 0]
        base = [r[y] for r in rs if str(r.get(x)) == str(baseline)]
        if not base:
            continue
        b = statistics.median(base)

        def gain(v, b=b):
            return (v / b - 1.0 if higher_is_better else b / v - 1.0) * 100.0
        per: dict = {}
        for v in dict.fromkeys(str(r.get(x)) for r in rs):
            if v == str(baseline):
                continue
            ys = [r[y] for r in rs if str(r.get(x)) == v]
            per[v] = (gain(statistics.median(ys)), [gain(a) for a in ys])
        out[h] = per
    return out


def plot_improvement(plt, rows, spec, title, path, caption="") -> None:
    """Bars: each setting's median gain over the baseline setting, per hue side by side;
    markers: each repetition's; a hollow line at 0 (no gain)."""
    x, y, hue, base = spec["x"], spec.get("y") or "seconds", spec.get("hue"), spec.get("baseline")
    gains = improvements(rows, x, y, base, hue, bool(spec.get("higher_is_better")))
    fig, ax = plt.subplots(figsize=(7, 4.6))
    cats = list(dict.fromkeys(v for per in gains.values() for v in per))
    width = 0.8 / max(1, len(gains))
    for hi, (h, per) in enumerate(gains.items()):
        color, shift = f"C{hi % 10}", (hi - (len(gains) - 1) / 2) * width
        xs = [cats.index(v) + shift for v in per]
        ax.bar(xs, [m for m, _ in per.values()], width * 0.9, color=color, alpha=0.35, edgecolor=color,
               label=_hue_label(h, hue, list(gains)))
        for xp, (_, reps) in zip(xs, per.values(), strict=True):
            ax.scatter([xp] * len(reps), reps, s=20, color=color, zorder=3)
    ax.axhline(0.0, color="grey", lw=0.8)
    if cats:
        category_ticks(ax, cats)
    ax.set_xlabel(_label(x))
    ratio = f"this {y} / its - 1" if spec.get("higher_is_better") else f"its {y} / this - 1"
    ax.set_ylabel(f"gain over {x}={_fmt(base)}, % ({ratio})")
    _titled(ax, title, caption)
    ax.grid(alpha=0.3, axis="y")
    _legend(ax, hue)
    ax.text(1.0, -0.13, "bar = median; dot = repetition; 0 = the baseline", transform=ax.transAxes,
            ha="right", va="top", fontsize=6, color="grey")
    _save(plt, fig, path)


def plot_per_pass(plt, rows, spec, title, path, caption="") -> None:
    y, hue = spec["y"], spec.get("hue")
    rs = [r for r in rows if _list(r.get(y)) is not None]
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    if rs:
        xcol = spec.get("x") or "ranks"
        top = max((r.get(xcol) for r in rs if _num(r.get(xcol))), default=None)
        rs = [r for r in rs if top is None or r.get(xcol) == top]
        hues = _hues(rs, hue)
        width = 0.8 / max(1, len(hues))
        for hi, h in enumerate(hues):
            mine = [r for r in rs if hue is None or _hue_of(r, hue) == h]
            lists = [_list(r[y]) for r in mine]
            n = max(len(v) for v in lists)
            for v, r in zip(lists, mine, strict=True):
                ax.scatter([i + 1 + (hi - (len(hues) - 1) / 2) * width for i in range(len(v))], v, s=14,
                           marker=MARKERS[int(r.get("rep", 0)) % len(MARKERS)], color=f"C{hi % 10}")
            med = [statistics.median(v[i] if i < len(v) else 0 for v in lists) for i in range(n)]
            ax.bar([i + 1 + (hi - (len(hues) - 1) / 2) * width for i in range(n)], med, width, alpha=0.35,
                   color=f"C{hi % 10}", label=_hue_label(h, hue, hues))
        title = f"{title} ({_label(xcol)} = {top})" if top is not None else title
    ax.set_xlabel("pass")
    ax.set_ylabel(_label(y).removesuffix(" per pass") + " (bar = median, marker = repetition)")
    _titled(ax, title, caption)
    ax.grid(alpha=0.3, axis="y")
    _legend(ax, hue)
    _save(plt, fig, path)


def time_parts(rows) -> list[str]:
    """The ``time_*`` columns (time attribution) a workload returned."""
    return sorted({c for r in rows for c, v in r.items() if c.startswith("time_") and _num(v)})


def attribution_axes(rows, spec) -> tuple[str, list[str]]:
    """The attribution figure's x (the study's first plotted x, else its first varying grid
    axis) and the axes that split it into panels (the other grid axes that vary and that x
    does not determine).

    >>> rows = [{"ranks": n, "timers": t, "rep": 0} for n in (1, 2) for t in ("default", "tuned")]
    >>> attribution_axes(rows, {"grid": {"ranks": [1, 2], "timers": []}, "report": [{"kind": "speedup", "x": "ranks"}]})
    ('ranks', ['timers'])
    """
    varying = [a for a in (spec.get("grid") or {}) if not a.startswith("_") and len(_values(rows, a)) > 1]
    plotted = [p.get("x") for p in spec.get("report", []) if isinstance(p, dict) and p.get("x")]
    x = next((c for c in plotted if _values(rows, c)), None) or (varying[0] if varying else "rep")
    panels = [a for a in varying if a != x and not _determined_by(rows, a, [x])]
    return x, panels


def plot_attribution(plt, rows, parts, title, path, x="rep", panels=(), caption="") -> None:
    """Where the time goes: stacked medians of the ``time_*`` parts against ``x``, one panel per
    combination of the other varying settings (named in the panel's title, never in ticks)."""
    import math
    import textwrap

    groups = list(dict.fromkeys(tuple(r.get(a) for a in panels) for r in rows)) or [()]
    xs = sorted({r.get(x) for r in rows}, key=lambda v: (not _num(v), v if _num(v) else str(v)))
    ncol = min(len(groups), 4)
    nrow = math.ceil(len(groups) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.4 * ncol + 1.2, 3.0 * nrow + 1.2), sharey=True, squeeze=False)
    for gi, g in enumerate(groups):
        ax = axes[gi // ncol][gi % ncol]
        rs = [r for r in rows if tuple(r.get(a) for a in panels) == g]
        bottom = [0.0] * len(xs)
        for i, p in enumerate(parts):
            vals = []
            for xv in xs:
                v = [r[p] for r in rs if r.get(x) == xv and _num(r.get(p))]
                vals.append(statistics.median(v) if v else 0.0)
            ax.bar(range(len(xs)), vals, bottom=bottom, color=f"C{i % 10}", label=p.removeprefix("time_"))
            bottom = [a + b for a, b in zip(bottom, vals, strict=True)]
        tot = [[r["seconds"] for r in rs if r.get(x) == xv and _num(r.get("seconds"))] for xv in xs]
        ax.scatter([i for i, t in enumerate(tot) if t], [statistics.median(t) for t in tot if t], color="k",
                   marker="_", s=200, label="time (median)", zorder=3)
        category_ticks(ax, [_fmt(v) for v in xs])
        ax.set_xlabel(_label(x))
        if g:
            ax.set_title(textwrap.fill(", ".join(f"{_label(a)}={_fmt(v)}" for a, v in zip(panels, g, strict=True)), 48),
                         fontsize=7.5)
        if gi % ncol == 0:
            ax.set_ylabel("seconds (median over repetitions)")
    for gi in range(len(groups), nrow * ncol):
        axes[gi // ncol][gi % ncol].set_visible(False)
    axes[0][0].legend(fontsize=7, title="part of the time", title_fontsize=7)
    fig.suptitle(title + (f"\n{caption}" if caption else ""), fontsize=9)
    fig.tight_layout()
    _save(plt, fig, path)


def dilation_checks(rows, meta) -> list[dict]:
    """Each check: the medians at each dilation and whether they agree within its tolerance
    (``cluster.testbed.dilation.agree_medians``, the testbed's own rule)."""
    from clusterlab.cluster.testbed.dilation import agree_medians

    out = []
    for i, chk in enumerate(meta.get("spec", {}).get("checks", [])):
        rs = [r for r in rows if r.get("check") == f"dilation-{i}"]
        y = chk.get("y", "seconds")
        by_k = {float(k): [r[y] for r in rs if r.get("dilation") == float(k) and _num(r.get(y))]
                for k in chk["dilations"]}
        a = agree_medians(by_k, chk["within"])
        out.append({"point": chk["point"], "y": y, "medians": a["medians"], "within": chk["within"], "agree": a["ok"]})
    return out


def point_rows(rows, meta) -> list[list[str]]:
    out = []
    for pm in meta.get("points", []):
        rs = [r for r in rows if r.get("point") == pm["index"] and not r.get("failed")]
        secs = [r["seconds"] for r in rs if _num(r.get("seconds"))]
        rt = [r["retransmissions"] for r in rs if _num(r.get("retransmissions"))]
        k = pm.get("dilation", 1.0)
        mon = pm.get("monitor") or {}
        out.append([str(pm["index"]), pm["label"] + (f" [check {pm['check']}]" if pm.get("check") else "")
                    + (f" **failed** {pm['failed']}" if pm.get("failed") else ""),
                    f"{k:g}" + (" (dilated)" if k != 1 else "") + _auto_text(pm), str(len(rs)),
                    f"{statistics.median(secs):.4g}" if secs else "-",
                    f"{min(secs):.4g}..{max(secs):.4g}" if secs else "-",
                    f"{statistics.median(rt):g}" if rt else "-",
                    "yes" if pm.get("cpu_bound") else "no",
                    _pct(mon.get("mean_cpu_idle")), _pct(mon.get("mean_cpu_spare")),
                    _pct(mon.get("cpu_saturated_share")),
                    " / ".join(f"{x[0]:.1f}" for x in (pm.get("load_before"), pm.get("load_after")) if x)])
    return out


def _auto_text(pm: dict) -> str:
    """The dilation ladder of a point run with ``--auto-dilation``: ``; auto 1 -> 4 (FAIL, pass)``."""
    auto = pm.get("auto_dilation")
    if not isinstance(auto, dict) or not auto.get("attempts"):
        return ""
    steps = " -> ".join(f"{a['dilation']:g}" for a in auto["attempts"])
    return f"; auto-dilation {steps}" + ("" if auto.get("ok") else " (**none passed**)")


def auto_dilation_lines(meta: dict) -> list[str]:
    """Why each point run with ``--auto-dilation`` kept its dilation (the report's section)."""
    out = []
    for pm in meta.get("points", []):
        auto = pm.get("auto_dilation")
        if isinstance(auto, dict) and auto.get("why"):
            nexts = "; ".join(a["next"] for a in auto.get("attempts", []) if a.get("next"))
            out.append(f"- point {pm['index']} ({pm['label']}): {auto['why']}" + (f"; climbed: {nexts}" if nexts else ""))
    return out


# Settings that differ between a point and its twin on the other cluster without making it another
# point: which cluster, the label, the testbed's dilation and TCP placement, the simulation's own.
_NOT_THE_POINT = {"cluster", "label", "dilation", "tcp", "latency", "latency_factor", "bandwidth_factor", "overhead",
                  "overhead_per_byte"}


def simulated_vs_testbed(rows, meta) -> list[dict]:
    """Points run on both the testbed and the simulated cluster (a grid axis ``cluster``): each
    pair's median ``seconds`` and the error of the simulated one (simulated / testbed - 1).

    >>> meta = {"points": [{"index": i, "label": f"cluster={c}, hosts={h}", "settings": {"cluster": c, "hosts": h,
    ...          "dilation": 1.0}} for i, (c, h) in enumerate([("testbed", 8), ("simulated", 8), ("testbed", 16)])]}
    >>> rows = [{"point": 0, "seconds": 0.2}, {"point": 0, "seconds": 0.4}, {"point": 1, "seconds": 0.27},
    ...         {"point": 2, "seconds": 1.0}]
    >>> [(p["testbed_s"], p["simulated_s"], round(p["error"], 3)) for p in simulated_vs_testbed(rows, meta)]
    [(0.30000000000000004, 0.27, -0.1)]
    """
    by_key: dict[tuple, dict[str, dict]] = {}
    for pm in meta.get("points", []):
        st = pm.get("settings") or {}
        if pm.get("check") or st.get("cluster") not in kinds.SWAPPABLE:  # the grid axis cluster's pair
            continue
        key = tuple(sorted((k, repr(v)) for k, v in st.items() if k not in _NOT_THE_POINT and not k.endswith("_s")))
        by_key.setdefault(key, {})[st["cluster"]] = pm
    out = []
    for pair in by_key.values():
        if len(pair) != 2:
            continue
        med = {}
        for kind, pm in pair.items():
            secs = [r["seconds"] for r in rows if r.get("point") == pm["index"] and not r.get("failed")
                    and _num(r.get("seconds"))]
            med[kind] = statistics.median(secs) if secs else None
        if med["testbed"] and med["simulated"] is not None:
            label = ", ".join(x for x in pair["testbed"]["label"].split(", ") if not x.startswith("cluster="))
            out.append({"point": label or "defaults", "testbed_s": med["testbed"], "simulated_s": med["simulated"],
                        "error": med["simulated"] / med["testbed"] - 1})
    return out


def render(run_dir) -> dict:
    """Write the plots, ``report.md`` and ``report.html`` into ``run_dir``; returns what was
    written and the checks."""
    from clusterlab._atomic import atomic_open, check_output
    from clusterlab.experiments.studies import papers

    d = Path(run_dir)
    rows, meta = load_run(d)
    check_output(d, "report directory", directory=True)  # before drawing anything
    plt = require_matplotlib()
    spec = meta.get("spec", {})
    title = meta.get("title") or meta.get("study", d.name)
    main = [r for r in rows if not r.get("check")]
    pngs: list[tuple[str, str]] = []
    skipped: list[str] = []
    plots = {"scatter": plot_scatter, "speedup": plot_speedup, "per_pass": plot_per_pass,
             "improvement": plot_improvement}
    for i, p in enumerate(spec.get("report", [])):
        kind = p.get("kind") if isinstance(p, dict) else None
        if kind == "seed_numbers":
            continue
        if kind not in plots:
            skipped.append(f"plot {i + 1}: unknown kind {kind!r} (known: {', '.join(plots)}, seed_numbers)")
            continue
        name = f"fig{i + 1}-{kind}-{p.get('y') or 'time'}.png".replace("/", "_")
        t = f"{title}\n" + (p.get("title") or _label(p.get("y")) + (f" vs {_label(p.get('x'))}" if p.get("x") else ""))
        data = [r for r in main if all(r.get(a) == b for a, b in p.get("where", []))]
        if not data:
            continue
        caption = setup_caption(data, meta, shown=[p.get("x") or "ranks", p.get("hue")], where=p.get("where", []))
        plots[kind](plt, data, p, t, d / name, caption=caption)
        pngs.append((name, t.replace("\n", ": ")))
    parts = time_parts(rows)
    if parts:
        ax_x, panels = attribution_axes(main, spec)
        plot_attribution(plt, main, parts, f"{title}\nwhere the time goes", d / "attribution.png", x=ax_x,
                         panels=panels, caption=setup_caption(main, meta, shown=[ax_x, *panels]))
        pngs.append(("attribution.png", "where the time goes (time attribution)"))
    checks = dilation_checks(rows, meta)
    panels = monitor_panels(d, meta)
    md = _markdown(meta, rows, pngs, checks, papers(), title, panels)
    if skipped:
        md += "\n## Not drawn\n\n" + "".join(f"- {s}\n" for s in skipped)
    with atomic_open(d / "report.md") as f:
        f.write(md)
    with atomic_open(d / "report.html") as f:
        f.write(_html(md, title))
    return {"pngs": [p for p, _ in pngs] + [p["png"] for p in panels], "checks": checks, "rows": len(rows),
            "status": meta.get("status"), "panels": panels}


def monitor_panels(d: Path, meta: dict) -> list[dict]:
    """Seed 001's Ganglia-style panels of every point whose monitor sampled per-host CPU, as
    ``monitor-<point>-storage.png``; each entry: the point, its label, the PNG and the panels'
    means. Nothing when the run has no ``monitor.parquet`` or no per-host CPU in it."""
    path = d / "monitor.parquet"
    if not path.exists():
        return []
    import pyarrow.compute as pc

    from clusterlab.monitor import read_table
    from clusterlab.report.monitor_plots import storage_panels

    tbl, mon_meta = read_table(path)
    if "point" not in tbl.column_names or not pc.any(pc.equal(tbl.column("metric"), "host_cpu_user")).as_py():
        return []
    out = []
    for pm in meta.get("points", []):
        part = tbl.filter(pc.equal(tbl.column("point"), pm["index"]))
        if not part.num_rows:
            continue
        pmon = pm.get("monitor") or {}
        # each point's monitor has its own start: its duration is its last sample's time
        pmeta = {**mon_meta, "duration": pc.max(part.column("t")).as_py(), "interval": pmon.get("interval")
                 or mon_meta.get("interval", 0.1), "cpus": (meta.get("machine") or {}).get("cpus")}
        name = f"monitor-{pm['index']}-storage.png"
        means = storage_panels(part, pmeta, d / name, title=f"point {pm['index']}: {pm['label']}")
        if means is not None:
            out.append({"point": pm["index"], "label": pm["label"], "png": name, "means": means})
    return out


def _table(head: list[str], body: list[list[str]]) -> list[str]:
    def cell(s):
        return str(s).replace("|", "\\|").replace("\n", " ")
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(cell(c) for c in r) + " |"
                                                                         for r in body]


def _panel_section(panels: list[dict]) -> list[str]:
    md = ["## The monitor's panels (Ganglia-style, per point)", "",
          "What the study's monitor sampled while each point ran (all its repetitions, and the local-file "
          "runs beside them): the target's network (MB/s each way), the target's CPU (cores: user, system; threads "
          "in uninterruptible sleep, i.e. waiting for the disk), its backing store's reads and writes, and the "
          "first initiator's CPU; means over the point's whole monitored time.", ""]
    body = []
    for p in panels:
        m = p["means"]
        body.append([str(p["point"]), p["label"], f"{m.get('target_in_mbps', 0):g} / {m.get('target_out_mbps', 0):g}",
                     f"{m.get('target_cpu_user', 0):g} / {m.get('target_cpu_system', 0):g}",
                     f"{m.get('target_io_wait_threads', 0):g}",
                     f"{m.get('backing_read_mbps', 0):g} / {m.get('backing_write_mbps', 0):g} ({m.get('backing')})",
                     f"{m.get('initiator')}: {m.get('initiator_cpu_user', 0):g} / {m.get('initiator_cpu_system', 0):g}"])
    md += _table(["#", "point", "target in / out MB/s", "target CPU user / system (cores)", "target threads waiting",
                  "backing read / write MB/s", "initiator CPU user / system (cores)"], body)
    md.append("")
    bad = [f"point {p['point']}: {x}" for p in panels for x in p["means"].get("impossible", [])]
    if bad:  # samples no machine could produce: a monitor bug to fix, not a measurement
        md += ["**Samples that cannot be real** (drawn cut and marked red; the monitor has a bug to find): "
               + "; ".join(bad) + ".", ""]
    for p in panels:
        md += [f"![point {p['point']}: {p['label']}]({p['png']})", ""]
    return md


def _ranges(xs: list[int]) -> str:
    """
    >>> _ranges([0, 1, 2, 5, 7, 8])
    '0-2, 5, 7-8'
    """
    out, xs = [], sorted(xs)
    i = 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    return ", ".join(out)


def _utc(t) -> str:
    import datetime

    if not isinstance(t, (int, float)):
        return "?"
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def noisy_recordings(rows, meta) -> str | None:
    """The report's line naming the compute replay recordings during which other processes took
    more than ``FOREIGN_CPU_WARN`` of the machine's CPU (their replays compute too long); None
    when there are none, or the run's rows do not say (recordings made before it was measured).

    >>> noisy_recordings([{"point": 0, "ranks": 16, "recording_foreign_cpu": 0.28},
    ...                   {"point": 1, "ranks": 16, "recording_foreign_cpu": 0.28},
    ...                   {"point": 2, "ranks": 4, "recording_foreign_cpu": 0.02}, {"point": 3}], {}).split("): ")[-1]
    '16 ranks: 28% of the machine (2 points)'
    """
    from clusterlab.experiments.recording_load import FOREIGN_CPU_WARN, is_noisy

    labels = {pm.get("index"): pm.get("label") for pm in meta.get("points", [])}
    noisy: dict = {}
    for r in rows:
        share = r.get("recording_foreign_cpu")
        if not is_noisy(share):
            continue
        ranks = r.get("ranks")
        key = f"{int(ranks)} ranks" if _num(ranks) else str(labels.get(r.get("point"), f"point {r.get('point')}"))
        worst, points = noisy.setdefault(key, [0.0, set()])
        noisy[key] = [max(worst, float(share)), points | {r.get("point")}]
    if not noisy:
        return None
    return (f"- **noisy recordings** (while a compute replay's recording ran, other processes took more than "
            f"{FOREIGN_CPU_WARN:.0%} of the machine's CPU from the cores its ranks used: its gaps, and every replay of "
            "them, are too long; record "
            "again on a quiet machine): "
            + "; ".join(f"{k}: {w:.0%} of the machine ({len(ps)} point{'s' if len(ps) != 1 else ''})"
                        for k, (w, ps) in noisy.items()))


def _markdown(meta, rows, pngs, checks, seeds, title, panels=()) -> str:
    spec = meta.get("spec", {})
    md = [f"# {title}", ""]
    status = meta.get("status")
    md.append(f"Study `{meta.get('study')}`, {sum(1 for r in rows if not r.get('failed'))} repetitions, status **{status}**"
              + (" (`--quick`: a smaller grid, not the full study)" if meta.get("quick") else "") + ".")
    if status != "complete":
        md.append(f"The run did not finish ({meta.get('error') or status}); the table holds the repetitions that did.")
    failed = [pm for pm in meta.get("points", []) if pm.get("failed")]
    if failed:
        md.append(f"The job failed at {len(failed)} point{'s' if len(failed) > 1 else ''} (the study went on; a "
                  "failed point has no time): " + "; ".join(f"{pm['label']}: {pm['failed']}" for pm in failed) + ".")
    lb, la = meta.get("load_before"), meta.get("load_after")
    mach = meta.get("machine", {})
    md += ["", f"Machine: {mach.get('cpus')} CPUs ({mach.get('cpu_model', '?')}), kernel {mach.get('kernel')}; "
           f"load average before {lb} / after {la}; clusterlab {meta.get('version')} "
           f"(git {str((meta.get('git') or {}).get('revision'))[:12]}"
           f"{' + local changes' if (meta.get('git') or {}).get('dirty') else ''})."]
    if meta.get("overrides"):
        md.append(f"Settings changed with --set: {meta['overrides']}.")
    if meta.get("reported_from"):
        md += ["", f"The runs of study `{meta['reported_from']}` (this study runs the same points and reports them "
               "its own way: `clusterlab experiment merge --as`)."]
    if meta.get("parts"):
        md += ["", f"Merged from {len(meta['parts'])} runs (`clusterlab experiment merge`), each point from one of them:"]
        md += [f"- points {_ranges(p.get('points') or [])}: git {str((p.get('git') or {}).get('revision'))[:12]}"
               f"{' + local changes' if (p.get('git') or {}).get('dirty') else ''}, "
               f"{(p.get('machine') or {}).get('cpu_model', '?')} (kernel {(p.get('machine') or {}).get('kernel', '?')}), finished "
               f"{_utc(p.get('finished'))}, load average before {p.get('load_before')} / after {p.get('load_after')}"
               + (f", --set {p['overrides']}" if p.get("overrides") else "")
               + (f" (the run stopped: {p['stopped']}; its finished points are kept)" if p.get("stopped") else "")
               for p in meta["parts"]]
    md += ["", "## What was emulated", ""]
    md += [f"- {k}: {v}" for k, v in (meta.get("emulated") or {}).items()]
    notes = sorted({n for pm in meta.get("points", []) for n in pm.get("notes", [])})
    md += [f"- {n}" for n in notes]
    dil = [pm for pm in meta.get("points", []) if pm.get("dilation", 1) != 1]
    if dil:
        md.append("- dilated points (k picked per point so the RTO settings are expressible): "
                  + "; ".join(f"{pm['label']}: k={pm['dilation']:g} ({pm.get('dilation_note', '')})" for pm in dil))
    cpu = [pm["label"] for pm in meta.get("points", []) if pm.get("cpu_bound")]
    if cpu:
        md.append(f"- **CPU-bound** (spare CPU, i.e. idle, I/O wait or niced background work, below {CPU_BOUND_SPARE:.0%}: "
                  "these times measure the CPU as well "
                  f"as the network): {'; '.join(cpu)}")
    noisy = noisy_recordings(rows, meta)
    if noisy:
        md.append(noisy)
    if spec.get("notes"):
        md.append(f"- differences from the paper: {spec['notes']}")
    for kind in ("seed_numbers",):
        for p in spec.get("report", []):
            if p.get("kind") != kind:
                continue
            fig = seeds.get(p["seed"], {}).get(p["figure"])
            if fig is None:
                continue
            md += ["", f"## Seed {p['seed']}, {p['figure']}: the paper beside ours", "", f"*{fig['caption']}*", ""]
            mine = _our_setup(meta, rows)
            body = [[q, s, mine.get(q, "")] for q, s in fig["setup"]]
            for c in judged_claims(fig, meta, rows):
                verdict = {"agrees": " (agrees)", "differs": " (**differs**)", "CPU-bound":
                           " (not judged: most points CPU-bound, the times measure the CPU)"}.get(c["verdict"], "")
                body.append([c["claim"] + (f" ({c['where']})" if c["where"] else ""), c["seed"], c["ours"] + verdict])
            md += _table(["", "seed (from its text)", "ours"], body)
    if checks:
        md += ["", "## Dilation checks", "", "The same point at two dilations; the emulation is consistent when "
               "their medians agree within the tolerance.", ""]
        md += _table(["point", "medians by dilation", "tolerance", "agree"],
                     [[json.dumps(c["point"]), ", ".join(f"k={k:g}: {v:.4g} s" for k, v in c["medians"].items()),
                       f"{c['within']:.0%}", {True: "yes", False: "**no**", None: "not measured"}[c["agree"]]]
                      for c in checks])
    pairs = simulated_vs_testbed(rows, meta)
    if pairs:
        md += ["", "## Simulated beside the testbed", "", "Points run on both (grid axis `cluster`): the median round "
               "and the simulated one's error. The simulation's flows never lose a packet; a broadcast round's "
               "simulated time adds a loss/timeout model's expected RTO wait, fitted to testbed rounds (unless the "
               "simulated cluster's loss_model is off): a fit, not simulated loss (docs/simulation.md).", ""]
        md += _table(["point", "testbed median s", "simulated s", "error"],
                     [[p["point"], f"{p['testbed_s']:.4g}", f"{p['simulated_s']:.4g}", f"{p['error']:+.1%}"]
                      for p in pairs])
    md += ["", "## Figures", ""]
    for name, t in pngs:
        md += [f"![{t}]({name})", ""]
    if panels:
        md += _panel_section(list(panels))
    auto = auto_dilation_lines(meta)
    if auto:
        md += ["## Auto-dilation", "", "Each testbed point was judged by the fidelity check and rerun at a higher "
               "dilation until it passed (`--auto-dilation`, docs/diagnose.md); the kept run's rows are the point's.",
               "", *auto, ""]
    md += ["## Points", ""]
    md += _table(["#", "point", "dilation", "reps", "median s", "range s", "median retrans", "CPU-bound", "idle", "spare",
                  "saturated", "load before / after"], point_rows(rows, meta))
    md += ["", "Spare CPU: idle, I/O wait or niced (background work yields to the run); CPU-bound: mean spare below "
           f"{CPU_BOUND_SPARE:.0%}; saturated: the share of monitor samples below it (bursts the mean hides). "
           "Every repetition is a row of `table.parquet` / `table.csv`; the monitor's samples are in "
           "`monitor.parquet` (column `point`).", ""]
    return "\n".join(md)


def judged_claims(fig: dict, meta: dict, rows: list[dict], catch: bool = False):
    """Each of a paper figure's claims judged on a run's rows, per switch x TCP stack when the
    run compares them (each on its own, side by side): dicts ``claim, seed, where, ours,
    verdict``, verdict ``agrees``, ``differs``, ``not judged`` (the rule cannot say),
    ``CPU-bound`` (most points were: the times measure the CPU) or, with ``catch``, ``error``
    (the rule failed on these rows; without ``catch`` it raises)."""
    points = [pm for pm in meta.get("points", []) if not pm.get("check")]
    cpu_bound = bool(points) and sum(bool(pm.get("cpu_bound")) for pm in points) > len(points) / 2
    for text, seed_value, rule in fig["claims"]:
        for where, words in _partitions(rows):
            try:
                ours, ok = rule([r for r in rows if all(r.get(k) == v for k, v in where.items())])
            except Exception as e:  # noqa: BLE001 - with catch, one rule's failure is reported, not fatal
                if not catch:
                    raise
                ours, verdict = f"{type(e).__name__}: {e}", "error"
            else:
                verdict = "not judged" if ok is None else "CPU-bound" if cpu_bound else "agrees" if ok else "differs"
            yield {"claim": text, "seed": seed_value, "where": words, "ours": ours, "verdict": verdict}


def _partitions(rows) -> list[tuple[dict, str]]:
    """The switch x stack x scale x data combinations the rows hold (only the axes that vary), as
    filters and words: a claim is judged at each scale and data size on its own (16 hosts and 100,
    1M transactions and 10M, are not pooled).

    >>> _partitions([{"switch": "atm", "stack": "linux"}, {"switch": "bridge", "stack": "linux"}])
    [({'switch': 'atm'}, 'atm switch'), ({'switch': 'bridge'}, 'bridge switch')]
    >>> _partitions([{"stack": "linux"}])
    [({}, '')]
    >>> _partitions([{"stack": "linux", "scale": "16 hosts"}, {"stack": "linux", "scale": "100 hosts"}])[1]
    ({'scale': '100 hosts'}, '100 hosts')
    >>> _partitions([{"switch": "atm", "data": "seed000:1M"}, {"switch": "atm", "data": "seed000:10M"}])[1]
    ({'data': 'seed000:10M'}, 'seed000:10M')
    """
    axes = [(k, w) for k, w in (("switch", "switch"), ("stack", "TCP"), ("scale", ""), ("data", ""))
            if len({r.get(k) for r in rows if r.get(k)}) > 1]
    combos = list(dict.fromkeys(tuple(r.get(k) for k, _ in axes) for r in rows if all(r.get(k) for k, _ in axes)))
    if not axes or not combos:
        return [({}, "")]
    return [(dict(zip([k for k, _ in axes], c, strict=True)),
             ", ".join(f"{v} {w}".strip() for (_, w), v in zip(axes, c, strict=True))) for c in combos]


def _reps_said(meta, rows) -> str:
    """How many repetitions each point has, from the rows (a merged run's parts may differ from
    the spec's and from each other), and the warm-up runs before them.

    >>> _reps_said({"spec": {"repeat": 3, "warmup": 1}}, [{"point": 0}, {"point": 0}, {"point": 1}])
    '1-2 per point after 1 warm-up'
    >>> _reps_said({"spec": {"repeat": 2, "warmup": 1}, "overrides": {"warmup": "(the spec's) + 0 + 0"}}, [{"point": 0}])
    '1 per point after 0 or 1 warm-up (by part)'
    """
    per = {}
    for r in rows:
        per[r.get("point")] = per.get(r.get("point"), 0) + 1
    lo, hi = (min(per.values()), max(per.values())) if per else (meta.get("spec", {}).get("repeat"),) * 2
    spec_warm = meta.get("spec", {}).get("warmup")
    warm = str((meta.get("overrides") or {}).get("warmup", spec_warm))
    # a merged run's parts may differ: ' + '-joined, "(the spec's)" where a part kept it
    ws = sorted({str(spec_warm) if w == "(the spec's)" else w for w in warm.split(" + ")})
    warm = f"{ws[0]} warm-up" if len(ws) == 1 else f"{' or '.join(map(str, ws))} warm-up (by part)"
    return f"{lo if lo == hi else f'{lo}-{hi}'} per point after {warm}"


def _our_setup(meta, rows) -> dict:
    """Our side of the seed's set-up table, from the run's own record."""
    spec = meta.get("spec", {})
    c = spec.get("cluster", {})
    mach = meta.get("machine", {})
    hosts = sorted({r.get("hosts") or r.get("ranks") for r in rows if (r.get("hosts") or r.get("ranks"))})
    ks = sorted({pm.get("dilation", 1.0) for pm in meta.get("points", [])})
    stacks = list(dict.fromkeys(r.get("stack") for r in rows if r.get("stack")))
    out = {"nodes": f"{', '.join(map(str, hosts)) or '?'} {c.get('kind', '')} hosts on {mach.get('cpus')} CPUs "
                    f"({mach.get('cpu_model', '?')}), Linux {mach.get('kernel')}",
           "TCP defaults": "Linux: MIN 200 ms, MAX 120 s (the study sets what it varies)"
                           + (f"; TCP stacks: {', '.join(stacks)} (see What was emulated)" if stacks else ""),
           "repetitions": f"{_reps_said(meta, rows)}; every one its own mark"}
    k = kinds.by_name(c.get("kind"))
    if k is not None and k.dilates:
        out["network"] = ((meta.get("emulated") or {}).get("network", "")
                          + f"; dilation k in {', '.join(f'{k:g}' for k in ks)}")
    else:
        out["network"] = (meta.get("emulated") or {}).get("network", "")
    return out


def _html(md: str, title: str) -> str:
    """A plain HTML rendering of the Markdown this module writes (headings, tables, images)."""
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>", html.escape(title),
           "</title><style>body{font-family:sans-serif;max-width:1100px} td,th{border:1px solid #ccc;padding:3px}"
           " table{border-collapse:collapse}</style></head><body>"]
    in_table = False
    for line in md.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            if set(line) <= set("|-"):
                continue
            if not in_table:
                out.append("<table>")
                in_table = True
            out.append("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in cells) + "</tr>")
            continue
        if in_table:
            out.append("</table>")
            in_table = False
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{_inline(line[level:].strip())}</h{level}>")
        elif line.startswith("!["):
            alt, src = line[2:].split("](", 1)
            out.append(f"<p><img src='{html.escape(src.rstrip(')'))}' alt='{html.escape(alt.rstrip(']'))}'></p>")
        elif line.startswith("- "):
            out.append(f"<li>{_inline(line[2:])}</li>")
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
    if in_table:
        out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out)


def _inline(text: str) -> str:
    import re

    t = html.escape(text)
    t = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", t)
    t = re.sub(r"`(.+?)`", r"<code>\1</code>", t)
    return re.sub(r"\*(.+?)\*", r"<i>\1</i>", t)
