"""Links (Mininet's ``Link``): one veth pair per host, shaped with tbf on both ends.

The switch end ``p<i>`` gets ``tbf rate R limit B``: R is the link rate, B bytes the switch's
output buffer toward host i. When several hosts send to one host at once (incast), that queue
overflows and tbf drops, as the ATM switch of seed 000 dropped cells. The host end ``eth0``
gets ``tbf rate R limit Q``, Q a NIC's queue (1000 packets by default), so a host cannot send
faster than its link and does not drop what a real NIC would have queued.

Two sites (``StarTopo(sites="4+4")``): the switch namespace holds one bridge per site
(``br0``, ``br1``); each bridge has a port ``wan0``/``wan1`` whose veth peer (``a``/``b``) is in
the router namespace ``clab-<testbed>-wan``, where the delay line moves frames between ``a`` and
``b``. The line is a transparent Ethernet segment: the sites share one subnet, and each bridge's
static entries send the other site's MACs to its WAN port. Every switch port stays in the one
switch namespace, so whatever watches the switch sees both sites.

An ATM switch (``StarTopo(switch="atm")``): the switch namespace has no bridge. Its ports
(``p<i>``, the WAN ports, and ``pc``, whose veth peer ``sw0`` holds the switch's own address)
belong to the cell switch process (``atmswitch``), which reads every frame, finds its port
from static entries (``atm_fdb``) and sends it through the cell model; the ports carry no
qdisc (the model is their buffer). Each host's ``eth0`` sends at the cell rate: a tbf whose
rate table counts each frame as the 53-byte cells it becomes (``linklayer atm``), with a
bucket of one frame, so a host's frames leave when its link would have sent their cells.

These functions only write the ``ip -batch`` / ``tc -batch`` lines; ``net.TestbedNetwork`` runs them.

>>> from clusterlab.cluster.testbed.topo import StarTopo
>>> t = StarTopo(hosts=2, rate="155Mbit", buffer="64KB")
>>> print(veth_lines("t1", t)[0])
link add name p0 index 1000 mtu 9000 netns clab-t1-sw type veth peer name eth0 address 02:c1:ab:00:00:00 mtu 9000 netns clab-t1-h0
>>> port_qdisc_lines(t)[0]
'qdisc replace dev p0 root tbf rate 155000000bit burst 18028 limit 64000'
"""

from __future__ import annotations

from clusterlab.cluster.testbed.node import ns_name
from clusterlab.cluster.testbed.topo import ETH_HLEN, SUBNET, StarTopo
from clusterlab.units import parse_duration

FRAME_EXACT_BPS = 1e9
"""Up to this (effective) rate the bucket holds two frames: each frame leaves at the link rate."""
BURST_SECONDS = 100e-6
"""Above it, the bucket holds this long of the rate."""


def burst_bytes(topo: StarTopo, rate: float | None = None) -> int:
    """tbf bucket: at least two full frames (tbf drops frames larger than its bucket). Up to
    ``FRAME_EXACT_BPS`` exactly that, so bursts leave at the link rate, frame by frame. Faster
    links get ``BURST_SECONDS`` of the rate: with a two-frame bucket at 10 Gbit/s tbf re-arms a
    timer for every 7 us frame, and the machine, not the link, sets the rate (measured: a rank's
    iSCSI read of its 3 MB partition, median 0.124 s with two frames, 0.102 s with 100 us;
    ``bench/results/storage_mining_transfer.json``). The cost: a burst up to the bucket leaves
    at veth speed, so queues see arrivals up to 100 us early. ``topo.tbf_bucket`` sets the
    duration. ``rate``: the link's effective rate (bit/s) when it is not the topology's.

    >>> burst_bytes(StarTopo(rate="1Gbit")), burst_bytes(StarTopo(rate="10Gbit"))
    (18028, 125000)
    >>> burst_bytes(StarTopo(rate="155Mbit", tbf_bucket="1ms"))
    19375
    """
    frames = 2 * (int(topo.mtu) + ETH_HLEN)
    rate = topo.effective_rate_bps if rate is None else rate
    if topo.tbf_bucket is not None:
        seconds = parse_duration(topo.tbf_bucket)
    elif rate > FRAME_EXACT_BPS:
        seconds = BURST_SECONDS
    else:
        return frames
    return max(frames, int(rate * seconds / 8))


def veth_lines(testbed: str, topo: StarTopo) -> list[str]:
    """Root ``ip -batch`` lines creating each pair directly inside its two namespaces."""
    sw = ns_name(testbed, "sw")
    out = []
    for i, name in enumerate(topo.host_names()):
        out.append(f"link add name p{i} index {PORT_IFINDEX + i} mtu {topo.mtu} netns {sw} type veth "
                   f"peer name eth0 address {topo.mac(i)} mtu {topo.mtu} netns {ns_name(testbed, name)}")
    if topo.has_wan:
        router = ns_name(testbed, ROUTER)
        for end, port in zip(ROUTER_IFACES, WAN_PORTS, strict=True):
            out.append(f"link add name {end} mtu {topo.mtu} netns {router} type veth peer name {port} "
                       f"mtu {topo.mtu} netns {sw}")
    if topo.switch == "atm":
        out.append(f"link add name {SWITCH_IFACE} address {topo.switch_mac} mtu {topo.mtu} netns {sw} type veth "
                   f"peer name {CONTROL_PORT} mtu {topo.mtu} netns {sw}")
    return out


PORT_IFINDEX = 1000
"""Switch port i's interface index is 1000 + i, never its host's eth0's (2, after lo, in every
host). The kernel's link watcher reports a carrier change at once for a veth whose index is
not its peer's, but up to a second late when they are equal (the test it uses for "a device
stacked on another"): with p0 at index 2, host 0's eth0 came up without IFF_RUNNING for about
0.6 s, and MPICH's UCX, started in that window, found no usable eth0 and failed at MPI_Init."""

ROUTER = "wan"
"""The router namespace's node name (``clab-<testbed>-wan``)."""
ROUTER_IFACES = ("a", "b")
WAN_PORTS = ("wan0", "wan1")
SITE_BRIDGES = ("br0", "br1")
SITE_MACS = ("02:c1:ab:ff:ff:fe", "02:c1:ab:ff:ff:fd")
SWITCH_IFACE = "sw0"
"""With the atm switch: the interface that holds the switch's own address."""
CONTROL_PORT = "pc"
"""Its peer: the atm switch's port toward its own address."""


def router_lines(topo: StarTopo) -> list[str]:
    """``ip -n <router> -batch`` lines: both ends of the line up, promiscuous (frames for every
    host of the other site pass through them)."""
    return ["link set lo up"] + [f"link set dev {end} up promisc on" for end in ROUTER_IFACES]


def host_lines(topo: StarTopo, index: int, static_neigh: bool = True, route: dict | None = None) -> list[str]:
    """``ip -n <host> -batch`` lines: address, static neighbour entries for every other host,
    interfaces up, and ``route`` attributes (e.g. ``{"initcwnd": 2}``) on the host's route.

    >>> host_lines(StarTopo(hosts=2), 0, route={"initcwnd": 2})[-1]
    'route replace 10.0.0.0/16 dev eth0 proto kernel scope link src 10.0.0.1 initcwnd 2'
    """
    out = ["link set lo up", f"addr add {topo.address(index)}/16 dev eth0"]
    if static_neigh:
        for j in range(topo.n_nodes):
            if j != index:
                out.append(f"neigh replace {topo.address(j)} lladdr {topo.mac(j)} dev eth0 nud permanent")
        out.append(f"neigh replace {topo.switch_address} lladdr {topo.switch_mac} dev eth0 nud permanent")
    out.append("link set eth0 up")
    if route:
        attrs = " ".join(f"{k} {v}" for k, v in sorted(route.items()))
        out.append(f"route replace {SUBNET} dev eth0 proto kernel scope link src {topo.address(index)} {attrs}")
    return out


def switch_lines(topo: StarTopo) -> list[str]:
    """``ip -n <switch> -batch`` lines: the bridge (no STP, no forwarding delay, no multicast
    snooping) with every port attached and up, and the switch's own address (the rendezvous
    point of launched jobs). With the atm switch: every port up and promiscuous (the cell
    switch process reads them), the address on ``sw0``."""
    if topo.switch == "atm":
        out = ["link set lo up"] + [f"link set {p} up promisc on" for p, _ in atm_ports(topo)]
        out += [f"link set {SWITCH_IFACE} up", f"addr add {topo.switch_address}/16 dev {SWITCH_IFACE}"]
        out += [f"neigh replace {topo.address(j)} lladdr {topo.mac(j)} dev {SWITCH_IFACE} nud permanent"
                for j in range(topo.n_nodes)]
        return out
    bridges = SITE_BRIDGES[:len(topo.site_sizes)]
    out = ["link set lo up"]
    for br in bridges:
        out.append(f"link add {br} type bridge stp_state 0 forward_delay 0 mcast_snooping 0 ageing_time 30000")
    for i in range(topo.n_nodes):
        out.append(f"link set p{i} master {bridges[topo.site_of(i)]}")
        out.append(f"link set p{i} up")
    if topo.has_wan:
        for br, port in zip(bridges, WAN_PORTS, strict=True):
            out.append(f"link set {port} master {br}")
            out.append(f"link set {port} up")
        out.append(f"link set br1 address {SITE_MACS[1]} up")
    out.append(f"link set br0 address {topo.switch_mac} up")
    out.append(f"addr add {topo.switch_address}/16 dev br0")
    for j in range(topo.n_nodes):
        out.append(f"neigh replace {topo.address(j)} lladdr {topo.mac(j)} dev br0 nud permanent")
    return out


def fdb_lines(topo: StarTopo) -> list[str]:
    """``bridge -batch`` lines: static forwarding entries, so the switch never floods. With two
    sites, each bridge sends the other site's MACs (and site B's the switch's own) to its WAN port.

    >>> fdb_lines(StarTopo(hosts=2, sites="1+1"))[-2:]
    ['fdb replace 02:c1:ab:00:00:01 dev wan0 master static', 'fdb replace 02:c1:ab:ff:ff:fe dev wan1 master static']
    """
    out = [f"fdb replace {topo.mac(i)} dev p{i} master static" for i in range(topo.n_nodes)]
    if topo.has_wan:
        for i in range(topo.n_nodes):
            out.append(f"fdb replace {topo.mac(i)} dev {WAN_PORTS[1 - topo.site_of(i)]} master static")
        out.append(f"fdb replace {topo.switch_mac} dev {WAN_PORTS[1]} master static")
    return out


def atm_ports(topo: StarTopo) -> list[tuple[str, int]]:
    """The atm switch's ports in order, with their site: every node's, the switch's own, the WAN's.

    >>> atm_ports(StarTopo(hosts=2, switch="atm", sites="1+1"))
    [('p0', 0), ('p1', 1), ('pc', 0), ('wan0', 0), ('wan1', 1)]
    """
    ports = [(f"p{i}", topo.site_of(i)) for i in range(topo.n_nodes)] + [(CONTROL_PORT, 0)]
    if topo.has_wan:
        ports += [(p, s) for s, p in enumerate(WAN_PORTS)]
    return ports


def atm_fdb(topo: StarTopo) -> list[tuple[int, str, int]]:
    """The atm switch's static entries, ``(site, MAC, port index)``: a node of the same site
    through its port, one of the other site through the site's WAN port; the switch's own MAC
    through ``pc`` on site A and the WAN port on site B (as the bridges' entries, ``fdb_lines``).

    >>> atm_fdb(StarTopo(hosts=2, switch="atm", sites="1+1"))
    [(0, '02:c1:ab:00:00:00', 0), (0, '02:c1:ab:00:00:01', 3), (0, '02:c1:ab:ff:ff:fe', 2), (1, '02:c1:ab:00:00:00', 4), (1, '02:c1:ab:00:00:01', 1), (1, '02:c1:ab:ff:ff:fe', 4)]
    """
    names = [p for p, _ in atm_ports(topo)]
    out = []
    for site in range(len(topo.site_sizes)):
        wan = names.index(WAN_PORTS[site]) if topo.has_wan else None
        for j in range(topo.n_nodes):
            out.append((site, topo.mac(j), j if topo.site_of(j) == site else wan))
        out.append((site, topo.switch_mac, names.index(CONTROL_PORT) if site == 0 else wan))
    return out


def _atm_tbf(dev: str, topo: StarTopo, limit: int) -> str:
    """A link sending cells: tbf's rate table counts a frame of L bytes (Ethernet header
    included) as ceil((L + 2) / 48) cells of 53 bytes, i.e. ceil((L - 14 + 8 LLC/SNAP + 8 AAL5) / 48)
    (``linklayer atm overhead 2``); the rate is the cell rate; the bucket holds the largest
    frame's cells and a cell more.

    The rate table and not a size table (``stab linklayer atm``): on this kernel a root size
    table was measured to count TCP's frames by their bytes (a veth pair, tbf at 37.44 Mbit/s:
    9194-byte TCP frames left 1966 us apart, the byte rate, where UDP's left 2175 us apart, the
    cell rate); the rate table holds both at 2174-2175 us, as the switch's model expects."""
    from clusterlab.cluster.testbed.topo import CELL_BYTES, aal5_cells

    rate = int(round(topo.cell_rate_bps / topo.dilation / 8)) * 8
    cells = aal5_cells(int(topo.mtu))
    return (f"qdisc replace dev {dev} root tbf rate {rate}bit burst {(cells + 2) * CELL_BYTES} limit {limit} "
            "linklayer atm overhead 2")


def _tbf(dev: str, topo: StarTopo, limit: int, index: int | None = None) -> str:
    """A bridge link's shaper: node ``index``'s link rate (``host_rates``), the topology's without it."""
    eff = topo.effective_rate_bps if index is None else topo.effective_link_rate_bps(index)
    return f"qdisc replace dev {dev} root tbf rate {int(round(eff))}bit burst {burst_bytes(topo, eff)} limit {limit}"


def port_qdisc_lines(topo: StarTopo) -> list[str]:
    """``tc -n <switch> -batch`` lines: each port's output buffer (none with the atm switch,
    whose model is the buffer). A host in ``host_rates`` gets its own rate.

    >>> port_qdisc_lines(StarTopo(hosts=2, rate="155Mbit", host_rates="h1=15.5Mbit"))[1]
    'qdisc replace dev p1 root tbf rate 15500000bit burst 18028 limit 64000'
    """
    if topo.switch == "atm":
        return []
    return [_tbf(f"p{i}", topo, topo.buffer_bytes, i) for i in range(topo.n_nodes)]


def host_qdisc_lines(topo: StarTopo, index: int | None = None) -> list[str]:
    """``tc -n <host> -batch`` lines: the host's egress queue (node ``index``'s rate when given).

    >>> host_qdisc_lines(StarTopo(hosts=2, rate="155.52Mbit", switch="atm"))[0]
    'qdisc replace dev eth0 root tbf rate 149760000bit burst 10282 limit 9194000 linklayer atm overhead 2'
    >>> host_qdisc_lines(StarTopo(hosts=2, host_rates="h1=15.5Mbit", dilation=2), 1)[0]
    'qdisc replace dev eth0 root tbf rate 7750000bit burst 18028 limit 9014000'
    """
    if topo.switch == "atm":
        return [_atm_tbf("eth0", topo, topo.host_queue_bytes)]
    return [_tbf("eth0", topo, topo.host_queue_bytes, index)]
