"""A parallel mining job (HPA, HPA-ELD, Count Distribution, PFP) as a study workload, over
``clusterlab.mining.parallel.mine_parallel``.

Each repetition is one job. Its row: ``seconds`` (the job's time inside the ranks, first read
to the result at rank 0, which is what seed 000 reports), ``wall_seconds`` (with process launch
and mesh set-up), passes, itemsets, bytes and messages sent, TCP retransmissions and RTO
timeouts, the same per pass as lists (``retransmissions_by_pass``, ``timeouts_by_pass``,
``seconds_by_pass``), and every ``time_*`` part the job attributes, summed over passes.

``data``: a FIMI file, or a generator name with a size (``seed000:1M``, ``T10I4D100K``),
generated once into the run cache (deterministic: the same name gives the same file).

``compute``: ``real`` runs the miners; a real job cannot run dilated (its computation would
not slow down with the network). ``replay``: one real run per rank count records every rank's
computation gaps and messages (``run_parallel(record=...)`` on this machine's loopback,
``Local()``, its ranks picking collective algorithms by the point's cluster's cost model:
``Session.recording_options`` and ``recording_cost_model``; kept in the run cache and shared by
every transport setting and repetition); each repetition then
replays it (``replay_parallel(compute="cpu")``): the same messages over the point's real TCP
while each rank waits the CPU seconds it computed, as on a host with a core of its own, times
the dilation. Validated against real runs by ``bench/replay_validation.py`` (docs/studies.md).
Other work on the machine during the recording lengthens its gaps: the share of the machine's
CPU it took beyond the cores the ranks left idle is measured (``recording.json`` in the
recording, ``experiments.recording_load``), warned of above 10%, and kept in every replayed row
as ``recording_foreign_cpu``.
``compute_scale`` (replay only) multiplies the recorded mining computation: 1 is this
machine's CPU; c > 1 emulates a CPU c times slower against the same network (the seed's 200 MHz
Pentium Pro), which sets the ratio of computation to communication that a speedup curve depends
on. The part of the recorded computation that is this implementation's runtime, not mining (the
per-pass statistics, which read TCP_INFO once per peer connection and so grow with the ranks;
HPA's prefix partitioning step, which the seed's hash partitioning does not have; HPA's receive
loop; the TCP mesh's drainer thread; ``trace.py`` lists them) is replayed at this machine's
speed (times the dilation only): scaled along, it kept the per-rank computation from shrinking
with the ranks (docs/studies.md, Fig. 6).

Time attribution per pass (``time_compute``, ``time_transfer``, ``time_rto_wait``), the slowest
rank's split so the parts add up to the pass: compute is its time outside communication calls
(replay: its waits); the rest is communication, of which ``time_rto_wait`` is the part
``passes.attribute_time`` charges to retransmission timeouts (replay: the largest TCP_INFO
``tcpi_total_rto_time`` of any rank in the pass, at most the slowest rank's communication).

>>> hpa_job(data="seed000:100K", min_support=0.007).params["algorithm"]
'hpa'
>>> dataset_file("seed000:1M", "/cache")
('/cache/seed000-1M.dat', 'seed000', 1000000)
"""

from __future__ import annotations

import os
import re
import sys
import time

from clusterlab.errors import ConfigError
from clusterlab.experiments import recording_load
from clusterlab.experiments.spec import Workload
from clusterlab.units import parse_size

ALGORITHMS = ("hpa", "hpa-eld", "cd", "pfp")
COMPUTE = ("real", "replay")
PARTITIONS = ("prefix", "itemset")  # ParallelConfig.partition
_SIZE = re.compile(r"^([0-9]+)([KkMm]?)$")


def parallel_mining(data: str = "seed000:1M", min_support: float = 0.007, algorithm: str = "hpa",
                    block_size: str = "8KiB", compute: str = "real", compute_scale: float = 1.0,
                    partition: str = "prefix") -> Workload:
    """Mine ``data`` at ``min_support`` with ``algorithm`` on the point's ranks. ``partition``
    (HPA): ``prefix`` (clusterlab's: a candidate's owner is its first item's) or ``itemset``
    (seed 000's: a hash of the whole itemset; every pass ships the transactions' k-subsets).

    >>> parallel_mining(compute="real", compute_scale=30)
    Traceback (most recent call last):
    clusterlab.errors.ConfigError: compute_scale 30 needs compute=replay (a real job computes at this machine's speed)
    """
    params = {"data": data, "min_support": check_min_support(min_support), "algorithm": algorithm, "block_size": block_size,
              "compute": compute, "compute_scale": compute_scale, "partition": partition}
    return Workload("parallel_mining", {**params, "compute_scale": check_params(params)},
                    dilatable=compute != "real", check=check_params, dilatable_of=lambda p: p["compute"] != "real")


def check_params(params: dict) -> float:
    """Refuse a job's settings with the reason (also a grid's or ``--set``'s values); returns
    the compute scale as a number."""
    if params["algorithm"] not in ALGORITHMS:
        raise ConfigError(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {params['algorithm']!r}")
    if params["compute"] not in COMPUTE:
        raise ConfigError(f"compute must be one of {', '.join(COMPUTE)}, got {params['compute']!r}")
    check_min_support(params["min_support"])
    parse_size(params["block_size"], "block_size", lo=1, hi=1 << 30)
    partition = params.get("partition", "prefix")
    if partition not in PARTITIONS:
        raise ConfigError(f"partition must be one of {', '.join(PARTITIONS)}, got {partition!r}")
    if partition != "prefix" and params["algorithm"] != "hpa":
        raise ConfigError(f"partition={partition} is HPA's (how it splits the candidates); {params['algorithm']} "
                          "takes only prefix (the default)")
    scale = compute_scale_value(params.get("compute_scale", 1.0))
    if scale != 1.0 and params["compute"] != "replay":
        raise ConfigError(f"compute_scale {scale:g} needs compute=replay (a real job computes at this "
                          "machine's speed)")
    return scale


def check_min_support(v) -> float:
    """A fraction in (0, 1] of the transactions, or a count >= 1."""
    from clusterlab.units import parse_float

    f = parse_float(v, "min_support", lo=0)
    if f <= 0 or (f > 1 and not f.is_integer()):
        raise ConfigError(f"min_support must be a fraction in (0, 1] or a count >= 1, got {v!r}")
    return f


def compute_scale_value(v) -> float:
    """``compute_scale`` as a positive number (a grid or ``--set`` value may be text)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise ConfigError(f"compute_scale must be a number > 0 (1: this machine's CPU), got {v!r}") from None
    if not 0 < f < 1e6:
        raise ConfigError(f"compute_scale must be a number > 0 and < 1e6 (1: this machine's CPU), got {v!r}")
    return f


def hpa_job(data: str = "seed000:1M", min_support: float = 0.007, block_size: str = "8KiB",
            compute: str = "real", compute_scale: float = 1.0, partition: str = "prefix") -> Workload:
    """Seed 000's job: HPA with 8 KB message blocks (``partition="itemset"``: with seed 000's
    hash of the whole itemset too)."""
    return parallel_mining(data, min_support, "hpa", block_size, compute, compute_scale, partition)


def dataset_file(data: str, cache_dir: str) -> tuple[str, str | None, int | None]:
    """``(path, generator name, transactions)`` for ``data``: an existing file as is, else a
    generator name ``NAME[:N]`` (N with K or M) to be generated into ``cache_dir``."""
    if os.path.exists(data) or os.sep in data or data.endswith(".dat"):
        return data, None, None
    name, _, size = data.partition(":")
    n = None
    if size:
        m = _SIZE.match(size)
        if not m:
            raise ConfigError(f"data {data!r}: size {size!r} is not a count like 100K or 10M")
        n = int(m.group(1)) * {"": 1, "k": 1000, "m": 1_000_000}[m.group(2).lower()]
    return os.path.join(cache_dir, f"{name}-{size or 'default'}.dat"), name, n


def resolve_data(data: str, cache_dir: str) -> str:
    """The file to mine, generated first if needed (atomically; other runs reuse it)."""
    from clusterlab.data.generate import generate_file, quest_params

    path, name, n = dataset_file(data, cache_dir)
    if name is None:
        if not os.path.exists(path):
            raise ConfigError(f"data {data}: no such file")
        return path
    quest_params(name, transactions=n)  # a bad name fails here, with the reason
    if not os.path.exists(path):
        os.makedirs(cache_dir, exist_ok=True)
        generate_file(path, name, transactions=n)
    return path


def hpa_recordings(data: str, min_support: float, counts: list[int], cache_dir: str):
    """For each count n: HPA on ``data`` (as a study names it) at ``min_support`` (clusterlab's
    default HPA) recorded as n local processes over loopback (``run_parallel(record=...)``, as
    a replayed or simulated point records it); yields ``(n, directory, record_wall_s,
    load1_before)``. The recordings live in a temporary directory for the loop's duration
    (the replay benches' common first step)."""
    import tempfile
    from pathlib import Path

    from clusterlab.cluster import Local
    from clusterlab.mining.parallel import ParallelConfig, run_parallel

    path = resolve_data(data, cache_dir)
    with tempfile.TemporaryDirectory() as tmp:
        for n in counts:
            rec = Path(tmp) / f"n{n}"
            load = round(os.getloadavg()[0], 2)
            t0 = time.perf_counter()
            run_parallel(path, nodes=n, algorithm="hpa", min_support=min_support, cluster=Local(),
                         config=ParallelConfig(), record=rec, timeout=1800)
            yield n, rec, round(time.perf_counter() - t0, 2), load


def execute(session, params: dict, reps: int, warmup: int):
    from clusterlab.experiments.workloads.columns import undilate
    from clusterlab.mining.parallel import ParallelConfig, replay_parallel, run_parallel
    from clusterlab.units import parse_size

    kw = dict(session.mining_options())
    compute_scale = check_params(params)
    if params["compute"] == "real" and session.dilation != 1.0:
        raise ConfigError(f"a real mining job cannot run dilated (k={session.dilation:g}): its computation would "
                          "not slow down")
    if not session.study_kind.runs_programs and params["compute"] != "replay":
        raise ConfigError("a simulated cluster runs no miners: use compute=replay (a real run on this machine's "
                          "loopback is recorded once and replayed in the simulation)")
    if session.testbed is not None:
        kw["setup_timeout"] = max(60.0, 3.0 * session.ranks)  # as Session.run: many ranks start slowly
    path = resolve_data(params["data"], session.cache_dir)
    config = ParallelConfig(block_bytes=parse_size(params["block_size"]), partition=params.get("partition", "prefix"))
    trace = (recording(session, path, params, config, {**kw, **session.recording_options()})
             if params["compute"] == "replay" else None)
    # the share of the machine's CPU other processes took from the ranks' cores while the replayed
    # run was recorded (recording_load.noisy_share; absent for a recording made before it was measured)
    foreign = recording_load.noisy_share(recording_load.read(trace)) if trace is not None else None
    for i in range(warmup + reps):
        t0 = time.perf_counter()
        if trace is None:
            r = run_parallel(path, nodes=session.ranks, algorithm=params["algorithm"],
                             min_support=params["min_support"], config=config, **kw)
            itemsets, passes = r.table.num_rows, r.passes
            seconds = sum(p["t_total"] for p in passes) + passes[0].get("t_read", 0.0)
            for p in passes:  # the slowest rank's split, so the parts add up to the pass's time
                s = max(p["ranks"], key=lambda x: x["t_total"])
                p["time_compute"], p["time_transfer"], p["time_rto_wait"] = s["t_compute"], s["t_transfer"], s["t_rto"]
        else:
            r = replay_parallel(trace, compute="cpu", scale=session.dilation * compute_scale,
                                runtime_scale=session.dilation, **kw)
            itemsets, passes, seconds = trace_itemsets(trace), r.passes, r.job_s
            for p in passes:
                s = max(p["ranks"], key=lambda x: x["t_total"])
                comm = max(0.0, s["t_total"] - s["t_wait_compute"])
                p["time_compute"] = s["t_wait_compute"]
                p["time_rto_wait"] = min(comm, max(x["rto_time_ms"] for x in p["ranks"]) / 1000.0)
                p["time_transfer"] = comm - p["time_rto_wait"]
        wall = time.perf_counter() - t0
        if i < warmup:
            continue
        row = {"rep": i - warmup, "seconds": seconds,
               "wall_seconds": wall, "passes": len(passes), "itemsets": itemsets,
               "bytes_sent": sum(p["bytes_sent"] for p in passes),
               "messages_sent": sum(p["messages_sent"] for p in passes),
               "retransmissions": sum(p["retransmissions"] for p in passes),
               "timeouts": sum(p["timeouts"] for p in passes),
               "retransmissions_by_pass": [p["retransmissions"] for p in passes],
               "timeouts_by_pass": [p["timeouts"] for p in passes],
               "seconds_by_pass": [p["t_total"] for p in passes]}
        if foreign is not None:
            row["recording_foreign_cpu"] = foreign
        parts = sorted({k for p in passes for k in p if k.startswith("time_")})
        for part in parts:  # time attribution, when the job reports it
            row[part] = sum(p.get(part, 0.0) for p in passes)
            row[f"{part}_by_pass"] = [p.get(part, 0.0) for p in passes]
        yield undilate(row, session.dilation if params["compute"] != "real" else 1.0)


def recording(session, path: str, params: dict, config, kw: dict) -> str:
    """The directory of the real run that the point's replays play back: recorded once per
    input, algorithm, support, block size, rank count and the cost model its ranks pick
    collective algorithms by (``Session.recording_cost_model``: the replays send the messages
    of the algorithms recorded), kept in the run cache."""
    import hashlib
    import json

    from clusterlab.comm import costmodel
    from clusterlab.mining.parallel import run_parallel
    from clusterlab.mining.parallel.trace import TRACE_FORMAT

    model = session.recording_cost_model()
    # The trace format is part of the key: a recording without the runtime part of its gaps
    # would replay with every gap scaled. The model's picks are (not its parameters): points whose
    # models pick alike (the bridge's and the cell switch's) replay one recording, not two whose
    # computation differs by a recording's noise (7% between two of 4 ranks).
    key = json.dumps([os.path.abspath(path), os.path.getsize(path), params["algorithm"], params["min_support"],
                      params["block_size"], session.ranks, TRACE_FORMAT,
                      None if model is None else model.picks(session.ranks)]
                     # (the default partition is not in the key: the recordings made before it was a setting stay valid)
                     + ([params["partition"]] if params.get("partition", "prefix") != "prefix" else []))
    d = os.path.join(session.cache_dir, "replay", f"{params['algorithm']}-{session.ranks}-"
                     f"{hashlib.sha256(key.encode()).hexdigest()[:12]}")
    if not os.path.exists(os.path.join(d, "job.json")):
        if model is not None and "env" not in kw:
            os.makedirs(d + ".tmp", exist_ok=True)
            model.save(os.path.join(d + ".tmp", "costmodel.json"))
            kw = {**kw, "env": {**os.environ, costmodel.ENV: os.path.join(d + ".tmp", "costmodel.json")}}
        # Other work on the machine during the recording makes its gaps too long: measured
        # (recording.json), warned of, and carried to the rows of every replay of it.
        before = recording_load.snapshot()
        r = run_parallel(path, nodes=session.ranks, algorithm=params["algorithm"], min_support=params["min_support"],
                         config=config, record=d + ".tmp", **kw)
        load = recording_load.measure(before, ranks=session.ranks)
        recording_load.write(d + ".tmp", load)
        share = recording_load.noisy_share(load)
        if recording_load.is_noisy(share):
            print(recording_load.warning(session.ranks, share), file=sys.stderr, flush=True)
        with open(os.path.join(d + ".tmp", "itemsets"), "w") as f:
            f.write(str(r.table.num_rows))
        if os.path.exists(d):
            import shutil

            shutil.rmtree(d)
        os.replace(d + ".tmp", d)
    return d


def trace_itemsets(directory: str) -> int:
    """The number of itemsets the recorded real run found."""
    with open(os.path.join(directory, "itemsets")) as f:
        return int(f.read())
