"""The runner writes a tidy table, the monitor table and meta.json as it goes (Ctrl-C keeps the
finished repetitions); the reporter draws them; the CLI parses and prints."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from clusterlab.cli import cli
from clusterlab.errors import ConfigError
from clusterlab.experiments import Grid, InProcess, Loopback, Study
from clusterlab.experiments import workloads as wl
from clusterlab.experiments.runner import rows_table, run_study
from clusterlab.experiments.spec import Workload


def _study(**kw):
    return Study(name="pp", cluster=InProcess(ranks=2), workload=wl.pingpong(sizes="8,64", trial_time=0.001),
                 grid=Grid(sizes=["8", "8,64"]), repeat=2, warmup=1, monitor=False, **kw)


def test_run_writes_table_and_meta(tmp_path):
    res = run_study(_study(), tmp_path / "run")
    d = tmp_path / "run"
    rows = pq.read_table(d / "table.parquet").to_pylist()
    assert res.status == "complete" and len(rows) == len(res.rows) == 2 * 1 + 2 * 2  # sizes x reps
    assert {r["point"] for r in rows} == {0, 1} and {r["rep"] for r in rows} == {0, 1}
    assert all(r["study"] == "pp" and r["cluster"] == "inprocess" and r["seconds"] > 0 for r in rows)
    assert (d / "table.csv").read_text().splitlines()[0].startswith('"study","point","label","check","rep","seconds"')
    meta = json.loads((d / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["repetitions"] == 6 and len(meta["points"]) == 2
    for k in ("version", "git", "machine", "load_before", "load_after", "spec", "emulated"):
        assert k in meta
    assert meta["points"][0]["settings"]["sizes"] == "8" and meta["points"][0]["dilation"] == 1.0


def _fake(reps_before_interrupt):
    def execute(session, params, reps, warmup):
        for i in range(reps):
            if i == reps_before_interrupt:
                raise KeyboardInterrupt
            yield {"rep": i, "seconds": 0.5 + i, "time_compute": 0.3, "time_rto_wait": 0.2 + i,
                   "seconds_by_pass": [0.1, 0.4 + i], "retransmissions_by_pass": [0, i]}
    return execute


def test_ctrl_c_keeps_the_finished_repetitions(tmp_path, monkeypatch):
    monkeypatch.setattr(wl, "get", lambda name: _fake(3))
    s = Study(name="fake", cluster=InProcess(ranks=1), workload=Workload("fake", {"n": 1}), repeat=5, monitor=False)
    with pytest.raises(KeyboardInterrupt):
        run_study(s, tmp_path)
    rows = pq.read_table(tmp_path / "table.parquet").to_pylist()
    assert [r["rep"] for r in rows] == [0, 1, 2]
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["status"] == "interrupted" and meta["repetitions"] == 3
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]  # nothing half-written


def test_report_draws_every_column_the_workload_returns(tmp_path, monkeypatch):
    from clusterlab.experiments.spec import per_pass, scatter
    from clusterlab.report.study import render

    monkeypatch.setattr(wl, "get", lambda name: _fake(99))
    s = Study(name="fake", cluster=InProcess(ranks=1), workload=Workload("fake", {"n": 1}),
              grid=Grid(n=[1, 2]), repeat=3, monitor=False,
              report=[scatter(x="n", y="seconds"), per_pass(y="retransmissions_by_pass", x="n")])
    run_study(s, tmp_path)
    r = render(tmp_path)
    assert r["pngs"] == ["fig1-scatter-seconds.png", "fig2-per_pass-retransmissions_by_pass.png", "attribution.png"]
    md = (tmp_path / "report.md").read_text()
    assert "## Points" in md and "## What was emulated" in md and "status **complete**" in md
    assert all((tmp_path / p).stat().st_size > 5000 for p in r["pngs"])
    assert "<table>" in (tmp_path / "report.html").read_text()


def test_rows_table_keeps_lists_and_mixed_columns():
    t = rows_table([{"a": 1, "b": [1, 2], "c": "x"}, {"a": 2.5, "b": [3], "c": 4}])
    assert t.column("a").to_pylist() == [1.0, 2.5]
    assert t.column("b").to_pylist() == ["[1, 2]", "[3]"] and t.column("c").to_pylist() == ["x", "4"]


def test_local_broadcast_on_loopback_ranks(tmp_path):
    s = Study(name="b", cluster=Loopback(ranks=3), workload=wl.alltoall_broadcast(size="10KB"), repeat=2,
              warmup=0, monitor=False)
    res = run_study(s, tmp_path)
    assert len(res.rows) == 2 and all(r["seconds"] > 0 and r["ranks"] == 3 for r in res.rows)


def test_cli_list_dry_run_and_errors(tmp_path):
    r = CliRunner().invoke(cli, ["experiment", "list"])
    assert r.exit_code == 0 and "seed000-fig3" in r.output and "testbed" in r.output
    r = CliRunner().invoke(cli, ["experiment", "run", "seed000-fig3", "--dry-run", "--set", "rto_min=5ms"])
    assert r.exit_code == 0, r.output
    assert "k=10" in r.output and "every setting accepted" in r.output
    r = CliRunner().invoke(cli, ["experiment", "run", "seed000-fig3", "--dry-run", "--set", "dilation=1"],
                           standalone_mode=False)
    assert isinstance(r.exception, ConfigError) and "dilation 1 cannot express it" in str(r.exception)
    r = CliRunner().invoke(cli, ["experiment", "run", "nope"], standalone_mode=False)
    assert isinstance(r.exception, ConfigError) and "no study named 'nope'" in str(r.exception)
    r = CliRunner().invoke(cli, ["experiment", "report", str(tmp_path)], standalone_mode=False)
    assert isinstance(r.exception, ConfigError) and "no meta.json" in str(r.exception)
    r = CliRunner().invoke(cli, ["report", str(tmp_path)], standalone_mode=False)
    assert isinstance(r.exception, ConfigError) and "no meta.json, monitor.parquet" in str(r.exception)


def test_cli_runs_a_study_and_reports(tmp_path, monkeypatch):
    import clusterlab.experiments.studies as studies

    monkeypatch.setattr(studies, "load", lambda name: _study(report=()))
    monkeypatch.setattr(studies, "names", lambda: ["pp"])
    import clusterlab.experiments as ex

    monkeypatch.setattr(ex, "load", lambda name: _study(report=()))
    r = CliRunner().invoke(cli, ["experiment", "run", "pp", "--runs", str(tmp_path), "--set", "repeat=1"])
    assert r.exit_code == 0, r.output
    run_dir = next((tmp_path / "pp").iterdir())
    assert (run_dir / "report.md").exists() and "(complete)" in r.output
    assert json.loads((run_dir / "meta.json").read_text())["overrides"] == {"repeat": "1"}


def test_a_study_report_ends_with_each_points_fidelity_line_and_diagnosis(tmp_path):
    """Issue 27: report.md's last section is the diagnosis, each point's block opening with its
    fidelity line, and ``report`` / ``experiment report`` end their output with them, after the
    monitor's summary of the last point."""
    d = tmp_path / "run"
    run_study(Study(name="pp", cluster=InProcess(ranks=2), workload=wl.pingpong(sizes="8,64", trial_time=0.001),
                    grid=Grid(sizes=["8", "8,64"]), repeat=1, warmup=0, monitor=True), d)
    assert (d / "monitor.parquet").exists()
    for args in (["report", str(d)], ["experiment", "report", str(d)]):
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 0, r.output
        lines = r.output.strip().splitlines()
        want = ["sizes=8: fidelity: ", "diagnosis: sizes=8: ", "sizes=8,64: fidelity: ", "diagnosis: sizes=8,64: "]
        assert all(ln.startswith(w) for ln, w in zip(lines[-4:], want, strict=True)), lines[-5:]
        md = (d / "report.md").read_text()
        last = md.split("\n## ")[-1]
        assert last.startswith("Diagnosis\n") and last.count("```text\nfidelity: ") == 2, last


def test_report_without_matplotlib_is_one_line(tmp_path, monkeypatch):
    import sys

    run_study(_study(), tmp_path)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    r = CliRunner().invoke(cli, ["report", str(tmp_path)], standalone_mode=False)
    assert isinstance(r.exception, ConfigError) and "pip install" in str(r.exception)


def test_replay_validation_line_for_the_report(tmp_path):
    import json

    from clusterlab.experiments.runner import replay_validation

    p = tmp_path / "replay_validation.json"
    p.write_text(json.dumps({"compute": "spin", "machine": {"cpus": 2}, "finished": "x", "points": [
        {"hosts": 4, "replay_over_real": 1.04, "within_15pct": True, "same_bytes_per_pass": True,
         "real": [{"load": 3.0}]},
        {"hosts": 16, "replay_over_real": 0.8, "within_15pct": False, "same_bytes_per_pass": True,
         "real": [{"load": 9.0}]}]}))
    line = replay_validation(p)
    assert "4 hosts 1.04, 16 hosts 0.80 (outside 15%)" in line and "load average 3-9 on 2 CPUs" in line
    assert "no validation results" in replay_validation(tmp_path / "missing.json")


def test_a_job_that_fails_at_one_point_fails_that_point_not_the_study(tmp_path, monkeypatch):
    """A sweep into a regime where the job cannot finish (a rank's connection timed out) records
    the failure at that point and goes on; the report names it; a tool error still stops the run."""
    from clusterlab.rendezvous.errors import PeerFailure
    from clusterlab.report.study import render

    def execute(session, params, reps, warmup):
        for i in range(reps):
            if params["n"] == 2 and i == 1:
                raise PeerFailure(3, "connection error: Connection timed out (os error 110)")
            yield {"rep": i, "seconds": 0.5 + i}

    monkeypatch.setattr(wl, "get", lambda name: execute)
    s = Study(name="fake", cluster=InProcess(ranks=1), workload=Workload("fake", {"n": 1}),
              grid=Grid(n=[1, 2, 3]), repeat=3, monitor=False)
    res = run_study(s, tmp_path)
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert res.status == "complete" and meta["failed_points"] == [1] and meta["repetitions"] == 3 + 1 + 3
    assert "after 1 repetition: rank 3 failed" in meta["points"][1]["failed"]
    failed = [r for r in pq.read_table(tmp_path / "table.parquet").to_pylist() if r.get("failed")]
    assert [(r["point"], r["seconds"]) for r in failed] == [(1, None)]
    render(tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "7 repetitions" in md and "The job failed at 1 point" in md and "**failed** after 1 repetition" in md

    def broken(session, params, reps, warmup):
        raise RuntimeError("a bug in the tool")
        yield

    monkeypatch.setattr(wl, "get", lambda name: broken)
    with pytest.raises(RuntimeError):
        run_study(s, tmp_path / "b")
    assert json.loads((tmp_path / "b" / "meta.json").read_text())["status"] == "failed"


@pytest.mark.parametrize("args, match", [
    (["local-speedup"], "study local-speedup has no testbed point to dilate"),
    (["seed001-fig8", "--quick"], "computes for real, and a dilated rerun would not slow its computation down"),
    (["seed000-fig6", "--quick", "--set", "compute=real", "--set", "dilation=1",
      "--set", "timers=default (MIN 200 ms / MAX 60 s)"], "computes for real.*--set compute=replay replays it"),
    (["broadcast-incast", "--quick", "--set", "monitor=false"], "--auto-dilation needs the monitor"),
    (["seed000-fig3", "--quick", "--max-dilation", "1"], "--max-dilation 1 is below the starting dilation"),
])
def test_auto_dilation_refuses_what_it_cannot_rerun(args, match, tmp_path):
    r = CliRunner().invoke(cli, ["experiment", "run", *args, "--auto-dilation", "--runs", str(tmp_path)],
                           standalone_mode=False)
    assert isinstance(r.exception, ConfigError) and r.exception.args[0].count("\n") == 0
    import re

    assert re.search(match, str(r.exception)), str(r.exception)
    assert not any(tmp_path.iterdir())  # refused before anything ran
    r = CliRunner().invoke(cli, ["experiment", "run", "broadcast-incast", "--max-dilation", "4", "--dry-run"],
                           standalone_mode=False)
    assert "--max-dilation goes with --auto-dilation" in str(r.exception)


def test_auto_dilation_reruns_a_point_in_place(tmp_path):
    """The runner's hook (no testbed needed: it is called for testbed points only, so the study's
    points are made to look like one): ``run_at`` replaces the point's rows and meta."""
    import dataclasses

    from clusterlab.experiments import runner as rn

    calls = []

    def hook(p, run_at, run_dir):
        for k in (1.0, 2.0):
            pm = run_at(k)
            calls.append((p.index, pm["dilation"], len(json.loads((run_dir / "meta.json").read_text())["points"])))
        return {"dilation": 2.0}

    study = Study(name="pp", cluster=InProcess(ranks=2), workload=wl.pingpong(sizes="8", trial_time=0.001),
                  repeat=2, warmup=0, monitor=False)
    orig_at, orig_eligible = rn.point_at_dilation, rn.auto_eligible
    try:
        rn.auto_eligible = lambda p: True
        rn.check_auto_dilation = lambda s, pts: None
        rn.point_at_dilation = lambda p, k: dataclasses.replace(p, dilation=k, settings={**p.settings, "dilation": k})
        res = run_study(study, tmp_path / "r", auto_dilation=hook)
    finally:
        rn.point_at_dilation, rn.auto_eligible = orig_at, orig_eligible
        rn.check_auto_dilation = _check_auto_dilation
    assert calls == [(0, 1.0, 1), (0, 2.0, 1)]  # one entry per point, the earlier run's replaced
    assert [r["dilation"] for r in res.rows] == [2.0, 2.0]
    assert res.meta["points"][0]["auto_dilation"] == {"dilation": 2.0} and res.points[0].dilation == 2.0
    assert pq.read_table(tmp_path / "r" / "table.parquet").column("dilation").to_pylist() == [2.0, 2.0]


from clusterlab.experiments.runner import check_auto_dilation as _check_auto_dilation  # noqa: E402


def test_a_set_value_that_makes_a_workload_compute_for_real_makes_it_undilatable():
    from clusterlab.experiments.workloads.mining import parallel_mining

    w = parallel_mining(compute="replay")
    assert w.dilatable and not w.with_params(compute="real").dilatable
    assert w.with_params(compute="real").with_params(compute="replay").dilatable
    r = CliRunner().invoke(cli, ["experiment", "run", "seed000-fig6", "--quick", "--set", "compute=real", "--dry-run"],
                           standalone_mode=False)
    assert "computes for real" in str(r.exception)  # refused when the study expands, not when its point runs


def test_the_report_says_each_points_dilation_ladder_and_why():
    from clusterlab.report.study import auto_dilation_lines, point_rows

    pm = {"index": 1, "label": "MIN 5ms", "dilation": 4.0, "settings": {},
          "auto_dilation": {"ok": True, "dilation": 4.0, "why": "dilation 4 is the smallest tried that passes",
                            "attempts": [{"dilation": 1.0, "ok": False, "line": "fidelity: FAIL (...)",
                                          "next": "dilation 4: only the timer failed"},
                                         {"dilation": 4.0, "ok": True, "line": "fidelity: PASS"}]}}
    meta = {"points": [pm, {"index": 2, "label": "plain", "dilation": 1.0}]}
    assert auto_dilation_lines(meta) == ["- point 1 (MIN 5ms): dilation 4 is the smallest tried that passes; "
                                         "climbed: dilation 4: only the timer failed"]
    rows = point_rows([{"point": 1, "seconds": 0.1}], meta)
    assert rows[0][2] == "4 (dilated); auto-dilation 1 -> 4" and rows[1][2] == "1"
    pm["auto_dilation"]["ok"] = False
    assert point_rows([], meta)[0][2].endswith("(**none passed**)")


def test_what_connects_the_ranks_is_the_clusters_own_words():
    """meta.json's emulated network for a cluster on this machine or mpiexec's hosts comes from the
    cluster object (the runner has no list of kinds to keep in step)."""
    from clusterlab.cluster import Local, Mpirun
    from clusterlab.experiments.runner import _emulated

    def network(c):
        return _emulated(Study(name="pp", cluster=c, workload=wl.pingpong(sizes="8", trial_time=0.001)))["network"]

    assert network(InProcess(ranks=2)) == "none (threads of one process)"
    assert network(Local()) == network(Mpirun(mesh="tcp")) == \
        "loopback on one machine: no link rate, no switch; TCP settings per socket"
    assert network(Mpirun(hostfile="hosts")) == "the network of the hosts in hosts (nothing emulated); MPI's own transport"
