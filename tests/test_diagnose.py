"""``clusterlab diagnose``: the rules on synthetic runs (no network), the run-directory parser,
the fidelity check and the command's errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from clusterlab.cli import cli
from clusterlab.diagnose import diagnose, diagnose_dir, fidelity, render_text
from clusterlab.diagnose.run import Job, Pass, RankPass, load
from clusterlab.diagnose.scenarios import named_first
from clusterlab.errors import ConfigError


def rp(rank, total, compute, cpu=None, rto=0.0, bytes_=0.0, messages=0.0, timeouts=0.0):
    return RankPass(rank, total, compute, compute if cpu is None else cpu, total - compute, rto, bytes_, messages, timeouts)


def job(passes, **kw):
    return Job("t", "mining", sum(p.seconds for p in passes), passes=passes, nodes=2, **kw)


def test_a_straggler_is_named_with_its_pass_and_rank():
    d = diagnose(job([Pass(3, 1.0, [rp(0, 1.0, 0.2), rp(1, 1.0, 0.95)])]))
    assert named_first(d) == "skew"
    assert "pass 3: rank 1" in d["dominant"]["evidence"]
    assert d["dominant"]["predicted_gain_s"] == pytest.approx(0.375)  # (0.95 - 0.2) / 2
    assert "partition" in d["dominant"]["fix"]


def test_a_rank_without_a_core_is_starved_not_skewed():
    # rank 1 computed 0.3 CPU seconds in 0.9 s, rank 0 the same work at full speed
    d = diagnose(job([Pass(2, 1.0, [rp(0, 1.0, 0.32, cpu=0.3), rp(1, 1.0, 0.9, cpu=0.3)])]))
    assert named_first(d) == "cpu_starvation"
    assert d["dominant"]["seconds"] == pytest.approx(0.9 - 0.3 * 0.32 / 0.3)  # beyond rank 0's own 1.07x
    assert "rank 1" in d["dominant"]["evidence"] and d["fidelity"]["ok"]


def test_every_rank_slowed_down_is_the_machines_load_flagged_not_the_jobs_loss():
    # both ranks at a third of a core (other users' work); rank 1 also holds twice the work
    passes = [Pass(2, 1.0, [rp(0, 1.0, 0.45, cpu=0.15), rp(1, 1.0, 0.9, cpu=0.3)])]
    d = diagnose(job(passes))
    assert not d["fidelity"]["ok"] and "33% of a core" in d["fidelity"]["line"]
    load = next(c for c in d["causes"] if c["cause"] == "machine_load")
    assert load["seconds"] == pytest.approx(0.6)  # (3 - 1) x rank 1's 0.3 CPU seconds
    assert named_first(d) == "skew"  # the job's own loss, its gain at the machine's speed: 3 x 0.075
    assert d["dominant"]["predicted_gain_s"] == pytest.approx(0.225)
    # the same slowdown with more ranks than the CPUs they were given is the job's own starvation
    d = diagnose(job([Pass(2, 1.0, [rp(0, 1.0, 0.9, cpu=0.3), rp(1, 1.0, 0.9, cpu=0.3)])],
                     options={"machine": {"cpus": 1}}))
    assert named_first(d) == "cpu_starvation"
    # 3x in all, 2x of it from 2 ranks on 1 CPU (the job's), 1.5x the machine's: 0.9 - 1.5 x 0.3 is the job's
    assert d["dominant"]["seconds"] == pytest.approx(0.9 - 1.5 * 0.3)


def test_rto_waits_scale_with_the_rto_min():
    p = Pass(4, 1.0, [rp(0, 1.0, 0.1, rto=0.8, timeouts=4), rp(1, 1.0, 0.1)])
    d = diagnose(job([p], transport={"rto_min": "200ms"}))
    assert named_first(d) == "rto_wait"
    assert "rto_min=5ms" in d["dominant"]["fix"]
    assert d["dominant"]["predicted_gain_s"] == pytest.approx(0.8 * (1 - 5 / 200))


def test_drops_at_a_switch_port_name_incast_and_the_port():
    p = Pass("all", 0.3, [rp(0, 0.3, 0.0, rto=0.25, timeouts=1), rp(1, 0.3, 0.0)])
    d = diagnose(Job("b", "study", 0.3, passes=[p], nodes=2, switch_drops=40, switch_drops_by_port={"p0": 5, "p3": 35},
                     cluster={"kind": "testbed", "rate": 155e6, "dilation": 1.0}))
    assert named_first(d) == "incast_switch_drops"
    assert "port p3 (35)" in d["dominant"]["evidence"]


def test_host_queue_drops_take_the_probe_timer_waits_too():
    p = Pass("all", 0.45, [rp(0, 0.45, 0.0, rto=0.2, timeouts=1), rp(1, 0.45, 0.0)])
    d = diagnose(Job("b", "study", 0.45, passes=[p], nodes=2, host_drops_by_host=[50, 3],
                     cluster={"kind": "testbed", "rate": 155e6, "dilation": 1.0}))
    assert named_first(d) == "host_queue_drops"
    assert d["dominant"]["seconds"] == pytest.approx(0.45)  # the RTO and the 200 ms probe-timer waits, one cause
    assert "host h0 (50)" in d["dominant"]["evidence"]


def test_a_slower_link_takes_its_ranks_bytes_at_its_own_rate():
    # rank 3 sends 150 KB: 7.7 ms at 155 Mbit/s, 77.4 ms on its 15.5 Mbit/s link; the pass took 85 ms
    ranks = [rp(i, 0.085, 0.0, bytes_=150e3) for i in range(4)]
    cl = {"kind": "testbed", "rate": 155e6, "dilation": 1.0}
    d = diagnose(Job("b", "study", 0.085, passes=[Pass("all", 0.085, ranks)], nodes=4,
                     cluster={**cl, "host_rates": {"h3": 15.5e6}}))
    assert named_first(d) == "slow_link"
    assert d["dominant"]["seconds"] == pytest.approx(150e3 * 8 / 15.5e6 - 150e3 * 8 / 155e6, abs=1e-6)  # (rounded to us)
    assert "host h3's link runs at 15.5 Mbit/s, 1/10 of the others' 155 Mbit/s" in d["dominant"]["evidence"]
    assert d["dominant"]["apply"] == {"cluster": {"host_rates": None}}
    # the same run without the slower link: the wait is queueing, no slow link named
    d = diagnose(Job("b", "study", 0.085, passes=[Pass("all", 0.085, ranks)], nodes=4, cluster=cl))
    assert "slow_link" not in [c["cause"] for c in d["causes"]]
    # a host_rates entry at or above the cluster's rate is no slow link; nor one for a host without a rank
    for rates in ({"h3": 1e9}, {"h7": 1e6}):
        d = diagnose(Job("b", "study", 0.085, passes=[Pass("all", 0.085, ranks)], nodes=4,
                         cluster={**cl, "host_rates": rates}))
        assert "slow_link" not in [c["cause"] for c in d["causes"]], rates


def test_a_lossy_links_losses_are_its_own_not_the_switchs():
    p = Pass("all", 0.23, [rp(0, 0.23, 0.0, rto=0.209, timeouts=1), rp(1, 0.23, 0.0)])
    cl = {"kind": "testbed", "rate": 155.52e6, "dilation": 1.0, "loss": {"h1": 0.001}}
    mon = {"line_losses": 19, "line_losses_by_port": {"p1": 12}, "switch_drops": 0, "host_queue_drops": 0}
    d = diagnose(Job("b", "study", 0.23, passes=[p], nodes=2, cluster=cl, monitor=mon))
    assert named_first(d) == "lossy_link"
    assert d["dominant"]["seconds"] == pytest.approx(0.23)  # the RTO wait and the recovery, one cause
    assert "19 frames lost on links" in d["dominant"]["evidence"] and "port p1: 12" in d["dominant"]["evidence"]
    assert d["dominant"]["apply"] == {"cluster": {"loss": None}}
    # the switch dropped more than the link lost: incast, not the link
    d = diagnose(Job("b", "study", 0.23, passes=[p], nodes=2, cluster=cl, monitor={**mon, "switch_drops": 40}))
    assert named_first(d) == "incast_switch_drops"
    # no lossy link configured: losses on links are not looked for
    d = diagnose(Job("b", "study", 0.23, passes=[p], nodes=2, cluster={**cl, "loss": {}}, monitor=mon))
    assert named_first(d) == "rto_wait"


def test_long_waits_per_timeout_are_backoff_capped_by_rto_max():
    p = Pass("all", 3.2, [rp(0, 3.2, 0.0, rto=3.0, timeouts=2), rp(1, 3.2, 0.0)])
    d = diagnose(Job("b", "study", 3.2, passes=[p], nodes=2, transport={"rto_min": "200ms", "rto_max": "60s"},
                     cluster={"kind": "testbed"}))
    assert named_first(d) == "rto_backoff"
    # the whole chain scales with the RTO min (95% of it goes), more than capping it at 1 s would gain
    assert "rto_min=10ms" in d["dominant"]["fix"]
    assert d["dominant"]["predicted_gain_s"] == pytest.approx(3.0 * (1 - 10 / 200))
    assert "capping at 1 s alone would gain 600.0 ms" in d["dominant"]["method"]  # 0.2+0.4+0.8+1.6 -> 0.2+0.4+0.8+1
    # at an RTO min that cannot go lower, the cap is the fix: 10+20+...+640 ms, then 1 s for 1.28 s, 1 s for 0.45 s
    p = Pass("all", 3.2, [rp(0, 3.2, 0.0, rto=3.0, timeouts=2), rp(1, 3.2, 0.0)])
    d = diagnose(Job("b", "study", 3.2, passes=[p], nodes=2, transport={"rto_min": "10ms", "rto_max": "60s"},
                     cluster={"kind": "testbed"}))
    assert named_first(d) == "rto_backoff" and "rto_max=1s" in d["dominant"]["fix"]
    assert d["dominant"]["predicted_gain_s"] == pytest.approx(3.0 - (1.27 + 1.0 + 0.45))


@pytest.mark.parametrize("transport, cause", [({"nodelay": False}, "nagle"), ({"sndbuf": "4KiB"}, "window_limited"),
                                              ({}, "comm_wait")])
def test_communication_beyond_line_rate_is_charged_by_the_settings(transport, cause):
    p = Pass(3, 0.2, [rp(0, 0.2, 0.01, bytes_=40e3, messages=10), rp(1, 0.2, 0.01, bytes_=40e3, messages=10)])
    assert named_first(diagnose(job([p], transport=transport))) == cause


def test_many_small_messages_ask_for_larger_blocks():
    p = Pass(3, 0.2, [rp(0, 0.2, 0.01, bytes_=64e3, messages=500), rp(1, 0.2, 0.01, bytes_=64e3, messages=500)])
    d = diagnose(job([p], options={"block_size": 8192}))
    assert named_first(d) == "small_messages"
    assert "--block-size 64KiB" in d["dominant"]["fix"]


def test_a_launch_that_dwarfs_the_job_is_named_first():
    j = job([Pass(2, 0.01, [rp(0, 0.01, 0.009), rp(1, 0.01, 0.002)])])
    j.wall_seconds = 1.0
    d = diagnose(j)
    assert named_first(d) == "launch" and d["warnings"]
    j.wall_seconds = 0.02
    assert named_first(diagnose(j)) == "skew"


def test_fidelity_passes_a_local_run_and_judges_an_emulated_one():
    assert fidelity.check(job([]))["emulated"] is False
    tb = {"kind": "testbed", "rate": 155e6, "dilation": 1.0}
    ok = fidelity.check(Job("b", "study", 1, cluster=tb, transport={"rto_min": "200ms"},
                            monitor={"mean_cpu_spare": 0.8, "saturated_share": 0.0}))
    assert ok["ok"] and ok["line"].startswith("fidelity: PASS")
    starved = fidelity.check(Job("b", "study", 1, cluster=tb, monitor={"mean_cpu_spare": 0.05, "saturated_share": 0.9}))
    assert not starved["ok"] and "spare CPU 5%" in starved["line"]
    coarse = fidelity.check(Job("b", "study", 1, cluster=tb, transport={"rto_min": "10ms"}))
    assert not coarse["ok"] and "jiffies" in coarse["line"]
    dilated = fidelity.check(Job("b", "study", 1, cluster={**tb, "dilation": 10.0}, transport={"rto_min": "10ms"},
                                 monitor={"mean_cpu_spare": 0.8}))
    assert dilated["ok"]
    # without the monitor's samples nothing vouches for the CPU, link rate or RTT: not checked, not a PASS
    unseen = fidelity.check(Job("b", "study", 1, cluster={**tb, "dilation": 10.0}, transport={"rto_min": "10ms"}))
    assert unseen["ok"] is None and unseen["line"].startswith("fidelity: NOT CHECKED")
    slow = fidelity.check(Job("b", "study", 1, cluster=tb, monitor={"peak_tx_bytes_per_s": 2e6, "busy_samples": 9,
                                                                    "max_host_tx_bytes": 1e9, "interval": 0.1}))
    assert not slow["ok"] and "peak link rate 10%" in slow["line"]



def test_the_monitors_missed_captures_are_told_per_point_not_failed():
    """A study's monitor table carries the last point's metadata: a capture that missed packets
    at the last point was charged to every point, and as packets the emulation lost (a 100-host
    run's capture ring overflowed; the network lost nothing)."""
    import pandas as pd

    df = pd.DataFrame({"t": [0.0, 0.0, 0.0], "node": ["machine", "machine", "machine"], "iface": ["", "", ""],
                       "metric": ["cpu_spare", "cpu_spare", "capture_drops"], "value": [0.8, 0.8, 30.0],
                       "point": [0, 1, 1]})
    meta = {"capture": {"packets": 2_300_000, "drops": 30}}
    assert fidelity.monitor_facts(df, meta, point=0)["capture_drops"] == 0
    facts = fidelity.monitor_facts(df, meta, point=1)
    assert facts["capture_drops"] == 30
    tb = {"kind": "testbed", "rate": 155e6, "dilation": 1.0}
    r = fidelity.check(Job("b", "study", 1, cluster=tb, transport={"rto_min": "200ms"}, monitor=facts))
    assert r["ok"] and "capture missed 30 packets" in r["line"], r["line"]
    lost = fidelity.check(Job("b", "study", 1, cluster=tb, transport={"rto_min": "200ms"},
                              monitor={**facts, "unexpected_drops": 3}))
    assert not lost["ok"] and "3 packets dropped" in lost["line"]

def _summary(tmp_path, wall=0.05):
    ranks = [{"rank": r, "t_total": 0.5, "t_comm": 0.5 - c, "t_compute": c, "cpu_s": c, "t_rto": 0.0,
              "bytes_sent": 1000, "messages_sent": 2} for r, c in ((0, 0.1), (1, 0.45))]
    s = {"seconds": {"mine": wall, "job": 0.5}, "passes": [{"pass": 2, "t_total": 0.5, "ranks": ranks}],
         "options": {"nodes": 2, "block_size": 8192, "partition": "prefix"}}
    (tmp_path / "summary.json").write_text(json.dumps(s))
    return tmp_path


def test_a_mine_summary_is_read_and_rendered(tmp_path):
    r = diagnose_dir(_summary(tmp_path))
    assert [named_first(j) for j in r["jobs"]] == ["skew"]
    text = render_text(r)
    assert text.splitlines()[0].startswith("fidelity:") and "skew between ranks" in text


def test_a_bare_passes_file_is_enough(tmp_path):
    s = json.loads(_summary(tmp_path).joinpath("summary.json").read_text())
    (tmp_path / "summary.json").unlink()
    (tmp_path / "sets.passes.json").write_text(json.dumps(s["passes"]))
    assert named_first(diagnose_dir(tmp_path)["jobs"][0]) == "skew"


@pytest.mark.parametrize("content, match", [(None, "no such directory"), ("", "nothing to diagnose"),
                                            ("[1, 2]", "not a list of passes|pass 1 is not")])
def test_bad_run_dirs_are_refused_in_one_line(tmp_path, content, match):
    d = tmp_path / "run"
    if content is not None:
        d.mkdir()
        if content:
            (d / "x.passes.json").write_text(json.dumps([1, 2]))
    with pytest.raises(ConfigError, match=match):
        diagnose_dir(d)


def test_the_command_exits_2_with_one_line_and_prints_json(tmp_path):
    r = subprocess.run([sys.executable, "-m", "clusterlab", "diagnose", str(tmp_path / "missing")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "missing" in r.stderr
    r = CliRunner().invoke(cli, ["diagnose", str(_summary(tmp_path)), "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["jobs"][0]["dominant"]["cause"] == "skew" and "fidelity" in out["jobs"][0]


def test_verify_refuses_what_a_rerun_cannot_take(tmp_path):
    from clusterlab.diagnose.verify import verify

    run = _summary(tmp_path)
    j = diagnose_dir(run)["jobs"][0]  # skew: its fix is re-splitting the data, not a setting
    with pytest.raises(ConfigError, match="not a setting a rerun can take"):
        verify(run, load(run)[0], j)
    study = Job("b", "study", 1.0)
    with pytest.raises(ConfigError, match="reruns parallel mining runs"):
        verify(run, study, j)
    nagle = {"dominant": {"cause": "nagle", "fix": "x", "apply": {"transport": {"nodelay": True}}}}
    with pytest.raises(ConfigError, match="does not name"):  # a summary without the input file
        verify(run, load(run)[0], nagle)
    per_call = {"dominant": {"cause": "connection_setup", "fix": "persistent connections",
                             "apply": {"env": {"CLUSTERLAB_CONNECTIONS": "persistent"}}}}
    with pytest.raises(ConfigError, match="not this fix"):
        verify(run, load(run)[0], per_call)


def test_per_call_connections_their_set_up_is_named_and_removed_by_persistent_ones():
    ranks = [RankPass(r, 1.0, 0.01, 0.5, 0.99, 0.0, 6e3, 600, 0.0, setup=0.8 - 0.1 * r) for r in range(2)]
    d = diagnose(Job("p", "program", 1.0, passes=[Pass("all", 1.0, ranks)], nodes=2))
    assert named_first(d) == "connection_setup"
    assert d["dominant"]["seconds"] == pytest.approx(0.8) and d["dominant"]["predicted_gain_s"] == pytest.approx(0.8)
    assert d["dominant"]["apply"] == {"env": {"CLUSTERLAB_CONNECTIONS": "persistent"}}
    assert "rank 0 spent 800.0 ms connecting" in d["dominant"]["evidence"]


def test_a_wan_between_two_sites_takes_the_waits_beyond_line_rate():
    ranks = [rp(i, 0.04, 0.0, bytes_=150e3) for i in range(4)]
    cl = {"kind": "testbed", "rate": 155e6, "dilation": 1.0, "sites": "2+2", "wan_delay": 0.012}
    d = diagnose(Job("b", "study", 0.04, passes=[Pass("all", 0.04, ranks)], nodes=4, cluster=cl))
    assert named_first(d) == "wan_latency"
    assert d["dominant"]["seconds"] == pytest.approx(0.04 - 150e3 * 8 / 155e6, abs=1e-6)  # beyond line rate
    assert "RTT 24 ms" in d["dominant"]["evidence"] and d["dominant"]["apply"] == {"cluster": {"sites": None}}
    # one site: the same waits are queueing, no WAN named
    d = diagnose(Job("b", "study", 0.04, passes=[Pass("all", 0.04, ranks)], nodes=4,
                     cluster={k: v for k, v in cl.items() if k not in ("sites", "wan_delay")}))
    assert "wan_latency" not in [c["cause"] for c in d["causes"]]


def test_incast_of_a_known_burst_is_fixed_by_buffers_that_hold_it():
    p = Pass("all", 0.24, [rp(0, 0.24, 0.0, rto=0.2, timeouts=1), rp(1, 0.24, 0.0), rp(2, 0.24, 0.0), rp(3, 0.24, 0.0)])
    d = diagnose(Job("b", "study", 0.24, passes=[p], nodes=4, switch_drops=11, switch_drops_by_port={"p0": 6},
                     options={"workload": "alltoall_broadcast", "size": 50000},
                     cluster={"kind": "testbed", "rate": 155e6, "dilation": 1.0, "buffer": 65536.0}))
    assert named_first(d) == "incast_switch_drops"
    assert d["dominant"]["apply"] == {"cluster": {"buffer": "512KB"}}  # over twice 3 x 50 KB
    assert d["dominant"]["predicted_gain_s"] == pytest.approx(d["dominant"]["seconds"])  # the RTO wait and the rest


def test_reads_from_the_storage_target_are_taken_out_of_the_computation():
    p = Pass("all", 0.45, [RankPass(0, 0.45, 0.45, None, 0.0, 0.0)])
    st = {"read_seconds": 0.13, "rescan_seconds": 0.29, "passes": 3, "rescan": True, "stored_bytes": 268e3,
          "backing_rate": "2MB", "local_read_seconds": 0.01}
    d = diagnose(Job("s", "study", 0.45, passes=[p], nodes=2, options={"storage": st},
                     cluster={"kind": "testbed", "rate": 1e9, "dilation": 1.0}))
    assert named_first(d) == "storage_reads"
    assert d["dominant"]["seconds"] == pytest.approx(0.42)
    assert d["dominant"]["predicted_gain_s"] == pytest.approx(0.42 - 3 * 0.01)  # 3 local reads instead
    assert "268 KB x 3 read(s) take 402.0 ms" in d["dominant"]["evidence"]
    assert next(c for c in d["causes"] if c["cause"] == "compute")["seconds"] == pytest.approx(0.03)


def test_a_recovery_longer_than_the_rto_min_is_a_doubled_timer():
    # 0.7 s: rank 1's connections had 4 recoveries (0.17 s of wait each on average: no backoff by that
    # count), but one connection spent 0.48 s in its recovery after the first timeout: a second expiry
    ranks = [RankPass(0, 0.7, 0.0, None, 0.7, 0.0), RankPass(1, 0.7, 0.0, None, 0.7, 0.7, timeouts=4, recovery=0.48)]
    job_ = Job("b", "study", 0.7, passes=[Pass("all", 0.7, ranks)], nodes=2, switch_drops=40,
               transport={"rto_min": "200ms", "rto_max": "60s"}, cluster={"kind": "testbed"})
    d = diagnose(job_)
    assert named_first(d) == "rto_backoff" and "480.0 ms per recovery" in d["dominant"]["evidence"]
    ranks[1].recovery = 0.01  # the retransmission got through: incast, no backoff
    assert named_first(diagnose(job_)) == "incast_switch_drops"


def test_auto_dilation_climbs_to_the_smallest_dilation_that_passes():
    from clusterlab.diagnose.dilation import auto_dilation, timer_dilation

    assert timer_dilation(0.005) == 4 and timer_dilation(0.016) == 1 and timer_dilation(0.0159) == 2

    def fake(passes_at, timer_from=1.0):
        def run_at(k):
            checks = [{"check": "timer", "ok": k >= timer_from}, {"check": "cpu", "ok": k >= passes_at}]
            ok = all(c["ok"] for c in checks)
            return {"k": k}, {"ok": ok, "checks": checks, "line": "fidelity: " + ("PASS" if ok else "FAIL")}
        return run_at

    a = auto_dilation(fake(1.0, timer_from=4.0), 1.0, 0.005)  # only the timer fails: straight to 4
    assert [x["dilation"] for x in a["attempts"]] == [1.0, 4.0] and a["ok"] and a["result"] == {"k": 4.0}
    a = auto_dilation(fake(3.0), 1.0, 0.2)  # the CPU fails: doubling
    assert [x["dilation"] for x in a["attempts"]] == [1.0, 2.0, 4.0] and a["dilation"] == 4.0
    assert a["attempts"][0]["next"] == ("dilation 2: cpu failed: twice the dilation (nothing predicts how much CPU "
                                        "a higher one frees)")
    assert "next" not in a["attempts"][-1] and a["why"].startswith("dilation 4 is the smallest tried")
    a = auto_dilation(fake(100.0), 2.0, 0.2, max_dilation=16)  # never passes: stops at the bound, keeps the last
    assert [x["dilation"] for x in a["attempts"]] == [2.0, 4.0, 8.0, 16.0] and not a["ok"]
    assert "next rung, dilation 32, is above the highest allowed, 16 (--max-dilation)" in a["why"]


def test_auto_dilation_stops_where_the_kernel_cannot_take_the_rto_max():
    from clusterlab.diagnose.dilation import ladder_limit
    from clusterlab.errors import ConfigError
    from clusterlab.net.transport_config import TransportConfig

    assert ladder_limit(TransportConfig(), 1.0, 16.0) == (16.0, "--max-dilation")
    top, why = ladder_limit(TransportConfig(rto_max="30s"), 1.0, 16.0)  # 30 s x 4 = the kernel's 120 s
    assert top == 4.0 and "net.ipv4.tcp_rto_max_ms" in why
    with pytest.raises(ConfigError, match="below the starting dilation 4"):
        ladder_limit(TransportConfig(), 4.0, 2.0)
    with pytest.raises(ConfigError, match="the starting dilation 8 cannot express the RTO max"):
        ladder_limit(TransportConfig(rto_max="30s"), 8.0, 16.0)


def test_the_measured_rtt_is_judged_against_what_the_topology_allows():
    tb = {"kind": "testbed", "rate": 155e6, "dilation": 1.0}
    base = {"mean_cpu_spare": 0.8, "saturated_share": 0.0, "rtt_floor_ms": 12.0, "rtt_ceiling_ms": 60.0}
    lan = fidelity.check(Job("b", "study", 1, cluster=tb, monitor={**base, "rtt_ms": 12.4, "rtt_max_ms": 40.0,
                                                                     "rttvar_ms": 1.0, "min_rtt_ms": 12.1,
                                                                     "min_rtt_far_ms": 12.1}))
    assert lan["ok"] and "RTT 12.4 ms (srtt median, max 40" in lan["line"] and "allows 12..60 ms" in lan["line"]
    # 100x the configured RTT (the slowed-down emulator of the issue): the emulation's own delay
    slow = fidelity.check(Job("b", "study", 1, cluster=tb, monitor={**base, "rtt_ms": 900.0, "rtt_max_ms": 26000.0,
                                                                      "rttvar_ms": 400.0, "min_rtt_ms": 12.5}))
    assert not slow["ok"] and "the emulation itself delayed packets" in slow["line"]
    assert next(c for c in slow["checks"] if c["check"] == "rtt")["rtt_ms"] == 900.0
    # the WAN's 12 ms never in force
    short = fidelity.check(Job("b", "study", 1, cluster=tb, monitor={**base, "rtt_ms": 0.2, "rtt_max_ms": 1.0,
                                                                       "rttvar_ms": 0.1, "min_rtt_ms": 0.1,
                                                                       "min_rtt_far_ms": 0.1}))
    assert not short["ok"] and "under the configured 12 ms propagation" in short["line"]
    # the ranks all in one site: no connection crossed the WAN, its delay cannot be judged
    local = fidelity.check(Job("b", "study", 1, cluster=tb, monitor={**base, "rtt_ms": 0.2, "rtt_max_ms": 1.0,
                                                                       "rttvar_ms": 0.1, "min_rtt_ms": 0.1}))
    assert local["ok"] and "no connection between the sites sampled" in local["line"]
    # dilated: the allowance for the unscaled delayed ACK shrinks with k (200 ms as run = 20 ms undilated at 10)
    k10 = {**tb, "dilation": 10.0}
    assert fidelity.check(Job("b", "study", 1, cluster=k10, transport={"rto_min": "200ms"},
                              monitor={**base, "rtt_ms": 13.0, "rtt_max_ms": 150.0, "rttvar_ms": 1.0,
                                       "min_rtt_ms": 12.2}))["ok"]
    assert not fidelity.check(Job("b", "study", 1, cluster=k10, transport={"rto_min": "200ms"},
                                  monitor={**base, "rtt_ms": 13.0, "rtt_max_ms": 170.0, "rttvar_ms": 1.0,
                                           "min_rtt_ms": 12.2}))["ok"]
    told = fidelity.check(Job("b", "study", 1, cluster=tb, monitor={"mean_cpu_spare": 0.8}))
    assert "RTT not recorded" in told["line"]


def test_the_rto_wait_is_predicted_from_the_measured_rtt():
    tb = {"kind": "testbed", "rate": 155e6, "dilation": 1.0}
    p = Pass("all", 1.0, [rp(0, 1.0, 0.1, rto=0.8, timeouts=4), rp(1, 1.0, 0.1)])
    mon = {"rtt_ms": 20.0, "rttvar_ms": 5.0}  # srtt 20 ms, 4 rttvar 20 ms
    d = diagnose(Job("b", "study", 1.0, passes=[p], nodes=2, cluster=tb, transport={"rto_min": "200ms"}, monitor=mon))
    dom = d["dominant"]
    assert dom["cause"] == "rto_wait" and "rto_min=10ms" in dom["fix"]
    # a timeout waits srtt + max(4 rttvar, RTO min): 220 ms now, 40 ms at 10 ms, not 10 / 200 of it
    assert dom["predicted_gain_s"] == pytest.approx(0.8 * (1 - 40 / 220))
    assert "measured RTT 20 ms" in dom["evidence"] and "the RTO min 10x the RTT" in dom["evidence"]
    assert "220 -> 40 ms" in dom["method"]
    # an RTT-driven RTO: a lower RTO min changes nothing, and the diagnosis says so
    # (and its waits of 200 ms per timeout are one RTO of 40 + 4 x 40 ms each, not a doubled 50 ms RTO min)
    d = diagnose(Job("b", "study", 1.0, passes=[p], nodes=2, cluster=tb, transport={"rto_min": "50ms"},
                     monitor={"rtt_ms": 40.0, "rttvar_ms": 40.0}))
    assert named_first(d) == "rto_wait"
    assert d["dominant"]["predicted_gain_s"] is None and "the RTO follows the RTT" in d["dominant"]["fix"]
    assert "set by the RTT, not the RTO min" in d["dominant"]["evidence"]
    without = diagnose(Job("b", "study", 1.0, passes=[p], nodes=2, cluster=tb, transport={"rto_min": "50ms"}))
    assert named_first(without) == "rto_backoff"  # what the RTO min alone would say


def test_the_monitor_samples_the_round_trips_of_connections_that_sent():
    import socket
    import threading
    import time

    from clusterlab.monitor import Monitor
    from clusterlab.monitor.sampler import Target

    srv = socket.create_server(("127.0.0.1", 0))
    a = socket.create_connection(srv.getsockname())
    b, _ = srv.accept()
    idle = socket.create_connection(srv.getsockname())  # established, never sends: not sampled
    c, _ = srv.accept()
    stop = threading.Event()

    def echo():
        while not stop.is_set():
            b.sendall(b.recv(1000) or b"x")

    t = threading.Thread(target=echo, daemon=True)
    t.start()
    mon = Monitor([Target("h0", None, ["lo"], tcp=False, rtt=True)], interval=0.02, capture=None, disk=False)
    mon.rtt_bounds = {"floor_ms": 0.0, "ceiling_ms": 5.0}
    mon.rtt_gap = 0.04  # a dump every other sample (0.2 s by default)
    try:
        with mon:
            end = time.monotonic() + 0.2
            while time.monotonic() < end:
                a.sendall(b"y" * 100)
                a.recv(1000)
    finally:
        stop.set()
        a.close()
        t.join(2)
        for s in (b, idle, c, srv):
            s.close()
    rows = mon.table().to_pandas()
    rtt = rows[rows.metric == "tcp_rtt_ms"]
    assert len(rtt) >= 3 and set(rtt.node) == {"h0"} and (rtt.value > 0).all()
    assert set(rows.metric) >= set(fidelity.RTT_METRICS) - {"tcp_min_rtt_far_ms"}  # one site: none far
    facts = fidelity.monitor_facts(mon.table(), mon.meta)
    assert 0 < facts["rtt_ms"] <= facts["rtt_max_ms"] and facts["rto_seen_ms"] >= 200  # loopback: the 200 ms RTO min
    assert facts["rtt_ceiling_ms"] == 5.0 and mon.meta["rtt_bounds"]["floor_ms"] == 0.0


def test_mine_auto_dilation_refuses_what_it_cannot_rerun(tmp_path):
    from clusterlab.diagnose.dilation import check_mine

    data = tmp_path / "t.dat"
    data.write_text("1 2 3\n1 2\n2 3\n")
    for args, match in ((["--nodes", "2", "--auto-dilation"], "--auto-dilation needs --testbed NAME"),
                        (["--nodes", "2", "--testbed", "lab", "--backend", "mpi", "--auto-dilation"],
                         "replays the job on the TCP mesh"),
                        (["--nodes", "2", "--max-dilation", "4"], "--max-dilation goes with --auto-dilation")):
        r = CliRunner().invoke(cli, ["mine", str(data), "-s", "0.5", "-q", *args], standalone_mode=False)
        assert isinstance(r.exception, ConfigError) and match in str(r.exception), (args, r.exception)
    with pytest.raises(ConfigError, match="runs at dilation 4, and the real job's computation does not slow down"):
        check_mine("lab", "tcp", 4.0)
    r = subprocess.run([sys.executable, "-m", "clusterlab", "mine", str(data), "-s", "0.5", "--nodes", "2",
                        "--auto-dilation"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "needs --testbed" in r.stderr


def test_a_studys_monitor_table_undilates_each_points_rtt_by_its_own_dilation_and_interval():
    import pandas as pd

    rows = []
    for point, rtt in ((0, 2.0), (1, 8.0)):  # both 2 ms undilated: point 1 ran at dilation 4
        for m in fidelity.RTT_METRICS:
            rows.append({"t": 0.1, "node": "h0", "iface": "", "metric": m, "bucket": -1, "value": rtt, "point": point})
    df = pd.DataFrame(rows)
    meta = {"dilation": 4.0, "rtt_bounds": {"floor_ms": 0.0, "ceiling_ms": 40.0}, "interval": 0.5,  # the last point's
            "per_point": {"0": {"dilation": 1.0, "rtt_bounds": {"floor_ms": 0.0, "ceiling_ms": 10.0}, "interval": 0.1},
                          "1": {"dilation": 4.0, "rtt_bounds": {"floor_ms": 0.0, "ceiling_ms": 40.0}, "interval": 0.5}}}
    f0, f1 = (fidelity.monitor_facts(df, meta, point=p) for p in (0, 1))
    assert f0["rtt_ms"] == f1["rtt_ms"] == 2.0 and f0["dilation"] == 1.0
    assert f0["rtt_ceiling_ms"] == 10.0 and f1["rtt_ceiling_ms"] == 40.0
    assert (f0["interval"], f1["interval"]) == (0.1, 0.5)  # each point's own sampling interval


def test_the_measured_rtt_is_evidence_of_queueing_and_of_a_wans_round_trips():
    tb = {"kind": "testbed", "rate": 155e6, "dilation": 1.0}
    p = Pass("all", 0.5, [rp(0, 0.5, 0.0), rp(1, 0.5, 0.0)])
    mon = {"rtt_ms": 3.0, "rtt_max_ms": 9.0, "rttvar_ms": 1.0, "min_rtt_ms": 0.1}
    d = diagnose(Job("b", "study", 0.5, passes=[p], nodes=2, cluster=tb, switch_drops=0, monitor=mon))
    q = next(c for c in d["causes"] if c["cause"] == "queueing")
    assert "measured RTT 3 ms (srtt median; max 9) over a floor of 0.1 ms: up to 8.9 ms of queueing" in q["evidence"]
    assert "no drops at the switch" in q["evidence"] and "buffer" not in q["fix"]  # a buffer cannot help
    wan = {**tb, "sites": "1+1", "wan_delay": 0.006}
    d = diagnose(Job("b", "study", 0.5, passes=[p], nodes=2, cluster=wan, monitor={**mon, "min_rtt_ms": 12.1,
                                                                                      "rtt_ms": 12.5, "rtt_max_ms": 14}))
    assert named_first(d) == "wan_latency" and "over a floor of 12.1 ms" in d["dominant"]["evidence"]


def test_a_kernel_without_socket_diagnostics_costs_the_rtt_only(monkeypatch):
    import time

    from clusterlab.monitor import Monitor, netlink
    from clusterlab.monitor.sampler import Target

    def refuse(self, families=()):
        raise OSError(2, "No such file or directory")

    monkeypatch.setattr(netlink.SockDiag, "tcp", refuse)
    mon = Monitor([Target("h0", None, ["lo"], tcp=True, rtt=True)], interval=0.02, capture=None, disk=False)
    with mon:
        time.sleep(0.1)
    assert mon.error is None and "h0: socket diagnostics failed" in mon.meta["rtt_error"]
    assert mon.samples > 2 and "cpu_idle" in set(mon.table().column("metric").to_pylist())  # the rest sampled on


# --- tune auto: the fidelity of a search from its visits' recorded monitor summaries ----------

def _visit(setting, spare, k=1.0, phase="search"):
    """One visit of ``setting`` as ``tune auto`` records it (``observe.observed``'s facts), its
    monitor summary made by ``monitor_facts`` from a table of 10 spare-CPU samples."""
    import pandas as pd

    from clusterlab.tune.auto import transport_of

    df = pd.DataFrame({"t": [0.1 * i for i in range(10)], "node": ["machine"] * 10, "iface": [""] * 10,
                       "metric": ["cpu_spare"] * 10, "value": [spare] * 10})
    tcp = transport_of(dict(p.split("=", 1) for p in setting.split(",")))
    return {"setting": setting, "phase": phase, "runs": 1, "cpu_spare": spare,
            "cluster": {"kind": "testbed", "rate": "155Mbit", "buffer": "64KB", "dilation": k},
            "transport": {key: v for key, v in tcp.to_dict().items() if v is not None},
            "monitor": fidelity.monitor_facts(df, {"dilation": k, "interval": 0.1})}


def test_a_search_is_believed_only_when_every_setting_visited_passes():
    from clusterlab.diagnose.search import search_fidelity, setting_lines

    fast, slow = "rto_min=5ms,order=same", "rto_min=200ms,order=same"
    # at dilation 1 a 5 ms RTO min is 1.25 jiffies: that setting fails (the timer only), the other passes
    r = search_fidelity([_visit(fast, 0.8), _visit(slow, 0.8), _visit(fast, 0.8, phase="confirm")], 1.0, fast)
    assert not r["ok"] and r["chosen_ok"] is False
    by = {s["setting"]: s for s in r["settings"]}
    assert by[fast]["failed"] == ["timer"] and by[fast]["failed_visits"] == 2 and by[slow]["ok"]
    assert r["next_dilation"] == 4.0 and "only the timer failed" in r["why"]  # the smallest that passes
    assert r["line"].startswith("fidelity: FAIL (1 of 2 settings visited fail at dilation 1: rto_min=5ms,order=same "
                                "(timer; the chosen setting); timer: RTO min 5 ms as run (1x dilated) is 1.25 jiffies")
    assert "search again at --dilation 4" in r["line"] and len(r["visits"]) == 3
    assert setting_lines(r) == [f"fidelity of {fast} (2 of 2 visits fail): FAIL (RTO min 5 ms as run (1x dilated) "
                                "is 1.25 jiffies of 4 ms (HZ=250): rounded up to whole jiffies, the timer is off by up "
                                "to 80%; dilate more)"]
    # the same search at dilation 4: every setting passes, the line is the chosen setting's checks
    r4 = search_fidelity([_visit(fast, 0.8, 4.0), _visit(slow, 0.8, 4.0)], 4.0, fast)
    assert r4["ok"] and r4["next_dilation"] is None and setting_lines(r4) == []
    assert r4["line"].startswith("fidelity: PASS - every setting's runs pass the check at dilation 4 (2 settings, "
                                 "2 visits); the chosen rto_min=5ms,order=same's: spare CPU 80%")
    # one CPU-starved visit fails its setting (not the chosen one here); CPU says twice the dilation
    r4c = search_fidelity([_visit(fast, 0.8, 4.0), _visit(slow, 0.8, 4.0), _visit(slow, 0.05, 4.0)], 4.0, fast)
    by = {s["setting"]: s for s in r4c["settings"]}
    assert by[slow]["failed"] == ["cpu"] and by[slow]["failed_visits"] == 1 and by[slow]["visits"] == 2
    assert r4c["chosen_ok"] and r4c["next_dilation"] == 8.0 and "not the chosen" in r4c["line"]
    assert "spare CPU 5%" in r4c["line"]
    # a rung at which a setting cannot run says so (MAX 60 s x 4 is over the kernel's 120 s)
    odd = "rto_min=5ms,rto_max=60s"
    rm = search_fidelity([_visit(odd, 0.8)], 1.0, odd)
    assert rm["next_dilation"] == 4.0 and "drop that setting from --grid" in rm["line"]
    assert search_fidelity([], 1.0)["line"].startswith("fidelity: not judged")


def test_an_incasts_timeouts_and_its_queueing_keep_their_own_fixes_and_the_gain_says_what_it_covers():
    # 2 s: rank 0 waits 0.2 s on one timeout; the rest of the 2 s, beyond the 155 Mbit/s line rate, is
    # queueing at the port. A lower RTO min shortens the timeout, not the queueing: one cause, two fixes.
    p = Pass("all", 2.0, [rp(0, 2.0, 0.0, rto=0.2, timeouts=1, bytes_=1e6), rp(1, 2.0, 0.0, bytes_=1e6),
                          rp(2, 2.0, 0.0, bytes_=1e6), rp(3, 2.0, 0.0, bytes_=1e6)])
    d = diagnose(Job("b", "study", 2.0, passes=[p], nodes=4, switch_drops=30, transport={"rto_min": "200ms"},
                     cluster={"kind": "testbed", "rate": 155e6, "dilation": 1.0}))
    dom = d["dominant"]
    assert dom["cause"] == "incast_switch_drops" and dom["seconds"] > 1.5
    assert "TransportConfig rto_min=10ms" in dom["fix"] and "larger port buffers" in dom["fix"]
    assert dom["fix"].count(" of it)") == 2
    assert 0 < dom["predicted_gain_s"] < 0.2  # the timeout's part only
    assert "this covers 200.0 ms of the" in dom["method"] and "has no prediction" in dom["method"]


def test_a_study_rows_time_before_pass_1_is_computation_also_from_a_csv_table(tmp_path):
    """A replayed mining point's row: passes 1-2 and, before them, the read and first count (in
    the job's seconds, in no pass). Its per-pass lists as a CSV table holds them (JSON text):
    one rank, nothing sent, so no communication loss is named."""
    from clusterlab.diagnose.rules import diagnose
    from clusterlab.diagnose.run import _study_job

    row = {"label": "ranks=1", "ranks": 1, "seconds": 130.0, "seconds_by_pass": "[60.0, 40.0005]",
           "time_compute_by_pass": "[60.0, 40.0]", "time_rto_wait_by_pass": "[0.0, 0.0]", "time_compute": 100.0,
           "time_transfer": 0.0005, "time_rto_wait": 0.0, "bytes_sent": 0}
    job = _study_job(tmp_path, row, {"workload": {"name": "parallel_mining", "params": {}}}, None, None, 0)
    assert [p.number for p in job.passes] == [0, 1, 2] and job.passes[0].seconds == pytest.approx(29.9995)
    d = diagnose(job)
    assert d["dominant"] is None  # 0.5 ms of calls to itself is no loss worth naming
    assert [c for c in d["causes"] if c["cause"] == "compute"][0]["seconds"] == pytest.approx(129.9995)
