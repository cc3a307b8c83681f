"""``clusterlab gen``: write a synthetic IBM Quest basket workload as a FIMI file."""

from __future__ import annotations

import os

import click

from clusterlab.cli.options import Finite, Int, OutputPath
from clusterlab.data.generate import PRESETS, generate_file, quest_params
from clusterlab.errors import ConfigError


@click.command(short_help="IBM Quest synthetic baskets (T10I4D100K, --preset seed000).")
@click.argument("name", required=False)
@click.option("-o", "--output", type=OutputPath(), help="Output FIMI file (default: <NAME>.dat).")
@click.option("--preset", type=click.Choice(sorted(PRESETS)), help="A named workload (seed000: 10M transactions, 5000 items).")
@click.option("--items", "-N", type=Int(lo=1, hi=2**31 - 1), help="Number of distinct items N (default 1000; seed000: 5000).")
@click.option("--patterns", "-L", type=Int(lo=1, hi=2**31 - 1), help="Number of potentially large itemsets |L| (default 2000).")
@click.option("--transactions", "-D", type=Int(lo=1, hi=2**40), help="Override the number of transactions D.")
@click.option("--correlation", type=Finite(lo=0, hi=1), help="Mean fraction of a pattern shared with the previous one (default 0.5).")
@click.option("--corruption-mean", type=Finite(lo=0, hi=1), help="Mean corruption level of a pattern (default 0.5).")
@click.option("--corruption-sd", type=Finite(lo=0, hi=1), help="Standard deviation of the corruption level (default 0.1).")
@click.option("--seed", type=Int(lo=0, hi=2**64 - 1), default=0, show_default=True, help="Random seed (the output depends only on it and the parameters).")
@click.option("--threads", type=Int(lo=1, hi=4096), help="Worker threads (default: all cores; the output does not depend on it).")
@click.option("--partitions", type=Int(lo=1, hi=10**6), help="Also write <file>.index.json with P line-aligned byte ranges of equal transaction counts.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def gen(name, output, preset, items, patterns, transactions, correlation, corruption_mean, corruption_sd, seed,
        threads, partitions, quiet):
    """Generate NAME (e.g. T10I4D100K: average length 10, average pattern length 4,
    100,000 transactions; K = 1000, M = 1000000) with the IBM Quest model.

    \b
    Examples:
      clusterlab gen T10I4D100K --items 1000 -o t10.dat
      clusterlab gen --preset seed000 --partitions 4 -o seed000.dat
    """
    if name and preset:
        raise ConfigError("give either a workload NAME or --preset, not both")
    spec = preset or name
    if not spec:
        raise ConfigError("give a workload NAME such as T10I4D100K, or --preset seed000")
    p = quest_params(spec, items=items, patterns=patterns, transactions=transactions, correlation=correlation,
                     corruption_mean=corruption_mean, corruption_sd=corruption_sd, seed=seed)
    output = output or f"{preset or p.name}.dat"
    try:
        r = _write(output, p, threads, partitions, show=not quiet and p.transactions >= 200_000)
    except OSError as e:
        # An unwritable output path is a setting the user can fix: one line, exit status 2.
        raise ConfigError(f"cannot write {output}: {e.strerror or e}") from None
    extra = f", index {r.index_path} ({partitions} partitions)" if r.index_path else ""
    click.echo(f"{r.path}: {p.name} N={p.items} L={p.patterns} seed={p.seed}: {p.transactions:,} transactions, "
               f"{r.bytes / 1e6:,.1f} MB in {r.seconds:.2f} s ({r.mb_per_s:,.0f} MB/s){extra}")


def _write(output, p, threads, partitions, show):
    if show:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        bar = Progress(TextColumn("[bold]gen[/] {task.description}"), BarColumn(), MofNCompleteColumn(),
                       TimeElapsedColumn(), TimeRemainingColumn(), transient=True)
        with bar:
            task = bar.add_task(os.path.basename(output), total=p.transactions)
            return generate_file(output, p, threads=threads, partitions=partitions,
                                 progress=lambda done, _total: bar.update(task, completed=done))
    return generate_file(output, p, threads=threads, partitions=partitions)
