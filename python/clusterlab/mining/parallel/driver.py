"""The parallel miners' driver: the algorithm registry, what one rank runs (read its share,
mine, report), and running the ranks on a ``clusterlab.cluster.Cluster`` (local processes, MPI, a
namespace testbed, threads, or the job this process is in).

Each rank reads only its own share of the input (``clusterlab.data.read_partition``): its
byte range of a FIMI file (from the partition index of ``gen --partitions`` when there is
one), its slice of the transactions of CSV and Parquet, or its own file when the path holds
``{rank}``. Rank 0 returns the frequent itemsets as the same Arrow table the
sequential engine returns (byte-identical), plus per-pass and per-rank statistics.
"""

from __future__ import annotations

import dataclasses
import os
import stat
import sys
import time

import numpy as np

from clusterlab.comm.places import Launched, started_as_rank
from clusterlab.errors import ClusterlabError, ConfigError
from clusterlab.mining.parallel import cd, hpa, hpa_eld, pfp
from clusterlab.mining.parallel.config import ParallelConfig
from clusterlab.mining.parallel.passes import STAT_FIELDS, PassStats, as_array, attribute_time
from clusterlab.mining.parallel.reading import read_fimi_compact
from clusterlab.mining.parallel.trace import (
    COMPUTE_MODES,
    TracedComm,
    compute_owed,
    recorded_size,
    replay_rank,
)
from clusterlab.mining.parallel.wire import decode_result, encode_result, error_from_record, error_record
from clusterlab.mining.sequential import min_count_of

# name -> the rank function ``mine(comm, baskets, min_support, config, stats)``, which returns
# (offsets, items, counts, n_transactions) of all frequent itemsets on rank 0 at least.
REGISTRY = {"hpa": hpa.mine, "hpa-eld": hpa_eld.mine, "cd": cd.mine, "pfp": pfp.mine}
ALGORITHMS = tuple(REGISTRY)
RESCANNING = ("hpa", "hpa-eld")  # the algorithms with ParallelConfig.rescan
RANK_PATTERN = "{rank}"
# Per-rank figures gathered at the end of a job (besides the per-pass rows).
RANK_FIELDS = ("peak_rss_bytes", "read_s", "cpu_s", "job_s", "csr_bytes")
# The parts of a job's time (``time_split``): read, then per pass (summed over passes, each
# the slowest rank's).
SPLIT_FIELDS = ("t_scan", "t_generate", "t_route", "t_send", "t_recv", "t_wait", "t_count", "t_sync")


@dataclasses.dataclass
class ParallelRun:
    """What a parallel run gives: the itemsets (rank 0; None on other ranks of a launched job),
    one dict per pass (times: the slowest rank's; counts and bytes: summed over ranks; each
    rank's own row under ``"ranks"``), one dict per rank (``peak_rss_bytes``, ``read_s``,
    ``cpu_s``, ``job_s``; ``shared_process`` when the ranks were threads of one process), the
    job time (slowest rank, read to result) and the wall time (launch included)."""

    table: object
    passes: list
    ranks: list
    algorithm: str
    nodes: int
    where: str
    job_s: float = 0.0
    wall_s: float = 0.0
    streamed: dict | None = None  # run with output=: what rank 0 wrote (``outofcore.RankOutput.close``)

    @property
    def time_split(self) -> dict:
        """Where the job's time went: ``read_s`` (the slowest rank's read of its share), then
        each part of the passes summed over passes (``scan_s``, ``generate_s``, ``route_s``,
        ``send_s``, ``recv_s``, ``wait_s``, ``count_s``, ``sync_s``: per pass the slowest
        rank's; ``count_s`` overlaps routing and sending where a counter thread runs)."""
        return time_split(self.passes, self.ranks)

    @property
    def peak_rss_total(self) -> int:
        """Sum of the ranks' peak memory (the process's once when ranks share it)."""
        if any(r.get("shared_process") for r in self.ranks):
            return max((int(r["peak_rss_bytes"]) for r in self.ranks), default=0)
        return sum(int(r["peak_rss_bytes"]) for r in self.ranks)


def time_split(passes: list, ranks: list) -> dict:
    """``ParallelRun.time_split`` of per-pass rows and per-rank rows.

    >>> time_split([{"t_count": 0.5, "t_sync": 0.1}, {"t_count": 0.25}], [{"read_s": 1.0}, {"read_s": 1.5}])["count_s"]
    0.75
    """
    out = {"read_s": max((float(r.get("read_s", 0.0)) for r in ranks or []), default=0.0)}
    for f in SPLIT_FIELDS:
        out[f[2:] + "_s"] = float(sum(p.get(f, 0.0) for p in passes or []))
    return out


def is_rank_pattern(path) -> bool:
    """Whether ``path`` names one file per rank (holds ``{rank}`` and is not itself a file)."""
    p = os.fspath(path)
    return RANK_PATTERN in p and not os.path.isfile(p)


def rank_file(path, rank: int) -> str:
    """Rank ``rank``'s file of a per-rank pattern (only ``{rank}`` is replaced, so other
    braces in the path are kept as they are)."""
    return os.fspath(path).replace(RANK_PATTERN, str(rank))


def input_format(path, format: str | None = None) -> str:
    """The basket format of ``path`` (``format`` if given, else by extension)."""
    from clusterlab.data.io import detect_format

    return detect_format(rank_file(path, 0) if is_rank_pattern(path) else path, format)


def check_input(path, nodes: int, format: str | None = None) -> str:
    """Refuse, before any rank starts, an input the ranks cannot share; returns its format."""
    if str(path).startswith(("iscsi://", "lunfile://")):  # a LUN layout (clusterlab.storage.source)
        from clusterlab.storage.source import check_url
        return check_url(str(path), nodes)
    fmt = input_format(path, format)
    files = [rank_file(path, r) for r in range(nodes)] if is_rank_pattern(path) else [os.fspath(path)]
    if len(files) > 1 and fmt != "fimi":
        raise ConfigError(f"{path}: per-rank partition files must be FIMI (.dat); give CSV or Parquet as one file")
    for f in files:
        try:
            st = os.stat(f)
        except FileNotFoundError:
            raise ConfigError(f"{f}: no such file") from None
        except OSError as e:
            raise ConfigError(f"{f}: cannot read: {e.strerror or e}") from None
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{f}: not a regular file; parallel ranks each read their own part of it, "
                              "so copy it to a file first")
    return fmt


def check_algorithm(algorithm: str, config: ParallelConfig) -> None:
    """Refuse an unknown algorithm, or a setting it does not have (``rescan``: HPA's only)."""
    if algorithm not in REGISTRY:
        raise ConfigError(f"unknown parallel algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
    if config.rescan and algorithm not in RESCANNING:
        raise ConfigError(f"rescan is an option of {' and '.join(RESCANNING)}, not of {algorithm}")


def read_rank_baskets(path, rank: int, size: int, format: str | None = None):
    """This rank's transactions: its own file for a ``{rank}`` pattern, else its share from
    ``clusterlab.data.read_partition`` (a FIMI byte range, from the partition index of
    ``gen --partitions`` when there is one; a slice of the transactions of CSV and Parquet,
    numbered with the whole file's item dictionary)."""
    from clusterlab.data import read_partition
    from clusterlab.data.partition import fimi_range

    if is_rank_pattern(path):
        return read_fimi_compact(rank_file(path, rank))
    if str(path).startswith(("iscsi://", "lunfile://")):  # a LUN layout (clusterlab.storage.source)
        from clusterlab.storage.source import read_rank_baskets as read_lun
        return read_lun(str(path), rank, size)
    if input_format(path, format) == "fimi":
        # Slice by slice into one CSR: the rank's peak memory stays about its CSR share.
        return read_fimi_compact(os.fspath(path), *fimi_range(os.fspath(path), rank, size))
    return read_partition(os.fspath(path), rank, size, format=format)


def read_agreed(comm, path, format: str | None = None):
    """Read this rank's share; if any rank's input is bad, every rank raises the lowest such
    rank's error (so a launched job ends with that one error, not one traceback per rank)."""
    err = None
    try:
        baskets = read_rank_baskets(path, comm.rank, comm.size, format)
    except ClusterlabError as e:
        baskets, err = None, e
    if comm.size > 1:
        import json

        mine = json.dumps(error_record(err)).encode() if err is not None else b""
        for blob in comm.allgather(np.frombuffer(mine, dtype=np.uint8)):
            blob = as_array(blob, np.uint8)
            if blob.size:
                agreed = error_from_record(json.loads(blob.tobytes()))
                agreed.agreed_by_ranks = True
                raise agreed
    elif err is not None:
        err.agreed_by_ranks = True
        raise err
    return baskets


def summarize_passes(per_rank: list[np.ndarray]) -> list[dict]:
    """Combine ranks: counts and bytes summed, times the slowest rank's, candidates and large
    itemsets as recorded (already global); each rank's own row under ``"ranks"``, with its
    communication time split into transfer (``t_transfer``) and RTO waiting (``t_rto``, see
    ``passes.attribute_time``)."""
    n = max((a.shape[0] for a in per_rank), default=0)
    nf, size = len(STAT_FIELDS), len(per_rank)
    out = []
    for i in range(n):
        present = [r for r, a in enumerate(per_rank) if a.shape[0] > i]
        rows = [per_rank[r][i] for r in present]
        peer = np.zeros((size, size))
        for r in present:
            peer[r, :] = per_rank[r][i][nf:nf + size]
        col = {f: np.array([row[j] for row in rows]) for j, f in enumerate(STAT_FIELDS)}
        t_rto = attribute_time(col["t_total"], col["t_comm"], peer[np.ix_(present, present)])
        d: dict = {}
        for f in STAT_FIELDS:
            vals = col[f]
            if f.startswith("t_") or f == "cpu_s":
                d[f] = float(vals.max())
            elif f in ("pass", "candidates", "large"):
                d[f] = int(vals[0])
            else:
                d[f] = int(vals.sum())
        ranks = []
        for k, r in enumerate(present):
            rd = {f: (float(col[f][k]) if f.startswith("t_") or f == "cpu_s" else int(col[f][k])) for f in STAT_FIELDS}
            rd["rank"], rd["t_rto"] = r, float(t_rto[k])
            rd["t_transfer"] = max(0.0, rd["t_comm"] - rd["t_rto"])
            ranks.append(rd)
        d["t_rto"] = max(x["t_rto"] for x in ranks)
        d["t_transfer"] = max(x["t_transfer"] for x in ranks)
        # Cores the ranks kept busy on average in this pass: with every rank on this machine,
        # a pass that kept (nearly) all of its cores busy was limited by CPU, not by the network.
        d["cpu_cores_busy"] = float(col["cpu_s"].sum() / d["t_total"]) if d["t_total"] > 0 else 0.0
        d["ranks"] = ranks
        out.append(d)
    return out


def itemsets_table(offsets: np.ndarray, items: np.ndarray, counts: np.ndarray, n_transactions: int,
                   algorithm: str = "hpa", min_count: int | None = None, max_len: int | None = None, labels=None):
    """The result table built exactly as the sequential engine builds it
    (``clusterlab.mining.result.itemset_table``; canonical order assumed), so the columns are
    byte-identical; the metadata names the parallel algorithm."""
    from clusterlab.mining.result import itemset_table

    return itemset_table(offsets, items, counts, n_transactions, labels, min_count=min_count, target="all",
                         min_len=1, max_len=max_len, algorithm=algorithm)


def _progress_line(row: dict) -> None:
    sys.stderr.write(f"pass {int(row['pass'])}: {int(row['candidates']):,} candidates, {int(row['large']):,} large, "
                     f"{row['t_total']:.2f} s\n")
    sys.stderr.flush()


def warm_up() -> None:
    """What the interpreter does once per process on first use, done before the job's clock
    starts, as launching is: numpy's first ``unique`` costs ~13 ms of CPU (lazy imports), which
    every rank pays once, so a job of many small ranks counted it as computation that does not
    shrink with the ranks (and a replay at a slower CPU's scale multiplied it)."""
    np.unique(np.zeros(2, dtype=np.uint32))


def rank_run(comm, path, algorithm: str, min_support, config: ParallelConfig | None = None,
             format: str | None = None, shared_process: bool = False, record: str | None = None,
             output: str | None = None, memory: int | None = None):
    """What one rank runs. Returns ``(table, passes, ranks)`` on rank 0 and ``(None, None,
    None)`` elsewhere (see ``ParallelRun`` for the fields). ``record``: a directory where every
    rank writes the log of its computation gaps and messages, for ``replay_parallel``.
    ``output``: rank 0 writes the itemsets to this Parquet file as they are found and each
    rank keeps within ``memory`` bytes (``outofcore``); the table is then empty and its
    metadata carries the summary under ``STREAMED_KEY``."""
    config = config or ParallelConfig()
    config.check()
    check_algorithm(algorithm, config)
    warm_up()
    if comm.size > 1:
        # Start every rank's job clock together: process launch and mesh set-up skew is wall
        # time, not the job's (it showed up as 0.1-0.4 s of pass 1's t_sync).
        comm.barrier()
    t0, cpu0 = time.perf_counter(), time.process_time()
    traced = TracedComm(comm, record=record is not None)
    baskets = read_agreed(traced, path, format)
    t_read = time.perf_counter() - t0
    csr_bytes = baskets.offsets.nbytes + baskets.items.nbytes  # this rank's share as read
    stats = PassStats(traced, on_pass=_progress_line if config.progress and comm.rank == 0 else None)
    extra = {}
    if config.rescan:  # HPA reads its share again every pass (seed 000/001), through this reader
        extra["rescan"] = lambda: read_rank_baskets(path, comm.rank, comm.size, format)
    labels = baskets.labels
    out = None
    if output is not None:
        from clusterlab.mining.parallel.outofcore import RankOutput

        out = extra["out"] = RankOutput(traced, output, memory, labels, algorithm, config.max_len or None,
                                        config.timeout, shared_process)
    try:
        offsets, items, counts, n_tx = REGISTRY[algorithm](traced, baskets, min_support, config, stats, **extra)
        del baskets
        streamed = out.close() if out is not None else None
    except BaseException as e:
        if out is not None:
            out.abort(e)
        raise
    from clusterlab.mining.stream import peak_rss  # this image's own peak, not its launcher's

    me = np.array([peak_rss(), t_read, time.process_time() - cpu0, time.perf_counter() - t0, csr_bytes],
                  dtype=np.float64)
    if record is not None:
        traced.save(record, {"algorithm": algorithm, "path": os.fspath(path), "min_support": min_support,
                             "config": config.as_dict(), "job_s": float(me[3])})
    # Every rank's figures to rank 0 (arrays: nothing but numbers on the wire).
    mine_all = np.concatenate([me, stats.as_array().ravel()])
    gathered = comm.gather(mine_all, root=0) if comm.size > 1 else [mine_all]
    if comm.rank != 0:
        return None, None, None
    gathered = [as_array(g, np.float64) for g in gathered]
    ranks = [{"rank": r, **{f: float(g[j]) for j, f in enumerate(RANK_FIELDS)}} for r, g in enumerate(gathered)]
    for r in ranks:
        r["peak_rss_bytes"], r["csr_bytes"] = int(r["peak_rss_bytes"]), int(r["csr_bytes"])
        if shared_process:
            r["shared_process"] = True
    per_rank = [g[len(RANK_FIELDS):].reshape(-1, len(STAT_FIELDS) + comm.size) for g in gathered]
    passes = summarize_passes(per_rank)
    if passes:
        passes[0]["t_read"] = max(r["read_s"] for r in ranks)
    if record is not None:
        from clusterlab._atomic import atomic_open

        with atomic_open(os.path.join(record, "job.json")) as f:
            import json

            json.dump({"algorithm": algorithm, "nodes": comm.size, "path": os.fspath(path),
                       "min_support": min_support, "job_s": max(r["job_s"] for r in ranks), "passes": passes,
                       "ranks": ranks}, f, indent=1)
    table = itemsets_table(offsets, items, counts, n_tx, algorithm, min_count_of(min_support, n_tx),
                           config.max_len or None, labels)
    if streamed is not None:
        import json

        table = table.replace_schema_metadata({**table.schema.metadata, STREAMED_KEY: json.dumps(streamed).encode()})
    return table, passes, ranks


#: The table's metadata key of a run streamed to a file: what rank 0 wrote (JSON).
STREAMED_KEY = b"clusterlab.streamed"


def run_rank(comm, path, algorithm: str, min_support, config: ParallelConfig | None = None,
             format: str | None = None):
    """What one rank runs: ``(table, passes)`` on rank 0, ``(None, None)`` elsewhere.

    ``table``: the frequent itemsets (as ``clusterlab.mine`` returns them); ``passes``: one
    dict per pass with the sum over ranks of bytes/messages/itemsets sent, retransmissions and
    timeouts, and the maximum over ranks of each time (seconds).
    """
    table, passes, _ = rank_run(comm, path, algorithm, min_support, config, format)
    return table, passes


def rank_job(comm, path, algorithm, min_support, config: dict, format=None, record=None, output=None, memory=None):
    """Module-level entry of launched ranks (arguments arrive as JSON): rank 0 returns the
    result as Arrow IPC bytes (nothing is pickled), the others None; an input error every rank
    agreed on comes back as its record (no rank prints a traceback for it)."""
    try:
        table, passes, ranks = rank_run(comm, path, algorithm, min_support, ParallelConfig(**config), format,
                                        shared_process=comm.shares_process, record=record, output=output,
                                        memory=memory)
    except ClusterlabError as e:
        if not getattr(e, "agreed_by_ranks", False):
            raise  # one rank's own failure: the launcher names that rank
        return error_record(e) if comm.rank == 0 else None
    return None if table is None else encode_result(table, passes, ranks)


def launched_job():
    """The communicator of the job this process runs in (`clusterlab run`, mpiexec), else None."""
    if not started_as_rank():
        return None
    from clusterlab.comm import world

    comm = world()
    return comm if comm.size > 1 else None


def _cluster_or_job(cluster):
    """``cluster``, else the job this process runs in (``Launched``), else ConfigError."""
    if cluster is not None:
        return cluster
    if launched_job() is not None:
        return Launched()
    raise ConfigError("say where the ranks run: cluster=InProcess(), Local(), Mpirun(), Testbed(NAME) "
                      "(clusterlab.cluster), or call this inside a launched job")


def run_parallel(path, nodes: int | None = None, algorithm: str = "hpa", min_support=0.01, cluster=None,
                 config: ParallelConfig | None = None, transport=None, format: str | None = None,
                 record: str | None = None, output=None, memory: int | None = None, **options) -> ParallelRun:
    """Mine ``path`` in parallel on ``cluster``; returns a ``ParallelRun``.

    ``cluster``: where the ranks run, a ``clusterlab.cluster.Cluster``: ``Local()`` (one
    process per rank on this machine's TCP mesh), ``Mpirun()`` (processes under MPI),
    ``Testbed(NAME)`` (rank i in host i of a namespace testbed that is up, over the TCP mesh),
    ``InProcess()`` (threads of this process: for tests; kernels release the GIL so it still
    runs in parallel) or ``Launched()``; None: the job this process already runs in
    (``clusterlab run -n 4 -- ...``, mpiexec). ``nodes``: the number of ranks to start (None: the
    job's, else 1). ``transport``: a ``TransportConfig`` for the TCP mesh (socket buffers, RTO
    min/max and their per-rank jitter). ``format``: the input format (default: by extension;
    see ``read_baskets``). ``record``: a directory where each rank writes what it computed when
    and which messages it sent (``rank{r}.json``; rank 0 also ``job.json``), for
    ``replay_parallel``. ``output``: rank 0 writes the itemsets to this Parquet file as they
    are found, byte-identical to the in-memory table written with ``pq.write_table``, and
    ``memory`` (bytes, at least ``mining.stream.MIN_MEMORY``; needs ``output``) bounds each
    rank's process (``outofcore``); the run's ``table`` is then empty and ``streamed`` says
    what was written. Other keywords go to ``cluster.run``: ``timeout``, seconds the whole
    job may take (default ``JOB_TIMEOUT``, one hour; ``mine --timeout``), not each wait: a
    wait for another rank times out after ``config.timeout``, and a rank that dies ends the
    job at once (its peers see its connections drop).
    """
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"unknown parallel algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
    config = config or ParallelConfig()
    config.check()
    check_algorithm(algorithm, config)
    min_count_of(min_support, 1)  # a bad min_support fails here, not in every rank
    output, memory = _check_output(output, memory)
    cluster = _cluster_or_job(cluster)
    if cluster.size is not None:  # this process is one rank of the job: every rank mines
        if nodes not in (None, 1, cluster.size):
            raise ConfigError(f"nodes={nodes} differs from the {cluster.size} ranks of the job this runs in: drop it")
        check_input(path, cluster.size, format)
        t0 = time.perf_counter()
        table, passes, ranks = cluster.run(rank_run, None, path, algorithm, min_support, config, format,
                                           kwargs={"record": record, "output": output, "memory": memory},
                                           transport=transport)[0]
        return _finish(table, passes, ranks, algorithm, cluster.size, cluster.name, time.perf_counter() - t0,
                       launched=True)
    nodes = 1 if nodes is None else nodes
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise ConfigError(f"nodes must be a positive integer, got {nodes!r}")
    fmt = check_input(path, nodes, format)
    t0 = time.perf_counter()
    options.setdefault("timeout", JOB_TIMEOUT)
    if record is not None:
        record = os.path.abspath(os.fspath(record))
    results = cluster.run(rank_job, nodes, os.fspath(path), algorithm, min_support, config.as_dict(), fmt, record,
                          output, memory, transport=transport, **options)
    first = results[0]
    if isinstance(first, dict):
        raise error_from_record(first)
    if not isinstance(first, (bytes, bytearray)):
        from clusterlab.comm.errors import CommError

        raise CommError(f"rank 0 of the {nodes}-rank job ended without handing back its result ({cluster.name})")
    table, passes, ranks = decode_result(first)
    return _finish(table, passes, ranks, algorithm, nodes, cluster.name, time.perf_counter() - t0)


#: Seconds a whole job that ``run_parallel`` starts may take by default. It bounds the job,
#: not each wait (``ParallelConfig.timeout``), so it can be long: a big input on several nodes
#: runs for minutes to hours, while a dead or stuck rank still fails the job within seconds
#: (connections drop) or one wait's timeout.
JOB_TIMEOUT = 3600.0
#: The longest job ``mine --timeout`` accepts (a week), and the shortest.
JOB_TIMEOUT_MAX, JOB_TIMEOUT_MIN = 7 * 86400.0, 1.0

# A pass whose ranks kept at least this share of the machine's cores busy is flagged CPU-bound.
CPU_BOUND_SHARE = 0.9


def _check_output(output, memory):
    """``run_parallel``'s ``output`` (absolute: rank 0 may run elsewhere) and ``memory``, checked."""
    from clusterlab.mining.stream import MIN_MEMORY

    if memory is not None:
        if isinstance(memory, bool) or not isinstance(memory, (int, np.integer)) or memory < MIN_MEMORY:
            raise ConfigError(f"memory must be at least {MIN_MEMORY >> 20} MiB (the interpreter alone takes ~170 MB), "
                              f"got {memory!r}")
        if output is None:
            raise ConfigError("memory bounds a run streamed to a file: give output (a .parquet path)")
        memory = int(memory)
    if output is not None:
        from clusterlab._atomic import check_writable

        output = os.path.abspath(os.fspath(output))
        check_writable(output)
    return output, memory


def _finish(table, passes, ranks, algorithm, nodes, where, wall, launched: bool = False) -> ParallelRun:
    streamed = None
    if table is not None and STREAMED_KEY in (table.schema.metadata or {}):
        import json

        meta = dict(table.schema.metadata)
        streamed = json.loads(meta.pop(STREAMED_KEY))
        table = table.replace_schema_metadata(meta)
    job = max((r["job_s"] for r in ranks), default=0.0) if ranks else 0.0
    if not launched and passes:  # every rank ran on this machine (threads, loopback or a testbed)
        # CPU-bound: the ranks kept the cores busy themselves, or the machine was loaded with
        # at least one runnable task per core (then the ranks waited for a core as well).
        cores = os.cpu_count() or 1
        contended = os.getloadavg()[0] >= cores
        for p in passes:
            p["cpu_bound"] = bool(contended or p.get("cpu_cores_busy", 0.0) >= CPU_BOUND_SHARE * cores)
    return ParallelRun(table, passes, ranks, algorithm, nodes, where, job, wall, streamed)


def mine_parallel(path, nodes: int = 2, algorithm: str = "hpa", min_support=0.01, cluster=None,
                  config: ParallelConfig | None = None, transport=None, **options):
    """Mine ``path`` on ``nodes`` ranks of ``cluster``; returns ``(table, pass_stats)`` (see
    ``run_rank``). The other options are ``run_parallel``'s."""
    r = run_parallel(path, nodes, algorithm, min_support, cluster, config, transport, **options)
    return r.table, r.passes


@dataclasses.dataclass
class ReplayRun:
    """What a replay gives: per pass the slowest rank's time and the ranks' summed bytes,
    messages, retransmissions and RTOs (each rank's own row under ``"ranks"``), the job time
    (slowest rank) and the wall time."""

    passes: list
    ranks: list
    job_s: float
    wall_s: float
    compute: str
    scale: float


def replay_job(comm, directory, compute="wall", scale=1.0, runtime_scale=None, wait_s=None):
    """Module-level entry of launched replay ranks (see ``trace.replay_rank``)."""
    return replay_rank(comm, directory, compute, scale, runtime_scale, wait_s)


def combine_replay(per_rank: list[dict]) -> list[dict]:
    """Per-pass rows of a replay, combined over ranks as ``summarize_passes`` does."""
    n = max((len(r["passes"]) for r in per_rank), default=0)
    out = []
    for i in range(n):
        rows = [r["passes"][i] for r in per_rank if len(r["passes"]) > i]
        d = {"pass": rows[0]["pass"]}
        for f in ("t_total", "t_wait_compute", "t_comm"):
            d[f] = max(x[f] for x in rows)
        for f in ("bytes_sent", "messages_sent", "retransmissions", "timeouts", "rto_time_ms"):
            d[f] = int(round(sum(x[f] for x in rows)))  # a simulated replay's modelled timeouts are fractions
        d["ranks"] = [{"rank": r["rank"], **r["passes"][i]} for r in per_rank if len(r["passes"]) > i]
        out.append(d)
    return out


def replay_parallel(directory, cluster=None, transport=None, compute: str = "wall", scale: float = 1.0,
                    runtime_scale: float | None = None, **options) -> ReplayRun:
    """Replay a run recorded with ``run_parallel(..., record=DIR)``: as many ranks as it had
    send the same messages in the same order on ``cluster`` (a ``clusterlab.cluster.Cluster``:
    ``Local()``, this machine's loopback, or ``Testbed(NAME)``, a testbed's hosts, with
    ``transport``'s settings; ``InProcess()``, threads), each waiting its recorded
    computation (``compute="wall"``: as measured; ``"cpu"``: its CPU seconds, what a core of
    its own would take; ``"spin"``: those CPU seconds burnt on this machine's cores, loading
    them as the real run did) times ``scale`` instead of computing (see ``trace.py``). The
    part of each gap recorded as the job's runtime rather than its mining (per-pass statistics,
    HPA's prefix partitioning step and receive loop: ``trace.py``) is paid times
    ``runtime_scale`` instead (None: ``scale``), so that a scale emulating a slower CPU
    multiplies only the work that CPU's program did."""
    if compute not in COMPUTE_MODES:
        raise ConfigError(f"compute must be one of {', '.join(COMPUTE_MODES)}, got {compute!r}")
    directory = os.path.abspath(os.fspath(directory))
    nodes = recorded_size(directory)
    owed = compute_owed(directory, compute, scale, runtime_scale)
    if "timeout" not in options:  # room for the calls (as a real run) beyond the computation owed
        options["timeout"] = 300.0 + 2.0 * owed
    cluster = _cluster_or_job(cluster)
    t0 = time.perf_counter()
    per_rank = cluster.run(replay_job, nodes, directory, compute, scale, runtime_scale, owed, transport=transport,
                           **options)
    wall = time.perf_counter() - t0
    return ReplayRun(combine_replay(per_rank), [{"rank": r["rank"], "job_s": r["job_s"]} for r in per_rank],
                     max(r["job_s"] for r in per_rank), wall, compute, scale)
