"""Parallel frequent-itemset mining: the driver shared by HPA, HPA-ELD, Count Distribution and PFP.

Each rank reads only its own byte range of the input (``clusterlab.data.read_partition``) or
its own partition file (a path containing ``{rank}``), runs the algorithm against the
``Communicator`` interface, and rank 0 returns the frequent itemsets as the same Arrow table
the sequential engine returns (byte-identical), plus per-pass statistics.

>>> import tempfile, os
>>> p = os.path.join(tempfile.mkdtemp(), "b.dat")
>>> _ = open(p, "w").write("1 2 3\\n1 2\\n2 3\\n1 2 3\\n4\\n")
>>> table, passes = mine_parallel(p, nodes=3, algorithm="hpa", min_support=2, backend="inproc")
>>> [(r["items"], r["count"]) for r in table.to_pylist()]
[([1], 3), ([2], 4), ([3], 3), ([1, 2], 3), ([1, 3], 2), ([2, 3], 3), ([1, 2, 3], 2)]
>>> [(s["pass"], s["candidates"], s["large"]) for s in passes]
[(1, 4, 3), (2, 3, 3), (3, 1, 1)]
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

import numpy as np

from clusterlab.errors import ConfigError

ALGORITHMS = ("hpa", "hpa-eld", "cd", "pfp")
BACKENDS = ("tcp", "mpi", "inproc")

# Per-pass fields every rank records (floats, so the stats travel as one numpy array).
STAT_FIELDS = ("pass", "candidates", "large", "t_total", "t_generate", "t_scan", "t_route", "t_send",
               "t_recv", "t_wait", "t_count", "t_sync", "bytes_sent", "messages_sent", "itemsets_sent", "subsets",
               "retransmissions", "timeouts")


@dataclasses.dataclass
class ParallelConfig:
    """Settings of a parallel run (defaults follow seed 000: 8 KB message blocks, 64 KB reads).

    ``block_bytes``: size of a message block of routed k-itemsets. ``read_block_bytes``: the
    scan proceeds over the in-memory partition in read blocks of about this many item bytes;
    after each one the blocks that filled up are sent. ``prune``: full Apriori prune at the
    sender (less traffic). ``eld_max``: HPA-ELD replicates at most this many candidates per
    pass (those made only of the most frequent items). ``max_len``: longest itemset (0: none).
    ``partition``: how HPA spreads candidates over ranks: ``"prefix"`` (default; a candidate
    belongs to the owner of its first item, first items are dealt out by estimated work, and a
    transaction travels once per owner as one record) or ``"itemset"`` (seed 000's hash of the
    whole itemset; every subset travels on its own). HPA-ELD always uses ``"itemset"``.
    """

    block_bytes: int = 8192
    read_block_bytes: int = 65536
    prune: bool = True
    eld_max: int = 20000
    max_len: int = 0
    timeout: float = 120.0
    partition: str = "prefix"

    def check(self) -> None:
        if self.partition not in ("prefix", "itemset"):
            raise ConfigError(f"partition must be 'prefix' or 'itemset', got {self.partition!r}")
        if self.block_bytes < 16:
            raise ConfigError(f"block_bytes must be at least 16, got {self.block_bytes}")
        if self.read_block_bytes < 64:
            raise ConfigError(f"read_block_bytes must be at least 64, got {self.read_block_bytes}")
        if self.eld_max < 0 or self.max_len < 0:
            raise ConfigError("eld_max and max_len must be non-negative")
        if not self.timeout > 0:
            raise ConfigError(f"timeout must be positive, got {self.timeout}")


def min_count_of(min_support, n_transactions: int) -> int:
    """Absolute minimum count, exactly as the sequential engine computes it (a fraction below 1
    is rounded up, a number >= 1 is a count).

    >>> min_count_of(0.007, 1000), min_count_of(5, 10), min_count_of(0.5, 3)
    (7, 5, 2)
    """
    from clusterlab.mining.sequential import min_count_of as sequential_min_count

    return sequential_min_count(min_support, n_transactions)


class PassStats:
    """One rank's statistics, one row per pass."""

    def __init__(self, comm):
        self.comm = comm
        self.rows: list[dict[str, float]] = []
        self._base = self._comm_counters()

    def _comm_counters(self) -> dict[str, float]:
        return comm_counters(self.comm)

    def start(self, k: int) -> dict[str, float]:
        row = {f: 0.0 for f in STAT_FIELDS}
        row["pass"] = k
        row["_t0"] = time.perf_counter()
        self._base = self._comm_counters()
        return row

    def end(self, row: dict[str, float]) -> None:
        row["t_total"] = time.perf_counter() - row.pop("_t0")
        now = self._comm_counters()
        for f in ("bytes_sent", "messages_sent", "retransmissions", "timeouts"):
            row[f] = now[f] - self._base[f]
        self.rows.append(row)

    def as_array(self) -> np.ndarray:
        return np.array([[r[f] for f in STAT_FIELDS] for r in self.rows], dtype=np.float64).reshape(-1, len(STAT_FIELDS))


def comm_counters(comm) -> dict[str, float]:
    """Bytes and messages sent, TCP retransmissions and timeouts (RTOs) from ``comm.stats()``.
    Backends that do not know a counter report 0 for it."""
    try:
        s = comm.stats() or {}
    except Exception:  # noqa: BLE001 - statistics must never break a run
        s = {}
    out = {"bytes_sent": float(s.get("bytes_sent", 0)), "messages_sent": float(s.get("messages_sent", s.get("msgs_sent", 0))),
           "retransmissions": 0.0, "timeouts": 0.0}
    for key_out, keys in (("retransmissions", ("total_retrans", "tcpi_total_retrans", "retransmissions")),
                          ("timeouts", ("total_rto", "tcpi_total_rto", "timeouts", "rto_timeouts"))):
        out[key_out] = float(_sum_keys(s, keys))
    return out


def _sum_keys(obj: Any, keys: tuple[str, ...]) -> float:
    """Sum of the values under any of ``keys`` anywhere in a nested dict/list (TCP_INFO per peer)."""
    total = 0.0
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in keys and isinstance(v, (int, float)):
                total += v
            elif isinstance(v, (dict, list, tuple)):
                total += _sum_keys(v, keys)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            total += _sum_keys(v, keys)
    return total


def read_rank_baskets(path, rank: int, size: int):
    """This rank's transactions: its byte range of ``path``, or the whole file
    ``path.format(rank=rank)`` when the path holds ``{rank}`` (one partition file per rank)."""
    from clusterlab.data import read_partition
    from clusterlab.data.io import read_fimi

    p = os.fspath(path)
    if "{rank}" in p:
        return read_fimi(p.format(rank=rank))
    return read_partition(p, rank, size)


def global_item_counts(comm, items: np.ndarray) -> np.ndarray:
    """Support of every item over all ranks (one allreduce of the max id, one of the counts)."""
    top = np.array([int(items.max()) + 1 if items.size else 0], dtype=np.int64)
    bound = int(comm.allreduce(top, "max")[0]) if comm.size > 1 else int(top[0])
    local = np.bincount(items, minlength=bound).astype(np.int64) if bound else np.zeros(0, np.int64)
    return comm.allreduce(local, "sum") if comm.size > 1 else local


def run_rank(comm, path, algorithm: str, min_support, config: ParallelConfig | None = None):
    """What one rank runs. Returns ``(table, pass_stats)`` on rank 0, ``(None, None)`` elsewhere.

    ``table``: the frequent itemsets (as ``clusterlab.mine`` returns them); ``pass_stats``: one
    dict per pass with the sum over ranks of bytes/messages/itemsets sent, retransmissions and
    timeouts, and the maximum over ranks of each time (seconds).
    """
    from clusterlab.mining import count_distribution, hpa, pfp

    config = config or ParallelConfig()
    config.check()
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"unknown parallel algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
    if comm.size > 1:
        # Start every rank's job clock together: process launch and mesh set-up skew is wall
        # time (``wall_s``), not the job's (it showed up as 0.1-0.4 s of pass 1's t_sync).
        comm.barrier()
    t0 = time.perf_counter()
    baskets = read_rank_baskets(path, comm.rank, comm.size)
    t_read = time.perf_counter() - t0
    stats = PassStats(comm)
    fn = {"hpa": hpa.hpa, "hpa-eld": hpa.hpa, "cd": count_distribution.count_distribution, "pfp": pfp.pfp}[algorithm]
    kw = {"eld": algorithm == "hpa-eld"} if algorithm.startswith("hpa") else {}
    offsets, items, counts, n_tx = fn(comm, baskets, min_support, config, stats, **kw)
    # Every rank's pass statistics to rank 0 (arrays: nothing but numbers on the wire).
    mine = stats.as_array()
    rows = comm.gather(mine.ravel(), root=0) if comm.size > 1 else [mine.ravel()]
    if comm.rank != 0:
        return None, None
    table = itemsets_table(offsets, items, counts, n_tx, algorithm, min_count_of(min_support, n_tx),
                           config.max_len or None)
    per_rank = [r.reshape(-1, len(STAT_FIELDS)) for r in rows]
    passes = summarize_passes(per_rank)
    if passes:
        passes[0]["t_read"] = t_read
    return table, passes


def summarize_passes(per_rank: list[np.ndarray]) -> list[dict]:
    """Combine ranks: counts and bytes summed, times the slowest rank's, candidates and large
    itemsets as recorded (already global)."""
    n = max((a.shape[0] for a in per_rank), default=0)
    out = []
    for i in range(n):
        rows = [a[i] for a in per_rank if a.shape[0] > i]
        d: dict[str, Any] = {}
        for j, f in enumerate(STAT_FIELDS):
            vals = [r[j] for r in rows]
            if f.startswith("t_"):
                d[f] = float(max(vals))
            elif f in ("pass", "candidates", "large"):
                d[f] = int(vals[0])
            else:
                d[f] = int(sum(vals))
        out.append(d)
    return out


def itemsets_table(offsets: np.ndarray, items: np.ndarray, counts: np.ndarray, n_transactions: int,
                   algorithm: str = "hpa", min_count: int | None = None, max_len: int | None = None):
    """The result table built exactly as the sequential engine builds it
    (``clusterlab.mining.result.itemset_table``; canonical order assumed), so the columns are
    byte-identical; the metadata names the parallel algorithm."""
    from clusterlab.mining.result import itemset_table

    return itemset_table(offsets, items, counts, n_transactions, None, min_count=min_count, target="all",
                         min_len=1, max_len=max_len, algorithm=algorithm)


def mine_parallel(path, nodes: int = 2, algorithm: str = "hpa", min_support=0.01, backend: str = "tcp",
                  config: ParallelConfig | None = None, transport=None, testbed: str | None = None,
                  **backend_options):
    """Mine ``path`` on ``nodes`` local ranks; returns ``(table, pass_stats)`` (see ``run_rank``).

    ``backend``: ``tcp`` (clusterlab's mesh, one process per rank, the default), ``mpi``
    (processes under MPI), or ``inproc`` (threads of this process: for tests; kernels release
    the GIL so it still runs in parallel). ``transport``: a ``TransportConfig`` for the TCP
    mesh (socket buffers, RTO min/max and their per-rank jitter). ``testbed``: the name of a
    namespace testbed that is up (``clusterlab testbed up``); rank i then runs in its host i
    over the TCP mesh.
    """
    if nodes < 1:
        raise ConfigError(f"nodes must be at least 1, got {nodes}")
    if backend not in BACKENDS:
        raise ConfigError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if not os.path.exists(os.fspath(path).replace("{rank}", "0")):
        raise ConfigError(f"{path}: no such file")
    config = config or ParallelConfig()
    config.check()
    min_count_of(min_support, 1)  # a bad min_support fails here, not in every rank
    if backend == "inproc":
        from clusterlab.comm.inproc import run_threads

        results = run_threads(run_rank, nodes, path, algorithm, min_support, config, timeout=config.timeout)
        return results[0]
    from clusterlab.cluster.local import run

    backend_options.setdefault("timeout", config.timeout + 30)
    if transport is not None:
        backend_options["config"] = transport
    if testbed is not None:
        if backend != "tcp":
            raise ConfigError("a testbed runs ranks over the TCP mesh: use backend tcp")
        from clusterlab.cluster.testbed import Testbed

        results = Testbed.attach(testbed).run(_rank_job, nodes, os.fspath(path), algorithm, min_support,
                                              dataclasses.asdict(config), **backend_options)
        return decode_result(results[0])
    results = run(_rank_job, nodes, os.fspath(path), algorithm, min_support, dataclasses.asdict(config),
                  backend=backend, **backend_options)
    return decode_result(results[0])


def _rank_job(comm, path, algorithm, min_support, config: dict):
    """Module-level entry for launched ranks (arguments arrive as JSON): rank 0 returns the
    result as Arrow IPC bytes (nothing is pickled), the others None."""
    table, passes = run_rank(comm, path, algorithm, min_support, ParallelConfig(**config))
    return None if table is None else encode_result(table, passes)


_PASSES_KEY = b"clusterlab.passes"


def encode_result(table, passes: list[dict]) -> bytes:
    """``(table, passes)`` as one Arrow IPC stream (the passes as JSON in the schema metadata)."""
    import json

    import pyarrow as pa

    meta = dict(table.schema.metadata or {})
    meta[_PASSES_KEY] = json.dumps(passes).encode()
    sink = pa.BufferOutputStream()
    t = table.replace_schema_metadata(meta)
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    return sink.getvalue().to_pybytes()


def decode_result(data: bytes):
    """Inverse of ``encode_result``: the table exactly as rank 0 built it, and the passes."""
    import json

    import pyarrow as pa

    t = pa.ipc.open_stream(data).read_all()
    meta = dict(t.schema.metadata or {})
    passes = json.loads(meta.pop(_PASSES_KEY, b"[]"))
    return t.replace_schema_metadata(meta or None), passes


def format_passes(passes: list[dict]) -> str:
    """The per-pass summary as a fixed-width table.

    >>> print(format_passes([{"pass": 1, "candidates": 5, "large": 3, "t_total": 0.01, "bytes_sent": 2048,
    ...                       "messages_sent": 2, "retransmissions": 0, "timeouts": 0}]))  # doctest: +NORMALIZE_WHITESPACE
    pass candidates  large  time_s gen_s scan_s route_s send_s count_s sync_s  KB_sent  msgs retrans  rto
       1          5      3   0.010 0.000  0.000   0.000  0.000   0.000  0.000      2.0     2       0    0
    """
    head = (f"{'pass':>4} {'candidates':>10} {'large':>6} {'time_s':>7} {'gen_s':>5} {'scan_s':>6} {'route_s':>7} "
            f"{'send_s':>6} {'count_s':>7} {'sync_s':>6} {'KB_sent':>8} {'msgs':>5} {'retrans':>7} {'rto':>4}")
    lines = [head]
    for p in passes:
        g = p.get
        lines.append(f"{g('pass', 0):>4} {g('candidates', 0):>10} {g('large', 0):>6} {g('t_total', 0):>7.3f} "
                     f"{g('t_generate', 0):>5.3f} {g('t_scan', 0):>6.3f} {g('t_route', 0):>7.3f} {g('t_send', 0):>6.3f} "
                     f"{g('t_count', 0):>7.3f} {g('t_sync', 0):>6.3f} {g('bytes_sent', 0) / 1024:>8.1f} "
                     f"{g('messages_sent', 0):>5} {g('retransmissions', 0):>7} {g('timeouts', 0):>4}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run as a program on ranks started by someone else (``mpiexec -n 4 python -m
    clusterlab.mining.parallel FILE ...`` or ``clusterlab run -n 4 -- ...``): every rank joins
    ``clusterlab.comm.world()``, rank 0 writes the itemsets (Parquet) and prints the passes."""
    import argparse

    from clusterlab.comm.world import world

    ap = argparse.ArgumentParser(prog="python -m clusterlab.mining.parallel", description=main.__doc__)
    ap.add_argument("file")
    ap.add_argument("--algorithm", default="hpa", choices=ALGORITHMS)
    ap.add_argument("--min-support", type=float, default=0.01)
    ap.add_argument("--block-bytes", type=int, default=8192)
    ap.add_argument("-o", "--output", help="Parquet file for the itemsets (rank 0).")
    a = ap.parse_args(argv)
    min_support = int(a.min_support) if a.min_support >= 1 else a.min_support
    comm = world()
    table, passes = run_rank(comm, a.file, a.algorithm, min_support, ParallelConfig(block_bytes=a.block_bytes))
    if comm.rank == 0:
        if a.output:
            import pyarrow.parquet as pq

            from clusterlab._atomic import atomic_path

            with atomic_path(a.output) as tmp:
                pq.write_table(table, tmp)
        print(f"{table.num_rows} frequent itemsets ({a.algorithm} on {comm.size} ranks)")
        print(format_passes(passes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
