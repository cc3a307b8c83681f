"""Per-host TCP settings as namespace sysctls, with per-host random draws from a seed.

Seed 000's tuning: every node gets its own minimum retransmission timeout drawn from
``[rto_min, rto_min + rto_jitter]`` so that nodes that lost packets in the same burst do not
all retransmit at the same instant, and a short maximum. Linux keeps ``tcp_rto_min_us`` and
``tcp_rto_max_ms`` per network namespace; ``tcp_rto_max_ms`` accepts 1000..120000 only, so
seed 000's MAX = MIN + 100 ms cannot be set below one second (the value is clamped and
reported). Congestion control is per socket (namespaces allow only reno and bbr by sysctl).

With ``dilation`` k every timer is multiplied by k (the links run k times slower).

>>> s = TcpSettings(rto_min="5ms", rto_jitter="100ms", seed=7)
>>> d = s.draw(["h0", "h1", "h2"])
>>> [5000 <= v["net/ipv4/tcp_rto_min_us"] <= 105000 for v in d.values()]
[True, True, True]
>>> d == s.draw(["h0", "h1", "h2"])   # same seed, same draws
True
>>> TcpSettings(rto_min="5ms", dilation=10).draw(["h0"])["h0"]["net/ipv4/tcp_rto_min_us"]
50000
>>> TcpSettings(dilation=2).draw(["h0"])["h0"]["net/ipv4/tcp_rto_min_us"]   # the default, dilated
400000
>>> TcpSettings(rmem="4096 131072 6291456").draw(["h0"])["h0"]["net/ipv4/tcp_rmem"]
'4096 131072 6291456'
"""

from __future__ import annotations

import dataclasses
import random

from clusterlab.errors import ConfigError
from clusterlab.units import parse_duration, parse_size

RTO_MAX_RANGE_MS = (1000, 120000)
KERNEL_RTO_MIN = 0.200  # Linux's default minimum RTO; scaled too when the run is dilated
RTO_MIN_RANGE_US = (1000, 120_000_000)

# Always set in every namespace of a testbed: no IPv6 chatter (router solicitations, MLD) on
# the links, and no cached metrics from an earlier connection changing the next one's start.
BASE_SYSCTLS = {
    "net/ipv6/conf/all/disable_ipv6": 1,
    "net/ipv6/conf/default/disable_ipv6": 1,
    "net/ipv4/tcp_no_metrics_save": 1,
}


def _triple(text: str | None, what: str) -> str | None:
    if text is None:
        return None
    parts = str(text).replace(",", " ").split()
    if len(parts) == 1:  # one size: use it as default and max
        v = parse_size(parts[0])
        return f"4096 {v} {max(v, 4096)}"
    if len(parts) != 3:
        raise ConfigError(f"{what} must be one size or three sizes 'min default max', got {text!r}")
    vals = [parse_size(p) for p in parts]
    if not vals[0] <= vals[1] <= vals[2]:
        raise ConfigError(f"{what} must satisfy min <= default <= max, got {text!r}")
    return " ".join(str(v) for v in vals)


@dataclasses.dataclass(frozen=True)
class TcpSettings:
    """What each host's TCP gets. None leaves the kernel default."""

    rto_min: str | float | None = None
    rto_jitter: str | float | None = None
    rto_max: str | float | None = None
    rmem: str | None = None
    wmem: str | None = None
    window_scaling: bool | None = None
    seed: int = 0
    dilation: float = 1.0

    def __post_init__(self):
        if self.rto_jitter is not None and self.rto_min is None:
            raise ConfigError("rto_jitter needs rto_min (the jitter is added to it)")
        for name in ("rto_min", "rto_jitter", "rto_max"):
            v = getattr(self, name)
            if v is not None and parse_duration(v) < 0:
                raise ConfigError(f"{name} must not be negative, got {v!r}")
        _triple(self.rmem, "rmem")
        _triple(self.wmem, "wmem")

    def draw(self, hosts: list[str]) -> dict[str, dict[str, int | str]]:
        """Sysctl values (path under /proc/sys -> value) for each host, reproducible by seed."""
        rng = random.Random(self.seed)
        k = float(self.dilation)
        out = {}
        for h in hosts:
            s: dict[str, int | str] = dict(BASE_SYSCTLS)
            if self.rto_min is not None or k != 1.0:
                lo = parse_duration(self.rto_min) if self.rto_min is not None else KERNEL_RTO_MIN
                j = parse_duration(self.rto_jitter) if self.rto_jitter is not None else 0.0
                us = int(round((lo + rng.uniform(0.0, j)) * k * 1e6))
                s["net/ipv4/tcp_rto_min_us"] = min(max(us, RTO_MIN_RANGE_US[0]), RTO_MIN_RANGE_US[1])
            if self.rto_max is not None:
                ms = int(round(parse_duration(self.rto_max) * k * 1e3))
                s["net/ipv4/tcp_rto_max_ms"] = min(max(ms, RTO_MAX_RANGE_MS[0]), RTO_MAX_RANGE_MS[1])
            if self.rmem is not None:
                s["net/ipv4/tcp_rmem"] = _triple(self.rmem, "rmem")
            if self.wmem is not None:
                s["net/ipv4/tcp_wmem"] = _triple(self.wmem, "wmem")
            if self.window_scaling is not None:
                s["net/ipv4/tcp_window_scaling"] = int(bool(self.window_scaling))
            out[h] = s
        return out

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
