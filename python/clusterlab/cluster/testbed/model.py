"""The cost model a testbed's ranks pick collective algorithms by: its links' rate and its
switch ports' buffer, beside the TCP mesh's per-message costs.

The built-in model (``CostModel()``) is a fit of the mesh on this machine's loopback, where a
message's CPU dominates and a byte is nearly free: it picks a binomial reduce and broadcast for
a 1.3 MB all-reduce at 100 ranks. On the testbed's 155 Mbit/s links that call moves the whole
array 14 times along its critical path; measured at 100 hosts (k = 3, 64 KB ports) it took
2.1 s where a ring took 0.36 s. ``link_model`` keeps the loopback fit's software terms and adds
what the topology says:

- ``beta``: seconds per byte of IP payload on the slowest link after dilation (Ethernet
  framing on the bridge; AAL5 cells at the cell rate on the ATM switch, 53 bytes per 48);
- ``alpha``: the software latency plus a small frame's serialisation at both links (and the
  WAN line's one-way delay between two sites);
- ``concurrency`` 0 (every host has its own link) and ``cpus``: the machine's CPUs, which every
  host's ranks share, each message costing ``TESTBED_CPU_MESSAGE`` of them (``CostModel.cpu_step``);
- ``port_buffer``: the switch port's buffer, and ``loss_penalty``: Linux's RTO minimum (200 ms)
  after dilation, what a schedule whose ranks all send into one at once beyond the buffer pays
  (``CostModel.overflows``); Linux's whatever the transport's timers, so jobs that differ only in
  them pick alike;
- ``window``: TCP's initial window at the MTU.

``clusterlab.bench.collective_testbed.fit_model`` measures these on a testbed instead; a file
named by ``$CLUSTERLAB_COSTMODEL`` (``clusterlab tune model``) overrides this model on every rank.

>>> from clusterlab.cluster.testbed.topo import StarTopo
>>> m = link_model(StarTopo(hosts=100, rate="155Mbit", buffer="64KB", dilation=3), cpus=2)
>>> round(m.beta * 1e9), m.port_buffer, m.concurrency
(156, 64000.0, 0.0)
>>> import clusterlab.comm.collectives
>>> m.pick("allreduce", 1_300_000, 100), m.pick("allreduce", 8, 100)
('ring', 'reduce_bcast')
>>> round(link_model(StarTopo(hosts=16, switch="atm", buffer="1000cells"), cpus=2).beta * 1e9, 1)
59.8
"""

from __future__ import annotations

import os

from clusterlab.cluster.testbed.topo import CELL_BYTES, ETH_HLEN, aal5_cells
from clusterlab.comm.costmodel import CostModel

# CPU seconds per message of a testbed's ranks (both ends, kernel, switch and ranks) on the
# 2-CPU development machine: a 100-host ring all-reduce step (100 messages of 13 KB) took 3.4 ms
# of 2 CPUs beyond its wire time, ~68 us a message; a two-host ping-pong's busy CPU is 17-31 us
# (bench/results/seed002_cpu_model.json). Between the two: the many-rank steps are the ones
# whose price it decides.
TESTBED_CPU_MESSAGE = 50e-6
IP_TCP_HEADERS = 52  # IPv4 + TCP + timestamps
LINUX_INITCWND = 10
LINUX_RTO_MIN = 0.2


def link_model(topo, cpus: int | None = None, initcwnd: int | None = None) -> CostModel:
    """The cost model of ``topo``'s links (a ``StarTopo``), for ranks one per host; ``cpus``:
    the CPUs the hosts share (default: this process's)."""
    base = CostModel()
    mtu = int(topo.mtu)
    payload = mtu - IP_TCP_HEADERS
    if topo.switch == "atm":
        rate = topo.cell_rate_bps / topo.dilation
        wire = aal5_cells(mtu) * CELL_BYTES
        small = aal5_cells(64) * CELL_BYTES
        port_buffer = topo.buffer_cells * 48
    else:
        rate = min(topo.effective_link_rate_bps(i) for i in range(topo.n_nodes))
        wire = mtu + ETH_HLEN
        small = 64 + ETH_HLEN
        port_buffer = topo.buffer_bytes
    alpha = base.alpha + 2 * small * 8 / rate
    if topo.has_wan:
        rate = min(rate, topo.wan_ip_rate_bps() / topo.dilation * payload / mtu)
        alpha += topo.wan_delay_seconds * topo.dilation
    beta = max(base.beta, wire / payload * 8 / rate)
    n_cpus = cpus if cpus is not None else len(os.sched_getaffinity(0))
    segments = initcwnd or LINUX_INITCWND
    switch = f"{topo.switch}{' + WAN line' if topo.has_wan else ''}"
    return CostModel(alpha=alpha, beta=beta, gamma=base.gamma, setup=base.setup, overhead=base.overhead,
                     concurrency=0.0, cpus=float(n_cpus), cpu_message=TESTBED_CPU_MESSAGE,
                     window=float(segments * payload), port_buffer=float(port_buffer),
                     loss_penalty=LINUX_RTO_MIN * topo.dilation,
                     source=f"testbed links: {topo.rate} {switch}, k = {topo.dilation:g} (clusterlab.cluster.testbed.model)")
