"""Topology, link shaping lines, sysctl draws and CLI argument errors (no root needed)."""

import pytest
from click.testing import CliRunner

from clusterlab.cluster.testbed import link
from clusterlab.cluster.testbed.sysctl import host_sysctls
from clusterlab.cluster.testbed.topo import StarTopo, check_name
from clusterlab.errors import ConfigError
from clusterlab.net.transport_config import TransportConfig


def test_defaults_follow_the_probe():
    t = StarTopo(hosts=16)
    assert (t.rate_bps, t.buffer_bytes, t.mtu, t.dilation) == (155e6, 64000, 9000, 1.0)
    assert len(set(t.address(i) for i in range(16))) == 16
    assert all(t.address(i).startswith("10.") for i in range(16))
    assert len({t.mac(i) for i in range(1000)}) == 1000


@pytest.mark.parametrize("kw,msg", [
    ({"hosts": 1}, "hosts must be 2..1000"),
    ({"hosts": 1001}, "hosts must be 2..1000"),
    ({"mtu": 20}, "mtu must be"),
    ({"dilation": 0.5}, "dilation must be >= 1"),
    ({"buffer": "1KB"}, "cannot hold one 9000-byte packet"),
    ({"rate": "1kbit"}, "rate must be at least"),
    ({"rate": "fast"}, "cannot read rate"),
    ({"tbf_bucket": "0s"}, "tbf_bucket must be a duration above 0"),
    ({"tbf_bucket": "soon"}, "tbf_bucket: "),
])
def test_bad_topologies_are_refused(kw, msg):
    with pytest.raises(ConfigError, match=msg):
        StarTopo(**kw)


def test_storage_host_is_extra():
    t = StarTopo(hosts=4, storage=True)
    assert t.host_names() == ["h0", "h1", "h2", "h3", "st"] and t.n_nodes == 5


def test_names_fit_interface_limits():
    with pytest.raises(ConfigError):
        check_name("toolongname")
    t = StarTopo(hosts=1000)
    lines = link.veth_lines("abcdefgh", t)
    # interface names inside the namespaces stay within IFNAMSIZ-1
    assert all(len(w) <= 15 for ln in lines for w in (ln.split()[2], ln.split()[ln.split().index("peer") + 2]))


def test_shaping_lines_use_rate_buffer_and_dilation():
    t = StarTopo(hosts=3, rate="100Mbit", buffer="128KB", host_queue="300KB", dilation=4)
    ports = link.port_qdisc_lines(t)
    assert ports == [f"qdisc replace dev p{i} root tbf rate 25000000bit burst 18028 limit 128000" for i in range(3)]
    assert link.host_qdisc_lines(t) == ["qdisc replace dev eth0 root tbf rate 25000000bit burst 18028 limit 300000"]
    hl = link.host_lines(t, 1)
    assert "addr add 10.0.0.2/16 dev eth0" in hl
    assert sum("nud permanent" in x for x in hl) == 3  # two peers + the switch
    assert link.fdb_lines(t)[2] == f"fdb replace {t.mac(2)} dev p2 master static"


def test_tbf_bucket_is_two_frames_up_to_a_gigabit_and_100us_of_rate_above():
    # two frames: each frame leaves at the link rate (seed 000's 155 Mbit/s, seed 001's 1 Gbit/s)
    assert link.burst_bytes(StarTopo(rate="1Gbit")) == link.burst_bytes(StarTopo(rate="155Mbit")) == 2 * 9014
    # above: a frame-by-frame timer would set the rate, not the link (10 Gbit/s: 100 us = 125 KB)
    assert link.burst_bytes(StarTopo(rate="10Gbit")) == 125_000
    assert link.burst_bytes(StarTopo(rate="10Gbit", dilation=10)) == 2 * 9014  # 1 Gbit/s after dilation
    assert link.burst_bytes(StarTopo(rate="10Gbit", tbf_bucket="1us")) == 2 * 9014  # never below two frames
    t = StarTopo(hosts=2, rate="10Gbit", tbf_bucket="200us")
    assert link.port_qdisc_lines(t)[0] == "qdisc replace dev p0 root tbf rate 10000000000bit burst 250000 limit 64000"
    assert link.burst_bytes(StarTopo.from_dict(t.to_dict())) == 250_000  # a saved topology keeps it


def test_sysctl_draws_are_seeded_and_in_range():
    def draw(hosts, dilation=1.0, **kw):
        return host_sysctls(TransportConfig(**kw), hosts, dilation)

    s = dict(rto_min="5ms", rto_min_jitter="100ms", rto_max="1s")
    d = draw([f"h{i}" for i in range(50)], **s, seed=3)
    mins = [v["net/ipv4/tcp_rto_min_us"] for v in d.values()]
    assert all(5000 <= m <= 105000 for m in mins) and len(set(mins)) > 40
    assert all(v["net/ipv4/tcp_rto_max_ms"] == 1000 for v in d.values())
    assert d == draw(list(d), **s, seed=3)
    assert d != draw(list(d), **s, seed=4)
    # A MAX the kernel cannot take (tcp_rto_max_ms is 1s..120s) is refused, never clamped (it was
    # clamped to 1 s before); at dilation 2 the same setting is 1 s and expressible.
    with pytest.raises(ConfigError, match=r"rto_max 500ms is outside .*tcp_rto_max_ms accepts \(1s..120s\); "
                                          r"dilations 2..240 can express it"):
        draw(["h0"], rto_min="5ms", rto_min_jitter="100ms", rto_max="500ms", seed=3)
    assert draw(["h0"], 2, rto_min="5ms", rto_max="500ms")["h0"]["net/ipv4/tcp_rto_max_ms"] == 1000
    with pytest.raises(ConfigError, match="needs its base value"):
        TransportConfig(rto_min_jitter="10ms")
    with pytest.raises(ConfigError, match="min <= default <= max"):
        TransportConfig(rmem="100 50 10")


def test_cli_reports_bad_settings_as_one_line():
    from clusterlab.cli import cli

    r = CliRunner().invoke(cli, ["testbed", "up", "--hosts", "1"], standalone_mode=False)
    assert isinstance(r.exception, ConfigError) and "hosts must be 2..1000" in str(r.exception)
    from clusterlab.cli.bench_broadcast import broadcast

    r = CliRunner().invoke(broadcast, ["--dilation", "4"], standalone_mode=False)
    assert isinstance(r.exception, ConfigError) and "--dilation needs --hosts" in str(r.exception)
