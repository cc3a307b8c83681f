"""``tune.toml``: what ``clusterlab tune buffers`` sweeps, where, and where it writes.

A file names the cluster, the ping-pong and the test variables in the paper's order (seed 003:
window scaling, then receive buffers, then send buffers), each from ``start`` to ``end``::

    [cluster]
    place = "testbed"        # namespaces on this machine ("cluster": the hosts of a real job)
    hosts = 8                # testbed: how many hosts (or name = "lab": an existing testbed)
    rate = "1Gbit"
    mtu = 1500

    [pingpong]
    sizes = "1:1MiB"         # NetPIPE's sweep: powers of two, each +-perturbation bytes
    perturbation = 3
    trial_time = 0.005       # seconds per trial (repetitions adapt to it, as NetPIPE's do)
    trials = 3

    [[test]]
    variable = "tcp_window_scaling"
    start = 0
    end = 1

    [[test]]
    variable = "tcp_rmem"    # buffers double from start to end (end included)
    start = "4KiB"
    end = "512KiB"

    [output]
    dir = "tune-out"

Any mistake is one ``ConfigError`` naming ``file:line:column`` and what is accepted.

>>> import tempfile, os
>>> p = os.path.join(tempfile.mkdtemp(), "t.toml")
>>> _ = open(p, "w").write('[cluster]\\nhosts = 8\\n[[test]]\\nvariable = "tcp_rmem"\\nstart = "4KiB"\\nend = "32KiB"\\n')
>>> c = load(p)
>>> c.tests[0].values()
[4096, 8192, 16384, 32768]
>>> _ = open(p, "w").write('[cluster]\\nhosts = 8\\n[[test]]\\nvariable = "tcp_rmem"\\nstart = "4KiB"\\nend = "2KiB"\\n')
>>> load(p)
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: ...t.toml:6:7: end 2048 is below start 4096 (the sweep doubles start up to end)
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import tomllib

from clusterlab.errors import ConfigError
from clusterlab.units import parse_duration, parse_rate, parse_size

VARIABLES = ("tcp_window_scaling", "tcp_rmem", "tcp_wmem")
PLACES = ("testbed", "cluster")
# Which numbers of the 'min default max' triple a buffer value replaces.
BUFFER_FORMS = ("fixed", "min", "default", "max")
INT_MAX = 2**31 - 1  # the kernel stores tcp_rmem/tcp_wmem as ints
MIN_BUFFER = 1       # ... and refuses a value below 1 (proc_dointvec_minmax, SYSCTL_ONE)
MAX_HOSTS = 1000


@dataclasses.dataclass(frozen=True)
class Test:
    """One test variable of the sweep (the paper's t_i with start i_i and end e_i)."""

    variable: str
    start: int
    end: int
    form: str = "fixed"

    def values(self) -> list[int]:
        """The values tested, in order: window scaling steps by one, buffers double (the
        paper's get_next_iter); ``end`` is the last value tested."""
        out, v = [], self.start
        while v <= self.end:
            out.append(v)
            v = v + 1 if self.variable == "tcp_window_scaling" else v * 2
        return out


@dataclasses.dataclass(frozen=True)
class TuneConfig:
    place: str = "testbed"
    hosts: int | list[str] = 8
    testbed: str | None = None  # an existing testbed (left with the chosen values applied)
    rate: str = "1Gbit"
    mtu: int = 1500
    buffer: str = "256KB"
    size_lo: int = 1
    size_hi: int = 1 << 20
    perturbation: int = 3
    trial_time: float = 0.005
    trials: int = 3
    tests: tuple[Test, ...] = ()
    output: str = "tune-out"
    source: str = "<config>"

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["tests"] = [dataclasses.asdict(t) for t in self.tests]
        return d


class _Where:
    """Finds the line and column of a key (or of a table) in the TOML text, for messages."""

    def __init__(self, path: str, text: str):
        self.path, self.lines = path, text.splitlines()

    def at(self, table: str, key: str | None = None, index: int = 0) -> str:
        """``file:line:column`` of ``key`` in the ``index``-th ``[table]`` / ``[[table]]``."""
        head = re.compile(r"^\s*\[\[?\s*" + re.escape(table) + r"\s*\]\]?\s*(#.*)?$")
        seen, start = -1, None
        for i, line in enumerate(self.lines):
            if head.match(line):
                seen += 1
                if seen == index:
                    start = i
                    break
        if start is None:
            return f"{self.path}:1:1"
        if key is None:
            return f"{self.path}:{start + 1}:1"
        keyre = re.compile(r"^\s*" + re.escape(key) + r"\s*=\s*")
        for i in range(start + 1, len(self.lines)):
            if re.match(r"^\s*\[", self.lines[i]):
                break
            m = keyre.match(self.lines[i])
            if m:
                return f"{self.path}:{i + 1}:{m.end() + 1}"
        return f"{self.path}:{start + 1}:1"


def _toml_error(path: str, e: tomllib.TOMLDecodeError) -> ConfigError:
    msg = str(e)
    m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
    if m:
        return ConfigError(f"{path}:{m.group(1)}:{m.group(2)}: {msg[:m.start()].strip()} (not valid TOML)")
    m = re.search(r"\(at end of document\)", msg)
    n = msg.count("\n")
    return ConfigError(f"{path}:{n + 1}:1: {msg.split('(')[0].strip()} (not valid TOML)")


def _size(v, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise ConfigError(f"{what} must be a size (4096 or \"4KiB\"), got {v!r}")
    n = parse_size(v, what)
    return n


def load(path: str | Path) -> TuneConfig:
    """Read and check a ``tune.toml``; a mistake raises ``ConfigError('file:line:col: ...')``."""
    path = str(path)
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the tune config: {e.strerror}") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise _toml_error(path, e) from None
    return parse(doc, _Where(path, text))


def parse(doc: dict, where: _Where | None = None) -> TuneConfig:
    """Build a ``TuneConfig`` from a parsed document (``where`` locates keys for messages)."""
    where = where or _Where("<config>", "")

    def fail(table, key, msg, index=0):
        raise ConfigError(f"{where.at(table, key, index)}: {msg}")

    known = {"cluster", "pingpong", "test", "output"}
    for k in doc:
        if k not in known:
            raise ConfigError(f"{where.path}:{_first_line(where, k)}:1: unknown table [{k}] "
                              f"(accepted: {', '.join(sorted(known))})")
    kw: dict = {"source": where.path}

    cl = _table(doc, "cluster", where, {"place", "hosts", "name", "rate", "mtu", "buffer"})
    place = cl.get("place", "testbed")
    if place not in PLACES:
        fail("cluster", "place", f"place must be one of {', '.join(PLACES)}, got {place!r}")
    kw["place"] = place
    hosts = cl.get("hosts", 8)
    if place == "testbed":
        if "name" in cl:
            if not isinstance(cl["name"], str) or not re.fullmatch(r"[a-z0-9]{1,8}", cl["name"]):
                fail("cluster", "name", f"name must be a testbed name (1-8 of a-z 0-9), got {cl['name']!r}")
            kw["testbed"] = cl["name"]
        if isinstance(hosts, bool) or not isinstance(hosts, int) or not 2 <= hosts <= MAX_HOSTS:
            fail("cluster", "hosts", f"hosts must be a number of testbed hosts 2..{MAX_HOSTS}, got {hosts!r}")
    else:
        if (not isinstance(hosts, list) or len(hosts) < 2 or not all(isinstance(h, str) and h for h in hosts)
                or len(set(hosts)) != len(hosts)):
            fail("cluster", "hosts", "on a real cluster hosts must list the host names or addresses the job "
                 f"runs on (at least 2, no repeats; nothing else is touched), got {hosts!r}")
    kw["hosts"] = hosts
    for key, parser in (("rate", parse_rate), ("buffer", parse_size)):
        if key in cl:
            try:
                parser(cl[key])
            except ConfigError as e:
                fail("cluster", key, f"{key}: {e}")
            kw[key] = str(cl[key])
    if "mtu" in cl:
        if isinstance(cl["mtu"], bool) or not isinstance(cl["mtu"], int) or not 576 <= cl["mtu"] <= 65000:
            fail("cluster", "mtu", f"mtu must be 576..65000, got {cl['mtu']!r}")
        kw["mtu"] = cl["mtu"]

    pp = _table(doc, "pingpong", where, {"sizes", "perturbation", "trial_time", "trials"})
    if "sizes" in pp:
        m = re.fullmatch(r"\s*([^:]+):([^:]+)\s*", str(pp["sizes"]))
        try:
            lo, hi = (parse_size(m.group(1)), parse_size(m.group(2))) if m else (0, -1)
        except ConfigError:
            lo, hi = 0, -1
        if not 1 <= lo <= hi <= 64 << 20:
            fail("pingpong", "sizes", f"sizes must be LO:HI with 1 <= LO <= HI <= 64MiB, got {pp['sizes']!r}")
        kw["size_lo"], kw["size_hi"] = lo, hi
    if "perturbation" in pp:
        v = pp["perturbation"]
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 1024:
            fail("pingpong", "perturbation", f"perturbation must be 0..1024 bytes, got {v!r}")
        kw["perturbation"] = v
    if "trial_time" in pp:
        try:
            t = parse_duration(pp["trial_time"])
        except ConfigError:
            t = -1.0
        if not 0.0005 <= t <= 10:
            fail("pingpong", "trial_time", f"trial_time must be 0.5ms..10s, got {pp['trial_time']!r}")
        kw["trial_time"] = t
    if "trials" in pp:
        v = pp["trials"]
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 100:
            fail("pingpong", "trials", f"trials must be 1..100, got {v!r}")
        kw["trials"] = v

    tests = doc.get("test", [])
    if not isinstance(tests, list) or not tests:
        raise ConfigError(f"{where.path}:1:1: no [[test]] tables: give at least one test variable "
                          f"({', '.join(VARIABLES)})")
    for t in tests:
        if not isinstance(t, dict):
            line = next((i + 1 for i, x in enumerate(where.lines) if re.match(r"^\s*test\s*=", x)), 1)
            raise ConfigError(f"{where.path}:{line}:1: test must be [[test]] tables (variable, start, end, form), "
                              f"got {t!r} in a list")
    parsed, seen = [], set()
    for i, t in enumerate(tests):
        for k in t:
            if k not in ("variable", "start", "end", "form"):
                fail("test", k, f"unknown key {k!r} in [[test]] (accepted: variable, start, end, form)", i)
        var = t.get("variable")
        if var not in VARIABLES:
            fail("test", "variable" if "variable" in t else None,
                 f"variable must be one of {', '.join(VARIABLES)}, got {var!r}", i)
        if var in seen:
            fail("test", "variable", f"{var} is tested twice", i)
        seen.add(var)
        for k in ("start", "end"):
            if k not in t:
                fail("test", None, f"[[test]] {var} needs {k}", i)
        if var == "tcp_window_scaling":
            vals = []
            for k in ("start", "end"):
                v = t[k]
                if isinstance(v, bool):
                    v = int(v)
                if not isinstance(v, int) or v not in (0, 1):
                    fail("test", k, f"the kernel takes tcp_window_scaling 0 or 1 only, got {k} = {t[k]!r}", i)
                vals.append(v)
            form = "fixed"
        else:
            vals = []
            for k in ("start", "end"):
                try:
                    v = _size(t[k], k)
                except ConfigError as e:
                    fail("test", k, str(e), i)
                if not MIN_BUFFER <= v <= INT_MAX:
                    fail("test", k, f"the kernel takes {var} values {MIN_BUFFER}..{INT_MAX} bytes, got {k} = {v}", i)
                vals.append(v)
            form = t.get("form", "fixed")
            if form not in BUFFER_FORMS:
                fail("test", "form", f"form must be one of {', '.join(BUFFER_FORMS)} (which of 'min default "
                     f"max' the value sets; fixed: all three), got {form!r}", i)
        if vals[1] < vals[0]:
            fail("test", "end", f"end {vals[1]} is below start {vals[0]} (the sweep doubles start up to end)", i)
        if var != "tcp_window_scaling" and len(Test(var, vals[0], vals[1]).values()) > 24:
            fail("test", "end", f"{var} from {vals[0]} to {vals[1]} is more than 24 doublings", i)
        parsed.append(Test(var, vals[0], vals[1], form))
    kw["tests"] = tuple(parsed)

    out = _table(doc, "output", where, {"dir"})
    if "dir" in out:
        if not isinstance(out["dir"], str) or not out["dir"].strip():
            fail("output", "dir", f"dir must be a directory path, got {out['dir']!r}")
        kw["output"] = out["dir"]
    return TuneConfig(**kw)


def _first_line(where: _Where, table: str) -> int:
    for i, line in enumerate(where.lines):
        if re.match(r"^\s*\[\[?\s*" + re.escape(table) + r"\s*\]", line):
            return i + 1
    return 1


def _table(doc: dict, name: str, where: _Where, keys: set[str]) -> dict:
    t = doc.get(name, {})
    if not isinstance(t, dict):
        raise ConfigError(f"{where.at(name)}: [{name}] must be a table")
    for k in t:
        if k not in keys:
            raise ConfigError(f"{where.at(name, k)}: unknown key {k!r} in [{name}] "
                              f"(accepted: {', '.join(sorted(keys))})")
    return t
