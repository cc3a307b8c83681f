"""`tune auto --workload hpa`: the HPA job's knobs are checked before anything runs, a cost
model can be told which allreduce to use, the rank function times repeated jobs that find the
same itemsets, and (root) a tiny search and grid run on a testbed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from clusterlab.comm.costmodel import CostModel
from clusterlab.errors import ConfigError
from clusterlab.tune import auto
from tests.testbed.helpers import fresh_name, netns_unavailable


def test_hpa_space_has_its_own_knobs():
    sp = auto.parse_space(auto.HPA_SPACE, workload="hpa")
    assert list(sp) == ["rto_min", "congestion", "sndbuf", "allreduce", "block"] and len(auto.settings(sp)) == 32
    for bad, words in [("allreduce=fastest", "allreduce is auto or one of"), ("block=12", "64 bytes to 64MiB"),
                       ("block=huge", "64 bytes to 64MiB"), ("order=same", "not a knob of the hpa workload")]:
        with pytest.raises(ConfigError, match=words):
            auto.parse_space(bad, workload="hpa")
    with pytest.raises(ConfigError, match="not a knob of the alltoall_broadcast workload"):
        auto.parse_space("allreduce=ring")
    with pytest.raises(ConfigError, match="one of alltoall_broadcast, hpa"):
        auto.parse_space("rto_min=5ms", workload="npb")


def test_transport_of_leaves_out_the_hpa_knobs():
    cfg = auto.transport_of({"rto_min": "5ms", "allreduce": "ring", "block": "64KiB"})
    assert cfg.rto_min == 0.005 and cfg.sndbuf is None


def test_a_fixed_choice_overrides_the_models_pick():
    free = CostModel(concurrency=0)
    fixed = CostModel(concurrency=0, fixed={"allreduce": "ring"})
    assert free.pick("allreduce", 8, 16) != "ring"  # the model alone picks another one for 8 bytes
    assert fixed.pick("allreduce", 8, 16) == "ring" and fixed.pick("bcast", 8, 16) == free.pick("bcast", 8, 16)
    assert CostModel.from_dict(fixed.to_dict()).fixed == {"allreduce": "ring"}
    with pytest.raises(ValueError, match="unknown allreduce algorithm"):
        CostModel(fixed={"allreduce": "nope"}).pick("allreduce", 8, 4)
    with pytest.raises(ConfigError, match="fixed"):
        CostModel(fixed={"allreduce": 3})


def _tiny(tmp_path):
    from clusterlab.data.generate import generate_file

    path = str(tmp_path / "tiny.dat")
    generate_file(path, "T10I4D100K", transactions=3000, seed=1)
    return path


def test_hpa_runs_times_every_job_and_they_agree(tmp_path):
    from clusterlab.comm.inproc import run_threads
    from clusterlab.mining import mine

    path = _tiny(tmp_path)
    out = run_threads(auto.hpa_runs, 3, path, 0.02, 8192, "auto", 3, 1, timeout=120)
    assert out[1] is None and out[2] is None
    assert len(out[0]["seconds"]) == 3 and all(t > 0 for t in out[0]["seconds"])
    assert out[0]["itemsets"] == [mine(path, min_support=0.02).num_rows] * 3


def test_hpa_workload_refuses_bad_data_and_support_before_a_testbed(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        auto.tune_auto(workload="hpa", data=str(tmp_path / "none.dat"), space="rto_min=5ms", hosts=2)
    with pytest.raises(ConfigError, match="min_support must be > 0"):
        auto.tune_auto(workload="hpa", data=str(tmp_path / "none.dat"), min_support=-1, space="rto_min=5ms", hosts=2)


@pytest.mark.parametrize("args, words", [
    (["--workload", "hpa", "--grid", "order=same"], "not a knob of the hpa workload"),
    (["--workload", "hpa", "--grid", "block=1"], "--grid block=1"),
    (["--workload", "hpa", "--min-support", "0"], "min_support must be > 0"),
    (["--workload", "hpa", "--budget", "3"], "below one run per setting (32 settings)"),
])
def test_cli_bad_hpa_input_is_one_line_exit_2(args, words):
    p = subprocess.run([sys.executable, "-m", "clusterlab", "tune", "auto", *args], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2, p.stderr
    assert words in p.stderr and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr


@pytest.mark.slow
def test_on_a_testbed_the_hpa_search_runs_a_quarter_of_the_grid(tmp_path):
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    res = auto.tune_auto(workload="hpa", data=_tiny(tmp_path), min_support=0.02, hosts=3, rate="155Mbit",
                         buffer="64KB", space="rto_min=5ms,200ms;allreduce=auto,ring", runs=4, grid=True, confirm=2,
                         name=fresh_name())
    assert res["search"]["runs"] <= 4 and res["grid"]["runs"] == 16 and res["comparison"]["runs_share"] <= 0.25
    assert len(res["workload"]["itemsets"]) == 1  # every job at every setting found the same itemsets
    assert res["confirm"]["defaults"]["setting"] == "default" and "ci95" in res["confirm"]["chosen"]
    json.dumps(res)
