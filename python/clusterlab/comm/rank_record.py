"""One rank's time split, for a program run with a run directory (``clusterlab run --run-dir``).

When the launcher sets ``CLUSTERLAB_RUN_DIR`` (``rendezvous.contract.ENV_RUN_DIR``), ``world()``
hands its communicator to :func:`attach`: every public communication call (``send``, ``recv``,
``recv_any``, ``sendrecv`` and the collectives) is timed, the outermost call only (a collective's
own sends are inside it), and the rank's record is written when the communicator closes (the
program's ``close()`` or the exit hook; a rank failing with an uncaught exception writes it
before telling its peers, with ``error``), to ``RUN_DIR/ranks/rank-N.json`` (atomically):

* ``wall_s``: from the mesh being joined (``world()`` returned) to the close;
  ``setup_s``: from the process's start to that point (interpreter, imports, mesh set-up);
* ``comm_s``: time blocked in communication calls (at most ``wall_s``); ``calls``: their number;
* ``bytes_sent``/``bytes_recv``/``msgs_sent``/``msgs_recv``: the communicator's counters;
* ``connections``: ``persistent`` or ``per_call``; with per-call connections
  ``connection_setup_s``: the time the collectives spent setting up and tearing down their
  connections (inside ``comm_s``);
* ``retransmissions``, ``timeouts``, ``rto_time_ms``: summed over the rank's connections from
  their ``TCP_INFO`` (``tcpi_total_retrans``, ``tcpi_total_rto``, ``tcpi_total_rto_time``,
  Linux 6.7+ for the last two); ``rto_wait_s``: the longest wait of one connection on RTOs
  (``net.tcp_info.rto_delta``), at most ``comm_s``;
* the split: ``compute_s = wall_s - comm_s``, ``rto_wait_s``, ``transfer_s = comm_s -
  rto_wait_s`` (the three add up to ``wall_s``); ``cpu_s``: the process's CPU seconds in
  ``wall_s``.

On MPI's own transport (``CLUSTERLAB_BACKEND=mpi``) the calls are timed the same way but there
is no ``TCP_INFO`` (MPI's sockets are MPI's): the RTO fields are None and ``transfer_s`` is the
whole communication time. Timing wraps each call in one Python frame (a few hundred
nanoseconds), only in a run with a run directory.
"""

from __future__ import annotations

import functools
import os
import socket
import threading
import time

TIMED_CALLS = ("send", "recv", "recv_any", "sendrecv", "barrier", "bcast", "scatter", "gather", "allgather",
               "alltoall", "alltoallv", "reduce", "allreduce")
RANKS_DIR = "ranks"


def record_path(run_dir: str, rank: int) -> str:
    """Where rank ``rank`` writes its record in ``run_dir``."""
    return os.path.join(run_dir, RANKS_DIR, f"rank-{rank}.json")


def _process_start_epoch() -> float | None:
    """When this process started (seconds since the epoch), from /proc/self/stat."""
    try:
        with open("/proc/self/stat") as f:
            stat = f.read()
        ticks = int(stat[stat.rindex(")") + 2:].split()[19])  # field 22: starttime
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class RankRecorder:
    """Times ``comm``'s communication calls and writes the rank's record once (see the module)."""

    def __init__(self, comm, run_dir: str, node: str | None = None):
        from clusterlab.net import tcp_info

        self.comm, self.run_dir = comm, run_dir
        self.node = node or socket.gethostname()
        self.comm_s = 0.0
        self.calls = 0
        self._depth = threading.local()
        self.written: str | None = None
        self._t0, self._c0, self._epoch0 = time.perf_counter(), time.process_time(), time.time()
        start = _process_start_epoch()
        self.setup_s = max(0.0, self._epoch0 - start) if start is not None else None
        self._rto0 = tcp_info.rto_counters(self._tcp_infos())
        for name in TIMED_CALLS:
            fn = getattr(comm, name, None)
            if fn is not None:
                setattr(comm, name, self._timed(fn))
        close = comm.close

        @functools.wraps(close)
        def close_and_record(*a, **kw):
            self.write()
            return close(*a, **kw)

        comm.close = close_and_record

    def _timed(self, fn):
        depth = self._depth

        @functools.wraps(fn)
        def timed(*args, **kw):
            d = getattr(depth, "n", 0)
            if d:
                return fn(*args, **kw)
            depth.n = 1
            t = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                self.comm_s += time.perf_counter() - t
                self.calls += 1
                depth.n = 0

        return timed

    def _stats(self) -> dict:
        try:
            return self.comm.stats()
        except Exception:  # a closed or failed communicator: no counters
            return {}

    @staticmethod
    def _infos_of(st: dict) -> dict:
        return {p: v["tcp_info"] for p, v in (st.get("peers") or {}).items() if isinstance(v.get("tcp_info"), dict)}

    def _tcp_infos(self) -> dict:
        return self._infos_of(self._stats())

    def record(self, error: str | None = None) -> dict:
        """The rank's record now (see the module); ``error``: why the rank is failing."""
        from clusterlab.net import tcp_info

        wall = time.perf_counter() - self._t0
        st = self._stats()
        infos = self._infos_of(st)
        comm_s = min(self.comm_s, wall)
        out = {"rank": self.comm.rank, "size": self.comm.size, "node": self.node, "pid": os.getpid(),
               "mesh": st.get("backend"), "started": self._epoch0,
               "setup_s": round(self.setup_s, 6) if self.setup_s is not None else None,
               "wall_s": round(wall, 6), "comm_s": round(comm_s, 6), "calls": self.calls,
               "cpu_s": round(time.process_time() - self._c0, 6), "error": error}
        for k in ("bytes_sent", "bytes_recv", "msgs_sent", "msgs_recv"):
            out[k] = int(st.get(k, 0))
        out["transport_in_force"] = (st.get("transport") or {}).get("in_force")
        out["connections"] = st.get("connections", "persistent")
        if "setup_seconds" in st:  # per-call connections: set up and torn down inside every collective
            out["connection_setup_s"] = round(min(float(st["setup_seconds"]) + float(st.get("teardown_seconds") or 0.0),
                                                  comm_s), 6)
        if infos:
            after = tcp_info.rto_counters(infos)
            d = tcp_info.rto_delta(self._rto0, after)
            tot = d["total"]
            out.update(retransmissions=int(tot.get("total_retrans", 0)), timeouts=int(tot.get("total_rto", 0)),
                       rto_time_ms=int(tot.get("total_rto_time_ms", 0)),
                       rto_wait_s=round(min(d["rto_wait_s"], comm_s), 6),
                       per_peer={str(p): c for p, c in d["per_connection"].items()})
        else:  # MPI's own transport, or a world of one rank: no TCP_INFO of ours
            out.update(retransmissions=None, timeouts=None, rto_time_ms=None, rto_wait_s=None, per_peer={})
        rto = out["rto_wait_s"] or 0.0
        out.update(compute_s=round(wall - comm_s, 6), transfer_s=round(comm_s - rto, 6))
        return out

    def write(self, error: str | None = None) -> str | None:
        """Write the record (the first call only; ``error``: the rank is failing, its split is up
        to the failure); its path, or None when it could not be written (the rank's exit is not
        failed for it: the run's meta counts the records)."""
        import json

        from clusterlab._atomic import atomic_open

        if self.written is not None:
            return self.written
        path = record_path(self.run_dir, self.comm.rank)
        self.written = path
        try:
            rec = self.record(error)
            with atomic_open(path) as f:
                json.dump(rec, f, indent=1)
        except OSError as e:
            os.write(2, f"clusterlab: rank {self.comm.rank}: cannot write {path}: {e.strerror or e}\n".encode())
            return None
        return path


def attach(comm, run_dir: str | None, node: str | None = None) -> RankRecorder | None:
    """Record ``comm``'s rank into ``run_dir`` (None: nothing)."""
    if not run_dir:
        return None
    return RankRecorder(comm, run_dir, node)
