"""Results larger than memory: ``clusterlab mine -o out.parquet --memory 2GB`` against the
in-memory run and pyfim, time and peak memory, each in its own process.

Not a test. Per row: the streamed run (one mining thread, the itemsets written as Parquet row
groups as found), the in-memory run (``clusterlab mine -o``: the whole table, then one write;
it stops at the default cap of 20M itemsets) and pyfim's ``fpgrowth`` (a list of every
itemset in memory; ``--pyfim-timeout`` seconds at most). With ``--rules CONF`` both
clusterlab runs also derive the rules (one-item consequents, confidence >= CONF): the streamed
run out of core from its itemset file (``rules_to_parquet``), the in-memory one with
``rules()`` (pyfim is not asked for rules). Peak RSS is each process's ``ru_maxrss``; the load
average is recorded before each run. Writes bench/results/stream.json with the bench harness's
provenance (``clusterlab.bench.harness``: commit, machine, load, spare CPU, autogroup).

With ``--nodes N`` the rows are parallel runs instead (``mine -n N -a ALGO`` for each of
``--algorithms``, on the TCP mesh): streamed (``--memory`` per rank, rank 0 writes the file) and
in memory, each rank's peak RSS, the bytes spilled and whether the two files are the same bytes
(sha256); no pyfim. Record: bench/results/stream_parallel.json.

    python bench/stream.py [--rows chess40,t10-0.005] [--memory 2GB] [--rules 0.9] [--pyfim-timeout 300]
    python bench/stream.py --nodes 2 --algorithms hpa,cd,pfp --rows chess50 --memory 1GB -o bench/results/stream_parallel.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from fim import data_path  # noqa: E402

ROWS = {
    "chess50": ("chess.dat", 0.50),
    "chess40": ("chess.dat", 0.40),
    "chess30": ("chess.dat", 0.30),
    "chess20": ("chess.dat", 0.20),
    "chess15": ("chess.dat", 0.15),
    "t10-0.005": ("T10I4D100K.dat", 0.00005),
}

PYFIM = """
import resource, sys, time
sys.path = [p for p in sys.path if not p.endswith('bench')]
import fim
lists = [[int(x) for x in line.split()] for line in open(sys.argv[1])]
t = time.perf_counter()
n = len(fim.fpgrowth(lists, supp=-int(sys.argv[2]), zmin=1))
print(n, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def cli(path: Path, supp: float, out: Path, memory: str | None, timeout: float, rules: float | None = None,
        nodes: int | None = None, algorithm: str | None = None) -> dict:
    cmd = [sys.executable, "-m", "clusterlab", "mine", str(path), "-s", repr(supp), "-o", str(out), "--json", "-q"]
    if nodes is not None:
        cmd += ["-n", str(nodes), "-a", algorithm]
    if memory:
        cmd += ["--memory", memory]
    if rules is not None:
        cmd += ["--rules", "--min-confidence", repr(rules)]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    t = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"status": f"timeout after {timeout:.0f} s"}
    wall = time.perf_counter() - t
    if r.returncode != 0:
        return {"status": r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}", "wall_s": wall}
    s = json.loads(r.stdout)
    size = out.stat().st_size if out.exists() else 0
    digest = None
    if out.exists():
        import hashlib

        h = hashlib.sha256()
        with open(out, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        digest = h.hexdigest()
    out.unlink(missing_ok=True)
    for extra in (out.with_suffix(".passes.json"),):
        extra.unlink(missing_ok=True)
    rules_out = Path(s["rules_output"]) if s.get("rules_output") else None
    rules_size = rules_out.stat().st_size if rules_out is not None and rules_out.exists() else 0
    if rules_out is not None:
        rules_out.unlink(missing_ok=True)
    return {"status": "ok", "wall_s": wall, "itemsets": s["itemsets"], "seconds": s["seconds"],
            "peak_rss_bytes": s["peak_rss_bytes"], "file_bytes": size, "algorithm": s["algorithm"],
            "row_groups": s.get("row_groups"), "rules": s.get("rules"), "rules_file_bytes": rules_size,
            "sha256": digest, **{k: s[k] for k in ("ranks_peak_rss_bytes", "spilled_bytes", "runs") if k in s}}


def pyfim(path: Path, supp: float, timeout: float) -> dict:
    import math

    n_tx = sum(1 for _ in open(path))
    mc = max(1, math.ceil(supp * n_tx))
    try:
        r = subprocess.run([sys.executable, "-c", PYFIM, str(path), str(mc)], capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": f"timeout after {timeout:.0f} s"}
    if r.returncode != 0:
        return {"status": (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]}
    n, s, rss = r.stdout.split()
    return {"status": "ok", "itemsets": int(n), "mine_s": float(s), "peak_rss_bytes": int(rss)}


def main(argv=None) -> None:
    from clusterlab.bench import harness

    ap = harness.parser(__doc__, ROOT / "bench" / "results" / "stream.json")
    ap.add_argument("--rows", default="chess40,t10-0.005", help=f"comma-separated, of {', '.join(ROWS)} "
                                                                 "(default %(default)s)")
    ap.add_argument("--memory", default="2GB", help="the streamed run's --memory (default %(default)s)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per clusterlab run (default %(default)s)")
    ap.add_argument("--pyfim-timeout", type=float, default=300, help="seconds for pyfim (default %(default)s)")
    ap.add_argument("--rules", type=float, default=None, metavar="CONF",
                    help="also derive rules with confidence >= CONF (streamed: out of core)")
    ap.add_argument("--nodes", type=int, default=None, help="parallel rows on this many ranks (see above)")
    ap.add_argument("--algorithms", default="hpa,cd,pfp", help="with --nodes: comma-separated (default %(default)s)")
    a = ap.parse_args(argv)
    algos = a.algorithms.split(",")
    if a.nodes is not None and (a.nodes < 1 or any(x not in ("hpa", "hpa-eld", "cd", "pfp") for x in algos)):
        ap.exit(2, f"{ap.prog}: --nodes must be >= 1 and --algorithms of hpa, hpa-eld, cd, pfp\n")
    unknown = [k for k in a.rows.split(",") if k not in ROWS]
    if unknown:
        ap.exit(2, f"{ap.prog}: --rows {','.join(unknown)}: unknown (known: {', '.join(ROWS)})\n")
    run = harness.start(ap, args=a)
    res = {"memory": a.memory, "rules_min_confidence": a.rules, "nodes": a.nodes, "rows": {}}
    tmp_dir = tempfile.TemporaryDirectory(prefix="clusterlab-stream-")  # removed at exit, whatever happens
    tmp = Path(tmp_dir.name)
    for key in a.rows.split(","):
        name, supp = ROWS[key]
        path = data_path(name)
        row = {"file": name, "min_support": supp}
        if a.nodes is not None:
            for algo in algos:
                for tool in ("streamed", "in_memory"):
                    load = os.getloadavg()[0]
                    r = cli(path, supp, tmp / f"{key}.parquet", a.memory if tool == "streamed" else None, a.timeout,
                            a.rules, a.nodes, algo)
                    row.setdefault(algo, {})[tool] = {**r, "load": round(load, 2)}
                    run.say(f"{key:10s} {algo:5s} {tool:9s} {json.dumps(row[algo][tool])}")
                got = row[algo]
                got["same_bytes"] = got["streamed"].get("sha256") is not None and \
                    got["streamed"].get("sha256") == got["in_memory"].get("sha256")
            res["rows"][key] = row
            continue
        for tool in ("streamed", "in_memory", "pyfim"):
            load = os.getloadavg()[0]
            if tool == "pyfim":
                r = pyfim(path, supp, a.pyfim_timeout)
            else:
                r = cli(path, supp, tmp / f"{key}.parquet", a.memory if tool == "streamed" else None, a.timeout,
                        a.rules)
            row[tool] = {**r, "load": round(load, 2)}
            run.say(f"{key:10s} {tool:9s} {json.dumps(row[tool])}")
        res["rows"][key] = row
    tmp_dir.cleanup()
    run.write(res)


if __name__ == "__main__":
    main()
