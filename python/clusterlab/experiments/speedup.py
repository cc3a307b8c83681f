"""The speedup study of seed 000 (Fig. 6) on local ranks: one parallel miner on 1..N local
ranks, once per transport setting (e.g. default TCP retransmission timers vs a tuned, per-rank
jittered minimum RTO), as a tidy table and a plot of speedup vs nodes with one line per setting.
It runs as a study (``speedup_study``, ``runner.run_study``); seed000-fig6 runs the same on
the testbed.

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
from dataclasses import dataclass, field

from clusterlab.errors import ConfigError

FIELDS = ("setting", "algorithm", "nodes", "repeat", "job_s", "wall_s", "passes", "itemsets", "bytes_sent",
          "messages_sent", "retransmissions", "timeouts", "speedup")


def parse_transport(text: str):
    """``default`` (None: the kernel's settings) or ``key=value,...`` in
    ``TransportConfig.parse``'s form (durations like ``200ms``, sizes like ``256KiB``), applied
    as socket options on local ranks."""
    from clusterlab.net.transport_config import TransportConfig

    text = text.strip()
    if text in ("", "default"):
        return None
    return TransportConfig.parse(text, place="socket")


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


def tcp_of(label: str, text: str):
    """A ``parse_transport`` text as a study's ``TransportConfig`` labelled ``label``."""
    import dataclasses

    from clusterlab.net.transport_config import TransportConfig

    return dataclasses.replace(parse_transport(text) or TransportConfig(), place=None, label=label)


def speedup_study(spec: SpeedupSpec):
    """The speedup experiment as a study: local ranks (or MPI), one point per (setting, nodes)."""
    from clusterlab.cluster import from_options
    from clusterlab.experiments.spec import Grid, Study
    from clusterlab.experiments.workloads import parallel_mining

    if not spec.nodes or min(spec.nodes) < 1:
        raise ConfigError(f"nodes must be positive integers, got {spec.nodes}")
    if spec.repeat < 1:
        raise ConfigError(f"repeat must be at least 1, got {spec.repeat}")
    cluster = from_options(spec.backend)  # tcp: local processes; mpi: under mpiexec
    return Study(name="speedup", title=f"{spec.algorithm.upper()} speedup on local ranks", cluster=cluster,
                 workload=parallel_mining(data=str(spec.data), min_support=spec.min_support,
                                          algorithm=spec.algorithm, block_size=str(spec.block_bytes)),
                 grid=Grid(tcp=[tcp_of(k, v) for k, v in spec.settings.items()], ranks=list(spec.nodes)),
                 repeat=spec.repeat, warmup=0, monitor=False)


def run_speedup(spec: SpeedupSpec, progress=None, out_dir=None) -> list[dict]:
    """Run the study; returns tidy rows (see ``FIELDS``); ``speedup`` = median job time on the
    smallest node count / this row's job time, per setting. ``out_dir``: also write the study's
    table and meta.json there."""
    from clusterlab.experiments.runner import run_study

    def to_row(r: dict) -> dict:
        return {"setting": r["tcp"], "algorithm": spec.algorithm, "nodes": r["ranks"], "repeat": r["rep"],
                "job_s": r["seconds"], "wall_s": r["wall_seconds"], "passes": r["passes"], "itemsets": r["itemsets"],
                "bytes_sent": r["bytes_sent"], "messages_sent": r["messages_sent"],
                "retransmissions": r["retransmissions"], "timeouts": r["timeouts"], "speedup": None}

    def hear(event, **info):
        if event == "rep" and progress:
            progress(to_row(info["row"]))

    res = run_study(speedup_study(spec), out_dir, progress=hear)
    rows = [to_row(r) for r in res.rows]
    base_n = min(spec.nodes)
    for label in spec.settings:
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
