"""Time dilation on the testbed: which timers it scales, and checking that two dilations agree.

Dilation k divides every link rate by k and multiplies the timers clusterlab sets by k, so a
run k times slower in real time shows the same undilated behaviour with k times less CPU per
simulated second. Only what the kernel lets us set is scaled; RTTs, queueing delays and
pacing scale by themselves (they are measured); the timers compiled into the kernel do not:

==========================================  ==========  =============================================
timer                                       scaled?     how
==========================================  ==========  =============================================
minimum RTO (``tcp_rto_min_us``)            yes         per-host sysctl x k (also the 200 ms default)
maximum RTO (``tcp_rto_max_ms``)            yes         per-host sysctl x k (1 s..120 s after scaling)
tail loss probe, one packet out             yes         2 srtt + the minimum RTO (both scale)
RTT, srtt-based RTO, RACK reorder window    by itself   measured on the slowed links
probe timer floor (``tcp_probe0_base``)     no          200 ms (TCP_RTO_MIN) after a local qdisc drop
                                                        with nothing in flight
delayed ACK (``TCP_DELACK_MIN``/``MAX``)    no          40 ms .. 200 ms
tail loss probe, several packets out        partly      2 srtt scales, + 2 jiffies (8 ms) does not
timer granularity (HZ=250)                  no          4 ms jiffies: 5 ms in force as 8 ms
SYN retransmission (``TCP_TIMEOUT_INIT``)   no          1 s (only at connection set-up)
==========================================  ==========  =============================================

An unscaled timer is k times shorter relative to the slowed network, so it weighs k times
less in the undilated result. That is why a dilated run can look better than an undilated
one whose rounds hit the 200 ms probe floor (a shallow host queue) or delayed ACKs, and why
two dilations of the same point must be compared before dilation is trusted (``agree``).

>>> agree([0.100, 0.104, 0.098], [0.108, 0.103, 0.110])["ok"]
True
>>> agree([0.100], [0.150])
{'ok': False, 'median_a': 0.1, 'median_b': 0.15, 'ratio': 1.5, 'tolerance': 0.1}
"""

from __future__ import annotations

import statistics

from clusterlab.errors import ConfigError

TIMERS = (
    ("minimum RTO", "scaled", "per-host sysctl net.ipv4.tcp_rto_min_us x k"),
    ("maximum RTO", "scaled", "per-host sysctl net.ipv4.tcp_rto_max_ms x k"),
    ("tail loss probe (1 packet out)", "scaled", "2 srtt + minimum RTO"),
    ("RTT, srtt-based RTO, RACK window", "measured", "scale with the slowed links"),
    ("probe timer floor", "fixed", "200 ms TCP_RTO_MIN in tcp_probe0_base"),
    ("delayed ACK", "fixed", "TCP_DELACK_MIN 40 ms .. TCP_DELACK_MAX 200 ms"),
    ("timer granularity", "fixed", "4 ms jiffies (HZ=250)"),
    ("SYN retransmission", "fixed", "TCP_TIMEOUT_INIT 1 s (connection set-up only)"),
)
"""(timer, scaled|measured|fixed, how) for reports."""


def agree(seconds_a, seconds_b, tolerance: float = 0.10) -> dict:
    """Do two runs of one point (undilated seconds per repetition, at two dilations) agree?
    ``ok`` when their medians differ by at most ``tolerance`` (relative to the smaller)."""
    if not seconds_a or not seconds_b:
        raise ConfigError("agree needs at least one repetition from each dilation")
    if not 0 < tolerance < 1:
        raise ConfigError(f"tolerance must be in (0, 1), got {tolerance}")
    a, b = statistics.median(seconds_a), statistics.median(seconds_b)
    ratio = max(a, b) / min(a, b) if min(a, b) > 0 else float("inf")
    return {"ok": ratio <= 1 + tolerance, "median_a": round(a, 6), "median_b": round(b, 6),
            "ratio": round(ratio, 3), "tolerance": tolerance}


def common_dilations(transport, candidates) -> list[float]:
    """The candidate dilations at which ``transport`` (a ``TransportConfig``) is expressible
    on a testbed, e.g. to pick two for ``agree``.

    >>> from clusterlab.net.transport_config import TransportConfig
    >>> common_dilations(TransportConfig(rto_min=0.2, rto_max_offset=0.1, place="testbed"), [1, 2, 4, 8])
    [4.0, 8.0]
    """
    t = transport.with_place("testbed")
    return [k for k, why in t.expressible(candidates).items() if why is None]
