"""A run directory parsed into what the rules need: one :class:`Job` per job it records.

What is read (nothing is rerun):

* a parallel mining run: a JSON file holding ``"passes"`` (``clusterlab mine --nodes N -o
  DIR/sets.parquet --json > DIR/summary.json``, or ``record_mining``'s ``run.json``), else
  ``*.passes.json`` (written beside ``mine -o``): per pass and per rank the time split
  (compute, communication, RTO wait from ``tcpi_total_rto_time``), CPU seconds, bytes and
  messages sent, retransmissions and timeouts; the summary adds the launch time, the options
  (block size, partition) and the transport settings;
* a study run (``meta.json`` + ``table.parquet``, from ``experiment run`` or ``bench
  broadcast --run-dir``): one job per point (its median repetition): ``time_*`` parts,
  per-rank RTO waits, drops per switch port and per host queue, spare CPU, the emulated
  cluster (rate, buffers, dilation) and transport; ``monitor.parquet`` for the fidelity check;
* a program run (``clusterlab run --run-dir``: ``meta.json`` with ``"kind": "program"``,
  ``ranks/rank-N.json``, ``monitor.parquet``): one job, one "pass" of the whole program, each
  rank's wall time split into compute, transfer and RTO wait (``comm.rank_record``); a program
  without records (MPI's own transport) has the monitor's per-host counters only;
* a monitor directory (``monitor.parquet``/``monitor.csv`` only): the fidelity check.

A directory with none of these is refused in one line (``ConfigError``).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from pathlib import Path

from clusterlab.errors import ConfigError


@dataclasses.dataclass
class RankPass:
    """One rank's share of one pass (seconds; bytes and messages it sent)."""

    rank: int
    total: float
    compute: float
    cpu: float | None
    comm: float
    rto: float
    bytes: float = 0.0
    messages: float = 0.0
    timeouts: float = 0.0
    setup: float = 0.0  # connection set-up and teardown inside its communication (per-call connections)
    recovery: float | None = None  # the longest time one connection spent per RTO recovery after its first timeout


@dataclasses.dataclass
class Pass:
    number: int | str
    seconds: float
    ranks: list[RankPass]


@dataclasses.dataclass
class Job:
    """One job of a run: what the rules read."""

    label: str
    kind: str  # "mining" | "study" | "program" | "monitor"
    seconds: float  # the job's time (ranks' first read to result)
    wall_seconds: float | None = None  # with process launch and mesh set-up
    passes: list[Pass] = dataclasses.field(default_factory=list)
    nodes: int = 0
    options: dict = dataclasses.field(default_factory=dict)  # block_size, partition, algorithm, workload params
    transport: dict = dataclasses.field(default_factory=dict)  # TransportConfig fields that were set
    cluster: dict = dataclasses.field(default_factory=dict)  # kind, rate (bit/s), buffer, host_queue, dilation
    switch_drops: int | None = None
    switch_drops_by_port: dict = dataclasses.field(default_factory=dict)
    host_drops_by_host: list = dataclasses.field(default_factory=list)
    timeouts: int | None = None
    retransmissions: int | None = None
    cpu_spare: float | None = None
    monitor: dict | None = None  # the fidelity check's inputs (``fidelity.monitor_facts``)
    source: str = ""
    model: dict = dataclasses.field(default_factory=dict)  # the cost model's alpha, beta, overhead, source


def load(run_dir) -> list[Job]:
    """The jobs of ``run_dir``; ``ConfigError`` (one line) when it holds none."""
    d = Path(run_dir)
    if not d.is_dir():
        raise ConfigError(f"{run_dir}: no such directory (give a run directory: a study run, a `mine --nodes` "
                          "run with its summary JSON or .passes.json, or a monitor directory)")
    if (d / "meta.json").exists():
        from clusterlab.cluster.record import is_program_run

        if is_program_run(d):
            return [with_cost_model(_program_job(d))]
        return _study_jobs(d)
    found = _mining_json(d)
    if found is not None:
        return [with_cost_model(_mining_job(*found))]
    for name in ("monitor.parquet", "monitor.csv"):
        if (d / name).exists():
            from clusterlab.diagnose.fidelity import monitor_facts, read_monitor

            tbl, meta = read_monitor(d / name)
            return [Job(label=d.name, kind="monitor", seconds=float(meta.get("duration") or 0.0),
                        monitor=monitor_facts(tbl, meta), cluster=_cluster_of(meta.get("cluster") or {}),
                        source=str(d / name))]
    raise ConfigError(f"{run_dir}: nothing to diagnose (no meta.json, no JSON with \"passes\" from "
                      "`clusterlab mine --nodes N --json`, no *.passes.json, no monitor.parquet)")


def with_cost_model(job: Job) -> Job:
    """``job`` with the communication cost model in force (``comm.costmodel.current()``: the
    file of ``$CLUSTERLAB_COSTMODEL`` from ``clusterlab tune model``, else the default fit of the
    loopback mesh): a local run's line rate (1 / beta) and per-message latency (alpha + overhead)."""
    from clusterlab.comm.costmodel import current

    if (job.cluster or {}).get("kind") != "testbed":
        m = current()
        job.model = {"alpha": m.alpha, "beta": m.beta, "overhead": m.overhead, "source": m.source}
    return job


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror or e}") from None
    except ValueError as e:
        raise ConfigError(f"{path}: not JSON ({e})") from None


def _mining_json(d: Path):
    """``(path, summary dict)`` of the mining record in ``d`` (a summary beats a bare passes list)."""
    bare = None
    for p in sorted(d.glob("*.json")):
        if p.name.endswith(".passes.json"):
            bare = bare or p
            continue
        try:
            obj = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(obj, dict) and isinstance(obj.get("passes"), list):
            return p, obj
    if bare is not None:
        obj = _read_json(bare)
        if not isinstance(obj, list):
            raise ConfigError(f"{bare}: not a list of passes (written by `clusterlab mine --nodes N -o ...`)")
        return bare, {"passes": obj}
    return None


def _num(v, default=0.0) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else default


def _rank_pass(x: dict, i: int) -> RankPass:
    total = _num(x.get("t_total"))
    comm = _num(x.get("t_comm"))
    return RankPass(rank=int(_num(x.get("rank"), i)), total=total, compute=_num(x.get("t_compute"), total - comm),
                    cpu=_num(x.get("cpu_s"), None) if "cpu_s" in x else None, comm=comm,
                    rto=_num(x.get("t_rto")), bytes=_num(x.get("bytes_sent")), messages=_num(x.get("messages_sent")),
                    timeouts=_num(x.get("timeouts")))


def mining_job(summary: dict, label: str = "job") -> Job:
    """The job of a ``clusterlab mine --nodes N --json`` summary held in memory (the command's
    own closing diagnosis)."""
    return _mining_job(Path(label) / "summary.json", summary)


def _mining_job(path: Path, s: dict) -> Job:
    passes = []
    for n, p in enumerate(s["passes"]):
        if not isinstance(p, dict):
            raise ConfigError(f"{path}: pass {n + 1} is not a JSON object")
        ranks = [_rank_pass(x, i) for i, x in enumerate(p.get("ranks") or [p]) if isinstance(x, dict)]
        passes.append(Pass(number=p.get("pass", n + 1), seconds=_num(p.get("t_total")), ranks=ranks))
    secs = s.get("seconds") if isinstance(s.get("seconds"), dict) else {}
    read = max((_num(r.get("read_s")) for r in s.get("ranks") or [] if isinstance(r, dict)), default=0.0)
    job_s = _num(secs.get("job"), sum(p.seconds for p in passes) + read)
    opts = dict(s.get("options") or {})
    transport = {k: v for k, v in (s.get("transport") or {}).items() if v is not None}
    return Job(label=path.parent.name, kind="mining", seconds=job_s, wall_seconds=_num(secs.get("mine"), None),
               passes=passes, nodes=int(opts.get("nodes") or max((len(p.ranks) for p in passes), default=0)),
               options=opts, transport=transport, cluster=_cluster_of(s.get("cluster") or {}), source=str(path),
               cpu_spare=_num(s.get("cpu_spare"), None),
               monitor=s["monitor"] if isinstance(s.get("monitor"), dict) else None)


def _cluster_of(c: dict) -> dict:
    from clusterlab.units import parse_duration, parse_rate, parse_size

    out = {"kind": c.get("kind", "local"), "dilation": _num(c.get("dilation"), 1.0) or 1.0}
    for key, parse in (("rate", parse_rate), ("buffer", parse_size), ("host_queue", parse_size),
                       ("wan_rate", parse_rate), ("wan_delay", parse_duration)):
        if c.get(key) not in (None, ""):
            try:
                out[key] = float(parse(c[key], key))
            except ConfigError:
                pass
    if isinstance(c.get("sites"), str) and c["sites"].strip():  # two sites joined by a WAN line ("2+2")
        out["sites"] = c["sites"].strip()
    else:
        out.pop("wan_rate", None)
        out.pop("wan_delay", None)
    if isinstance(c.get("loss"), str) and c["loss"].strip():  # StarTopo's canonical "h3:0.02% ..."
        from clusterlab.cluster.testbed.topo import _probability

        out["loss"] = {h: _probability(v) for h, v in (p.split(":", 1) for p in c["loss"].split())}
    if isinstance(c.get("host_rates"), str) and c["host_rates"].strip():  # StarTopo's canonical "h3=15.5Mbit ..."
        try:
            out["host_rates"] = {h: parse_rate(r, h) for h, r in (p.split("=", 1) for p in c["host_rates"].split())}
        except (ConfigError, ValueError):
            pass
    return out


def study_point_job(run_dir, point) -> Job:
    """The job of one point of a study run (what ``--auto-dilation`` judges after each run of it)."""
    jobs = _study_jobs(Path(run_dir), only=point)
    if not jobs:
        raise ConfigError(f"{run_dir}: point {point} has no repetitions (nothing to judge)")
    return jobs[0]


def _study_jobs(d: Path, only=None) -> list[Job]:
    from clusterlab.report.study import load_run

    rows, meta = load_run(d)
    if only is not None:
        rows = [r for r in rows if r.get("point", 0) == only]
    if not rows and only is None:
        raise ConfigError(f"{d}: a study run with no repetitions (nothing to diagnose)")
    spec = meta.get("spec") or {}
    mon_tbl = mon_meta = None
    if (d / "monitor.parquet").exists():
        from clusterlab.diagnose.fidelity import read_monitor

        try:
            mon_tbl, mon_meta = read_monitor(d / "monitor.parquet")
            mon_tbl = mon_tbl.to_pandas()  # once, for every point
        except ConfigError:
            mon_tbl = None
    jobs = []
    by_point: dict = {}
    for r in rows:
        by_point.setdefault(r.get("point", 0), []).append(r)
    for point, reps in sorted(by_point.items(), key=lambda kv: str(kv[0])):
        med = statistics.median(_num(r.get("seconds")) for r in reps)
        row = min(reps, key=lambda r: abs(_num(r.get("seconds")) - med))
        jobs.append(_study_job(d, row, spec, mon_tbl, mon_meta, point))
    return jobs


def _study_job(d: Path, row: dict, spec: dict, mon_tbl, mon_meta, point) -> Job:
    cluster = _cluster_of({**(spec.get("cluster") or {}), **{k: row[k] for k in ("kind", "rate", "buffer",
                           "host_queue", "dilation", "host_rates", "loss", "sites", "wan_rate", "wan_delay")
                           if row.get(k) is not None},
                           "kind": row.get("cluster", "local")})
    per_rank = row.get("per_rank")
    if isinstance(per_rank, str):
        try:
            per_rank = json.loads(per_rank)
        except ValueError:
            per_rank = None
    seconds = _num(row.get("seconds"))
    passes, unsplit = [], False
    from clusterlab.report.study import _list  # a list, or its JSON text (a CSV table), else None

    by_pass = _list(row.get("seconds_by_pass"))
    if by_pass:  # a mining study: its per-pass split (slowest rank's)
        comp = _list(row.get("time_compute_by_pass")) or [0.0] * len(by_pass)
        rto = _list(row.get("time_rto_wait_by_pass")) or [0.0] * len(by_pass)
        # before pass 1 the job read its data and counted the items (a replay waits that
        # computation): pass 0, computation, not communication left over
        before = seconds - sum(_num(t) for t in by_pass)
        if before > 1e-3 * seconds:
            passes.append(Pass(0, before, [RankPass(0, before, before, None, 0.0, 0.0)]))
        for i, t in enumerate(by_pass):
            c, w = _num(comp[i]) if i < len(comp) else 0.0, _num(rto[i]) if i < len(rto) else 0.0
            passes.append(Pass(i + 1, _num(t), [RankPass(0, _num(t), c, None, _num(t) - c, w)]))
    elif isinstance(per_rank, list) and per_rank:  # a communication workload: one "pass"
        ranks = []
        for i, x in enumerate(per_rank):
            t = _num(x.get("seconds"))
            w = _num(x.get("rto_wait_s"))
            tr = _num(x.get("transfer_s"), t - w)
            ranks.append(RankPass(int(_num(x.get("rank"), i)), t, max(0.0, t - w - tr), None, w + tr, w,
                                  timeouts=_num(x.get("rto")), recovery=_num(x.get("rto_time_per_recovery_s"), None)))
        passes.append(Pass("all", seconds, ranks))
    else:
        w, tr = _num(row.get("time_rto_wait")), _num(row.get("time_transfer"))
        c = _num(row.get("time_compute"), max(0.0, seconds - w - tr))
        passes.append(Pass("all", seconds, [RankPass(0, seconds, c, None, seconds - c, w)]))
        unsplit = all(row.get(k) is None for k in ("time_rto_wait", "time_transfer", "time_compute"))
    ports = row.get("drops_per_port")
    if isinstance(ports, str):
        try:
            ports = json.loads(ports)
        except ValueError:
            ports = {}
    hosts = row.get("host_drops_per_host")
    if isinstance(hosts, str):
        try:
            hosts = json.loads(hosts)
        except ValueError:
            hosts = []
    transport = {k: row[k] for k in ("rto_min", "rto_min_jitter", "rto_max", "rto_max_offset", "sndbuf", "rcvbuf",
                                      "nodelay", "stack", "congestion") if row.get(k) is not None}
    workload = spec.get("workload") or {}
    options = {**(workload.get("params") or {}), **{k: row[k] for k in ("size", "order", "algorithm", "block_size",
                                                                        "partition") if row.get(k) is not None}}
    options["workload"] = workload.get("name")
    if unsplit:
        options["unsplit"] = True
    if row.get("failed"):  # a point whose job failed: there is no time to split, only the reason
        options["failed"] = str(row["failed"])
    if row.get("read_seconds") is not None:  # a job reading its data from the iSCSI target (storage workloads)
        options["storage"] = {k: row[k] for k in ("read_seconds", "rescan_seconds", "io_share", "passes", "stored_bytes",
                                                   "bytes", "backing_mbps", "bottleneck", "local_seconds",
                                                   "local_read_seconds", "layout", "rescan") if row.get(k) is not None}
        options["storage"]["backing_rate"] = (workload.get("params") or {}).get("backing_rate")
    monitor = None
    if mon_tbl is not None:
        from clusterlab.diagnose.fidelity import monitor_facts

        monitor = monitor_facts(mon_tbl, mon_meta, point=point)
    return Job(label=str(row.get("label") or f"point {point}"), kind="study", seconds=seconds,
               passes=passes, nodes=int(_num(row.get("ranks"), 0) or _num(row.get("hosts"), 0) or len(per_rank or [])),
               options=options, transport=transport, cluster=cluster,
               switch_drops=int(_num(row.get("drops"))) if row.get("drops") is not None else None,
               switch_drops_by_port={str(k): int(_num(v)) for k, v in (ports or {}).items()},
               host_drops_by_host=[int(_num(v)) for v in (hosts or [])],
               timeouts=int(_num(row.get("timeouts"))) if row.get("timeouts") is not None else None,
               retransmissions=int(_num(row.get("retransmissions"))) if row.get("retransmissions") is not None else None,
               cpu_spare=_num(row.get("cpu_spare"), None), monitor=monitor, source=str(d))


# The monitor's per-host TCP counters a program run shows (all a program on MPI's own transport has).
HOST_TCP_COUNTERS = ("TcpOutSegs", "TcpRetransSegs", "TcpExtTCPTimeouts")


def _machine_of(meta: dict) -> dict:
    """``{"machine": {cpus, load_before_after}}`` from a run's meta.json (the fidelity check of a
    local run, ``machine.machine_factor``); {} when it recorded neither."""
    m = meta.get("machine") if isinstance(meta.get("machine"), dict) else {}
    cpus = m.get("affinity") or m.get("cpus")
    b, a = meta.get("load_before"), meta.get("load_after")
    if not isinstance(cpus, (int, float)) or not isinstance(b, list) or not b:
        return {}
    return {"machine": {"cpus": cpus, "load_before_after": [b[0], (a or b)[0]]}}


def _program_job(d: Path) -> Job:
    """The job of a program run (``cluster.record``): each rank's record as one pass."""
    from clusterlab.cluster.record import load as load_program

    run = load_program(d)
    meta, recs = run["meta"], run["ranks"]
    ranks = [RankPass(rank=int(_num(r.get("rank"))), total=_num(r.get("wall_s")), compute=_num(r.get("compute_s")),
                      cpu=_num(r.get("cpu_s"), None), comm=_num(r.get("comm_s")), rto=_num(r.get("rto_wait_s")),
                      bytes=_num(r.get("bytes_sent")), messages=_num(r.get("msgs_sent")),
                      timeouts=_num(r.get("timeouts")), setup=_num(r.get("connection_setup_s"))) for r in recs]
    seconds = max((x.total for x in ranks), default=_num(meta.get("elapsed_s")))
    monitor = None
    if (d / "monitor.parquet").exists():
        from clusterlab.diagnose.fidelity import monitor_facts, read_monitor

        tbl, mmeta = read_monitor(d / "monitor.parquet")
        monitor = monitor_facts(tbl, mmeta)
        df = tbl.to_pandas()
        tcp = df[df.metric.isin(HOST_TCP_COUNTERS) & (df.node != "switch")]
        hosts_tcp = {str(n): {str(m): int(v) for m, v in g.groupby("metric").value.sum().items()}
                     for n, g in tcp.groupby("node")}
    else:
        hosts_tcp = {}
    transport = {k: v for k, v in (meta.get("transport") or {}).items() if v is not None and k not in ("place", "seed")}
    known = [r for r in recs if r.get("timeouts") is not None]
    return Job(label=d.name, kind="program", seconds=seconds, wall_seconds=_num(meta.get("elapsed_s"), None),
               passes=[Pass("all", seconds, ranks)] if ranks else [], nodes=int(_num(meta.get("ranks"))),
               options={"command": meta.get("command"), "hosts_tcp": hosts_tcp,
                        "connections": sorted({str(r.get("connections") or "persistent") for r in recs}),
                        **_machine_of(meta),
                        "no_tcp_info": [int(_num(r.get("rank"))) for r in recs if r.get("rto_wait_s") is None]},
               transport=transport,
               cluster=_cluster_of(meta.get("cluster") or {}),
               timeouts=sum(int(r["timeouts"]) for r in known) if known else None,
               retransmissions=sum(int(r.get("retransmissions") or 0) for r in known) if known else None,
               monitor=monitor, source=str(d))
