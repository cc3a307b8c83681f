"""Per-host TCP settings of a testbed: per-namespace sysctls drawn from one ``TransportConfig``.

The settings and their parser are ``clusterlab.net.transport_config.TransportConfig`` (at
``place="testbed"``); this module adds what every testbed namespace gets anyway.

Seed 000's tuning: every node gets its own minimum retransmission timeout drawn from
``[rto_min, rto_min + rto_min_jitter]`` so that nodes that lost packets in the same burst do
not all retransmit at the same instant, and a short maximum (``rto_max_offset``: that node's
own MIN + offset). Linux keeps ``tcp_rto_min_us`` and ``tcp_rto_max_ms`` per network
namespace; ``tcp_rto_max_ms`` accepts 1 s..120 s only, so a MAX below one second needs a
dilated testbed (timers x k): a setting the kernel cannot take is refused with the reason.

>>> t = TransportConfig(rto_min="5ms", rto_min_jitter="100ms", seed=7)
>>> d = host_sysctls(t, ["h0", "h1", "h2"])
>>> [5000 <= v["net/ipv4/tcp_rto_min_us"] <= 105000 for v in d.values()]
[True, True, True]
>>> d == host_sysctls(t, ["h0", "h1", "h2"])   # same seed, same draws
True
>>> host_sysctls(TransportConfig(rto_min="5ms"), ["h0"], dilation=10)["h0"]["net/ipv4/tcp_rto_min_us"]
50000
>>> host_sysctls(TransportConfig(), ["h0"], dilation=2)["h0"]["net/ipv4/tcp_rto_min_us"]   # the default, dilated
400000
>>> host_sysctls(TransportConfig(rmem="4096 131072 6291456"), ["h0"])["h0"]["net/ipv4/tcp_rmem"]
'4096 131072 6291456'
>>> host_sysctls(TransportConfig(rto_min="300s"), ["h0"])
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: rto_min 300s is above the kernel's default maximum RTO (120s, net.ipv4.tcp_rto_max_ms): the kernel would cut every RTO to the maximum. Lower it
"""

from __future__ import annotations

import math

from clusterlab.net.transport_config import TransportConfig

# Always set in every namespace of a testbed: no IPv6 chatter (router solicitations, MLD) on
# the links, and no cached metrics from an earlier connection changing the next one's start.
BASE_SYSCTLS = {
    "net/ipv6/conf/all/disable_ipv6": 1,
    "net/ipv6/conf/default/disable_ipv6": 1,
    "net/ipv4/tcp_no_metrics_save": 1,
}


# The machine's receive backlog per CPU (net.core.netdev_max_backlog: one for the whole machine,
# not per namespace). Every veth hands its packets to it, so a burst from many emulated hosts
# through the bridge overflows the kernel's default of 1000 and the emulation itself drops
# packets (measured: 2918 in one 100-host all-to-all point, seed000-fig5). Raised with the
# host count, never lowered, and left raised, as Mininet's fixLimits does.
BACKLOG = "net/core/netdev_max_backlog"
BACKLOG_PER_HOST = 100
BACKLOG_MAX = 100_000


def machine_backlog(hosts: int, current: int) -> int | None:
    """The backlog a testbed of ``hosts`` hosts wants, or None when ``current`` is enough.

    >>> machine_backlog(16, 1000), machine_backlog(100, 1000), machine_backlog(100, 20000), machine_backlog(5000, 1000)
    (1600, 10000, None, 100000)
    """
    want = min(BACKLOG_MAX, max(1000, BACKLOG_PER_HOST * hosts))
    return want if want > current else None


def raise_machine_backlog(hosts: int) -> dict[str, int]:
    """Raise the machine's backlog for ``hosts`` hosts when it is lower; returns what changed."""
    path = f"/proc/sys/{BACKLOG}"
    try:
        with open(path) as f:
            current = int(f.read().split()[0])
        want = machine_backlog(hosts, current)
        if want is None:
            return {}
        with open(path, "w") as f:
            f.write(str(want))
    except (OSError, ValueError, IndexError):
        return {}  # not Linux as expected: the fidelity check's drop count still tells
    return {BACKLOG.replace("/", "."): want}


def retries2(dilation: float) -> int:
    """``tcp_retries2`` at ``dilation``: how many retransmissions of one segment TCP makes before
    it drops the connection. The time it allows is counted from the kernel's fixed 200 ms base and
    the (dilated) MAX, so a dilated host would give up k times sooner in the emulated time than an
    undilated one (measured: a seed-era flow through a congested ATM port at k = 10, MAX 3 s,
    dropped with ETIMEDOUT after ~40 s). Scaled by k, at most 120 (the seeds' Solaris gave up
    only after 8 minutes).

    >>> retries2(1.0), retries2(10.0), retries2(100.0)
    (15, 120, 120)
    """
    return 15 if dilation <= 1 else min(120, math.ceil(15 * dilation))


def host_sysctls(transport: TransportConfig, hosts: list[str], dilation: float = 1.0) -> dict[str, dict]:
    """Sysctls (path under /proc/sys -> value) for each host (host i = rank i), reproducible
    by the config's seed; refuses a setting the kernel cannot take at ``dilation``."""
    base = {**BASE_SYSCTLS, "net/ipv4/tcp_retries2": retries2(dilation)}
    return {h: {**base, **transport.namespace_sysctls(i, dilation)} for i, h in enumerate(hosts)}
