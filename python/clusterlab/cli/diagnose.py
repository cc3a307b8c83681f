"""``clusterlab diagnose RUN_DIR``: where a run's time went, the dominant loss with its evidence,
the setting that removes it and the predicted gain (``clusterlab.diagnose``)."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the diagnosis as JSON (for tools).")
@click.option("--verify", is_flag=True,
              help="Rerun the job as recorded and with the recommended setting (a parallel mining run whose "
                   "fix is a setting), into RUN_DIR/verify/, and print the predicted against the measured gain.")
def diagnose(run_dir, as_json, verify):
    """Diagnose RUN_DIR from what it recorded (nothing is rerun): the job's time by cause
    (compute, transfer at line rate, RTO waits, drops at the switch and host queues, CPU
    starvation, skew between ranks, Nagle, window-limited transfers, small messages, queueing,
    launch), the dominant loss with its evidence (pass, rank, port), the setting that removes
    it and the predicted gain with how it was predicted. An emulated (testbed) run first gets
    its fidelity line: spare CPU, achieved link rate, drops where none are expected, timer
    granularity against the dilated RTO min.

    RUN_DIR: a study run (meta.json), a program run (`clusterlab run --run-dir`: each rank's
    split of its time is printed after the causes), a directory with the JSON summary of
    `clusterlab mine --nodes N -o DIR/sets.parquet --json` (or its .passes.json), or a monitor
    directory (fidelity only).

    \b
    Examples:
      clusterlab mine t.dat -s 0.01 --nodes 2 -q -o run/sets.parquet --json > run/summary.json
      clusterlab diagnose run
      clusterlab diagnose runs/b16 --json
      clusterlab run -n 4 --run-dir runs/p4 -- python prog.py && clusterlab diagnose runs/p4
      clusterlab diagnose run --verify
    """
    from clusterlab.diagnose import diagnose, load, render_text

    jobs = load(run_dir)
    result = {"run_dir": str(run_dir), "jobs": [diagnose(j) for j in jobs]}
    if verify:
        from clusterlab._atomic import check_output
        from clusterlab.diagnose.verify import verify as rerun
        from clusterlab.diagnose.verify import verify_lines
        from clusterlab.errors import ConfigError

        if len(jobs) != 1:
            raise ConfigError(f"{run_dir}: --verify reruns one job; this run holds {len(jobs)}")
        check_output(Path(run_dir) / "verify", "verify directory", directory=True)
        result["verify"] = rerun(run_dir, jobs[0], result["jobs"][0])
    if as_json:
        click.echo(json.dumps(result, indent=1))
    else:
        click.echo(render_text(result))
        if verify:
            click.echo("\n".join(verify_lines(result["verify"])))
