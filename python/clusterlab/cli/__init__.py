"""The ``clusterlab`` command. One module per command group; each is imported only when used,
so ``clusterlab --help`` stays fast and a broken optional dependency breaks only its command.
"""

from __future__ import annotations

import errno
import importlib
import importlib.util
import sys

import click

from clusterlab.errors import ClusterlabError

# name -> (module, attribute). Commands whose module is absent are not offered.
COMMANDS = {
    "demo": ("clusterlab.cli.demo", "demo"),
    "gen": ("clusterlab.cli.gen", "gen"),
    "stats": ("clusterlab.cli.stats", "stats"),
    "mine": ("clusterlab.cli.mine", "mine"),
    "run": ("clusterlab.cli.run", "run"),
    "bench": ("clusterlab.cli.bench", "bench"),
    "tune": ("clusterlab.cli.tune", "tune"),
    "testbed": ("clusterlab.cli.testbed", "testbed"),
    "monitor": ("clusterlab.cli.monitor", "monitor"),
    "report": ("clusterlab.cli.report", "report"),
    "diagnose": ("clusterlab.cli.diagnose", "diagnose"),
    "experiment": ("clusterlab.cli.experiment", "experiment"),
    "npb": ("clusterlab.cli.npb", "npb"),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(n for n, (mod, _) in COMMANDS.items() if importlib.util.find_spec(mod) is not None)

    def get_command(self, ctx, name):
        if name not in COMMANDS or importlib.util.find_spec(COMMANDS[name][0]) is None:
            return None
        mod, attr = COMMANDS[name]
        return getattr(importlib.import_module(mod), attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="clusterlab")
def cli():
    """clusterlab: mine frequent itemsets on a cluster, and see and fix what the network does to it.

    \b
    Quick start:
      clusterlab gen T10I4D100K --items 1000 -o t10.dat
      clusterlab stats t10.dat
    """


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C would be so that the same clean-up runs."""


def _sigterm(_signum, _frame):
    raise Terminated()


def _check_environment() -> None:
    """The documented environment variables, checked before any work (a rank would otherwise
    find a bad one only after the job started)."""
    from clusterlab.units import env_duration

    for name in ("CLUSTERLAB_TIMEOUT", "CLUSTERLAB_SETUP_TIMEOUT"):
        env_duration(name, None)


def _one_line(e: click.ClickException) -> str:
    """A usage error as one line: the command, the message, where help is."""
    msg = " ".join(e.format_message().split())
    ctx = getattr(e, "ctx", None)
    if isinstance(e, click.UsageError) and ctx is not None:
        return f"{ctx.command_path}: error: {msg} (see '{ctx.command_path} --help')"
    return f"clusterlab: error: {msg}"


def main(argv: list[str] | None = None) -> None:
    """Entry point: clusterlab errors and usage errors become one line on stderr and exit
    status 2; SIGTERM is handled as Ctrl-C (the finished work is kept)."""
    import signal
    import threading

    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _sigterm)
    try:
        _run(argv)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _run(argv: list[str] | None) -> None:
    try:
        _check_environment()
        rv = cli.main(args=argv, prog_name="clusterlab", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        click.echo(_one_line(e), err=True)
        sys.exit(e.exit_code)
    except ClusterlabError as e:
        click.echo(f"clusterlab: error: {e}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except OSError as e:
        # A fault of the machine, not of the program: full disk, a path that went away.
        if e.errno == errno.ENOSPC:
            click.echo(f"clusterlab: error: disk full{f' writing {e.filename}' if e.filename else ''}: "
                       f"{e.strerror or 'no space left'}; no output is left half-written (the finished work of "
                       "a study is kept)", err=True)
            sys.exit(1)
        raise
    sys.exit(rv if isinstance(rv, int) else 0)
