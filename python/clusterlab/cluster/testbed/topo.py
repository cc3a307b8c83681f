"""What to build: hosts on one switch (or on two sites joined by a WAN line), the links' rate, port buffer and MTU (Mininet's ``Topo``).

A topology is plain data: it can be checked, printed and saved without root. ``net.TestbedNetwork``
turns it into namespaces, veth pairs, a bridge and tc qdiscs.

>>> t = StarTopo(hosts=16, rate="155Mbit", buffer="64KB")
>>> t.rate_bps, t.buffer_bytes, t.mtu, len(t.host_names())
(155000000.0, 64000, 9000, 16)
>>> t.host_names()[:3]
['h0', 'h1', 'h2']
>>> t.address(0), t.address(15), t.switch_address
('10.0.0.1', '10.0.0.16', '10.0.255.254')
>>> StarTopo(hosts=8, rate="155Mbit", dilation=10).effective_rate_bps
15500000.0
>>> StarTopo(hosts=16).host_queue_bytes        # a NIC's 1000 packets of 9014 bytes
9014000
>>> StarTopo(hosts=16, host_queue="256KB").host_queue_bytes
256000
>>> w = StarTopo(hosts=8, rate="100Mbit", sites="4+4", wan_rate="135Mbit", wan_delay="6ms")
>>> w.site_sizes, w.site_of(3), w.site_of(4), w.wan_rate_bps, w.wan_delay_seconds, w.wan_queue_bytes
((4, 4), 0, 1, 135000000.0, 0.006, 262144)
>>> c = StarTopo(hosts=8, rate="1Gbit", sites="4+4", wan_rate="135Mbit", wan_cells=True, wan_queue="5000cells")
>>> c.wan_queue_cells, c.wan_queue_bytes, aal5_cells(9000), round(c.wan_ip_rate_bps() / 1e6, 2)
(5000, 265000, 188, 121.94)
>>> StarTopo(hosts=8, sites="4+4", wan_cells=True, wan_queue="100cells")
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: wan_queue of 100 cells cannot hold one 9000-byte packet (188 cells); use at least '188cells'
>>> StarTopo(hosts=8, sites="4+3")
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: sites '4+3' must add up to hosts=8 (e.g. sites='4+4')
>>> StarTopo(hosts=1)
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: hosts must be 2..1000, got 1

An ATM cell switch instead of the bridge (seeds 000, 002, 004): IP over ATM's MTU, the port
buffers in cells, SONET's 26/27 of the 155.52 Mbit/s line rate carrying cells.

>>> a = StarTopo(hosts=16, rate="155.52Mbit", switch="atm", buffer="1000cells", discard="epd")
>>> a.mtu, a.buffer_cells, a.epd_threshold_cells, a.cell_rate_bps, round(a.cell_seconds * 1e9, 1)
(9180, 1000, 500, 149760000, 2831.2)
>>> StarTopo(hosts=4, switch="bridge", buffer="200cells").buffer_bytes   # a bridge takes cells as 53 bytes each
10600
>>> StarTopo(hosts=4, discard="epd")
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: discard and epd_threshold are the atm switch's (switch='atm'); the bridge drops whole packets at a full buffer

A lossy link (atm switch only): host h3's link loses each cell with probability 0.02% in either
direction, the draws seeded by ``loss_seed``; a 9180-byte frame is 192 cells.

>>> s = StarTopo(hosts=4, switch="atm", loss="h3:0.02%")
>>> s.loss, s.line_loss(), round(s.frame_loss(3), 4)
('h3:0.02%', {3: 0.0002}, 0.0377)
>>> StarTopo(hosts=4, loss="h3:0.02%")
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: loss is the atm switch's (switch='atm'): its cell model loses cells on a link; this kernel's tc has no netem or gact to drop on the bridge's links
>>> StarTopo(hosts=4, switch="atm", loss="h3:60%")
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: loss: h3's 60% is outside 0..50% of its cells (e.g. loss='h3:0.02%')

One host's link at its own rate (both directions: its switch port and its egress), the others at
``rate``; dilation divides it like the others.

>>> s = StarTopo(hosts=4, rate="155Mbit", host_rates="h3=15.5Mbit", dilation=2)
>>> s.host_rates, s.link_rate_bps(3), s.link_rate_bps(0), s.effective_link_rate_bps(3)
('h3=15.5Mbit', 15500000.0, 155000000.0, 7750000.0)
>>> StarTopo(hosts=4, host_rates={"h2": "1Gbit", "h1": 10e6}).host_rates   # a mapping, kept in host order
'h1=10000000bit h2=1Gbit'
>>> StarTopo(hosts=4, host_rates="h7=15Mbit")
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: host_rates: no host 'h7' (hosts h0..h3); e.g. host_rates='h3=15.5Mbit'
>>> StarTopo(hosts=4, switch="atm", host_rates="h3=15.5Mbit")
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: host_rates is the bridge's: the atm switch's cell model runs every port at one cell time (rate), so one slower link is not modelled
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re

from clusterlab.errors import ConfigError
from clusterlab.units import parse_duration, parse_int, parse_rate, parse_size

PREFIX = "clab"
"""Every namespace this project creates starts with ``clab-`` (clean removes exactly those)."""

MAX_HOSTS = 1000
# tc's tbf/bfifo limits are 32-bit byte counts; a veth link above 400 Gbit/s is not emulated here.
MAX_QUEUE_BYTES = 2**32 - 1
MAX_RATE_BPS = 400e9
NAME_RE = re.compile(r"^[a-z0-9]{1,8}$")
SWITCHES = ("bridge", "atm")
DISCARDS = ("none", "ppd", "epd")
CELL_BYTES = 53
SONET_PAYLOAD = 26 / 27
"""Of an OC-3c line's 155.52 Mbit/s, 149.76 carry cells (STS-3c framing)."""
IP_OVER_ATM_MTU = 9180
DEFAULT_MTU = 9000
SUBNET = ipaddress.IPv4Network("10.0.0.0/16")
# Ethernet header + FCS-less overhead that tc accounts on veth (14 bytes of MAC header).
ETH_HLEN = 14


@dataclasses.dataclass(frozen=True)
class StarTopo:
    """``hosts`` hosts on one switch (a Linux bridge), each attached by its own link.

    ``rate``: link rate in each direction (tc syntax, ``155Mbit``). ``buffer``: the switch's
    output buffer per port (where incast drops happen). ``host_queue``: the host's own egress
    queue, by default ``1000p``, a NIC's 1000 packets (txqueuelen). Sizes are bytes (``64KB``),
    packets of MTU + 14 bytes (``1000p``) or ATM cells of 53 bytes (``1000cells``). A shallower host queue drops locally when a host
    bursts, and a TCP flow whose packet the local queue refused with nothing in flight waits
    for its probe timer, >= 200 ms whatever the RTO minimum (kernel-fixed TCP_RTO_MIN in
    ``tcp_probe0_base``): that stall is the shallow queue's, not the network's. ``mtu``:
    interface MTU (9000 by default; classical IP over ATM uses 9180). ``dilation``: divide
    rates by k (and multiply timers by k elsewhere) so large runs fit on few cores.
    ``storage``: add one more host named ``st`` (a storage target) on the same switch.
    ``host_rates``: links whose rate differs from ``rate``, ``"h3=15.5Mbit"`` (several joined by
    spaces or commas, or a mapping ``{"h3": "15.5Mbit"}``): the host's egress shaper and its
    switch port's both run at that rate (the bridge only). ``loss``: links that lose cells, the
    atm switch only: ``"h3:0.02%"`` (a percentage or a fraction, several joined by spaces or
    commas, or ``{"h3": 0.0002}``): each cell on that host's link, either direction, is lost with
    that probability (drawn by the cell model from ``loss_seed``), and its frame with it at
    reassembly (``frame_loss``). ``tbf_bucket``: the shapers' token bucket as a duration of the link rate (``100us``); by
    default two frames up to 1 Gbit/s and 100 us of rate above (``link.burst_bytes``).

    ``switch="atm"``: an output-buffered ATM cell switch (``clusterlab-atm``) instead of the
    bridge: frames travel as AAL5 cells (53 bytes, 48 of payload, IP over ATM's LLC/SNAP
    header and AAL5's trailer added), every link sends cells at ``SONET_PAYLOAD`` of ``rate``
    (the line rate; 155.52 Mbit/s carries 149.76 Mbit/s of cells), cells of frames arriving
    together interleave at an output port, ``buffer`` is that port's cell buffer (``1000cells``,
    or bytes / 53), a cell that finds it full is lost and its frame is thrown away at
    reassembly. ``discard``: ``none`` (plain UBR), ``ppd`` or ``epd`` (refuse a new frame
    while ``epd_threshold`` cells or more are queued; half the buffer by default). The MTU
    defaults to IP over ATM's 9180.

    Two sites (seed 004's 4+4 PCs across a 90 km ATM line): ``sites="4+4"`` puts hosts
    ``h0..h3`` on site A's bridge and ``h4..h7`` on site B's, joined by a WAN line
    (``clusterlab-wan``, a delay line in a router namespace) of ``wan_rate`` per direction,
    ``wan_delay`` one way, a drop-tail queue of ``wan_queue`` bytes (or ``p`` packets) per
    direction; ``wan_shared``: both directions draw from one ``wan_rate`` and one queue, and
    lose what exceeds it (67M-ATM: the fibre looped back). The storage host is on site A.
    Dilation divides the WAN rate and multiplies its delay, as for the links.

    ``wan_cells=True``: the line carries AAL5 cells (``clusterlab-atm``'s cell line) instead
    of bytes: ``wan_rate`` is the rate of its 53-byte cells (every header and pad byte
    included: seed 004's "135 Mbit/s" taken so, which leaves 121.9 Mbit/s of IP at MTU 9000
    and 119.4 at 1500, the seed's "cells lost above about 120 Mbit/s"; an OC-3c is
    ``149.76Mbit``), each frame goes as ``aal5_cells(IP length)`` cells, ``wan_queue`` is
    counted in cells (``5000cells``, or bytes / 53), and a frame one of whose cells finds the
    queue full is lost whole while its cells that got in still use the line (and the next
    frame of that direction is lost with it: its end of message was one of the lost cells).
    ``wan_discard``: the cell line's discard policy, ``none`` (plain UBR), ``ppd`` (after a lost
    cell the rest of the frame is discarded but its last cell) or ``epd`` (a frame whose first
    cell finds ``wan_epd_threshold`` cells or more queued is refused whole; half the queue by
    default). A frame's cells enter the line's queue at the sites' link rate (``rate``, at least
    ``wan_rate``), as from a faster access link; on a ``wan_shared`` line they enter at once,
    where PPD would be plain UBR, so ``ppd`` is refused there.
    """

    hosts: int = 4
    rate: str | float = "155Mbit"
    buffer: str | int = "64KB"
    host_queue: str | int = "1000p"
    mtu: int | None = None
    dilation: float = 1.0
    storage: bool = False
    sites: str | tuple | None = None
    wan_rate: str | float = "135Mbit"
    wan_delay: str | float = "6ms"
    wan_queue: str | int = "256KiB"
    wan_shared: bool = False
    wan_cells: bool = False
    wan_discard: str = "none"
    wan_epd_threshold: str | int | None = None
    tbf_bucket: str | float | None = None
    switch: str = "bridge"
    discard: str = "none"
    epd_threshold: str | int | None = None
    host_rates: str | dict | None = None
    loss: str | dict | None = None
    loss_seed: int = 1
    # The MTU was not given: the switch's default (a study that changes the switch changes it too).
    mtu_is_default: bool = dataclasses.field(default=False, init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.mtu is not None:
            parse_int(self.mtu, "mtu")
        if not isinstance(self.dilation, (int, float)) or not 1.0 <= self.dilation <= 1e6:
            raise ConfigError(f"dilation must be >= 1 (and at most 1e6), got {self.dilation!r}")
        if not isinstance(self.hosts, int) or not 2 <= self.hosts <= MAX_HOSTS:
            raise ConfigError(f"hosts must be 2..{MAX_HOSTS}, got {self.hosts}")
        if self.switch not in SWITCHES:
            raise ConfigError(f"switch must be one of {', '.join(SWITCHES)}, got {self.switch!r}")
        if self.mtu is None:
            object.__setattr__(self, "mtu", IP_OVER_ATM_MTU if self.switch == "atm" else DEFAULT_MTU)
            object.__setattr__(self, "mtu_is_default", True)
        if isinstance(self.mtu, bool) or not isinstance(self.mtu, int):
            raise ConfigError(f"mtu must be a whole number 68..65000, got {self.mtu!r}")
        if self.switch == "atm":
            self._check_atm()
        else:
            if self.discard != "none" or self.epd_threshold is not None:
                raise ConfigError("discard and epd_threshold are the atm switch's (switch='atm'); the bridge "
                                  "drops whole packets at a full buffer")
        if not 68 <= int(self.mtu) <= 65000:
            raise ConfigError(f"mtu must be 68..65000, got {self.mtu}")
        if not self.dilation >= 1.0:
            raise ConfigError(f"dilation must be >= 1, got {self.dilation}")
        if self.rate_bps < 8_000:
            raise ConfigError(f"rate must be at least 8kbit, got {self.rate!r}")
        if self.rate_bps > MAX_RATE_BPS:
            raise ConfigError(f"rate must be at most {MAX_RATE_BPS / 1e9:g}Gbit, got {self.rate!r}")
        queues = (("host_queue", self.host_queue_bytes),) if self.switch == "atm" else (
            ("buffer", self.buffer_bytes), ("host_queue", self.host_queue_bytes))
        for what, v in queues:
            if v > MAX_QUEUE_BYTES:
                raise ConfigError(f"{what} of {v} bytes is more than tc's queue limit takes (a 32-bit byte "
                                  f"count: at most {MAX_QUEUE_BYTES} bytes)")
            if v < self.mtu + ETH_HLEN:
                raise ConfigError(f"{what} of {v} bytes cannot hold one {self.mtu}-byte packet; "
                                  f"use at least {self.mtu + ETH_HLEN} bytes")
        if self.tbf_bucket is not None:
            try:
                b = parse_duration(self.tbf_bucket)
            except ConfigError as e:
                raise ConfigError(f"tbf_bucket: {e}") from None
            if not 0 < b <= 1.0:
                raise ConfigError(f"tbf_bucket must be a duration above 0 up to 1s (e.g. '100us'), "
                                  f"got {self.tbf_bucket!r}")
        if not isinstance(self.wan_cells, bool):
            raise ConfigError(f"wan_cells must be True or False, got {self.wan_cells!r}")
        if self.sites is not None:
            self._check_wan()
        elif self.wan_cells:
            raise ConfigError("wan_cells is the WAN line's: it needs two sites (e.g. sites='4+4')")
        elif self.wan_discard != "none" or self.wan_epd_threshold is not None:
            raise ConfigError("wan_discard and wan_epd_threshold are the WAN cell line's: they need two sites and "
                              "wan_cells=True")
        if self.host_rates is not None:
            object.__setattr__(self, "host_rates", self._check_host_rates())
        if self.loss is not None:
            object.__setattr__(self, "loss", self._check_loss())

    def _pairs(self, what: str, value, sep: str, example: str, noun: str) -> list[tuple[int, object]]:
        """``value`` (``"h3<sep>x h5<sep>y"`` or a mapping) as (node index, x) pairs, hosts checked."""
        if isinstance(value, dict):
            items = [(str(k), v) for k, v in value.items()]
        elif isinstance(value, str):
            if not value.strip():
                raise ConfigError(f"{what} is empty: give host{sep}{noun} (e.g. {what}={example!r})")
            items = []
            for part in re.split(r"[,\s]+", value.strip()):
                if not part:
                    continue
                if sep not in part:
                    raise ConfigError(f"{what}: {part!r} is not host{sep}{noun} (e.g. {what}={example!r})")
                items.append(tuple(x.strip() for x in part.split(sep, 1)))
        else:
            raise ConfigError(f"{what} must be text like {example!r} or a mapping, got {value!r}")
        names, seen, out = self.host_names(), set(), []
        for host, v in items:
            if host not in names:
                raise ConfigError(f"{what}: no host {host!r} (hosts h0..h{self.hosts - 1}"
                                  + (", st" if self.storage else "") + f"); e.g. {what}={example!r}")
            if host in seen:
                raise ConfigError(f"{what}: {host} given twice")
            seen.add(host)
            out.append((names.index(host), v))
        return sorted(out, key=lambda kv: kv[0])

    def _check_loss(self) -> str | None:
        if self.switch != "atm":
            raise ConfigError("loss is the atm switch's (switch='atm'): its cell model loses cells on a link; this "
                              "kernel's tc has no netem or gact to drop on the bridge's links")
        if isinstance(self.loss_seed, bool) or not isinstance(self.loss_seed, int) or not 0 <= self.loss_seed < 2**64:
            raise ConfigError(f"loss_seed must be a whole number 0..2^64-1, got {self.loss_seed!r}")
        names, out = self.host_names(), []
        for i, v in self._pairs("loss", self.loss, ":", "h3:0.02%", "probability"):
            p = _probability(v)
            if p is None or not 0 <= p <= 0.5:
                raise ConfigError(f"loss: {names[i]}'s {v} is outside 0..50% of its cells (e.g. loss='h3:0.02%')"
                                  if p is not None else f"loss: {names[i]}'s {v!r} is not a percentage or a "
                                  "fraction (e.g. loss='h3:0.02%' or 'h3:0.0002')")
            if p > 0:
                out.append(f"{names[i]}:{v}" if isinstance(v, str) else f"{names[i]}:{p:g}")
        return " ".join(out) or None

    def line_loss(self) -> dict[int, float]:
        """Lossy links: node index -> probability that a cell on it is lost (each direction)."""
        if not self.loss:
            return {}
        names = self.host_names()
        return {names.index(h): _probability(v) for h, v in (p.split(":", 1) for p in self.loss.split())}

    def frame_loss(self, index: int) -> float:
        """The probability that an MTU-sized frame crossing node ``index``'s link (one direction)
        loses a cell there, and so is lost: 1 - (1 - p) ** cells."""
        p = self.line_loss().get(index, 0.0)
        return 1.0 - (1.0 - p) ** aal5_cells(int(self.mtu))

    def _check_host_rates(self) -> str | None:
        """``host_rates`` as its canonical text (hosts in order), checked; None when empty."""
        if self.switch == "atm":
            raise ConfigError("host_rates is the bridge's: the atm switch's cell model runs every port at one cell "
                              "time (rate), so one slower link is not modelled")
        names = self.host_names()
        out: dict[int, str] = {}
        for i, rate in self._pairs("host_rates", self.host_rates, "=", "h3=15.5Mbit", "rate"):
            host = names[i]
            try:
                bps = parse_rate(rate, host)
            except ConfigError as e:
                raise ConfigError(f"host_rates: {e}") from None
            if not 8_000 <= bps <= MAX_RATE_BPS:
                raise ConfigError(f"host_rates: {host}'s rate must be 8kbit..{MAX_RATE_BPS / 1e9:g}Gbit, got {rate!r}")
            out[i] = rate if isinstance(rate, str) else (f"{bps:.0f}bit" if bps == int(bps) else f"{bps}bit")
        return " ".join(f"{names[i]}={out[i]}" for i in sorted(out)) or None

    def host_rates_bps(self) -> dict[str, float]:
        """Links at their own rate: host name -> bit/s (before dilation)."""
        if not self.host_rates:
            return {}
        return {h: parse_rate(r) for h, r in (p.split("=", 1) for p in self.host_rates.split())}

    def link_rate_bps(self, index: int) -> float:
        """Node ``index``'s link rate (before dilation): its ``host_rates`` entry or ``rate``."""
        return self.host_rates_bps().get(self.host_names()[index], self.rate_bps)

    def effective_link_rate_bps(self, index: int) -> float:
        """The rate tc enforces on node ``index``'s link (both ends): its rate / dilation."""
        return self.link_rate_bps(index) / self.dilation

    def rtt_bounds(self) -> dict:
        """The round trips the emulation allows a connection, before dilation (ms): ``floor_ms``,
        the propagation (twice the WAN line's one-way delay with two sites, none on one
        switch), and ``ceiling_ms``, the floor plus every queue a round trip can wait in on the
        slowest path (host queue and switch port buffer at the slowest link, the WAN queue at the
        WAN's rate; in both directions, as an ACK can queue behind the other way's data) and one
        frame's serialisation per hop. With two sites, ``sites`` maps each host's address to
        its site (a connection between sites is the one the propagation applies to). A
        measured RTT far outside them is the emulation's (``diagnose.fidelity``).

        >>> StarTopo(hosts=2, rate="100Mbit", buffer="64KB", host_queue="64KB", mtu=1500).rtt_bounds()
        {'floor_ms': 0.0, 'ceiling_ms': 20.964}
        >>> b = StarTopo(hosts=4, sites="2+2", wan_delay="6ms").rtt_bounds()
        >>> b["floor_ms"], b["sites"]["10.0.0.1"], b["sites"]["10.0.0.4"]
        (12.0, 0, 1)
        """
        slow = min(self.link_rate_bps(i) for i in range(self.hosts))
        frame = (int(self.mtu) + ETH_HLEN) * 8
        floor = 0.0
        ceiling = 2 * ((self.host_queue_bytes + self.buffer_bytes) * 8 + 2 * frame) / slow
        out: dict = {}
        if self.has_wan:
            floor = 2 * self.wan_delay_seconds
            ceiling += 2 * (self.wan_queue_bytes * 8 + frame) / self.wan_rate_bps
            out["sites"] = {self.address(i): self.site_of(i) for i in range(self.hosts + (1 if self.storage else 0))}
        return {"floor_ms": round(floor * 1e3, 3), "ceiling_ms": round((floor + ceiling) * 1e3, 3), **out}

    def _check_atm(self) -> None:
        if self.discard not in DISCARDS:
            raise ConfigError(f"discard must be one of {', '.join(DISCARDS)}, got {self.discard!r}")
        if self.tbf_bucket is not None:
            raise ConfigError("tbf_bucket is the bridge's shaper; the atm switch sends cells at the link's cell rate")
        b = self.buffer_cells
        if not 1 <= b <= 10_000_000:
            raise ConfigError(f"buffer of {b} cells: accepted 1..10000000 cells (e.g. '1000cells')")
        if self.epd_threshold is not None and self.discard != "epd":
            raise ConfigError(f"epd_threshold goes with discard='epd', not {self.discard!r}")
        if self.discard == "epd" and not 1 <= self.epd_threshold_cells <= b:
            raise ConfigError(f"epd_threshold of {self.epd_threshold_cells} cells: accepted 1..{b} (the buffer)")
        cell = self.cell_seconds
        if not 1e-9 <= cell <= 1.0:
            raise ConfigError(f"rate {self.rate!r} at dilation {self.dilation:g}: a cell would take {cell:.3g} s; "
                              f"accepted 1 ns .. 1 s per cell")

    @property
    def buffer_cells(self) -> int:
        """The atm switch's port buffer in cells (``1000cells``, or bytes / 53)."""
        n = _cells(self.buffer)
        return n if n is not None else self.buffer_bytes // CELL_BYTES

    @property
    def epd_threshold_cells(self) -> int:
        """EPD's threshold in cells (half the buffer unless given)."""
        if self.epd_threshold is None:
            return max(1, self.buffer_cells // 2)
        n = _cells(self.epd_threshold)
        return n if n is not None else parse_size(self.epd_threshold) // CELL_BYTES

    @property
    def cell_rate_bps(self) -> int:
        """Bits per second of cells on every atm link (before dilation), a whole number of bytes."""
        return int(round(self.rate_bps * SONET_PAYLOAD / 8)) * 8

    @property
    def cell_seconds(self) -> float:
        """How long one cell takes on a link, after dilation."""
        return CELL_BYTES * 8 / self.cell_rate_bps * self.dilation

    def _check_wan(self) -> None:
        for what in ("wan_rate_bps", "wan_delay_seconds", "wan_queue_bytes"):
            try:
                getattr(self, what)
            except ConfigError as e:
                raise ConfigError(f"{what.rsplit('_', 1)[0]}: {e}") from None
        sizes = self.site_sizes
        if len(sizes) != 2 or min(sizes) < 1:
            raise ConfigError(f"sites {self.sites!r}: two sites of at least one host each are supported "
                              f"(e.g. sites='4+4')")
        if sum(sizes) != self.hosts:
            raise ConfigError(f"sites {self.sites!r} must add up to hosts={self.hosts} (e.g. sites='4+4')")
        if not 8_000 <= self.wan_rate_bps / self.dilation <= 100e9:
            raise ConfigError(f"wan_rate must be 8kbit..100Gbit (after dilation), got {self.wan_rate!r}")
        if not 0 <= self.wan_delay_seconds * self.dilation <= 10:
            raise ConfigError(f"wan_delay must be 0..10 s one way (after dilation), got {self.wan_delay!r}")
        if self.wan_cells:
            need = aal5_cells(int(self.mtu))
            if not need <= self.wan_queue_cells <= 10_000_000:
                raise ConfigError(f"wan_queue of {self.wan_queue_cells} cells cannot hold one {self.mtu}-byte packet "
                                  f"({need} cells); use at least '{need}cells'" if self.wan_queue_cells < need else
                                  f"wan_queue of {self.wan_queue_cells} cells: accepted up to 10000000 cells")
            self._check_wan_discard()
        elif self.wan_queue_bytes < self.mtu + ETH_HLEN:
            raise ConfigError(f"wan_queue of {self.wan_queue_bytes} bytes cannot hold one {self.mtu}-byte "
                              f"packet; use at least {self.mtu + ETH_HLEN} bytes")
        if not self.wan_cells and (self.wan_discard != "none" or self.wan_epd_threshold is not None):
            raise ConfigError("wan_discard and wan_epd_threshold are the WAN cell line's (wan_cells=True); the "
                              "byte line drops whole packets at a full queue")

    def _check_wan_discard(self) -> None:
        if self.wan_discard not in DISCARDS:
            raise ConfigError(f"wan_discard must be one of {', '.join(DISCARDS)}, got {self.wan_discard!r}")
        if self.wan_epd_threshold is not None and self.wan_discard != "epd":
            raise ConfigError(f"wan_epd_threshold goes with wan_discard='epd', not {self.wan_discard!r}")
        q = self.wan_queue_cells
        if self.wan_discard == "epd" and not 1 <= self.wan_epd_threshold_cells <= q:
            raise ConfigError(f"wan_epd_threshold of {self.wan_epd_threshold_cells} cells: accepted 1..{q} "
                              f"(the wan_queue)")
        if self.wan_discard == "ppd" and self.wan_shared:
            raise ConfigError("wan_discard='ppd' on a wan_shared line: its frames' cells enter the queue at once, "
                              "where PPD's last cell finds the queue as full as the lost one (plain UBR); use "
                              "'none' or 'epd'")

    @property
    def wan_epd_threshold_cells(self) -> int:
        """The WAN cell line's EPD threshold in cells (half its queue unless given)."""
        if self.wan_epd_threshold is None:
            return max(1, self.wan_queue_cells // 2)
        n = _cells(self.wan_epd_threshold)
        try:
            return n if n is not None else parse_size(self.wan_epd_threshold) // CELL_BYTES
        except ConfigError as e:
            raise ConfigError(f"wan_epd_threshold: {e}") from None

    @property
    def wan_arrival_rate_bps(self) -> float:
        """The rate (before dilation) at which a frame's cells enter the WAN cell line's queue:
        the sites' link rate, at least the line's; 0 (at once) on a shared line."""
        return 0.0 if self.wan_shared else max(self.rate_bps, self.wan_rate_bps)

    @property
    def site_sizes(self) -> tuple[int, ...]:
        """Hosts per site: ``(hosts,)`` for one switch, ``(4, 4)`` for ``sites="4+4"``."""
        if self.sites is None:
            return (self.hosts,)
        if isinstance(self.sites, (tuple, list)):
            parts = [str(v) for v in self.sites]
        else:
            parts = str(self.sites).split("+")
        if not all(p.strip().isdigit() for p in parts):
            raise ConfigError(f"sites {self.sites!r}: accepted hosts per site joined by '+', e.g. '4+4'")
        return tuple(int(p) for p in parts)

    @property
    def has_wan(self) -> bool:
        return self.sites is not None

    def site_of(self, index: int) -> int:
        """The site of node ``index`` (the storage host is on site 0)."""
        if index >= self.hosts:
            return 0
        return 0 if index < self.site_sizes[0] else 1

    @property
    def wan_rate_bps(self) -> float:
        return parse_rate(self.wan_rate)

    @property
    def wan_delay_seconds(self) -> float:
        return parse_duration(self.wan_delay)

    @property
    def wan_queue_bytes(self) -> int:
        cells = _cells(self.wan_queue)
        return cells * CELL_BYTES if cells is not None else self._queue_bytes(self.wan_queue, "wan_queue")

    @property
    def wan_queue_cells(self) -> int:
        """The WAN queue in cells (``5000cells``, or bytes / 53): the cell line's (``wan_cells``)."""
        cells = _cells(self.wan_queue)
        return cells if cells is not None else self.wan_queue_bytes // CELL_BYTES

    def wan_ip_rate_bps(self, ip_len: int | None = None) -> float:
        """IP bits per second a saturated WAN line carries in packets of ``ip_len`` bytes (the
        MTU by default), before dilation: the cell line's cells' share, the byte line's
        Ethernet frames' share."""
        n = int(self.mtu if ip_len is None else ip_len)
        wire = aal5_cells(n) * CELL_BYTES if self.wan_cells else n + ETH_HLEN
        return self.wan_rate_bps * n / wire

    @property
    def rate_bps(self) -> float:
        return parse_rate(self.rate, "rate")

    @property
    def effective_rate_bps(self) -> float:
        """The rate tc enforces: ``rate / dilation``."""
        return self.rate_bps / self.dilation

    @property
    def buffer_bytes(self) -> int:
        cells = _cells(self.buffer)
        return cells * CELL_BYTES if cells is not None else self._queue_bytes(self.buffer, "buffer")

    @property
    def host_queue_bytes(self) -> int:
        return self._queue_bytes(self.host_queue, "host_queue")

    def _queue_bytes(self, v: str | int, what: str = "queue size") -> int:
        """A queue size in bytes, or in packets of MTU + Ethernet header (``1000p``)."""
        m = re.fullmatch(r"\s*(\d+)\s*(p|pkt|pkts|packets)\s*", str(v).lower())
        if m:
            return int(m.group(1)) * (int(self.mtu) + ETH_HLEN)
        return parse_size(v, what)

    @property
    def n_nodes(self) -> int:
        """Hosts including the storage host."""
        return self.hosts + (1 if self.storage else 0)

    def host_names(self) -> list[str]:
        """Compute hosts ``h0..h{n-1}``, then ``st`` when there is a storage host."""
        return [f"h{i}" for i in range(self.hosts)] + (["st"] if self.storage else [])

    def address(self, index: int) -> str:
        """IPv4 address of node ``index`` (10.0.0.1 upwards, inside the namespaces only)."""
        return str(SUBNET.network_address + index + 1)

    @property
    def switch_address(self) -> str:
        """The switch's own address (on its bridge): the launcher's rendezvous point, so that
        ranks in host namespaces can reach a driver that has no address on the testbed."""
        return str(SUBNET.broadcast_address - 1)

    switch_mac = "02:c1:ab:ff:ff:fe"

    def mac(self, index: int) -> str:
        """Locally administered MAC of node ``index``'s interface (fixed, for static entries)."""
        return "02:c1:ab:00:{:02x}:{:02x}".format(*divmod(index, 256))

    def to_dict(self) -> dict:
        d = {"hosts": self.hosts, "rate": str(self.rate), "rate_bps": self.rate_bps,
             "buffer_bytes": self.buffer_bytes, "host_queue_bytes": self.host_queue_bytes,
             "mtu": int(self.mtu), "dilation": float(self.dilation), "storage": self.storage}
        if self.has_wan:
            d.update(sites=list(self.site_sizes), wan_rate_bps=self.wan_rate_bps,
                     wan_delay_seconds=self.wan_delay_seconds, wan_queue_bytes=self.wan_queue_bytes,
                     wan_shared=bool(self.wan_shared))
            if self.wan_cells:
                d.update(wan_cells=True, wan_queue_cells=self.wan_queue_cells)
                if self.wan_discard != "none":
                    d["wan_discard"] = self.wan_discard
                if self.wan_discard == "epd":
                    d["wan_epd_threshold_cells"] = self.wan_epd_threshold_cells
        if self.tbf_bucket is not None:
            d["tbf_bucket_seconds"] = parse_duration(self.tbf_bucket)
        if self.host_rates:
            d["host_rates"] = self.host_rates
        if self.loss:
            d.update(loss=self.loss, loss_seed=self.loss_seed)
        if self.switch == "atm":
            d.update(switch="atm", buffer_cells=self.buffer_cells, discard=self.discard,
                     cell_rate_bps=self.cell_rate_bps)
            if self.discard == "epd":
                d["epd_threshold_cells"] = self.epd_threshold_cells
        return d

    @classmethod
    def from_dict(cls, d: dict) -> StarTopo:
        wan = {}
        if d.get("sites"):
            wan = dict(sites=tuple(d["sites"]), wan_rate=float(d["wan_rate_bps"]),
                       wan_delay=float(d["wan_delay_seconds"]), wan_queue=int(d["wan_queue_bytes"]),
                       wan_shared=bool(d["wan_shared"]))
            if d.get("wan_cells"):
                wan.update(wan_cells=True, wan_queue=f"{int(d['wan_queue_cells'])}cells",
                           wan_discard=d.get("wan_discard", "none"))
                if "wan_epd_threshold_cells" in d:
                    wan["wan_epd_threshold"] = f"{int(d['wan_epd_threshold_cells'])}cells"
        atm = {}
        if d.get("switch") == "atm":
            atm = dict(switch="atm", discard=d["discard"], epd_threshold=(
                f"{int(d['epd_threshold_cells'])}cells" if "epd_threshold_cells" in d else None))
        buffer = f"{int(d['buffer_cells'])}cells" if atm else int(d["buffer_bytes"])
        return cls(hosts=int(d["hosts"]), rate=d.get("rate_bps", d.get("rate", "155Mbit")),
                   buffer=buffer, host_queue=int(d["host_queue_bytes"]),
                   mtu=int(d["mtu"]), dilation=float(d["dilation"]), storage=bool(d["storage"]),
                   tbf_bucket=d.get("tbf_bucket_seconds"), host_rates=d.get("host_rates"),
                   loss=d.get("loss"), loss_seed=int(d.get("loss_seed", 1)), **wan, **atm)


def _probability(v) -> float | None:
    """``0.02%`` or ``0.0002`` (or a number) as a fraction; None when it is neither."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v) if v == v else None
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(%?)\s*", str(v))
    if not m:
        return None
    return float(m.group(1)) / (100.0 if m.group(2) else 1.0)


def aal5_cells(ip_len: int) -> int:
    """Cells of the AAL5 frame carrying an IP packet of ``ip_len`` bytes over ATM: the packet,
    LLC/SNAP's 8 bytes and AAL5's 8-byte trailer in 48-byte payloads (as ``clusterlab-atm``'s
    ``cells_for``, which the Rust models use)."""
    return -(-(ip_len + 8 + 8) // 48)


def _cells(v) -> int | None:
    """``1000cells`` as 1000; None when ``v`` is not a count of cells."""
    m = re.fullmatch(r"\s*(\d+)\s*(cells?)\s*", str(v).lower())
    return int(m.group(1)) if m else None


def check_name(name: str) -> str:
    """A testbed's short name: 1-8 lowercase letters/digits (it goes into interface names).

    >>> check_name("t1")
    't1'
    >>> check_name("Bad-Name")
    Traceback (most recent call last):
    ...
    clusterlab.errors.ConfigError: testbed name 'Bad-Name' must be 1-8 lowercase letters or digits
    """
    if not NAME_RE.match(name or ""):
        raise ConfigError(f"testbed name {name!r} must be 1-8 lowercase letters or digits")
    return name
