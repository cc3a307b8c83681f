"""``clusterlab run``: start n ranks of a command on a cluster (``clusterlab.cluster.from_options``):
this machine, a namespace testbed's hosts, or the hosts of a hostfile."""

from __future__ import annotations

import os
import shlex
import shutil
import sys

import click

from clusterlab.cli.options import Duration, Finite, Int, OutputPath, transport_options
from clusterlab.cluster.api import LAUNCHERS, MESHES
from clusterlab.errors import ConfigError
from clusterlab.units import parse_duration


def _dur(v):
    return None if v is None else parse_duration(v)


@click.command(context_settings={"ignore_unknown_options": False, "allow_interspersed_args": False})
@click.option("-n", "--nodes", "n", type=Int(lo=1, hi=1024), required=True, help="Number of ranks.")
@click.option("--backend", type=click.Choice(MESHES), default="tcp", show_default=True,
              help="tcp: clusterlab's launcher and mesh; mpi: mpiexec and MPI's own transport "
                   "(needed by mpi4py and MPI C programs).")
@click.option("--testbed", "testbed_name", metavar="NAME",
              help="Run rank i in host i of the namespace testbed NAME (`clusterlab testbed up`; root), over "
                   "its emulated links and with its TCP settings.")
@transport_options()
@click.option("--timeout", type=Duration(), help="Kill the job after this long, e.g. 10min (default: no limit).")
@click.option("--comm-timeout", type=Duration(), help="Timeout of every blocking communication call (default 60s).")
@click.option("--grace", default="3s", show_default=True, type=Duration(),
              help="After a rank fails, how long the others get to exit before they are killed.")
@click.option("--setup-timeout", default="60s", show_default=True, type=Duration(),
              help="Every rank must have joined the mesh within this long.")
@click.option("--launcher", type=click.Choice(LAUNCHERS),
              help="Who starts the ranks: local (this machine; default for tcp) or mpiexec "
                   "(default for --backend mpi and with --hostfile).")
@click.option("--hostfile", type=click.Path(dir_okay=False),
              help="Run the ranks on these hosts through mpiexec -f (`host[:slots]` per line).")
@click.option("--iface", help="Interface (e.g. eth1) or address each rank's mesh listens on "
              "(CLUSTERLAB_IFACE; default: the route towards the launcher).")
@click.option("--rendezvous", "rendezvous_host",
              help="Address the launcher listens on for its ranks (default: loopback; with --hostfile "
                   "the address of --iface or of the route towards the hosts).")
@click.option("--mpiexec-args", help="Extra mpiexec arguments, e.g. '-launcher ssh' (one string).")
@click.option("--run-dir", type=OutputPath(directory=True), default=None,
              help="Record the run here (a new directory): meta.json, the monitor's monitor.parquet and each "
                   "rank's time split in ranks/rank-N.json; ends with the run's fidelity line and diagnosis (on stderr); then "
                   "`clusterlab report DIR`, `clusterlab diagnose DIR`.")
@click.option("--monitor-interval", type=Finite(lo=0.005, hi=60), default=0.1, show_default=True,
              help="Seconds between the monitor's samples (with --run-dir).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(n, backend, testbed_name, transport, timeout, comm_timeout, grace, setup_timeout, launcher, hostfile, iface,
        rendezvous_host, mpiexec_args, run_dir, monitor_interval, command):
    """Run COMMAND on N ranks: `clusterlab run -n 4 -- mine data.dat -a hpa`.

    \b
    COMMAND is a clusterlab command (`mine ...`, `bench ...`), `python script.py ...`, or any
    program that calls clusterlab.comm.world(). Every rank gets the same arguments; the rank
    learns its number from the environment. If a rank fails, the others stop within seconds,
    the failing rank is named, and the exit status is non-zero (2 for a clusterlab error in
    the input or settings, printed as one line). An MPI program (one that imports mpi4py, or
    is linked with libmpi) needs --backend mpi: without it, it is refused, never run as N
    one-rank MPI worlds.

    \b
    Examples:
      clusterlab run -n 4 -- mine data.dat -a hpa -s 0.007
      clusterlab run -n 4 --rto-min 5ms --rto-min-jitter 20ms -- python prog.py
      clusterlab run -n 4 --backend mpi -- python prog.py        # the same program under mpiexec
      clusterlab run -n 4 --run-dir runs/p4 -- python prog.py    # then: clusterlab report runs/p4

    \b
    --run-dir DIR records the run: meta.json (command, cluster, TCP settings in force, exit
    codes, elapsed, machine, load), the monitor's samples (monitor.parquet; on a testbed every
    host and switch port) and, for each rank that joined clusterlab's mesh (world()), its wall
    time split into compute, transfer and RTO wait (TCP_INFO) with its bytes, in
    ranks/rank-N.json. An MPI program on MPI's own transport has the monitor's per-host TCP
    counters only. The command ends (on stderr) with the run's fidelity line and its diagnosis
    in one line: the dominant loss, its fix and the predicted gain. `clusterlab report DIR` and
    `clusterlab diagnose DIR` read it.

    \b
    On a namespace testbed (root; `clusterlab testbed up --name lab --hosts 8 --rto-min 5ms`):
      clusterlab run --testbed lab -n 8 -- python prog.py
      clusterlab run --testbed lab --backend mpi -n 8 -- ./mpi_prog   # mpiexec's ranks in the hosts

    \b
    On several machines (MPICH's mpiexec; see docs/comm.md, "Running on real clusters"):
      clusterlab run --hostfile hosts -n 8 --iface eth1 -- mine data.dat
    """
    from clusterlab.cluster import from_options
    from clusterlab.net.transport_config import TransportConfig

    cluster = from_options(backend, testbed=testbed_name, hostfile=hostfile, iface=iface,
                           rendezvous_host=rendezvous_host, mpiexec_args=mpiexec_args, launcher=launcher)
    argv = resolve_command(list(command))
    config = None
    if transport:
        if testbed_name:
            raise ConfigError("a testbed's TCP settings are its hosts' (clusterlab testbed up --name NAME --rto-min "
                              "...): drop them here")
        config = TransportConfig.parse(transport, place="socket")
    elif not testbed_name:
        config = TransportConfig()
    from clusterlab.cluster.program import MpiProgramRefused

    opts = dict(transport=config, timeout=_dur(timeout), comm_timeout=_dur(comm_timeout), grace=_dur(grace),
                setup_timeout=_dur(setup_timeout))
    try:
        if run_dir:
            res = cluster.launch(argv, n, run_dir=run_dir, monitor_interval=monitor_interval, **opts)
            click.echo(f"clusterlab run: recorded in {run_dir} (meta.json, monitor.parquet, ranks/): "
                       f"clusterlab report {shlex.quote(run_dir)}", err=True)
        else:
            res = cluster.launch(argv, n, **opts)
    except MpiProgramRefused as e:  # say it with the command that works
        where = f"--testbed {testbed_name} " if testbed_name else ""
        raise ConfigError(f"{e.why}: under clusterlab's launcher each of the {n} ranks would be its own one-rank MPI "
                          f"world; run it under mpiexec: clusterlab run {where}--backend mpi -n {n} -- "
                          f"{shlex.join(command)}") from None
    if res.interrupted:
        click.echo(f"clusterlab run: {res.reason}", err=True)
        sys.exit(130)
    if not res.ok:
        click.echo(failure_text(res), err=True)
        if res.user_error:
            sys.exit(2)
        codes = [rc for rc in res.returncodes if rc > 0]
        sys.exit(codes[0] if codes else 1)
    if run_dir:  # the last lines: the run's fidelity line and its diagnosis in one line
        from clusterlab.diagnose import diagnose_dir
        from clusterlab.diagnose.report_section import closing_lines

        try:
            lines = closing_lines(diagnose_dir(run_dir))
        except ConfigError as e:  # a record the diagnosis cannot read: the run itself succeeded
            lines = [f"diagnosis: none ({e})"]
        click.echo("\n".join(lines), err=True)
    return 0


def failure_text(res) -> str:
    """What ``clusterlab run`` prints for a failed job: one line for a clusterlab error in the
    input or settings; else the failing rank's traceback (its rank printed nothing), what the
    other ranks raised, and the line naming the rank."""
    lines = []
    if not res.user_error:
        tb = res.tracebacks.get(res.failed_rank)
        if tb:
            lines.append(f"clusterlab run: traceback of rank {res.failed_rank}:\n{tb.rstrip()}")
        lines += [f"clusterlab run: rank {r}: {e}" for r, e in sorted(res.errors.items()) if r != res.failed_rank]
    lines.append(f"clusterlab run: {res.reason}")
    return "\n".join(lines)


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
