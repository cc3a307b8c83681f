"""``clusterlab experiment``: the seed studies as one command each (list, run, report), and the
speedup study with its own options."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from clusterlab.cli.options import Duration, Finite, Int, OutputPath, Size, renamed_options
from clusterlab.cluster.api import MESHES
from clusterlab.errors import ConfigError


@click.group()
def experiment():
    """Run a study (a short spec in clusterlab/experiments/studies/) and report it.

    \b
    Examples:
      clusterlab experiment list
      clusterlab experiment run seed000-fig3 --quick
      clusterlab experiment run seed000-fig2 --set repeat=3 --set rto_max=1s,60s
      clusterlab experiment report runs/seed000-fig3/20260101-120000
    """


@experiment.command("list")
def list_cmd():
    """The studies, their cluster and how many points they run (full / --quick).

    \b
    Example:
      clusterlab experiment list
    """
    from clusterlab.experiments import load, names

    for n in names():
        s = load(n)
        full, quick = len(s.points()), len(s.with_quick().points())
        click.echo(f"{n:<16} {s.cluster.kind:<9} {full:>3} points x {s.repeat} (quick: {quick} x "
                   f"{s.with_quick().repeat})  {s.title}")


class _Progress:
    """A progress bar on a terminal, one line per point otherwise."""

    def __init__(self):
        self.bar = None
        self.task = None

    def __call__(self, event, **info):
        if event == "start":
            click.echo(f"{info['points']} points, {info['reps']} repetitions"
                       + (f" -> {info['run_dir']}" if info.get("run_dir") else ""), err=True)
            if sys.stderr.isatty():
                from rich.progress import (
                    BarColumn,
                    MofNCompleteColumn,
                    Progress,
                    TextColumn,
                    TimeElapsedColumn,
                )

                self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                    TimeElapsedColumn(), transient=False)
                self.bar.start()
                self.task = self.bar.add_task("", total=info["reps"])
        elif event == "point":
            text = f"[{info['index'] + 1}/{info['of']}] {info['label']} (k={info['dilation']:g})"
            if self.bar is not None:
                self.bar.update(self.task, description=text[:60])
            else:
                click.echo(text, err=True)
        elif event == "rep" and self.bar is not None:
            self.bar.advance(self.task)
        elif event == "point_failed":
            click.echo(f"    the job failed at this point (the study goes on): {info['error']}", err=True)
        elif event == "point_done" and self.bar is None:
            m = info["meta"]
            med = m.get("median_seconds")
            click.echo(f"    median {med:.4g} s" if med is not None else "    done", err=True)

    def close(self):
        if self.bar is not None:
            self.bar.stop()


@experiment.command()
@click.argument("name")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Change a setting: a grid axis (comma-separated values), any other setting of the cluster, "
                   "transport or workload, or repeat/warmup/monitor. Repeatable.")
@click.option("--quick", is_flag=True, help="The study's small version (a smoke test: under 2 minutes).")
@click.option("--runs", "runs_root", default="runs", show_default=True, type=OutputPath(directory=True),
              help="Results go to RUNS/NAME/STAMP/.")
@click.option("-o", "--out", default=None, type=OutputPath(directory=True), help="Exactly this run directory.")
@click.option("--report/--no-report", default=True, show_default=True, help="Render the report afterwards.")
@click.option("--dry-run", is_flag=True, help="List the points (settings, dilation) and check them; run nothing.")
@click.option("--record", is_flag=True,
              help="When the run completes, make it the study's record: RECORDS/NAME/ replaced (report, figures, "
                   "table, provenance) and RECORDS/README.md regenerated. Not with --quick.")
@click.option("--records", "records_root", default="results", show_default=True, type=OutputPath(directory=True),
              help="The records directory (the repository's results/).")
@click.option("--auto-dilation", is_flag=True,
              help="Rerun each testbed point that fails the fidelity check (docs/diagnose.md) at the smallest "
                   "dilation that passes, from its own dilation up; the kept run replaces it (meta.json: each point's "
                   "auto_dilation). Needs the monitor and dilatable workloads (mining: compute=replay).")
@click.option("--max-dilation", default=16.0, show_default=True, type=Finite(lo=1, hi=1e6),
              help="The highest dilation --auto-dilation tries.")
def run(name, sets, quick, runs_root, out, report, dry_run, record, records_root, auto_dilation, max_dilation):
    """Run study NAME: every point, repetition by repetition, written as it goes (Ctrl-C keeps
    the finished repetitions), then its report.

    \b
    Examples:
      clusterlab experiment run seed000-fig3 --quick
      clusterlab experiment run seed000-fig6 --set data=/work/data/seed000.dat
      clusterlab experiment run seed000-fig5 --dry-run
      clusterlab experiment run seed002-fig1 --record
      clusterlab experiment run seed000-fig2 --quick --auto-dilation
    """
    from clusterlab.experiments import load
    from clusterlab.experiments.runner import auto_eligible, check_auto_dilation, prepare, run_study
    from clusterlab.experiments.spec import parse_settings

    study = load(name)
    overrides = parse_settings(sets)
    if record and quick:
        raise ConfigError("--record: a --quick run is a smoke test, not a record (drop one of the two)")
    if record and not report:
        raise ConfigError("--record needs the report (a record is the run's report, figures and table): drop --no-report")
    hook = None
    if auto_dilation:  # refused before anything runs: the study, then every point's ladder
        from clusterlab.diagnose.dilation import ladder_limit

        s, points = prepare(study, quick, overrides)
        check_auto_dilation(s, points)
        for p in points:
            if auto_eligible(p):
                try:
                    ladder_limit(p.tcp, p.dilation, max_dilation)
                except ConfigError as e:
                    raise ConfigError(f"point {p.index} ({p.label}): {e}") from None
        hook = _auto_dilation_hook(max_dilation)
    elif max_dilation != 16.0:
        raise ConfigError("--max-dilation goes with --auto-dilation")
    if dry_run:
        s, points = prepare(study, quick, overrides)
        for p in points:
            click.echo(f"{p.index:>3}  k={p.dilation:<4g} {p.label}" + (f"  [{p.check}]" if p.check else ""))
        click.echo(f"{len(points)} points x {s.repeat} repetitions; every setting accepted")
        return
    prog = _Progress()
    try:
        res = run_study(study, out, quick=quick, overrides=overrides, runs_root=runs_root, progress=prog,
                        auto_dilation=hook)
    except KeyboardInterrupt:
        prog.close()
        click.echo("interrupted: the finished repetitions are in the run directory (meta.json: interrupted)",
                   err=True)
        sys.exit(130)
    finally:
        prog.close()
    click.echo(f"{res.run_dir}: {len(res.rows)} repetitions ({res.status})")
    if report:
        _report(res.run_dir)
    if record:
        if res.status != "complete":
            raise ConfigError(f"--record: the run is {res.status}, not complete: the record of {name} is unchanged "
                              f"(the run stays in {res.run_dir})")
        _record(res.run_dir, records_root)


def _auto_dilation_hook(max_dilation: float):
    """The runner's ``auto_dilation`` hook: each testbed point up the fidelity ladder of
    ``clusterlab.diagnose.dilation`` (the one ``bench broadcast`` and ``mine`` use); its verdicts
    on stderr, the ladder into the point's meta."""
    from clusterlab.diagnose import point_fidelity
    from clusterlab.diagnose.dilation import attempt_lines, auto_dilation, ladder_limit, record
    from clusterlab.diagnose.fidelity import _rto_min_s

    def hook(p, run_at, run_dir):
        limit, why = ladder_limit(p.tcp, p.dilation, max_dilation)

        def at(k):
            pm = run_at(k)
            return pm, point_fidelity(run_dir, p.index)

        auto = auto_dilation(at, p.dilation, _rto_min_s(p.tcp.to_dict()), limit, why)
        click.echo("\n".join(f"  point {p.index}: {line}" for line in attempt_lines(auto, limit)), err=True)
        return record(auto, limit)

    return hook


def _record(run_dir, records_root) -> None:
    from clusterlab.report.records import write_record

    dest = write_record(run_dir, records_root)
    click.echo(f"{dest}: the record of {dest.name} (and {Path(records_root) / 'README.md'})")


@experiment.command("record")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--records", "records_root", default="results", show_default=True, type=OutputPath(directory=True),
              help="The records directory (the repository's results/).")
def record_cmd(run_dir, records_root):
    """Make a finished run the record of its study: RECORDS/STUDY/ replaced by the run's report,
    figures, table of every repetition (Parquet) and meta.json, RECORDS/README.md regenerated.

    \b
    Example:
      clusterlab experiment record runs/seed002-fig1/20260101-120000
    """
    _record(run_dir, records_root)


@experiment.command("status")
@click.argument("names", nargs=-1)
@click.option("--records", "records_root", default="results", show_default=True,
              type=click.Path(exists=True, file_okay=False),
              help="The records directory (the repository's results/; run from the repository's top).")
@click.option("--json", "as_json", is_flag=True, help="Everything as JSON (every claim, every changed file).")
def status_cmd(names, records_root, as_json):
    """Where each study stands: its record (date, commit), whether the record is stale (files it
    depends on changed since its commit: the study's module, its workload, every clusterlab
    module they import, the Rust crates) and each of the seed's claims' verdict.

    \b
    Examples:
      clusterlab experiment status
      clusterlab experiment status seed000-fig5 --json
    """
    from clusterlab.report.records import status, status_json

    entries = status(records_root, list(names) or None)
    if as_json:
        click.echo(status_json(entries))
        return
    for e in entries:
        rec = e["record"]
        if rec is None:
            click.echo(f"{e['study']:<16} no record")
            continue
        fresh = {True: f"STALE ({len(e['changed'])} files changed since: {', '.join(e['changed'][:3])}"
                       + (", ..." if len(e["changed"]) > 3 else "") + ")",
                 False: "current", None: f"unknown ({e.get('why')})"}[e["stale"]]
        click.echo(f"{e['study']:<16} {rec['date']}  {(rec['commit'] or '?')[:10]}  {fresh}")
        for c in rec["claims"]:
            where = f" [{c['where']}]" if c["where"] else ""
            click.echo(f"    {c['verdict']:<10} {c['figure'].partition(', ')[2]}: {c['claim']}{where}")


def _report(run_dir) -> None:
    from clusterlab.report.study import render

    r = render(run_dir)
    click.echo(f"{Path(run_dir) / 'report.md'}: {len(r['pngs'])} figures"
               + "".join(f"; dilation check {'agrees' if c['agree'] else 'differs' if c['agree'] is False else 'n/a'}"
                         for c in r["checks"]))
    _diagnosis(run_dir, run_dir)


def _diagnosis(run_dir, report_dir) -> None:
    """The diagnosis at the end of the report and of the command's output."""
    from clusterlab.diagnose import diagnose_dir
    from clusterlab.diagnose.report_section import append_diagnosis, closing_lines

    result = diagnose_dir(run_dir)
    append_diagnosis(report_dir, result)
    click.echo("\n".join(closing_lines(result)))


@experiment.command("report")
@click.argument("run_dir", type=click.Path(file_okay=False))
def report_cmd(run_dir):
    """Render a study run's plots, report.md and report.html (again).

    \b
    Example:
      clusterlab experiment report runs/seed000-fig3/20260101-120000
    """
    _report(run_dir)


@experiment.command("merge")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option("-o", "--out", required=True, type=OutputPath(directory=True),
              help="The merged run directory (new, or empty).")
@click.option("--report/--no-report", default=True, show_default=True, help="Render the report afterwards.")
@click.option("--record", is_flag=True, help="Make the merged run the study's record (as `experiment record`).")
@click.option("--records", "records_root", default="results", show_default=True, type=OutputPath(directory=True),
              help="The records directory (the repository's results/).")
@click.option("--as", "as_study", default=None, metavar="STUDY",
              help="Make the result a run of STUDY, a study that reports the same runs (seed000-fig4 reports "
                   "seed000-fig3's); one run is enough.")
@click.option("--finished-points", is_flag=True,
              help="Take the finished points of a run that stopped early (interrupted, or left 'running' by a "
                   "machine that went down); the repetitions of the point it was in are left out.")
def merge_cmd(run_dirs, out, report, record, records_root, as_study, finished_points):
    """Merge complete runs (or records) of one study, run in parts, into one run: every point
    once, points renumbered, each part's provenance (commit, load, --set) kept in meta.json
    and told in the report.

    \b
    Examples:
      clusterlab experiment merge results/seed000-fig5 runs/seed000-fig5/20260101-120000 -o runs/seed000-fig5-both
      clusterlab experiment merge results/seed000-fig3 --as seed000-fig4 -o runs/seed000-fig4-from-fig3
      clusterlab experiment merge --finished-points runs/seed000-fig6/a runs/seed000-fig6/b -o runs/seed000-fig6-ab
    """
    from clusterlab.report.merge import merge_runs

    dest = merge_runs(run_dirs, out, as_study=as_study, finished_points=finished_points)
    click.echo(f"{dest}: {len(run_dirs)} run{'s' if len(run_dirs) > 1 else ''} merged"
               + (f" as {as_study}" if as_study is not None else ""))
    if report or record:
        _report(str(dest))
    if record:
        _record(str(dest), records_root)


def _int_list(text: str) -> list[int]:
    from clusterlab.units import parse_int

    parts = [x.strip() for x in text.split(",")]
    if not parts or any(p == "" for p in parts):
        raise ConfigError(f"--nodes wants a comma-separated list of integers, got {text!r}")
    return [parse_int(p, "--nodes", lo=1, hi=1024) for p in parts]


@experiment.command()
@click.option("--algorithm", type=click.Choice(["hpa", "hpa-eld", "cd", "pfp"]), default="hpa", show_default=True)
@click.option("--nodes", default="1,2,4,8", show_default=True, help="Rank counts, comma-separated.")
@click.option("--data", required=True, type=click.Path(dir_okay=False), help="FIMI basket file.")
@click.option("--min-support", required=True, type=Finite(lo=0), help="Fraction (0.007) of transactions.")
@click.option("--transport", "transports", multiple=True, metavar="LABEL=SETTINGS|SETTINGS",
              help="A transport setting (one plot line each): 'default' or key=value pairs, e.g. "
                   "'tuned:rto_min=5ms,rto_min_jitter=100ms,rto_max=1s'. Repeatable.")
@click.option("--rto-min", "rto_mins", default=None,
              help="Shortcut: comma-separated minimum RTOs (e.g. default,5ms,50ms), one line each; "
                   "--rto-min-jitter and --rto-max-offset apply to all. On local ranks the socket option takes "
                   "MIN + jitter up to 200ms; seed 000's 250..350 ms needs the testbed (seed000-fig6).")
@click.option("--rto-min-jitter", default="0", show_default=True, type=Duration(keep_text=True),
              help="Each rank draws its minimum RTO from [MIN, MIN + this].")
@click.option("--rto-max-offset", default=None, type=Duration(keep_text=True),
              help="Each rank's maximum RTO is its own minimum + this; the socket option takes 1s..120s "
                   "(refused otherwise).")
@renamed_options("--rto-jitter", "--rto-max-extra")
@click.option("--repeat", default=1, show_default=True, type=Int(lo=1, hi=10**6))
@click.option("--backend", type=click.Choice(MESHES), default="tcp", show_default=True)
@click.option("--block-size", default="8KiB", show_default=True, type=Size(keep_text=True, lo=1, hi=1 << 30),
              help="HPA message block size.")
@click.option("-o", "--output", default="runs/speedup", show_default=True, type=OutputPath(directory=True),
              help="Directory for speedup.csv, speedup.json, speedup.png and the study's table and meta.json.")
def speedup(algorithm, nodes, data, min_support, transports, rto_mins, rto_min_jitter, rto_max_offset, repeat, backend,
            block_size, output):
    """Speedup vs nodes of a parallel miner on local ranks, one line per transport setting.

    \b
    Example:
      clusterlab experiment speedup --algorithm hpa --nodes 1,2,4 --data seed000.dat \\
          --min-support 0.007 --rto-min default,5ms --rto-min-jitter 100ms
    """
    from clusterlab.experiments.speedup import SpeedupSpec, plot_speedup, run_speedup, write_rows
    from clusterlab.units import parse_duration, parse_size

    if not Path(data).is_file():
        raise ConfigError(f"--data {data!r}: no such file")
    settings: dict[str, str] = {}
    for t in transports:
        label, _, text = t.partition(":") if ":" in t else (t, "", t)
        settings[label] = text
    if rto_mins is not None:
        for v in rto_mins.split(","):
            v = v.strip()
            if v == "default":
                settings["default"] = "default"
                continue
            parse_duration(v, "--rto-min")
            parts = [f"rto_min={v}"]
            if parse_duration(rto_min_jitter) > 0:
                parts.append(f"rto_min_jitter={rto_min_jitter}")
            if rto_max_offset is not None:
                parts.append(f"rto_max_offset={rto_max_offset}")
            jitter = parse_duration(rto_min_jitter) > 0
            settings[f"rto_min={v}" + (f"+[0,{rto_min_jitter}]" if jitter else "")] = ",".join(parts)
    if not settings:
        settings = {"default": "default"}
    spec = SpeedupSpec(data=data, min_support=min_support, algorithm=algorithm, nodes=_int_list(nodes),
                       settings=settings, repeat=repeat, backend=backend, block_bytes=parse_size(block_size))

    def progress(r):
        click.echo(f"{r['setting']:>28}  nodes={r['nodes']:<3} run {r['repeat']}: job {r['job_s']:.3f} s "
                   f"(wall {r['wall_s']:.2f} s), {r['bytes_sent'] / 1e6:.1f} MB sent, "
                   f"retrans {r['retransmissions']}, RTO timeouts {r['timeouts']}")

    out = Path(output)
    rows = run_speedup(spec, progress, out_dir=out)
    write_rows(rows, out / "speedup.csv")
    write_rows(rows, out / "speedup.json")
    plot_speedup(rows, out / "speedup.png", title=f"{algorithm.upper()} on {Path(data).name}, minsup {min_support:g}")
    click.echo(f"wrote {out / 'speedup.csv'}, {out / 'speedup.json'}, {out / 'speedup.png'}")
