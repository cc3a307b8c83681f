"""Study specs: expansion, the dilation pick, refusals (never clamps), overrides. No I/O."""

from __future__ import annotations

import pytest

from clusterlab.errors import ConfigError
from clusterlab.experiments import (
    Grid,
    InProcess,
    Loopback,
    StarTopo,
    Study,
    Testbed,
    TransportConfig,
    clusters,
    load,
    names,
)
from clusterlab.experiments.spec import parse_settings, pick_dilation
from clusterlab.experiments.workloads import alltoall_broadcast, hpa_job


@pytest.mark.parametrize("name", names())
@pytest.mark.parametrize("quick", [False, True])
def test_every_study_expands_and_every_setting_is_in_range(name, quick):
    s = load(name)
    s = s.with_quick() if quick else s
    points = s.points()
    assert points and len({p.label + p.check for p in points}) == len(points)
    for p in points:
        assert p.dilation >= 1
        if isinstance(p.cluster, Testbed):
            for h, sc in clusters.testbed_sysctls(p).items():
                if clusters.MAX_SYSCTL in sc:
                    assert 1000 <= sc[clusters.MAX_SYSCTL] <= 120000, (name, p.label, h)
                    assert sc[clusters.MIN_SYSCTL] <= sc[clusters.MAX_SYSCTL] * 1000
    if quick:
        assert s.repeat <= 3 and len(points) <= 6


def test_seed000_figures_are_the_papers_settings():
    fig3 = {p.settings["rto_min"]: p for p in load("seed000-fig3").points() if not p.check and
            p.settings["hosts"] == 16}
    for p in fig3.values():  # MAX = MIN + 100 ms on every host, dilated as little as possible
        for sc in clusters.testbed_sysctls(p).values():
            assert sc[clusters.MAX_SYSCTL] * 1000 == pytest.approx(sc[clusters.MIN_SYSCTL] + 100_000 * p.dilation)
        assert p.dilation * (p.tcp.min_range()[0] + 0.1) >= 1.0
    # every line of a figure at one dilation: the smallest MAX (110 ms) needs k >= 9.1
    assert {p.dilation for p in load("seed000-fig3").points() if not p.check} == {10.0}
    assert {p.settings["switch"] for p in load("seed000-fig3").points()} == {"bridge", "atm"}
    fig5 = [p for p in load("seed000-fig5").points() if p.settings["rto_min_jitter"] == "100ms"]
    p = fig5[0]
    sc = clusters.testbed_sysctls(p)
    k, lo = p.dilation, p.tcp.min_range()[0]
    mins = [v[clusters.MIN_SYSCTL] / 1e6 / k for v in sc.values()]
    maxs = [v[clusters.MAX_SYSCTL] / 1e3 / k for v in sc.values()]
    assert len(sc) == 16 and len(set(mins)) == 16  # every host its own MIN
    assert all(lo <= mn <= lo + 0.1 + 1e-6 and mx == pytest.approx(mn + 0.1, abs=1e-3) for mn, mx in zip(mins, maxs, strict=True))
    fig2 = load("seed000-fig2").points()
    # one dilation for the whole MAX sweep: 500 ms needs k >= 2, and at k = 3 the sweep ends at 40 s
    assert max(p.settings["rto_max_s"] for p in fig2) == 40.0
    assert {p.dilation for p in fig2 if not p.check} == {3.0}
    assert sum(1 for p in fig2 if p.check) == 2
    fig6 = load("seed000-fig6")
    assert fig6.workload.params["compute"] == "replay"  # 2 cores cannot compute for 100 hosts
    assert {p.settings["ranks"] for p in fig6.points()} == {1, 2, 4, 8, 16, 32, 64, 100}
    for p in fig6.points():  # the seed's own settings: the tuned MAX = MIN + 100 ms, dilated to fit
        sc = clusters.testbed_sysctls(p)
        assert len(sc) == max(2, p.settings["ranks"])
        if p.tcp.rto_max_offset is not None:
            assert all(v[clusters.MAX_SYSCTL] * 1000 == pytest.approx(v[clusters.MIN_SYSCTL] + 100_000 * p.dilation, abs=1000)
                       for v in sc.values())
        elif p.tcp.rto_max == 40.0:  # the default MIN at the tuned line's dilation
            assert p.dilation == 3.0
        else:
            assert p.dilation <= 2.0 and p.tcp.rto_max == 60.0


def test_dilation_is_picked_or_refused_never_clamped():
    assert pick_dilation(TransportConfig(rto_min="200ms", rto_max_offset="100ms"), "auto")[0] == 4.0
    assert pick_dilation(TransportConfig(rto_min="200ms", rto_max="60s"), "auto", prefer=10)[0] == 2.0
    assert pick_dilation(TransportConfig(), "auto", prefer=10)[0] == 10.0
    with pytest.raises(ConfigError, match=r"needs dilation >= 3.33"):
        pick_dilation(TransportConfig(rto_min="200ms", rto_max_offset="100ms"), 1)
    with pytest.raises(ConfigError, match=r"above the 120000 ms .* needs dilation <= 2"):
        pick_dilation(TransportConfig(rto_min="200ms", rto_max="60s"), 4)
    with pytest.raises(ConfigError, match="no dilation can express"):  # 500 ms .. 130 s: no k fits both
        pick_dilation(TransportConfig(rto_min="400ms", rto_min_jitter="70s", rto_max_offset="100ms"), "auto")
    s = Study(name="x", cluster=Testbed(StarTopo(hosts=4), dilation=2), workload=alltoall_broadcast(),
              grid=Grid(rto_max=["300ms"]), transport=TransportConfig(rto_min="200ms"))
    with pytest.raises(ConfigError, match=r"point 0 \(rto_max=300ms\): dilation 2 cannot express it"):
        s.points()


def test_settings_a_cluster_cannot_take_are_refused_with_the_reason():
    wl = alltoall_broadcast()
    with pytest.raises(ConfigError, match="TCP_RTO_MIN_US accepts .*5ms..200ms"):
        Study(name="x", cluster=Loopback(), workload=wl, transport=TransportConfig(rto_min="250ms", rto_min_jitter="100ms")).points()
    with pytest.raises(ConfigError, match="outside what TCP_RTO_MAX_MS accepts"):
        Study(name="x", cluster=Loopback(), workload=wl, transport=TransportConfig(rto_min="5ms", rto_max_offset="100ms")).points()
    with pytest.raises(ConfigError, match="TCP_RTO_MAX_MS"):
        Study(name="x", cluster=Loopback(), workload=wl, transport=TransportConfig(rto_max="500ms")).points()
    with pytest.raises(ConfigError, match="no TCP"):
        Study(name="x", cluster=InProcess(), workload=wl, transport=TransportConfig(rto_min="5ms")).points()
    with pytest.raises(ConfigError, match="computes for real"):
        Study(name="x", cluster=Testbed(StarTopo(hosts=2), dilation="auto"), workload=hpa_job(data="x.dat"),
              transport=TransportConfig(rto_min="200ms", rto_max_offset="100ms")).points()
    with pytest.raises(ConfigError, match="rto_max 100ms is below the largest MIN 200ms"):
        TransportConfig(rto_min="200ms", rto_max="100ms")
    with pytest.raises(ConfigError, match="not both"):
        TransportConfig(rto_min="5ms", rto_max="1s", rto_max_offset="100ms")
    with pytest.raises(ConfigError, match="unknown transport setting 'rto_mni'"):
        TransportConfig.parse("rto_mni=5ms")


def test_set_and_quick_overrides():
    s = load("seed000-fig3")
    both = s.with_settings(parse_settings(["rto_min=5ms,1s", "scale=16 hosts", "switch=atm"]))  # both stacks
    assert [(p.settings["stack"], p.settings["rto_min"]) for p in both.points() if not p.check] == \
        [("linux", "5ms"), ("linux", "1s"), ("seed-era", "5ms"), ("seed-era", "1s")]
    t = s.with_settings(parse_settings(["repeat=2", "rto_min=5ms,1s", "scale=16 hosts", "hosts=4", "stack=linux",
                                        "switch=bridge", "dilation=auto"]))
    pts = [p for p in t.points() if not p.check]
    assert t.repeat == 2 and [p.settings["rto_min"] for p in pts] == ["5ms", "1s"]
    assert all(p.settings["hosts"] == 4 for p in t.points())  # the checks too
    assert [p.dilation for p in pts] == [10.0, 1.0]
    t = load("broadcast-incast").with_settings({"tcp": "default;rto_min=250ms,rto_min_jitter=100ms,rto_max=1s"})
    assert {p.settings["tcp"] for p in t.points()} == {"kernel default", "MIN 250ms..350ms random per node, MAX 1s"}
    t = load("seed000-fig6").with_settings({"timers": "default at k=3 (MIN 200 ms / MAX 40 s)", "ranks": "4"})
    assert [(p.settings["rto_max"], p.dilation) for p in t.points()] == [("40s", 3.0)] * 4  # x compute_scale x switch
    for bad, msg in ((["nope=1"], "has no such setting"), (["repeat=x"], "not an integer"),
                     (["scale=7 hosts"], "choose among"), (["repeat"], "expected key=value")):
        with pytest.raises(ConfigError, match=msg):
            s.with_settings(parse_settings(bad))


def test_a_study_cluster_is_the_cluster_a_python_user_builds():
    """``cluster=`` takes the cluster layer's own objects: ``Testbed(StarTopo(...))`` (settings
    by the topology's field names, every point's topology a StarTopo at its dilation) and
    ``Local()``/``Mpirun()``/``InProcess()`` (ranks a setting; the points run on copies of the
    object, its other settings kept). ``experiments.InProcess`` is the cluster layer's class."""
    from clusterlab import cluster

    topo = StarTopo(hosts=4, rate="1Gbit", buffer="256KB", mtu=1500)
    s = Study(name="x", cluster=cluster.Testbed(topo, dilation="auto"), workload=alltoall_broadcast(),
              grid=Grid(hosts=[2, 4], rto_min=["200ms"], rto_max_offset=["100ms"]))
    pts = s.points()
    assert [(p.cluster.topo.hosts, p.cluster.topo.mtu, p.dilation, p.cluster.topo.dilation) for p in pts] == \
        [(2, 1500, 4.0, 4.0), (4, 1500, 4.0, 4.0)]
    assert all(isinstance(p.cluster, cluster.Testbed) and p.settings["cluster"] == "testbed" for p in pts)
    assert s.to_dict()["cluster"]["rate"] == "1Gbit"
    local = cluster.Local(iface="lo")
    s = Study(name="y", cluster=local, workload=alltoall_broadcast()).with_settings({"ranks": "3"})
    (p,) = s.points()
    assert p.settings["cluster"] == "loopback" and p.cluster.n_ranks() == 3
    assert type(p.cluster) is cluster.Local and p.cluster.iface == "lo" and local.ranks is None  # a copy
    assert InProcess is cluster.InProcess
    s = Study(name="v", cluster=cluster.InProcess(), workload=alltoall_broadcast(), grid=Grid(ranks=[2, 3]))
    assert [(type(p.cluster), p.cluster.n_ranks()) for p in s.points()] == [(cluster.InProcess, 2), (cluster.InProcess, 3)]
    assert s.to_dict()["cluster"] == {"kind": "inprocess", "ranks": 4}
    assert Study(name="z", cluster=cluster.Mpirun(), workload=alltoall_broadcast()).cluster.kind == "mpi"
    with pytest.raises(ConfigError, match=r"cluster=Testbed\(StarTopo\(\.\.\.\)\), not a testbed that is up"):
        Study(name="w", cluster=cluster.Testbed("lab"), workload=alltoall_broadcast())
    with pytest.raises(ConfigError, match="cluster must be"):
        Study(name="w", cluster=cluster.Launched(), workload=alltoall_broadcast())
    with pytest.raises(ConfigError, match=r"Testbed\(StarTopo\(hosts=8\)\)"):  # the old spelling, with the new one
        Testbed(hosts=8)


def test_hosts_none_follows_the_ranks():
    c = Testbed(StarTopo(hosts=16)).with_settings(hosts=None)
    s = Study(name="x", cluster=c, workload=alltoall_broadcast(), grid=Grid(ranks=[1, 3]))
    assert [(p.cluster.topo.hosts, p.cluster.n_ranks()) for p in s.points()] == [(2, 1), (3, 3)]


def test_checks_none_leaves_out_the_checks_points():
    """A study run in parts (experiment merge) runs its dilation checks in one part only."""
    from clusterlab.experiments.studies import load

    study = load("seed000-fig3")
    assert any(p.check for p in study.points())
    assert not any(p.check for p in study.with_settings({"checks": "none"}).points())
    assert [p.label for p in study.with_settings({"checks": "all"}).points()] == [p.label for p in study.points()]
    with pytest.raises(ConfigError, match="checks: none or all"):
        study.with_settings({"checks": "some"})
