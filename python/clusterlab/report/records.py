"""Records: one run of record per study, in ``results/<study>/`` (the repository's results
tree), and the at-a-glance view of where each study stands.

A record is a finished run reduced to what a reader needs: ``meta.json`` (provenance: commit,
date, machine, load, every setting, what was emulated), ``table.parquet`` (every repetition, one
compact file), ``report.md`` and the figures it shows (PNGs stored with a
64-colour palette: the plots' lines and text unchanged, a third of the bytes). The monitor's
raw samples (``monitor.parquet``) and the CSV copy of the table stay in the run directory.
Writing a record replaces the study's previous one (git keeps the history); ``results/README.md``
is regenerated from the records each time.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from clusterlab.errors import ConfigError

# What a record keeps of a run besides its figures.
# (report.html stays in the run directory: the same text as report.md, which renders where the
# records are read, and it was a tenth of the records' bytes.)
KEPT = ("meta.json", "report.md", "table.parquet")
PALETTE = 64  # colours a record's PNG keeps (matplotlib's figures use a handful plus anti-aliasing)


def _figures(report_md: str) -> list[str]:
    """The PNGs a report shows (``![...](name.png)``, the text may hold brackets), in order, each once.

    >>> _figures("![time [s] vs MAX [s]](fig1-scatter-seconds.png)\\n![a](attribution.png) ![b](fig1-scatter-seconds.png)")
    ['fig1-scatter-seconds.png', 'attribution.png']
    """
    return list(dict.fromkeys(re.findall(r"\]\(([^()\s/]+\.png)\)", report_md)))


def _compact_png(src: Path, dst: Path) -> None:
    from PIL import Image

    with Image.open(src) as im:
        im.convert("RGB").quantize(colors=PALETTE, method=Image.Quantize.MEDIANCUT).save(dst, "PNG", optimize=True)


def write_record(run_dir, root="results") -> Path:
    """Make the finished run in ``run_dir`` the record of its study: ``root/<study>/``, built
    beside it and swapped in, so a reader sees the old record or the new one, never a mix."""
    from clusterlab._atomic import check_output
    from clusterlab.report.study import load_run

    d = Path(run_dir)
    rows, meta = load_run(d)
    name = meta.get("study")
    if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name):
        raise ConfigError(f"{d / 'meta.json'}: 'study' must name a study (lower-case letters, digits, '-'), got {name!r}")
    if meta.get("status") != "complete":
        raise ConfigError(f"{d}: status {meta.get('status')!r}: only a complete run can be a record")
    if meta.get("quick"):
        raise ConfigError(f"{d}: a --quick run is a smoke test, not a record")
    if not (d / "report.md").exists():
        raise ConfigError(f"{d}: no report.md (clusterlab experiment report {d} renders it)")
    # a record made a record again (re-rendered with `clusterlab report`) stays its run's record
    run = meta.get("record_of") or d.name
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    check_output(root, "records directory", directory=True)
    dest = root / name
    tmp = root / f".{name}.tmp-{os.getpid()}"
    old = root / f".{name}.old-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        for f in KEPT:
            if f == "table.parquet" and not (d / f).exists():
                _table_parquet(rows, tmp / f)
            elif f == "table.parquet":
                compact_table(d / f, tmp / f)
            elif f == "meta.json":
                compact_meta(d / f, tmp / f, run)
            elif (d / f).exists():
                shutil.copyfile(d / f, tmp / f)
        md = (d / "report.md").read_text()
        if not _keeps_panels(name):
            md = _without_panels(md)
        md = _with_record_note(md, run)
        with open(tmp / "report.md", "w") as f:
            f.write(md)
        for png in _figures(md):
            if (d / png).exists():
                _compact_png(d / png, tmp / png)
        if dest.exists():
            os.rename(dest, old)
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not dest.exists():
            os.rename(old, dest)
        raise
    shutil.rmtree(old, ignore_errors=True)
    write_readme(root)
    return dest


def _keeps_panels(name: str) -> bool:
    """Whether the record keeps the monitor's per-point panels: only where the study's module
    says they are the paper's figure (``RECORD_PANELS = True``, seed001-fig12: Figs. 12-15 are
    Ganglia graphs). Elsewhere they are diagnostics, 50-70 KB each, drawn again from the run's
    ``monitor.parquet``."""
    import importlib

    from clusterlab.experiments.studies import module

    try:
        return bool(getattr(importlib.import_module(module(name)), "RECORD_PANELS", False))
    except ConfigError:  # a run of a study no longer registered: keep its report as it is
        return True


def _without_panels(md: str) -> str:
    """The report without the monitor's per-point panel images (their table of means stays).

    >>> print(_without_panels("## The monitor's panels\\n\\n| a |\\n\\n![point 0: x](monitor-0-storage.png)\\n\\n## Points"))
    ## The monitor's panels
    <BLANKLINE>
    | a |
    <BLANKLINE>
    (The panels of each point are not kept in this record: the run's monitor.parquet has the samples.)
    <BLANKLINE>
    ## Points
    """
    lines = md.split("\n")
    out, dropped = [], False
    for line in lines:
        if re.fullmatch(r"!\[[^\n]*\]\(monitor-\d+-storage\.png\)", line.strip()):
            if not dropped:
                out.append("(The panels of each point are not kept in this record: the run's monitor.parquet has "
                           "the samples.)")
                dropped = True
            continue
        if dropped and line == "" and out and out[-1] == "":
            continue
        out.append(line)
    return "\n".join(out)


def _with_record_note(md: str, run: str) -> str:
    """The report with a line under its title saying it is a record and what stayed behind.

    >>> once = _with_record_note("# seed000-fig3\\n\\ntext", "20260101-120000")
    >>> _with_record_note(once, "20260101-120000") == once
    True
    >>> print(once)
    # seed000-fig3
    <BLANKLINE>
    The record of this study: run `20260101-120000`. Kept here: this report, its figures, `table.parquet` (every repetition) and `meta.json` (provenance); the CSV table and the monitor's samples (`monitor.parquet`) stayed in the run directory.
    <BLANKLINE>
    text
    """
    note = (f"The record of this study: run `{run}`. Kept here: this report, its figures, `table.parquet` (every "
            "repetition) and `meta.json` (provenance); the CSV table and the monitor's samples (`monitor.parquet`) "
            "stayed in the run directory.")
    # a record's own report made a record again: its old note goes (the new one says the same run)
    md = re.sub(r"\n\nThe record of this study: run `[^`]*`\. Kept here:[^\n]*\n", "\n", md, count=1)
    title, sep, rest = md.partition("\n")
    if not title.startswith("# "):
        return note + "\n\n" + md
    return title + "\n\n" + note + "\n" + (rest if rest.startswith("\n") else "\n" + rest)


def compact_meta(src: Path, dst: Path, run: str | None = None) -> None:
    """The run's meta.json as the record keeps it: the same content on one line (a 100-host
    point's per-host settings made the indented form 30% spaces), with the run's name
    (``record_of``)."""
    with open(src) as f:
        meta = json.load(f)
    if run is not None:
        meta["record_of"] = run
    with open(dst, "w") as f:
        json.dump(meta, f, separators=(",", ":"), ensure_ascii=False)
        f.write("\n")


def compact_table(src: Path, dst: Path) -> None:
    """The run's table as the record keeps it: the same rows, schema and metadata, compressed
    harder than a run writes it (zstd 19: a study's per-rank lists halve; records stay small in git)."""
    import pyarrow.parquet as pq

    with pq.ParquetFile(src) as f:  # one file (read_table's dataset layer imports pandas)
        pq.write_table(f.read(), dst, compression="zstd", compression_level=19)


def _table_parquet(rows: list[dict], path: Path) -> None:
    """A run kept with only its CSV table: the same rows as Parquet (what ``load_run`` reads)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path, compression="zstd")


# --- what each record says -----------------------------------------------------------------------
def claim_verdicts(meta: dict, rows: list[dict], papers: dict | None = None) -> list[dict]:
    """Each of the seed's claims the run's report judges, per switch / TCP stack when the run
    compares them: ``{"figure", "claim", "where", "ours", "verdict"}`` with verdict ``agrees``,
    ``differs``, ``not judged`` (the paper gives nothing to compare, or most points were
    CPU-bound so the times measure the CPU) or ``error`` (the rule failed on these rows)."""
    from clusterlab.report.study import judged_claims

    if papers is None:
        from clusterlab.experiments.studies import papers as all_papers

        papers = all_papers()
    out = []
    for p in (meta.get("spec") or {}).get("report", []):
        if not isinstance(p, dict) or p.get("kind") != "seed_numbers":
            continue
        fig = papers.get(p.get("seed"), {}).get(p.get("figure"))
        if fig is None:
            continue
        for c in judged_claims(fig, meta, rows, catch=True):
            out.append({"figure": f"Seed {p['seed']}, {p['figure']}", "claim": c["claim"], "where": c["where"],
                        "ours": c["ours"], "verdict": "not judged" if c["verdict"] == "CPU-bound" else c["verdict"]})
    return out


def _when(meta: dict) -> str:
    from clusterlab.report.study import _utc

    return _utc(meta.get("finished") or meta.get("started"))


def read_record(path: Path) -> dict:
    """One record's summary: study, date, commit, status, repetitions, load, claims."""
    from clusterlab.report.study import load_run

    rows, meta = load_run(path)
    git = meta.get("git") or {}
    loads = [x[0] for x in (meta.get("load_before"), meta.get("load_after")) if isinstance(x, list) and x]
    # A run merged from parts (report.merge): each part's commit; the oldest is the one the
    # record is checked against for staleness (anything changed since any part ran).
    parts = [{"commit": (p.get("git") or {}).get("revision"), "dirty": bool((p.get("git") or {}).get("dirty")),
              "date": _when(p)} for p in meta.get("parts") or []]
    first = parts[0] if parts else {"commit": git.get("revision"), "dirty": bool(git.get("dirty"))}
    return {"study": meta.get("study", path.name), "path": str(path), "date": _when(meta), "parts": parts,
            "commit": first["commit"], "dirty": first["dirty"], "status": meta.get("status"),
            "repetitions": meta.get("repetitions", len(rows)), "points": len(meta.get("points", [])),
            "overrides": meta.get("overrides") or {}, "load": loads, "claims": claim_verdicts(meta, rows)}


def records(root="results") -> dict[str, dict]:
    """{study: its record's summary} for every record under ``root``."""
    root = Path(root)
    if not root.is_dir():
        return {}
    return {d.name: read_record(d) for d in sorted(root.iterdir())
            if d.is_dir() and not d.name.startswith(".") and (d / "meta.json").exists()}


def _verdict_summary(claims: list[dict]) -> str:
    if not claims:
        return "(no seed claims)"
    parts = []
    for c in claims:
        v = {"agrees": "agrees", "differs": "**differs**"}.get(c["verdict"], c["verdict"])
        parts.append(f"{c['figure'].partition(', ')[2]}: {c['claim'][:60]}{'...' if len(c['claim']) > 60 else ''}"
                     + (f" ({c['where']})" if c["where"] else "") + f": {v}")
    return "<br>".join(parts)


def write_readme(root="results") -> Path:
    """``root/README.md``: every record with its date, commit and each claim's verdict."""
    from clusterlab._atomic import atomic_open

    root = Path(root)
    recs = records(root)
    lines = ["# Results of record", "",
             "One record per study: the run of record's report, figures, table of every repetition and provenance "
             "(`meta.json`). Generated by `clusterlab experiment record` (or `run --record`), which replaces a "
             "study's record; `clusterlab experiment status` also says which records are stale (code they depend on "
             "changed since their commit). Verdicts are the report's: the seed's claim against ours, per switch "
             "and TCP stack where the study compares them.", "",
             "| study | date | commit | points, repetitions | load before -> after | claims |", "|---|---|---|---|---|---|"]
    for name, r in recs.items():
        load = " -> ".join(f"{x:g}" for x in r["load"]) if r["load"] else "?"
        commit = "<br>".join(f"{(p['commit'] or '?')[:10]}{' (dirty)' if p['dirty'] else ''}"
                             + (f" ({p['date']})" if r["parts"] else "") for p in (r["parts"] or [r]))
        settings = "".join(f"<br>`{k}={v}`" for k, v in r["overrides"].items())
        lines.append(f"| [{name}]({name}/report.md){settings} | {r['date']} | {commit} | {r['points']} points, "
                     f"{r['repetitions']} reps | {load} | {_verdict_summary(r['claims'])} |")
    path = root / "README.md"
    with atomic_open(path) as f:
        f.write("\n".join(lines) + "\n")
    return path


# --- status: is each record still true of the code? ----------------------------------------------
def _repo_root(start: Path) -> Path | None:
    try:
        r = subprocess.run(["git", "-C", str(start), "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                           timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Path(r.stdout.strip()) if r.returncode == 0 else None


def dependencies(name: str) -> list[Path]:
    """The source files study ``name``'s results depend on: its module, every clusterlab module
    it imports (transitively, imports inside functions included; the report and the CLI, which
    only render, left out) and, when the compiled core is among them, the Rust crates.

    >>> deps = [p.name for p in dependencies("seed000-fig3")]
    >>> "fig3.py" in deps and "broadcast.py" in deps and "crates" in deps
    True
    """
    import clusterlab
    from clusterlab.experiments.studies import module

    seen: dict[str, Path] = {}
    todo = [module(name)]
    rust = False
    while todo:
        mod = todo.pop()
        if mod in seen or mod.startswith(("clusterlab.report", "clusterlab.cli", "clusterlab.__main__")):
            continue
        if mod == "clusterlab._core":
            rust = True
            continue
        found = _imports(mod)
        if found is not None:
            seen[mod], targets = found
            todo += targets
    files = sorted(set(seen.values()))
    if rust:
        repo = Path(clusterlab.__file__).resolve().parents[2]
        files += [p for p in (repo / "crates", repo / "Cargo.lock") if p.exists()]
    return files


@functools.cache
def _imports(mod: str) -> tuple[Path, tuple[str, ...]] | None:
    """Module ``mod``'s source file and the clusterlab names it imports (each ``from X import
    Y`` as both X and X.Y: Y may be a submodule); None when it has no Python source."""
    import ast

    spec = _find(mod)
    if spec is None or not (spec.origin or "").endswith(".py"):
        return None
    path = Path(spec.origin)
    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    out: list[str] = []
    for node in _statements(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name.startswith("clusterlab")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1
                parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            if base.startswith("clusterlab"):
                out += [base] + [f"{base}.{a.name}" for a in node.names]
    return path, tuple(out)


def _statements(tree):
    """Every statement of ``tree``, nested ones included (an import is a statement: walking
    only statement bodies, not expressions, is ``ast.walk``'s answer at a fifth of its time)."""
    import ast

    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            for child in getattr(node, field, ()) or ():
                if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
                    todo.append(child)


def _find(mod: str):
    import importlib.util

    try:
        return importlib.util.find_spec(mod)
    except (ImportError, ValueError):
        return None


def staleness(commit: str | None, files: list[Path], cache: dict | None = None) -> dict:
    """Which of ``files`` changed between ``commit`` and the working tree (committed or not):
    ``{"stale": bool | None, "changed": [paths]}``; None when git cannot tell (no repository,
    a file outside it, or the commit is not in it). ``cache``: a dict shared by the calls of one
    status() (the repository and each commit's diff asked of git once, not once per study)."""
    if not commit or not files:
        return {"stale": None, "changed": [], "why": "the record names no commit"}
    cache = {} if cache is None else cache
    start = files[0].parent if files[0].is_file() else files[0]
    if ("top", start) not in cache:
        cache["top", start] = _repo_root(start)
    top = cache["top", start]
    if top is None:
        return {"stale": None, "changed": [], "why": "not in a git repository"}
    top_r, resolved = top.resolve(), [f.resolve() for f in files]
    outside = [f for f, r in zip(files, resolved, strict=True) if not r.is_relative_to(top_r)]
    if outside:  # git cannot say whether a file outside the repository changed since the commit
        return {"stale": None, "changed": [], "why": f"{outside[0]} is not in the git repository {top}"}
    rel = [str(r.relative_to(top_r)) for r in resolved]
    # With rename detection: a file only moved (R100: the study folders were made by moving
    # files) did not change what the record measured. Over the top-level folders our files are
    # in, not the whole tree (the records' JSON and images took 0.1-0.4 s per commit), so a move
    # within them is still seen; a file at the top (Cargo.lock): every top-level file (`*`).
    spec = tuple(sorted({x.split("/", 1)[0] if "/" in x or r.is_dir() else ":(glob)*"
                         for x, r in zip(rel, resolved, strict=True)}))
    if ("diff", top_r, commit, spec) not in cache:
        cache["diff", top_r, commit, spec] = subprocess.run(
            ["git", "-C", str(top), "diff", "--name-status", "-M", commit, "--", *spec],
            capture_output=True, text=True, timeout=60)
    r = cache["diff", top_r, commit, spec]
    if r.returncode != 0:
        return {"stale": None, "changed": [], "why": f"git cannot compare with {commit[:10]} ({r.stderr.strip()[:80]})"}
    wanted = set(rel)
    moved_only, touched = set(), set()
    for line in r.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) < 2:
            continue
        (moved_only if parts[0] == "R100" else touched).add(parts[-1])
    # nearest first: the study's own folder, then the rest of the studies' layer, then the core
    dirs = tuple(w.rstrip("/") + "/" for w in wanted)  # a directory (crates/) covers every file under it
    changed = sorted((x for x in touched - moved_only if x in wanted or x.startswith(dirs)),
                     key=lambda x: (0 if "/experiments/studies/" in x else 1 if "/experiments/" in x else 2, x))
    return {"stale": bool(changed), "changed": changed, "why": ""}


def status(root="results", only: list[str] | None = None) -> list[dict]:
    """Every study (or those named in ``only``): its record, whether the record is stale, and
    each claim's verdict."""
    from clusterlab.experiments.studies import module, names

    all_names = names()
    for n in only or []:
        module(n)  # an unknown name: ConfigError naming the known ones
    recs = records(root)
    out, cache = [], {}
    for n in only or all_names:
        rec = recs.get(n)
        entry = {"study": n, "record": rec}
        if rec is not None:
            entry.update(staleness(rec["commit"], dependencies(n), cache))
        out.append(entry)
    return out


def status_json(entries: list[dict]) -> str:
    return json.dumps(entries, indent=1, default=str)
