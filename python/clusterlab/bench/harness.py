"""The one harness of the root ``bench/*.py`` scripts: their common options, the provenance
block every record carries, and the atomic write of the record.

A script builds its parser with :func:`parser` (``-o/--output``, ``--json`` and, when it
repeats, a repetitions option checked to be at least 1), then :func:`start` checks the output
path *before* the work (one line and exit 2 when it cannot be written) and takes the start of
the provenance: the date (UTC), the load average and the CPU counters. :meth:`Run.write` adds
the ``provenance`` block and replaces the record atomically; it may be called after every
step of a long run (each write's block covers the run so far).

The provenance is the study runner's (``experiments/runner.py``): ``git_revision``,
``machine`` and ``load_average`` of ``monitor.provenance``, and spare CPU as the monitor
counts it (``monitor.procfs.cpu_spare``: idle, I/O wait and, without autogroup, niced work):

    {"provenance": {"format": 1, "date": "2026-11-28T18:30:00Z", "finished": "...", "seconds": 12.3,
                    "git": {"revision": "<sha>", "dirty": false}, "clusterlab": "0.x",
                    "argv": [...], "machine": {"cpus": 2, "cpu_model": "...", "kernel": "...",
                    "python": "3.x", ...}, "sched_autogroup": false,
                    "load_before": [1.0, 0.9, 0.8], "load_after": [...], "cpu_spare": 0.41,
                    "cpu_bound": false}}

``cpu_spare`` is the share of the machine's CPU time over the run that a run could have had
besides what it used (the run's own use counts as busy, also when the script runs niced); ``cpu_bound`` is that share below
``CPU_BOUND_SPARE``, as a study's points are judged.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

from clusterlab._atomic import atomic_open, check_output
from clusterlab.errors import ConfigError
from clusterlab.monitor.procfs import CPU_BOUND_SPARE, cpu_spare, cpu_total, parse_cpu, sched_autogroup
from clusterlab.monitor.provenance import git_revision, load_average, machine, version

FORMAT = 1


def parser(doc: str, output: str | Path, *, repeat: tuple[str, int] | None = None,
           repeat_help: str = "repetitions", output_aliases: tuple[str, ...] = (),
           output_help: str | None = None) -> argparse.ArgumentParser:
    """The parser with the common options, described by ``doc``'s first paragraph (a script's
    docstring): ``-o/--output`` (default ``output``; ``output_aliases`` keep a script's older
    spelling such as ``--out``), ``--json`` and, with ``repeat=(flag, default)``, the script's
    repetitions option (its own flag, such as ``--repeat`` or ``--runs``, so documented
    commands keep working)."""
    ap = argparse.ArgumentParser(description=doc.strip().split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--output", *output_aliases, dest="output", default=str(output),
                    help=output_help or f"the record, written atomically with its provenance (default {_short(output)})")
    ap.add_argument("--json", action="store_true",
                    help="print the record (with its provenance) as JSON on stdout; progress goes to stderr")
    if repeat is not None:
        flag, default = repeat
        ap.add_argument(flag, type=int, default=default, help=f"{repeat_help} (default {default}, at least 1)")
    return ap


def mining_options(ap: argparse.ArgumentParser, count_option: tuple[str, str, str]) -> None:
    """The options of a bench that records HPA on generated data: ``count_option`` = (flag,
    default, what) for its list of rank or host counts (read with :func:`counts`), ``--data``
    (as a study names it), ``--min-support`` and ``--cache`` (where generated data is kept)."""
    import tempfile

    flag, default, what = count_option
    ap.add_argument(flag, default=default, help=f"{what} (default %(default)s)")
    ap.add_argument("--data", default="seed000:1M", help="the data, as a study names it (default %(default)s)")
    ap.add_argument("--min-support", type=float, default=0.007, help="relative minimum support (default %(default)s)")
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "clusterlab-bench"),
                    help="where generated data is cached (default %(default)s)")


def counts(text: str, flag: str) -> list[int]:
    """A comma-separated list of positive counts (``--ranks 1,4,16``); bad input is one line
    naming ``flag`` and exit 2."""
    try:
        out = [int(x) for x in text.split(",")]
    except ValueError:
        out = []
    if not out or min(out) < 1:
        print(f"{flag}: a comma-separated list of counts of at least 1, got {text!r}", file=sys.stderr)
        raise SystemExit(2)
    return out


def _short(path: str | Path) -> str:
    """``.../bench/results/x.json`` as ``bench/results/x.json`` (the last ``bench`` in the path)."""
    parts = Path(path).parts
    if "bench" not in parts:
        return str(path)
    return str(Path(*parts[len(parts) - 1 - parts[::-1].index("bench"):]))


def _cpu() -> dict[str, int] | None:
    try:
        with open("/proc/stat") as f:
            return parse_cpu(f.read())
    except (OSError, ValueError):
        return None


def _own_ticks() -> float:
    """CPU ticks of this process and its waited-for children so far."""
    t = os.times()
    return (t.user + t.system + t.children_user + t.children_system) * os.sysconf("SC_CLK_TCK")


def _utc(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Run:
    """One run of a bench script: its options, the start of its provenance, its output."""

    def __init__(self, args: argparse.Namespace, repeat_flag: str | None = None):
        self.args = args
        self.output = Path(args.output)
        if repeat_flag is not None:
            n = getattr(args, repeat_flag.lstrip("-").replace("-", "_"))
            if n < 1:
                raise ConfigError(f"{repeat_flag} {n}: at least 1")
        check_output(self.output, "--output")
        self.started = time.time()
        self.git = git_revision()
        self.machine = machine()
        self.autogroup = self.machine.pop("sched_autogroup", sched_autogroup())
        self.load_before = load_average()
        self._cpu0 = _cpu()
        self._own0 = _own_ticks()

    def say(self, *parts, **kw) -> None:
        """Progress: to stdout, or to stderr with ``--json`` (stdout is then the record alone)."""
        print(*parts, file=sys.stderr if self.args.json else sys.stdout, flush=True, **kw)

    def provenance(self) -> dict:
        """The provenance block of the run so far."""
        now = time.time()
        spare = None
        c1 = _cpu()
        if self._cpu0 is not None and c1 is not None:
            total = cpu_total(c1) - cpu_total(self._cpu0)
            if total > 0:
                niced = not self.autogroup
                ticks = cpu_spare(c1, niced) - cpu_spare(self._cpu0, niced)
                if niced and os.nice(0) > 0:
                    # A run under nice counts its own ticks as niced: they are not spare.
                    ticks -= _own_ticks() - self._own0
                spare = round(max(ticks, 0) / total, 3)
        return {"format": FORMAT, "date": _utc(self.started), "finished": _utc(now),
                "seconds": round(now - self.started, 1), "git": self.git, "clusterlab": version(),
                "argv": list(sys.argv), "machine": self.machine, "sched_autogroup": self.autogroup,
                "load_before": self.load_before, "load_after": load_average(), "cpu_spare": spare,
                "cpu_bound": spare is not None and spare < CPU_BOUND_SPARE}

    def write(self, record: dict, *, final: bool = True, default=None) -> Path:
        """Replace the record atomically with ``record`` plus its ``provenance`` block; on the
        final write, print the record with ``--json`` or its path otherwise. ``default``: as
        ``json.dump``'s, for values JSON does not know (numpy scalars)."""
        doc = {**record, "provenance": self.provenance()}
        with atomic_open(self.output, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, default=default)
            f.write("\n")
        if final:
            if self.args.json:
                print(json.dumps(doc, indent=1, default=default), flush=True)
            else:
                p = doc["provenance"]
                print(f"load {_load1(p['load_before'])} -> {_load1(p['load_after'])}, spare CPU "
                      f"{p['cpu_spare']}; wrote {self.output}", flush=True)
        return self.output


def _load1(v) -> str:
    return "?" if not v else f"{v[0]:.1f}"


def start(ap: argparse.ArgumentParser, argv=None, *, repeat_flag: str | None = None,
          args: argparse.Namespace | None = None) -> Run:
    """Parse ``argv`` (or take ``args`` already parsed) and start the run; a bad output path
    or repetition count is one line on stderr and exit 2, before any work."""
    if args is None:
        args = ap.parse_args(argv)
    try:
        return Run(args, repeat_flag)
    except ConfigError as e:
        ap.exit(2, f"{ap.prog}: {e}\n")
