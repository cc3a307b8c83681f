"""The sampler: every ``interval`` seconds (0.1 by default) one row per changed counter.

What it records (``metric`` names; counters are increases during the interval ending at
``t``, gauges are values at ``t``; a counter row that would be 0 is left out, so a missing
row means zero):

* per interface (``node``, ``iface``): ``rx_bytes rx_packets tx_bytes tx_packets rx_dropped
  tx_dropped`` (/proc/net/dev of the namespace);
* per root qdisc: ``qdisc_drops qdisc_overlimits`` (counters), ``qdisc_backlog_bytes
  qdisc_qlen`` (gauges); on the testbed the switch ports' qdiscs are the output buffers;
* per node (namespace): the TCP counters of ``procfs.TCP_COUNTERS`` (nstat names such as
  ``TcpRetransSegs``, ``TcpExtTCPTimeouts``, ``TcpExtTCPLossProbes``);
* per testbed host (``Target.rtt``), the round trips of its established IPv4 TCP connections
  that sent since the host's last visit (``netlink.SockDiag``: their ``tcp_info``), gauges in
  ms as run (dilated). One host at a time, in turn, at most every ``rtt_gap`` seconds (0.2: every
  other sample at 0.1 s): a dump walks the kernel's whole TCP hash table whatever the namespace
  holds (``bench/monitor_rtt.py``), so with n hosts each is visited every n x 0.2 s. ``tcp_rtt_ms`` (mean smoothed RTT, srtt),
  ``tcp_rtt_max_ms`` (the largest srtt), ``tcp_rttvar_ms`` (mean RTT variation),
  ``tcp_min_rtt_ms`` (the largest of their minimum RTTs: the longest path's floor) and
  ``tcp_rto_ms`` (the largest current RTO, backoff included), and with two sites
  ``tcp_min_rtt_far_ms`` (the largest minimum RTT of its connections to the other site); the
  table's meta holds the RTTs the topology allows (``rtt_bounds``: ``StarTopo.rtt_bounds``);
* per machine (node ``machine``): ``cpu_user cpu_system cpu_iowait cpu_softirq cpu_idle``
  (fractions of all CPUs' time in the interval; ``cpu_nice`` too: on a shared machine the
  other users run niced; ``cpu_spare`` = idle + I/O wait + niced, what a run at nice 0 could
  have had; niced work is left out of it while the scheduler's autogroup is on, as it then
  does not yield to other sessions), ``disk_read_bytes disk_write_bytes``, and
  ``interval_seconds``, the true length of the interval (a tick can be late; divide by it
  for rates); every sampled node has its own ``interval_seconds`` row too, and its rows carry
  the time its counters were read;
* per host, with ``host_cpu=True``: ``host_cpu_user host_cpu_system`` (CPUs' worth of time
  used by the threads in the host's namespace: 1.0 is one core busy) and ``host_io_wait``
  (threads in uninterruptible sleep, i.e. waiting for the disk, at ``t``; ``procfs.TaskCpu``);
* the target's backing store, with ``backing=<reader>`` (a function returning the bytes read
  and written so far, e.g. ``IscsiTarget.backing_io``: the throttled tgtd's blkio cgroup
  counters): ``backing_read_bytes backing_write_bytes`` (node ``storage_host``, ``st`` unless
  told; the table's meta names it as ``storage_host``);
* the ATM switch (a testbed with ``switch="atm"``), node ``switch``, per port: ``atm_cells_in
  atm_cells_out atm_cells_dropped atm_cells_discarded atm_frames_delivered atm_frames_lost
  atm_cells_wasted atm_cells_line_lost atm_frames_line_lost`` (the cell model's counts per 0.1 s x dilation; ``clusterlab.monitor.atm``),
  and the monitored span's totals per port in the meta (``atm_ports``);
* packet-length histogram: ``len_packets`` and ``len_bytes`` with ``bucket`` b meaning
  frames of 64*b .. 64*b+63 bytes, per sending interface; ``capture_drops`` if the capture
  ring overflowed.

A local run (``Monitor.local()``) samples the root namespace and ``lo``; it then also sees
whatever else the machine sends on loopback.

>>> m = Monitor.local(interval=0.05, capture=False)
>>> with m:
...     _ = sum(range(10**6))
>>> table = m.table()
>>> {"t", "node", "iface", "metric", "bucket", "value"} <= set(table.column_names)
True
>>> "cpu_idle" in set(table.column("metric").to_pylist())
True
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import threading
import time
from collections.abc import Callable

import pyarrow as pa

from clusterlab.monitor import procfs
from clusterlab.monitor.netlink import Rtnl, SockDiag
from clusterlab.net.netns import in_netns

RTT_GAP_S = 0.2  # at most one host's RTT dump per this many seconds (bench/monitor_rtt.py: 1.5-8 ms each)
LINK_COUNTERS = ("rx_bytes", "rx_packets", "tx_bytes", "tx_packets", "rx_dropped", "tx_dropped")
SCHEMA = pa.schema([("t", pa.float64()), ("node", pa.string()), ("iface", pa.string()),
                    ("metric", pa.string()), ("bucket", pa.int32()), ("value", pa.float64())])


@dataclasses.dataclass
class Target:
    """One namespace to sample. ``ns`` None is the monitor's own namespace. ``ifaces``: which
    interfaces (None: all, lo included). ``tcp``: record its TCP counters. ``rtt``: record the
    round trips of its TCP connections (a testbed host's: its sockets are the job's)."""

    node: str
    ns: str | None = None
    ifaces: list[str] | None = None
    tcp: bool = True
    rtt: bool = False


class _Open:
    def __init__(self, t: Target):
        self.t = t
        with in_netns(t.ns):
            self.nl = Rtnl()
            # Files under /proc/thread-self/net stay bound to the namespace they were opened in.
            self.dev = os.open("/proc/thread-self/net/dev", os.O_RDONLY)
            self.fds = [os.open(f"/proc/thread-self/net/{f}", os.O_RDONLY) for f in ("snmp", "netstat")] if t.tcp else []
            self.index = {d["name"]: i for i, d in self.nl.links().items()}
            self.diag = None
            self.rtt_error: str | None = None
            if t.rtt:
                try:
                    self.diag = SockDiag()
                except OSError as e:  # no NETLINK_SOCK_DIAG here: the other counters still count
                    self.rtt_error = f"{t.node}: no socket diagnostics ({e.strerror or e})"
        self.segs: dict[int, int] = {}  # connection cookie -> segments sent at the last sample
        self.readers = [procfs.CounterReader(procfs.TCP_COUNTERS) for _ in self.fds]

    def tcp(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for fd, r in zip(self.fds, self.readers, strict=True):
            out.update(r.read(_pread_all(fd).decode()))
        return out

    def links(self) -> dict[str, dict[str, int]]:
        return procfs.parse_net_dev(_pread_all(self.dev).decode())

    def rtt(self, sites: dict | None = None) -> dict[str, float] | None:
        """The round trips (ms) of the connections that sent since the last call (None: none did);
        ``sites`` (address -> site): also the largest minimum RTT of those between two sites."""
        try:
            conns = self.diag.tcp((socket.AF_INET,))  # the testbed's addresses; half the cost of both families
        except OSError as e:  # e.g. no tcp_diag module: stop asking, say why in the meta (rtt_error)
            self.rtt_error = f"{self.t.node}: socket diagnostics failed ({e.strerror or e})"
            self.diag.close()
            self.diag = None
            return None
        prev, self.segs = self.segs, {c["cookie"]: c["segs_out"] for c in conns}
        active = [c for c in conns if c["segs_out"] > prev.get(c["cookie"], 0)]
        if not active:
            return None
        n = len(active)
        out = {"tcp_rtt_ms": sum(c["rtt_us"] for c in active) / n / 1e3,
               "tcp_rtt_max_ms": max(c["rtt_us"] for c in active) / 1e3,
               "tcp_rttvar_ms": sum(c["rttvar_us"] for c in active) / n / 1e3,
               "tcp_min_rtt_ms": max(c["min_rtt_us"] for c in active) / 1e3,
               "tcp_rto_ms": max(c["rto_us"] for c in active) / 1e3}
        far = [c["min_rtt_us"] for c in active if sites and c.get("src") in sites and c.get("dst") in sites
               and sites[c["src"]] != sites[c["dst"]]]
        if far:
            out["tcp_min_rtt_far_ms"] = max(far) / 1e3
        return out

    def close(self):
        self.nl.close()
        if self.diag is not None:
            self.diag.close()
        os.close(self.dev)
        for fd in self.fds:
            os.close(fd)


def _pread_all(fd: int) -> bytes:
    chunks, off = [], 0
    while True:
        b = os.pread(fd, 65536, off)
        if not b:
            return b"".join(chunks)
        chunks.append(b)
        off += len(b)


class Monitor:
    """Sample ``targets`` every ``interval`` seconds in a background thread.

    ``capture``: a ``(ns, iface)`` capture point for the packet-length histogram (True: the
    default for the setup; False/None: no histogram). ``dilation`` is stored with the table so
    that reports can show undilated time.
    """

    def __init__(self, targets: list[Target], interval: float = 0.1, capture=None, dilation: float = 1.0,
                 disk: bool = True, host_cpu: bool = False, backing: Callable[[], dict] | None = None,
                 storage_host: str = "st", atm_trace: str | None = None):
        if not 0.005 <= interval <= 60:
            from clusterlab.errors import ConfigError
            raise ConfigError(f"monitor interval must be 0.005..60 s, got {interval}")
        self.targets, self.interval, self.capture_point, self.dilation = targets, interval, capture, dilation
        self.disk = disk
        self.host_cpu, self.backing, self.storage_host = host_cpu, backing, storage_host
        self.atm_trace = atm_trace
        self._tasks: procfs.TaskCpu | None = None
        self.cols: dict[str, list] = {c: [] for c in SCHEMA.names}
        self.late = 0
        self.error: str | None = None
        self.samples = 0
        self.sample_seconds = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._capture = None
        self.started_at = None
        self.meta: dict = {}
        self.rtt_bounds: dict | None = None  # the RTTs the emulated topology allows (for_testbed)
        self.rtt_gap = RTT_GAP_S  # seconds between two hosts' RTT dumps (each walks the kernel's TCP hash)
        self._rtt_last, self._rtt_next = -float("inf"), 0

    @classmethod
    def local(cls, interval: float = 0.1, capture: bool = True) -> Monitor:
        """The local machine: root namespace TCP counters, every interface, capture on lo."""
        return cls([Target("local", None, None, True)], interval, ("", "lo") if capture else None)

    @classmethod
    def for_testbed(cls, tb, interval: float = 0.1, capture: bool = True, host_cpu: bool = False,
                    backing: Callable[[], dict] | None = None, ifaces: tuple = ("eth0",),
                    storage_host: str = "st") -> Monitor:
        """Every host (``ifaces``, their egress qdiscs, its TCP counters) and every switch port
        (the output buffers), with the histogram captured at the switch; ``host_cpu``: each
        host's CPU; ``backing``: the storage target's backing store I/O (a reader of its
        ``read_bytes``/``write_bytes``, e.g. ``IscsiTarget.backing_io``), filed under
        ``storage_host``, the host running the target."""
        targets = [Target(h.name, h.ns, list(ifaces), True, rtt=True) for h in tb.hosts]
        targets.append(Target("switch", tb.switch.ns, [h.port for h in tb.hosts], False))
        atm = tb.atm.trace if getattr(tb, "atm", None) is not None else None
        mon = cls(targets, interval, (tb.switch.ns, None) if capture else None, tb.topo.dilation,
                  host_cpu=host_cpu, backing=backing, storage_host=storage_host, atm_trace=atm)
        mon.rtt_bounds = tb.topo.rtt_bounds()
        return mon

    # --- running -----------------------------------------------------------------------------
    def __enter__(self) -> Monitor:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> Monitor:
        self._open = [_Open(t) for t in self.targets]
        if self.capture_point:
            from clusterlab.monitor.capture import PacketCapture
            ns, iface = self.capture_point
            self._capture = PacketCapture(ns or None, iface or None).start()
        if self.host_cpu:
            self._tasks = procfs.TaskCpu({t.node: os.path.join("/run/netns", t.ns) for t in self.targets if t.ns})
        self.started_at = time.time()
        self._t0 = time.monotonic()
        self._prev: dict = {}
        self._sample(first=True)
        self._thread = threading.Thread(target=self._loop, name="monitor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=5 + self.interval)
        self._thread = None
        if self._capture is not None:
            self._capture.drain()
        if self.error is None:
            try:
                self._sample()  # the last partial interval
            except Exception as e:
                self.error = f"last sample failed: {e}"
        if self._capture is not None:
            self._capture.stop()
        for o in self._open:
            o.close()
        atm = self._atm_rows()
        rtt_errors = sorted({o.rtt_error for o in self._open if o.rtt_error})
        self.meta = {"interval": self.interval, "dilation": self.dilation, "started": self.started_at,
                     "duration": time.monotonic() - self._t0, "samples": self.samples, "late_samples": self.late,
                     "sample_cost_seconds": round(self.sample_seconds, 3), "error": self.error,
                     "nodes": [t.node for t in self.targets], "host_cpu": self.host_cpu,
                     "storage_host": self.storage_host if self.backing is not None else None,
                     "capture": None if self._capture is None else
                     {"packets": self._capture.seen, "drops": self._capture.drops},
                     **({"atm_ports": atm} if atm is not None else {}),
                     **({"rtt_bounds": self.rtt_bounds} if self.rtt_bounds is not None else {}),
                     **({"rtt_error": "; ".join(rtt_errors)} if rtt_errors else {})}

    def _atm_rows(self) -> dict | None:
        """The ATM switch's per-port counts of the monitored span, as rows of node ``switch``
        (metrics ``atm_*``, interface = port; the switch writes them every 0.1 s x dilation);
        returns the span's totals per port for the meta."""
        if not self.atm_trace:
            return None
        from clusterlab.monitor.atm import FIELDS, AtmTrace

        tr = AtmTrace.read(self.atm_trace)
        if tr is None:
            return None
        end = self.started_at + (time.monotonic() - self._t0)
        for r in tr.records:
            if self.started_at <= r["t"] <= end:
                for f in FIELDS:
                    if f != "max_queue_cells" and r[f]:
                        self._emit(r["t"] - self.started_at, "switch", r["port"], f"atm_{f}", -1, r[f])
        return tr.totals(self.started_at, end)

    def _loop(self) -> None:
        nxt = self._t0 + self.interval
        while not self._stop.is_set():
            delay = nxt - time.monotonic()
            if delay > 0 and self._stop.wait(delay):
                break
            try:
                self._sample()
            except Exception as e:  # a namespace vanished under us: keep what we have, say why
                self.error = f"sampling stopped at t={time.monotonic() - self._t0:.2f}s: {e}"
                break
            nxt += self.interval
            now = time.monotonic()
            if now > nxt:  # fell behind: skip the missed ticks, count them
                missed = int((now - nxt) / self.interval) + 1
                self.late += missed
                nxt += missed * self.interval

    # --- one sample ------------------------------------------------------------------------
    def _emit(self, t, node, iface, metric, bucket, value):
        c = self.cols
        c["t"].append(t)
        c["node"].append(node)
        c["iface"].append(iface)
        c["metric"].append(metric)
        c["bucket"].append(bucket)
        c["value"].append(float(value))

    def _counter(self, t, key, node, iface, metric, value, first, bucket=-1):
        old = self._prev.get(key)
        self._prev[key] = value
        # a counter that went down was reset (e.g. the target's cgroup removed before the last
        # sample): no increase to report, and the next one counts from the new value
        if not first and old is not None and value > old:
            self._emit(t, node, iface, metric, bucket, value - old)

    def _sample(self, first: bool = False) -> None:
        s0 = time.perf_counter()
        t = time.monotonic() - self._t0
        rtt_open = [o for o in self._open if o.diag is not None]
        self._rtt_turn = None  # one host's round trips per sample, at most every rtt_gap seconds
        if rtt_open and s0 - self._rtt_last >= 0.9 * self.rtt_gap:  # ticks jitter: 0.9 keeps every other one
            self._rtt_turn = rtt_open[self._rtt_next % len(rtt_open)]
            self._rtt_next += 1
            self._rtt_last = s0
        if not first:  # the true length of this interval (ticks can be late): rates divide by it
            self._emit(t, "machine", "", "interval_seconds", -1, t - self._prev.get("t", 0.0))
        self._prev["t"] = t
        for o in self._open:
            node = o.t.node
            # each node's rows carry the time its counters were read, and the true interval
            # since its previous read: visiting 100 namespaces takes a while, and rates must
            # not be skewed by where in the visit a node came
            t = time.monotonic() - self._t0
            if not first:
                self._emit(t, node, "", "interval_seconds", -1, t - self._prev.get(("t", node), 0.0))
            self._prev[("t", node)] = t
            links = o.links()
            qd = o.nl.root_qdiscs()
            for name, d in links.items():
                if o.t.ifaces is not None and name not in o.t.ifaces:
                    continue
                for m in LINK_COUNTERS:
                    if m in d:
                        self._counter(t, (node, name, m), node, name, m, d[m], first)
                q = qd.get(o.index.get(name, -1))
                if q and "drops" in q:
                    self._counter(t, (node, name, "qd"), node, name, "qdisc_drops", q["drops"], first)
                    self._counter(t, (node, name, "qo"), node, name, "qdisc_overlimits", q["overlimits"], first)
                    key = (node, name, "qb")
                    if not first and (q["backlog"] or self._prev.get(key)):
                        self._emit(t, node, name, "qdisc_backlog_bytes", -1, q["backlog"])
                        self._emit(t, node, name, "qdisc_qlen", -1, q["qlen"])
                    self._prev[key] = q["backlog"]
            if o.t.tcp:
                tcp = o.tcp()
                for m in procfs.TCP_COUNTERS:
                    if m in tcp:
                        self._counter(t, (node, m), node, "", m, tcp[m], first)
            if o.diag is not None and o is self._rtt_turn:
                rtt = o.rtt((self.rtt_bounds or {}).get("sites"))
                if rtt and not first:
                    for m, v in rtt.items():
                        self._emit(t, node, "", m, -1, v)
        with open("/proc/stat") as f:
            cpu = procfs.parse_cpu(f.read())
        old = self._prev.get("cpu")
        self._prev["cpu"] = cpu
        if old is not None and not first:
            total = procfs.cpu_total(cpu) - procfs.cpu_total(old)
            if total > 0:
                for k in ("user", "nice", "system", "iowait", "softirq", "idle"):
                    self._emit(t, "machine", "", f"cpu_{k}", -1, (cpu[k] - old[k]) / total)
                yields = not procfs.sched_autogroup()
                spare = procfs.cpu_spare(cpu, yields) - procfs.cpu_spare(old, yields)
                self._emit(t, "machine", "", "cpu_spare", -1, spare / total)
        t = time.monotonic() - self._t0
        if self.disk:
            with open("/proc/diskstats") as f:
                disks = procfs.parse_diskstats(f.read())
            r, w = sum(v[0] for v in disks.values()), sum(v[1] for v in disks.values())
            self._counter(t, "dr", "machine", "", "disk_read_bytes", r, first)
            self._counter(t, "dw", "machine", "", "disk_write_bytes", w, first)
        if self._tasks is not None:
            dt = t - self._prev.get("tasks_t", 0.0)
            self._prev["tasks_t"] = t
            for node, (ut, st, dstate) in self._tasks.sample().items():
                if not first and dt > 0:
                    self._emit(t, node, "", "host_cpu_user", -1, ut / dt)
                    self._emit(t, node, "", "host_cpu_system", -1, st / dt)
                    self._emit(t, node, "", "host_io_wait", -1, dstate)
        if self.backing is not None:
            io = self.backing()
            self._counter(t, "br", self.storage_host, "", "backing_read_bytes", io["read_bytes"], first)
            self._counter(t, "bw", self.storage_host, "", "backing_write_bytes", io["write_bytes"], first)
        if self._capture is not None:
            snap = self._capture.snapshot()
            node = "switch" if self._capture.ns else "local"
            for iface, (pk, by) in snap.items():
                prev = self._prev.get(("hist", iface))
                self._prev[("hist", iface)] = (pk, by)
                if first:
                    continue
                for b, n in enumerate(pk):
                    dn = n - (prev[0][b] if prev else 0)
                    if dn:
                        self._emit(t, node, iface, "len_packets", b, dn)
                        self._emit(t, node, iface, "len_bytes", b, by[b] - (prev[1][b] if prev else 0))
            self._counter(t, "capdrops", node, "", "capture_drops", self._capture.drops, first)
        self.samples += 1
        self.sample_seconds += time.perf_counter() - s0

    # --- results -----------------------------------------------------------------------------
    def table(self) -> pa.Table:
        """The tidy table: columns t, node, iface, metric, bucket, value (metadata: interval,
        dilation, start time, samples, late samples, capture packets and drops)."""
        tbl = pa.Table.from_pydict(self.cols, schema=SCHEMA)
        return tbl.replace_schema_metadata({"clusterlab.monitor": json.dumps(self.meta)})

    def write(self, path: str | os.PathLike) -> str:
        """Write the table atomically: Parquet, or CSV when ``path`` ends in .csv (its
        metadata then goes to ``<path>.meta.json``)."""
        return write_table(self.table(), path)


def write_table(tbl: pa.Table, path) -> str:
    from clusterlab._atomic import atomic_open, atomic_path

    path = str(path)
    if path.endswith(".csv"):
        import pyarrow.csv as pcsv

        with atomic_path(path) as tmp:
            pcsv.write_csv(tbl, str(tmp))
        meta = (tbl.schema.metadata or {}).get(b"clusterlab.monitor", b"{}").decode()
        with atomic_open(path + ".meta.json") as f:
            f.write(meta)
    else:
        import pyarrow.parquet as pq

        with atomic_path(path) as tmp:
            pq.write_table(tbl, str(tmp))
    return path


def read_table(path) -> tuple[pa.Table, dict]:
    """A monitor table and its metadata, from Parquet or CSV."""
    from clusterlab.errors import ConfigError

    path = str(path)
    try:
        if path.endswith(".csv"):
            import pyarrow.csv as pcsv

            tbl = pcsv.read_csv(path, convert_options=pcsv.ConvertOptions(column_types=SCHEMA))
            meta = {}
            with contextlib.suppress(OSError, ValueError):
                meta = json.load(open(path + ".meta.json"))
        else:
            import pyarrow.parquet as pq

            with pq.ParquetFile(path) as f:  # one file (read_table's dataset layer imports pandas)
                tbl = f.read()
            meta = json.loads((tbl.schema.metadata or {}).get(b"clusterlab.monitor", b"{}"))
    except (OSError, ValueError, pa.ArrowException) as e:
        raise ConfigError(f"{path}: cannot read a monitor table: {' '.join(str(e).split())}") from None
    if not isinstance(meta, dict):
        meta = {}
    missing = set(SCHEMA.names) - set(tbl.column_names)
    if missing:
        raise ConfigError(f"{path}: not a monitor table (missing columns {sorted(missing)})")
    return tbl, meta
