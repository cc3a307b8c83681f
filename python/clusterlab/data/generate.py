"""Synthetic baskets from the IBM Quest itemset model (Agrawal & Srikant, VLDB'94).

Workloads are named as in the papers: ``T10I4D100K`` is average transaction length 10,
average pattern length 4, 100,000 transactions (``K`` = 1,000, ``M`` = 1,000,000; dots as in
``T10.I4.D100K`` are accepted, and optional ``N`` (items) and ``L`` (patterns) parts too).
The model lives in Rust (``clusterlab._core.QuestGenerator``); see docs/generator.md.

>>> b = generate("T10I4D10K", items=1000, seed=1)
>>> len(b), 9.5 < b.stats()["average_length"] < 10.7
(10000, True)
>>> generate("T10I4D10K", seed=1) == b
True
>>> parse_name("T10I4D1M")
{'avg_len': 10.0, 'avg_pattern_len': 4.0, 'transactions': 1000000}
>>> parse_name("T10I4")
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: workload name 'T10I4' lacks D (transactions); expected e.g. T10I4D100K
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from clusterlab import _core
from clusterlab._atomic import atomic_open, atomic_path
from clusterlab.data.baskets import Baskets
from clusterlab.errors import ConfigError

#: Named workloads. ``seed000`` is the one of Oguchi et al. (seed paper 000): 10M transactions
#: over 5,000 items, "about 800 Mbytes". The paper does not give T and I; T15 I4 (from the
#: parameter grid of Agrawal & Srikant, whose generator the paper used) gives ~77 bytes per
#: line here, i.e. ~770 MB of FIMI text, the closest match to 800 MB.
PRESETS: dict[str, dict] = {
    "seed000": {"avg_len": 15.0, "avg_pattern_len": 4.0, "transactions": 10_000_000, "items": 5000},
}

_PART = re.compile(r"([TIDNL])(\d+(?:\.\d+)?)([KM]?)", re.IGNORECASE)
_NAME = re.compile(r"(?:[TIDNL]\d+(?:\.\d+)?[KM]?\.?)+", re.IGNORECASE)
_FIELD = {"T": "avg_len", "I": "avg_pattern_len", "D": "transactions", "N": "items", "L": "patterns"}
_WHAT = {"T": "average transaction length", "I": "average pattern length", "D": "transactions"}


@dataclasses.dataclass(frozen=True)
class QuestParams:
    """All parameters of one generated workload (the generator's output depends on nothing else).

    ``patterns`` is |L|, the number of potentially large itemsets (2000 in the paper's
    experiments); ``correlation`` is the mean fraction of a pattern's items taken from the
    previous one; each pattern's corruption level is N(``corruption_mean``,
    ``corruption_sd``) clipped to [0, 1].
    """

    transactions: int = 100_000
    avg_len: float = 10.0
    avg_pattern_len: float = 4.0
    patterns: int = 2000
    items: int = 1000
    correlation: float = 0.5
    corruption_mean: float = 0.5
    corruption_sd: float = 0.1
    seed: int = 0

    @property
    def name(self) -> str:
        """The paper-style name, e.g. ``T10I4D100K``."""
        return f"T{_num(self.avg_len)}I{_num(self.avg_pattern_len)}D{_count(self.transactions)}"

    def core(self):
        """The Rust generator for these parameters (draws the patterns)."""
        try:
            return _core.QuestGenerator(self.transactions, float(self.avg_len), float(self.avg_pattern_len),
                                        self.patterns, self.items, float(self.correlation),
                                        float(self.corruption_mean), float(self.corruption_sd), self.seed)
        except (ValueError, OverflowError, TypeError) as e:
            raise ConfigError(f"generator: {e}") from None


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _count(n: int) -> str:
    for suffix, mult in (("M", 1_000_000), ("K", 1000)):
        if n >= mult and n % mult == 0:
            return f"{n // mult}{suffix}"
    return str(n)


def parse_name(name: str) -> dict:
    """Parameters named by a workload name such as ``T10I4D100K`` (T, I and D required)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name.strip()):
        raise ConfigError(f"workload name {name!r} is not of the form T<len>I<pattern len>D<transactions>, "
                          "e.g. T10I4D100K (K = 1000, M = 1000000)")
    out: dict = {}
    for letter, num, suffix in _PART.findall(name.strip()):
        key = letter.upper()
        if _FIELD[key] in out:
            raise ConfigError(f"workload name {name!r} gives {key} twice")
        value = float(num) * {"": 1, "K": 1000, "M": 1_000_000}[suffix.upper()]
        if key in "DNL":
            if not value.is_integer():
                raise ConfigError(f"workload name {name!r}: {key} must be a whole number, got {value}")
            value = int(value)
        out[_FIELD[key]] = value
    for key in "TID":
        if _FIELD[key] not in out:
            raise ConfigError(f"workload name {name!r} lacks {key} ({_WHAT[key]}); expected e.g. T10I4D100K")
    return out


def quest_params(spec_or_name: str | QuestParams = "T10I4D100K", **overrides) -> QuestParams:
    """Resolve a name, a preset (``seed000``) or a ``QuestParams`` plus keyword overrides
    (``None`` means "keep"). Raises ``ConfigError`` naming a bad parameter.

    >>> quest_params("seed000").transactions
    10000000
    >>> quest_params("T10I4D100K", items=0)
    Traceback (most recent call last):
    ...
    clusterlab.errors.ConfigError: items must be an integer >= 1, got 0
    """
    if isinstance(spec_or_name, QuestParams):
        base = dataclasses.asdict(spec_or_name)
    elif isinstance(spec_or_name, str) and spec_or_name.lower() in PRESETS:
        base = dict(PRESETS[spec_or_name.lower()])
    else:
        base = parse_name(spec_or_name)
    fields = {f.name for f in dataclasses.fields(QuestParams)}
    for k, v in overrides.items():
        if k not in fields:
            raise ConfigError(f"unknown generator parameter {k!r}; known: {', '.join(sorted(fields))}")
        if v is not None:
            base[k] = v
    for k in ("transactions", "patterns", "items", "seed"):
        if k not in base:
            continue
        v = base[k]
        low = 0 if k in ("transactions", "seed") else 1
        if isinstance(v, bool) or not isinstance(v, int) or v < low or v >= 2**64 \
                or (k in ("patterns", "items") and v >= 2**32):
            raise ConfigError(f"{k} must be an integer >= {low}, got {v!r}")
    for k in ("avg_len", "avg_pattern_len", "correlation", "corruption_mean", "corruption_sd"):
        if k in base and (isinstance(base[k], bool) or not isinstance(base[k], (int, float))):
            raise ConfigError(f"{k} must be a number, got {base[k]!r}")
    p = QuestParams(**base)
    p.core()  # validates the ranges in one place (Rust), with the parameter's name
    return p


def generate(spec_or_name: str | QuestParams = "T10I4D100K", *, transactions: int | None = None,
             avg_len: float | None = None, avg_pattern_len: float | None = None,
             patterns: int | None = None, items: int | None = None, seed: int | None = None,
             correlation: float | None = None, corruption_mean: float | None = None,
             corruption_sd: float | None = None, threads: int | None = None) -> Baskets:
    """Generate a workload in memory. The result depends only on the parameters and the seed,
    not on ``threads``. For files larger than memory use :func:`generate_file`."""
    p = quest_params(spec_or_name, transactions=transactions, avg_len=avg_len, avg_pattern_len=avg_pattern_len,
                     patterns=patterns, items=items, seed=seed, correlation=correlation,
                     corruption_mean=corruption_mean, corruption_sd=corruption_sd)
    _check_threads(threads)
    offsets, items_ = p.core().generate(0, p.transactions, threads)
    return Baskets(offsets, items_)


@dataclasses.dataclass(frozen=True)
class GenerateResult:
    """What :func:`generate_file` wrote."""

    path: Path
    params: QuestParams
    bytes: int
    seconds: float
    index_path: Path | None = None
    partitions: list | None = None

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / self.seconds if self.seconds > 0 else float("inf")


def _check_threads(threads):
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ConfigError(f"threads must be an integer >= 1, got {threads!r}")


def index_path_for(path: str | os.PathLike) -> Path:
    """Where the partition index of a generated file lives: ``<file>.index.json``."""
    p = Path(path)
    return p.with_name(p.name + ".index.json")


def generate_file(path: str | os.PathLike, spec_or_name: str | QuestParams = "T10I4D100K", *,
                  transactions: int | None = None, avg_len: float | None = None,
                  avg_pattern_len: float | None = None, patterns: int | None = None, items: int | None = None,
                  seed: int | None = None, correlation: float | None = None, corruption_mean: float | None = None,
                  corruption_sd: float | None = None, threads: int | None = None,
                  partitions: int | None = None,
                  progress: Callable[[int, int], None] | None = None) -> GenerateResult:
    """Generate a workload straight to a FIMI file (atomically: a temporary file renamed on
    success). Blocks are formatted in parallel in Rust and appended in order, so memory stays
    small whatever the size.

    With ``partitions=P`` the file is followed by ``<file>.index.json`` giving P line-aligned
    byte ranges holding equal numbers of transactions (rank r reads
    ``read_fimi(path, start, end)``); see docs/generator.md. ``progress(done, total)`` is
    called after every chunk of transactions.

    >>> import tempfile
    >>> r = generate_file(os.path.join(tempfile.mkdtemp(), "t.dat"), "T5I2D1K", partitions=2)
    >>> [q["transactions"] for q in r.partitions]
    [500, 500]
    """
    p = quest_params(spec_or_name, transactions=transactions, avg_len=avg_len, avg_pattern_len=avg_pattern_len,
                     patterns=patterns, items=items, seed=seed, correlation=correlation,
                     corruption_mean=corruption_mean, corruption_sd=corruption_sd)
    _check_threads(threads)
    if partitions is not None and (isinstance(partitions, bool) or not isinstance(partitions, int)
                                   or not 1 <= partitions <= max(1, p.transactions)):
        raise ConfigError(f"partitions must be an integer in 1..{max(1, p.transactions)}, got {partitions!r}")
    gen = p.core()
    total = p.transactions
    marks = [] if partitions is None else [total * r // partitions for r in range(partitions + 1)]
    # Chunks of whole blocks: enough work per call to keep the threads busy, small enough for a
    # lively progress bar and a bounded buffer.
    chunk = gen.block * 64
    t0 = time.perf_counter()
    written = 0
    mark_pos: list[int] = []
    path = Path(path)
    with atomic_path(path) as tmp:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        tmp.touch()
        for first in range(0, total, chunk):
            n = min(chunk, total - first)
            mine = [m for m in marks if first <= m < first + n]
            nbytes, pos = gen.write_fimi(os.fspath(tmp), first, n, mine, threads)
            mark_pos.extend(written + q for q in pos)
            written += nbytes
            if progress is not None:
                progress(first + n, total)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
    seconds = time.perf_counter() - t0
    mark_pos.extend([written] * (len(marks) - len(mark_pos)))  # marks == total point at the end
    index = parts = None
    if partitions is not None:
        parts = [{"rank": r, "start": mark_pos[r], "end": mark_pos[r + 1], "first_transaction": marks[r],
                  "transactions": marks[r + 1] - marks[r]} for r in range(partitions)]
        index = index_path_for(path)
        with atomic_open(index, "w", encoding="utf-8") as f:
            json.dump({"format": "clusterlab-partition-index/1", "file": path.name, "bytes": written,
                       "transactions": total, "generator": {"model": "ibm-quest", "name": p.name,
                                                            **dataclasses.asdict(p)},
                       "partitions": parts}, f, indent=1)
            f.write("\n")
    return GenerateResult(path, p, written, seconds, index, parts)


def read_partition_index(path: str | os.PathLike) -> list[dict]:
    """The partitions recorded beside a generated file (accepts the data file or the index).

    Raises ``ConfigError`` when the index is missing, malformed, or does not match the file's
    size (the data file was replaced after the index was written).
    """
    path = Path(path)
    index = path if path.name.endswith(".index.json") else index_path_for(path)
    try:
        doc = json.loads(index.read_text(encoding="utf-8"))
        data = index.with_name(doc["file"])
        parts = doc["partitions"]
        ok = isinstance(parts, list) and parts and parts[0]["start"] == 0 and parts[-1]["end"] == doc["bytes"] \
            and all(a["end"] == b["start"] for a, b in zip(parts, parts[1:], strict=False))
    except (OSError, ValueError, KeyError, TypeError, IndexError) as e:
        raise ConfigError(f"{index}: not a readable partition index ({e})") from None
    if not ok:
        raise ConfigError(f"{index}: partitions do not tile the file")
    if not data.exists() or data.stat().st_size != doc["bytes"]:
        raise ConfigError(f"{index}: {data} is missing or not {doc['bytes']} bytes long (regenerate it)")
    return parts
