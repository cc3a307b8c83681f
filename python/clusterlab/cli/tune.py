"""``clusterlab tune``: measure this cluster and write settings the rest of clusterlab uses."""

from __future__ import annotations

import json
import os
import statistics

import click

from clusterlab.bench import pingpong as pp
from clusterlab.bench.collective import sweep
from clusterlab.bench.setup import connection_setup_times
from clusterlab.bench.spmd import BACKENDS, spmd
from clusterlab.comm import costmodel
from clusterlab.errors import ConfigError


@click.group()
def tune():
    """Fit models of this cluster and tune its TCP from measurements.

    \b
    Example:
      clusterlab tune model -n 2 -o model.json
      clusterlab tune buffers --config tune.toml -o tune-out
    """


@tune.command()
@click.option("-n", "--ranks", "n", default=2, show_default=True,
              help="Ranks in the job (the ping-pong runs between ranks 0 and 1).")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Where to write the model (JSON).")
@click.option("--sizes", default="1:4M", show_default=True, help="Ping-pong size range LO:HI.")
@click.option("--trial-time", default=0.05, show_default=True, help="Seconds per ping-pong trial.")
@click.option("--backend", type=click.Choice(BACKENDS), default="auto", show_default=True,
              help="Where the ping-pong runs (tcp: clusterlab's mesh).")
@click.option("--concurrency", type=float, default=None,
              help="Transfers the ranks can run at once; 0 = independent links (a switched cluster). "
                   "Default: this host's CPU count (local ranks share its CPUs).")
@click.option("--json", "as_json", is_flag=True, help="Also print the model as JSON.")
def model(n, output, sizes, trial_time, backend, concurrency, as_json):
    """Fit the collectives' cost model: ping-pong (alpha, beta), burst (per-message overhead),
    connection set-up, reduction speed.

    \b
    Example:
      clusterlab tune model -n 4 -o model.json
      CLUSTERLAB_COSTMODEL=model.json clusterlab bench collective --op bcast -n 8
    """
    if n < 2:
        raise ConfigError(f"-n must be at least 2 (ping-pong needs two ranks), got {n}")
    bounds = sweep(sizes)
    cal = spmd(pp.calibrate, n, pp.sizes(bounds[0] or 1, bounds[-1]), trial_time, backend=backend)[0]
    if cal is None:  # a rank other than 0 (started by clusterlab run / mpiexec)
        return
    rows = cal["rows"]
    setup = connection_setup_times()
    if concurrency is None:
        concurrency = float(os.cpu_count() or 1)
    if concurrency < 0:
        raise ConfigError(f"--concurrency must be >= 0, got {concurrency}")
    fitted = costmodel.fit(rows, setup_times=setup, source=f"clusterlab tune model ({backend}, {n} ranks)",
                           concurrency=concurrency, overhead=cal["overhead"])
    fitted.details["setup_samples"] = len(setup)
    fitted.details["setup_stdev"] = statistics.pstdev(setup)
    fitted.save(output)
    if as_json:
        click.echo(json.dumps(fitted.to_dict(), indent=2))
    else:
        click.echo(f"alpha {fitted.alpha * 1e6:.2f} us, overhead {fitted.overhead * 1e6:.2f} us, beta {fitted.beta * 1e9:.3f} ns/B "
                   f"({8 / fitted.beta / 1e9 if fitted.beta else float('inf'):.2f} Gbit/s), "
                   f"gamma {fitted.gamma * 1e9:.3f} ns/B, set-up {fitted.setup * 1e6:.1f} us, "
                   f"concurrency {fitted.concurrency:g}; "
                   f"max relative error {fitted.details['max_rel_error']:.1%} -> {output}")


@tune.command()
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False),
              help="The sweep: cluster, ping-pong sizes, test variables (TOML; see docs/tune.md).")
@click.option("-o", "--output", default=None, type=click.Path(file_okay=False),
              help="Directory for the result files and plots (default: the config's [output] dir).")
@click.option("--no-plots", is_flag=True, help="Write the result files only.")
@click.option("--json", "as_json", is_flag=True, help="Print the chosen values as JSON.")
def buffers(config_path, output, no_plots, as_json):
    """Seed 003's self-optimization of TCP buffers and window scaling.

    For each test variable (tcp_window_scaling, tcp_rmem, tcp_wmem), from its start value to
    its end value (buffers doubling): set it on every node, run a NetPIPE-style ping-pong on
    all nodes at once, sum the bandwidths per message size, keep the best value per size, and
    apply the value best for the most sizes before the next variable. On a testbed the values
    are per-namespace sysctls; on a real cluster (place = "cluster", started by mpiexec, one
    rank per listed host) the hosts are left as found and the result is a sysctl.d fragment.

    \b
    Example:
      clusterlab tune buffers --config tune.toml -o tune-out
    """
    from clusterlab.tune import load, tune_buffers
    from clusterlab.tune.buffers import chosen, summary, sysctl_fragment
    from clusterlab.tune.results import FRAGMENT, write_results

    config = load(config_path)
    results = tune_buffers(config)
    if not results:  # a rank other than 0 of a real-cluster job
        return
    outdir = output or config.output
    write_results(results, outdir, plots=not no_plots)
    if as_json:
        click.echo(json.dumps(chosen(results)))
    else:
        click.echo(summary(results))
        click.echo(f"results, plots and {FRAGMENT} -> {outdir}")
    if config.place == "cluster":
        click.echo(sysctl_fragment(results), nl=False)
