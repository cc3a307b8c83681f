#!/usr/bin/env python3
"""The WAN delay line (``clusterlab-wan``) measured against issue 14's targets (root). Not a test.

Two hosts on two sites (``sites="1+1"``), 1 Gbit/s site links, MTU 9000 (and 1500), the line at
135 Mbit/s per direction and 6 ms one way (12 ms RTT), 256 KiB drop-tail queue, hosts' TCP
buffers tuned (``tcp_rmem``/``tcp_wmem`` max 8 MB, above the 202 KB bandwidth-delay product):

1. RTT: a UDP ping (64 bytes, 10 ms apart) across the idle line: mean, min, max, mdev
   (``ping``'s: population standard deviation); the same tool's RTT over a plain 1 Gbit/s
   testbed link is recorded beside it (what the hosts' stacks add). Packet sockets stamp each
   echo at every hop (``hop_times``), so the line's own hold time is separated from the hosts'
   stacks and the tools; The ping and its echo run
   SCHED_FIFO (``chrt -f``), as the line does: on a machine loaded by others, a normal-priority
   ping measures its own scheduling delay (milliseconds at load 10), not the line's;
2. TCP: iperf3 for ``--seconds`` (the first second omitted), received rate vs 135 Mbit/s; the
   same through the project's tc tbf shaping at 135 Mbit/s without delay (the baseline); the
   line's CPU per Mbit/s; RTT under that load. CPU: utime + stime of the line's process (this
   kernel has no IRQ time accounting, so softirq work run in the line's context is in its
   stime); separately the far side's threaded-NAPI kernel threads if asked for (``far_side_threads``:
   the receive work behind the switch's WAN ports) and the machine's softirq time (/proc/stat:
   every process's, also other helpers');
3. shared duplex (67M-ATM): TCP both ways at once (iperf3 --bidir) on one 135 Mbit/s, and UDP
   offered at 100 Mbit/s each way: delivered vs offered, the line's drop count;
4. the same TCP run at MTU 1500 (six times the packets per Mbit/s);
5. with ``--sweep 40,60,...``: UDP offered at each rate both ways on the shared line, delivered
   vs offered (seed 004's loss when the looped-back line is driven past its rate), drawn as a
   figure beside the JSON (``--plot-sweep JSON`` redraws it from a sweep's JSON, no root needed).

6. with ``--incremental REPS``: what the line costs the machine, both far-side modes
   (``TestbedNetwork(far_side_threads=...)``): TCP (iperf3, ``--seconds``) through the line at MTU 9000
   and 1500, and over a plain LAN link shaped to 135 Mbit/s (tc tbf, no line) at the same MTU
   and duration, the points interleaved, REPS rounds. Counted per point, over the iperf3 run:
   ``our_cores`` = this bench's own cpuacct cgroup (the bench, the line, iperf3 on both hosts,
   also after they exit; tick-based, so a softirq is charged to whichever task it interrupted,
   mostly ours) + the machine's NAPI, ksoftirqd and kworker threads; ``line_incremental_cores``
   = each round's WAN ``our_cores`` minus the same round's LAN's (mean, median, min, max, stdev).
   Also ``machine_busy_cores`` (/proc/stat user + system + irq + softirq + steal, all CPUs: it
   leaves out others' niced user time but not their system time, so it moves by +-0.4 core with
   what others run; recorded, not used) and the busiest nice <= 0 processes;
7. with ``--idle-rtt REPS``: ``--pings`` (1000) UDP pings 10 ms apart over the idle line, both
   modes, and over one 1 Gbit/s LAN link, interleaved, REPS rounds; RTT error = WAN median (and
   mean) minus the same round's LAN median (mean) minus 12 ms.
   Both add their section (``incremental_cpu``, ``idle_rtt``) to the JSON and keep the rest; a
   full run keeps them too.

Records the load average before and after every point. Writes ``bench/results/wan.json``
(``-o``) atomically with the bench harness's provenance (``clusterlab.bench.harness``: commit,
machine, load, spare CPU, autogroup; ``--incremental`` and ``--idle-rtt``, run apart, stamp their
section with it too, and keep the block of the run that measured the points as
``points_provenance``). Usage: ``.venv/bin/python bench/wan.py [--seconds 10]``, then
``... bench/wan.py --incremental 3 --seconds 8`` and ``... --idle-rtt 3`` (each under 6 minutes).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path

from clusterlab.bench import harness
from clusterlab.monitor.provenance import load_average

HERE = Path(__file__).resolve().parent
RATE = 135e6
RT = ["chrt", "-f", "20"]  # the measuring tools' own scheduling, not the line's
TUNED = "rmem=4096 131072 8388608,wmem=4096 131072 8388608"

PING = r"""
import socket, sys, time, json
n, gap = int(sys.argv[1]), float(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1.0)
out = []
for i in range(n):
    t = time.perf_counter(); s.sendto(i.to_bytes(8, "big") + b"x" * 56, (sys.argv[3], 7))
    try:
        while int.from_bytes(s.recv(100)[:8], "big") != i:
            pass
        out.append((time.perf_counter() - t) * 1e3)
    except socket.timeout:
        pass
    time.sleep(gap)
print(json.dumps(out))
"""
ECHO = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((sys.argv[1], 7))
while True:
    d, a = s.recvfrom(2000); s.sendto(d, a)
"""


_run: harness.Run | None = None  # main's run: progress goes where it says (stderr with --json)


def say(*parts) -> None:
    if _run is not None:
        _run.say(*parts)
    else:
        print(*parts, flush=True)


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of process ``pid``."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tck = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tck, int(fields[12]) / tck


def softirq_seconds() -> float:
    """Softirq CPU seconds of the whole machine (/proc/stat), where it is not charged to a process."""
    with open("/proc/stat") as f:
        return int(f.readline().split()[7]) / os.sysconf("SC_CLK_TCK")


def rtt_stats(ms: list[float]) -> dict:
    if not ms:
        return {"n": 0}
    mean = sum(ms) / len(ms)
    mdev = (sum(x * x for x in ms) / len(ms) - mean * mean) ** 0.5
    return {"n": len(ms), "mean_ms": round(mean, 4), "min_ms": round(min(ms), 4), "max_ms": round(max(ms), 4),
            "mdev_ms": round(mdev, 4)}


def ping(tb, n: int = 300, gap: float = 0.01) -> list[float]:
    srv = tb.hosts[1].popen(RT + [sys.executable, "-c", ECHO, tb.hosts[1].addr])
    try:
        time.sleep(0.3)
        r = tb.hosts[0].run(RT + [sys.executable, "-c", PING, str(n), str(gap), tb.hosts[1].addr], timeout=n * (gap + 1) + 30)
        return json.loads(r.stdout)[5:]  # the first few pay for ARP-less warm-up of the tool
    finally:
        srv.kill()
        srv.wait()


SO_TIMESTAMPNS = 35
PACKET_OUTGOING = 4


def hop_times(tb, n: int = 200) -> dict:
    """Where a ping's round trip goes: the ping above, with packet sockets in the hosts' and the
    router's namespaces stamping each echo request and reply as it leaves h0, enters the line
    (router end ``a``), leaves it (``b``), reaches h1, and back (kernel receive / transmit
    timestamps, one clock). Mean ms per hop; ``line_hold_*`` is the line alone (delay plus the
    frame's serialization), ``stacks_and_tools_ms`` the rest of the RTT (the two hosts' sockets
    and the Python ping and echo, which the LAN RTT measures too)."""
    import select
    import socket
    import statistics
    import struct

    from clusterlab.net.netns import in_netns

    points = [(tb.hosts[0].ns, "eth0", "h0"), (tb.hosts[1].ns, "eth0", "h1")]
    if tb.router is not None:
        points += [(tb.router.ns, "a", "ra"), (tb.router.ns, "b", "rb")]
    socks = {}
    for ns, iface, name in points:
        with in_netns(ns):
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
            s.bind((iface, 3))
        s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        s.setblocking(False)
        socks[s] = name
    seen: dict = {}
    stop = threading.Event()

    def loop():
        while not stop.is_set():
            ready, _, _ = select.select(list(socks), [], [], 0.1)
            for s in ready:
                while True:
                    try:
                        data, anc, _, addr = s.recvmsg(2000, 64)
                    except BlockingIOError:
                        break
                    ts = next((struct.unpack("qq", d[:16]) for _, typ, d in anc if typ == SO_TIMESTAMPNS), None)
                    if ts is None or len(data) < 58 or data[12:14] != b"\x08\x00" or data[23] != 17:
                        continue
                    ihl = (data[14] & 15) * 4
                    sport, dport = struct.unpack("!HH", data[14 + ihl:18 + ihl])
                    if 7 not in (sport, dport):
                        continue
                    seq = int.from_bytes(data[22 + ihl:30 + ihl], "big")
                    key = (socks[s], "req" if dport == 7 else "rep", "out" if addr[2] == PACKET_OUTGOING else "in")
                    seen.setdefault(seq, {})[key] = ts[0] + ts[1] / 1e9

    th = threading.Thread(target=loop)
    th.start()
    try:
        rtts = ping(tb, n=n, gap=0.01)
    finally:
        time.sleep(0.2)
        stop.set()
        th.join()
        for s in socks:
            s.close()
    path = [("h0", "req", "out"), ("ra", "req", "in"), ("rb", "req", "out"), ("h1", "req", "in"),
            ("h1", "rep", "out"), ("rb", "rep", "in"), ("ra", "rep", "out"), ("h0", "rep", "in")]
    hops: dict = {}
    for e in seen.values():
        got = [(k, e[k]) for k in path if k in e]
        for (a, x), (b, y) in zip(got, got[1:], strict=False):
            hops.setdefault(f"{a[0]} {a[2]} -> {b[0]} {b[2]}", []).append((y - x) * 1e3)
    out = {"rtt": rtt_stats(rtts), "hops_mean_ms": {k: round(statistics.fmean(v), 4) for k, v in hops.items()},
           "hops_median_ms": {k: round(statistics.median(v), 4) for k, v in hops.items()}}
    m = out["hops_mean_ms"]
    if "ra in -> rb out" in m and "rb in -> ra out" in m:
        ideal = tb.wan.settings["delay_ns"] / 1e6 + 106 * 8 / tb.wan.settings["rate_bps"] * 1e3  # 64 B payload frame
        out["line_hold_ms"] = [m["ra in -> rb out"], m["rb in -> ra out"]]
        out["line_hold_error_ms"] = [round(v - ideal, 4) for v in out["line_hold_ms"]]
        out["line_rtt_error_ms"] = round(sum(out["line_hold_error_ms"]), 4)
    if rtts:
        out["stacks_and_tools_ms"] = round(out["rtt"]["mean_ms"] - sum(m.values()), 4)
        out["network_hops_outside_line_ms"] = round(sum(v for k, v in m.items()
                                                        if k not in ("ra in -> rb out", "rb in -> ra out")
                                                        and not k.startswith("h1 in")), 4)
    return out


def iperf(tb, seconds: float, extra: list[str] | None = None) -> dict:
    srv = tb.hosts[1].popen(["iperf3", "-s", "-1", "-B", tb.hosts[1].addr], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        r = tb.hosts[0].run(["iperf3", "-c", tb.hosts[1].addr, "-t", str(seconds), "-O", "1", "-J"] + (extra or []),
                            timeout=seconds + 30, check=False)
        return json.loads(r.stdout)
    finally:
        srv.kill()
        srv.wait()


def line_cpu_split(pid: int, seconds: float = 3.0) -> dict:
    """Where the line's CPU goes: ``perf record -g`` on its process for ``seconds`` (from the
    second second of the transfer on) and the share of samples under ``handle_softirqs``. That
    is the receive processing of the far side (bridge, the receiving host's IP and TCP) which
    the kernel runs in the context of whoever hands it a frame: when the line writes a frame to
    its veth, the far host's stack runs on the line's clock, as it would on the receiving
    machine's NIC interrupt on a real network. Empty when perf is missing."""
    import shutil
    import tempfile

    if not shutil.which("perf"):
        return {}
    time.sleep(1.5)
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "perf.data")
        r = subprocess.run(["perf", "record", "-g", "-o", data, "-p", str(pid), "--", "sleep", str(seconds)],
                           capture_output=True, text=True, timeout=seconds + 60)
        if r.returncode != 0:
            return {"error": r.stderr.strip()[-200:]}
        rep = subprocess.run(["perf", "report", "-i", data, "--children", "--sort", "sym", "--stdio", "-g", "none"],
                             capture_output=True, text=True, timeout=120).stdout
    def share(sym: str) -> float | None:
        for ln in rep.splitlines():
            if ln.rstrip().endswith(f"[k] {sym}"):
                return round(float(ln.split("%")[0]) / 100, 4)
        return None
    return {"far_side_softirq_share": share("handle_softirqs") or 0.0, "ppoll_share": share("__x64_sys_ppoll"),
            "sendmmsg_share": share("__x64_sys_sendmmsg"), "recvmsg_share": share("__x64_sys_recvmsg")}


def mbit(x: float) -> float:
    return round(x / 1e6, 3)


def measure(name: str, topo_kw: dict, body, far_side_threads: bool = False) -> dict:
    from clusterlab.cluster.testbed import StarTopo, TestbedNetwork
    from clusterlab.net.transport_config import TransportConfig

    topo = StarTopo(**topo_kw)
    tb = TestbedNetwork(topo, name="w" + secrets.token_hex(3), transport=TransportConfig.parse(TUNED, place="testbed"),
                 far_side_threads=far_side_threads)
    point = {"topology": topo.to_dict(), "far_side_threads": far_side_threads if topo.has_wan else None,
             "loadavg_before": load_average()}
    with tb:
        try:
            point.update(body(tb))
        except Exception as e:  # a point that fails says why; the others still run
            point["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    point["line_totals"] = tb.wan_totals
    point["loadavg_after"] = load_average()
    say(name, json.dumps({k: v for k, v in point.items() if k not in ("topology", "line_totals")}))
    return point


def tcp_body(seconds: float):
    def body(tb):
        out = {}
        pid = tb.wan.proc.pid if tb.wan else None
        far = tb.wan.far_side if tb.wan else []
        f0, s0 = [sum(cpu_seconds(p)) for p in far], softirq_seconds()
        c0, w0 = (cpu_seconds(pid) if pid else (0.0, 0.0)), time.monotonic()
        pings: list = []
        th = threading.Thread(target=lambda: pings.extend(ping(tb, n=int(seconds * 20), gap=0.05)))
        th.start()
        split: dict = {}
        prof = threading.Thread(target=lambda: split.update(line_cpu_split(pid))) if pid else None
        if prof:
            prof.start()
        res = iperf(tb, seconds)
        th.join()
        if prof:
            prof.join()
        wall = time.monotonic() - w0
        rx = res["end"]["sum_received"]["bits_per_second"]
        out.update(tcp_mbit=mbit(rx), of_rate=round(rx / RATE, 4),
                   retransmits=res["end"]["sum_sent"].get("retransmits"), rtt_under_load=rtt_stats(pings))
        if pid:
            u, k = (a - b for a, b in zip(cpu_seconds(pid), c0, strict=True))
            cores = (u + k) / wall
            far_cores = [round((sum(cpu_seconds(p)) - b) / wall, 4) for p, b in zip(far, f0, strict=True)]
            out.update(far_side_thread_cores=far_cores,
                       line_and_far_side_cores=round(cores + sum(far_cores), 4),
                       machine_softirq_cores=round((softirq_seconds() - s0) / wall, 4))
            out.update(line_cores=round(cores, 4), line_user_share=round(u / max(u + k, 1e-9), 3),
                       line_cores_per_100mbit=round(cores / (rx / 1e8), 4), line_cpu_split=split)
            share = split.get("far_side_softirq_share")
            if share is not None:
                out["line_own_cores"] = round(cores * (1 - share), 4)
        return out
    return body


def machine_cpu() -> dict:
    """The machine's CPU seconds so far (/proc/stat, all CPUs): ``busy`` is user + system + irq +
    softirq + steal, everything but idle, I/O wait and ``nice`` (the niced work of others sharing
    the machine, which a locked run is meant to exclude; their system time stays in)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    tck = os.sysconf("SC_CLK_TCK")
    user, nice, system, idle, iowait, irq, softirq, steal = (x / tck for x in v)
    return {"busy": user + system + irq + softirq + steal, "nice": nice, "softirq": softirq}


def per_process_cpu() -> dict[int, tuple[str, int, float]]:
    """pid -> (comm, nice, utime + stime seconds) of every process and kernel thread now."""
    out = {}
    tck = os.sysconf("SC_CLK_TCK")
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat") as f:
                    head, tail = f.read().rsplit(")", 1)
            except OSError:
                continue
            v = tail.split()
            out[int(pid)] = (head.split("(", 1)[1], int(v[16]), (int(v[11]) + int(v[12])) / tck)
    return out


def top_consumers(p0: dict, p1: dict, wall: float, k: int = 8) -> dict:
    """Cores per command name over a run, of the processes alive at both ends, nice <= 0 only."""
    by: dict = {}
    for pid, (comm, nice, t) in p1.items():
        if pid in p0 and nice <= 0:
            name = comm.split("/")[0] if comm.startswith(("ksoftirqd", "kworker")) else comm
            by[name] = by.get(name, 0.0) + (t - p0[pid][2]) / wall
    return {n: round(c, 4) for n, c in sorted(by.items(), key=lambda x: -x[1])[:k] if c > 0}


CPUACCT = "/sys/fs/cgroup/cpuacct"


class OwnCgroup:
    """This process and everything it starts from now on (the testbed's line, iperf3 on the
    hosts, ...) in a cpuacct cgroup of its own, so their CPU is counted also after they exit and
    apart from other users of the machine (tick-based: a softirq is charged to the task it
    interrupted, mostly ours, as our sends raise it). None where cgroup v1 cpuacct is absent."""

    def __init__(self):
        self.path = os.path.join(CPUACCT, "clab-wanbench-" + secrets.token_hex(3))
        os.mkdir(self.path)
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    def seconds(self) -> float:
        with open(os.path.join(self.path, "cpuacct.usage")) as f:
            return int(f.read()) / 1e9

    def close(self) -> None:
        with open(os.path.join(CPUACCT, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
        for _ in range(50):  # the testbed's processes are gone once it is down; allow them to be reaped
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)


def kernel_threads_cores(p0: dict, p1: dict, wall: float) -> float:
    """Cores of the kernel threads that do network work for whoever sends: NAPI threads,
    ksoftirqd, kworkers (of the whole machine: others' share in them is small under the lock)."""
    return sum((t - p0[pid][2]) / wall for pid, (comm, _n, t) in p1.items()
               if pid in p0 and comm.startswith(("napi/", "ksoftirqd", "kworker")))


def cpu_body(seconds: float, cg: OwnCgroup | None = None):
    """TCP for ``seconds`` (iperf3, as ``tcp_body``) and the machine's busy CPU over the run
    (``machine_cpu``), nothing else running: no ping, no profiler. Also the line's process and
    the far-side threads alone."""
    def body(tb):
        pid = tb.wan.proc.pid if tb.wan else None
        far = tb.wan.far_side if tb.wan else []
        g0 = cg.seconds() if cg else 0.0
        p0, m0, w0 = per_process_cpu(), machine_cpu(), time.monotonic()
        c0, f0 = (sum(cpu_seconds(pid)) if pid else 0.0), [sum(cpu_seconds(p)) for p in far]
        res = iperf(tb, seconds)
        wall = time.monotonic() - w0
        m1, p1 = machine_cpu(), per_process_cpu()
        g1 = cg.seconds() if cg else None
        rx = res["end"]["sum_received"]["bits_per_second"]
        out = {"tcp_mbit": mbit(rx), "of_rate": round(rx / RATE, 4), "seconds": round(wall, 3),
               "retransmits": res["end"]["sum_sent"].get("retransmits"),
               "machine_busy_cores": round((m1["busy"] - m0["busy"]) / wall, 4),
               "machine_softirq_cores": round((m1["softirq"] - m0["softirq"]) / wall, 4),
               "others_nice_cores": round((m1["nice"] - m0["nice"]) / wall, 4),
               "top_nice0_processes_cores": top_consumers(p0, p1, wall)}
        if g1 is not None:
            out["own_cgroup_cores"] = round((g1 - g0) / wall, 4)
            out["kernel_threads_cores"] = round(kernel_threads_cores(p0, p1, wall), 4)
            out["our_cores"] = round(out["own_cgroup_cores"] + out["kernel_threads_cores"], 4)
        if pid:
            out["line_cores"] = round((sum(cpu_seconds(pid)) - c0) / wall, 4)
            out["far_side_thread_cores"] = [round((sum(cpu_seconds(p)) - b) / wall, 4) for p, b in zip(far, f0, strict=True)]
        return out
    return body


def spread(xs: list[float]) -> dict:
    import statistics

    xs = [x for x in xs if x is not None]
    if not xs:
        return {"n": 0}
    return {"n": len(xs), "mean": round(statistics.fmean(xs), 4), "median": round(statistics.median(xs), 4),
            "min": round(min(xs), 4), "max": round(max(xs), 4),
            "stdev": round(statistics.stdev(xs), 4) if len(xs) > 1 else 0.0}


MODES = {"threads": True, "inline": False}  # the far side's receive work: NAPI threads / line's process


def incremental_cpu(wan: dict, seconds: float, reps: int) -> dict:
    """What the line costs the machine: busy CPU with TCP through the WAN line minus the same
    with TCP over a plain LAN link shaped to 135 Mbit/s (tc tbf, no line), same MTU and
    duration; the points interleaved, ``reps`` rounds."""
    runs: dict = {}
    cg = OwnCgroup() if os.path.isdir(CPUACCT) else None
    try:
        for rep in range(reps):
            for mtu in (9000, 1500):
                lan = dict(hosts=2, rate="135Mbit", buffer="256KiB", mtu=mtu)
                runs.setdefault(f"lan_tcp_135_mtu{mtu}", []).append(measure(f"lan_tcp_135_mtu{mtu}#{rep}", lan,
                                                                             cpu_body(seconds, cg)))
                for mode, threads in MODES.items():
                    runs.setdefault(f"wan_tcp_mtu{mtu}_{mode}", []).append(
                        measure(f"wan_tcp_mtu{mtu}_{mode}#{rep}", {**wan, "mtu": mtu}, cpu_body(seconds, cg), threads))
    finally:
        if cg:
            cg.close()
    out: dict = {"seconds": seconds, "reps": reps, "points": runs, "summary": {}}
    for mtu in (9000, 1500):
        lan = runs[f"lan_tcp_135_mtu{mtu}"]
        out["summary"][f"lan_tcp_135_mtu{mtu}"] = {
            "our_cores": spread([p.get("our_cores") for p in lan]),
            "machine_busy_cores": spread([p.get("machine_busy_cores") for p in lan]),
            "tcp_mbit": spread([p.get("tcp_mbit") for p in lan])}
        for mode in MODES:
            w = runs[f"wan_tcp_mtu{mtu}_{mode}"]
            out["summary"][f"wan_tcp_mtu{mtu}_{mode}"] = {
                "our_cores": spread([p.get("our_cores") for p in w]),
                "machine_busy_cores": spread([p.get("machine_busy_cores") for p in w]),
                "tcp_mbit": spread([p.get("tcp_mbit") for p in w]),
                "of_rate": spread([p.get("of_rate") for p in w]),
                "line_cores": spread([p.get("line_cores") for p in w]),
                "far_side_thread_cores": spread([sum(p.get("far_side_thread_cores") or [0.0]) for p in w]),
                # each round's WAN point minus the same round's LAN point: ours (own cgroup and
                # the network kernel threads), and the machine's busy time (others' system time in)
                "line_incremental_cores": spread([a["our_cores"] - b["our_cores"] for a, b in zip(w, lan, strict=True)
                                                  if "our_cores" in a and "our_cores" in b]),
                "machine_busy_incremental_cores": spread([a["machine_busy_cores"] - b["machine_busy_cores"]
                                                          for a, b in zip(w, lan, strict=True)
                                                          if "machine_busy_cores" in a and "machine_busy_cores" in b])}
    return out


def idle_rtt(wan: dict, n: int, reps: int) -> dict:
    """The idle line's RTT error: ``n`` pings 10 ms apart across it, median and mean, minus the
    same ping over one plain 1 Gbit/s LAN link (what the hosts' stacks and the tool add) and
    minus the 12 ms target; the points interleaved, ``reps`` rounds."""
    import statistics

    runs: dict = {}

    def pinger(tb):
        ms = ping(tb, n=n, gap=0.01)
        return {"rtt": {**rtt_stats(ms), "median_ms": round(statistics.median(ms), 4) if ms else None}}
    for rep in range(reps):
        runs.setdefault("lan", []).append(measure(f"lan_rtt#{rep}", dict(hosts=2, rate="1Gbit"), pinger))
        for mode, threads in MODES.items():
            runs.setdefault(mode, []).append(measure(f"wan_rtt_idle_{mode}#{rep}", wan, pinger, threads))
    out: dict = {"pings": n, "gap_s": 0.01, "reps": reps, "points": runs, "summary": {}}
    lan = [p["rtt"] for p in runs["lan"] if p.get("rtt", {}).get("n")]
    for mode in MODES:
        w = [p["rtt"] for p in runs[mode] if p.get("rtt", {}).get("n")]
        out["summary"][mode] = {
            "rtt_median_ms": spread([r["median_ms"] for r in w]), "rtt_mean_ms": spread([r["mean_ms"] for r in w]),
            "mdev_ms": spread([r["mdev_ms"] for r in w]),
            "rtt_error_median_ms": spread([a["median_ms"] - b["median_ms"] - 12.0 for a, b in zip(w, lan, strict=False)]),
            "rtt_error_mean_ms": spread([a["mean_ms"] - b["mean_ms"] - 12.0 for a, b in zip(w, lan, strict=False)])}
    out["summary"]["lan"] = {"rtt_median_ms": spread([r["median_ms"] for r in lan]),
                             "rtt_mean_ms": spread([r["mean_ms"] for r in lan]),
                             "mdev_ms": spread([r["mdev_ms"] for r in lan])}
    return out


def main(argv=None) -> int:
    global _run
    ap = harness.parser(__doc__, HERE / "results" / "wan.json", output_aliases=("--out",),
                        output_help="the record (--incremental, --idle-rtt: the record to update), written "
                                    "atomically with its provenance (default bench/results/wan.json)")
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds of each TCP run (default %(default)s)")
    ap.add_argument("--sweep", type=lambda v: [int(x) for x in v.split(",")], default=None,
                    help="also offer UDP at these Mbit/s each way on the shared line, e.g. 40,60,70,80,100")
    ap.add_argument("--sweep-only", action="store_true", help="only the sweep (default 40,60,70,80,100)")
    ap.add_argument("--incremental", type=int, metavar="REPS", default=0,
                    help="only the incremental-CPU points (WAN vs LAN at 135 Mbit/s, both far-side modes), "
                         "REPS interleaved rounds, into the existing JSON's 'incremental_cpu'")
    ap.add_argument("--idle-rtt", type=int, metavar="REPS", default=0,
                    help="only the idle RTT (--pings per point, both far-side modes and LAN), REPS rounds, "
                         "into the existing JSON's 'idle_rtt'")
    ap.add_argument("--pings", type=int, default=1000, help="--idle-rtt: pings per point (default %(default)s)")
    ap.add_argument("--plot-sweep", metavar="JSON", default=None,
                    help="only draw the overload figure of the sweep in JSON (written beside it as .png)")
    args = ap.parse_args(argv)
    from clusterlab.cluster.testbed import TestbedError, require_root

    if args.plot_sweep:  # draws a figure from a record, measures nothing
        with open(args.plot_sweep) as f:
            print(plot_overload(json.load(f)["overload_sweep"], os.path.splitext(args.plot_sweep)[0] + ".png"))
        return 0
    run = _run = harness.start(ap, args=args)
    try:
        require_root()
    except TestbedError as e:
        ap.exit(2, f"{ap.prog}: {e}\n")
    s = args.seconds
    wan = dict(hosts=2, rate="1Gbit", sites="1+1", wan_rate="135Mbit", wan_delay="6ms", wan_queue="256KiB")
    res: dict = {"targets": {"tcp_of_135mbit": 0.97, "rtt_error_ms": 0.3, "mdev_ms": 0.3, "cores_at_135mbit": 0.2},
                 "settings": {"line": wan, "tcp": TUNED, "seconds": s}, "points": {}}
    pts = res["points"]
    if args.incremental or args.idle_rtt:
        return update_json(run, wan)
    if args.sweep_only:
        args.sweep = args.sweep or [40, 60, 70, 80, 100]
    else:
        main_points(pts, wan, s)
    if args.sweep:
        # seed 004's overload figure: offered load each way vs delivered on the shared line
        res["overload_sweep"] = []
        for each in args.sweep:
            def offer(tb, each=each):
                t0 = time.monotonic()
                iperf(tb, 3.0, ["-u", "-b", f"{each}M", "-l", "8900", "--bidir"])
                return {"udp_asked_mbit_each_way": each, "seconds": round(time.monotonic() - t0, 3)}
            res["overload_sweep"].append(udp_rates(measure(f"shared_offer_{each}", {**wan, "wan_shared": True},
                                                           offer)))
    if not args.sweep_only:
        res["summary"] = summary(pts)
        try:  # the --incremental / --idle-rtt sections of an earlier run stay
            with open(run.output) as f:
                res.update({k: v for k, v in json.load(f).items() if k in ("incremental_cpu", "idle_rtt")})
        except (FileNotFoundError, ValueError):
            pass
    say(json.dumps(res.get("summary") or res.get("overload_sweep"), indent=1))
    run.write(res)
    if args.sweep:
        plot_overload(res["overload_sweep"], os.path.splitext(run.output)[0] + "_overload.png")
    return 0


def plot_overload(sweep: list[dict], path: str) -> str:
    """Seed 004's overload figure: UDP offered each way on the shared (67M) line against what
    it delivered, per direction and in total, with the line's rate; written atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from clusterlab._atomic import atomic_path

    offered = [sum(p["offered_mbit_each_way"]) / 2 for p in sweep]
    rate = sweep[0]["topology"]["wan_rate_bps"] / 1e6
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for d, name in ((0, "a -> b"), (1, "b -> a")):
        ax.plot(offered, [p["delivered_mbit_each_way"][d] for p in sweep], "o-", label=f"delivered {name}")
    ax.plot(offered, [p["delivered_mbit_sum"] for p in sweep], "s-", label="delivered, both ways")
    ax.plot(offered, [2 * o for o in offered], ":", color="grey", label="offered, both ways")
    ax.axhline(rate, color="black", lw=0.8, label=f"line rate {rate:g} Mbit/s (shared by both ways)")
    ax.set_xlabel("UDP offered each way [Mbit/s]")
    ax.set_ylabel("Mbit/s")
    ax.set_title("Shared (67M-ATM) line driven past its rate: delivered vs offered")
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return path


def update_json(run: harness.Run, wan: dict) -> int:
    """``--incremental`` / ``--idle-rtt``: measure those and add them to the JSON at ``-o``
    (keeping its other points), each section with this run's provenance."""
    args = run.args
    try:
        with open(run.output) as f:
            res = json.load(f)
    except FileNotFoundError:
        res = {}
    new: dict = {}
    if args.incremental:
        new["incremental_cpu"] = incremental_cpu(wan, args.seconds, args.incremental)
    if args.idle_rtt:
        new["idle_rtt"] = idle_rtt(wan, args.pings, args.idle_rtt)
    for k, v in new.items():
        res[k] = {"provenance": run.provenance(), "line": wan, "tcp": TUNED, **v}
    # the record's own block becomes this run's: the run that measured the points stays named
    if "provenance" in res and "points_provenance" not in res:
        res["points_provenance"] = res.pop("provenance")
    say(json.dumps({k: v["summary"] for k, v in new.items()}, indent=1))
    run.write(res)
    return 0


def main_points(pts: dict, wan: dict, s: float) -> None:
    pts["lan_rtt"] = measure("lan_rtt", dict(hosts=2, rate="1Gbit"), hop_times)
    pts["wan_rtt_idle"] = measure("wan_rtt_idle", wan, hop_times)
    pts["tbf_135_tcp"] = measure("tbf_135_tcp", dict(hosts=2, rate="135Mbit", buffer="256KiB"), tcp_body(s))
    pts["wan_tcp"] = measure("wan_tcp", wan, tcp_body(s))
    pts["wan_tcp_mtu1500"] = measure("wan_tcp_mtu1500", {**wan, "mtu": 1500}, tcp_body(s))

    def bidir(tb):
        res_ = iperf(tb, s, ["--bidir"])
        streams = res_["end"]["streams"]
        per = [mbit(st["receiver"]["bits_per_second"]) for st in streams]
        return {"tcp_mbit_each_way": per, "tcp_mbit_sum": round(sum(per), 3)}
    pts["shared_tcp_bidir"] = measure("shared_tcp_bidir", {**wan, "wan_shared": True}, bidir)

    def udp_over(tb):
        # iperf3 cannot always offer 100 Mbit/s on a loaded machine: the line's own counts say
        # what was offered and delivered (frames on the wire, Ethernet header included).
        t0 = time.monotonic()
        iperf(tb, min(s, 5.0), ["-u", "-b", "100M", "-l", "8900", "--bidir"])
        return {"udp_asked_mbit_each_way": 100.0, "seconds": round(time.monotonic() - t0, 3)}

    pts["shared_udp_overload"] = udp_rates(measure("shared_udp_overload", {**wan, "wan_shared": True}, udp_over))
    pts["udp_overload_per_direction"] = udp_rates(measure("udp_overload_per_direction", wan, udp_over))


def udp_rates(point: dict) -> dict:
    """Offered and delivered Mbit/s per direction from the line's own counts (Ethernet frames),
    over the run's wall time (which includes iperf3's start: rates are a few % low)."""
    t = point.get("line_totals") or {}
    secs = point.get("seconds")
    if t and secs:
        point["offered_mbit_each_way"] = [mbit(b * 8 / secs) for b in t["bytes"]]
        point["delivered_mbit_each_way"] = [mbit(b * 8 / secs) for b in t["delivered_bytes"]]
        point["delivered_mbit_sum"] = round(sum(point["delivered_mbit_each_way"]), 3)
        point["lost_percent"] = [round(100 * d / max(p, 1), 2) for d, p in zip(t["drops"], t["packets"], strict=True)]
    return point


def summary(pts: dict) -> dict:
    w, idle, lan = pts["wan_tcp"], pts["wan_rtt_idle"].get("rtt", {}), pts["lan_rtt"].get("rtt", {})
    return {
        "tcp_of_135mbit": w.get("of_rate"), "tbf_baseline_of_135mbit": pts["tbf_135_tcp"].get("of_rate"),
        "rtt_mean_ms": idle.get("mean_ms"), "rtt_error_ms": round(idle["mean_ms"] - 12.0, 4) if idle.get("n") else None,
        "rtt_error_minus_stack_ms": round(idle["mean_ms"] - lan["mean_ms"] - 12.0, 4)
        if idle.get("n") and lan.get("n") else None,
        "mdev_ms": idle.get("mdev_ms"), "line_cores_at_tcp_rate": w.get("line_cores"),
        # the line alone, between its two ports by kernel timestamps (what the RTT target is about)
        "line_rtt_error_ms": pts["wan_rtt_idle"].get("line_rtt_error_ms"),
        "rtt_stacks_and_tools_ms": pts["wan_rtt_idle"].get("stacks_and_tools_ms"),
        "line_cores_per_100mbit": w.get("line_cores_per_100mbit"),
        "line_cores_per_100mbit_mtu1500": pts["wan_tcp_mtu1500"].get("line_cores_per_100mbit"),
        "line_cores_mtu1500": pts["wan_tcp_mtu1500"].get("line_cores"),
        "far_side_thread_cores_mtu1500": pts["wan_tcp_mtu1500"].get("far_side_thread_cores"),
        "line_and_far_side_cores_mtu1500": pts["wan_tcp_mtu1500"].get("line_and_far_side_cores"),
        "rtt_under_load_mtu1500": pts["wan_tcp_mtu1500"].get("rtt_under_load"),
        # without the far side's receive processing, which the kernel runs in the line's context
        "line_own_cores": w.get("line_own_cores"),
        "line_own_cores_mtu1500": pts["wan_tcp_mtu1500"].get("line_own_cores"),
        # The line's own timing: how late it released frames after their due time (all frames).
        "line_late_mean_us": [round(v / 1e3, 1) for v in (w.get("line_totals") or {}).get("late_mean_ns", [])],
        "line_late_max_us": [round(v / 1e3, 1) for v in (w.get("line_totals") or {}).get("late_max_ns", [])]}


if __name__ == "__main__":
    sys.exit(main())
