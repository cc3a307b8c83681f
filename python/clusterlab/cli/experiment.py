"""``clusterlab experiment``: the seed studies as one command each."""

from __future__ import annotations

from pathlib import Path

import click

from clusterlab.errors import ConfigError


@click.group()
def experiment():
    """Run a study from the seed papers and write its table and plot."""


def _int_list(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--nodes wants a comma-separated list of integers, got {text!r}") from None
    if not out or min(out) < 1:
        raise ConfigError(f"--nodes wants positive integers, got {text!r}")
    return out


@experiment.command()
@click.option("--algorithm", type=click.Choice(["hpa", "hpa-eld", "cd", "pfp"]), default="hpa", show_default=True)
@click.option("--nodes", default="1,2,4,8", show_default=True, help="Rank counts, comma-separated.")
@click.option("--data", required=True, type=click.Path(dir_okay=False), help="FIMI basket file.")
@click.option("--min-support", required=True, type=float, help="Fraction (0.007) of transactions.")
@click.option("--transport", "transports", multiple=True, metavar="LABEL=SETTINGS|SETTINGS",
              help="A transport setting (one plot line each): 'default' or key=value pairs, e.g. "
                   "'tuned:rto_min=5ms,rto_min_jitter=100ms,rto_max=1s'. Repeatable.")
@click.option("--rto-min", "rto_mins", default=None,
              help="Shortcut: comma-separated minimum RTOs (e.g. default,5ms,50ms), one line each; "
                   "--rto-jitter and --rto-max-extra apply to all (seed 000: MAX = MIN + 100ms).")
@click.option("--rto-jitter", default="0", show_default=True, help="Per-rank random extra on the minimum RTO.")
@click.option("--rto-max-extra", default=None, help="Set the maximum RTO to MIN + this (at least 1s is accepted by the kernel option).")
@click.option("--repeat", default=1, show_default=True, type=int)
@click.option("--backend", type=click.Choice(["tcp", "mpi"]), default="tcp", show_default=True)
@click.option("--block-size", default="8KiB", show_default=True, help="HPA message block size.")
@click.option("-o", "--output", default="runs/speedup", show_default=True, type=click.Path(file_okay=False),
              help="Directory for speedup.csv, speedup.json and speedup.png.")
def speedup(algorithm, nodes, data, min_support, transports, rto_mins, rto_jitter, rto_max_extra, repeat, backend,
            block_size, output):
    """Speedup vs nodes of a parallel miner, one line per transport setting (seed 000 Fig. 6).

    \b
    Example:
      clusterlab experiment speedup --algorithm hpa --nodes 1,2,4 --data seed000.dat \\
          --min-support 0.007 --rto-min default,5ms --rto-jitter 100ms
    """
    from clusterlab.experiments.speedup import SpeedupSpec, plot_speedup, run_speedup, write_rows
    from clusterlab.mining.parallel import format_passes  # noqa: F401 - import check for a clear error early
    from clusterlab.units import parse_duration, parse_size

    if not Path(data).exists():
        raise ConfigError(f"{data}: no such file")
    settings: dict[str, str] = {}
    for t in transports:
        label, _, text = t.partition(":") if ":" in t else (t, "", t)
        settings[label] = text
    if rto_mins:
        for v in rto_mins.split(","):
            v = v.strip()
            if v == "default":
                settings["default"] = "default"
                continue
            parts = [f"rto_min={v}"]
            if parse_duration(rto_jitter) > 0:
                parts.append(f"rto_min_jitter={rto_jitter}")
            if rto_max_extra is not None:
                parts.append(f"rto_max={max(1.0, parse_duration(v) + parse_duration(rto_max_extra))}")
            settings[f"rto_min={v}" + (f"+[0,{rto_jitter}]" if parse_duration(rto_jitter) > 0 else "")] = ",".join(parts)
    if not settings:
        settings = {"default": "default"}
    spec = SpeedupSpec(data=data, min_support=min_support, algorithm=algorithm, nodes=_int_list(nodes),
                       settings=settings, repeat=repeat, backend=backend, block_bytes=parse_size(block_size))

    def progress(r):
        click.echo(f"{r['setting']:>28}  nodes={r['nodes']:<3} run {r['repeat']}: job {r['job_s']:.3f} s "
                   f"(wall {r['wall_s']:.2f} s), {r['bytes_sent'] / 1e6:.1f} MB sent, "
                   f"retrans {r['retransmissions']}, RTO timeouts {r['timeouts']}")

    rows = run_speedup(spec, progress)
    out = Path(output)
    write_rows(rows, out / "speedup.csv")
    write_rows(rows, out / "speedup.json")
    plot_speedup(rows, out / "speedup.png", title=f"{algorithm.upper()} on {Path(data).name}, minsup {min_support:g}")
    click.echo(f"wrote {out / 'speedup.csv'}, {out / 'speedup.json'}, {out / 'speedup.png'}")
