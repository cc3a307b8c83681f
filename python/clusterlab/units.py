"""Parse the quantities users type: sizes (``50KB``, ``1MiB``), durations (``5ms``), rates
(``155Mbit``) and plain numbers. Decimal prefixes are powers of 1000, binary ones (``KiB``) of
1024, as iperf3 and tc read them; a bare number is bytes, seconds or bit/s.

>>> parse_size("50KB"), parse_size("64KiB"), parse_size("1M"), parse_size("8192")
(50000, 65536, 1000000, 8192)
>>> parse_duration("5ms"), parse_duration("200us"), parse_duration("1.5s")
(0.005, 0.0002, 1.5)
>>> parse_rate("155Mbit"), parse_rate("1Gbit")
(155000000.0, 1000000000.0)

Every value is finite and in range, or refused with one line naming the setting (``what``)
and what it accepts; nothing is clamped:

>>> parse_rate("1e400bit", "--rate")
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: --rate: '1e400bit' is too large (at most 1e+15 bit/s)
>>> parse_size("-1", "size")
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: size: '-1' must not be negative
>>> parse_float("nan", "--timeout", lo=0)
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: --timeout: 'nan' is not a finite number
"""

from __future__ import annotations

import math
import os
import re
from decimal import Decimal, InvalidOperation

from clusterlab.errors import ConfigError

_NUM = r"\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-zµ/]*)\s*$"
_SIZE = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
         "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4, "ki": 1024, "mi": 1024**2, "gi": 1024**3,
         "ti": 1024**4}
_TIME = {"": 1.0, "s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "m": 60.0, "min": 60.0,
         "h": 3600.0}
_RATE = {"": 1, "bit": 1, "bps": 1, "kbit": 1e3, "kbps": 1e3, "mbit": 1e6, "mbps": 1e6,
         "gbit": 1e9, "gbps": 1e9, "k": 1e3, "m": 1e6, "g": 1e9}
_NOT_FINITE = {"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"}

# The largest values anything here can use: a size fits in an int64 (file offsets, tc, Rust
# usize on 64-bit); a duration of ten years is no timeout anyone means; 1 Pbit/s is above any
# link (tc's rate is a u64 of bytes/s).
MAX_SIZE = 2**62
MAX_SECONDS = 10 * 365 * 86400.0
MAX_RATE = 1e15


def _where(what: str | None) -> str:
    return f"{what}: " if what else ""


def _number(value, what: str | None, kind: str, units: dict, hint: str) -> tuple[Decimal, float]:
    """``value`` read as a Decimal number and its unit's factor."""
    if isinstance(value, bool):
        raise ConfigError(f"{_where(what)}{value!r} is not a {kind}")
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{_where(what)}{value!r} is not a finite number")
        return Decimal(str(value)) if isinstance(value, float) else Decimal(value), 1
    if not isinstance(value, str):
        raise ConfigError(f"{_where(what)}{value!r} is not a {kind} ({hint})")
    if value.strip().lower() in _NOT_FINITE:
        raise ConfigError(f"{_where(what)}{value!r} is not a finite number")
    m = re.match(_NUM, value)
    if not m:
        raise ConfigError(f"{_where(what)}cannot read {kind} {value!r} ({hint})")
    unit = m.group(2).lower()
    if unit not in units:
        raise ConfigError(f"{_where(what)}unknown {'time' if kind == 'duration' else kind} unit in {value!r} ({hint})")
    try:
        v = Decimal(m.group(1))
    except InvalidOperation:
        raise ConfigError(f"{_where(what)}cannot read {kind} {value!r} ({hint})") from None
    return v, units[unit]


def _bounded(value, v, what: str | None, lo, hi, show) -> None:
    if not v.is_finite() or v > Decimal(repr(float(hi))):
        raise ConfigError(f"{_where(what)}{value!r} is too large (at most {show(hi)})")
    if v < 0 and (lo is None or lo >= 0):
        raise ConfigError(f"{_where(what)}{value!r} must not be negative")
    if lo is not None and v < Decimal(repr(float(lo))):
        raise ConfigError(f"{_where(what)}{value!r} is below {show(lo)}")


def parse_size(text: str | int, what: str | None = None, *, lo: int = 0, hi: int = MAX_SIZE) -> int:
    """Bytes, ``lo <= n <= hi``."""
    v, f = _number(text, what, "size", _SIZE, "a number with B, KB, MB, GB, KiB, MiB or GiB")
    n = v * Decimal(str(f))
    _bounded(text, n, what, lo, hi, lambda x: f"{int(x)} bytes")
    return int(round(n))


def parse_duration(text: str | float, what: str | None = None, *, lo: float = 0.0,
                   hi: float = MAX_SECONDS) -> float:
    """Seconds, ``lo <= s <= hi``."""
    v, f = _number(text, what, "duration", _TIME, "a number with s, ms, us or ns")
    s = v * Decimal(str(f))
    _bounded(text, s, what, lo, hi, lambda x: f"{x:g} s")
    return float(s)


def parse_rate(text: str | float, what: str | None = None, *, lo: float = 0.0, hi: float = MAX_RATE) -> float:
    """Bit/s, ``lo <= r <= hi``."""
    v, f = _number(text, what, "rate", _RATE, "a number with bit, Kbit, Mbit or Gbit")
    r = v * Decimal(str(f))
    _bounded(text, r, what, lo, hi, lambda x: f"{x:g} bit/s")
    return float(r)


def parse_float(text, what: str | None = None, *, lo: float | None = None, hi: float | None = None) -> float:
    """A finite number, ``lo <= x <= hi`` (either bound may be None)."""
    v, _ = _number(text, what, "number", {"": 1}, "a plain number")
    if not v.is_finite() or abs(v) > Decimal("1e300"):
        raise ConfigError(f"{_where(what)}{text!r} is too large")
    x = float(v)
    _within(x, text, what, lo, hi, lambda b: f"{b:g}")
    return x


def parse_int(text, what: str | None = None, *, lo: int | None = None, hi: int | None = None) -> int:
    """A whole number, ``lo <= n <= hi`` (either bound may be None)."""
    if isinstance(text, bool) or isinstance(text, float) and not text.is_integer():
        raise ConfigError(f"{_where(what)}{text!r} is not an integer")
    if isinstance(text, str):
        t = text.strip()
        if not re.fullmatch(r"[-+]?[0-9]{1,30}", t):
            raise ConfigError(f"{_where(what)}{text!r} is not an integer")
        n = int(t)
    elif isinstance(text, (int, float)):
        n = int(text)
    else:
        raise ConfigError(f"{_where(what)}{text!r} is not an integer")
    _within(n, text, what, lo, hi, str)
    return n


def _within(x, text, what: str | None, lo, hi, show) -> None:
    """Refuse ``x`` (read from ``text``) outside ``lo..hi`` (either bound may be None)."""
    if lo is not None and hi is not None and not lo <= x <= hi:
        raise ConfigError(f"{what or 'value'} must be {show(lo)}..{show(hi)}, got {text!r}")
    if lo is not None and x < lo:
        raise ConfigError(f"{_where(what)}{text!r} " + ("must not be negative" if lo == 0 else f"is below {show(lo)}"))
    if hi is not None and x > hi:
        raise ConfigError(f"{_where(what)}{text!r} is above {show(hi)}")


def env_duration(name: str, default: float | None, *, lo: float = 0.0, hi: float = MAX_SECONDS,
                 positive: bool = True) -> float | None:
    """The duration in environment variable ``name`` (``default`` when unset or empty), checked
    like an option and refused naming the variable.

    >>> os.environ["CLUSTERLAB_X_TEST"] = "-5"
    >>> env_duration("CLUSTERLAB_X_TEST", 60.0)
    Traceback (most recent call last):
    ...
    clusterlab.errors.ConfigError: environment variable CLUSTERLAB_X_TEST: '-5' must not be negative
    """
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    s = parse_duration(text, f"environment variable {name}", lo=lo, hi=hi)
    if positive and s <= 0:
        raise ConfigError(f"environment variable {name}: {text!r} must be above 0 seconds")
    return s


def format_size(n: float) -> str:
    for unit, k in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n) >= k:
            return f"{n / k:.1f} {unit}"
    return f"{int(n)} B"
