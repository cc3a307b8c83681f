"""bonnie-style storage benchmark over iSCSI on the testbed (issue 13, seed 001 Fig. 4).

One testbed (``hosts`` compute hosts plus the storage host ``st``, links at ``rate``), tgtd on
``st`` with one sparse LUN of ``size`` bytes per initiator. For each count n in
``initiators``, initiators 0..n-1 run at once: sequential block write of ``size`` bytes in
``block``-byte commands, then (after all have written) sequential read of the same, checked
against the written pattern. Each initiator is a thread of this process that has entered its
host's namespace (its iSCSI socket lives there); the block loops run in Rust without the GIL.
Aggregate MB/s = all bytes / (last finish - first start) of the phase.

Local baseline on this machine: the same block loop on a local file (write + fsync, read), and
``bonnie++`` on that file system when installed.

This module measures on a testbed and a target it is given; ``clusterlab.experiments.storage_bench``
builds them (``run``, ``mining_from_target``) and removes them on return, on exceptions and on
Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

from clusterlab.errors import ConfigError

UNSHAPED_RATE = "100Gbit"  # "no shaping": far above what veth moves on this machine


def _load() -> list[float]:
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def parse_counts(text: str) -> list[int]:
    """``"1..8"`` -> [1, 2, 4, 8] (powers of two, and the end); ``"1,3"`` -> [1, 3].

    >>> parse_counts("1..8"), parse_counts("1..6"), parse_counts("2,3")
    ([1, 2, 4, 8], [1, 2, 4, 6], [2, 3])
    """
    try:
        if ".." in text:
            lo, hi = (int(x) for x in text.split(".."))
            if not 1 <= lo <= hi:
                raise ValueError
            out, n = [], lo
            while n < hi:
                out.append(n)
                n *= 2
            out.append(hi)
        else:
            out = [int(x) for x in text.split(",")]
    except ValueError:
        raise ConfigError(f"--initiators must be N, LO..HI or a comma list of counts, got {text!r}") from None
    if not out or min(out) < 1:
        raise ConfigError(f"--initiators counts must be >= 1 and LO <= HI, got {text!r}")
    return sorted(set(out))


def _phase(luns: list, n: int, op: str, size: int, block: int, seed: int, barrier: threading.Barrier,
           out: list, errors: list, namespaces: list | None = None) -> None:
    """All n initiators run ``op`` at once; out[i] = (start, end, Transfer). Initiator i's
    thread (and the threads it starts) work inside ``namespaces[i]``, so that the monitor
    counts their CPU for that host."""
    from clusterlab.net.netns import in_netns

    def one(i: int) -> None:
        with in_netns(namespaces[i] if namespaces else None):
            transfer(i)

    def transfer(i: int) -> None:
        try:
            barrier.wait(timeout=60)
            t0 = time.monotonic()
            fn = luns[i].write_sequential if op == "write" else luns[i].read_sequential
            tr = fn(size, block=block, seed=seed + i)
            out[i] = (t0, time.monotonic(), tr)
        except BaseException as e:  # reported by the caller, naming the initiator
            errors.append(f"initiator {i}: {op}: {e}")
            barrier.abort()

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except BaseException:
        # Interrupted (Ctrl-C, SIGTERM): a LUN still in a transfer would make its close() wait
        # for that transfer to end (seconds to minutes on a slow link). Forget it instead; the
        # target's teardown ends its session and the thread dies with the process.
        for i, t in enumerate(threads):
            if t.is_alive():
                luns[i] = None
        raise


def open_all(tb, target, n: int, timeout: int = 30, connections: int = 1) -> list:
    """Open LUN i of ``target`` from its client host, for i < n (each session's socket in that
    host's namespace)."""
    return _open_all(tb, target, n, timeout, connections)


def _open_all(tb, target, n: int, timeout: int, connections: int = 1) -> list:
    from clusterlab.net.netns import in_netns
    from clusterlab.storage.iscsi import open_lun

    luns = []
    for i in range(n):
        d = target.luns[i]
        with in_netns(tb.host(d["client"]).ns):  # the session's socket stays in the host's namespace
            luns.append(open_lun(d["portal"], d["iqn"], d["lun"], timeout=timeout, connections=connections))
    return luns


def phase_usage(tbl, storage_host: str, rate_bps: float | None, backing_bps: float | None = None,
                storage_port: str | None = None) -> dict:
    """What the monitor saw during one phase, averaged over it: the storage host's link (MB/s
    each way, and as a fraction of the link rate), the machine's CPU (``cpu_busy``: time not
    idle, not in I/O wait and not niced, i.e. used by this run, since everything else on the
    shared machine runs niced), the CPU of the target's threads (``target_cpu``, cores) and of
    the initiators' (``initiator_cpu``, cores, summed over hosts), the backing store's MB/s
    (tgtd's cgroup when throttled, else the machine's disks). ``bottleneck`` names the resource
    nearest its limit: ``network`` (st's link >= 85 % of the rate), ``backing store``
    (throttled, and it moved >= 85 % of its limit), ``cpu`` (>= 90 % busy: target, initiators
    and the emulated switch share the machine's cores), ``incast`` (the switch dropped packets
    at the output port to the target, ``storage_port``: many initiators sending at once
    overflow its buffer and TCP backs off), else ``latency`` (nothing full: the commands in
    flight wait for round trips and the target's turn). ``port_drops`` and
    ``retransmissions`` (all hosts) are reported too."""
    rows = tbl.to_pylist()
    secs = sum(r["value"] for r in rows if r["node"] == "machine" and r["metric"] == "interval_seconds") or 1e-9

    def total(node, metric):
        return sum(r["value"] for r in rows if (node is None or r["node"] == node) and r["metric"] == metric)

    def mean(metric, node="machine"):
        v = [r["value"] for r in rows if r["node"] == node and r["metric"] == metric]
        return sum(v) / len(v) if v else 0.0

    rx, tx = total(storage_host, "rx_bytes") / secs / 1e6, total(storage_host, "tx_bytes") / secs / 1e6
    throttled = any(r["metric"].startswith("backing_") for r in rows)
    if throttled:
        # the monitor files these under "st" whichever host runs the target (one target per testbed)
        disk = (total(None, "backing_read_bytes") + total(None, "backing_write_bytes")) / secs / 1e6
    else:
        disk = (total("machine", "disk_read_bytes") + total("machine", "disk_write_bytes")) / secs / 1e6
    busy = 1.0 - mean("cpu_idle") - mean("cpu_iowait") - mean("cpu_nice")
    hosts = {r["node"] for r in rows if r["metric"] == "host_cpu_user"}
    cores = {h: mean("host_cpu_user", h) + mean("host_cpu_system", h) for h in hosts}
    link = max(rx, tx) / (rate_bps / 8 / 1e6) if rate_bps else None
    drops = sum(r["value"] for r in rows if r["node"] == "switch" and r["iface"] == storage_port
                and r["metric"] == "qdisc_drops") if storage_port else 0
    retrans = total(None, "TcpRetransSegs")
    if link is not None and link >= 0.85:
        neck = "network"
    elif backing_bps and disk >= 0.85 * backing_bps / 1e6:
        neck = "backing store"
    elif busy >= 0.9:
        neck = "cpu"
    elif drops:
        neck = "incast"
    else:
        neck = "latency"
    out = {"seconds": round(secs, 2), "st_rx_mbps": round(rx, 2), "st_tx_mbps": round(tx, 2),
           "st_link_utilization": None if link is None else round(link, 3), "cpu_busy": round(busy, 3),
           "cpu_nice_others": round(mean("cpu_nice"), 3), "cpu_iowait": round(mean("cpu_iowait"), 3),
           ("backing_mbps" if throttled else "disk_mbps"): round(disk, 2), "port_drops": int(drops),
           "retransmissions": int(retrans), "bottleneck": neck}
    if cores:
        out["target_cpu"] = round(cores.get(storage_host, 0.0), 3)
        out["target_io_wait_threads"] = round(mean("host_io_wait", storage_host), 2)
        out["initiator_cpu"] = round(sum(v for h, v in cores.items() if h != storage_host), 3)
    return out


def _rows(out: list, size: int) -> tuple[list[dict], float]:
    rows = [{"initiator": i, "mbps": round(tr.mbps, 2), "seconds": round(tr.seconds, 4), "bad_blocks": tr.bad_blocks}
            for i, (_, _, tr) in enumerate(out)]
    span = max(e for _, e, _ in out) - min(s for s, _, _ in out)
    return rows, round(len(out) * size / span / 1e6, 2)


def tcp_baseline(tb, server, client, seconds: float = 2.0, reverse: bool = False) -> dict:
    """iperf3 (one TCP stream) from ``client`` to ``server`` (``reverse``: server to client),
    on the same links and at the same time as the iSCSI runs: what the link gives TCP now
    (under this machine's load), the yardstick for the initiators' MB/s."""
    if shutil.which("iperf3") is None:
        return {"error": "iperf3 is not installed"}
    import json as _json

    srv = server.popen(["iperf3", "-s", "-1", "-B", server.addr], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        for _ in range(50):  # wait for its listening socket
            if f"{server.addr}:5201" in server.run(["ss", "-Hltn"], check=False).stdout:
                break
            time.sleep(0.1)
        p = client.run(["iperf3", "-c", server.addr, "-t", str(seconds), "-J", *(["-R"] if reverse else [])],
                       timeout=seconds + 30, check=False)
        try:
            end = _json.loads(p.stdout)["end"]["sum_received"]
            return {"mbps": round(end["bytes"] / end["seconds"] / 1e6, 2), "seconds": round(end["seconds"], 2)}
        except (ValueError, KeyError):
            return {"error": (p.stderr or p.stdout).strip()[-200:]}
    finally:
        if srv.poll() is None:
            srv.kill()
        srv.wait(timeout=10)


def bonnie_phases(tb, target, luns: list, n: int, size: int, block: int, seed: int = 0, monitor: bool = True,
                  rate_bps: float | None = None, backing_bps: int | None = None, ifaces=("eth0",)) -> dict:
    """Initiators 0..n-1 (``luns``, opened on ``target``'s LUNs) write ``size`` bytes at once,
    then read them back (checked): ``{"write": {...}, "read": {...}}`` with the aggregate and
    per-initiator MB/s and, with ``monitor``, ``phase_usage`` of each phase."""
    from clusterlab.monitor.sampler import Monitor

    res = {}
    for op in ("write", "read"):
        out, errors = [None] * n, []
        mon = Monitor.for_testbed(tb, interval=0.2, capture=False, host_cpu=True,
                                  backing=target.backing_io if backing_bps is not None else None,
                                  ifaces=ifaces) if monitor else None
        with mon or contextlib.nullcontext():
            _phase(luns, n, op, size, block, seed, threading.Barrier(n), out, errors,
                   [tb.host(d["client"]).ns for d in target.luns])
        if errors:
            raise OSError("; ".join(errors))
        rows, agg = _rows(out, size)
        res[op] = {"aggregate_mbps": agg, "per_initiator": rows}
        if mon is not None:
            res[op]["monitor"] = phase_usage(mon.table(), target.host.name, rate_bps, backing_bps,
                                             None if ifaces != ("eth0",) else target.host.port)
    if any(r["bad_blocks"] for r in res["read"]["per_initiator"]):
        raise OSError(f"{n} initiators: read back differs from what was written: {res['read']['per_initiator']}")
    return res


def local_baseline(size: int, block: int, directory: str | None = None, bonnie: bool = True) -> dict:
    """The block loop on a local file, and bonnie++ (block write/read K/s) when installed."""
    from clusterlab.storage.iscsi import local_sequential

    d = tempfile.mkdtemp(prefix="clab-storage-", dir=directory)
    try:
        w, r = local_sequential(os.path.join(d, "local.img"), size, block)
        res = {"dir": d, "write_mbps": round(w.mbps, 2), "read_mbps": round(r.mbps, 2), "bad_blocks": r.bad_blocks}
        os.unlink(os.path.join(d, "local.img"))
        if bonnie and shutil.which("bonnie++"):
            res["bonnie"] = run_bonnie(d, size)
        else:
            res["bonnie"] = None if bonnie else "not run"
        return res
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run_bonnie(directory: str, size: int, timeout: float = 300.0) -> dict:
    """bonnie++ block write and read on ``directory``: MB/s (bonnie prints KiB/s).

    bonnie++ wants a file of twice RAM to defeat the cache; with -r it is told a smaller RAM
    (size/2) so a small run is allowed; reads may then come from the page cache, as ours do.
    """
    mib = max(1, size >> 20)
    cmd = ["bonnie++", "-q", "-d", directory, "-s", f"{mib}M", "-r", str(max(1, mib // 2)), "-n", "0",
           "-f", "-b", "-u", "root"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"bonnie++ did not finish in {timeout} s"}
    line = next((ln for ln in p.stdout.splitlines() if ln.count(",") > 10), None)
    if p.returncode != 0 or line is None:
        return {"error": (p.stderr or p.stdout).strip()[-300:]}
    f = line.split(",")
    # CSV (bonnie++ 1.98/2.00): [5] size, [11] block write K/s, [13] rewrite K/s, [17] block read K/s;
    # "+++++" means the phase took under 500 ms, too short for bonnie++ to report.
    num = lambda s: round(int(s) * 1024 / 1e6, 2) if s.strip().isdigit() else "too fast to measure"  # noqa: E731
    return {"write_mbps": num(f[11]), "rewrite_mbps": num(f[13]), "read_mbps": num(f[17]), "csv": line}


def _machine_busy_s() -> float:
    """CPU seconds the machine has spent busy at nice 0 so far (all cores: not idle, not I/O
    wait, not niced; everything else on this shared machine runs niced)."""
    from clusterlab.monitor.procfs import cpu_spare, cpu_total, parse_cpu

    with open("/proc/stat") as f:
        c = parse_cpu(f.read())
    return (cpu_total(c) - cpu_spare(c)) / os.sysconf("SC_CLK_TCK")


def _proc_cpu_s(pid: int | None) -> float:
    """CPU seconds (user + system) process ``pid`` has used, 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, TypeError, IndexError, ValueError):
        return 0.0


def _read_cost(row: dict, nbytes: int) -> dict:
    """What reading through the target costs in CPU beyond reading the file: the machine's
    extra busy CPU seconds (launcher, ranks, tgtd, the emulated network, at nice 0) per MB
    read (``nbytes``: the stored bytes of one read), and that extra divided over the
    machine's cores: the least time it can add to the job however well it overlaps
    (``cpu_floor_s``), against the time it did add."""
    mb = nbytes * row["iscsi"]["reads"] / 1e6
    extra = row["iscsi"]["machine_busy_s"] - row["local"]["machine_busy_s"]
    return {"extra_cpu_s": round(extra, 3), "extra_cpu_s_per_mb": round(extra / mb, 5) if mb else None,
            "cpu_floor_s": round(extra / (os.cpu_count() or 1), 3),
            "added_s": round(row["iscsi"]["job_s"] - row["local"]["job_s"], 3)}


MINING_CASES = {"hpa": ("hpa", False), "hpa-rescan": ("hpa", True), "pfp": ("pfp", False), "cd": ("cd", False)}


class Terminated(SystemExit):
    """SIGTERM/SIGHUP during a run: unwinds the ``with`` blocks so the target goes before the testbed."""


@contextlib.contextmanager
def _terminate_unwinds():
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_(signum, frame):
        raise Terminated(128 + signum)

    old = {sig: signal.signal(sig, raise_) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def timed_job(src: str, nodes: int, algorithm: str, min_support, cluster, rescan: bool, tgtd_pid) -> tuple:
    """One mining job of ``src`` on ``cluster`` (``experiments.storage_bench.mining_from_target``):
    (its row, its itemsets), with tgtd's and the machine's CPU seconds it cost."""
    from clusterlab.mining.parallel.config import ParallelConfig
    from clusterlab.mining.parallel.driver import run_parallel

    cpu0, busy0 = _proc_cpu_s(tgtd_pid), _machine_busy_s()
    r = run_parallel(src, nodes, algorithm, min_support, cluster=cluster, config=ParallelConfig(rescan=rescan))
    busy = _machine_busy_s() - busy0
    read_s = max(x.get("read_s", 0.0) for x in r.ranks)
    rescan_s = sum(p.get("t_scan", 0.0) for p in r.passes[1:]) if rescan else 0.0
    return {"job_s": round(r.job_s, 3), "wall_s": round(r.wall_s, 3),
            "read_s": round(read_s, 3), "rescan_s": round(rescan_s, 3),
            "mine_s": round(r.job_s - read_s - rescan_s, 3), "passes": len(r.passes),
            "tgtd_cpu_s": round(_proc_cpu_s(tgtd_pid) - cpu0, 3),
            "ranks_cpu_s": round(sum(float(x.get("cpu_s", 0.0)) for x in r.ranks), 3),
            "machine_busy_s": round(busy, 3), "reads": 1 + (len(r.passes) - 1 if rescan else 0)}, r.table
