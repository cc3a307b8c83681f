"""Result files and plots of ``tune buffers``, each written atomically.

``write_results(results, dir)`` writes:

- ``tune.json``: the config, where it ran, every node's rows per value, the sums, the best value
  per size, the chosen and applied values, load and kernel;
- ``pingpong.csv`` (``variable,value,sysctl,node,bytes,mbps,usec,reps``) and ``sums.csv``
  (``variable,value,bytes,sum_mbps,best``);
- ``99-clusterlab-tune.conf``: the chosen values as a sysctl.d fragment;
- ``<variable>.png``: summed bandwidth against message size, one line per value, as measured and
  smoothed with a Bezier curve (seed 003's Figs. 2-4, (a) and (b));
- ``buffers.png``: summed bandwidth against buffer size (seed 003's Fig. 5).

>>> import numpy as np
>>> x, y = bezier(np.array([0.0, 1.0, 2.0]), np.array([0.0, 2.0, 0.0]), points=3)
>>> [round(float(v), 3) for v in x], [round(float(v), 3) for v in y]
([0.0, 1.0, 2.0], [0.0, 1.0, 0.0])
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import numpy as np

from clusterlab._atomic import atomic_open, atomic_path
from clusterlab.tune.buffers import sysctl_fragment

FRAGMENT = "99-clusterlab-tune.conf"


def bezier(x: np.ndarray, y: np.ndarray, points: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """The Bezier curve whose control points are ``(x, y)`` (de Casteljau), at ``points`` t's."""
    t = np.linspace(0.0, 1.0, points)[:, None]
    px = np.repeat(np.asarray(x, float)[None, :], points, 0)
    py = np.repeat(np.asarray(y, float)[None, :], points, 0)
    while px.shape[1] > 1:
        px = (1 - t) * px[:, :-1] + t * px[:, 1:]
        py = (1 - t) * py[:, :-1] + t * py[:, 1:]
    return px[:, 0], py[:, 0]


def _csv_text(header: list[str], rows: list[list]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def tables(results: dict) -> tuple[str, str]:
    """``pingpong.csv`` and ``sums.csv`` as text."""
    pp, sums = [], []
    for t in results["tests"]:
        for v in t["values"]:
            run = t["runs"][str(v)]
            for node, rows in enumerate(run["nodes"]):
                for r in rows:
                    pp.append([t["variable"], v, run["sysctl"], node, r["bytes"], f"{r['mbps']:.3f}",
                               f"{r['usec']:.3f}", r["reps"]])
            for nb, s in t["sums"][str(v)].items():
                sums.append([t["variable"], v, nb, f"{s:.3f}", int(t["best_per_size"][nb] == v)])
    return (_csv_text(["variable", "value", "sysctl", "node", "bytes", "mbps", "usec", "reps"], pp),
            _csv_text(["variable", "value", "bytes", "sum_mbps", "best"], sums))


def _label(variable: str, v: int) -> str:
    if variable == "tcp_window_scaling":
        return f"{variable}={v}"
    return f"{v // 1024} KiB" if v % 1024 == 0 else f"{v} B"


def _plot_variable(t: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    cmap = plt.get_cmap("viridis")
    for k, v in enumerate(t["values"]):
        s = t["sums"][str(v)]
        x = np.array([int(nb) for nb in s])
        y = np.array(list(s.values()))
        order = np.argsort(x)
        x, y = x[order], y[order]
        color = cmap(k / max(1, len(t["values"]) - 1))
        style = {"color": color, "lw": 2.2 if v == t["chosen"] else 1.0,
                 "ls": "--" if v == t["chosen"] else "-"}
        label = _label(t["variable"], v) + (" (chosen)" if v == t["chosen"] else "")
        axes[0].plot(x, y, label=label, **style)
        bx, by = bezier(np.log2(x), y)
        axes[1].plot(2 ** bx, by, label=label, **style)
    for ax, what in zip(axes, ("measured", "Bezier-smoothed"), strict=True):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_title(f"{t['variable']}: {what}")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("bandwidth summed over nodes (Mbit/s)")
    axes[1].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    _save(fig, path)


def _plot_buffers(tests: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for t in tests:
        vals = t["values"]
        peak = [max(t["sums"][str(v)].values()) for v in vals]
        mean = [float(np.mean(list(t["sums"][str(v)].values()))) for v in vals]
        line = ax.plot(vals, peak, marker="o", label=f"{t['variable']}: peak over sizes")[0]
        ax.plot(vals, mean, marker=".", ls=":", color=line.get_color(), label=f"{t['variable']}: mean over sizes")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("TCP buffer size (bytes)")
    ax.set_ylabel("bandwidth summed over nodes (Mbit/s)")
    ax.set_title("Bandwidth vs buffer size")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def _save(fig, path: Path) -> None:
    import matplotlib.pyplot as plt

    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)


def write_results(results: dict, outdir: str | os.PathLike, plots: bool = True) -> list[Path]:
    """Write every result file into ``outdir``; returns the paths written."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    pp, sums = tables(results)
    for name, text in (("tune.json", json.dumps(results, indent=1) + "\n"), ("pingpong.csv", pp),
                       ("sums.csv", sums), (FRAGMENT, sysctl_fragment(results))):
        with atomic_open(out / name) as f:
            f.write(text)
        written.append(out / name)
    if plots:
        for t in results["tests"]:
            _plot_variable(t, out / f"{t['variable']}.png")
            written.append(out / f"{t['variable']}.png")
        buffers = [t for t in results["tests"] if t["variable"] != "tcp_window_scaling" and len(t["values"]) > 1]
        if buffers:
            _plot_buffers(buffers, out / "buffers.png")
            written.append(out / "buffers.png")
    return written
