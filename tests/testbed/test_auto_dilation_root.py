"""``bench broadcast --auto-dilation`` (root): a run whose RTO min the kernel's 4 ms jiffy cannot
time (5 ms at dilation 1) fails the fidelity check and is rerun at the smallest dilation whose
timer passes (4: 20 ms as run, 5 jiffies)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .helpers import require_netns

pytestmark = [pytest.mark.root]


@pytest.mark.slow
def test_a_run_that_fails_fidelity_is_rerun_at_the_smallest_passing_dilation(tmp_path):
    require_netns()
    d = tmp_path / "auto"
    r = subprocess.run([sys.executable, "-m", "clusterlab", "bench", "broadcast", "--hosts", "2", "--rto-min", "5ms",
                        "--reps", "2", "--warmup", "0", "--auto-dilation", "--run-dir", str(d), "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    auto = json.loads(r.stdout)["auto_dilation"]
    first, second = auto["attempts"][:2]
    assert first["dilation"] == 1 and not first["ok"] and "RTO min 5 ms as run (1x dilated)" in first["line"]
    assert second["dilation"] == 4 and "RTO min 20 ms as run (4x dilated)" in second["line"]
    assert "RTO min 20 ms" not in second["line"].split(" - ")[0]  # the timer passes at 4 (another check may not)
    if second["ok"]:  # kept: the run at 4, its result what the command printed
        assert auto["ok"] and auto["dilation"] == 4 and len(auto["attempts"]) == 2
        assert json.loads(r.stdout)["settings"]["dilation"] == 4
    else:  # failed on the machine's CPU: the ladder went on doubling
        assert len(auto["attempts"]) > 2 and auto["attempts"][2]["dilation"] == 8
    for a in auto["attempts"]:  # each run kept as a study run, the ladder beside them
        assert (d / f"dilation-{a['dilation']:g}" / "meta.json").exists()
    assert json.loads((d / "auto_dilation.json").read_text()) == auto


def test_a_study_point_that_fails_fidelity_is_rerun_and_replaced(tmp_path, monkeypatch):
    """``experiment run --auto-dilation``'s hook through the runner: the point's rows, monitor
    samples and meta are those of the kept dilation; the ladder is in its meta."""
    require_netns()
    import os

    import clusterlab.cluster.testbed.net as net
    from clusterlab.cli.experiment import _auto_dilation_hook
    from clusterlab.cluster import Testbed
    from clusterlab.cluster.testbed import StarTopo
    from clusterlab.diagnose import point_fidelity
    from clusterlab.experiments.runner import run_study
    from clusterlab.experiments.spec import Study
    from clusterlab.experiments.workloads import alltoall_broadcast
    from clusterlab.monitor import read_table
    from clusterlab.net.transport_config import TransportConfig

    monkeypatch.setattr(net.secrets, "token_hex", lambda n: "d27" + os.urandom(1).hex())  # this branch's names
    study = Study(name="auto", cluster=Testbed(StarTopo(hosts=2)), workload=alltoall_broadcast(size="50KB"),
                  transport=TransportConfig(rto_min="5ms"), repeat=2, warmup=0)
    res = run_study(study, tmp_path / "run", auto_dilation=_auto_dilation_hook(8.0))
    assert res.status == "complete"
    pm = res.meta["points"]
    assert len(pm) == 1
    auto = pm[0]["auto_dilation"]
    first = auto["attempts"][0]
    assert first["dilation"] == 1 and not first["ok"] and "RTO min 5 ms as run (1x dilated)" in first["line"]
    # the timer failed at 1 (and, on a loaded machine, the CPU too): the next rung is the timer's 4
    assert first["next"].startswith(("dilation 4: only the timer failed", "dilation 4: cpu, timer failed")), first
    k = auto["dilation"]
    assert k >= 4 and pm[0]["dilation"] == k and res.points[0].dilation == k
    assert {r["dilation"] for r in res.rows} == {k} and len(res.rows) == 2  # the kept run's rows only
    tbl, mmeta = read_table(tmp_path / "run" / "monitor.parquet")
    assert mmeta["per_point"] == {"0": {"dilation": k, "rtt_bounds": mmeta["rtt_bounds"],  # the kept run's only
                                        "interval": mmeta["interval"]}}
    assert set(tbl.column("point").to_pylist()) == {0} and tbl.num_rows > 0
    fid = point_fidelity(tmp_path / "run", 0)
    assert fid["ok"] == auto["ok"] and f"({k:g}x dilated)" in fid["line"]
    # the hosts' round trips, when sampled (one host per 0.2 s: a run of well under a second may
    # have none), are judged against what the topology allows; else the check says not recorded
    rtt = next(c for c in fid["checks"] if c["check"] == "rtt")
    if "tcp_rtt_ms" in set(tbl.column("metric").to_pylist()):
        assert rtt["ok"] and rtt["rtt_ms"] > 0 and "the topology allows 0.." in rtt["text"], rtt
    else:
        assert rtt["ok"] and rtt["text"].startswith("RTT not recorded"), rtt


@pytest.mark.slow
def test_mine_on_a_testbed_that_fails_fidelity_replays_the_job_dilated(tmp_path):
    """``mine --testbed NAME --auto-dilation``: the real run (5 ms RTO min at dilation 1: one jiffy)
    is the first rung; the kept run replays its recorded messages and CPU seconds on a testbed like
    NAME at dilation 4 (its own namespaces, gone afterwards), and the diagnosis is the replay's."""
    require_netns()
    import os

    import clusterlab
    from clusterlab.cluster.testbed import StarTopo, TestbedNetwork
    from clusterlab.net.transport_config import TransportConfig

    data = tmp_path / "t.dat"
    clusterlab.generate_file(data, "T10I4D3K", items=200, seed=3)
    name = "d27m" + os.urandom(1).hex()
    with TestbedNetwork(StarTopo(hosts=2), name=name, transport=TransportConfig(rto_min=0.005, place="testbed")):
        r = subprocess.run([sys.executable, "-m", "clusterlab", "mine", str(data), "-s", "0.02", "--nodes", "2",
                            "-a", "hpa", "--testbed", name, "-q", "--auto-dilation", "--json"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert f"clab-{name[:4]}r" not in ns  # the replays' testbeds are down again
    s = json.loads(r.stdout)
    auto = s["auto_dilation"]
    first = auto["attempts"][0]
    assert first["dilation"] == 1 and not first["ok"] and "RTO min 5 ms as run (1x dilated)" in first["line"]
    assert auto["attempts"][1]["dilation"] == 4 and auto["kept_run"] == "replay"
    rep = auto["replay"]
    assert rep["dilation"] == auto["dilation"] and rep["testbed"].startswith(name[:4] + "r")
    assert [p["pass"] for p in rep["passes"]] == [p["pass"] for p in s["passes"]]  # the same job, replayed
    # the job's time is its passes' plus the replay's set-up between them (a few ms: on a 20 ms job
    # under the suite's load it came to 9 ms, so the tolerance is absolute as well as relative)
    passes_s = sum(p["t_total"] for p in rep["passes"])
    assert 0 < passes_s <= rep["job_s"] * 1.05 and rep["job_s"] <= 1.5 * passes_s + 0.05, (rep["job_s"], passes_s)
    assert f"({auto['dilation']:g}x dilated)" in s["diagnosis"]["fidelity"]["line"]  # the kept run's diagnosis
    assert s["itemsets"] > 0  # the itemsets are the real run's
