"""The simulated platform built from a StarTopo: checked as XML, without the engine."""

import xml.etree.ElementTree as ET

import pytest

from clusterlab.cluster.simulated.platform import Platform, payload_fraction
from clusterlab.cluster.testbed import StarTopo
from clusterlab.errors import ConfigError


def _tree(topo, **kw):
    xml = Platform.of(topo, **kw).xml()
    body = xml.split("\n", 2)[2]  # past the XML declaration and the DOCTYPE
    return ET.fromstring(body)


def test_one_switch():
    root = _tree(StarTopo(hosts=8, rate="155Mbit"), latency="20us")
    zones = root.findall("./zone/zone")
    assert [z.get("id") for z in zones] == ["site0"] and zones[0].get("routing") == "Cluster"
    hosts = [h.get("id") for h in zones[0].findall("host")]
    assert hosts == [f"h{i}" for i in range(8)]
    links = zones[0].findall("link")
    assert len(links) == 8
    assert {lk.get("sharing_policy") for lk in links} == {"SPLITDUPLEX"}
    assert {float(lk.get("bandwidth")[:-3]) for lk in links} == {155e6}
    assert {float(lk.get("latency")[:-1]) for lk in links} == {20e-6}
    hl = zones[0].findall("host_link")
    assert [(x.get("id"), x.get("up"), x.get("down")) for x in hl][0] == ("h0", "h0-link_UP", "h0-link_DOWN")
    assert zones[0].find("backbone") is None  # non-blocking: no backplane link to share
    half = ET.fromstring(Platform.of(StarTopo(hosts=8, rate="155Mbit"), backplane=0.5).xml().split("\n", 2)[2])
    bb = half.find("./zone/zone/backbone")
    assert float(bb.get("bandwidth")[:-3]) == pytest.approx(4 * 155e6)  # a blocking switch: half the links at once
    assert root.find("./zone/link") is None and root.find("./zone/zoneRoute") is None


def test_two_sites_and_wan():
    root = _tree(StarTopo(hosts=8, rate="100Mbit", sites="5+3", wan_rate="135Mbit", wan_delay="6ms"))
    zones = root.findall("./zone/zone")
    assert [len(z.findall("host")) for z in zones] == [5, 3]
    assert [h.get("id") for h in zones[1].findall("host")] == ["h5", "h6", "h7"]
    wan = root.find("./zone/link")
    assert wan.get("id") == "wan" and float(wan.get("bandwidth")[:-3]) == 135e6
    assert float(wan.get("latency")[:-1]) == pytest.approx(0.006) and wan.get("sharing_policy") == "SPLITDUPLEX"
    routes = root.findall("./zone/zoneRoute")
    assert [(r.get("src"), r.get("dst"), r.find("link_ctn").get("direction")) for r in routes] == [
        ("site0", "site1", "UP"), ("site1", "site0", "DOWN")]
    assert [z.find("backbone") for z in zones] == [None, None]


def test_shared_wan_one_rate_both_ways():
    root = _tree(StarTopo(hosts=4, sites="2+2", wan_shared=True))
    assert root.find("./zone/link").get("sharing_policy") == "SHARED"
    assert all(r.find("link_ctn").get("direction") is None for r in root.findall("./zone/zoneRoute"))


def test_rates_per_host_and_atm_cells():
    p = Platform.of(StarTopo(hosts=4, rate="155Mbit", host_rates="h3=15.5Mbit"))
    assert p.link_bps == (155e6, 155e6, 155e6, 15.5e6)
    a = Platform.of(StarTopo(hosts=4, rate="155.52Mbit", switch="atm"))
    assert a.link_bps == (149760000.0,) * 4  # cells at SONET's payload rate
    # the payload share: 9128 bytes of TCP payload in 192 cells of 53 bytes
    assert payload_fraction(StarTopo(hosts=4, switch="atm")) == pytest.approx(9128 / (192 * 53))
    assert payload_fraction(StarTopo(hosts=4, mtu=1500)) == pytest.approx(1448 / 1514)


def test_bad_settings_refused():
    with pytest.raises(ConfigError, match="latency must be 0..1s"):
        Platform.of(StarTopo(hosts=4), latency="2s")
    with pytest.raises(ConfigError, match="StarTopo"):
        Platform.of("lab")


def test_thousand_hosts_is_small():
    xml = Platform.of(StarTopo(hosts=1000)).xml()
    assert xml.count("<host ") == 1000 and len(xml) < 400_000  # no route per pair: the Cluster zone routes
