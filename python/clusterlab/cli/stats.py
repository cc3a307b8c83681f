"""``clusterlab stats FILE``: what a user checks first about a basket file."""

from __future__ import annotations

import json

import click

from clusterlab.cli.options import Int
from clusterlab.data.io import FORMATS, read_baskets
from clusterlab.errors import ConfigError


@click.command()
@click.argument("file", type=click.Path())
@click.option("--format", "fmt", type=click.Choice(FORMATS), help="Input format (default: from the extension; .dat is FIMI).")
@click.option("--top", default=10, show_default=True, type=Int(hi=10**9), help="How many of the most frequent items to list (>= 0).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def stats(file, fmt, top, as_json):
    """Transactions, distinct items, average/max length, density and the most frequent items.

    \b
    FILE may also be a pipe or /dev/stdin (FIMI is read as a stream; give --format for
    CSV or Parquet).

    \b
    Examples:
      clusterlab stats ../shared/data/T10I4D100K.dat --top 5
      cat ../shared/data/T10I4D100K.dat | clusterlab stats /dev/stdin --top 3
    """
    if top < 0:
        raise ConfigError(f"--top must be >= 0, got {top}")
    s = read_baskets(file, format=fmt).stats(top=top)
    s["file"] = file
    if as_json:
        click.echo(json.dumps(s, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=file, show_header=False, box=None)
    for key, label, f in (("transactions", "transactions", "{:,}"), ("distinct_items", "distinct items", "{:,}"),
                          ("average_length", "average length", "{:.2f}"), ("max_length", "max length", "{:,}"),
                          ("density", "density", "{:.4%}"), ("empty_transactions", "empty transactions", "{:,}"),
                          ("duplicates_dropped", "duplicate items dropped", "{:,}")):
        t.add_row(label, f.format(s[key]))
    Console().print(t)
    ft = Table(title=f"{len(s['most_frequent'])} most frequent items")
    ft.add_column("item")
    ft.add_column("count", justify="right")
    ft.add_column("support", justify="right")
    for row in s["most_frequent"]:
        ft.add_row(str(row["item"]), f"{row['count']:,}", f"{row['support']:.2%}")
    Console().print(ft)
