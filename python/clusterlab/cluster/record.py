"""A user's program run with a run directory: ``clusterlab run --run-dir DIR`` and its Python
form, :func:`launch`. What ``clusterlab report DIR`` and ``clusterlab diagnose DIR`` read:

* ``meta.json`` (``"kind": "program"``; also for a rank function, :func:`run`): the command line, the program's argv, the cluster
  (kind, name, the testbed's rate/buffer/dilation), the transport settings in force, the number
  of ranks, each rank's exit code, the failed rank and why, the elapsed seconds (launch
  included), the machine, the load before and after, the monitor's settings; written at the
  start (``status: running``) and again at the end;
* ``monitor.parquet``: the monitor's samples over the job (``clusterlab.monitor.Monitor``: on a
  testbed every host and switch port, ``Monitor.for_testbed``; else this machine's counters,
  ``Monitor.local``);
* ``ranks/rank-N.json``: each rank's record, written by the rank itself at exit when it joined
  clusterlab's mesh (``comm.rank_record``: wall, communication, compute, RTO wait from
  ``TCP_INFO``, transfer, bytes). A program on MPI's own transport without ``world()`` (an
  mpi4py or MPI C program) writes none: its run has the per-host TCP counters of the monitor only.

Every file is replaced atomically; the directory is checked writable before anything starts.
The ranks find it through ``CLUSTERLAB_RUN_DIR`` (``rendezvous.contract.ENV_RUN_DIR``), so on a
hostfile's hosts it must be a path every host can write (a shared file system).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from clusterlab.comm.rank_record import RANKS_DIR
from clusterlab.errors import ConfigError
from clusterlab.rendezvous import contract

KIND = "program"
FORMAT = 1


def cluster_info(cluster) -> dict:
    """What ``meta.json`` says of the cluster (``diagnose.run._cluster_of`` reads kind, rate,
    buffer, host_queue, dilation)."""
    kind = getattr(cluster, "kind", None) or getattr(cluster, "name", "local")
    out = {"kind": "testbed" if kind == "testbed" else "local", "place": kind, "name": cluster.name,
           "repr": repr(cluster), "mesh": getattr(cluster, "mesh", "tcp")}
    if kind == "testbed" and getattr(cluster, "topo", None) is None:
        t = cluster.testbed.topo
        out.update(rate=t.rate, buffer=t.buffer, host_queue=getattr(t, "host_queue", None),
                   dilation=float(t.dilation), hosts=len(cluster.testbed.hosts), switch=getattr(t, "switch", None))
    return out


def _transport_in_force(cluster, transport) -> dict:
    """The TCP settings the ranks' sockets run under: the call's, else an attached testbed's;
    on MPI's own transport only the hosts' (MPICH opens its sockets, per-socket knobs miss them)."""
    attached = getattr(cluster, "kind", None) == "testbed" and getattr(cluster, "topo", None) is None
    if getattr(cluster, "mesh", "tcp") == "mpi":
        d = cluster.testbed.transport.to_dict() if attached else {}
        return {k: v for k, v in d.items() if k not in getattr(cluster, "socket_only", ())}
    if transport is not None:
        return transport.to_dict()
    return cluster.testbed.transport.to_dict() if attached else {}


def _monitor(cluster, interval: float):
    """The monitor of this cluster, not started (None: a topology the call brings up itself)."""
    from clusterlab.monitor import Monitor

    if getattr(cluster, "kind", None) == "testbed":
        if getattr(cluster, "topo", None) is not None:
            return None
        return Monitor.for_testbed(cluster.testbed, interval, capture=True)
    return Monitor.local(interval, capture=os.geteuid() == 0)  # a packet capture needs root


def _write_meta(d: Path, meta: dict) -> None:
    from clusterlab._atomic import atomic_open

    with atomic_open(d / "meta.json") as f:
        json.dump(meta, f, indent=1, default=str)


class _Recording:
    """One run being recorded (``launch``/``run``): the ranks' environment, the meta so far."""

    def __init__(self, cluster, run_dir, n: int, command: list[str], transport, monitor: bool,
                 monitor_interval: float, env: dict | None):
        from clusterlab._atomic import check_output
        from clusterlab.monitor.provenance import git_revision, load_average, machine, version

        d = self.dir = Path(run_dir)
        check_output(d, "run directory", directory=True)
        if d.is_dir() and (d / "meta.json").exists():
            raise ConfigError(f"run directory {run_dir}: already holds a run (meta.json); give a new directory")
        self.mon = _monitor(cluster, monitor_interval) if monitor else None
        d.mkdir(parents=True, exist_ok=True)
        (d / RANKS_DIR).mkdir(exist_ok=True)
        self.env = dict(os.environ if env is None else env)
        self.env[contract.ENV_RUN_DIR] = str(d.resolve())
        self.meta = {"format": FORMAT, "kind": KIND, "argv": sys.argv, "command": list(command), "ranks": n,
                     "cluster": cluster_info(cluster), "transport": _transport_in_force(cluster, transport),
                     "version": version(), "git": git_revision(), "machine": machine(),
                     "load_before": load_average(), "started": time.time(), "status": "running",
                     "monitor": {"interval": monitor_interval} if self.mon is not None else
                     {"none": "not asked for" if not monitor else "the testbed is brought up by the call"}}
        _write_meta(d, self.meta)

    def __enter__(self) -> _Recording:
        self.t0 = time.monotonic()
        if self.mon is not None:
            self.mon.start()
        return self

    def result(self, res) -> None:
        """The job's outcome (a ``JobResult``)."""
        self.meta["status"] = "ok" if res.ok else "interrupted" if res.interrupted else "failed"
        self.meta.update(returncodes=list(res.returncodes), failed_rank=res.failed_rank, reason=res.reason or None)

    def __exit__(self, tp, ex, tb) -> None:
        from clusterlab.monitor.provenance import load_average

        meta, d = self.meta, self.dir
        meta["elapsed_s"] = round(time.monotonic() - self.t0, 6)
        try:
            if self.mon is not None:
                self.mon.stop()
                self.mon.write(d / "monitor.parquet")
                meta["monitor"].update({k: self.mon.meta.get(k) for k in ("samples", "late_samples", "error",
                                                                         "capture", "nodes")})
        finally:
            if ex is not None and meta["status"] == "running":
                meta["status"] = ("interrupted" if isinstance(ex, KeyboardInterrupt)
                                  else f"failed: {type(ex).__name__}: {ex}")
            meta["load_after"] = load_average()
            meta["rank_records"] = len(list((d / RANKS_DIR).glob("rank-*.json")))
            _write_meta(d, meta)


def launch(cluster, argv: list[str], n: int, run_dir, *, transport=None, monitor: bool = True,
           monitor_interval: float = 0.1, env: dict | None = None, **options):
    """``cluster.launch(argv, n, transport=transport, **options)`` recording into ``run_dir``
    (see the module); returns the ``JobResult``. ``monitor``: sample the network while the job
    runs (every ``monitor_interval`` seconds).

    >>> import sys, tempfile
    >>> from clusterlab.cluster import Local
    >>> d = tempfile.mkdtemp()
    >>> prog = "from clusterlab.comm import world; c = world(); c.barrier(); c.close()"
    >>> res = Local().launch([sys.executable, "-c", prog], 2, run_dir=d, monitor=False)
    >>> res.ok, sorted(os.listdir(os.path.join(d, "ranks"))), load(d)["ranks"][1]["rank"]
    (True, ['rank-0.json', 'rank-1.json'], 1)
    """
    with _Recording(cluster, run_dir, n, argv, transport, monitor, monitor_interval, env) as rec:
        res = cluster.launch(argv, n, transport=transport, env=rec.env, **options)
        rec.result(res)
    return res


def run(cluster, fn, n: int, *args, run_dir, transport=None, monitor: bool = True, monitor_interval: float = 0.1,
        env: dict | None = None, **options) -> list:
    """``cluster.run(fn, n, *args, transport=transport, **options)`` recording into ``run_dir``
    (see the module): the ranks' return values by rank, or the exception of a failed rank (the
    run directory says which failed either way). ``fn`` is a rank function (``fn(comm, *args)``);
    its communicator is ``world()``'s, so each rank writes its record as a program's does.

    >>> import tempfile
    >>> from clusterlab.cluster import Local
    >>> from clusterlab.cluster.local import _example_sum
    >>> d = tempfile.mkdtemp()
    >>> r = Local().run(_example_sum, 2, run_dir=d, monitor=False)
    >>> r, load(d)["meta"]["status"], [x["rank"] for x in load(d)["ranks"]]
    ([2, 2], 'ok', [0, 1])
    """
    command = [f"{fn.__module__}:{fn.__qualname__}", *(json.dumps(a) for a in args)]
    with _Recording(cluster, run_dir, n, command, transport, monitor, monitor_interval, env) as rec:
        try:
            out = cluster.run(fn, n, *args, transport=transport, env=rec.env, **options)
        except Exception as e:
            if getattr(e, "result", None) is not None:
                rec.result(e.result)
            raise
        rec.meta.update(status="ok", returncodes=[0] * len(out), failed_rank=None, reason=None)
    return out


def is_program_run(run_dir) -> bool:
    """``run_dir`` holds a program run (its ``meta.json`` says ``kind: program``)."""
    p = Path(run_dir) / "meta.json"
    try:
        return json.loads(p.read_text()).get("kind") == KIND
    except (OSError, ValueError, AttributeError):
        return False


def load(run_dir) -> dict:
    """``{"meta": ..., "ranks": [record, ...] by rank}`` of a program run (``ConfigError``: not one)."""
    d = Path(run_dir)
    try:
        meta = json.loads((d / "meta.json").read_text())
    except OSError as e:
        raise ConfigError(f"{d / 'meta.json'}: cannot read: {e.strerror or e}") from None
    except ValueError as e:
        raise ConfigError(f"{d / 'meta.json'}: not JSON ({e})") from None
    if not isinstance(meta, dict) or meta.get("kind") != KIND:
        raise ConfigError(f"{d}: not a program run (meta.json has no \"kind\": \"program\")")
    ranks = []
    for p in sorted((d / RANKS_DIR).glob("rank-*.json"), key=lambda p: int(p.stem.split("-")[1])):
        try:
            rec = json.loads(p.read_text())
        except (OSError, ValueError) as e:
            raise ConfigError(f"{p}: cannot read a rank record ({e})") from None
        if not isinstance(rec, dict) or "rank" not in rec:
            raise ConfigError(f"{p}: not a rank record")
        ranks.append(rec)
    return {"meta": meta, "ranks": ranks}
