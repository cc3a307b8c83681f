"""Studies on the simulated cluster: the grid axis ``cluster`` and a study run end to end."""

import pytest

from clusterlab.cluster import Simulated, Testbed
from clusterlab.cluster.simulated.run import why_no_engine
from clusterlab.errors import ConfigError
from clusterlab.experiments.spec import Grid, StarTopo, Study
from clusterlab.experiments.workloads import alltoall_broadcast


def test_grid_axis_cluster_swaps_testbed_and_simulated():
    s = Study(name="ab", cluster=Testbed(StarTopo(hosts=8, rate="100Mbit")), workload=alltoall_broadcast(),
              grid=Grid(cluster=["testbed", "simulated"], hosts=[4, 8]), repeat=1)
    pts = s.points()
    assert [(p.settings["cluster"], p.cluster.n_ranks()) for p in pts] == [
        ("testbed", 4), ("testbed", 8), ("simulated", 4), ("simulated", 8)]
    assert isinstance(pts[2].cluster, Simulated) and pts[2].cluster.topo.rate == "100Mbit"
    assert s.with_settings({"cluster": "simulated"}).points()[0].settings["cluster"] == "simulated"
    with pytest.raises(ConfigError, match="one of testbed, simulated"):
        Study(name="ab", cluster=Testbed(StarTopo(hosts=8)), workload=alltoall_broadcast(),
              grid=Grid(cluster=["testbed", "cloud"]))
    sim = Study(name="ab", cluster=Simulated(StarTopo(hosts=8), latency_factor=2.0), workload=alltoall_broadcast(),
                grid=Grid(cluster=["simulated", "testbed"]), repeat=1).points()
    assert [p.settings["cluster"] for p in sim] == ["simulated", "testbed"] and sim[0].cluster.latency_factor == 2.0


def test_transport_settings_refused_on_a_simulated_point():
    from clusterlab.experiments.runner import run_study

    s = Study(name="ab", cluster=Simulated(StarTopo(hosts=4)), workload=alltoall_broadcast(),
              grid=Grid(sndbuf=["64KB"]), repeat=1)
    with pytest.raises(ConfigError, match="no TCP timers"):
        run_study(s)
    # the timers reach the loss model (a study's tuned-timer axis runs simulated too)...
    ok = Study(name="ab", cluster=Simulated(StarTopo(hosts=4)), workload=alltoall_broadcast(),
               grid=Grid(rto_min=["5ms", "200ms"]), repeat=1).points()
    assert [p.tcp.rto_min for p in ok] == [0.005, 0.2]
    # ...unless it is off: then they would be ignored
    off = Study(name="ab", cluster=Simulated(StarTopo(hosts=4), loss_model=False), workload=alltoall_broadcast(),
                grid=Grid(rto_min=["5ms"]), repeat=1)
    with pytest.raises(ConfigError, match="no TCP timers"):
        run_study(off)


def test_study_runs_simulated(tmp_path):
    why = why_no_engine()
    if why:
        pytest.skip(why)
    from clusterlab.experiments.runner import run_study

    s = Study(name="ab", cluster=Simulated(StarTopo(hosts=8, rate="155Mbit"), loss_model=False), workload=alltoall_broadcast(size="50KB"),
              grid=Grid(hosts=[4, 8]), repeat=2)
    res = run_study(s, tmp_path / "run")
    assert res.status == "complete" and len(res.rows) == 4
    t4, t8 = (r["seconds"] for r in res.rows[::2])
    # n-1 blocks of 50 KB per link: 3 vs 7
    assert t8 / t4 == pytest.approx(7 / 3, rel=0.05)
    assert all(r["cluster"] == "simulated" and r["time_rto_wait"] == 0.0 for r in res.rows)
    assert (tmp_path / "run" / "meta.json").exists()


@pytest.mark.root
def test_mixed_study_reports_the_error(tmp_path):
    """cluster: [testbed, simulated] on 4 hosts: both run, the report pairs them."""
    from ..testbed.helpers import require_netns

    require_netns()
    why = why_no_engine()
    if why:
        pytest.skip(why)
    from clusterlab.experiments.runner import run_study
    from clusterlab.report.study import render

    s = Study(name="mixed", cluster=Testbed(StarTopo(hosts=4, rate="155Mbit")), workload=alltoall_broadcast(size="2KB"),
              grid=Grid(cluster=["testbed", "simulated"]), repeat=3, monitor=False)
    res = run_study(s, tmp_path / "run")
    assert res.status == "complete" and {r["cluster"] for r in res.rows} == {"testbed", "simulated"}
    render(tmp_path / "run")
    md = (tmp_path / "run" / "report.md").read_text()
    assert "## Simulated beside the testbed" in md and "%" in md.split("## Simulated beside the testbed")[1]
