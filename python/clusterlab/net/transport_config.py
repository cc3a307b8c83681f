"""``TransportConfig``: every TCP knob of a run in one validated value, and its one parser.

This is the only type of TCP settings: the CLI's options, a study's ``transport=`` and grid
values, the launcher's JSON for the ranks and the testbed's per-host sysctls are all this class,
with one name per setting (the field names below). The constructor takes unit strings
(``rto_min="5ms"``, ``sndbuf="4MiB"``, ``sack="off"``) as well as numbers (seconds, bytes);
``parse`` reads ``key=value,...`` text or a mapping; old spellings (``rto_jitter``,
``rto_max_extra``, ``cc``) are refused naming the new one. The kernel's limits are written here
and only here (``RTO_MIN_US_RANGE``, ``RTO_MAX_MS_RANGE``, ``KERNEL_RTO_MIN``, ...).

A knob is applied where the run happens (``place``; ``None`` until the run's cluster is known:
then only what holds everywhere is checked, and ``with_place`` checks the rest):

==================  ==========================================  =============================================
knob                ``place="socket"`` (local loopback, MPI,    ``place="testbed"`` (namespace testbed,
                    real clusters): on every mesh socket         per host = per rank, timers x dilation)
==================  ==========================================  =============================================
rto_min (+jitter)   ``TCP_RTO_MIN_US`` 5ms..200ms (can only      sysctl ``net.ipv4.tcp_rto_min_us``
                    lower the minimum)                           (no 200 ms cap; at most the maximum RTO)
rto_max (+jitter)   ``TCP_RTO_MAX_MS`` 1s..120s                  sysctl ``net.ipv4.tcp_rto_max_ms`` 1s..120s
rto_max_offset      MAX = this rank's own MIN + offset           same, per host
congestion          ``TCP_CONGESTION``                           ``TCP_CONGESTION`` on each mesh socket
sndbuf, rcvbuf      ``SO_SNDBUF``/``SO_RCVBUF``                  same
nodelay             ``TCP_NODELAY``                              same
rmem, wmem          refused (machine-wide sysctls)               sysctls ``tcp_rmem``/``tcp_wmem``
window_scaling      refused (machine-wide sysctl)                sysctl ``tcp_window_scaling``
initcwnd            refused (a route attribute of this machine)  ``initcwnd`` on each host's route
sack, recovery,     refused (machine-wide sysctls)               sysctls ``tcp_sack``, ``tcp_recovery`` (RACK),
early_retrans,                                                   ``tcp_early_retrans`` (tail loss probes),
frto, timestamps                                                 ``tcp_frto``, ``tcp_timestamps``
stack               ``linux`` only (changes nothing)             a named profile of the knobs above
==================  ==========================================  =============================================

``stack``: ``linux`` is this kernel's TCP as the machine has it (nothing changed);
``seed-era`` is what seed 000's Solaris 2.5.1 had: Reno, an initial window of 2 segments, no
SACK, no RACK (loss found by three duplicate ACKs or the RTO), no tail loss probe or early
retransmit, no F-RTO, no timestamps (``SEED_ERA``). Knobs given beside a profile win over it.
These sysctls are per network namespace on Linux 6.18 (checked on the testbed by
``tests/testbed/test_settings.py``), so only a testbed host can take them.

Kernel facts this checks against (Linux 6.18, HZ=250, as on the lab machines):

- ``TCP_RTO_MIN_US`` (socket option 45) accepts 5,000..200,000 us and rounds up to whole
  4 ms jiffies (5 ms is in force as 8 ms); it can only *lower* the minimum RTO below the
  route/sysctl value. For a minimum above 200 ms use the testbed's per-namespace sysctl
  ``net.ipv4.tcp_rto_min_us``, which takes any value up to the maximum RTO.
- ``TCP_RTO_MAX_MS`` (socket option 44) and the sysctl ``tcp_rto_max_ms`` accept
  1,000..120,000 ms. Every RTO is bounded by the maximum, so a minimum above it would be
  silently cut: refused instead.
- ``SO_SNDBUF``/``SO_RCVBUF`` are capped by ``net.core.wmem_max``/``rmem_max`` unless the
  process may use ``SO_*BUFFORCE`` (root); the kernel doubles the value for bookkeeping.
- ``TCP_CONGESTION`` must name an algorithm in ``tcp_available_congestion_control``
  (and, without CAP_NET_ADMIN, in ``tcp_allowed_congestion_control``).

Per-rank draws (seed 000's "random MIN per node"): with ``rto_min_jitter`` each rank draws its
own MIN uniformly from ``[rto_min, rto_min + rto_min_jitter]`` with a generator seeded by
``(seed, rank)``; with ``rto_max_offset`` that rank's MAX is its own MIN + offset (seed 000
section 4.3), not an independent draw. On the testbed, host i is rank i.

Time dilation k (testbed only: link rates / k, timers x k) makes a setting expressible that
the kernel cannot take as is: MAX = MIN + 100 ms is below the kernel's 1 s unless k * MAX >=
1 s, and the default MAX of 60 s needs k <= 2. ``why_not(k)`` says why a setting is not
expressible at k, ``dilation_range()`` gives every k that works. Values are never clamped.

>>> c = TransportConfig(rto_min="5ms", rto_min_jitter="10ms", seed=1)
>>> s0, s1 = c.for_rank(0), c.for_rank(1)
>>> 5000 <= s0.rto_min_us <= 15000 and s0 == c.for_rank(0) and s0 != s1
True
>>> TransportConfig(rto_min=0.001, place="socket")
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: rto_min 1ms is below what TCP_RTO_MIN_US accepts (5ms..200ms)
>>> TransportConfig.from_json(TransportConfig(sndbuf=1 << 20).to_json()).sndbuf
1048576
>>> t = TransportConfig.parse("rto_min=200ms,rto_min_jitter=100ms,rto_max_offset=100ms", place="testbed")
>>> [round(k, 2) for k in t.dilation_range()]   # MAX in [300ms, 400ms]: k * 300ms >= 1s, k * 400ms <= 120s
[3.33, 300.0]
>>> print(t.why_not(2))
rto_max 300ms..400ms (MIN + 100ms) at dilation 2 is 600ms..800ms, outside what net.ipv4.tcp_rto_max_ms accepts (1s..120s); dilations 3.33..300 can express it
>>> d = t.for_rank(5, dilation=4)
>>> abs(d.rto_max_ms * 1000 - (d.rto_min_us + 4 * 100_000)) < 1000   # its own MAX = its MIN + 100 ms (x4)
True
>>> t.to_text()
'rto_min=200ms,rto_min_jitter=100ms,rto_max_offset=100ms,place=testbed'
>>> TransportConfig.parse("rto_jitter=10ms")
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: transport setting 'rto_jitter' is now called 'rto_min_jitter'
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from clusterlab.errors import ConfigError
from clusterlab.units import parse_duration, parse_size

TCP_RTO_MAX_MS = 44
TCP_RTO_MIN_US = 45
SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33
RTO_MIN_US_RANGE = (5_000, 200_000)          # the socket option
RTO_MAX_MS_RANGE = (1_000, 120_000)          # the socket option and the sysctl
SYSCTL_RTO_MIN_US_MIN = 1                    # the sysctl takes any positive value ...
KERNEL_RTO_MIN = 0.200                       # Linux's default minimum RTO (TCP_RTO_MIN)
KERNEL_RTO_MAX = 120.0                       # ... and the default maximum RTO bounds it
JIFFY_US = 4_000  # HZ=250
MIN_BUF = 4096
MAX_INITCWND = 1000
PLACES = ("socket", "testbed")
TESTBED_ONLY = ("rmem", "wmem", "window_scaling", "initcwnd", "sack", "recovery", "early_retrans", "frto",
                "timestamps")
# Loss-recovery knobs: field -> (per-namespace sysctl, value when on, value when off). On is the
# kernel's default (tcp_early_retrans 3: tail loss probes; tcp_frto 2: F-RTO with SACK
# enhancement); a sysctl the kernel keeps per network namespace.
STACK_SYSCTLS = {
    "sack": ("net/ipv4/tcp_sack", 1, 0),
    "recovery": ("net/ipv4/tcp_recovery", 1, 0),
    "early_retrans": ("net/ipv4/tcp_early_retrans", 3, 0),
    "frto": ("net/ipv4/tcp_frto", 2, 0),
    "timestamps": ("net/ipv4/tcp_timestamps", 1, 0),
}
# Named TCP stacks. ``linux``: as this kernel is (nothing set). ``seed-era``: seed 000's
# Solaris 2.5.1 (Reno, IW 2, no SACK/RACK/TLP/F-RTO/timestamps; RFC 1323 windows it had not
# either, but with 64 KB switch buffers the window never needs scaling, so that stays).
STACKS = {
    "linux": {},
    "seed-era": {"congestion": "reno", "initcwnd": 2, "sack": False, "recovery": False, "early_retrans": False,
                 "frto": False, "timestamps": False},
}
SEED_ERA = STACKS["seed-era"]
_DURATIONS = ("rto_min", "rto_min_jitter", "rto_max", "rto_max_jitter", "rto_max_offset")
_SIZES = ("sndbuf", "rcvbuf")
_BOOLS = ("nodelay", "window_scaling", *STACK_SYSCTLS)
_INTS = ("seed", "initcwnd")
# Spellings this project used before one name per setting: refused, naming the new one.
RENAMED = {"rto_jitter": "rto_min_jitter", "rto_max_extra": "rto_max_offset", "cc": "congestion", "tb_seed": "seed"}


def check_name(key: str, what: str = "transport setting") -> str:
    """``key`` (dashes or underscores) as a setting's name; an old spelling is refused with the
    new one, so that it is never silently taken for something else.

    >>> check_name("rto-max-offset")
    'rto_max_offset'
    >>> check_name("rto-max-extra", "option")
    Traceback (most recent call last):
    ...
    clusterlab.errors.ConfigError: option 'rto-max-extra' is now called 'rto-max-offset'
    """
    k = key.strip().replace("-", "_")
    if k in RENAMED:
        new = RENAMED[k] if "-" not in key else RENAMED[k].replace("_", "-")
        raise ConfigError(f"{what} {key.strip()!r} is now called {new!r}")
    return k


def _fmt_s(seconds: float) -> str:
    us = round(seconds * 1e6)
    if us % 1000 == 0:
        return f"{us // 1000}ms" if us < 1_000_000 or us % 1_000_000 else f"{us // 1_000_000}s"
    return f"{us}us"


def fmt_duration(seconds: float) -> str:
    """Shortest exact text of a duration, as ``parse`` reads it back.

    >>> fmt_duration(0.3), fmt_duration(60.0), fmt_duration(0.0005)
    ('300ms', '60s', '500us')
    """
    return _fmt_s(seconds)


def _fmt_k(k: float) -> str:
    return f"{k:.3g}" if k != int(k) else str(int(k))


def _sysctl(path: str, default: int | str | None = None):
    try:
        return Path("/proc/sys", path).read_text().strip()
    except OSError:
        return default


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _triple(text, what: str) -> str | None:
    """``tcp_rmem``/``tcp_wmem`` value: one size (used as default and max) or 'min default max'."""
    if text is None:
        return None
    parts = str(text).replace(",", " ").split()
    if len(parts) == 1:
        v = parse_size(parts[0])
        return f"4096 {v} {max(v, 4096)}"
    if len(parts) != 3:
        raise ConfigError(f"{what} must be one size or three sizes 'min default max', got {text!r}")
    vals = [parse_size(p) for p in parts]
    if not vals[0] <= vals[1] <= vals[2]:
        raise ConfigError(f"{what} must satisfy min <= default <= max, got {text!r}")
    return " ".join(str(v) for v in vals)


def _bool(v, what: str) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{what} must be true or false, got {v!r}")


def _txt(v) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def _int(v, what: str) -> int:
    try:
        return int(str(v).strip())
    except ValueError:
        raise ConfigError(f"{what} must be an integer, got {v!r}") from None


@dataclass(frozen=True)
class RankSettings:
    """The values one rank applies (after the jitter draw; timers x dilation on the testbed)."""

    rank: int
    sndbuf: int | None
    rcvbuf: int | None
    nodelay: bool
    congestion: str | None
    rto_min_us: int | None
    rto_max_ms: int | None


@dataclass(frozen=True)
class TransportConfig:
    """TCP settings of a run. Times are seconds, sizes bytes; ``None`` leaves the kernel
    default. ``place``: ``socket`` (socket options on every mesh connection) or ``testbed``
    (per-host sysctls and routes of a namespace testbed; checked per dilation)."""

    sndbuf: int | None = None
    rcvbuf: int | None = None
    nodelay: bool = True
    congestion: str | None = None
    rto_min: float | None = None
    rto_min_jitter: float | None = 0.0
    rto_max: float | None = None
    rto_max_jitter: float | None = 0.0
    seed: int = 0
    rto_max_offset: float | None = None
    initcwnd: int | None = None
    rmem: str | None = None
    wmem: str | None = None
    window_scaling: bool | None = None
    stack: str | None = None
    sack: bool | None = None
    recovery: bool | None = None
    early_retrans: bool | None = None
    frto: bool | None = None
    timestamps: bool | None = None
    place: str | None = None
    label: str | None = None  # a name for plots and reports (``describe``); sets nothing

    def __post_init__(self):
        for name in _DURATIONS:
            v = getattr(self, name)
            if v is None and name.endswith("_jitter"):
                v = 0.0
            elif isinstance(v, str):
                v = parse_duration(v)
            elif v is not None and not isinstance(v, (int, float)) or isinstance(v, bool):
                raise ConfigError(f"{name} must be a duration such as 5ms, got {v!r}")
            object.__setattr__(self, name, None if v is None else float(v))
        for name in _SIZES:
            v = getattr(self, name)
            if isinstance(v, str):
                object.__setattr__(self, name, parse_size(v))
        for name in _INTS:
            v = getattr(self, name)
            if v is not None and not (isinstance(v, int) and not isinstance(v, bool)):
                object.__setattr__(self, name, _int(v, name))
        for name in ("nodelay", "window_scaling"):
            v = getattr(self, name)
            if v is not None:
                object.__setattr__(self, name, _bool(v, name))
        for name in ("congestion", "stack", "label"):
            v = getattr(self, name)
            if v is not None:
                object.__setattr__(self, name, str(v))
        for name in ("rmem", "wmem"):
            object.__setattr__(self, name, _triple(getattr(self, name), name))
        if self.stack is not None:
            if self.stack not in STACKS:
                raise ConfigError(f"stack must be one of {', '.join(STACKS)}, got {self.stack!r}")
            for k, v in STACKS[self.stack].items():  # knobs given beside the profile win
                if getattr(self, k) is None:
                    object.__setattr__(self, k, v)
        for name in STACK_SYSCTLS:
            v = getattr(self, name)
            if v is not None:
                object.__setattr__(self, name, _bool(v, name))
        self.validate()

    # --- the one parser ------------------------------------------------------------------------
    @classmethod
    def parse(cls, spec: str | Mapping | None, place: str | None = None) -> TransportConfig:
        """``default`` (or empty) for the kernel's settings, or ``key=value,...`` (or a mapping
        of the same) with the field names (durations like ``200ms``, sizes like ``256KiB``); a
        value ``default`` leaves that setting at the kernel's.

        >>> TransportConfig.parse("default") == TransportConfig()
        True
        >>> TransportConfig.parse({"rto_min": "5ms", "congestion": "reno"}).congestion
        'reno'
        >>> TransportConfig.parse("rto_mni=5ms")
        Traceback (most recent call last):
        ...
        clusterlab.errors.ConfigError: unknown transport setting 'rto_mni'; use congestion, early_retrans, frto, initcwnd, label, nodelay, place, rcvbuf, recovery, rmem, rto_max, rto_max_jitter, rto_max_offset, rto_min, rto_min_jitter, sack, seed, sndbuf, stack, timestamps, window_scaling, wmem
        """
        if spec is None:
            items: list[tuple[str, object]] = []
        elif isinstance(spec, Mapping):
            items = [(str(k), v) for k, v in spec.items() if v is not None]
        else:
            text = str(spec).strip()
            items = []
            if text not in ("", "default"):
                for part in text.split(","):
                    if "=" not in part:
                        raise ConfigError(f"transport setting {part.strip()!r} is not key=value (in {text!r})")
                    k, v = (x.strip() for x in part.split("=", 1))
                    items.append((k, v))
        names = {f.name for f in dataclasses.fields(cls)}
        kw: dict = {"place": place}
        given: set[str] = set()
        for key, v in items:
            k = check_name(key)
            if k not in names:
                raise ConfigError(f"unknown transport setting {key!r}; use {', '.join(sorted(names))}")
            if k in given:
                raise ConfigError(f"transport setting {k} given twice")
            given.add(k)
            if isinstance(v, str) and v.strip().lower() == "default" and k != "place":
                continue
            kw[k] = v.strip() if isinstance(v, str) else v
        return cls(**kw)

    def to_text(self) -> str:
        """The settings that differ from the defaults, as ``parse`` reads them back."""
        out = []
        implied = STACKS.get(self.stack, {})
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v == f.default or (f.name in implied and implied[f.name] == v) or f.name == "label":
                continue
            if f.name in _DURATIONS:
                v = _fmt_s(v)
            elif isinstance(v, bool):
                v = "true" if v else "false"
            out.append(f"{f.name}={v}")
        return ",".join(out) or "default"

    def with_place(self, place: str) -> TransportConfig:
        """The same settings applied at ``place`` (checked there)."""
        return dataclasses.replace(self, place=place)

    def to_dict(self) -> dict:
        """Every field (JSON-able; ``from_json`` reads ``to_json`` back)."""
        return dataclasses.asdict(self)

    # --- what a study reports ----------------------------------------------------------------------
    def is_default(self) -> bool:
        """Nothing set: the kernel's TCP as it is (``seed``, ``place`` and ``label`` set nothing)."""
        return dataclasses.replace(self, seed=0, place=None, label=None) == TransportConfig()

    def min_range(self) -> tuple[float, float]:
        """The smallest and largest MIN a rank (host) can get, seconds (the kernel's 200 ms when unset)."""
        return self._min_bounds() or (KERNEL_RTO_MIN, KERNEL_RTO_MIN)

    def max_range(self) -> tuple[float, float] | None:
        """The smallest and largest MAX a rank (host) can get, or None (the kernel's own)."""
        mb = self._max_bounds()
        return None if mb is None else (mb[0], mb[1])

    def describe(self) -> str:
        """A label for plots: ``label`` if given, else the settings in seed 000's words.

        >>> TransportConfig(rto_min="250ms", rto_min_jitter="100ms", rto_max_offset="100ms").describe()
        'MIN 250ms..350ms random per node, MAX = MIN + 100ms'
        >>> TransportConfig.parse("stack=seed-era,rto_min=5ms").describe()
        'MIN 5ms, seed-era TCP'
        """
        if self.label:
            return self.label
        if self.is_default():
            return "kernel default"
        parts = []
        if self.rto_min is not None:
            lo, hi = self.min_range()
            parts.append(f"MIN {_fmt_s(lo)}..{_fmt_s(hi)} random per node" if hi > lo else f"MIN {_fmt_s(lo)}")
        if self.rto_max is not None:
            parts.append(f"MAX {_fmt_s(self.rto_max)}" + (f"..{_fmt_s(self.rto_max + self.rto_max_jitter)} random"
                                                          if self.rto_max_jitter else ""))
        if self.rto_max_offset is not None:
            parts.append(f"MAX = MIN + {_fmt_s(self.rto_max_offset)}")
        implied = STACKS.get(self.stack, {})
        for f in ("sndbuf", "rcvbuf", "rmem", "wmem", "congestion", "initcwnd", "window_scaling", *STACK_SYSCTLS):
            v = getattr(self, f)
            if v is not None and implied.get(f) != v:
                parts.append(f"{f} {_txt(v)}")
        if not self.nodelay:
            parts.append("Nagle on")
        if self.stack is not None:
            parts.append(f"{self.stack} TCP")
        return ", ".join(parts)

    # --- validation ----------------------------------------------------------------------------
    def validate(self) -> None:
        """Refuse settings that cannot mean anything, and (``place="socket"``) those the socket
        options cannot take, naming the accepted range. On the testbed the ranges depend on the
        dilation: see ``why_not``."""
        if self.place is not None and self.place not in PLACES:
            raise ConfigError(f"place must be one of {', '.join(PLACES)}, got {self.place!r}")
        if not 0 <= self.seed < 2**32:
            raise ConfigError(f"seed must be an integer 0..2**32-1, got {self.seed!r}")
        if self.rto_min_jitter < 0 or self.rto_max_jitter < 0:
            raise ConfigError("rto jitter must be >= 0")
        if (self.rto_min_jitter and self.rto_min is None) or (self.rto_max_jitter and self.rto_max is None):
            raise ConfigError("a jitter needs its base value (rto_min / rto_max)")
        for name in ("rto_min", "rto_max", "rto_max_offset"):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and v >= 0):
                raise ConfigError(f"{name} must be a duration >= 0, got {v!r}")
        if self.rto_min is not None and self.rto_min <= 0:
            raise ConfigError("rto_min must be positive")
        if self.rto_max_offset is not None:
            if self.rto_min is None:
                raise ConfigError("rto_max_offset needs rto_min (each rank's MAX is its own MIN + offset)")
            if self.rto_max is not None:
                raise ConfigError("give rto_max or rto_max_offset, not both")
        if self.rto_max is not None and self.rto_min is not None and self.rto_max < self.rto_min + self.rto_min_jitter:
            raise ConfigError(f"rto_max {_fmt_s(self.rto_max)} is below the largest MIN "
                              f"{_fmt_s(self.rto_min + self.rto_min_jitter)}; the maximum RTO must be at least the minimum")
        if self.initcwnd is not None and not 1 <= self.initcwnd <= MAX_INITCWND:
            raise ConfigError(f"initcwnd must be 1..{MAX_INITCWND} segments, got {self.initcwnd}")
        if self.place == "socket":
            for name in TESTBED_ONLY:
                if getattr(self, name) is not None:
                    if self.stack is not None and name in STACKS[self.stack]:
                        raise ConfigError(f"stack {self.stack} sets {', '.join(STACKS[self.stack])} per host, on a "
                                          "testbed only (machine-wide sysctls here: they would change every "
                                          "program's TCP); run on a testbed (--hosts N), or use stack=linux")
                    raise ConfigError(f"{name} is set per host on a testbed only (on this machine it would change "
                                      "every program's TCP); run on a testbed, or leave it out")
            why = self._socket_ranges()
            if why:
                raise ConfigError(why)
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

    def _min_bounds(self) -> tuple[float, float] | None:
        """Smallest and largest MIN any rank can draw (seconds)."""
        if self.rto_min is None:
            return None
        return self.rto_min, self.rto_min + self.rto_min_jitter

    def _max_bounds(self) -> tuple[float, float, str] | None:
        """Smallest and largest MAX any rank can have (seconds), and how it is described."""
        if self.rto_max is not None:
            label = _fmt_s(self.rto_max) + (f" + jitter {_fmt_s(self.rto_max_jitter)}" if self.rto_max_jitter else "")
            return self.rto_max, self.rto_max + self.rto_max_jitter, label
        if self.rto_max_offset is not None:
            lo, hi = self._min_bounds()
            span = _fmt_s(lo + self.rto_max_offset) + (f"..{_fmt_s(hi + self.rto_max_offset)}" if hi > lo else "")
            return lo + self.rto_max_offset, hi + self.rto_max_offset, f"{span} (MIN + {_fmt_s(self.rto_max_offset)})"
        return None

    def _socket_ranges(self) -> str | None:
        lo, hi = RTO_MIN_US_RANGE
        rng = f"({_fmt_s(lo / 1e6)}..{_fmt_s(hi / 1e6)})"
        if self.rto_min is not None:
            top = self.rto_min + self.rto_min_jitter
            if round(self.rto_min * 1e6) < lo:
                return f"rto_min {_fmt_s(self.rto_min)} is below what TCP_RTO_MIN_US accepts {rng}"
            if round(top * 1e6) > hi:
                return (f"rto_min {_fmt_s(self.rto_min)}"
                        f"{' + jitter ' + _fmt_s(self.rto_min_jitter) if self.rto_min_jitter else ''}"
                        f" exceeds what TCP_RTO_MIN_US accepts {rng}; it can only lower the minimum RTO. For a"
                        " larger minimum set the per-namespace sysctl net.ipv4.tcp_rto_min_us (run on a testbed)")
        mb = self._max_bounds()
        if mb is not None:
            lo, hi = RTO_MAX_MS_RANGE
            if round(mb[0] * 1e3) < lo or round(mb[1] * 1e3) > hi:
                why = (f"rto_max {mb[2]} is outside what TCP_RTO_MAX_MS accepts "
                       f"({_fmt_s(lo / 1e3)}..{_fmt_s(hi / 1e3)})")
                k = self.with_place("testbed").dilation_range()
                if k is not None:
                    why += f"; a testbed at dilation {_fmt_k(k[0])}..{_fmt_k(k[1])} can express it"
                return why
        return None

    def why_not(self, dilation: float = 1.0) -> str | None:
        """Why the kernel cannot take this setting at ``dilation`` (None: it can). Only the
        testbed dilates; its values are the setting's timers x ``dilation``."""
        k = float(dilation)
        if not (math.isfinite(k) and k >= 1.0):
            return f"dilation must be >= 1, got {dilation!r}"
        if self.place != "testbed":
            if k != 1.0:
                return "only a testbed dilates time (socket options apply the values as given)"
            return self._socket_ranges()
        lo_ms, hi_ms = RTO_MAX_MS_RANGE
        mb = self._max_bounds()
        if mb is not None:
            a, b = mb[0] * k, mb[1] * k
            if round(a * 1e3) < lo_ms or round(b * 1e3) > hi_ms:
                at = f" at dilation {_fmt_k(k)} is {_fmt_s(a)}" + (f"..{_fmt_s(b)}" if b > a else "") + "," \
                    if k != 1 else " is"
                why = (f"rto_max {mb[2]}{at} outside what net.ipv4.tcp_rto_max_ms accepts "
                       f"({_fmt_s(lo_ms / 1e3)}..{_fmt_s(hi_ms / 1e3)})")
                r = self.dilation_range()
                return why + (f"; dilations {_fmt_k(r[0])}..{_fmt_k(r[1])} can express it" if r else
                              "; no dilation can express it")
        mn = self._min_bounds()
        if mn is not None:
            top = mn[1] * k
            cap = mb[0] * k if mb is not None else KERNEL_RTO_MAX
            if top > cap + 1e-9:
                what = "the maximum RTO" if mb is not None else \
                    f"the kernel's default maximum RTO ({_fmt_s(KERNEL_RTO_MAX)}, net.ipv4.tcp_rto_max_ms)"
                at = f" at dilation {_fmt_k(k)} is {_fmt_s(top)}," if k != 1 else ""
                return (f"rto_min {_fmt_s(mn[1])}{' (with jitter)' if mn[1] > mn[0] else ''}{at} is above {what}: "
                        "the kernel would cut every RTO to the maximum. Lower it" + (" or the dilation" if k != 1 else ""))
            if round(mn[0] * k * 1e6) < SYSCTL_RTO_MIN_US_MIN:
                return f"rto_min {_fmt_s(mn[0])} x {_fmt_k(k)} is below 1us"
        return None

    def dilation_range(self) -> tuple[float, float] | None:
        """The dilations k >= 1 (up to 1000) at which this setting is expressible on a testbed
        as ``(lowest, highest)``, or None when none is."""
        if self.place != "testbed":
            return (1.0, 1.0) if self._socket_ranges() is None else None
        lo_k, hi_k = 1.0, 1000.0
        mb = self._max_bounds()
        if mb is not None:
            if mb[0] <= 0:
                return None
            lo_k = max(lo_k, RTO_MAX_MS_RANGE[0] / 1e3 / mb[0])
            hi_k = min(hi_k, RTO_MAX_MS_RANGE[1] / 1e3 / mb[1])
        else:
            mn = self._min_bounds()
            if mn is not None:
                hi_k = min(hi_k, KERNEL_RTO_MAX / mn[1])
        if lo_k > hi_k + 1e-12 or self.why_not(lo_k) is not None:
            return None
        return lo_k, hi_k

    def expressible(self, dilations) -> dict[float, str | None]:
        """For each dilation: None if the kernel takes the setting there, else why not.

        >>> TransportConfig(rto_max=60.0, place="testbed").expressible([1, 2, 4])[4][:22]
        'rto_max 60s at dilatio'
        """
        return {float(k): self.why_not(k) for k in dilations}

    # --- per rank ---------------------------------------------------------------------------------
    def for_rank(self, rank: int, dilation: float = 1.0) -> RankSettings:
        """Settings for ``rank``: the draws are a pure function of ``(seed, rank)``; timers are
        multiplied by ``dilation`` (testbed)."""
        rnd = random.Random(f"clusterlab-transport:{self.seed}:{rank}")
        k = float(dilation)
        rmin = rmax = None
        mn = None
        if self.rto_min is not None:
            mn = self.rto_min + rnd.uniform(0, self.rto_min_jitter)
            rmin = round(mn * k * 1e6)
        if self.rto_max is not None:
            rmax = round((self.rto_max + rnd.uniform(0, self.rto_max_jitter)) * k * 1e3)
        elif self.rto_max_offset is not None:
            rmax = round((mn + self.rto_max_offset) * k * 1e3)
        return RankSettings(rank, self.sndbuf, self.rcvbuf, self.nodelay, self.congestion, rmin, rmax)

    def namespace_sysctls(self, rank: int, dilation: float = 1.0) -> dict[str, int | str]:
        """The per-namespace sysctls (path under /proc/sys -> value) of testbed host ``rank``.
        Refuses a setting the kernel cannot take at ``dilation``. Without ``rto_min``, a dilated
        testbed still scales the kernel's default minimum (200 ms x k)."""
        why = self.with_place("testbed").why_not(dilation)
        if why:
            raise ConfigError(why)
        s = self.for_rank(rank, dilation)
        out: dict[str, int | str] = {}
        if s.rto_min_us is not None:
            out["net/ipv4/tcp_rto_min_us"] = s.rto_min_us
        elif dilation != 1.0:
            out["net/ipv4/tcp_rto_min_us"] = round(KERNEL_RTO_MIN * dilation * 1e6)
        if s.rto_max_ms is not None:
            out["net/ipv4/tcp_rto_max_ms"] = s.rto_max_ms
        if self.rmem is not None:
            out["net/ipv4/tcp_rmem"] = self.rmem
        if self.wmem is not None:
            out["net/ipv4/tcp_wmem"] = self.wmem
        if self.window_scaling is not None:
            out["net/ipv4/tcp_window_scaling"] = int(self.window_scaling)
        for name, (path, on, off) in STACK_SYSCTLS.items():
            if getattr(self, name) is not None:
                out[path] = on if getattr(self, name) else off
        return out

    def stack_name(self) -> str:
        """Which TCP stack this runs: ``linux``, ``seed-era``, or ``linux`` plus the knobs changed.

        >>> TransportConfig(stack="seed-era", place="testbed").stack_name()
        'seed-era'
        >>> TransportConfig(sack=False, congestion="reno", place="testbed").stack_name()
        'linux with sack=false, congestion=reno'
        """
        base = self.stack or "linux"
        implied = STACKS[base]
        changed = [f"{k}={_txt(getattr(self, k))}" for k in ("sack", "recovery", "early_retrans", "frto", "timestamps",
                                                           "congestion", "initcwnd", "window_scaling")
                   if getattr(self, k) is not None and implied.get(k) != getattr(self, k)]
        return base + (f" with {', '.join(changed)}" if changed else "")

    def route_attributes(self) -> dict[str, int]:
        """Attributes a testbed host puts on its route (``ip route ... initcwnd N``)."""
        return {"initcwnd": self.initcwnd} if self.initcwnd is not None else {}

    def apply(self, sock: socket.socket, rank: int) -> dict:
        """Set this rank's per-socket values on ``sock`` (call before connect/listen so buffer
        sizes shape the window scale) and return what the kernel reports in force. On the
        testbed the RTO bounds are the host's sysctls, not socket options. Not yet placed: at
        ``place="socket"`` (checked there)."""
        if self.place is None:
            return self.with_place("socket").apply(sock, rank)
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
        if self.place == "socket" and s.rto_min_us is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, TCP_RTO_MIN_US, s.rto_min_us)
            except OSError as e:
                raise ConfigError(f"TCP_RTO_MIN_US={s.rto_min_us} refused by the kernel ({e}); it needs "
                                  "Linux 6.11+ and accepts 5000..200000 us") from None
        if self.place == "socket" and s.rto_max_ms is not None:
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
        if isinstance(d, dict):
            for k in d:
                check_name(k)
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
