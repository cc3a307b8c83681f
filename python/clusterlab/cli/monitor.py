"""``clusterlab monitor``: record the monitor table while a command runs (or for a while)."""

from __future__ import annotations

import subprocess
import time

import click

from clusterlab.cli.options import Finite, OutputPath
from clusterlab.errors import ConfigError
from clusterlab.units import MAX_SECONDS


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("--testbed", "tb_name", default=None, help="Monitor this testbed (default: the local machine).")
@click.option("--interval", default=0.1, show_default=True, type=Finite(lo=0.001, hi=3600), help="Sampling interval [s].")
@click.option("--duration", default=None, type=Finite(lo=0.001, hi=MAX_SECONDS), help="Stop after this many seconds (no command).")
@click.option("--no-capture", is_flag=True, help="Skip the packet-length histogram.")
@click.option("--host-cpu", is_flag=True,
              help="With --testbed: CPU and I/O wait of each host's threads, and the storage target's backing "
                   "store; the report then draws the storage panels.")
@click.option("-o", "--out", default="runs/monitor/monitor.parquet", show_default=True, type=OutputPath(),
              help="Output table (.parquet, or .csv).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def monitor(tb_name, interval, duration, no_capture, host_cpu, out, command):
    """Sample traffic, packet sizes, drops, TCP counters, CPU and disk into one table.

    \b
    Examples:
      clusterlab monitor --duration 5 -o runs/idle/monitor.parquet
      clusterlab monitor --testbed lab -o runs/x/monitor.parquet -- clusterlab testbed exec lab h0 ...
      clusterlab report runs/x
    """
    from clusterlab.monitor import Monitor

    if host_cpu and not tb_name:
        raise ConfigError("--host-cpu needs --testbed (hosts are a testbed's namespaces)")
    if not command and duration is None:
        raise ConfigError("give a command to run or --duration")
    if command:
        import shutil

        if shutil.which(command[0]) is None:
            raise ConfigError(f"{command[0]}: no such command (not found or not executable)")
    if tb_name:
        import functools

        from clusterlab.cluster.testbed import TestbedNetwork
        from clusterlab.cluster.testbed.storage import backing_io

        m = Monitor.for_testbed(TestbedNetwork.attach(tb_name), interval, capture=not no_capture, host_cpu=host_cpu,
                                backing=functools.partial(backing_io, tb_name) if host_cpu else None)
    else:
        m = Monitor.local(interval, capture=not no_capture)
    rc = 0
    with m:
        try:
            if command:
                rc = subprocess.call(list(command))
            else:
                time.sleep(duration)
        except KeyboardInterrupt:
            rc = 130
    m.write(out)
    meta = m.meta
    click.echo(f"{out}: {m.table().num_rows} rows, {meta['samples']} samples "
               f"({meta['late_samples']} late), capture {meta['capture']}", err=True)
    if rc:
        raise SystemExit(rc)
