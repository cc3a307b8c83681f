"""``clusterlab mine FILE``: frequent itemsets (and optionally rules) of a basket file.

The command parses its options into a :class:`MineOptions` and hands it to :func:`run`,
which dispatches on the execution mode; only the sequential path lives here. A parallel path
(``--nodes N --algorithm hpa|cd|pfp``) plugs in as another branch of :func:`run` that
returns the same :class:`MineResult`, so output writing and the summary are shared.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import click

from clusterlab.data.io import FORMATS
from clusterlab.errors import ConfigError

OUTPUT_KINDS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".txt": "spmf"}


@dataclass
class MineOptions:
    file: str
    min_support: float = 0.01
    algorithm: str = "auto"
    target: str = "all"
    min_len: int = 1
    max_len: int | None = None
    threads: int | None = None
    input_format: str | None = None
    output: str | None = None
    rules: bool = False
    min_confidence: float = 0.8
    min_lift: float | None = None
    consequents: str = "single"
    rules_output: str | None = None
    # --- parallel mining (clusterlab.mining.parallel) ---
    nodes: int | None = None
    backend: str = "tcp"
    testbed: str | None = None
    block_size: int = 8192
    partition: str = "prefix"


@dataclass
class MineResult:
    itemsets: object  # pyarrow.Table
    rules: object | None
    n_transactions: int
    algorithm: str
    timings: dict = field(default_factory=dict)  # phase -> seconds
    passes: list | None = None  # parallel runs: per-pass statistics


def parse_min_support(text: str) -> float | int:
    """``0.01`` and ``1%`` are fractions, ``50`` is a count."""
    t = text.strip()
    try:
        if t.endswith("%"):
            return float(t[:-1]) / 100
        v = float(t)
    except ValueError:
        raise ConfigError(f"--min-support {text!r} is not a number (e.g. 0.01, 1%, or a count like 50)") from None
    return int(v) if v >= 1 and v == int(v) else v


def output_kind(path: str) -> str:
    kind = OUTPUT_KINDS.get(Path(path).suffix.lower())
    if kind is None:
        raise ConfigError(f"output {path!r}: use a .parquet, .csv or .txt (SPMF) file name")
    return kind


def rules_path(opts: MineOptions) -> str | None:
    if opts.rules_output:
        return opts.rules_output
    if opts.output:
        p = Path(opts.output)
        return str(p.with_name(f"{p.stem}.rules{p.suffix}"))
    return None


def _launched_world_size() -> int:
    """Ranks of the job this process belongs to (`clusterlab run` or mpiexec), else 0."""
    from clusterlab.comm.world import under_launcher, under_mpi

    if not (under_launcher() or under_mpi()):
        return 0
    from clusterlab.comm import world

    return world().size


def run(opts: MineOptions, status=None) -> MineResult:
    """Mine as the options say. ``status(text)`` reports the current phase."""
    if opts.nodes is not None or opts.algorithm in PARALLEL_ALGORITHMS or _launched_world_size() > 1:
        return run_parallel(opts, status or (lambda _t: None))
    return run_sequential(opts, status or (lambda _t: None))


# --- parallel path (owned by the parallel-mining work; see clusterlab.mining.parallel) ---
PARALLEL_ALGORITHMS = ("hpa", "hpa-eld", "cd", "pfp")


def run_parallel(opts: MineOptions, status) -> MineResult:
    import clusterlab
    from clusterlab.mining.parallel import ParallelConfig, mine_parallel

    algo = opts.algorithm if opts.algorithm in PARALLEL_ALGORITHMS else "hpa"
    nodes = opts.nodes or 1
    if opts.target != "all" or opts.min_len > 1:
        raise ConfigError("parallel mining (--nodes) finds all frequent itemsets: drop --target and --min-len")
    where = f"testbed {opts.testbed}" if opts.testbed else opts.backend
    config = ParallelConfig(block_bytes=opts.block_size, max_len=opts.max_len or 0, partition=opts.partition)
    t0 = time.perf_counter()
    if _launched_world_size():
        # Started as one rank of a job (`clusterlab run -n 4 -- mine ...` or mpiexec): mine on
        # that job's ranks instead of launching a cluster of our own; rank 0 reports.
        from clusterlab.comm import world
        from clusterlab.mining.parallel import run_rank

        comm = world()
        if opts.nodes not in (None, 1, comm.size):
            raise ConfigError(f"--nodes {opts.nodes} differs from the job's {comm.size} ranks: drop --nodes")
        nodes, where = comm.size, "launched"
        sets, passes = run_rank(comm, opts.file, algo, opts.min_support, config)
        if comm.rank != 0:
            raise SystemExit(0)
    else:
        status(f"mining with {algo} on {nodes} {where} ranks")
        sets, passes = mine_parallel(opts.file, nodes=nodes, algorithm=algo, min_support=opts.min_support,
                                     backend=opts.backend, testbed=opts.testbed, config=config)
    timings = {"mine": time.perf_counter() - t0,
               "job": sum(p["t_total"] for p in passes) + (passes[0].get("t_read", 0.0) if passes else 0.0)}
    rules = None
    if opts.rules:
        t2 = time.perf_counter()
        rules = clusterlab.rules(sets, min_confidence=opts.min_confidence, min_lift=opts.min_lift,
                                 consequents=opts.consequents)
        timings["rules"] = time.perf_counter() - t2
    n = clusterlab.mining.result.table_info(sets).get("n_transactions", 0)
    return MineResult(sets, rules, n, f"{algo} x{nodes} ({where})", timings, passes)
# --- end of the parallel path ---


def run_sequential(opts: MineOptions, status) -> MineResult:
    import clusterlab
    from clusterlab.mining.sequential import choose_algorithm

    timings = {}
    t0 = time.perf_counter()
    status(f"reading {opts.file}")
    b = clusterlab.read_baskets(opts.file, format=opts.input_format)
    timings["read"] = time.perf_counter() - t0
    from clusterlab.mining.sequential import min_count_of

    algo = choose_algorithm(b, min_count_of(opts.min_support, len(b))) if opts.algorithm == "auto" else opts.algorithm
    status(f"mining {len(b):,} transactions with {algo}")
    t1 = time.perf_counter()
    sets = clusterlab.mine(b, opts.min_support, algorithm=algo, target=opts.target, min_len=opts.min_len,
                           max_len=opts.max_len, threads=opts.threads)
    timings["mine"] = time.perf_counter() - t1
    rules = None
    if opts.rules:
        status(f"deriving rules from {sets.num_rows:,} itemsets")
        t2 = time.perf_counter()
        rules = clusterlab.rules(sets, min_confidence=opts.min_confidence, min_lift=opts.min_lift,
                                 consequents=opts.consequents)
        timings["rules"] = time.perf_counter() - t2
    return MineResult(sets, rules, len(b), algo, timings)


def write_table(table, path: str, rules: bool = False) -> None:
    """Write an itemset or rule table by extension, atomically."""
    kind = output_kind(path)
    if kind == "spmf":
        from clusterlab.data.spmf import write_spmf_itemsets, write_spmf_rules

        (write_spmf_rules if rules else write_spmf_itemsets)(table, path)
        return
    from clusterlab._atomic import atomic_path

    with atomic_path(path) as tmp:
        if kind == "parquet":
            import pyarrow.parquet as pq

            pq.write_table(table, tmp)
        else:
            import pyarrow as pa
            import pyarrow.compute as pc
            import pyarrow.csv as pcsv

            cols = {}
            for name in table.column_names:
                col = table.column(name)
                if pa.types.is_large_list(col.type) or pa.types.is_list(col.type):
                    col = pc.binary_join(col.cast(pa.list_(pa.string())), " ")
                cols[name] = col
            pcsv.write_csv(pa.table(cols), tmp)


def summary(res: MineResult, opts: MineOptions) -> dict:
    import numpy as np

    from clusterlab.mining.result import list_column_csr

    offsets, _ = list_column_csr(res.itemsets.column("items"))
    lengths = np.bincount(np.diff(offsets)) if offsets.size > 1 else np.zeros(1, dtype=np.int64)
    # ru_maxrss is KiB on Linux, bytes on macOS.
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    return {
        "file": opts.file, "transactions": res.n_transactions, "algorithm": res.algorithm, "target": opts.target,
        "min_support": opts.min_support, "itemsets": res.itemsets.num_rows,
        "itemsets_by_length": {int(k): int(v) for k, v in enumerate(lengths) if v},
        "rules": None if res.rules is None else res.rules.num_rows,
        "seconds": {k: round(v, 4) for k, v in res.timings.items()}, "peak_rss_bytes": rss,
        "output": opts.output, "rules_output": rules_path(opts) if res.rules is not None else None,
    }


def print_summary(s: dict, res: MineResult, console) -> None:
    from rich.table import Table

    t = Table(title=f"{s['itemsets']:,} {s['target']} frequent itemsets of {s['file']}", show_header=False, box=None)
    t.add_row("transactions", f"{s['transactions']:,}")
    t.add_row("algorithm", s["algorithm"])
    t.add_row("by length", "  ".join(f"{k}: {v:,}" for k, v in s["itemsets_by_length"].items()) or "-")
    if s["rules"] is not None:
        t.add_row("rules", f"{s['rules']:,}")
    t.add_row("time", "  ".join(f"{k} {v:.3f}s" for k, v in s["seconds"].items()))
    t.add_row("peak memory", f"{s['peak_rss_bytes'] / 2**20:,.0f} MiB")
    for key, label in (("output", "itemsets written to"), ("rules_output", "rules written to")):
        if s[key]:
            t.add_row(label, s[key])
    console.print(t)
    if not s["output"] and res.itemsets.num_rows:
        top = res.itemsets.sort_by([("count", "descending")]).slice(0, 10)
        pt = Table(title="most frequent itemsets (write them all with -o)")
        for c in ("items", "count", "support"):
            pt.add_column(c, justify="left" if c == "items" else "right")
        for items, count, sup in zip(top["items"].to_pylist(), top["count"].to_pylist(), top["support"].to_pylist(), strict=True):
            pt.add_row(" ".join(map(str, items)), f"{count:,}", f"{sup:.2%}")
        console.print(pt)


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--min-support", "-s", default="0.01", show_default=True,
              help="Fraction of transactions (0.01 or 1%), or an absolute count (50).")
@click.option("--algorithm", "-a", type=click.Choice(["auto", "apriori", "fpgrowth", "eclat", "hpa", "hpa-eld", "cd", "pfp"]),
              default="auto", show_default=True,
              help="auto: by measurement (see docs/mining.md). hpa|hpa-eld|cd|pfp: parallel (with --nodes).")
@click.option("--target", "-t", type=click.Choice(["all", "closed", "maximal"]), default="all", show_default=True)
@click.option("--min-len", default=1, show_default=True, type=click.IntRange(min=1))
@click.option("--max-len", default=None, type=click.IntRange(min=1), help="Longest itemset to report.")
@click.option("--threads", default=None, type=click.IntRange(min=1), help="Threads (default: all cores).")
@click.option("--format", "input_format", type=click.Choice(FORMATS), help="Input format (default: by extension).")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Write itemsets to .parquet, .csv or .txt (SPMF '1 3 #SUP: 3').")
@click.option("--rules", is_flag=True, help="Also derive association rules (written beside -o as NAME.rules.EXT).")
@click.option("--min-confidence", default=0.8, show_default=True, type=click.FloatRange(0, 1))
@click.option("--min-lift", default=None, type=float)
@click.option("--consequents", type=click.Choice(["single", "multi"]), default="single", show_default=True,
              help="single: one-item consequents (pyfim/Spark); multi: any (mlxtend).")
@click.option("--rules-output", type=click.Path(dir_okay=False), help="Where to write the rules.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--nodes", "-n", default=None, type=click.IntRange(min=1),
              help="Parallel: number of ranks on the local cluster (algorithm hpa unless -a says otherwise).")
@click.option("--backend", type=click.Choice(["tcp", "mpi"]), default="tcp", show_default=True,
              help="Parallel: the Communicator backend.")
@click.option("--block-size", default="8KiB", show_default=True, help="Parallel (HPA): message block size.")
@click.option("--partition", type=click.Choice(["prefix", "itemset"]), default="prefix", show_default=True,
              help="Parallel (HPA): candidates owned by their first item's rank (one record per transaction "
                   "and owner), or by a hash of the whole itemset (seed 000: every subset travels).")
@click.option("--testbed", "testbed_name", default=None, metavar="NAME",
              help="Parallel: run rank i in host i of the namespace testbed NAME (`clusterlab testbed up`; root).")
def mine(file, min_support, algorithm, target, min_len, max_len, threads, input_format, output, rules,
         min_confidence, min_lift, consequents, rules_output, as_json, nodes, backend, block_size, partition, testbed_name):
    """Frequent (closed, maximal) itemsets of FILE, optionally with association rules.

    \b
    Examples:
      clusterlab mine ../shared/data/T10I4D100K.dat --min-support 0.01 -o sets.parquet
      clusterlab mine ../shared/data/chess.dat -s 80% --target closed -o chess.txt
      clusterlab mine baskets.csv -s 0.05 --rules --min-confidence 0.6 -o sets.csv
      clusterlab mine data.dat -s 0.007 --nodes 4 -a hpa            # 4 local ranks (TCP mesh)
      clusterlab mine data.dat -s 0.007 --nodes 4 -a pfp --testbed lab   # on a namespace testbed
    """
    if max_len is not None and max_len < min_len:
        raise ConfigError(f"--max-len {max_len} is below --min-len {min_len}")
    if rules and (target != "all" or min_len > 1):
        raise ConfigError("--rules needs all frequent itemsets: drop --target closed/maximal and --min-len")
    opts = MineOptions(file=file, min_support=parse_min_support(min_support), algorithm=algorithm, target=target,
                       min_len=min_len, max_len=max_len, threads=threads, input_format=input_format,
                       output=output, rules=rules, min_confidence=min_confidence, min_lift=min_lift,
                       consequents=consequents, rules_output=rules_output)
    if nodes is not None or algorithm in PARALLEL_ALGORITHMS or testbed_name:  # parallel options
        from clusterlab.units import parse_size

        opts.nodes, opts.backend, opts.block_size = nodes or 1, backend, parse_size(block_size)
        opts.partition = partition
        opts.testbed = testbed_name
    # Check output names before the (possibly long) run.
    for p in (opts.output, rules_path(opts) if opts.rules else None):
        if p:
            output_kind(p)
    from rich.console import Console

    console = Console(stderr=as_json)
    quiet = as_json or not console.is_terminal
    t0 = time.perf_counter()
    if quiet:
        res = run(opts)
    else:
        with console.status("starting") as st:
            res = run(opts, lambda text: st.update(f"{text} ({time.perf_counter() - t0:.1f}s)"))
    t1 = time.perf_counter()
    if opts.output:
        write_table(res.itemsets, opts.output)
    if res.rules is not None and rules_path(opts):
        write_table(res.rules, rules_path(opts), rules=True)
    if opts.output or res.rules is not None:
        res.timings["write"] = time.perf_counter() - t1
    s = summary(res, opts)
    s["options"] = {k: v for k, v in asdict(opts).items() if k != "file"}
    if res.passes is not None:  # parallel: per-pass statistics, printed and saved
        s["passes"] = res.passes
        if opts.output:
            from clusterlab._atomic import atomic_open

            with atomic_open(str(Path(opts.output).with_suffix("")) + ".passes.json") as f:
                json.dump(res.passes, f, indent=1)
    if as_json:
        click.echo(json.dumps(s, indent=2))
    else:
        print_summary(s, res, console)
        if res.passes is not None:
            from clusterlab.mining.parallel import format_passes

            click.echo(format_passes(res.passes), err=as_json)
        if res.rules is not None and not rules_path(opts):
            console.print(f"{res.rules.num_rows:,} rules (write them with -o or --rules-output)")
