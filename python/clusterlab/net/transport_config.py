"""``TransportConfig``: every per-socket TCP knob of the mesh in one validated value.

Kernel facts this checks against (Linux 6.18, HZ=250, as on the lab machines):

- ``TCP_RTO_MIN_US`` (socket option 45) accepts 5,000..200,000 us and rounds up to whole
  4 ms jiffies (5 ms is in force as 8 ms); it can only *lower* the minimum RTO below the
  route/sysctl value. For a minimum above 200 ms use the per-namespace sysctl
  ``net.ipv4.tcp_rto_min_us`` (the testbed sets it), not this option.
- ``TCP_RTO_MAX_MS`` (socket option 44) accepts 1,000..120,000 ms.
- ``SO_SNDBUF``/``SO_RCVBUF`` are capped by ``net.core.wmem_max``/``rmem_max`` unless the
  process may use ``SO_*BUFFORCE`` (root); the kernel doubles the value for bookkeeping.
- ``TCP_CONGESTION`` must name an algorithm in ``tcp_available_congestion_control``
  (and, without CAP_NET_ADMIN, in ``tcp_allowed_congestion_control``).

Per-rank jitter (seed 000's "random MIN per node"): with ``rto_min_jitter`` each rank draws its
own value uniformly from ``[rto_min, rto_min + rto_min_jitter]`` with a generator seeded by
``(seed, rank)``, so a run is reproducible.

>>> c = TransportConfig(rto_min=0.005, rto_min_jitter=0.010, seed=1)
>>> s0, s1 = c.for_rank(0), c.for_rank(1)
>>> 5000 <= s0.rto_min_us <= 15000 and s0 == c.for_rank(0) and s0 != s1
True
>>> TransportConfig(rto_min=0.001)
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: rto_min 1ms is below what TCP_RTO_MIN_US accepts (5ms..200ms)
>>> TransportConfig.from_json(TransportConfig(sndbuf=1 << 20).to_json()).sndbuf
1048576
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import socket
from dataclasses import dataclass
from pathlib import Path

from clusterlab.errors import ConfigError

TCP_RTO_MAX_MS = 44
TCP_RTO_MIN_US = 45
SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33
RTO_MIN_US_RANGE = (5_000, 200_000)
RTO_MAX_MS_RANGE = (1_000, 120_000)
JIFFY_US = 4_000  # HZ=250
MIN_BUF = 4096


def _fmt_s(seconds: float) -> str:
    us = round(seconds * 1e6)
    if us % 1000 == 0:
        return f"{us // 1000}ms" if us < 1_000_000 or us % 1_000_000 else f"{us // 1_000_000}s"
    return f"{us}us"


def _sysctl(path: str, default: int | str | None = None):
    try:
        return Path("/proc/sys", path).read_text().strip()
    except OSError:
        return default


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


@dataclass(frozen=True)
class RankSettings:
    """The values one rank applies to each of its sockets (after the jitter draw)."""

    rank: int
    sndbuf: int | None
    rcvbuf: int | None
    nodelay: bool
    congestion: str | None
    rto_min_us: int | None
    rto_max_ms: int | None


@dataclass(frozen=True)
class TransportConfig:
    """Socket settings for every connection of the mesh. Times are seconds, sizes bytes;
    ``None`` leaves the kernel default."""

    sndbuf: int | None = None
    rcvbuf: int | None = None
    nodelay: bool = True
    congestion: str | None = None
    rto_min: float | None = None
    rto_min_jitter: float = 0.0
    rto_max: float | None = None
    rto_max_jitter: float = 0.0
    seed: int = 0

    def __post_init__(self):
        self.validate()

    # --- validation ----------------------------------------------------------------------------
    def validate(self) -> None:
        """Refuse settings the kernel cannot honour, naming the accepted range."""
        lo, hi = RTO_MIN_US_RANGE
        if self.rto_min_jitter < 0 or self.rto_max_jitter < 0:
            raise ConfigError("rto jitter must be >= 0")
        if (self.rto_min_jitter and self.rto_min is None) or (self.rto_max_jitter and self.rto_max is None):
            raise ConfigError("a jitter needs its base value (rto_min / rto_max)")
        rng = f"({_fmt_s(lo / 1e6)}..{_fmt_s(hi / 1e6)})"
        if self.rto_min is not None:
            top = self.rto_min + self.rto_min_jitter
            if round(self.rto_min * 1e6) < lo:
                raise ConfigError(f"rto_min {_fmt_s(self.rto_min)} is below what TCP_RTO_MIN_US accepts {rng}")
            if round(top * 1e6) > hi:
                raise ConfigError(
                    f"rto_min {_fmt_s(self.rto_min)}{' + jitter ' + _fmt_s(self.rto_min_jitter) if self.rto_min_jitter else ''}"
                    f" exceeds what TCP_RTO_MIN_US accepts {rng}; it can only lower the minimum RTO. For a"
                    " larger minimum set the per-namespace sysctl net.ipv4.tcp_rto_min_us (testbed)")
        lo, hi = RTO_MAX_MS_RANGE
        rng = f"({_fmt_s(lo / 1e3)}..{_fmt_s(hi / 1e3)})"
        if self.rto_max is not None:
            if round(self.rto_max * 1e3) < lo or round((self.rto_max + self.rto_max_jitter) * 1e3) > hi:
                raise ConfigError(f"rto_max {_fmt_s(self.rto_max)}"
                                  f"{' + jitter ' + _fmt_s(self.rto_max_jitter) if self.rto_max_jitter else ''}"
                                  f" is outside what TCP_RTO_MAX_MS accepts {rng}")
            if self.rto_min is not None and self.rto_max < self.rto_min + self.rto_min_jitter:
                raise ConfigError("rto_max must be at least rto_min (+ jitter)")
        for name, sysctl in (("sndbuf", "net/core/wmem_max"), ("rcvbuf", "net/core/rmem_max")):
            v = getattr(self, name)
            if v is None:
                continue
            if not isinstance(v, int) or v < MIN_BUF:
                raise ConfigError(f"{name} {v!r} must be an integer of at least {MIN_BUF} bytes")
            cap = int(_sysctl(sysctl, 0) or 0)
            if cap and v > cap and not _is_root():
                raise ConfigError(f"{name} {v} exceeds {sysctl.replace('/', '.')} = {cap} (accepted "
                                  f"{MIN_BUF}..{cap}; raise the sysctl or run as root)")
        if self.congestion is not None:
            avail = (_sysctl("net/ipv4/tcp_available_congestion_control", "") or "").split()
            allowed = (_sysctl("net/ipv4/tcp_allowed_congestion_control", "") or "").split()
            ok = avail if _is_root() else allowed
            if ok and self.congestion not in ok:
                raise ConfigError(f"congestion control {self.congestion!r} is not available here "
                                  f"(accepted: {', '.join(ok)})")

    # --- per rank ---------------------------------------------------------------------------------
    def for_rank(self, rank: int) -> RankSettings:
        """Settings for ``rank``: the jitter draw is a pure function of ``(seed, rank)``."""
        rnd = random.Random(f"clusterlab-transport:{self.seed}:{rank}")
        rmin = rmax = None
        if self.rto_min is not None:
            rmin = round((self.rto_min + rnd.uniform(0, self.rto_min_jitter)) * 1e6)
        if self.rto_max is not None:
            rmax = round((self.rto_max + rnd.uniform(0, self.rto_max_jitter)) * 1e3)
        return RankSettings(rank, self.sndbuf, self.rcvbuf, self.nodelay, self.congestion, rmin, rmax)

    def apply(self, sock: socket.socket, rank: int) -> dict:
        """Set this rank's values on ``sock`` (call before connect/listen so buffer sizes shape
        the window scale) and return what the kernel reports in force."""
        s = self.for_rank(rank)
        try:
            if s.sndbuf is not None:
                self._setbuf(sock, socket.SO_SNDBUF, SO_SNDBUFFORCE, s.sndbuf, "net.core.wmem_max")
            if s.rcvbuf is not None:
                self._setbuf(sock, socket.SO_RCVBUF, SO_RCVBUFFORCE, s.rcvbuf, "net.core.rmem_max")
            if s.nodelay:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if s.congestion is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, s.congestion.encode())
        except OSError as e:
            raise ConfigError(f"cannot apply transport settings {s}: {e}") from None
        if s.rto_min_us is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, TCP_RTO_MIN_US, s.rto_min_us)
            except OSError as e:
                raise ConfigError(f"TCP_RTO_MIN_US={s.rto_min_us} refused by the kernel ({e}); it needs "
                                  "Linux 6.11+ and accepts 5000..200000 us") from None
        if s.rto_max_ms is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, TCP_RTO_MAX_MS, s.rto_max_ms)
            except OSError as e:
                raise ConfigError(f"TCP_RTO_MAX_MS={s.rto_max_ms} refused by the kernel ({e}); it needs "
                                  "Linux 6.15+ and accepts 1000..120000 ms") from None
        return in_force(sock)

    @staticmethod
    def _setbuf(sock, opt, force_opt, value, sysctl):
        cap = int(_sysctl(sysctl.replace(".", "/"), 0) or 0)
        if cap and value > cap and _is_root():
            sock.setsockopt(socket.SOL_SOCKET, force_opt, value)
        else:
            sock.setsockopt(socket.SOL_SOCKET, opt, value)

    # --- (de)serialisation: the launcher passes the config to ranks as JSON ----------------------
    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> TransportConfig:
        try:
            d = json.loads(text)
        except ValueError as e:
            raise ConfigError(f"transport config is not JSON: {e}") from None
        names = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(d, dict) or set(d) - names:
            raise ConfigError(f"transport config has unknown keys {sorted(set(d) - names) if isinstance(d, dict) else d}")
        return cls(**d)


def in_force(sock: socket.socket) -> dict:
    """What the kernel reports for ``sock``: buffer sizes (as the kernel stores them, i.e.
    doubled), Nagle, congestion control and the RTO bounds (after rounding to jiffies)."""
    out: dict = {}

    def get(name, level, opt, *a):
        try:
            out[name] = sock.getsockopt(level, opt, *a)
        except OSError:
            pass

    get("sndbuf", socket.SOL_SOCKET, socket.SO_SNDBUF)
    get("rcvbuf", socket.SOL_SOCKET, socket.SO_RCVBUF)
    get("nodelay", socket.IPPROTO_TCP, socket.TCP_NODELAY)
    get("congestion", socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16)
    if "congestion" in out:
        out["congestion"] = out["congestion"].split(b"\0", 1)[0].decode()
    get("rto_min_us", socket.IPPROTO_TCP, TCP_RTO_MIN_US)
    get("rto_max_ms", socket.IPPROTO_TCP, TCP_RTO_MAX_MS)
    out["nodelay"] = bool(out.get("nodelay"))
    return out
