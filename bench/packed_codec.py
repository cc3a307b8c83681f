"""Old vs new in one run: the packed-basket decoder (ns per item) and HPA's
``reduce_transactions`` (ms per call) on generated T10I4-like baskets. A script, not a test.

It builds ``crates/clusterlab-core/examples/packed_decode.rs`` twice: against this tree (new)
and against the sources of ``--base`` (old; ``git archive`` into target/packed_codec_base, the
example copied in), then runs the two binaries in turns (old, new, new, old, ...), each
invocation reporting the median of ``--runs`` timed calls. The load average (/proc/loadavg) is
recorded around every invocation. With valgrind installed it also counts, under callgrind's
branch simulator, conditional branch mispredictions per item of each kernel alone
(``--toggle-collect`` on the example's never-inlined ``decode_once`` / ``reduce_once``):
load-independent, unlike the timings. The record carries the bench harness's provenance
(``clusterlab.bench.harness``: commit, machine, load, spare CPU, autogroup).

    .venv/bin/python bench/packed_codec.py [--base main] [--rounds 4] [--runs 9]
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from clusterlab.bench import harness

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = "crates/clusterlab-core/examples/packed_decode.rs"
KERNELS = ["crates/clusterlab-core/src/packed.rs", "crates/clusterlab-core/src/hpa/route.rs"]


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


def build(src: Path, target: Path) -> Path:
    subprocess.run(["cargo", "build", "--release", "-q", "--example", "packed_decode", "-p", "clusterlab-core",
                    "--manifest-path", str(src / "Cargo.toml")],
                   check=True, env={**os.environ, "CARGO_TARGET_DIR": str(target)})
    return target / "release" / "examples" / "packed_decode"


def build_base(base: str) -> Path:
    """The example built against `base`'s sources (re-extracted only when `base` moved)."""
    top = ROOT / "target" / "packed_codec_base"
    src, stamp = top / "src", top / "src.commit"
    if not stamp.exists() or stamp.read_text() != base:
        shutil.rmtree(src, ignore_errors=True)
        src.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", base], cwd=ROOT, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
        stamp.write_text(base)
    (src / EXAMPLE).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ROOT / EXAMPLE, src / EXAMPLE)
    return build(src, top / "target")


def run(binary: Path, args: list[str]) -> dict:
    before = loadavg()
    out = subprocess.run([str(binary), *args], check=True, capture_output=True, text=True).stdout
    row = json.loads(out.strip().splitlines()[-1])
    row["loadavg_before"], row["loadavg_after"] = before, loadavg()
    return row


def callgrind(binary: Path, only: str, transactions: int) -> dict:
    """Callgrind's totals (Ir, Bc, Bcm, ...) inside `decode_once` or `reduce_once`, per input item."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "cg.out"
        proc = subprocess.run(
            ["valgrind", "--tool=callgrind", "--branch-sim=yes", f"--toggle-collect=*{only}_once*",
             f"--callgrind-out-file={out}", str(binary), "--only", only, "--runs", "1",
             "--transactions", str(transactions)],
            check=True, capture_output=True, text=True)
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        lines = out.read_text().splitlines()
    events = next(ln for ln in lines if ln.startswith("events:")).split()[1:]
    totals = next(ln for ln in lines if ln.startswith(("totals:", "summary:"))).split()[1:]
    # The example calls the kernel `runs` times timed, once to warm up and once for its output.
    calls = row["runs"] + 2
    per = calls * row["items"]
    return {"transactions": transactions, "calls": calls,
            **{f"{e}_per_item": round(int(v) / per, 4) for e, v in zip(events, totals, strict=True)}}


def main(argv=None) -> None:
    ap = harness.parser(__doc__, ROOT / "bench" / "results" / "packed_codec.json", repeat=("--rounds", 4),
                        repeat_help="invocations of each binary, in turns")
    ap.add_argument("--base", default="main", help="commit or branch holding the old kernels")
    ap.add_argument("--transactions", type=int, default=250_000)
    ap.add_argument("--runs", type=int, default=9, help="timed calls per invocation (median reported)")
    ap.add_argument("--keep", type=float, default=0.5, help="share of item occurrences reduce keeps")
    ap.add_argument("--min-len", type=int, default=3)
    ap.add_argument("--callgrind-transactions", type=int, default=50_000, help="0: no callgrind")
    bench = harness.start(ap, argv, repeat_flag="--rounds")
    a = bench.args

    base = git("rev-parse", a.base)
    old, new = build_base(base), build(ROOT, ROOT / "target")
    args = ["--transactions", str(a.transactions), "--runs", str(a.runs), "--keep", str(a.keep),
            "--min-len", str(a.min_len)]
    rows = []
    for r in range(a.rounds):
        for side in (("old", "new") if r % 2 == 0 else ("new", "old")):
            row = {"side": side, "round": r, **run(old if side == "old" else new, args)}
            bench.say({k: row[k] for k in ("side", "decode_ns_per_item", "reduce_ms", "loadavg_before")})
            rows.append(row)
    for key in ("reduce_out_transactions", "reduce_out_items"):
        if len({row[key] for row in rows}) != 1:
            raise SystemExit(f"old and new reduce_transactions disagree on {key}")

    def of(side: str, key: str) -> list[float]:
        return [row[key] for row in rows if row["side"] == side]

    # Medians over invocations (each already a median of its runs), and the fastest invocation:
    # on a shared machine a neighbour's burst slows some invocations of either side.
    summary = {}
    for key in ("decode_ns_per_item", "reduce_ms"):
        o, n = statistics.median(of("old", key)), statistics.median(of("new", key))
        lo, ln = min(of("old", key)), min(of("new", key))
        summary[key] = {"old": round(o, 4), "new": round(n, 4), "old_over_new": round(o / n, 3),
                        "old_min": round(lo, 4), "new_min": round(ln, 4), "old_over_new_min": round(lo / ln, 3)}
    bench.say(summary)
    doc = {
        "what": "packed-basket decoder (packed::decode, whole region) and hpa::reduce_transactions, "
                "old (base) vs new (this tree), T10I4-like Quest baskets (1000 items, seed 1)",
        "base": base, "head": git("rev-parse", "HEAD"),
        "kernels_modified_since_head": bool(git("status", "--porcelain", "--", *KERNELS)),
        "params": {"transactions": a.transactions, "runs": a.runs, "rounds": a.rounds, "keep": a.keep,
                   "min_len": a.min_len},
        "summary": summary, "invocations": rows,
    }
    if a.callgrind_transactions and shutil.which("valgrind"):
        doc["callgrind"] = {side: {only: callgrind(b, only, a.callgrind_transactions) for only in ("decode", "reduce")}
                            for side, b in (("old", old), ("new", new))}
        bench.say(doc["callgrind"])
    bench.write(doc)


if __name__ == "__main__":
    main()
