"""``clusterlab run``: start n ranks of a command on this machine, connected by the TCP mesh."""

from __future__ import annotations

import os
import shutil
import sys

import click

from clusterlab.cli.options import transport_options
from clusterlab.errors import ConfigError
from clusterlab.units import parse_duration


def _dur(v):
    return None if v is None else parse_duration(v)


@click.command(context_settings={"ignore_unknown_options": False, "allow_interspersed_args": False})
@click.option("-n", "--nodes", "n", type=int, required=True, help="Number of ranks.")
@click.option("--backend", type=click.Choice(["tcp", "mpi"]), default="tcp", show_default=True,
              help="tcp: clusterlab's launcher and mesh; mpi: mpiexec and the MPI backend.")
@transport_options()
@click.option("--timeout", help="Kill the job after this long, e.g. 10min (default: no limit).")
@click.option("--comm-timeout", help="Timeout of every blocking communication call (default 60s).")
@click.option("--grace", default="3s", show_default=True,
              help="After a rank fails, how long the others get to exit before they are killed.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(n, backend, transport, timeout, comm_timeout, grace, command):
    """Run COMMAND on N ranks: `clusterlab run -n 4 -- mine data.dat -a hpa`.

    \b
    COMMAND is a clusterlab command (`mine ...`, `bench ...`), `python script.py ...`, or any
    program that calls clusterlab.comm.world(). Every rank gets the same arguments; the rank
    learns its number from the environment. If a rank fails, the others stop within seconds,
    the failing rank is named, and the exit status is non-zero.
    """
    from clusterlab.cluster.local import launch
    from clusterlab.net.transport_config import TransportConfig

    config = TransportConfig.parse(transport, place="socket")
    argv = resolve_command(list(command))
    kw = dict(config=config, timeout=_dur(timeout), comm_timeout=_dur(comm_timeout), grace=_dur(grace))
    if backend == "tcp":
        res = launch(argv, n, **kw)
    else:
        from clusterlab.cluster.mpirun import launch_mpi

        res = launch_mpi(argv, n, **kw)
    if res.interrupted:
        click.echo(f"clusterlab run: {res.reason}", err=True)
        sys.exit(130)
    if not res.ok:
        click.echo(f"clusterlab run: {res.reason}", err=True)
        codes = [rc for rc in res.returncodes if rc > 0]
        sys.exit(codes[0] if codes else 1)
    return 0


def resolve_command(cmd: list[str]) -> list[str]:
    """``mine ...`` -> this Python running clusterlab; ``python`` -> this Python; else as is."""
    from clusterlab.cli import COMMANDS

    head = cmd[0]
    if head in COMMANDS:
        return [sys.executable, "-m", "clusterlab", *cmd]
    if head in ("python", "python3"):
        return [sys.executable, *cmd[1:]]
    if head == "clusterlab":
        return [sys.executable, "-m", "clusterlab", *cmd[1:]]
    if os.sep not in head and shutil.which(head) is None:
        raise ConfigError(f"command {head!r} not found (not a clusterlab command either)")
    return cmd
