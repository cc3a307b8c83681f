"""``clusterlab demo``: the main job in small, run by ``make run``: seed 000's job scaled down.

Generate a seed000-style basket file, mine it with HPA on a local 4-rank cluster (TCP mesh on
loopback), print the strongest rules and the per-pass summary.
"""

from __future__ import annotations

from pathlib import Path

import click

from clusterlab.cli.options import Finite, OutputPath


@click.command(short_help="Seed 000 in small: Quest baskets mined with HPA on a local cluster.")
@click.option("--workdir", default="runs/demo", show_default=True, type=OutputPath(directory=True),
              help="Where the demo writes its files.")
@click.option("--transactions", default=200_000, show_default=True, type=click.IntRange(min=1000))
@click.option("--nodes", default=4, show_default=True, type=click.IntRange(min=1))
@click.option("--min-support", default=0.007, show_default=True, type=Finite(lo=0))
def demo(workdir, transactions, nodes, min_support):
    """Seed 000 in small: Quest baskets (|T|=15, |I|=4, 5000 items), mined with HPA on NODES local
    ranks over clusterlab's TCP mesh; prints the strongest rules and the per-pass summary.

    \b
    Examples:
      clusterlab demo                       # what `make run` runs
      clusterlab demo --nodes 2 --transactions 50000 --workdir /tmp/demo
    """
    import json
    import time

    import clusterlab
    from clusterlab._atomic import atomic_open
    from clusterlab.cli.mine import write_table
    from clusterlab.cluster import Local
    from clusterlab.data.generate import generate_file
    from clusterlab.mining.parallel import mine_parallel
    from clusterlab.report.mining_tables import format_passes

    wd = Path(workdir)
    wd.mkdir(parents=True, exist_ok=True)
    data = wd / f"seed000_{transactions}.dat"
    if not data.exists():
        r = generate_file(data, "seed000", transactions=transactions, seed=0)
        click.echo(f"generated {data} ({r.bytes / 1e6:.1f} MB, {transactions:,} transactions, 5000 items)")
    t0 = time.perf_counter()
    sets, passes = mine_parallel(data, nodes=nodes, algorithm="hpa", min_support=min_support, cluster=Local())
    wall = time.perf_counter() - t0
    write_table(sets, str(wd / "itemsets.parquet"))
    rules = clusterlab.rules(sets, min_confidence=0.5)
    write_table(rules, str(wd / "rules.parquet"), rules=True)
    with atomic_open(wd / "passes.json") as f:
        json.dump(passes, f, indent=1)
    click.echo(f"HPA on {nodes} local ranks: {sets.num_rows:,} frequent itemsets at {min_support:g} "
               f"in {wall:.2f} s ({sum(p['t_total'] for p in passes):.2f} s inside the ranks)")
    top = rules.sort_by([("lift", "descending"), ("confidence", "descending")]).slice(0, 10)
    click.echo("\nstrongest rules (by lift):")
    for a, c, conf, lift, sup in zip(top["antecedent"].to_pylist(), top["consequent"].to_pylist(),
                                     top["confidence"].to_pylist(), top["lift"].to_pylist(),
                                     top["support"].to_pylist(), strict=True):
        click.echo(f"  {' '.join(map(str, a)):>20} => {' '.join(map(str, c)):<6} "
                   f"conf {conf:.2f}  lift {lift:6.1f}  support {sup:.2%}")
    click.echo("\nper pass (times: slowest rank; bytes and messages: all ranks):")
    click.echo(format_passes(passes))
    click.echo(f"\nwrote {wd / 'itemsets.parquet'}, {wd / 'rules.parquet'}, {wd / 'passes.json'}")
