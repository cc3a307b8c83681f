"""``clusterlab bench broadcast``: seed 000's all-to-all broadcast, locally or on the testbed; a
one-point study (``clusterlab.experiments``) run from options."""

from __future__ import annotations

import json
import os

import click

from clusterlab.cli.options import Finite, Int, OutputPath, transport_options
from clusterlab.cli.testbed import topo_options, wan_options
from clusterlab.errors import ConfigError


@click.command()
@click.option("--size", default="50KB", show_default=True, help="Block each rank sends to every other rank.")
@click.option("--reps", default=10, show_default=True, type=Int(lo=1, hi=10**6), help="Timed repetitions.")
@click.option("--warmup", default=1, show_default=True, type=Int(lo=0, hi=10**6), help="Untimed repetitions first.")
@click.option("--order", type=click.Choice(["same", "shifted"]), default="same", show_default=True,
              help="same: everyone sends to 0,1,2,...; shifted: rank r sends to r+1, r+2, ...")
@click.option("--hosts", default=None, type=Int(lo=2, hi=1000), help="Run on a namespace testbed of this many hosts (root); "
              "without it the ranks run on the local loopback cluster.")
@click.option("--ranks", default=None, type=Int(lo=1, hi=1024), help="Ranks (default: --hosts, or 4 locally).")
@topo_options
@wan_options
@transport_options(testbed_knobs=True, seed=("--seed",), nodelay=False)
@click.option("--monitor/--no-monitor", "use_monitor", default=True, show_default=True,
              help="Record the monitor table (with --run-dir).")
@click.option("--interval", default=0.1, show_default=True, type=Finite(lo=0.001, hi=3600), help="Monitor interval [s].")
@click.option("--run-dir", default=None, type=OutputPath(directory=True),
              help="Write bench.json and monitor.parquet here (then: clusterlab report RUN_DIR); the output then ends "
                   "with the run's fidelity line and diagnosis.")
@click.option("--auto-dilation", is_flag=True,
              help="With --hosts: when the run fails the fidelity check (docs/diagnose.md), rerun it at the smallest "
                   "dilation that passes, from --dilation up (the monitor is on; with --run-dir each run in "
                   "RUN_DIR/dilation-K).")
@click.option("--max-dilation", default=16.0, show_default=True, type=Finite(lo=1, hi=1e6),
              help="The highest dilation --auto-dilation tries.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON result.")
def broadcast(size, reps, warmup, order, hosts, ranks, rate, switch, host_rates, loss, loss_seed, buffer, discard, epd_threshold, host_queue, mtu,
              dilation, storage, no_rps, offloads, transport, use_monitor, interval, auto_dilation, max_dilation, run_dir,
              as_json, **wan):
    """Barrier, every rank sends SIZE bytes to every other rank, barrier; REPS times.

    \b
    Examples:
      clusterlab bench broadcast --size 50KB --reps 10
      clusterlab bench broadcast --hosts 16 --rate 155Mbit --buffer 64KB --reps 10 --json
      clusterlab bench broadcast --hosts 16 --rto-min 5ms --run-dir runs/b16 && clusterlab report runs/b16
      clusterlab bench broadcast --hosts 4 --buffer 4MB --host-rate h3=15.5Mbit --run-dir runs/slow
      clusterlab bench broadcast --hosts 4 --sites 2+2 --wan-delay 12ms --run-dir runs/wan
      clusterlab bench broadcast --hosts 4 --rto-min 5ms --auto-dilation --run-dir runs/auto
    """
    from clusterlab.cluster import Local, Testbed
    from clusterlab.experiments.spec import Study, scatter
    from clusterlab.experiments.workloads import alltoall_broadcast
    from clusterlab.net.transport_config import TransportConfig
    from clusterlab.units import parse_size

    nbytes = parse_size(size, "--size", lo=1)
    if reps < 1:
        raise ConfigError(f"--reps must be at least 1, got {reps}")
    if storage or no_rps or offloads:
        raise ConfigError("--storage, --no-rps and --offloads are not broadcast settings (use clusterlab testbed up)")
    from clusterlab.cli.testbed import make_topo

    if hosts is None and wan["sites"]:
        raise ConfigError("--sites needs --hosts (the local cluster has no WAN line)")

    make_topo(hosts or 2, rate, buffer, host_queue, mtu, dilation, False, switch, discard, epd_threshold,
              host_rates, loss, loss_seed, **wan)  # checked even unused
    config = TransportConfig.parse(transport, place="socket" if hosts is None else "testbed")
    settings = {"size": nbytes, "reps": reps, "warmup": warmup, "order": order, "transport": config.to_text()}
    if hosts is None:
        if dilation != 1.0:
            raise ConfigError("--dilation needs --hosts (the local cluster has no links to slow down)")
        if auto_dilation:
            raise ConfigError("--auto-dilation needs --hosts (the local cluster has nothing emulated to dilate)")
        if switch != "bridge" or discard != "none" or epd_threshold is not None or host_rates or loss:
            raise ConfigError("--switch, --discard, --epd-threshold, --host-rate and --loss need --hosts (the local "
                              "cluster has no switch)")
        n = ranks or 4
        if n < 2:
            raise ConfigError(f"need at least 2 ranks, got {n}")
        settings.update(cluster="local", ranks=n)
    limit, limit_why = max_dilation, "--max-dilation"
    if auto_dilation:
        from clusterlab.diagnose.dilation import ladder_limit

        limit, limit_why = ladder_limit(config, dilation, max_dilation)

    def once(k: float, rdir, monitor: bool):
        """The bench at dilation ``k`` into ``rdir``: ``(result, status)``."""
        if hosts is None:
            cluster = Local(ranks=settings["ranks"])
        else:  # at dilation k, the topology's own
            cluster = Testbed(make_topo(hosts, rate, buffer, host_queue, mtu, k, False, switch, discard, epd_threshold,
                                        host_rates, loss, loss_seed, **wan), ranks=ranks)
        study = Study(name="bench-broadcast", cluster=cluster, workload=alltoall_broadcast(size=str(nbytes), order=order),
                      transport=config, repeat=reps, warmup=warmup, monitor=monitor,
                      monitor_interval=interval, report=[scatter(x="rep", y="seconds"), scatter(x="rep", y="retransmissions")])
        return _run(study, rdir, dict(settings), hosts, rate, mtu, nbytes)

    if not auto_dilation:
        result, status = once(dilation, run_dir, bool(run_dir and use_monitor))
        auto = None
    else:
        import tempfile

        from clusterlab.diagnose import diagnose_dir
        from clusterlab.diagnose.dilation import auto_dilation as ladder
        from clusterlab.diagnose.fidelity import _rto_min_s

        def run_at(k: float):
            with tempfile.TemporaryDirectory(prefix="clusterlab-dilation-") as tmp:
                rdir = os.path.join(run_dir, f"dilation-{k:g}") if run_dir else tmp
                res, st = once(k, rdir, True)  # the fidelity check reads the monitor's samples
                if st != "complete":
                    raise _Interrupted(res)
                fid = diagnose_dir(rdir)["jobs"][0]["fidelity"]
            res["fidelity"] = fid
            return res, fid

        try:
            auto = ladder(run_at, dilation, _rto_min_s(config.to_dict()), limit, limit_why)
            result, status = auto["result"], "complete"
        except _Interrupted as e:
            result, status, auto = e.result, "interrupted", None
        if auto is not None:
            from clusterlab.diagnose.dilation import record

            result["auto_dilation"] = record(auto, limit)
            if run_dir:
                from clusterlab._atomic import atomic_open

                with atomic_open(os.path.join(run_dir, "auto_dilation.json")) as f:
                    json.dump(result["auto_dilation"], f, indent=1)
    cpu_bound = result["settings"]["cpu_bound_reps"]
    if as_json:
        click.echo(json.dumps(result))
    else:
        _print(result, nbytes, order, cpu_bound)
        if auto is not None:
            from clusterlab.diagnose.dilation import attempt_lines

            click.echo("\n".join(attempt_lines(auto, limit)))
            if run_dir:
                kept_dir = os.path.join(run_dir, f"dilation-{auto['dilation']:g}")
                click.echo(f"auto-dilation: the kept run is {kept_dir} (clusterlab report {kept_dir})")
        if run_dir and status == "complete":  # the last lines: the run's fidelity line and its diagnosis
            from clusterlab.diagnose import diagnose_dir
            from clusterlab.diagnose.report_section import closing_lines

            rdir = os.path.join(run_dir, f"dilation-{auto['dilation']:g}") if auto is not None else run_dir
            click.echo("\n".join(closing_lines(diagnose_dir(rdir))))
    if status != "complete":
        click.echo(f"interrupted: {len(result['reps'])} finished repetitions kept"
                   + (f" in {run_dir} (bench.json, table.parquet, meta.json)" if run_dir else ""), err=True)
        raise SystemExit(130)


class _Interrupted(Exception):
    def __init__(self, result):
        super().__init__("interrupted")
        self.result = result


def _run(study, run_dir, settings: dict, hosts, rate, mtu, nbytes):
    """Run the one-point study into ``run_dir`` (None: nowhere); ``(result, status)``, the
    result as ``--json`` prints it (also written to ``run_dir/bench.json``)."""
    from clusterlab.bench.alltoall_broadcast import line_rate_seconds, summarize
    from clusterlab.experiments.runner import run_study
    from clusterlab.units import parse_rate

    status = "complete"
    try:
        res = run_study(study, run_dir)
    except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM: keep and show the finished repetitions
        res = getattr(e, "run_result", None)
        if res is None:
            raise
        status = "interrupted"
    point = res.points[0]
    skip = set(point.settings) | {"study", "point", "label", "check", "load1", "cpu_bound"}
    out = [{k: v for k, v in r.items() if k not in skip or k in ("seconds",)} | {"rep": r["rep"]} for r in res.rows]
    for r in out:
        if "per_rank" in r:
            r["ranks"] = r.pop("per_rank")
    if hosts is not None:
        from clusterlab.experiments.clusters import star_topo

        topo = point.cluster
        star = star_topo(point)
        applied = res.meta["points"][0].get("applied", {})
        settings.update(cluster="testbed", hosts=hosts, ranks=topo.n_ranks(), rate=rate,
                        host_rates=star.host_rates, loss=star.loss, sites=star.sites,
                        wan_delay=star.wan_delay if star.sites else None, buffer_bytes=star.buffer_bytes, host_queue_bytes=star.host_queue_bytes, mtu=mtu,
                        dilation=point.dilation, rps=True, offloads_off=True, testbed=applied.get("testbed"),
                        rto_min_us_per_host=applied.get("rto_min_us_per_host"),
                        rto_max_ms_per_host=applied.get("rto_max_ms_per_host"),
                        line_rate_seconds=line_rate_seconds(topo.n_ranks(), nbytes, parse_rate(rate)))
    from clusterlab.monitor.procfs import cpu_bound as _cpu_bound

    settings["cpu_bound_reps"] = [r["rep"] for r in out if _cpu_bound(r)]
    result = {"settings": settings, "reps": out, "summary": summarize(out) if out else {}, "status": status}
    if run_dir:
        from clusterlab._atomic import atomic_open

        os.makedirs(run_dir, exist_ok=True)
        with atomic_open(os.path.join(run_dir, "bench.json")) as f:
            json.dump(result, f, indent=1)
    return result, status


def _print(result: dict, nbytes: int, order: str, cpu_bound: list) -> None:
    settings, out, s = result["settings"], result["reps"], result["summary"]
    click.echo(f"all-to-all broadcast of {nbytes} B, {settings['ranks']} ranks on {settings['cluster']}, order {order}")
    click.echo(f"{'rep':>4} {'seconds':>9} {'retrans':>8} {'timeouts':>8} {'drops':>6} {'spare':>5}")
    for r in out:
        click.echo(f"{r['rep']:>4} {r['seconds']:>9.4f} {r['retransmissions']:>8} {r['timeouts']:>8} "
                   f"{r.get('drops', '-'):>6} {r.get('cpu_spare', r['cpu_idle']):>5.0%}")
    if not out:
        return
    click.echo(f"median {s['median_seconds']:.4f} s (min {s['min_seconds']:.4f}, max {s['max_seconds']:.4f}); "
               f"{s['retransmissions']} retransmissions, {s['timeouts']} timeouts"
               + (f", {s['drops']} drops" if "drops" in s else ""))
    if cpu_bound:
        click.echo(f"note: CPU-bound (spare CPU < 15%: idle, I/O wait or niced) in reps {cpu_bound}: times measure the CPU, not the network; "
                   "try --dilation", err=True)
