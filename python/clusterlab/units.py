"""Parse the quantities users type: sizes (``50KB``, ``1MiB``), durations (``5ms``), rates
(``155Mbit``). Decimal prefixes are powers of 1000, binary ones (``KiB``) of 1024, as iperf3
and tc read them; a bare number is bytes, seconds or bit/s.

>>> parse_size("50KB"), parse_size("64KiB"), parse_size("1M"), parse_size("8192")
(50000, 65536, 1000000, 8192)
>>> parse_duration("5ms"), parse_duration("200us"), parse_duration("1.5s")
(0.005, 0.0002, 1.5)
>>> parse_rate("155Mbit"), parse_rate("1Gbit")
(155000000.0, 1000000000.0)
"""

from __future__ import annotations

import re
from decimal import Decimal

from clusterlab.errors import ConfigError

_NUM = r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z/]*)\s*$"
_SIZE = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9,
         "kib": 1024, "mib": 1024**2, "gib": 1024**3, "ki": 1024, "mi": 1024**2, "gi": 1024**3}
_TIME = {"": 1.0, "s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "m": 60.0, "min": 60.0}
_RATE = {"": 1, "bit": 1, "bps": 1, "kbit": 1e3, "kbps": 1e3, "mbit": 1e6, "mbps": 1e6,
         "gbit": 1e9, "gbps": 1e9, "k": 1e3, "m": 1e6, "g": 1e9}


def _split(text: str, what: str) -> tuple[Decimal, str]:
    # Decimal keeps "200us" exactly 0.0002 instead of 0.00019999999999999998.
    m = re.match(_NUM, str(text))
    if not m:
        raise ConfigError(f"cannot read {what} {text!r}")
    return Decimal(m.group(1)), m.group(2).lower()


def parse_size(text: str | int) -> int:
    if isinstance(text, int):
        return text
    v, unit = _split(text, "size")
    if unit not in _SIZE:
        raise ConfigError(f"unknown size unit in {text!r} (use B, KB, MB, GB, KiB, MiB, GiB)")
    return int(round(v * Decimal(str(_SIZE[unit]))))


def parse_duration(text: str | float) -> float:
    if isinstance(text, (int, float)):
        return float(text)
    v, unit = _split(text, "duration")
    if unit not in _TIME:
        raise ConfigError(f"unknown time unit in {text!r} (use s, ms, us, ns)")
    return float(v * Decimal(str(_TIME[unit])))


def parse_rate(text: str | float) -> float:
    if isinstance(text, (int, float)):
        return float(text)
    v, unit = _split(text, "rate")
    if unit not in _RATE:
        raise ConfigError(f"unknown rate unit in {text!r} (use bit, Kbit, Mbit, Gbit)")
    return float(v * Decimal(str(_RATE[unit])))


def format_size(n: float) -> str:
    for unit, k in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= k:
            return f"{n / k:.1f} {unit}"
    return f"{int(n)} B"
