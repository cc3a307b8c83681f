"""``compute_scale``: a replayed job's computation c times slower (seed 000's CPU against
ours), refused with the reason when the study expands, and really slowing the replay."""

import json

import pytest

from clusterlab.errors import ConfigError
from clusterlab.experiments.runner import run_study
from clusterlab.experiments.spec import Grid, Loopback, Study
from clusterlab.experiments.workloads import hpa_job

DATA = "seed000:20K"


def _study(**grid):
    return Study(name="cs", cluster=Loopback(ranks=2), workload=hpa_job(data=DATA, compute="replay"),
                 grid=Grid(**grid), repeat=1, warmup=0, monitor=False)


@pytest.mark.parametrize("bad", ["0", "-2", "fast", "1e9"])
def test_bad_scale_is_refused_when_the_study_expands(bad):
    with pytest.raises(ConfigError, match="compute_scale"):
        _study(compute_scale=[1]).with_settings({"compute_scale": bad}).points()


def test_scale_needs_a_replay():
    with pytest.raises(ConfigError, match="needs compute=replay"):
        hpa_job(compute="real", compute_scale=30)
    study = Study(name="cs", cluster=Loopback(ranks=2), workload=hpa_job(data=DATA), grid=Grid(compute_scale=[1, 5]))
    with pytest.raises(ConfigError, match="needs compute=replay"):
        study.points()


def test_replay_waits_the_scaled_computation(tmp_path, monkeypatch, capsys):
    from clusterlab.experiments import recording_load
    from clusterlab.report.study import render

    measure = recording_load.measure
    # as if other processes had taken 40% of the machine while the recording ran, all of it from
    # the ranks' cores (the rest of what was measured is kept)
    monkeypatch.setattr(recording_load, "measure", lambda before, ranks=None: {
        **measure(before, ranks), "foreign_cpu_share": 0.4, "displaced_cpu_share": 0.4})
    res = run_study(_study(compute_scale=[1, 40]), tmp_path / "run", cache_dir=tmp_path / "cache")
    by = {r["compute_scale"]: r for r in res.rows}
    assert by[1]["itemsets"] == by[40]["itemsets"] > 0
    assert by[1]["bytes_sent"] == by[40]["bytes_sent"]  # the same messages
    # 40x the recorded mining: the replayed compute part grows by that factor, less the runtime
    # part (statistics, the mesh's reader thread) replayed unscaled, about half of it in a job
    # this small (measured 19x in all)
    assert by[40]["time_compute"] > 10 * by[1]["time_compute"] > 0
    assert by[40]["seconds"] > by[1]["seconds"]
    # the recording (made once, shared by both points) says how much of the machine other
    # processes took while it ran, and every replayed row and point carries it
    (rec,) = (tmp_path / "cache" / "replay").glob("*/recording.json")
    load = json.loads(rec.read_text())
    assert set(load) >= {"wall_s", "job_cpu_s", "machine_busy_cpu_s", "foreign_cpu_share", "displaced_cpu_share",
                         "ranks", "cpus", "load_before", "load_after"}
    assert load["job_cpu_s"] > 0 and load["foreign_cpu_share"] == 0.4
    assert {r["recording_foreign_cpu"] for r in res.rows} == {0.4}
    assert all(pm["recording_foreign_cpu"] == 0.4 for pm in res.meta["points"])
    # said when the recording finished, once, and in the study's report
    err = capsys.readouterr().err
    assert err.count("recording of 2 ranks: 40% of the machine's CPU went to other processes") == 1
    render(tmp_path / "run")
    assert "**noisy recordings**" in (tmp_path / "run" / "report.md").read_text()


def test_seed000s_whole_itemset_hash_is_a_setting_with_its_own_recording(tmp_path):
    """``partition`` (an axis like any other): seed 000's hash of the whole itemset beside
    clusterlab's prefix partitioning, each replaying its own recording, the same itemsets."""
    with pytest.raises(ConfigError, match="partition must be one of prefix, itemset, got 'rows'"):
        _study(partition=["rows"]).points()
    with pytest.raises(ConfigError, match="partition=itemset is HPA's"):
        Study(name="cs", cluster=Loopback(ranks=2), workload=hpa_job(data=DATA).with_params(algorithm="cd"),
              grid=Grid(partition=["itemset"])).points()
    res = run_study(_study(partition=["prefix", "itemset"]), tmp_path / "run", cache_dir=tmp_path / "cache")
    by = {r["partition"]: r for r in res.rows}
    assert by["prefix"]["itemsets"] == by["itemset"]["itemsets"] > 0
    # the seed's scheme ships every transaction's k-subsets, not each transaction once per owner
    assert by["itemset"]["bytes_sent"] > by["prefix"]["bytes_sent"]
    recs = sorted((tmp_path / "cache" / "replay").glob("*/job.json"))
    assert len(recs) == 2
    configs = {json.loads(p.with_name("rank0.json").read_text())["meta"]["config"]["partition"] for p in recs}
    assert configs == {"prefix", "itemset"}
