"""``clusterlab demo``: the main job in small, run by ``make run``."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.option("--workdir", default="runs/demo", show_default=True, type=click.Path(file_okay=False),
              help="Where the demo writes its files.")
def demo(workdir):
    """The main job in small: basket statistics of a real FIMI file (grows with the project)."""
    from clusterlab.cli.stats import stats

    data = Path(__file__).resolve().parents[4] / "shared" / "data" / "T10I4D100K.dat"
    Path(workdir).mkdir(parents=True, exist_ok=True)
    ctx = click.get_current_context()
    ctx.invoke(stats, file=str(data), fmt=None, top=10, as_json=False)
