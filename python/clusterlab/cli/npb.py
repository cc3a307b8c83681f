"""``clusterlab npb``: the NAS Parallel Benchmarks (EP, IS, CG, MG, FT, LU, SP) on clusterlab's ranks.

The command parses and prints; ``clusterlab.npb.run`` does the work.
"""

from __future__ import annotations

import json

import click

from clusterlab.cli.options import Finite, Int, OutputPath, transport_options
from clusterlab.cluster.api import BACKENDS
from clusterlab.errors import ConfigError
from clusterlab.units import MAX_SECONDS

KERNEL_CHOICES = ("ep", "is", "cg", "mg", "ft", "lu", "sp")


@click.group()
def npb():
    """NAS Parallel Benchmarks (NPB 3.x EP, IS, CG, MG, FT, LU, SP; classes S, W, A) with NPB's
    verification and Mop/s, per-rank compute time and traffic.

    \b
    Examples:
      clusterlab npb run cg --class S -n 4
      clusterlab npb run ft --class W -n 2 --backend mpi --json
      clusterlab run -n 4 -- npb run mg --class S
    """


@npb.command("run")
@click.argument("kernel", type=click.Choice(KERNEL_CHOICES, case_sensitive=False))
@click.option("--class", "cls", default="S", show_default=True, help="Problem class: S, W or A.")
@click.option("-n", "--ranks", "n", type=Int(lo=1, hi=1024), default=None,
              help="Number of ranks (default 1, or the job's size when started as its ranks).")
@click.option("--backend", type=click.Choice(BACKENDS), default="auto",
              show_default=True, help="auto: world when started by `clusterlab run`/mpiexec, else tcp.")
@transport_options()
@click.option("--timeout", type=Finite(lo=0.001, hi=MAX_SECONDS), default=1800.0, show_default=True, help="Seconds before the job is stopped.")
@click.option("--json", "as_json", is_flag=True, help="Print the result record as JSON.")
@click.option("--trace", "trace_path", type=OutputPath(),
              help="Also write the record with every rank's message sequence (for compute replay) to this JSON file.")
def run_cmd(kernel, cls, n, backend, transport, timeout, as_json, trace_path):
    """Run one NPB KERNEL and print NPB's report (class, size, iterations, time, Mop/s,
    verification), the checked values and each rank's compute time and bytes sent.

    \b
    Rank counts: EP and IS any; CG a power of two; MG 1, 2, 4 or 8; FT a power of two
    dividing the grid's ny and nz; LU NPB's xdim x ydim grids (1, 2, 4, 6, 8, 9, 12, ...);
    SP a square (NPB's multi-partition: 1, 4, 9, 16 in class S) or any other count up to
    the grid's size minus 2 (slabs of k-planes: 10 in class S).

    \b
    Examples:
      clusterlab npb run ep --class S -n 4
      clusterlab npb run cg --class S -n 2 --rto-min 5ms --json
      clusterlab npb run is --class S -n 2 --backend inproc
    """
    from clusterlab import npb as lib
    from clusterlab.cluster import from_options

    cluster = from_options(backend)
    if n is None:
        n = cluster.size or 1
    config = None
    if transport:
        from clusterlab.net.transport_config import TransportConfig

        config = TransportConfig.parse(transport, place="socket")  # a cluster that cannot apply them refuses
    if timeout <= 0:
        raise ConfigError(f"--timeout must be > 0, got {timeout}")
    res = lib.run(kernel, cls, n=n, cluster=cluster, transport=config, timeout=timeout, events=bool(trace_path))
    if res is None:  # a rank other than 0 of a job
        return
    if trace_path:
        from clusterlab._atomic import atomic_path

        with atomic_path(trace_path) as tmp:
            tmp.write_text(json.dumps(res.to_dict(events=True)))
    click.echo(json.dumps(res.to_dict(), indent=1) if as_json else res.report())
    if not res.verified:
        raise SystemExit(1)


@npb.command("official")
@click.argument("binary", type=click.Path(dir_okay=False))
@click.option("-n", "--ranks", "n", type=Int(lo=1, hi=1024), default=1, show_default=True, help="Number of MPI ranks.")
@click.option("--timeout", type=Finite(lo=0.001, hi=MAX_SECONDS), default=1800.0, show_default=True, help="Seconds before giving up.")
@click.option("--testbed", "testbed_name", metavar="NAME",
              help="Run the ranks in the hosts of the namespace testbed NAME (root), over its links.")
@click.option("--json", "as_json", is_flag=True, help="Print the result record as JSON.")
def official_cmd(binary, n, timeout, testbed_name, as_json):
    """Run an official NPB-MPI BINARY (built by you) under the project's mpiexec on N ranks
    and print its report in the same form as `npb run` (no per-rank figures).

    \b
    Example:
      clusterlab npb official NPB3.3-MPI/bin/is.S.2 -n 2
      clusterlab npb official NPB3.3-MPI/bin/is.S.8 -n 8 --testbed twosite   # on a testbed's hosts
    """
    from clusterlab.cluster import from_options
    from clusterlab.npb.official import run_binary

    # mpiexec on this machine (Mpirun), or with --testbed in the testbed's hosts
    res = run_binary(binary, n, cluster=from_options("mpi", testbed=testbed_name), timeout=timeout)
    click.echo(json.dumps(res.to_dict(), indent=1) if as_json else res.report())
    if not res.verified:
        raise SystemExit(1)
