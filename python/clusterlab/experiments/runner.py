"""One runner for every study: points in order, warm-up and repetitions, the monitor, dilation,
provenance; everything written as it happens.

``run_study`` writes into ``runs/<study>/<stamp>/`` (or ``out_dir``):

* ``table.parquet`` and ``table.csv``: one row per timed repetition (tidy): the study, the
  point, its label, every setting of the point, the dilation, the repetition number, what the
  workload measured (lists as JSON text), ``cpu_bound`` and the 1-minute load at the point's
  start (a compute replay's rows: ``recording_foreign_cpu``, the share of the machine's CPU
  other processes took while its recording ran, also in the point's meta);
* ``monitor.parquet``: the monitor's table (``clusterlab.monitor``) of every point, with a
  ``point`` column (its meta's ``per_point``: each point's dilation, RTT bounds and sampling interval);
* ``meta.json``: version, git revision, machine, load before and after, the study as data, the
  overrides, each point's settings, dilation and why, what was emulated, the testbed's applied
  values, and the status (``running``, ``complete``, ``interrupted``, ``failed``).

All of them are replaced atomically after every repetition, so Ctrl-C (or a crash) leaves the
finished repetitions readable and ``meta.json`` saying how far it got.

>>> from clusterlab.experiments.spec import Study, InProcess
>>> from clusterlab.experiments.workloads import pingpong
>>> res = run_study(Study(name="pp", cluster=InProcess(ranks=2), workload=pingpong(sizes="8", trial_time=0.001),
...                       repeat=2, warmup=0, monitor=False))
>>> res.status, len(res.rows), sorted({r["rep"] for r in res.rows})
('complete', 2, [0, 1])
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from clusterlab.errors import ConfigError
from clusterlab.experiments.spec import Point, Study
from clusterlab.monitor.procfs import CPU_BOUND_SPARE, cpu_bound
from clusterlab.monitor.provenance import git_revision, load_average, machine
from clusterlab.monitor.provenance import version as _version
from clusterlab.rendezvous.errors import CommError

META_VERSION = 1
TABLE_INTERVAL = 0.5  # seconds between table rewrites while rows arrive (each point's end writes too)
FIRST_COLUMNS = ("study", "point", "label", "check", "rep", "seconds")


@dataclasses.dataclass
class RunResult:
    study: Study
    points: list[Point]
    rows: list[dict]
    run_dir: Path | None
    meta: dict
    status: str = "running"


def prepare(study: Study, quick: bool = False, overrides: dict[str, str] | None = None) -> tuple[Study, list[Point]]:
    """Apply ``--quick`` then ``--set`` (a setting both give: ``--set``'s) and expand; every
    point is built (topology, socket settings, per-host sysctls) so an impossible one is refused
    before anything runs."""
    from clusterlab.experiments.clusters import check_point

    if quick:
        study = study.with_quick(skip=overrides or ())
    if overrides:
        study = study.with_settings(overrides)
    points = study.points()
    for p in points:
        try:
            check_point(p)
        except ConfigError as e:
            raise ConfigError(f"point {p.index} ({p.label}): {e}") from None
    return study, points


def new_run_dir(root: str | os.PathLike, name: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path(root) / name
    d = base / stamp
    i = 2
    while d.exists():
        d = base / f"{stamp}-{i}"
        i += 1
    d.mkdir(parents=True)
    return d


class DiskFull(OSError):
    """The run directory's file system filled up mid-run (the finished repetitions are kept)."""

    def __init__(self, path, cause: BaseException | None = None):
        super().__init__(errno.ENOSPC, "No space left on device", str(path))
        self.cause = cause


def _is_disk_full(e: BaseException) -> bool:
    # pyarrow's write errors are OSErrors without an errno; their text says it.
    return isinstance(e, OSError) and (e.errno in (errno.ENOSPC, errno.EDQUOT) or "No space left" in str(e))


class _Writer:
    """Keeps the run directory current: table, monitor table, meta (each replaced atomically;
    the two tables together, so they always hold the same repetitions). A reserve file holds
    room for the last meta.json: when the disk fills, it is freed to record the failure."""

    RESERVE = 1 << 20

    def __init__(self, run_dir: Path | None):
        self.dir = run_dir
        self.monitor_tables: list = []
        self.monitor_points: list[int] = []
        self.monitor_per_point: dict[str, dict] = {}
        self.written, self.last_write = 0, 0.0
        self.reserve = None
        if run_dir is not None:
            self.reserve = run_dir / ".clusterlab-reserve"
            try:
                fd = os.open(self.reserve, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                try:
                    os.posix_fallocate(fd, 0, self.RESERVE)
                finally:
                    os.close(fd)
            except OSError as e:
                self.release()
                if _is_disk_full(e):
                    raise DiskFull(run_dir, e) from None
                raise

    def table_fit(self, rows: list[dict]) -> None:
        """After a full disk: write the longest run of the first rows that fits (both tables
        hold the same rows), by halving."""
        lo, hi = self.written, len(rows)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            try:
                self.table(rows[:mid])
                lo = mid
            except DiskFull:
                hi = mid - 1

    def release(self) -> None:
        if self.reserve is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.reserve)
            self.reserve = None

    def table(self, rows: list[dict], at_most_every: float = 0.0) -> None:
        """Write both tables; ``at_most_every``: skip if the last write was more recent (a
        workload that yields many rows at once would otherwise rewrite the table per row)."""
        if self.dir is None or not rows or len(rows) == self.written:
            return
        now = time.monotonic()
        if at_most_every and now - self.last_write < at_most_every:
            return
        tbl = rows_table(rows)
        import pyarrow.csv as pcsv
        import pyarrow.parquet as pq

        tmps = [self.dir / f".{n}.tmp-{os.getpid()}" for n in ("table.parquet", "table.csv")]
        try:
            pq.write_table(tbl, str(tmps[0]))
            pcsv.write_csv(tbl, str(tmps[1]))
            for t in tmps:
                with open(t, "rb") as f:
                    os.fsync(f.fileno())
        except BaseException as e:
            for t in tmps:
                with contextlib.suppress(OSError):
                    t.unlink()
            if _is_disk_full(e):
                raise DiskFull(self.dir / "table.parquet", e) from None
            raise
        os.replace(tmps[0], self.dir / "table.parquet")
        os.replace(tmps[1], self.dir / "table.csv")
        self.written, self.last_write = len(rows), time.monotonic()

    def monitor(self, point: Point, mon) -> dict:
        import pyarrow as pa
        import pyarrow.compute as pc

        t = mon.table()
        t = t.append_column("point", pa.array([point.index] * t.num_rows, pa.int32()))
        idle, spare = (pc.mean(pc.filter(t.column("value"), pc.equal(t.column("metric"), m))).as_py()
                       for m in ("cpu_idle", "cpu_spare"))
        spares = pc.filter(t.column("value"), pc.equal(t.column("metric"), "cpu_spare"))
        # The mean hides bursts: 100 ranks' message bursts saturate both cores with 20-40% spare
        # on average; the share of samples below the CPU-bound line shows them.
        saturated = (pc.sum(pc.less(spares, CPU_BOUND_SPARE)).as_py() or 0) / len(spares) if len(spares) else None
        summary = {"mean_cpu_idle": None if idle is None else round(idle, 3),
                   "mean_cpu_spare": None if spare is None else round(spare, 3),
                   "cpu_saturated_share": None if saturated is None else round(saturated, 3),
                   "samples": mon.meta.get("samples"),
                   "late_samples": mon.meta.get("late_samples"), "interval": mon.meta.get("interval"),
                   "error": mon.meta.get("error"), "capture": mon.meta.get("capture")}
        for metric, name in (("TcpRetransSegs", "retransmissions"), ("TcpExtTCPTimeouts", "timeouts"),
                             ("qdisc_drops", "qdisc_drops")):
            v = pc.sum(pc.filter(t.column("value"), pc.equal(t.column("metric"), metric))).as_py()
            summary[name] = int(v or 0)
        if self.dir is not None:
            from clusterlab.monitor import write_table

            self.monitor_tables.append(t)
            self.monitor_points.append(point.index)
            # what differs per point (the last point's meta heads the table): its dilation, its RTT
            # bounds, its sampling interval (longer with more hosts: the fidelity check's rates and
            # its sustained-transfer threshold are per interval)
            self.monitor_per_point[str(point.index)] = {"dilation": mon.meta.get("dilation"),
                                                        "rtt_bounds": mon.meta.get("rtt_bounds"),
                                                        "interval": mon.meta.get("interval")}
            meta = {**mon.meta, "points": len(self.monitor_tables), "per_point": self.monitor_per_point}
            allt = pa.concat_tables(self.monitor_tables).replace_schema_metadata(
                {"clusterlab.monitor": json.dumps(meta)})
            try:
                write_table(allt, self.dir / "monitor.parquet")
            except OSError as e:
                if _is_disk_full(e):
                    raise DiskFull(self.dir / "monitor.parquet", e) from None
                raise
        return summary

    def drop_point(self, index: int) -> None:
        """Forget point ``index``'s monitor samples (a rerun replaces them); the next writes
        rewrite both tables."""
        keep = [i for i, p in enumerate(self.monitor_points) if p != index]
        self.monitor_tables = [self.monitor_tables[i] for i in keep]
        self.monitor_points = [self.monitor_points[i] for i in keep]
        self.monitor_per_point.pop(str(index), None)
        self.written = 0

    def meta(self, meta: dict, last: bool = False) -> None:
        if self.dir is None:
            return
        from clusterlab._atomic import atomic_open

        if last:
            self.release()
        try:
            with atomic_open(self.dir / "meta.json") as f:
                json.dump(meta, f, indent=1, default=str)
                f.write("\n")
        except OSError as e:
            if _is_disk_full(e):
                raise DiskFull(self.dir / "meta.json", e) from None
            raise


def rows_table(rows: list[dict]):
    """The tidy table: a column per key (first the study's own); lists and dicts as JSON text;
    a column mixing text and numbers becomes text."""
    import pyarrow as pa

    cols: list[str] = [c for c in FIRST_COLUMNS if any(c in r for r in rows)]
    for r in rows:
        cols += [c for c in r if c not in cols]
    data = {}
    for c in cols:
        vals = [r.get(c) for r in rows]
        vals = [json.dumps(v) if isinstance(v, (list, dict, tuple)) else v for v in vals]
        kinds = {type(v) for v in vals if v is not None}
        if kinds and not (kinds <= {int, float} or kinds <= {bool} or kinds <= {str}):
            vals = [None if v is None else str(v) for v in vals]
        elif kinds == {int, float}:
            vals = [None if v is None else float(v) for v in vals]
        data[c] = vals
    return pa.Table.from_pydict(data)


def _open_monitor(session, study: Study, execute):
    """The point's monitor, started. A workload whose ``execute`` has ``monitor_options(testbed)``
    (the storage workloads) gets a testbed monitor with those settings, e.g. per-host CPU and
    the target's backing store for seed 001's Ganglia-style panels; any other, the cluster's."""
    options = getattr(execute, "monitor_options", None)
    if options is None or session.testbed is None:
        return session.monitor(study.monitor_interval)
    from clusterlab.monitor import Monitor

    tb = session.testbed
    opts = options(tb)
    # per-host CPU walks every thread of the machine per sample (with 9 hosts a sample took
    # 20-32 ms against 14 without it, seed001 studies 2026-11-23): no finer than 0.25 s
    interval = max(study.monitor_interval, 0.25 if opts.get("host_cpu") else 0.0, 0.005 * len(tb.hosts))
    return Monitor.for_testbed(tb, interval, **opts).start()


def run_study(study: Study, out_dir: str | os.PathLike | None = None, *, quick: bool = False,
              overrides: dict[str, str] | None = None, runs_root: str | os.PathLike | None = None,
              cache_dir: str | os.PathLike | None = None, progress: Callable[..., None] | None = None,
              auto_dilation: Callable | None = None) -> RunResult:
    """Run ``study`` (after ``--quick`` and ``--set`` ``overrides``). Files go to ``out_dir``, or
    to a new ``<runs_root>/<name>/<stamp>/`` when ``runs_root`` is given; with neither, nothing
    is written. ``progress(event, **info)`` hears ``start``, ``point``, ``rep``, ``point_done``.

    ``auto_dilation(point, run_at, run_dir)``: called for every testbed point (not a dilation
    check's, whose dilations are the check) instead of running it once; ``run_at(k)`` runs the
    point at dilation k, replacing an earlier run of it (rows, monitor samples, meta; the files
    are current when it returns), and returns the point's meta; what the hook returns is kept in
    the point's meta as ``auto_dilation`` (``experiment run --auto-dilation`` passes the
    fidelity ladder of ``clusterlab.diagnose.dilation``). The study must be able to take it
    (``check_auto_dilation``)."""
    from clusterlab.experiments import workloads
    from clusterlab.experiments.clusters import open_cluster

    study, points = prepare(study, quick, overrides)
    if auto_dilation is not None:
        check_auto_dilation(study, points)
        if out_dir is None and runs_root is None:
            raise ConfigError("auto-dilation needs a run directory (out_dir or runs_root): the fidelity check reads "
                              "each point's monitor samples from it")
    execute = workloads.get(study.workload.name)
    run_dir = None
    if out_dir is not None:
        run_dir = Path(out_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
    elif runs_root is not None:
        run_dir = new_run_dir(runs_root, study.name)
    cache = str(cache_dir or os.environ.get("CLUSTERLAB_CACHE")
                or (Path(runs_root) / "cache" if runs_root is not None else Path("runs") / "cache"))
    writer = _Writer(run_dir)
    meta = {"format": META_VERSION, "study": study.name, "title": study.title, "version": _version(),
            "git": git_revision(), "machine": machine(), "argv": sys.argv, "quick": quick,
            "overrides": dict(overrides or {}), "spec": study.to_dict(), "started": time.time(),
            "load_before": load_average(), "status": "running",
            "emulated": _emulated(study, points), "points": []}
    writer.meta(meta)
    res = RunResult(study, points, [], run_dir, meta)
    total = len(points) * study.repeat
    if progress:
        progress("start", points=len(points), reps=total, run_dir=run_dir)

    def run_point(p: Point) -> dict:
        pm = {"index": p.index, "label": p.label, "check": p.check, "settings": p.settings,
              "dilation": p.dilation, "dilation_note": p.dilation_note, "load_before": load_average(),
              "started": time.time()}
        meta["points"].append(pm)
        if progress:
            progress("point", index=p.index, of=len(points), label=p.label, dilation=p.dilation)
        load1 = (pm["load_before"] or [None])[0]
        with open_cluster(p, cache) as session:
            pm["applied"] = session.applied
            # a simulated point has no machine of its own to watch
            mon = _open_monitor(session, study, execute) if study.monitor and session.study_kind.monitored else None
            n = 0
            try:
                for row in execute(session, dict(p.workload.params), study.repeat, study.warmup):
                    full = {"study": study.name, "point": p.index, "label": p.label, "check": p.check,
                            "rep": row.pop("rep", n), **p.settings, **row, "load1": load1}
                    full["label"] = p.label
                    if "cpu_idle" in row or "cpu_spare" in row:
                        full["cpu_bound"] = cpu_bound(row)
                    res.rows.append(full)
                    n += 1
                    writer.table(res.rows, at_most_every=TABLE_INTERVAL)
                    if progress:
                        progress("rep", index=p.index, row=full)
            except CommError as e:
                # The job itself failed at this point (a rank gave up: e.g. its connection
                # timed out after the kernel's retries): a result of the point, as a sweep
                # into a regime where the job cannot finish must say, not a reason to drop
                # the rest of the study. Errors of the tool itself still stop the run.
                pm["failed"] = f"after {n} repetition{'s' if n != 1 else ''}: {e}"
                res.rows.append({"study": study.name, "point": p.index, "label": p.label, "check": p.check,
                                 "rep": n, **p.settings, "failed": str(e), "load1": load1})
                if progress:
                    progress("point_failed", index=p.index, error=str(e))
            finally:
                if mon is not None:
                    mon.stop()
                    pm["monitor"] = writer.monitor(p, mon)
            pm["notes"] = session.notes
        writer.table(res.rows)
        pm["load_after"] = load_average()
        pm["seconds"] = round(time.time() - pm["started"], 3)
        secs = [r["seconds"] for r in res.rows if r["point"] == p.index and isinstance(r.get("seconds"), float)]
        pm["median_seconds"] = statistics.median(secs) if secs else None
        pm["cpu_bound"] = cpu_bound(pm.get("monitor") or {}, "mean_cpu_spare", "mean_cpu_idle") or any(
            r.get("cpu_bound") for r in res.rows if r["point"] == p.index)
        # a compute replay: how much of the machine other processes took while its recording ran
        foreign = [r["recording_foreign_cpu"] for r in res.rows
                   if r["point"] == p.index and r.get("recording_foreign_cpu") is not None]
        if foreign:
            pm["recording_foreign_cpu"] = max(foreign)
        writer.meta(meta)
        if progress:
            progress("point_done", index=p.index, meta=pm)
        return pm

    def rerun_at(p: Point, k: float) -> dict:
        """Point ``p`` at dilation ``k``, replacing an earlier run of it (its rows, monitor
        samples and meta): the point's meta."""
        res.rows[:] = [r for r in res.rows if r["point"] != p.index]
        meta["points"][:] = [m for m in meta["points"] if m["index"] != p.index]
        writer.drop_point(p.index)
        q = point_at_dilation(p, k)
        res.points[p.index] = q
        return run_point(q)

    try:
        for p in points:
            if auto_dilation is not None and auto_eligible(p):
                info = auto_dilation(p, lambda k, p=p: rerun_at(p, k), run_dir)
                meta["points"][-1]["auto_dilation"] = info
                writer.meta(meta)
            else:
                run_point(p)
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM through the CLI
        res.status = meta["status"] = "interrupted"
        e.run_result = res  # the finished repetitions, for the caller to report
        raise
    except DiskFull as e:
        res.status = meta["status"] = "failed: disk full"
        meta["error"] = f"no space left writing {e.filename}"
        e.run_result = res
        writer.table_fit(res.rows)
        raise
    except BaseException as e:
        res.status = meta["status"] = "failed"
        meta["error"] = f"{type(e).__name__}: {e}"
        e.run_result = res
        raise
    else:
        res.status = meta["status"] = "complete"
        failed = [pm["index"] for pm in meta["points"] if pm.get("failed")]
        if failed:
            meta["failed_points"] = failed
    finally:
        if not res.status.startswith("failed: disk full"):
            try:
                writer.table(res.rows)  # the rows a throttled write left out
            except DiskFull as e:
                res.status = meta["status"] = "failed: disk full"
                meta["error"] = f"no space left writing {e.filename}"
                writer.table_fit(res.rows)
        meta["finished"] = time.time()
        meta["load_after"] = load_average()
        meta["repetitions"] = sum(1 for r in res.rows if not r.get("failed"))
        # The rows the tables hold (after a full disk, the last one written), so that every
        # file agrees.
        if res.status.startswith("failed: disk full"):
            meta["repetitions"] = _rows_on_disk(run_dir)
        writer.meta(meta, last=True)
    return res


def auto_eligible(p: Point) -> bool:
    """A point auto-dilation reruns: on a testbed, not a dilation check's."""
    from clusterlab.experiments import kinds

    return kinds.of(p.cluster).dilates and not p.check


def check_auto_dilation(study: Study, points: list[Point]) -> None:
    """Refuse (``ConfigError``, one line) a study auto-dilation cannot rerun: no testbed point,
    the monitor off (the fidelity check reads its samples), or a testbed point whose workload
    computes for real (a dilated rerun would not slow its computation down)."""
    tb = [p for p in points if auto_eligible(p)]
    if not tb:
        raise ConfigError(f"--auto-dilation: study {study.name} has no testbed point to dilate (its cluster: "
                          f"{study.cluster.kind}; dilation check points keep their dilations)")
    if not study.monitor:
        raise ConfigError("--auto-dilation needs the monitor (the fidelity check reads its samples): drop "
                          "--set monitor=false")
    for p in tb:
        if not p.workload.dilatable:
            hint = " (--set compute=replay replays it)" if "compute" in p.workload.params else ""
            raise ConfigError(f"--auto-dilation: point {p.index} ({p.label}): workload {p.workload.name} computes for "
                              f"real, and a dilated rerun would not slow its computation down{hint}")


def point_at_dilation(p: Point, k: float) -> Point:
    """``p`` at dilation ``k`` (its testbed's rates / k, timers x k); ``ConfigError`` when its
    transport settings cannot be expressed there."""
    from clusterlab.cluster.testbed.dilation import pick_dilation

    k, note = pick_dilation(p.tcp, float(k))
    return dataclasses.replace(p, cluster=p.cluster.at_dilation(k), dilation=k, settings={**p.settings, "dilation": k},
                               dilation_note=f"auto-dilation from {p.dilation:g} ({p.dilation_note}): {note}")


def _rows_on_disk(run_dir: Path | None) -> int:
    if run_dir is None or not (run_dir / "table.parquet").exists():
        return 0
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(run_dir / "table.parquet").metadata.num_rows
    except (OSError, ValueError):
        return 0


def _emulated(study: Study, points=()) -> dict:
    """What the run emulates rather than has, in words (the report repeats it)."""
    from clusterlab.experiments import kinds

    c = study.cluster
    out = {"cluster": c.kind, **kinds.of(c).emulated(study, points)}  # network; a testbed's dilation, TCP stack
    compute = study.workload.params.get("compute")
    if compute is not None:
        out["compute"] = ("replayed: a real run per host count recorded each rank's computation and messages; each "
                          "repetition sends the same messages over the real TCP while every rank waits the CPU "
                          "seconds it computed (a core of its own), times the dilation and times the point's "
                          "compute_scale (1: this machine's CPU; c: a CPU c times slower); validated (at "
                          "compute_scale 1) against real runs in bench/results/replay_validation.json"
                          if compute == "replay" else "real (the miners run)")
        if compute == "replay":
            out["replay validation"] = replay_validation()
    return out


def replay_validation(path: Path | None = None) -> str:
    """One line of the replay validation's results (``bench/replay_validation.py``), for the
    report of a study that replays compute."""
    import json

    path = path or Path(__file__).resolve().parents[3] / "bench" / "results" / "replay_validation.json"
    try:
        with open(path, encoding="utf-8") as f:
            v = json.load(f)
        pts = [f"{p['hosts']} hosts {p['replay_over_real']:.2f}" + ("" if p["within_15pct"] else " (outside 15%)")
               for p in v["points"]]
        loads = [x["load"] for p in v["points"] for x in p["real"]]
        return (f"replayed / real job time (median of each replay over the real run before it; compute {v['compute']}; "
                f"target within 15%): {', '.join(pts)}; bytes per pass equal: "
                f"{all(p['same_bytes_per_pass'] for p in v['points'])}; load average {min(loads):.0f}-{max(loads):.0f} "
                f"on {v['machine']['cpus']} CPUs ({path.name}, {v.get('finished', '?')})")
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"no validation results readable at {path}: {e}"
