"""``clusterlab report RUN_DIR``: PNG plots + Markdown/HTML summary of a run's monitor table."""

from __future__ import annotations

import json
from pathlib import Path

import click

from clusterlab.errors import ConfigError


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--title", default=None, help="Title (default: the directory name).")
def report(run_dir, title):
    """Write traffic.png, packet_sizes.png, tcp.png, switch.png, cpu.png, report.md, report.html
    and summary.json into RUN_DIR from its monitor.parquet (or monitor.csv).

    \b
    Example:
      clusterlab bench broadcast --hosts 16 --reps 10 --run-dir runs/b16
      clusterlab report runs/b16
    """
    from clusterlab.monitor import read_table
    from clusterlab.report.monitor_plots import write_report

    d = Path(run_dir)
    cands = [d / "monitor.parquet", d / "monitor.csv"]
    src = next((c for c in cands if c.exists()), None)
    if src is None:
        raise ConfigError(f"{run_dir}: no monitor.parquet or monitor.csv (record one with clusterlab monitor)")
    tbl, meta = read_table(src)
    extra = None
    if (d / "bench.json").exists():
        try:
            extra = json.load(open(d / "bench.json")).get("settings")
        except ValueError as e:
            raise ConfigError(f"{d / 'bench.json'}: not JSON ({e})") from None
    s = write_report(tbl, meta, d, title or d.name, extra)
    click.echo(f"{d}/report.md: {s['tx_bytes']:,} bytes sent, {s['retransmissions']} retransmissions, "
               f"{s['timeouts']} timeouts, {s['switch_drops']} switch drops"
               + ("; CPU-bound" if s["cpu_bound"] else ""))
