"""One study run from several: a study whose grid is too long for one sitting (seed 000's
100-host scale beside its 16 hosts) is run in parts, each a complete run with its own
provenance, and merged into one run directory that reports and records as one.

Each point is kept once: two parts that ran the same point are refused (the repetitions of
two sittings are not pooled silently). The merged ``meta.json`` keeps every part's provenance
(commit, machine, load, settings changed, dates) under ``parts``; the top-level commit is the
newest part's. Point numbers are renumbered in part order, and the ``emulated`` descriptions
that name points ("a 9MB host queue at points 0, 1") are renumbered with them, and said per
point across the parts: a description every point shares once, else each with its points (not
"part 1: ...; part 2: ...", which nests when a merged run is merged again).

A run that stopped before its end (interrupted, or still ``running`` in meta.json after the machine
went down) is refused unless ``finished_points`` is set: then its finished points (those in its
meta.json, every repetition recorded) are taken, the repetitions of the point it was in are left
out, and its part says so (``stopped``).

A study may report the runs of another (seed 000's Fig. 4 is Fig. 3's runs reported for their
retransmissions): ``as_study`` makes the merged run (of one run or several) that study's, after
checking that the two run the same points the same way (everything but name, title, report
and notes equal).

>>> _renumber("a host queue at points 0, 1, 4; seed-era TCP at point 2", {0: 10, 1: 11, 2: 12, 4: 14})
'a host queue at points 10, 11, 14; seed-era TCP at point 12'
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from clusterlab.errors import ConfigError

# Top-level keys that describe one sitting; kept per part.
PART_KEYS = ("git", "machine", "argv", "overrides", "started", "finished", "load_before", "load_after",
             "repetitions", "version")


def _renumber(text: str, new: dict[int, int]) -> str:
    def sub(m):
        nums = [int(x) for x in re.split(r",\s*", m.group(2))]
        return m.group(1) + ", ".join(str(new.get(n, n)) for n in nums)
    return re.sub(r"(\bpoints? )(\d+(?:,\s*\d+)*)", sub, text)


_AT_POINTS = re.compile(r"(.+?) at points? (\d+(?:,\s*\d+)*)(?:; |$)")


def _by_point(text: str, indexes) -> dict[int, str]:
    """Each point's description from a run's ``emulated`` text: the runner writes one that
    differs between points as "A at points 0, 2; B at points 1" (A and B may hold "; "
    themselves); any other text holds for every point of the run.

    >>> _by_point("tbf; a host queue at points 0, 2; atm at point 1", [0, 1, 2])
    {0: 'tbf; a host queue', 2: 'tbf; a host queue', 1: 'atm'}
    >>> _by_point("atm", [3, 4])
    {3: 'atm', 4: 'atm'}
    """
    out: dict[int, str] = {}
    matches = list(_AT_POINTS.finditer(text))
    if matches and matches[0].start() == 0 and matches[-1].end() == len(text) and all(
            a.end() == b.start() for a, b in zip(matches, matches[1:], strict=False)):
        for m in matches:
            for n in re.split(r",\s*", m.group(2)):
                out[int(n)] = m.group(1)
        if set(out) == set(indexes):
            return out
    return {i: text for i in indexes}


def _overrides(parts: list[dict]) -> dict:
    """The settings changed with --set, across parts: a value every part shares once, else each
    part's (the spec's own where a part did not change it), joined by ' + '."""
    keys = list(dict.fromkeys(k for p in parts for k in (p.get("overrides") or {})))
    out = {}
    for k in keys:
        vals = [str((p.get("overrides") or {}).get(k, "(the spec's)")) for p in parts]
        out[k] = vals[0] if len(set(vals)) == 1 else " + ".join(vals)
    return out


def _merge_monitor(dirs: list[Path], renumbered: list[dict[int, int]], dest: Path) -> None:
    """The parts' monitor samples in one table, points renumbered; none when a part has none
    (a record keeps no samples: the report then shows no per-point panels)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    paths = [d / "monitor.parquet" for d in dirs]
    if not all(p.exists() for p in paths):
        return
    tables = []
    for p, new in zip(paths, renumbered, strict=True):
        with pq.ParquetFile(p) as f:  # one file (read_table's dataset layer imports pandas)
            t = f.read()
        if "point" in t.column_names:
            pts = [new.get(x, x) for x in t.column("point").to_pylist()]
            t = t.set_column(t.column_names.index("point"), "point", pa.array(pts, t.schema.field("point").type))
        tables.append(t)
    pq.write_table(pa.concat_tables(tables, promote_options="default"), str(dest))


# What a study's report shows, not what it runs: two studies equal but for these run the same points.
PRESENTATION = ("name", "title", "report", "notes")


def _same_runs(source: str, target: str) -> dict:
    """The spec of study ``target`` (as a run's meta.json keeps it) when it runs what study
    ``source`` runs; otherwise a ConfigError saying what differs."""
    from clusterlab.experiments.studies import load

    a, b = load(source).to_dict(), load(target).to_dict()
    differ = sorted(k for k in set(a) | set(b) if k not in PRESENTATION and a.get(k) != b.get(k))
    if differ:
        raise ConfigError(f"--as {target}: it does not report the runs of {source} (its {', '.join(differ)} differ); "
                          "a study reports another's runs only where it runs the same points")
    return b


def merge_runs(run_dirs, out, as_study: str | None = None, finished_points: bool = False) -> Path:
    """Merge the complete runs ``run_dirs`` (run directories or records) of one study into the
    new run directory ``out`` (built beside it and renamed into place); returns ``out``. With
    ``as_study`` (one run is enough) the result is a run of that study, which must report the
    same runs (``_same_runs``). With ``finished_points`` a run that stopped early gives its
    finished points."""
    from clusterlab._atomic import check_output
    from clusterlab.experiments.kinds import said_per_point
    from clusterlab.experiments.runner import rows_table
    from clusterlab.report.study import load_run

    dirs = [Path(d) for d in run_dirs]
    if len(dirs) < (1 if as_study is not None else 2):
        raise ConfigError("merge needs at least two run directories (or one with --as)")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"{out}: exists and is not an empty directory (the merged run is written to a new one)")
    check_output(out.parent, "the merged run's parent directory", directory=True)
    runs = []
    for d in dirs:
        rows, meta = load_run(d)
        status = meta.get("status")
        if status != "complete":
            if not (finished_points and status in ("interrupted", "running")):
                raise ConfigError(f"{d}: status {status!r}: only complete runs are merged (--finished-points takes "
                                  "the finished points of an interrupted run)")
            # an interrupted run lists the point it was in too, started but without its seconds
            finished = [pm for pm in meta.get("points", []) if pm.get("seconds") is not None]
            done = {pm["index"] for pm in finished}
            if not done:
                raise ConfigError(f"{d}: status {status!r} and no point finished: nothing to merge")
            dropped = len([r for r in rows if r.get("point") not in done])
            rows = [r for r in rows if r.get("point") in done]
            meta = {**meta, "points": finished, "stopped": f"{status} after {len(done)} point{'s' if len(done) > 1 else ''}"
                    + (f"; {dropped} repetition{'s' if dropped > 1 else ''} of the next left out" if dropped else "")}
        if meta.get("quick"):
            raise ConfigError(f"{d}: a --quick run is a smoke test, not a part of a study")
        runs.append((d, rows, meta))
    names = {m.get("study") for _, _, m in runs}
    if len(names) != 1:
        raise ConfigError(f"the runs are of different studies ({', '.join(sorted(map(str, names)))}); merge runs of one")
    target_spec = _same_runs(next(iter(names)), as_study) if as_study is not None else None
    seen: dict[str, Path] = {}
    for d, _, meta in runs:
        for pm in meta.get("points", []):
            if pm["label"] in seen:
                raise ConfigError(f"point {pm['label']!r} is in both {seen[pm['label']]} and {d}: a merged run holds each "
                                  "point once (leave it out of one part with --set)")
            seen[pm["label"]] = d
    runs.sort(key=lambda r: r[2].get("started") or 0)
    newest = max(runs, key=lambda r: r[2].get("finished") or 0)[2]
    merged = {k: v for k, v in newest.items() if k not in ("points", "parts", "emulated")}
    points, rows, parts, emulated, renumbered = [], [], [], {}, []
    for d, rs, meta in runs:
        new = {}
        for pm in meta.get("points", []):
            new[pm["index"]] = len(points)
            points.append({**pm, "index": len(points)})
        for r in rs:
            if isinstance(r.get("point"), int):
                r = {**r, "point": new.get(r["point"], r["point"])}
            rows.append(r)
        own = {k: meta.get(k) for k in PART_KEYS} | {"run": str(d)}
        if meta.get("stopped"):  # its end: when its last finished point ended
            own["stopped"] = meta["stopped"]
            own["finished"] = own.get("finished") or max((pm.get("started") or 0) + (pm.get("seconds") or 0)
                                                         for pm in meta["points"])
        for part in meta.get("parts") or [own]:
            # a part that was itself merged keeps its own parts, their points renumbered
            parts.append({**part, "points": sorted(new[i] for i in part["points"]) if "points" in part
                          else sorted(new.values())})
        renumbered.append(new)
        for k, v in (meta.get("emulated") or {}).items():
            emulated.setdefault(k, {}).update(_by_point(_renumber(str(v), new), new.values()))
    # a part without a key (an older run) says nothing about its points for it
    merged["emulated"] = {k: said_per_point(by) for k, by in emulated.items()}
    merged.update(points=points, parts=parts, status="complete", repetitions=sum(p.get("repetitions") or 0 for p in parts),
                  started=min(p.get("started") or 0 for p in parts), finished=max(p.get("finished") or 0 for p in parts),
                  load_before=runs[0][2].get("load_before"), load_after=runs[-1][2].get("load_after"),
                  overrides=_overrides(parts), argv=None)
    merged["git"] = dict(newest.get("git") or {})
    if target_spec is not None and as_study != runs[0][2].get("study"):  # --as its own study changes nothing
        merged.update(study=as_study, title=target_spec["title"], reported_from=runs[0][2].get("study"),
                      spec={**(merged.get("spec") or {}), **{k: target_spec[k] for k in PRESENTATION}})
    failed = [pm["index"] for pm in points if pm.get("failed")]
    merged.pop("failed_points", None)
    if failed:
        merged["failed_points"] = failed
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        import pyarrow.csv as pcsv
        import pyarrow.parquet as pq

        tbl = rows_table(rows)
        pq.write_table(tbl, str(tmp / "table.parquet"))
        pcsv.write_csv(tbl, str(tmp / "table.csv"))
        _merge_monitor([d for d, _, _ in runs], renumbered, tmp / "monitor.parquet")
        (tmp / "meta.json").write_text(json.dumps(merged, indent=1, default=str) + "\n")
        if out.exists():
            out.rmdir()  # empty, checked above
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out
