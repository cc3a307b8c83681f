"""The harness of the root ``bench/*.py`` scripts (``clusterlab.bench.harness``): common options,
the output checked before the work, the provenance block and the atomic write; and the scripts
moved onto it keep a true ``--help`` and refuse a bad output path in one line, before any work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clusterlab.bench import harness

ROOT = Path(__file__).resolve().parents[1]
MOVED = ("auto_model.py", "comm.py", "comm_latency_ab.py", "diagnose_corpus.py", "fim.py", "first_call.py",
         "fuzz_parsers.py", "generate.py", "hpa_block_size.py", "lists.py", "monitor_rtt.py", "npb.py",
         "npb_verify.py", "packed_codec.py", "parallel.py", "recv_pool_ab.py", "replay_compute_scaling.py",
         "replay_validation.py", "seed000_sequential.py", "seed002.py", "seed002_in_situ.py", "seed002_noise.py",
         "seed002_phases.py", "sim_loss_fit.py", "sim_replay_validation.py", "sim_scale.py", "sim_validation.py",
         "soak.py", "storage.py", "stream.py", "switch.py", "testbed.py", "transport_pingpong.py", "tune_auto.py",
         "wan.py", "wan_cells.py")
# positional arguments a script needs before its output is checked
NEEDS = {"seed000_sequential.py": ("data.dat",), "comm_latency_ab.py": ("--baseline", "/nonexistent"),
         "recv_pool_ab.py": ("--baseline", "/nonexistent"), "tune_auto.py": ("compare",),
         "switch.py": ("--cost", "1")}


def test_write_carries_the_provenance_block(tmp_path, capsys):
    out = tmp_path / "sub" / "r.json"
    ap = harness.parser("A benchmark.\n\nMore.", tmp_path / "default.json", repeat=("--runs", 3))
    run = harness.start(ap, ["-o", str(out), "--runs", "2"], repeat_flag="--runs")
    assert run.args.runs == 2 and ap.description == "A benchmark."
    sum(i * i for i in range(200_000))  # some CPU for the counters
    assert run.write({"rows": [1, 2]}) == out
    doc = json.loads(out.read_text())
    assert doc["rows"] == [1, 2]
    p = doc["provenance"]
    assert p["format"] == harness.FORMAT and p["date"].endswith("Z") and p["finished"] >= p["date"]
    assert len(p["git"]["revision"]) == 40 and isinstance(p["git"]["dirty"], bool)
    assert {"cpus", "kernel", "python"} <= set(p["machine"]) and p["machine"]["cpus"] >= 1
    assert isinstance(p["sched_autogroup"], bool) and "sched_autogroup" not in p["machine"]
    assert len(p["load_before"]) == 3 and len(p["load_after"]) == 3
    assert p["cpu_spare"] is None or 0.0 <= p["cpu_spare"] <= 1.0
    assert p["cpu_bound"] == (p["cpu_spare"] is not None and p["cpu_spare"] < 0.15)
    assert p["argv"] == sys.argv
    assert [f.name for f in out.parent.iterdir()] == ["r.json"]  # no temporary left
    assert f"wrote {out}" in capsys.readouterr().out


def test_json_prints_the_record_and_progress_goes_to_stderr(tmp_path, capsys):
    ap = harness.parser("B.", tmp_path / "r.json")
    run = harness.start(ap, ["--json"])
    run.say("progress")
    run.write({"x": 1})
    out, err = capsys.readouterr()
    assert err == "progress\n"
    assert json.loads(out) == json.loads((tmp_path / "r.json").read_text())


@pytest.mark.parametrize(("argv", "message"), [
    (["-o", "/proc/x/r.json"], "--output /proc/x/r.json: cannot write in /proc"),
    (["--runs", "0"], "--runs 0: at least 1"),
])
def test_bad_output_or_repetitions_is_one_line_exit_2(tmp_path, capsys, argv, message):
    ap = harness.parser("C.", tmp_path / "r.json", repeat=("--runs", 3))
    with pytest.raises(SystemExit) as ei:
        harness.start(ap, argv, repeat_flag="--runs")
    err = capsys.readouterr().err
    assert ei.value.code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r.json").exists()


@pytest.fixture(scope="module")
def no_atheris(tmp_path_factory) -> Path:
    """A PYTHONPATH entry where ``import atheris`` fails: bench/fuzz_parsers.py then skips
    atheris's import instrumentation (seconds per start) and falls back to its own mutator."""
    d = tmp_path_factory.mktemp("no_atheris")
    (d / "atheris.py").write_text("raise ImportError('atheris disabled for this test')\n")
    return d


# Every moved script's two checks run in one child process (runpy, fds 1 and 2 captured per
# run): the 72 interpreter starts and imports of a process each took ~75 s of the suite.
DRIVER = """
import json, os, runpy, sys, tempfile, traceback
out = {}
for name, argv in json.loads(sys.argv[1]):
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        sys.stdout.flush(); sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(fo.fileno(), 1); os.dup2(fe.fileno(), 2)
        code = 0
        sys.argv = [name, *argv]
        try:
            runpy.run_path(name, run_name="__main__")
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = "exception"
        sys.stdout.flush(); sys.stderr.flush()
        os.dup2(saved[0], 1); os.dup2(saved[1], 2)
        os.close(saved[0]); os.close(saved[1])
        fo.seek(0); fe.seek(0)
        out.setdefault(os.path.basename(name), []).append([code, fo.read().decode(), fe.read().decode()])
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def moved_runs(no_atheris) -> dict:
    """Per moved script: its ``--help`` and its run with a bad output path, each (exit code,
    stdout, stderr)."""
    runs = []
    for name in MOVED:
        path = str(ROOT / "bench" / name)
        runs += [(path, ["--help"]), (path, [*NEEDS.get(name, ()), "-o", "/proc/x/r.json"])]
    env = dict(os.environ, PYTHONPATH=f"{no_atheris}{os.pathsep}{ROOT / 'python'}")
    r = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(runs)], capture_output=True, text=True,
                       timeout=300, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", MOVED)
def test_moved_scripts_help_and_bad_output(name, moved_runs):
    (code, out, err), (bad_code, bad_out, bad_err) = moved_runs[name]
    assert code == 0, err
    assert "-o OUTPUT, --output OUTPUT" in out and "--json" in out
    help_text = " ".join(out.split())  # a record in bench/results, an A/B in runs/ (results/README.md)
    assert "(default bench/results/" in help_text or "(default runs/" in help_text
    assert bad_code == 2 and "cannot write in /proc" in bad_err and "Traceback" not in bad_err, bad_err
    assert len(bad_err.strip().splitlines()) == 1 and not bad_out, (bad_out, bad_err)  # one line, no work


def test_moved_list_is_the_scripts_on_the_harness_and_bench_readme_names_them():
    on = sorted(p.name for p in (ROOT / "bench").glob("*.py") if "harness.start(" in p.read_text())
    assert on == sorted(MOVED)
    readme = " ".join((ROOT / "bench" / "README.md").read_text().split())
    assert "On the harness: " + ", ".join(f"`{n}`" for n in on) + "." in readme


def test_counts_are_positive_integers_and_bad_input_is_one_line(capsys):
    assert harness.counts("1,4,16", "--ranks") == [1, 4, 16]
    for bad in ("", "0,4", "4,x", "-1"):
        with pytest.raises(SystemExit) as e:
            harness.counts(bad, "--hosts")
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("--hosts: ")
