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

This module holds the one rule for both: which dilations express a maximum RTO
(``bounds``; ``pick_dilation`` for a testbed cluster or a study's point, and ``common_dilations``, use it) and whether
runs at several dilations agree (``agree_medians``; ``agree`` for two, the studies' report
for their ``DilationCheck``).

>>> agree([0.100, 0.104, 0.098], [0.108, 0.103, 0.110])["ok"]
True
>>> agree([0.100], [0.150])
{'ok': False, 'median_a': 0.1, 'median_b': 0.15, 'ratio': 1.5, 'tolerance': 0.1}
"""

from __future__ import annotations

import math
import statistics

from clusterlab.errors import ConfigError
from clusterlab.net.transport_config import RTO_MAX_MS_RANGE, TransportConfig, fmt_duration

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


def bounds(max_lo: float, max_hi: float) -> tuple[float, float]:
    """The dilations k (at least 1) under which maximum RTOs from ``max_lo`` to ``max_hi``
    seconds are expressible: MAX x k must lie in 1..120 s (``net.ipv4.tcp_rto_max_ms``).
    ``lo > hi`` when none is.

    >>> bounds(60.0, 60.0)
    (1.0, 2.0)
    >>> round(bounds(0.3, 0.3)[0], 3)
    3.333
    """
    lo_ms, hi_ms = RTO_MAX_MS_RANGE
    lo = max(1.0, lo_ms / 1e3 / max_lo) if max_lo > 0 else math.inf
    hi = hi_ms / 1e3 / max_hi if max_hi > 0 else 0.0
    return lo, hi


def agree_medians(by_dilation: dict, tolerance: float = 0.10) -> dict:
    """Do runs of one point at several dilations agree? ``by_dilation``: k -> the undilated
    values of its repetitions. ``ok`` when the medians differ by at most ``tolerance``
    (relative to the smallest); None with fewer than two dilations measured.

    >>> agree_medians({4: [0.30, 0.31], 8: [0.29]})
    {'ok': True, 'medians': {4.0: 0.305, 8.0: 0.29}, 'ratio': 1.052, 'tolerance': 0.1}
    """
    if not 0 < tolerance < 1:
        raise ConfigError(f"tolerance must be in (0, 1), got {tolerance}")
    meds = {float(k): round(statistics.median(v), 6) for k, v in by_dilation.items() if len(v)}
    ok, ratio = None, None
    if len(meds) >= 2:
        lo, hi = min(meds.values()), max(meds.values())
        ratio = hi / lo if lo > 0 else math.inf
        ok = ratio <= 1 + tolerance
        ratio = round(ratio, 3)
    return {"ok": ok, "medians": meds, "ratio": ratio, "tolerance": tolerance}


def agree(seconds_a, seconds_b, tolerance: float = 0.10) -> dict:
    """Do two runs of one point (undilated seconds per repetition, at two dilations) agree?
    ``ok`` when their medians differ by at most ``tolerance`` (relative to the smaller)."""
    if not seconds_a or not seconds_b:
        raise ConfigError("agree needs at least one repetition from each dilation")
    r = agree_medians({0: seconds_a, 1: seconds_b}, tolerance)
    return {"ok": r["ok"], "median_a": r["medians"][0.0], "median_b": r["medians"][1.0], "ratio": r["ratio"],
            "tolerance": tolerance}


def common_dilations(transport, candidates) -> list[float]:
    """The candidate dilations at which ``transport`` (a ``TransportConfig``) is expressible
    on a testbed, e.g. to pick two for ``agree``.

    >>> from clusterlab.net.transport_config import TransportConfig
    >>> common_dilations(TransportConfig(rto_min=0.2, rto_max_offset=0.1, place="testbed"), [1, 2, 4, 8])
    [4.0, 8.0]
    """
    t = transport.with_place("testbed")
    return [k for k, why in t.expressible(candidates).items() if why is None]


def dilation_bounds(tcp: TransportConfig) -> tuple[float, float, str]:
    """The dilations k under which every host's timers are expressible: ``(lo, hi, why)``.
    MAX x k must lie in 1..120 s (``tcp_rto_max_ms``).

    >>> dilation_bounds(TransportConfig(rto_min="200ms", rto_max="60s"))[:2]
    (1.0, 2.0)
    >>> round(dilation_bounds(TransportConfig(rto_min="5ms", rto_max_offset="100ms"))[0], 3)
    9.524
    """
    mr = tcp.max_range()
    if mr is None:
        return 1.0, math.inf, ""
    lo_ms, hi_ms = RTO_MAX_MS_RANGE
    mx_lo, mx_hi = mr
    lo, hi = bounds(mx_lo, mx_hi)
    why = (f"MAX {fmt_duration(mx_lo)}" + (f"..{fmt_duration(mx_hi)}" if mx_hi > mx_lo else "")
           + f" x k must lie in {lo_ms}..{hi_ms} ms (net.ipv4.tcp_rto_max_ms)")
    return lo, hi, why


def pick_dilation(tcp: TransportConfig, requested, prefer: float = 1.0) -> tuple[float, str]:
    """The dilation a point runs at and why: a fixed ``requested`` k is checked; ``"auto"``
    takes ``prefer`` if it expresses the settings, else the nearest whole k that does.

    >>> pick_dilation(TransportConfig(rto_min="200ms", rto_max_offset="100ms"), "auto")
    (4.0, 'auto: MAX 300ms x k must lie in 1000..120000 ms (net.ipv4.tcp_rto_max_ms): k in 3.33..400')
    >>> pick_dilation(TransportConfig(rto_min="200ms", rto_max="60s"), "auto", prefer=10)[0]
    2.0
    """
    lo, hi, why = dilation_bounds(tcp)
    rng = f"k in {lo:.3g}..{hi:.3g}" if math.isfinite(hi) else f"k >= {lo:.3g}"
    eps = 1e-9
    if requested != "auto":
        k = float(requested)
        mr = tcp.max_range()
        if k < lo - eps:
            raise ConfigError(f"dilation {k:g} cannot express it: MAX {fmt_duration(mr[0])} x {k:g} is below the "
                              f"{RTO_MAX_MS_RANGE[0]} ms net.ipv4.tcp_rto_max_ms accepts "
                              f"({RTO_MAX_MS_RANGE[0]}..{RTO_MAX_MS_RANGE[1]} ms); needs dilation >= {lo:.3g}")
        if k > hi + eps:
            raise ConfigError(f"dilation {k:g} cannot express it: MAX {fmt_duration(mr[1])} x {k:g} is above the "
                              f"{RTO_MAX_MS_RANGE[1]} ms net.ipv4.tcp_rto_max_ms accepts; needs dilation <= {hi:.3g}")
        return k, "fixed" + (f": {why}: {rng}" if why else "")
    k = float(prefer)
    if k < lo - eps:
        k = float(math.ceil(lo - eps))
    if k > hi + eps:
        k = float(math.floor(hi + eps))
    if k < lo - eps or k < 1:
        raise ConfigError(f"no dilation can express it: {why}, and k >= 1 leaves {rng}")
    return k, "auto" + (f": {why}: {rng}" if why else "")
