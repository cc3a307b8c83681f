"""A testbed topology (``StarTopo``) as a SimGrid platform: pure data, no engine needed.

Each host is a SimGrid host attached by its own split-duplex link (up and down apart, as a
switch port and the host's egress are) at the topology's link rate (``host_rates``: that
host's own), with ``latency`` one way. The switch: a backplane every route between two hosts
of a site crosses (a shared link of ``backplane`` x the links' total rate) when that is below 1;
at 1 (the bridge: non-blocking, the default) none, as it could never be the bottleneck and a
link every flow shares costs the solver work per flow at every event. Two sites (``sites="4+4"``) are two such zones, each with its gateway,
joined by the WAN line: ``wan_rate`` per direction (split duplex) or one rate for both
(``wan_shared``), ``wan_delay`` one way. The atm switch's links and a line of cells
(``wan_cells``) are given at their cell rate; ``payload_fraction`` says how much of a link's
rate carries TCP payload (headers, cells), which becomes the engine's bandwidth factor.

What a flow model leaves out, by construction: the port buffers (``buffer``), the host queues,
the WAN queue, cell loss (``loss``): flows share links by max-min and never lose a byte.

>>> from clusterlab.cluster.testbed import StarTopo
>>> p = Platform.of(StarTopo(hosts=4, rate="100Mbit"))
>>> p.hosts, p.sites, p.link_bps[0], p.latency_s
(('h0', 'h1', 'h2', 'h3'), ((0, 1, 2, 3),), 100000000.0, 1e-05)
>>> round(payload_fraction(StarTopo(hosts=4)), 4), round(payload_fraction(StarTopo(hosts=4, switch="atm")), 4)
(0.9927, 0.897)
"""

from __future__ import annotations

import dataclasses
from xml.sax.saxutils import quoteattr

from clusterlab.cluster.testbed.topo import CELL_BYTES, ETH_HLEN, StarTopo, aal5_cells
from clusterlab.errors import ConfigError
from clusterlab.units import parse_duration

IP_TCP_HEADERS = 52  # IPv4 20 + TCP 20 + the timestamp option 12: what each segment carries besides payload
DEFAULT_LATENCY = "10us"
HOST_SPEED = "1Gf"  # the hosts' compute speed (flops); the slice's workloads move data only


def payload_fraction(topo: StarTopo, mtu: int | None = None, *, wan: bool = False) -> float:
    """Of a link's rate, the share that carries TCP payload in full-size segments: Ethernet's
    14-byte header on the bridge (tc's tbf counts it), IP over ATM's cells on the atm switch
    (and on a line of cells, ``wan=True``)."""
    m = topo.mtu if mtu is None else mtu
    cells = topo.switch == "atm" if not wan else topo.wan_cells
    if cells:
        return (m - IP_TCP_HEADERS) / (aal5_cells(m) * CELL_BYTES)
    return (m - IP_TCP_HEADERS) / (m + ETH_HLEN)


@dataclasses.dataclass(frozen=True)
class Platform:
    """The engine's platform, as data: host names, the sites (host indices), each host's link
    rate (bits/s, at the link's own layer: cells on the atm switch), one-way latency per link,
    the backplane's rate per site, the WAN line (None with one site)."""

    hosts: tuple
    sites: tuple
    link_bps: tuple
    latency_s: float
    backplane_bps: tuple
    wan_bps: float | None = None
    wan_delay_s: float | None = None
    wan_shared: bool = False

    @classmethod
    def of(cls, topo: StarTopo, *, latency=DEFAULT_LATENCY, backplane: float = 1.0) -> Platform:
        """The platform of ``topo`` (undilated: the rates and delays the topology names)."""
        if not isinstance(topo, StarTopo):
            raise ConfigError(f"a simulated platform is built from a StarTopo, got {topo!r}")
        lat = parse_duration(latency, "latency")
        if not 0 <= lat <= 1.0:
            raise ConfigError(f"latency must be 0..1s, got {latency!r}")
        if isinstance(backplane, bool) or not isinstance(backplane, (int, float)) or not 0 < backplane <= 1e3:
            raise ConfigError(f"backplane must be a number above 0 (a share of the links' total rate), got {backplane!r}")
        names = tuple(topo.host_names())
        if topo.switch == "atm":
            rates = tuple(float(topo.cell_rate_bps) for _ in names)
        else:
            rates = tuple(topo.link_rate_bps(i) for i in range(len(names)))
        sites, start = [], 0
        for k in (topo.site_sizes if topo.sites is not None else (len(names),)):
            sites.append(tuple(range(start, start + k)))
            start += k
        bb = tuple(backplane * sum(rates[i] for i in s) for s in sites)
        wan = {}
        if topo.sites is not None:
            wan = {"wan_bps": float(topo.wan_rate_bps), "wan_delay_s": float(topo.wan_delay_seconds),
                   "wan_shared": bool(topo.wan_shared)}
        return cls(names, tuple(sites), rates, lat, bb, **wan)

    def xml(self) -> str:
        """SimGrid's platform XML (version 4.1): a ``Cluster`` zone per site (hosts, their
        split-duplex links, a blocking switch's backplane, a gateway), and with two sites a ``Full`` zone
        joining them by the WAN link."""
        out = ["<?xml version='1.0'?>", '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">',
               '<platform version="4.1">', '<zone id="world" routing="Full">']
        for s, members in enumerate(self.sites):
            out.append(f'  <zone id="site{s}" routing="Cluster">')
            for i in members:
                out.append(f'    <host id={quoteattr(self.hosts[i])} speed="{HOST_SPEED}"/>')
            for i in members:
                h = self.hosts[i]
                out.append(f'    <link id="{h}-link" bandwidth="{self.link_bps[i]:.17g}bps" '
                           f'latency="{self.latency_s:.17g}s" sharing_policy="SPLITDUPLEX"/>')
                out.append(f'    <host_link id="{h}" up="{h}-link_UP" down="{h}-link_DOWN"/>')
            out.append(f'    <router id="site{s}-gw"/>')
            if self.backplane_bps[s] < sum(self.link_bps[i] for i in members):
                # a blocking switch; a non-blocking one (the bridge) can never be the bottleneck,
                # and a link every flow shares would cost the solver O(flows) per event
                out.append(f'    <backbone id="site{s}-switch" bandwidth="{self.backplane_bps[s]:.17g}bps" '
                           'latency="0s"/>')
            out.append("  </zone>")
        if len(self.sites) == 2:
            policy = "SHARED" if self.wan_shared else "SPLITDUPLEX"
            out.append(f'  <link id="wan" bandwidth="{self.wan_bps:.17g}bps" latency="{self.wan_delay_s:.17g}s" '
                       f'sharing_policy="{policy}"/>')
            for a, b, d in ((0, 1, "UP"), (1, 0, "DOWN")):
                ctn = '<link_ctn id="wan"/>' if self.wan_shared else f'<link_ctn id="wan" direction="{d}"/>'
                out.append(f'  <zoneRoute src="site{a}" dst="site{b}" gw_src="site{a}-gw" gw_dst="site{b}-gw" '
                           f'symmetrical="NO">{ctn}</zoneRoute>')
        out += ["</zone>", "</platform>", ""]
        return "\n".join(out)
