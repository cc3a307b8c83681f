"""One record per study: ``run --record`` / ``record`` replace results/<study>/ (report, figures,
table, provenance) only with a complete run, regenerate results/README.md, and ``status``
says for every study its record, whether the code it depends on moved since, and each claim's
verdict."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow.parquet as pq
from click.testing import CliRunner

from clusterlab.cli import cli
from clusterlab.errors import ConfigError
from clusterlab.report import records
from tests.experiments.test_study_folder import toy_seed  # noqa: F401 - the fixture


def _run(*args):
    return CliRunner().invoke(cli, list(args), standalone_mode=False)


def test_run_record_replaces_the_record_and_lists_it(toy_seed, tmp_path):  # noqa: F811
    res = tmp_path / "results"
    r = _run("experiment", "run", "seed999-fig1", "--runs", str(tmp_path / "runs"), "--record", "--records", str(res))
    assert r.exception is None, r.output
    rec = res / "seed999-fig1"
    assert sorted(p.name for p in rec.iterdir()) == ["meta.json", "report.md", "table.parquet"]
    assert pq.read_table(rec / "table.parquet").num_rows == 4  # 2 points x 2 repetitions
    assert "The record of this study: run " in (rec / "report.md").read_text()
    first = json.loads((rec / "meta.json").read_text())["started"]
    readme = (res / "README.md").read_text()
    assert "[seed999-fig1](seed999-fig1/report.md)" in readme and "every run takes some time: agrees" in readme

    # a second run of record replaces the first, leaving nothing half-written beside it
    r = _run("experiment", "run", "seed999-fig1", "--runs", str(tmp_path / "runs"), "--record", "--records", str(res))
    assert r.exception is None, r.output
    assert json.loads((rec / "meta.json").read_text())["started"] != first
    assert sorted(p.name for p in res.iterdir()) == ["README.md", "seed999-fig1"]
    assert len(list((tmp_path / "runs" / "seed999-fig1").iterdir())) == 2  # the runs themselves stay

    r = _run("experiment", "status", "seed999-fig1", "--records", str(res), "--json")
    assert r.exception is None, r.output
    [entry] = json.loads(r.output)
    assert entry["study"] == "seed999-fig1" and entry["record"]["claims"][0]["verdict"] == "agrees"
    assert entry["stale"] is None  # the toy seed is not in a git repository: git cannot tell
    r = _run("experiment", "status", "seed999-fig1", "--records", str(res))
    assert "seed999-fig1" in r.output and "agrees" in r.output and "every run takes some time" in r.output



def test_a_record_re_rendered_and_recorded_again_stays_its_runs_record(toy_seed, tmp_path):  # noqa: F811
    import shutil

    res = tmp_path / "results"
    r = _run("experiment", "run", "seed999-fig1", "--runs", str(tmp_path / "runs"), "--record", "--records", str(res))
    assert r.exception is None, r.output
    [run] = (tmp_path / "runs" / "seed999-fig1").iterdir()
    copy = tmp_path / "copy"
    shutil.copytree(res / "seed999-fig1", copy)
    assert _run("report", str(copy)).exception is None  # the report rendered again by today's code
    r = _run("experiment", "record", str(copy), "--records", str(res))
    assert r.exception is None, r.output
    md = (res / "seed999-fig1" / "report.md").read_text()
    assert md.count("The record of this study: run ") == 1 and f"run `{run.name}`" in md
    assert json.loads((res / "seed999-fig1" / "meta.json").read_text())["record_of"] == run.name

def test_only_a_complete_full_run_becomes_a_record(toy_seed, tmp_path):  # noqa: F811
    res = tmp_path / "results"
    r = _run("experiment", "run", "seed999-fig1", "--quick", "--record", "--records", str(res))
    assert isinstance(r.exception, ConfigError) and "smoke test" in str(r.exception)
    _run("experiment", "run", "seed999-fig1", "--runs", str(tmp_path / "runs"))
    run_dir = next((tmp_path / "runs" / "seed999-fig1").iterdir())
    meta = json.loads((run_dir / "meta.json").read_text())
    (run_dir / "meta.json").write_text(json.dumps({**meta, "status": "interrupted"}))
    r = _run("experiment", "record", str(run_dir), "--records", str(res))
    assert isinstance(r.exception, ConfigError) and "only a complete run" in str(r.exception)
    assert not res.exists() or not (res / "seed999-fig1").exists()


def test_status_of_an_unknown_study_is_one_line_exit_2(tmp_path):
    r = subprocess.run([sys.executable, "-m", "clusterlab", "experiment", "status", "nope", "--records", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "no study named 'nope'" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not r.stdout


def test_a_record_is_stale_when_a_file_it_depends_on_changed(tmp_path):
    def git(*a):
        subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True)

    git("init", "-q")
    dep, other = tmp_path / "dep.py", tmp_path / "other.py"
    dep.write_text("x = 1\n")
    other.write_text("y = 1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    commit = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert records.staleness(commit, [dep]) == {"stale": False, "changed": [], "why": ""}
    other.write_text("y = 2\n")
    assert records.staleness(commit, [dep])["stale"] is False  # not a dependency
    dep.write_text("x = 2\n")
    assert records.staleness(commit, [dep]) == {"stale": True, "changed": ["dep.py"], "why": ""}
    assert records.staleness("0" * 40, [dep])["stale"] is None
    dep.write_text("x = 1\n")  # back as recorded, then only moved: what the record measured is unchanged
    git("mv", "dep.py", "moved.py")
    assert records.staleness(commit, [tmp_path / "moved.py"]) == {"stale": False, "changed": [], "why": ""}
    # a dependency that is a directory (the Rust crates): any file changed under it
    crate = tmp_path / "crates" / "core"
    crate.mkdir(parents=True)
    (crate / "lib.rs").write_text("fn main() {}\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "two")
    commit = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert records.staleness(commit, [tmp_path / "crates"])["stale"] is False
    (crate / "lib.rs").write_text("fn main() { }\n")
    assert records.staleness(commit, [tmp_path / "crates"]) == {"stale": True, "changed": ["crates/core/lib.rs"], "why": ""}


def test_a_study_depends_on_its_module_workload_and_core():
    deps = {p.as_posix().split("python/clusterlab/")[-1] for p in records.dependencies("seed000-fig4")}
    for f in ("experiments/studies/seed000/fig4.py", "experiments/studies/seed000/fig3.py",
              "experiments/studies/seed000/__init__.py", "experiments/workloads/broadcast.py",
              "bench/alltoall_broadcast.py", "experiments/spec.py"):
        assert f in deps, f
    assert not [d for d in deps if d.startswith(("report/", "cli/"))]
    assert any(d.endswith("crates") for d in deps)


def test_runs_of_one_study_in_parts_merge_into_one_record(toy_seed, tmp_path):  # noqa: F811
    """A study run in two sittings (one point each) merges into one run: every point once,
    renumbered, each part's provenance kept and told; the merge becomes the record."""
    runs = tmp_path / "runs"
    for size in ("8", "64"):
        r = _run("experiment", "run", "seed999-fig1", "--set", f"sizes={size}", "-o", str(runs / size))
        assert r.exception is None, r.output
    out, res = tmp_path / "merged", tmp_path / "results"
    r = _run("experiment", "merge", str(runs / "8"), str(runs / "64"), "-o", str(out), "--record", "--records", str(res))
    assert r.exception is None, r.output
    meta = json.loads((out / "meta.json").read_text())
    assert [p["index"] for p in meta["points"]] == [0, 1] and meta["repetitions"] == 4
    assert [p["points"] for p in meta["parts"]] == [[0], [1]] and meta["overrides"] == {"sizes": "8 + 64"}
    rows = pq.read_table(out / "table.parquet").to_pylist()
    assert sorted({(r["point"], str(r["sizes"])) for r in rows}) == [(0, "8"), (1, "64")]
    text = (res / "seed999-fig1" / "report.md").read_text()
    assert "Merged from 2 runs" in text and "points 0:" in text and "points 1:" in text and "(agrees)" in text

    # the same point in two parts, an unfinished part, a taken output: one line each, nothing written
    r = _run("experiment", "merge", str(runs / "8"), str(runs / "8"), "-o", str(tmp_path / "m2"))
    assert isinstance(r.exception, ConfigError) and "is in both" in str(r.exception)
    r = _run("experiment", "merge", str(runs / "8"), str(runs / "64"), "-o", str(out))
    assert isinstance(r.exception, ConfigError) and "not an empty directory" in str(r.exception)
    meta8 = json.loads((runs / "8" / "meta.json").read_text())
    (runs / "8" / "meta.json").write_text(json.dumps({**meta8, "status": "interrupted"}))
    r = _run("experiment", "merge", str(runs / "8"), str(runs / "64"), "-o", str(tmp_path / "m3"))
    assert isinstance(r.exception, ConfigError) and "only complete runs" in str(r.exception)
    assert not (tmp_path / "m2").exists() and not (tmp_path / "m3").exists()
