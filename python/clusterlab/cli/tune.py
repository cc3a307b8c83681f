"""``clusterlab tune``: measure this cluster and write settings the rest of clusterlab uses."""

from __future__ import annotations

import json
import os
import statistics

import click

from clusterlab.bench import pingpong as pp
from clusterlab.bench.collective import sweep
from clusterlab.bench.setup import connection_setup_times
from clusterlab.bench.spmd import spmd
from clusterlab.cli.options import Finite, Int, OutputPath
from clusterlab.cluster import BACKENDS, from_options
from clusterlab.comm import costmodel
from clusterlab.errors import ConfigError
from clusterlab.tune.auto import DEFAULT_SPACE, HPA_SPACE


def _record(rec: dict, output, as_json: bool) -> bool:
    """Write ``rec`` to ``output`` (atomically) when given; print it as JSON when asked (True:
    nothing else to print)."""
    from clusterlab._atomic import atomic_open

    if output:
        with atomic_open(output) as f:
            json.dump(rec, f, indent=1)
    if as_json:
        click.echo(json.dumps(rec))
    return as_json


@click.group()
def tune():
    """Fit models of this cluster and tune its TCP from measurements.

    \b
    Example:
      clusterlab tune model -n 2 -o model.json
      clusterlab tune buffers --config tune.toml -o tune-out
      clusterlab tune auto --hosts 16 --rate 155Mbit --buffer 64KB -o auto.json
      clusterlab tune sim --hosts 8 --rate 155Mbit -o calibration.json
    """


@tune.command()
@click.option("-n", "--ranks", "n", default=2, show_default=True, type=Int(hi=1024),
              help="Ranks in the job (the ping-pong runs between ranks 0 and 1).")
@click.option("-o", "--output", required=True, type=OutputPath(), help="Where to write the model (JSON).")
@click.option("--sizes", default="1:4M", show_default=True, help="Ping-pong size range LO:HI.")
@click.option("--trial-time", default=0.05, show_default=True, type=Finite(hi=3600), help="Seconds per ping-pong trial.")
@click.option("--backend", type=click.Choice(BACKENDS), default="auto", show_default=True,
              help="Where the ping-pong runs (tcp: clusterlab's mesh).")
@click.option("--concurrency", type=Finite(lo=0), default=None,
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
    cal = spmd(pp.calibrate, n, pp.sizes(bounds[0] or 1, bounds[-1]), trial_time, cluster=from_options(backend))[0]
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
@click.option("-o", "--output", default=None, type=OutputPath(directory=True),
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
    from clusterlab._atomic import check_output
    from clusterlab.tune import load, tune_buffers
    from clusterlab.tune.buffers import chosen, summary, sysctl_fragment
    from clusterlab.tune.results import FRAGMENT, write_results

    config = load(config_path)
    outdir = output or config.output
    if output is None:  # the option was checked when it was read; the config's [output] dir now
        check_output(outdir, f"{config_path}: [output] dir", directory=True)
    results = tune_buffers(config)
    if not results:  # a rank other than 0 of a real-cluster job
        return
    write_results(results, outdir, plots=not no_plots)
    if as_json:
        click.echo(json.dumps(chosen(results)))
    else:
        click.echo(summary(results))
        click.echo(f"results, plots and {FRAGMENT} -> {outdir}")
    if config.place == "cluster":
        click.echo(sysctl_fragment(results), nl=False)


@tune.command()
@click.option("--workload", default="alltoall_broadcast", show_default=True,
              type=click.Choice(["alltoall_broadcast", "hpa"]),
              help="What to speed up: seed 000's all-to-all broadcast (every host sends --size to every other), "
                   "or an HPA job mining --data on every host (one run = one job).")
@click.option("--size", default="50KB", show_default=True, help="Bytes each host sends to every other host per run.")
@click.option("--data", default="seed000:50K", show_default=True,
              help="hpa: a FIMI file, or a generator name with a size (generated once into runs/cache).")
@click.option("--min-support", default=0.01, show_default=True, type=Finite(lo=0), help="hpa: the minimum support.")
@click.option("--hosts", default=16, show_default=True, type=Int(lo=2, hi=1000), help="Testbed hosts (a fresh testbed; root).")
@click.option("--rate", default="155Mbit", show_default=True, help="Link rate of every host.")
@click.option("--buffer", default="64KB", show_default=True, help="The switch's output buffer per port.")
@click.option("--mtu", default=9000, show_default=True, type=Int(lo=68, hi=65000), help="Interface MTU.")
@click.option("--grid", "space", default=None,
              help="The knobs and their values, knob=v1,v2;knob=...: TransportConfig fields (rto_min, congestion, "
                   "sndbuf, rcvbuf, ...; 'default' = the kernel's) and the workload's own: order (same, shifted) "
                   "for the broadcast, allreduce (auto or an algorithm) and block (a size) for hpa. "
                   "Default: " + DEFAULT_SPACE + " (hpa: " + HPA_SPACE + ")")
@click.option("--runs", default=8, show_default=True, type=Int(lo=1, hi=10**6),
              help="Runs per setting in the full grid; the default budget is a quarter of settings x runs.")
@click.option("--budget", default=None, type=Int(lo=1, hi=10**6), help="Runs the search may make (default: settings x runs / 4).")
@click.option("--eta", default=2, show_default=True, type=Int(lo=2, hi=1000), help="Keep the best 1/eta after each round.")
@click.option("--confirm", default=5, show_default=True, type=Int(lo=0, hi=10**6),
              help="Runs each of the chosen setting and the defaults after the search (gain with 95% CIs).")
@click.option("--full-grid", "grid", is_flag=True, help="Also run the full grid and compare the search with it.")
@click.option("--dilation", default=1.0, show_default=True, type=Finite(lo=1),
              help="The testbed's dilation k: link rates / k, every setting's RTO bounds x k (set as the hosts' "
                   "sysctls for each setting), times reported undilated. The output ends with the search's "
                   "fidelity line: a search whose runs fail the fidelity check (a CPU-bound machine, an RTO min of "
                   "a few jiffies) names the dilation to search at again; believe the one that passes.")
@click.option("--name", default=None, help="The testbed's name (1-8 lowercase letters/digits; default: a fresh one).")
@click.option("-o", "--output", default=None, type=OutputPath(), help="Write the result as JSON.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def auto(workload, size, data, min_support, hosts, rate, buffer, mtu, space, runs, budget, eta, confirm, grid, dilation,
         name, output, as_json):
    """Search transport settings and the collective's send order for a workload by successive
    halving on a namespace testbed, within a budget of runs (root).

    A run is one timed repetition of the workload at one setting. Successive halving gives every
    setting a run or two, keeps the best 1/eta, gives those more runs, and so on: the budget
    goes to the settings that look good. Then the chosen setting and the defaults run
    --confirm times each, and the gain is reported with 95% confidence intervals.

    Each visit of a setting runs with the testbed's monitor; the output (text and JSON) ends with
    the search's fidelity line (docs/diagnose.md): PASS when every setting's runs pass the
    fidelity check, else FAIL naming the settings that fail and the dilation to search at again
    (the --auto-dilation ladder's next rung); each failing setting's own line comes before it.

    \b
    Examples:
      clusterlab tune auto --hosts 16 --rate 155Mbit --buffer 64KB -o auto.json
      clusterlab tune auto --hosts 4 --grid "rto_min=5ms,200ms;order=same,shifted" --runs 4 --confirm 3
      clusterlab tune auto --hosts 16 --full-grid --runs 8 -o auto-vs-grid.json
      clusterlab tune auto --workload hpa --hosts 6 --data seed000:50K --min-support 0.01 -o hpa.json
      clusterlab tune auto --hosts 8 --grid "rto_min=5ms,200ms" --runs 2 --confirm 2 --dilation 4
    """
    from clusterlab.cluster.testbed.net import require_root
    from clusterlab.tune.auto import parse_space, settings, tune_auto
    from clusterlab.units import parse_size

    nbytes = parse_size(size, "--size", lo=1)
    if space is not None and not space.strip():
        raise ConfigError("--grid is empty (knob=value,value,...; knobs separated by ';')")
    from clusterlab.experiments.workloads.mining import dataset_file
    from clusterlab.mining.sequential import min_count_of

    min_count_of(min_support, 1)  # checked whatever the workload, before anything starts
    path, generator, _ = dataset_file(data, "")
    if generator is None and not os.path.isfile(path):
        raise ConfigError(f"--data {data}: no such file")
    sp = space or (HPA_SPACE if workload == "hpa" else DEFAULT_SPACE)
    n = len(settings(parse_space(sp, workload)))
    for opt, v, lo in (("--runs", runs, 1), ("--eta", eta, 2), ("--confirm", confirm, 0), ("--hosts", hosts, 2)):
        if v < lo:
            raise ConfigError(f"{opt} must be >= {lo}, got {v}")
    if budget is not None and budget < n:
        raise ConfigError(f"--budget {budget} runs is below one run per setting ({n} settings)")
    from clusterlab.cluster.testbed import StarTopo

    StarTopo(hosts=hosts, rate=rate, buffer=buffer, mtu=mtu, dilation=dilation)  # the testbed's, before it is built
    from clusterlab.tune.auto import check_dilation

    check_dilation(settings(parse_space(sp, workload)), dilation)
    if workload == "hpa":
        from clusterlab.mining.sequential import min_count_of

        min_count_of(min_support, 1)  # a bad support: one line, before anything starts
    if name is not None:
        from clusterlab.cluster.testbed.topo import check_name

        try:
            check_name(name)
        except ConfigError as e:
            raise ConfigError(f"--name: {e}") from None
    require_root()
    from clusterlab.diagnose.search import observe_visit, search_fidelity, setting_lines

    res = tune_auto(hosts=hosts, rate=rate, buffer=buffer, mtu=mtu, size=nbytes, space=sp, runs=runs, budget=budget,
                    eta=eta, grid=grid, confirm=confirm, workload=workload, data=data, min_support=min_support,
                    dilation=dilation, name=name, watch=observe_visit)
    # the last key, as its line is the text's last: which search (at which dilation) to believe
    res["fidelity"] = search_fidelity(res.pop("visits"), dilation, res["search"]["chosen"])
    if _record(res, output, as_json):
        return
    s = res["search"]
    click.echo(f"successive halving: {s['settings']} settings, {s['runs']} runs (budget {s['budget']}), "
               f"{s['seconds']:.0f} s -> {s['chosen']}")
    for w in s.get("warnings", []):
        click.echo(f"warning: {w}", err=True)
    if "confirm" in res:
        c = res["confirm"]
        click.echo(f"chosen {c['chosen']['mean'] * 1e3:.1f} ms, defaults {c['defaults']['mean'] * 1e3:.1f} ms per run "
                   f"(mean of {c['chosen']['runs']}): {c['speedup']:.2f}x")
    if "comparison" in res:
        c = res["comparison"]
        click.echo(f"full grid: {res['grid']['runs']} runs, best {c['grid_best']}; the search's choice is "
                   f"{c['chosen_over_best']:.2f}x the best with {c['runs_share']:.0%} of the runs")
    click.echo("\n".join([*setting_lines(res["fidelity"]), res["fidelity"]["line"]]))


@tune.command("sim")
@click.option("--hosts", default=8, show_default=True, type=Int(lo=2, hi=1000),
              help="Testbed hosts (a fresh testbed; root): the broadcast rounds run on all of them.")
@click.option("--rate", default="155Mbit", show_default=True, help="Link rate of every host.")
@click.option("--buffer", default="64KB", show_default=True, help="The switch's output buffer per port.")
@click.option("--mtu", default=None, type=Int(lo=68, hi=65000), help="Interface MTU (default: the switch's own).")
@click.option("--switch", default="bridge", show_default=True, type=click.Choice(["bridge", "atm"]),
              help="The testbed's switch.")
@click.option("--sizes", default="1KB,2KB,4KB,8KB", show_default=True,
              help="Block sizes of the broadcast rounds (small: rounds that retransmit are not fitted).")
@click.option("--reps", default=10, show_default=True, type=Int(lo=1, hi=10**5),
              help="Timed broadcast rounds per size (their median is fitted).")
@click.option("--name", default=None, help="The testbed's name (1-8 lowercase letters/digits; default: a fresh one).")
@click.option("--refit", "refit", default=None, type=click.Path(exists=True, dir_okay=False),
              help="Fit again what a record (an earlier -o) measured, on its topology: no testbed, no root.")
@click.option("-o", "--output", default=None, type=OutputPath(),
              help="Write the calibration record (JSON; Simulated(topo, calibration=FILE) reads it).")
@click.option("--json", "as_json", is_flag=True, help="Print the record as JSON.")
def sim(hosts, rate, buffer, mtu, switch, sizes, reps, name, refit, output, as_json):
    """Calibrate the simulated cluster (SimGrid) from a namespace testbed (root).

    Runs the ping-pong between two hosts and broadcast rounds of small blocks on a fresh
    testbed with default TCP settings, then fits the simulated cluster's bandwidth factor
    (large ping-pong sizes), link latency and per-message overhead (small sizes and the
    broadcast rounds). See docs/simulation.md.

    \b
    Examples:
      clusterlab tune sim --hosts 8 --rate 155Mbit -o calibration.json
      clusterlab tune sim --refit calibration.json -o calibration.json
    """
    from clusterlab.cluster.simulated.run import engine_python
    from clusterlab.cluster.testbed import StarTopo
    from clusterlab.cluster.testbed.net import require_root
    from clusterlab.tune.sim import calibrate
    from clusterlab.units import parse_size

    bsizes = [parse_size(s.strip(), "--sizes", lo=1) for s in sizes.split(",") if s.strip()]
    if not bsizes:
        raise ConfigError("--sizes needs at least one block size, e.g. 1KB,2KB,4KB,8KB")
    measured = None
    if refit is not None:
        try:
            with open(refit) as f:
                old = json.load(f)
        except ValueError:
            raise ConfigError(f"--refit {refit}: not JSON (a record `clusterlab tune sim -o` wrote)") from None
        if not isinstance(old, dict) or "measured" not in old or "topology_args" not in old:
            raise ConfigError(f"--refit {refit}: no 'measured' and 'topology_args' (a record `clusterlab tune sim -o` "
                              "wrote)")
        measured, topo = old["measured"], StarTopo(**old["topology_args"])
    else:
        topo = StarTopo(hosts=hosts, rate=rate, buffer=buffer, mtu=mtu, switch=switch)
    if name is not None:
        from clusterlab.cluster.testbed.topo import check_name

        check_name(name)
    engine_python()  # the engine first: no testbed brought up for a fit that cannot run
    if measured is None:
        require_root()
    def save(partial):  # the measurements first: a fit that fails can be redone with --refit
        _record(partial, output, False)

    rec = calibrate(topo, bcast_sizes=bsizes, reps=reps, name=name, measured=measured, save_measured=save)
    if _record(rec, output, as_json):
        return
    f, d = rec["fit"], rec["fit_details"]
    click.echo(f"fitted: latency {f['latency']} per link, bandwidth factor {f['bandwidth_factor']}, "
               f"overhead {f['overhead']} per message and {f['overhead_per_byte'] * 1e9:.3g} ns per byte"
               + (" (at a bound of the search)" if d["overhead_at_bound"] else ""))
    for s, c in d["broadcast_check"].items():
        click.echo(f"  broadcast {s} B: testbed {c['testbed_median_s'] * 1e3:.3f} ms, simulated "
                   f"{c['simulated_s'] * 1e3:.3f} ms ({c['error']:+.1%})"
                   + (f"; not fitted: {c['retransmissions']} retransmissions on the testbed" if not c["fitted"] else
                      f"; fitted: {c['fitted_median_s'] * 1e3:.3f} ms, the median of its {c['fitted_rounds']} rounds "
                      "without retransmissions" if c["retransmissions"] else ""))
