"""``clusterlab bench``: ping-pong (NetPIPE-style) and collective (OSU-style) benchmarks.

Other benchmark groups (``broadcast``, ``storage``) live in their own modules and appear here
when installed.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os

import click

from clusterlab.bench import collective as coll
from clusterlab.bench import pingpong as pp
from clusterlab.bench.spmd import spmd
from clusterlab.cli.options import Finite, Int, OutputPath
from clusterlab.cluster import BACKENDS, from_options
from clusterlab.comm import collectives, costmodel
from clusterlab.errors import ConfigError

LAZY = {"broadcast": ("clusterlab.cli.bench_broadcast", "broadcast"),
        "storage": ("clusterlab.cli.bench_storage", "storage")}


class BenchGroup(click.Group):
    def list_commands(self, ctx):
        extra = [n for n, (m, _) in LAZY.items() if importlib.util.find_spec(m) is not None]
        return sorted(set(super().list_commands(ctx)) | set(extra))

    def get_command(self, ctx, name):
        cmd = super().get_command(ctx, name)
        if cmd is None and name in LAZY and importlib.util.find_spec(LAZY[name][0]) is not None:
            cmd = getattr(importlib.import_module(LAZY[name][0]), LAZY[name][1])
        return cmd


@click.group(cls=BenchGroup)
def bench():
    """Measure the communication layer: ping-pong, collectives, and more.

    \b
    Ranks are processes on this machine over clusterlab's TCP mesh (--backend tcp, default),
    MPICH through mpi4py (mpi), threads (inproc), or this process when started by
    `clusterlab run` or `mpiexec` (world, chosen automatically then).

    \b
    Examples:
      clusterlab bench pingpong --sizes 1:64K
      clusterlab bench collective --op bcast -n 4 --sizes 1:1M
    """


backend_opt = click.option("--backend", type=click.Choice(BACKENDS), default="auto", show_default=True,
                           help="How ranks run (auto: world when started as a rank, else tcp).")


def _print_table(title: str, rows: list[dict], cols: list[tuple[str, str, str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title)
    for _, head, _ in cols:
        t.add_column(head, justify="right")
    for r in rows:
        t.add_row(*[fmt.format(r[k]) for k, _, fmt in cols])
    Console(width=max(100, 14 * len(cols))).print(t)


@bench.command()
@click.option("--sizes", default="1:4M", show_default=True,
              help="LO:HI (powers of two between, each also -+ the perturbation; K/M binary).")
@click.option("--perturbation", default=3, show_default=True, type=Int(lo=0, hi=1 << 20), help="Bytes added to and taken from each power of two.")
@click.option("--trial-time", default=0.05, show_default=True, type=Finite(hi=3600), help="Seconds one trial of a size should last.")
@click.option("--trials", default=3, show_default=True, type=Int(hi=10**6), help="Trials per size; the best is reported.")
@click.option("--np-out", "np_out", default="np.out", show_default=True, type=OutputPath(empty_ok=True),
              help="NetPIPE-format output file (bytes, Mbit/s, seconds); '' for none.")
@backend_opt
@click.option("--json", "as_json", is_flag=True, help='Print {"rows": [{"bytes", "mbps", "usec"}, ...]}.')
def pingpong(sizes, perturbation, trial_time, trials, np_out, backend, as_json):
    """Ping-pong between two ranks, NetPIPE's method: bytes, Mbit/s, usec (half round trip).

    \b
    Example:
      clusterlab bench pingpong --sizes 1:1M --json
    """
    if trials < 1 or not trial_time > 0:
        raise ConfigError(f"--trials must be >= 1 and --trial-time > 0 (got {trials}, {trial_time})")
    lo_hi = coll.sweep(sizes)
    size_list = pp.sizes(lo_hi[0] or 1, lo_hi[-1], perturbation)
    res = spmd(pp.pingpong, 2, size_list, trial_time, trials, cluster=from_options(backend))
    rows = res[0]
    if rows is None:  # a rank other than 0 (started by clusterlab run / mpiexec)
        return
    if np_out:
        pp.write_np_out(rows, np_out)
    if as_json:
        click.echo(json.dumps({"rows": [{k: r[k] for k in ("bytes", "mbps", "usec")} for r in rows]}, indent=1))
        return
    _print_table("ping-pong (half round trip)", rows,
                 [("bytes", "bytes", "{:,}"), ("mbps", "Mbit/s", "{:,.2f}"), ("usec", "usec", "{:,.2f}"),
                  ("reps", "reps", "{:,}")])


@bench.command()
@click.option("--op", required=True, type=click.Choice(collectives.OPS), help="Collective operation.")
@click.option("-n", "--ranks", "n", default=8, show_default=True, type=Int(hi=1024), help="Number of ranks.")
@click.option("--algorithm", default=None, help="Algorithm name (default: the cost model picks per size).")
@click.option("--sizes", default="1:1M", show_default=True,
              help="LO:HI (powers of two; K/M binary as in OSU) or a comma list (64KiB,1MiB).")
@click.option("--iterations", type=Int(lo=1, hi=10**9), default=None, help="Timed calls per size (default: ~--time-per-size s).")
@click.option("--warmup", type=Int(lo=0, hi=10**9), default=None, help="Untimed calls per size (default 10, 3 above 8 KiB).")
@click.option("--time-per-size", default=0.5, show_default=True, type=Finite(hi=3600), help="Seconds to spend per size when adapting.")
@click.option("--model", "model_path", type=click.Path(dir_okay=False), default=None,
              help="Cost model JSON (from `clusterlab tune model`); default $CLUSTERLAB_COSTMODEL or built-in.")
@backend_opt
@click.option("--json", "as_json", is_flag=True, help="Print one JSON row per size (the table's columns).")
def collective(op, n, algorithm, sizes, iterations, warmup, time_per_size, model_path, backend, as_json):
    """Latency of a collective over a size sweep, OSU-style, with the cost model's prediction.

    \b
    Columns: bytes, avg/min/max over ranks of the per-rank average (us), p50/p99 of the
    slowest rank per call (us), iterations, predicted_us, algorithm.
    Example:
      clusterlab bench collective --op bcast -n 8 --sizes 1:1M
    """
    if n < 1:
        raise ConfigError(f"-n must be at least 1, got {n}")
    if algorithm is not None and algorithm not in collectives.ALGORITHMS[op]:
        raise ConfigError(f"unknown {op} algorithm {algorithm!r} (one of {', '.join(sorted(collectives.ALGORITHMS[op]))})")
    cluster = from_options(backend)
    if algorithm is not None and not getattr(collectives.MODULES[op][algorithm], "AUTO", True) \
            and not cluster.multicast:
        raise ConfigError(f"--algorithm {algorithm} needs a multicast group: --backend inproc, or ranks in "
                          "testbed hosts (clusterlab run --testbed NAME -- clusterlab bench collective ...; the seed002 studies)")
    if iterations is not None and iterations < 1:
        raise ConfigError("--iterations must be at least 1")
    if (warmup is not None and warmup < 0) or not time_per_size > 0:
        raise ConfigError("--warmup must be >= 0 and --time-per-size > 0")
    if model_path:
        costmodel.CostModel.load(model_path)  # fail here, clearly, not in every rank
        os.environ[costmodel.ENV] = os.path.abspath(model_path)
    size_list = coll.sweep(sizes)
    rows = spmd(coll.run, n, op, size_list, algorithm, iterations, warmup, time_per_size,
                cluster=cluster)[0]
    if rows is None:
        return
    if as_json:
        for r in rows:
            click.echo(json.dumps(r))
        return
    _print_table(f"{op} on {n} ranks", rows,
                 [("bytes", "bytes", "{:,}"), ("avg_us", "avg_us", "{:,.1f}"), ("min_us", "min_us", "{:,.1f}"),
                  ("max_us", "max_us", "{:,.1f}"), ("p50_us", "p50_us", "{:,.1f}"), ("p99_us", "p99_us", "{:,.1f}"),
                  ("iterations", "iterations", "{:,}"), ("predicted_us", "predicted_us", "{:,.1f}"),
                  ("algorithm", "algorithm", "{}")])
