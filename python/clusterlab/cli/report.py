"""``clusterlab report RUN_DIR``: a study run's report (plots, seed numbers, report.md/html), a
program run's (``clusterlab run --run-dir``: the per-rank split), or the monitor report of a
directory that holds only a monitor table."""

from __future__ import annotations

import json
from pathlib import Path

import click

from clusterlab.errors import ConfigError


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--title", default=None, help="Title of the monitor report (default: the directory name).")
def report(run_dir, title):
    """Report RUN_DIR. A program run (`clusterlab run --run-dir`) gets report.md with each
    rank's time split (wall = compute + transfer + RTO wait), the monitor's plots in
    RUN_DIR/monitor/ and the diagnosis. A study run (meta.json, from `experiment run` or `bench broadcast
    --run-dir`) gets its figures, the seed's numbers beside ours and report.md/report.html, ending
    with the diagnosis (`clusterlab diagnose`: where the time went, what removes the loss); its
    monitor table (the last point's) gets traffic.png, packet_sizes.png, tcp.png, switch.png,
    cpu.png and summary.json in RUN_DIR/monitor/. A directory with only monitor.parquet (or
    monitor.csv, from `clusterlab monitor`) gets those monitor plots and report.md itself.

    \b
    Examples:
      clusterlab bench broadcast --hosts 16 --reps 10 --run-dir runs/b16
      clusterlab report runs/b16
      clusterlab run -n 4 --run-dir runs/p4 -- python prog.py && clusterlab report runs/p4
      clusterlab monitor --duration 5 -o runs/m/monitor.parquet && clusterlab report runs/m
    """
    d = Path(run_dir)
    if not d.is_dir():
        raise ConfigError(f"{run_dir}: no such directory")
    from clusterlab._atomic import check_output

    check_output(d, "report directory", directory=True)  # the report is written into it
    from clusterlab.cluster.record import is_program_run

    program = is_program_run(d)  # `clusterlab run --run-dir`
    study = (d / "meta.json").exists() and not program
    if program:
        from clusterlab.report.program import render as render_program

        r = render_program(d)
        click.echo(f"{d}/report.md: {r['ranks']} rank records ({r['status']})")
    if study:
        from clusterlab.report.study import render

        r = render(d)
        click.echo(f"{d}/report.md: {r['rows']} repetitions, {len(r['pngs'])} figures ({r['status']})")
    from clusterlab.cli.experiment import _diagnosis

    src = next((c for c in (d / "monitor.parquet", d / "monitor.csv") if c.exists()), None)
    if src is None:
        if not (study or program):
            raise ConfigError(f"{run_dir}: no meta.json, monitor.parquet or monitor.csv (record one with "
                              "clusterlab experiment run, bench broadcast --run-dir, run --run-dir or "
                              "clusterlab monitor)")
        _diagnosis(d, d)
        return
    try:
        from clusterlab.report.monitor_plots import write_report
    except ImportError:
        raise ConfigError("the monitor report needs pandas and matplotlib: pip install pandas matplotlib "
                          "(from a clone: pip install '.[report]')") from None
    from clusterlab.monitor import read_table

    tbl, meta = read_table(src)
    out = d
    if "point" in tbl.column_names:  # a study's monitor table: the last point's samples
        import pyarrow.compute as pc

        last = pc.max(tbl.column("point")).as_py()
        tbl = tbl.filter(pc.equal(tbl.column("point"), last)).drop_columns(["point"])
        out = d / "monitor"
        title = title or f"{d.name}, point {last}"
    elif program:  # report.md is the program's; the monitor's goes beside its plots
        out = d / "monitor"
    extra = None
    if (d / "bench.json").exists():
        try:
            extra = json.loads((d / "bench.json").read_text()).get("settings")
        except ValueError as e:
            raise ConfigError(f"{d / 'bench.json'}: not JSON ({e})") from None
    try:
        s = write_report(tbl, meta, out, title or d.name, extra)
    except ImportError as e:
        raise ConfigError(f"the monitor report needs {e.name}: pip install pandas matplotlib "
                          "(from a clone: pip install '.[report]')") from None
    click.echo(f"{out}/report.md: {s['tx_bytes']:,} bytes sent, {s['retransmissions']} retransmissions, "
               f"{s['timeouts']} timeouts, {s['switch_drops']} switch drops"
               + (f", {s['atm_cells_dropped']} ATM cells dropped ({s['atm_frames_lost']} frames lost at reassembly)"
                  if s.get("atm_cells_dropped") else "") + ("; CPU-bound" if s["cpu_bound"] else ""))
    # the last lines, after the monitor's: the fidelity line and the diagnosis (a study's and a program's
    # report.md end with it; a monitor directory's gets the fidelity check)
    _diagnosis(d, d if (program or study) else out)
