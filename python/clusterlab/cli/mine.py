"""``clusterlab mine FILE``: frequent itemsets (and optionally rules) of a basket file.

The command parses its options into a :class:`MineOptions`, checks the outputs can be
written, and hands it to :func:`run`: the sequential engine (``clusterlab.mine``) or the
parallel driver (``clusterlab.mining.parallel.run_parallel``) does the work; this module
only writes the outputs and prints the summary.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import click

from clusterlab.cli.options import Duration, Finite, Int, OutputPath, Size
from clusterlab.cluster.api import MESHES
from clusterlab.data.io import FORMATS
from clusterlab.errors import ConfigError
from clusterlab.mining.parallel.driver import JOB_TIMEOUT_MAX, JOB_TIMEOUT_MIN
from clusterlab.mining.stream import peak_rss

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
    quiet: bool = False
    memory: int | None = None  # stream itemsets to the -o Parquet file within this many bytes
    # --- parallel mining (clusterlab.mining.parallel) ---
    nodes: int | None = None
    backend: str = "tcp"
    testbed: str | None = None
    block_size: int = 8192
    partition: str = "prefix"
    record: str | None = None  # --auto-dilation: where the ranks record the job for its replays
    timeout: str | None = None  # --timeout as typed: the whole job's limit (None: JOB_TIMEOUT)


@dataclass
class MineResult:
    itemsets: object  # pyarrow.Table
    rules: object | None
    n_transactions: int
    algorithm: str
    timings: dict = field(default_factory=dict)  # phase -> seconds
    passes: list | None = None  # parallel runs: per-pass statistics
    ranks: list | None = None  # parallel runs: per-rank time and peak memory
    facts: dict | None = None  # parallel runs: the cluster, transport, spare CPU and load (diagnose.observe)
    streamed: dict | None = None  # parallel runs with --memory: what rank 0 wrote to -o (itemsets is empty)


def parse_min_support(text: str) -> float | int:
    """``0.01`` and ``1%`` are fractions, ``50`` is a count."""
    t = text.strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise ConfigError(f"--min-support {text!r} is not a number (e.g. 0.01, 1%, or a count like 50)") from None
    if not math.isfinite(v):
        raise ConfigError(f"--min-support {text!r} is not a finite number: give a fraction below 1 (0.01, 1%) "
                          "or a count (50)")
    return int(v) if v >= 1 and v == int(v) else v


def parse_min_lift(_ctx, _param, value: float | None) -> float | None:
    """``--min-lift``: a finite number >= 0 (NaN would silently keep no rule)."""
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise ConfigError(f"--min-lift {value} is not a finite number >= 0 (e.g. 1.2)")
    return value


def output_kind(path: str) -> str:
    kind = OUTPUT_KINDS.get(Path(path).suffix.lower())
    if kind is None:
        raise ConfigError(f"output {path!r}: use a .parquet, .csv or .txt (SPMF) file name")
    return kind


def passes_path(output: str) -> str:
    """Where a parallel run's per-pass statistics go, beside ``-o``."""
    return str(Path(output).with_suffix("")) + ".passes.json"


class Elapsed:
    """Status text whose elapsed time ticks at every refresh of the spinner."""

    def __init__(self, text: str):
        self.text, self.t0 = text, time.perf_counter()

    def __rich__(self) -> str:
        return f"{self.text} ({time.perf_counter() - self.t0:.0f} s)"


def rules_path(opts: MineOptions) -> str | None:
    if opts.rules_output:
        return opts.rules_output
    if opts.output:
        p = Path(opts.output)
        return str(p.with_name(f"{p.stem}.rules{p.suffix}"))
    return None


def run(opts: MineOptions, status=None) -> MineResult | None:
    """Mine as the options say (None on ranks other than 0 of a launched job). ``status(text)``
    reports the current phase."""
    from clusterlab.mining.parallel import launched_job

    if opts.nodes is not None or opts.algorithm in PARALLEL_ALGORITHMS or launched_job() is not None:
        return run_parallel(opts)
    return run_sequential(opts, status or (lambda _t: None))


PARALLEL_ALGORITHMS = ("hpa", "hpa-eld", "cd", "pfp")


def parallel_algorithm(algorithm: str) -> str:
    """The parallel algorithm to run for ``-a`` (auto: hpa, seed 000's); sequential ones are refused."""
    if algorithm == "auto":
        return "hpa"
    if algorithm not in PARALLEL_ALGORITHMS:
        raise ConfigError(f"--algorithm {algorithm} is sequential; with --nodes (or in a launched job) choose "
                          f"one of {', '.join(PARALLEL_ALGORITHMS)}, or drop --nodes")
    return algorithm


def run_parallel(opts: MineOptions) -> MineResult | None:
    import clusterlab
    from clusterlab.cluster import from_options
    from clusterlab.mining.parallel import ParallelConfig
    from clusterlab.mining.parallel import run_parallel as parallel

    algo = parallel_algorithm(opts.algorithm)
    if opts.target != "all" or opts.min_len > 1:
        raise ConfigError("parallel mining (--nodes) finds all frequent itemsets: drop --target and --min-len")
    config = ParallelConfig(block_bytes=opts.block_size, max_len=opts.max_len or 0, partition=opts.partition,
                            progress=not opts.quiet)
    cluster = from_options(opts.backend, testbed=opts.testbed, job_first=True)
    if not opts.quiet and opts.nodes is not None:
        click.echo(f"mining {opts.file} with {algo} on {opts.nodes} {cluster.name} ranks", err=True)
    from clusterlab.diagnose.observe import observed

    streamed = {"output": opts.output, "memory": opts.memory} if opts.memory is not None else {}
    from clusterlab.comm.errors import JobTimeout
    from clusterlab.mining.parallel.driver import JOB_TIMEOUT
    from clusterlab.units import parse_duration

    limit = JOB_TIMEOUT if opts.timeout is None else parse_duration(opts.timeout, "--timeout")
    try:
        with observed(cluster) as facts:  # what the closing diagnosis judges the run by (its fidelity)
            r = parallel(opts.file, nodes=opts.nodes, algorithm=algo, min_support=opts.min_support, cluster=cluster,
                         config=config, format=opts.input_format, record=opts.record, timeout=limit, **streamed)
    except JobTimeout as e:
        given = f"--timeout {opts.timeout}" if opts.timeout is not None else "the default --timeout of 1h"
        raise JobTimeout(f"{e} ({given} bounds the whole job): give a longer --timeout, up to 168h") from None
    if r.table is None:  # another rank of a launched job: rank 0 reports
        return None
    timings = {"mine": r.wall_s, "job": r.job_s}
    rules = None
    if r.streamed is not None and opts.rules:  # rules out of core from the file rank 0 wrote
        from clusterlab.mining.stream import rules_to_parquet

        rr = rules_to_parquet(opts.output, rules_path(opts), min_confidence=opts.min_confidence,
                              min_lift=opts.min_lift, memory=opts.memory, consequents=opts.consequents)
        r.streamed["rules"] = rr["rules"]
        timings["rules"] = rr["seconds"]
    elif opts.rules:
        t2 = time.perf_counter()
        rules = clusterlab.rules(r.table, min_confidence=opts.min_confidence, min_lift=opts.min_lift,
                                 consequents=opts.consequents)
        timings["rules"] = time.perf_counter() - t2
    n = clusterlab.mining.result.table_info(r.table).get("n_transactions", 0)
    return MineResult(r.table, rules, n, f"{algo} x{r.nodes} ({r.where})", timings, r.passes, r.ranks, facts,
                      r.streamed)


def run_streamed(opts: MineOptions, status) -> dict:
    """Mine straight into the -o Parquet file within ``opts.memory`` bytes; the summary."""
    import clusterlab
    from clusterlab.mining.stream import mine_to_parquet

    t0 = time.perf_counter()
    status(f"reading {opts.file}")
    b = clusterlab.read_baskets(opts.file, format=opts.input_format)
    read_s = time.perf_counter() - t0

    def progress(n: int, seconds: float, rss: int) -> None:
        status(f"{n:,} itemsets found ({n / max(seconds, 1e-9):,.0f}/s), {rss / 2**20:,.0f} MiB "
               f"of {opts.memory / 2**20:,.0f} MiB")

    status(f"mining {len(b):,} transactions into {opts.output}")
    r = mine_to_parquet(b, opts.output, opts.min_support, algorithm=opts.algorithm, min_len=opts.min_len,
                        max_len=opts.max_len, memory=opts.memory, progress=progress)
    del b  # the rules need only the itemset file
    seconds = {"read": round(read_s, 4), "mine+write": round(r["seconds"], 4)}
    n_rules = rules_out = None
    if opts.rules:
        from clusterlab.mining.stream import rules_to_parquet

        rules_out = rules_path(opts)

        def rule_progress(n: int, seconds: float, rss: int) -> None:
            status(f"{n:,} rules written ({n / max(seconds, 1e-9):,.0f}/s), {rss / 2**20:,.0f} MiB "
                   f"of {opts.memory / 2**20:,.0f} MiB")

        status(f"deriving rules from {r['itemsets']:,} itemsets into {rules_out}")
        rr = rules_to_parquet(opts.output, rules_out, min_confidence=opts.min_confidence, min_lift=opts.min_lift,
                              memory=opts.memory, progress=rule_progress, consequents=opts.consequents)
        n_rules = rr["rules"]
        seconds["rules"] = round(rr["seconds"], 4)
    rss = peak_rss()
    return {"file": opts.file, "transactions": r["n_transactions"], "algorithm": r["algorithm"],
            "target": opts.target, "min_support": opts.min_support, "itemsets": r["itemsets"],
            "itemsets_by_length": r["itemsets_by_length"], "rules": n_rules, "seconds": seconds,
            "peak_rss_bytes": rss, "memory_bytes": opts.memory, "row_groups": r["row_groups"],
            "spilled_bytes": r["spilled_bytes"], "runs": r["runs"], "output": opts.output, "rules_output": rules_out}


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
    """Write an itemset or rule table by extension, atomically; a failure (a full disk, ...)
    is one ``ConfigError`` and leaves nothing at ``path``."""
    import pyarrow as pa

    try:
        _write_table(table, path, rules)
    except (OSError, pa.ArrowException) as e:
        detail = e.strerror if isinstance(e, OSError) and e.strerror else str(e).splitlines()[0]
        raise ConfigError(f"cannot write {path}: {detail}") from None


def _write_table(table, path: str, rules: bool) -> None:
    kind = output_kind(path)
    if kind == "spmf":
        from clusterlab.mining.spmf import write_spmf_itemsets, write_spmf_rules

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
    by_length = {int(k): int(v) for k, v in enumerate(lengths) if v}
    n_sets, n_rules = res.itemsets.num_rows, None if res.rules is None else res.rules.num_rows
    st = res.streamed
    if st is not None:  # written by rank 0 as found (--memory): its counts
        n_sets, n_rules = st["itemsets"], st.get("rules")
        by_length = {int(k): int(v) for k, v in st["itemsets_by_length"].items()}
    rss = peak_rss()
    return {
        "file": opts.file, "transactions": res.n_transactions, "algorithm": res.algorithm, "target": opts.target,
        "min_support": opts.min_support, "itemsets": n_sets, "itemsets_by_length": by_length, "rules": n_rules,
        "seconds": {k: round(v, 4) for k, v in res.timings.items()}, "peak_rss_bytes": rss,
        "output": opts.output, "rules_output": rules_path(opts) if res.rules is not None or n_rules is not None else None,
        **({"memory_bytes": opts.memory, "row_groups": st["row_groups"], "spilled_bytes": st["spilled_bytes"],
            "runs": st["runs"]} if st is not None else {}),
        **parallel_memory(res.ranks),
        **({"time_split": time_split(res.passes, res.ranks)} if res.passes is not None else {}),
    }


def time_split(passes: list, ranks: list | None) -> dict:
    """Where a parallel job's time went (``ParallelRun.time_split``)."""
    from clusterlab.mining.parallel.driver import time_split as split

    return split(passes, ranks or [])


def parallel_memory(ranks: list | None) -> dict:
    """Every rank's peak memory and their total (threads of one process: counted once)."""
    if not ranks:
        return {}
    peaks = [int(r["peak_rss_bytes"]) for r in ranks]
    shared = any(r.get("shared_process") for r in ranks)
    return {"ranks_peak_rss_bytes": peaks, "ranks_peak_rss_total_bytes": max(peaks) if shared else sum(peaks),
            "ranks_csr_bytes": [int(r.get("csr_bytes", 0)) for r in ranks]}


def print_summary(s: dict, res: MineResult, console) -> None:
    from rich.table import Table

    t = Table(title=f"{s['itemsets']:,} {s['target']} frequent itemsets of {s['file']}", show_header=False, box=None)
    t.add_row("transactions", f"{s['transactions']:,}")
    t.add_row("algorithm", s["algorithm"])
    t.add_row("by length", "  ".join(f"{k}: {v:,}" for k, v in s["itemsets_by_length"].items()) or "-")
    if s["rules"] is not None:
        t.add_row("rules", f"{s['rules']:,}")
    t.add_row("time", "  ".join(f"{k} {v:.3f}s" for k, v in s["seconds"].items()))
    if "ranks_peak_rss_bytes" in s:
        each = ", ".join(f"{p / 2**20:,.0f}" for p in s["ranks_peak_rss_bytes"])
        csr = ", ".join(f"{c / 2**20:,.0f}" for c in s.get("ranks_csr_bytes", []))
        t.add_row("peak memory", f"{s['ranks_peak_rss_total_bytes'] / 2**20:,.0f} MiB in all ranks (each: {each} MiB "
                                 f"for a share of {csr} MiB as CSR; this process {s['peak_rss_bytes'] / 2**20:,.0f} MiB)")
    if "time_split" in s:
        t.add_row("time split", "  ".join(f"{k[:-2]} {v:.3f}s" for k, v in s["time_split"].items() if v >= 0.0005))
        if "memory_bytes" in s:
            t.add_row("written as found", f"--memory {s['memory_bytes'] / 2**20:,.0f} MiB per rank; {s['row_groups']:,} "
                                          f"row groups by rank 0, {s['spilled_bytes'] / 2**20:,.1f} MiB in {s['runs']:,} "
                                          "sorted runs spilled by the ranks")
    elif "memory_bytes" in s:
        t.add_row("peak memory", f"{s['peak_rss_bytes'] / 2**20:,.0f} MiB (--memory {s['memory_bytes'] / 2**20:,.0f} MiB; "
                                 f"{s['row_groups']:,} row groups in canonical order, {s['spilled_bytes'] / 2**20:,.1f} "
                                 f"MiB in {s['runs']:,} sorted runs spilled)")
    else:
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


def _testbed_name(_ctx, _param, value):
    if value is not None:
        from clusterlab.cluster.testbed.topo import check_name

        check_name(value)
    return value


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--min-support", "-s", default="0.01", show_default=True,
              help="Fraction of transactions (0.01 or 1%), or an absolute count (50).")
@click.option("--algorithm", "-a", type=click.Choice(["auto", "apriori", "fpgrowth", "eclat", "lcm", "hpa", "hpa-eld", "cd", "pfp"]),
              default="auto", show_default=True,
              help="auto: by measurement (see docs/mining.md). hpa|hpa-eld|cd|pfp: parallel (with --nodes).")
@click.option("--target", "-t", type=click.Choice(["all", "closed", "maximal"]), default="all", show_default=True)
@click.option("--min-len", default=1, show_default=True, type=Int(lo=1, hi=1_000_000))
@click.option("--max-len", default=None, type=Int(lo=1, hi=1_000_000), help="Longest itemset to report.")
@click.option("--threads", default=None, type=Int(lo=1, hi=4096), help="Threads (default: all cores).")
@click.option("--format", "input_format", type=click.Choice(FORMATS), help="Input format (default: by extension).")
@click.option("-o", "--output", type=OutputPath(),
              help="Write itemsets to .parquet, .csv or .txt (SPMF '1 3 #SUP: 3').")
@click.option("--rules", is_flag=True, help="Also derive association rules (written beside -o as NAME.rules.EXT).")
@click.option("--min-confidence", default=0.8, show_default=True, type=Finite(lo=0, hi=1))
@click.option("--min-lift", default=None, type=float, callback=parse_min_lift,
              help="Keep rules with at least this lift (a number >= 0).")
@click.option("--consequents", type=click.Choice(["single", "multi"]), default="single", show_default=True,
              help="single: one-item consequents (pyfim/Spark); multi: any (mlxtend).")
@click.option("--rules-output", type=OutputPath(), help="Where to write the rules.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr (also off when stderr is not a terminal).")
@click.option("--memory", default=None, metavar="SIZE", type=Size(keep_text=True, lo=1),
              help="Stream the itemsets into the -o .parquet file as they are found, stopping with an error "
                   "if a process passes SIZE (e.g. 2GB; at least 256MiB, about 512MiB for a million itemsets or more: "
                   "the file's row groups hold 1 Mi of them; a run whose input and first level, or a "
                   "parallel pass whose candidates, cannot fit is refused before it runs, naming what would): the "
                   "result never has to fit in memory. The file is "
                   "the one written without --memory, byte for byte (canonical order). Sequential: one mining "
                   "thread, sorted runs spilled beside -o and merged. With --nodes: SIZE per rank, rank 0 writes. "
                   "All frequent itemsets only. "
                   "With --rules, rules (any --consequents) are derived from that file out of core into "
                   "NAME.rules.parquet.")
@click.option("--nodes", "-n", default=None, type=Int(lo=1, hi=1024),
              help="Parallel: number of ranks on the local cluster (algorithm hpa unless -a names another "
                   "parallel one; CSV and Parquet input too).")
@click.option("--backend", type=click.Choice(MESHES), default="tcp", show_default=True,
              help="Parallel: the Communicator backend.")
@click.option("--block-size", default="8KiB", show_default=True, type=Size(keep_text=True, lo=1, hi=1 << 30), help="Parallel (HPA): message block size.")
@click.option("--partition", type=click.Choice(["prefix", "itemset"]), default="prefix", show_default=True,
              help="Parallel (HPA): candidates owned by their first item's rank (one record per transaction "
                   "and owner), or by a hash of the whole itemset (seed 000: every subset travels).")
@click.option("--testbed", "testbed_name", default=None, metavar="NAME", callback=_testbed_name,
              help="Parallel: run rank i in host i of the namespace testbed NAME (`clusterlab testbed up`; root).")
@click.option("--auto-dilation", is_flag=True,
              help="With --testbed (at dilation 1): when the run fails the fidelity check, replay the recorded job "
                   "(its messages; each rank waits its CPU seconds x k) on a testbed like NAME at the smallest "
                   "dilation k that passes, and diagnose that (docs/diagnose.md).")
@click.option("--max-dilation", default=16.0, show_default=True, type=Finite(lo=1, hi=1e6),
              help="The highest dilation --auto-dilation tries.")
@click.option("--timeout", "job_timeout", default=None, metavar="DURATION",
              type=Duration(keep_text=True, lo=JOB_TIMEOUT_MIN, hi=JOB_TIMEOUT_MAX),
              help="Parallel: the longest the whole job may run, 1s to 168h (e.g. 30min, 12h; default 1h). "
                   "It bounds the job, not each wait: a rank that dies still ends the job within seconds, "
                   "a stuck one after one wait's 120 s. In a launched job (clusterlab run, mpiexec) the "
                   "launcher's limit applies instead.")
def mine(file, min_support, algorithm, target, min_len, max_len, threads, input_format, output, rules,
         min_confidence, min_lift, consequents, rules_output, as_json, quiet, memory, nodes, backend, block_size,
         partition, testbed_name, auto_dilation, max_dilation, job_timeout):
    """Frequent (closed, maximal) itemsets of FILE, optionally with association rules.

    A parallel run (--nodes, --testbed) ends with its fidelity line and the diagnosis in one
    line: the dominant loss, its fix and the predicted gain (--json: "diagnosis"; docs/diagnose.md).

    \b
    Examples:
      clusterlab mine ../shared/data/T10I4D100K.dat --min-support 0.01 -o sets.parquet
      clusterlab mine ../shared/data/chess.dat -s 80% --target closed -o chess.txt
      clusterlab mine baskets.csv -s 0.05 --rules --min-confidence 0.6 -o sets.csv
      clusterlab mine ../shared/data/chess.dat -s 40% -o chess.parquet --memory 2GB   # streamed
      clusterlab mine ../shared/data/chess.dat -s 80% -o c.parquet --memory 1GB --rules   # + c.rules.parquet
      clusterlab mine ../shared/data/chess.dat -s 60% -n 2 -a pfp -o c.parquet --memory 1GB   # 1GB per rank
      clusterlab mine data.dat -s 0.007 --nodes 4 -a hpa            # 4 local ranks (TCP mesh)
      clusterlab mine big.dat -s 0.002 --nodes 4 -o b.parquet --memory 2GB --timeout 12h   # a long job
      clusterlab mine baskets.csv -s 0.05 --nodes 2 -a cd -q        # any input format, no progress
      clusterlab mine data.dat -s 0.007 --nodes 4 -a pfp --testbed lab   # on a namespace testbed
      clusterlab mine data.dat -s 0.007 --nodes 4 --testbed lab --auto-dilation
    """
    if max_len is not None and max_len < min_len:
        raise ConfigError(f"--max-len {max_len} is below --min-len {min_len}")
    if rules and (target != "all" or min_len > 1):
        raise ConfigError("--rules needs all frequent itemsets: drop --target closed/maximal and --min-len")
    opts = MineOptions(file=file, min_support=parse_min_support(min_support), algorithm=algorithm, target=target,
                       min_len=min_len, max_len=max_len, threads=threads, input_format=input_format,
                       output=output, rules=rules, min_confidence=min_confidence, min_lift=min_lift,
                       consequents=consequents, rules_output=rules_output,
                       quiet=quiet or not sys.stderr.isatty())
    if memory is not None:
        from clusterlab.mining.stream import MIN_MEMORY
        from clusterlab.units import parse_size

        try:
            opts.memory = parse_size(memory)
        except ConfigError as e:
            raise ConfigError(f"--memory {memory!r}: {e}") from None
        if opts.memory < MIN_MEMORY:
            raise ConfigError(f"--memory {memory}: give at least {MIN_MEMORY >> 20} MiB (the interpreter and its "
                              "libraries alone take ~170 MB), e.g. --memory 2GB")
        if not output or output_kind(output) != "parquet":
            raise ConfigError("--memory writes the itemsets as they are found: give -o FILE.parquet")
        if target != "all":
            raise ConfigError("--memory streams all frequent itemsets: drop --target (closed/maximal sets are "
                              "judged against all of them)")
        if rules and output_kind(rules_path(opts)) != "parquet":
            raise ConfigError("--memory writes the rules as they are found: give --rules-output FILE.parquet")
    if nodes is not None or algorithm in PARALLEL_ALGORITHMS or testbed_name:  # parallel options
        from clusterlab.units import parse_size

        parallel_algorithm(algorithm)
        opts.nodes, opts.backend, opts.block_size = nodes, backend, parse_size(block_size)
        opts.partition = partition
        opts.testbed = testbed_name
        opts.timeout = job_timeout
        if testbed_name and nodes is None:
            opts.nodes = 1
    if job_timeout is not None:
        from clusterlab.mining.parallel import launched_job

        if launched_job() is not None:
            raise ConfigError("--timeout: this mine runs as ranks of a launched job, which its launcher bounds "
                              "(clusterlab run --timeout): drop it")
        if opts.timeout is None:
            raise ConfigError(f"--timeout {job_timeout} bounds a parallel job: give --nodes (or --testbed), "
                              "or drop it")
    if auto_dilation:
        from clusterlab.diagnose.dilation import check_mine, ladder_limit

        check_mine(testbed_name, backend)
        from clusterlab.cluster.testbed import TestbedNetwork

        tb = TestbedNetwork.attach(testbed_name)
        check_mine(testbed_name, backend, float(tb.topo.dilation))
        ladder_limit(tb.transport, float(tb.topo.dilation), max_dilation)
    elif max_dilation != 16.0:
        raise ConfigError("--max-dilation goes with --auto-dilation")
    # Check the outputs before the (possibly long) run: names, and that they can be written.
    outputs = [p for p in (opts.output, rules_path(opts) if opts.rules else None) if p]
    for p in outputs:
        output_kind(p)
    if opts.output and (opts.nodes is not None or opts.algorithm in PARALLEL_ALGORITHMS):
        outputs.append(passes_path(opts.output))
    from clusterlab._atomic import check_writable

    for p in outputs:
        check_writable(p)
    from rich.console import Console

    console = Console(stderr=as_json)
    from clusterlab.mining.parallel import launched_job

    parallel = opts.nodes is not None or opts.algorithm in PARALLEL_ALGORITHMS or launched_job() is not None
    if opts.memory is not None and not parallel:
        if opts.quiet:
            s = run_streamed(opts, lambda _t: None)
        else:
            with Console(stderr=True).status(Elapsed("starting")) as st:
                s = run_streamed(opts, lambda text: st.update(Elapsed(text)))
        s["options"] = {k: v for k, v in asdict(opts).items() if k not in ("file", "record")}
        if as_json:
            click.echo(json.dumps(s, indent=2))
        else:
            print_summary(s, None, console)
        return
    if auto_dilation:
        import tempfile

        rec_tmp = tempfile.TemporaryDirectory(prefix="clusterlab-record-")
        opts.record = os.path.join(rec_tmp.name, "job")
    if opts.quiet or parallel:
        res = run(opts)  # parallel runs report each pass as it completes (rank 0, on stderr)
    else:
        with Console(stderr=True).status(Elapsed("starting")) as st:
            res = run(opts, lambda text: st.update(Elapsed(text)))
    if res is None:
        return
    t1 = time.perf_counter()
    if opts.output and res.streamed is None:
        write_table(res.itemsets, opts.output)
    if res.rules is not None and rules_path(opts):
        write_table(res.rules, rules_path(opts), rules=True)
    if (opts.output and res.streamed is None) or res.rules is not None:
        res.timings["write"] = time.perf_counter() - t1
    s = summary(res, opts)
    s["options"] = {k: v for k, v in asdict(opts).items() if k not in ("file", "record")}
    if res.passes is not None:  # parallel: per-pass statistics, printed and saved
        s["passes"] = res.passes
        s["ranks"] = res.ranks
        facts = dict(res.facts or {})
        if "machine" in facts:
            s["options"]["machine"] = facts.pop("machine")
        s.update(facts)  # cluster, transport, cpu_spare: what `clusterlab diagnose` of this summary reads
        if opts.output:
            from clusterlab._atomic import atomic_open

            try:
                with atomic_open(passes_path(opts.output)) as f:
                    json.dump(res.passes, f, indent=1)
            except OSError as e:
                raise ConfigError(f"cannot write {passes_path(opts.output)}: {e.strerror or e}") from None
    diagnosis = None
    if res.passes is not None:  # parallel: the run's fidelity and what removes its loss
        from clusterlab.diagnose import diagnose_summary

        diagnosis = diagnose_summary(s)
    auto = None
    if auto_dilation and diagnosis is not None:  # the real run is the ladder's first rung, replays above it
        from clusterlab.diagnose.dilation import mine_auto_dilation, record

        try:
            auto = mine_auto_dilation(s, diagnosis["jobs"][0]["fidelity"], opts.record, tb, max_dilation)
        finally:
            rec_tmp.cleanup()
        kept = auto["result"]
        s["auto_dilation"] = {**record(auto, auto["limit"]),
                              "kept_run": "real" if kept is s else "replay",
                              **({"replay": {"job_s": kept["seconds"]["job"], "passes": kept["passes"],
                                             **kept["replay"]}} if kept is not s else {})}
        if kept is not s:
            diagnosis = diagnose_summary(kept)
    if as_json:
        click.echo(json.dumps({**s, "diagnosis": diagnosis["jobs"][0]} if diagnosis else s, indent=2))
    else:
        print_summary(s, res, console)
        if res.passes is not None:
            from clusterlab.report.mining_tables import format_passes, format_ranks

            click.echo(format_passes(res.passes))
            click.echo(format_ranks(res.ranks))
        if res.rules is not None and not rules_path(opts):
            console.print(f"{res.rules.num_rows:,} rules (write them with -o or --rules-output)")
        if auto is not None:
            from clusterlab.diagnose.dilation import attempt_lines

            click.echo("\n".join(attempt_lines(auto, auto["limit"])))
            if auto["result"] is not s:
                k = auto["dilation"]
                click.echo(f"auto-dilation: the kept run replays the recorded job at dilation {k:g} (each rank waits "
                           f"its CPU seconds x {k:g}): job {auto['result']['seconds']['job']:.4f} s undilated, the "
                           f"real run's {s['seconds'].get('job', float('nan')):.4f} s; the diagnosis below is the replay's")
        if diagnosis is not None:  # the last lines: the fidelity line and the diagnosis in one line
            from clusterlab.diagnose.report_section import closing_lines

            click.echo("\n".join(closing_lines(diagnosis)))
