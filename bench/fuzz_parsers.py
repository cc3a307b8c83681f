"""Longer fuzz of the basket parsers than the test suite's (tests/test_fuzz_parsers.py).

Feeds mutated FIMI and CSV files to ``clusterlab._core.parse_fimi`` / ``parse_csv_baskets``
and checks each result with the suite's checks (FIMI differentially against the Python
reference reading of docs/formats.md; CSV for invariants and sane line/column). A Rust panic
surfaces as ``pyo3_runtime.PanicException`` and counts as a crash; the input is saved.

Two engines:
- ``--engine atheris`` (libFuzzer through atheris, ``pip install atheris``): coverage-guided
  on the Python side only (the Rust extension is not instrumented), seeded with the corpus.
- ``--engine mutate`` (default when atheris is missing): the suite's random mutator in a loop.

Usage::

    python bench/fuzz_parsers.py --seconds 120            # writes bench/results/fuzz_parsers.json
    python bench/fuzz_parsers.py --engine atheris --seconds 120

The record carries the bench harness's provenance (``clusterlab.bench.harness``: commit,
machine, load, spare CPU, autogroup).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checks live in the test suite

from clusterlab import _core  # noqa: E402
from clusterlab.bench import harness  # noqa: E402

try:
    import atheris
except ImportError:
    atheris = None

if atheris is not None:
    # Coverage of the reference reader (which mirrors the Rust parser's branches) guides
    # libFuzzer; the Rust code itself is not instrumented.
    with atheris.instrument_imports():
        from tests.test_fuzz_parsers import (
            CSV_SEEDS,
            FIMI_SEEDS,
            FIMI_TOKENS,
            SAFE_FIMI,
            check_csv,
            check_fimi,
            mutate,
            mutate_csv,
        )
else:
    from tests.test_fuzz_parsers import (
        CSV_SEEDS,
        FIMI_SEEDS,
        FIMI_TOKENS,
        SAFE_FIMI,
        check_csv,
        check_fimi,
        mutate,
        mutate_csv,
    )

RESULTS = ROOT / "bench" / "results"
# Crash inputs and the fuzzer's corpus are raw material, not the record: they stay out of git.
WORK = ROOT / "runs" / "fuzz_parsers"


class Stats:
    def __init__(self):
        self.runs = {"fimi": 0, "csv": 0}
        self.accepted = {"fimi": 0, "csv": 0}
        self.crashes: list[dict] = []

    def run(self, kind: str, data: bytes) -> None:
        self.runs[kind] += 1
        try:
            (check_fimi if kind == "fimi" else check_csv)(data)
        except AssertionError as e:
            self.crash(kind, data, f"check failed: {e}")
            return
        except BaseException as e:  # a PanicException derives from BaseException
            if isinstance(e, KeyboardInterrupt):
                raise
            self.crash(kind, data, f"{type(e).__name__}: {e}")
            return
        try:
            (_core.parse_fimi if kind == "fimi" else _core.parse_csv_baskets)(data)
            self.accepted[kind] += 1
        except _core.BasketParseError:
            pass

    def crash(self, kind: str, data: bytes, what: str) -> None:
        WORK.mkdir(parents=True, exist_ok=True)
        name = WORK / f"crash-{kind}-{len(self.crashes)}.bin"
        name.write_bytes(data)
        self.crashes.append({"kind": kind, "what": what[:500], "input": str(name.relative_to(ROOT) if name.is_relative_to(ROOT) else name)})
        print(f"CRASH ({kind}): {what[:200]} -> {name}", file=sys.stderr)


def run_mutate(stats: Stats, seconds: float, seed: int) -> None:
    rng = random.Random(seed)
    end = time.monotonic() + seconds
    big = (b"1 2 3 4 5 6 7 8 9 10\n" * 120_000)  # > 2 MB: exercises the parallel chunking
    while time.monotonic() < end:
        for _ in range(200):
            r = rng.random()
            if r < 0.002:
                stats.run("fimi", mutate(big, rng, rng.randint(1, 4), FIMI_TOKENS, SAFE_FIMI))
            elif r < 0.5:
                stats.run("fimi", mutate(rng.choice(FIMI_SEEDS), rng, rng.randint(1, 24), FIMI_TOKENS, SAFE_FIMI))
            else:
                stats.run("csv", mutate_csv(rng.choice(CSV_SEEDS), rng, rng.randint(1, 24)))


def run_atheris(stats: Stats, seconds: float, seed: int) -> None:
    corpus = WORK / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for k, s in enumerate(FIMI_SEEDS):
        (corpus / f"fimi-{k}").write_bytes(b"F" + s)
    for k, s in enumerate(CSV_SEEDS):
        (corpus / f"csv-{k}").write_bytes(b"C" + s)

    end = time.monotonic() + seconds

    def one(data: bytes) -> None:
        # libFuzzer ends the process with _exit (no atexit): stop and report from here.
        if time.monotonic() > end:
            report(stats, "atheris", seconds, seed)
            sys.stdout.flush()
            os._exit(1 if stats.crashes else 0)
        if data:
            stats.run("csv" if data[0] % 2 else "fimi", data[1:])

    atheris.Setup([sys.argv[0], f"-max_total_time={int(seconds) + 60}", f"-seed={seed + 1}", "-max_len=4096",
                   "-print_final_stats=0", str(corpus)], one)
    atheris.Fuzz()


_started = time.monotonic()
RUN: harness.Run | None = None  # set by main(); report() writes through it


def report(stats: Stats, engine: str, seconds: float, seed: int) -> None:
    out = {"engine": engine, "seconds": round(time.monotonic() - _started, 1), "budget_seconds": seconds,
           "seed": seed, "runs": stats.runs, "accepted": stats.accepted, "crashes": stats.crashes,
           "ok": not stats.crashes}
    RUN.say(json.dumps(out))
    RUN.write(out)


def main(argv=None) -> int:
    global RUN, WORK
    ap = harness.parser(__doc__, RESULTS / "fuzz_parsers.json")
    ap.add_argument("--work", type=Path, default=WORK,
                    help="where crash inputs and the fuzzer's corpus go (default runs/fuzz_parsers, not in git)")
    ap.add_argument("--seconds", type=float, default=60, help="the fuzzing budget (default %(default)s)")
    ap.add_argument("--seed", type=int, default=int(os.environ.get("FUZZ_SEED", "0")),
                    help="random seed (default $FUZZ_SEED or 0)")
    ap.add_argument("--engine", choices=("atheris", "mutate"), default="mutate" if atheris is None else "atheris",
                    help="(default %(default)s)")
    args = ap.parse_args(argv)
    if args.engine == "atheris" and atheris is None:
        ap.error("atheris is not installed (pip install atheris), use --engine mutate")
    WORK = args.work.resolve()
    try:  # checked before the fuzzing starts, like the record's path
        WORK.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        ap.error(f"--work {args.work}: cannot create it ({e.strerror})")
    RUN = harness.start(ap, args=args)
    stats = Stats()
    if args.engine == "atheris":
        run_atheris(stats, args.seconds, args.seed)
    else:
        run_mutate(stats, args.seconds, args.seed)
        report(stats, "mutate", args.seconds, args.seed)
    return 1 if stats.crashes else 0


if __name__ == "__main__":
    sys.exit(main())
