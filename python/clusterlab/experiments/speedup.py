"""The speedup study of seed 000 (Fig. 6): one parallel miner on 1..N local ranks, once per
transport setting (e.g. default TCP retransmission timers vs a tuned, per-rank jittered
minimum RTO), as a tidy table and a plot of speedup vs nodes with one line per setting.

Time is the job's time inside the ranks (first rank to start reading until the result is at
rank 0, slowest rank per pass), which is what seed 000 reports; process launch and mesh
set-up are recorded separately as ``wall_s``.

>>> parse_transport("default") is None
True
>>> parse_transport("rto_min=5ms,rto_min_jitter=100ms,rto_max=1s").rto_min
0.005
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, field

from clusterlab.errors import ConfigError

FIELDS = ("setting", "algorithm", "nodes", "repeat", "job_s", "wall_s", "passes", "itemsets", "bytes_sent",
          "messages_sent", "retransmissions", "timeouts", "speedup")


def parse_transport(text: str):
    """``default`` (None: the kernel's settings) or ``key=value,...`` with the fields of
    ``TransportConfig`` (durations like ``200ms``, sizes like ``256KiB``)."""
    from clusterlab.net.transport_config import TransportConfig
    from clusterlab.units import parse_duration, parse_size

    text = text.strip()
    if text in ("", "default"):
        return None
    kw: dict = {}
    for part in text.split(","):
        if "=" not in part:
            raise ConfigError(f"transport setting {part!r} is not key=value (in {text!r})")
        k, v = (x.strip() for x in part.split("=", 1))
        if k in ("rto_min", "rto_min_jitter", "rto_max", "rto_max_jitter"):
            kw[k] = parse_duration(v)
        elif k in ("sndbuf", "rcvbuf"):
            kw[k] = parse_size(v)
        elif k == "nodelay":
            kw[k] = v.lower() in ("1", "true", "yes", "on")
        elif k == "congestion":
            kw[k] = v
        elif k == "seed":
            kw[k] = int(v)
        else:
            raise ConfigError(f"unknown transport setting {k!r}; use rto_min, rto_min_jitter, rto_max, "
                              "rto_max_jitter, sndbuf, rcvbuf, nodelay, congestion, seed")
    return TransportConfig(**kw)


@dataclass
class SpeedupSpec:
    """What to run: ``algorithm`` on each of ``nodes`` rank counts for each transport setting
    (label -> ``key=value`` text or ``default``), ``repeat`` times."""

    data: str
    min_support: float
    algorithm: str = "hpa"
    nodes: list[int] = field(default_factory=lambda: [1, 2, 4, 8])
    settings: dict[str, str] = field(default_factory=lambda: {"default": "default"})
    repeat: int = 1
    backend: str = "tcp"
    block_bytes: int = 8192


def run_speedup(spec: SpeedupSpec, progress=None) -> list[dict]:
    """Run the study; returns tidy rows (see ``FIELDS``); ``speedup`` = median job time on the
    smallest node count / this row's job time, per setting."""
    from clusterlab.mining.parallel import ParallelConfig, mine_parallel

    if not spec.nodes or min(spec.nodes) < 1:
        raise ConfigError(f"nodes must be positive integers, got {spec.nodes}")
    if spec.repeat < 1:
        raise ConfigError(f"repeat must be at least 1, got {spec.repeat}")
    transports = {label: parse_transport(text) for label, text in spec.settings.items()}
    rows: list[dict] = []
    for label, transport in transports.items():
        for n in spec.nodes:
            for r in range(spec.repeat):
                t0 = time.perf_counter()
                table, passes = mine_parallel(spec.data, nodes=n, algorithm=spec.algorithm,
                                              min_support=spec.min_support, backend=spec.backend,
                                              config=ParallelConfig(block_bytes=spec.block_bytes),
                                              transport=transport)
                wall = time.perf_counter() - t0
                row = {"setting": label, "algorithm": spec.algorithm, "nodes": n, "repeat": r,
                       "job_s": sum(p["t_total"] for p in passes) + passes[0].get("t_read", 0.0),
                       "wall_s": wall, "passes": len(passes), "itemsets": table.num_rows,
                       "bytes_sent": sum(p["bytes_sent"] for p in passes),
                       "messages_sent": sum(p["messages_sent"] for p in passes),
                       "retransmissions": sum(p["retransmissions"] for p in passes),
                       "timeouts": sum(p["timeouts"] for p in passes), "speedup": None}
                rows.append(row)
                if progress:
                    progress(row)
    base_n = min(spec.nodes)
    for label in transports:
        base = statistics.median(r["job_s"] for r in rows if r["setting"] == label and r["nodes"] == base_n)
        for r in rows:
            if r["setting"] == label:
                r["speedup"] = base / r["job_s"] if r["job_s"] > 0 else None
    return rows


def plot_speedup(rows: list[dict], path, title: str = "") -> None:
    """Speedup vs nodes, one line per setting (median over repeats), with the ideal line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from clusterlab._atomic import atomic_path

    fig, ax = plt.subplots(figsize=(5.5, 4.2))
    nodes_all = sorted({r["nodes"] for r in rows})
    for label in dict.fromkeys(r["setting"] for r in rows):
        xs, ys = [], []
        for n in nodes_all:
            v = [r["speedup"] for r in rows if r["setting"] == label and r["nodes"] == n and r["speedup"]]
            if v:
                xs.append(n)
                ys.append(statistics.median(v))
        ax.plot(xs, ys, marker="o", label=label)
    lo = min(nodes_all)
    ax.plot(nodes_all, [n / lo for n in nodes_all], ls=":", color="grey", label="ideal")
    ax.set_xticks(nodes_all)
    ax.set_xlabel("nodes (ranks)")
    ax.set_ylabel("speedup")
    ax.set_title(title or "Speedup of parallel mining")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)


def write_rows(rows: list[dict], path) -> None:
    """The tidy table as CSV (``.csv``) or JSON (anything else), atomically."""
    from clusterlab._atomic import atomic_open

    if str(path).endswith(".csv"):
        with atomic_open(path) as f:
            f.write(",".join(FIELDS) + "\n")
            for r in rows:
                f.write(",".join("" if r.get(k) is None else str(r.get(k)) for k in FIELDS) + "\n")
    else:
        with atomic_open(path) as f:
            json.dump({"rows": rows}, f, indent=1)
