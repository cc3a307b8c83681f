"""The parallel command paths: ``clusterlab mine --nodes`` and ``clusterlab experiment speedup``."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from clusterlab.cli import cli
from clusterlab.cluster import InProcess, Local
from clusterlab.errors import ConfigError
from clusterlab.experiments.speedup import SpeedupSpec, parse_transport, run_speedup
from clusterlab.mining.parallel import mine_parallel


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    from clusterlab.data.generate import generate_file

    p = tmp_path_factory.mktemp("pm") / "small.dat"
    generate_file(p, "T10I4D100K", transactions=3000, items=200, seed=3)
    return p


def test_mine_nodes_json_and_passes_file(small, tmp_path):
    out = tmp_path / "sets.parquet"
    r = CliRunner().invoke(cli, ["mine", str(small), "-s", "0.02", "--nodes", "2", "-a", "cd", "--backend", "tcp",
                                 "-o", str(out), "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    s = json.loads(r.stdout)
    assert s["algorithm"].startswith("cd x2") and s["passes"][0]["pass"] == 1
    seq = CliRunner().invoke(cli, ["mine", str(small), "-s", "0.02", "--json"], catch_exceptions=False)
    assert json.loads(seq.stdout)["itemsets_by_length"] == s["itemsets_by_length"]
    assert json.loads((tmp_path / "sets.passes.json").read_text())[-1]["pass"] >= 2


def test_speedup_experiment_writes_table_and_plot(small, tmp_path):
    r = CliRunner().invoke(cli, ["experiment", "speedup", "--algorithm", "hpa", "--nodes", "1,2", "--data", str(small),
                                 "--min-support", "0.02", "--rto-min", "default,5ms", "--rto-min-jitter", "10ms",
                                 "-o", str(tmp_path)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    rows = json.loads((tmp_path / "speedup.json").read_text())["rows"]
    assert {(x["setting"], x["nodes"]) for x in rows} == {("default", 1), ("default", 2),
                                                          ("rto_min=5ms+[0,10ms]", 1), ("rto_min=5ms+[0,10ms]", 2)}
    assert all(x["speedup"] > 0 and x["itemsets"] == rows[0]["itemsets"] for x in rows)
    assert (tmp_path / "speedup.png").stat().st_size > 1000
    assert (tmp_path / "speedup.csv").read_text().startswith("setting,algorithm,nodes")


def test_bad_settings_are_one_line_errors(small):
    with pytest.raises(ConfigError, match="unknown transport setting"):
        parse_transport("rto_mni=5ms")
    with pytest.raises(ConfigError, match="nodes"):
        run_speedup(SpeedupSpec(data=str(small), min_support=0.02, nodes=[0]))
    r = CliRunner().invoke(cli, ["experiment", "speedup", "--data", str(small), "--min-support", "0.02",
                                 "--nodes", "1,x"])
    assert r.exit_code != 0 and "--nodes: 'x' is not an integer" in str(r.exception)


@pytest.mark.parametrize("launcher", ["run", "mpiexec"])
def test_mine_as_ranks_of_a_launched_job_mines_once_together(small, tmp_path, launcher):
    """`clusterlab run -n 3 -- mine ...` (and mpiexec) mines on the job's ranks, not once per
    rank: one summary from rank 0, one output file equal to the sequential engine's."""
    import os
    import shutil
    import subprocess
    import sys

    out, seq = tmp_path / "par.txt", tmp_path / "seq.txt"
    mine = ["mine", str(small), "-s", "0.02", "-o", str(out)]
    if launcher == "run":
        argv = [sys.executable, "-m", "clusterlab", "run", "-n", "3", "--", *mine]
    else:
        mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable))
        if mpiexec is None:
            pytest.skip("mpiexec (the mpich wheel) is not installed in this environment")
        argv = [mpiexec, "-n", "3", sys.executable, "-m", "clusterlab", *mine]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("hpa x3 (launched)") == 1
    assert CliRunner().invoke(cli, ["mine", str(small), "-s", "0.02", "-o", str(seq)]).exit_code == 0
    assert out.read_bytes() == seq.read_bytes()


def _cli(*args, timeout=120, **kw):
    """`clusterlab ARGS` in a subprocess (ranks write to the real stderr)."""
    import subprocess
    import sys

    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.run([sys.executable, "-m", "clusterlab", *map(str, args)], text=True, timeout=timeout, **kw)


@pytest.mark.slow
def test_every_input_format_in_parallel_equals_sequential(tmp_path):
    """`mine --nodes` read only FIMI: CSV was parsed as FIMI, an empty .csv exited 0."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    txs = [["milk", "bread"], ["bread", "eggs"], ["milk", "bread", "eggs"], ["eggs"], ["milk", "eggs"]]
    csv = tmp_path / "b.csv"
    csv.write_text("transaction_id,item\n" + "".join(f"{t},{i}\n" for t, tx in enumerate(txs) for i in tx))
    pqf = tmp_path / "b.parquet"
    pq.write_table(pa.table({"items": [[1, 2], [2, 3], [1, 2, 3], [3], [1, 3]]}), pqf)
    odd = tmp_path / "b.baskets"  # CSV content under a name whose extension says nothing
    odd.write_text(csv.read_text())
    for path, fmt in ((csv, None), (pqf, None), (odd, "csv")):
        seq, par = tmp_path / "seq.txt", tmp_path / "par.txt"
        extra = ["--format", fmt] if fmt else []
        assert _cli("mine", path, "-s", "2", "-o", seq, *extra).returncode == 0
        r = _cli("mine", path, "-s", "2", "--nodes", "2", "-a", "cd", "-o", par, *extra)
        assert r.returncode == 0, r.stderr
        assert par.read_bytes() == seq.read_bytes() and len(seq.read_text().splitlines()) >= 5
    empty = tmp_path / "e.csv"
    empty.write_text("")
    r = _cli("mine", empty, "--nodes", "2")
    assert r.returncode == 2 and "e.csv" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = _cli("mine", csv, "--nodes", "2", "--format", "fimi", "-q")  # --format applies: CSV read as FIMI fails
    assert r.returncode == 2 and "b.csv:1:1" in r.stderr and "Traceback" not in r.stderr


def test_bad_input_in_parallel_is_one_line_without_rank_tracebacks(tmp_path):
    bad = tmp_path / "bad.dat"
    bad.write_text("1 2\n2 3\n1 2\n3 x\n")
    r = _cli("mine", bad, "--nodes", "3", "-s", "1", "-q")
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == ["clusterlab: error: " + f"{bad}:4:3: not an integer item: unexpected 'x'"]


def test_sequential_algorithm_with_nodes_is_refused(small):
    r = CliRunner().invoke(cli, ["mine", str(small), "--nodes", "2", "-a", "apriori"])
    assert r.exit_code != 0 and "apriori is sequential" in str(r.exception)


def test_paths_with_braces(tmp_path):
    """A path holding `{...}` broke parallel mode (it was str.format-ted)."""
    txs = "1 2 3\n1 2\n2 3\n1 2 3\n"
    d = tmp_path / "d{x}"
    d.mkdir()
    (d / "a{}.dat").write_text(txs)
    (d / "p0.dat").write_text(txs[:6])
    (d / "p1.dat").write_text(txs[6:])
    for path in (d / "a{}.dat", str(d / "p{rank}.dat")):
        t, _ = mine_parallel(path, nodes=2, algorithm="hpa", min_support=2, cluster=InProcess())
        assert t.num_rows == 7, path
    r = _cli("mine", d / "a{}.dat", "--nodes", "2", "-s", "2", "-q", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["itemsets"] == 7, r.stderr


def test_sparse_item_ids_use_memory_and_traffic_of_distinct_items(tmp_path):
    """Item 4294967295 made pass 1 allocate and all-reduce 32 GiB (bincount up to the largest id)."""
    p = tmp_path / "sparse.dat"
    p.write_text("1 4294967295\n4294967295 3000000000\n7 4294967295 3000000000\n")
    table, passes = mine_parallel(p, nodes=2, algorithm="hpa", min_support=2, cluster=Local())
    assert {tuple(r["items"]): r["count"] for r in table.to_pylist()} == {
        (4294967295,): 3, (3000000000,): 2, (3000000000, 4294967295): 2}
    assert passes[0]["bytes_sent"] < 16384
    for alg in ("cd", "pfp", "hpa-eld"):
        t, _ = mine_parallel(p, nodes=3, algorithm=alg, min_support=2, cluster=InProcess())
        assert t.equals(table.replace_schema_metadata(t.schema.metadata)), alg


def test_summary_reports_every_ranks_peak_memory(small):
    """The summary's peak memory was the launcher's, not the ranks'."""
    r = _cli("mine", small, "-s", "0.02", "--nodes", "2", "--json", "-q")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    peaks = s["ranks_peak_rss_bytes"]
    assert len(peaks) == 2 and all(p > 20 * 2**20 for p in peaks)
    assert s["ranks_peak_rss_total_bytes"] == sum(peaks)
    assert [x["rank"] for x in s["ranks"]] == [0, 1] and all(x["job_s"] > 0 for x in s["ranks"])
    r = _cli("mine", small, "-s", "0.02", "--nodes", "2")
    assert "MiB in all ranks" in r.stdout and "peak_MiB" in r.stdout


def test_summary_reports_each_ranks_share_and_the_time_split(small):
    """Per rank: its CSR share beside its peak; the job's time split (read, then the passes' parts)."""
    r = _cli("mine", small, "-s", "0.02", "--nodes", "2", "--json", "-q")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert len(s["ranks_csr_bytes"]) == 2 and all(c > 0 for c in s["ranks_csr_bytes"])
    split = s["time_split"]
    assert {"read_s", "count_s", "sync_s", "send_s", "route_s", "wait_s"} <= set(split)
    assert 0 < split["read_s"] <= max(x["job_s"] for x in s["ranks"])
    r = _cli("mine", small, "-s", "0.02", "--nodes", "2")
    assert "time split" in r.stdout and "as CSR" in r.stdout


def test_mine_nodes_ends_with_the_fidelity_line_and_the_diagnosis(small, tmp_path):
    """The run's last lines: its fidelity line, then the dominant loss (or the launch, named first
    when it costs many times the job) with its fix and predicted gain; --json carries the same."""
    r = _cli("mine", small, "-s", "0.02", "--nodes", "2", "-q", "--rules")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    last = lines[-1]
    assert last.startswith("diagnosis: ") and "fix:" in last and ("predicted gain:" in last or "none found" in last)
    fid = next(ln for ln in reversed(lines) if ln.startswith("fidelity: "))
    assert lines.index(fid) > max(i for i, ln in enumerate(lines) if "rules" in ln)  # after everything else
    assert "not emulated" in fid or "load average" in fid  # a local run: the machine's load judged
    r = _cli("mine", small, "-s", "0.02", "--nodes", "2", "-q", "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["cluster"]["kind"] == "local" and s["options"]["machine"]["cpus"] >= 1 and 0 <= s["cpu_spare"] <= 1
    assert s["diagnosis"]["fidelity"]["line"].startswith("fidelity: ") and "causes" in s["diagnosis"]
    (tmp_path / "summary.json").write_text(r.stdout)  # `clusterlab diagnose` of the saved summary: the same verdict
    d = _cli("diagnose", tmp_path, "--json")
    assert d.returncode == 0, d.stderr
    assert json.loads(d.stdout)["jobs"][0]["fidelity"] == s["diagnosis"]["fidelity"]


def test_progress_on_a_terminal_only_and_not_with_q(small):
    """Passes are shown as they complete when stderr is a terminal (it was silent for minutes)."""
    import os
    import pty

    def stderr_of(*args):
        master, slave = pty.openpty()
        try:
            r = _cli("mine", small, "-s", "0.02", "--nodes", "2", *args, stderr=slave)
        finally:
            os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        os.close(master)
        return r.returncode, b"".join(chunks).decode()

    import subprocess
    import sys

    code, err = stderr_of()
    assert code == 0 and "pass 1:" in err and "pass 2:" in err and "candidates" in err
    code, err = stderr_of("-q")
    assert code == 0 and "pass 1:" not in err
    r = subprocess.run([sys.executable, "-m", "clusterlab", "mine", str(small), "-s", "0.02", "--nodes", "2"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "pass 1:" not in r.stderr  # not a terminal: quiet


def test_mine_timeout_bounds_the_whole_job(tmp_path):
    """`mine --timeout` is the job's limit (it was a fixed 150 s): past it the job ends with one
    line naming the option (a dense file at 30% on 2 ranks runs far longer than 1 s)."""
    r = _cli("mine", _dense(tmp_path), "-s", "0.3", "--nodes", "2", "--timeout", "1s", "-q", "-o",
             tmp_path / "x.parquet")
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and "--timeout 1s bounds the whole job" in r.stderr
    assert not (tmp_path / "x.parquet").exists()
    # Without --nodes there is no job to bound: refused, not ignored.
    r = CliRunner().invoke(cli, ["mine", str(tmp_path / "none.dat"), "--timeout", "1h"])
    assert r.exit_code != 0 and "bounds a parallel job" in str(r.exception)


def _dense(tmp_path):
    """A dense file whose 30%-support run takes minutes (30 items in 90% of the transactions
    each: every set of up to 11 of them is frequent, tens of millions of itemsets)."""
    import numpy as np

    rng = np.random.default_rng(7)
    p = tmp_path / "dense.dat"
    p.write_text("\n".join(" ".join(map(str, np.flatnonzero(rng.random(40) < np.r_[np.full(30, 0.9), np.full(10, 0.2)])))
                           for _ in range(3000)) + "\n")
    return p


def test_dead_rank_ends_a_long_job_within_seconds(tmp_path):
    """The job's limit is long (one hour by default) and bounds only the whole job: a rank that
    dies mid-run still ends the job at once (its peers see its connections drop), not after
    the limit or a wait's timeout. Rank 1 runs under `timeout -s KILL 3`."""
    import shutil
    import time

    from clusterlab.comm.errors import CommError
    from clusterlab.mining.parallel import run_parallel
    from clusterlab.mining.parallel.driver import JOB_TIMEOUT

    if shutil.which("timeout") is None:
        pytest.skip("coreutils timeout is not installed")
    assert JOB_TIMEOUT >= 3600
    data = _dense(tmp_path)
    t0 = time.monotonic()
    with pytest.raises(CommError, match="rank 1"):
        run_parallel(data, nodes=2, algorithm="hpa", min_support=0.3,
                     cluster=Local(prefix={1: ["timeout", "-s", "KILL", "3"]}))
    # Far below the per-wait timeout (120 s) and the job's: robust to a loaded machine.
    assert time.monotonic() - t0 < 60
