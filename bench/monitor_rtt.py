"""What sampling the hosts' round trips costs the testbed monitor (root). A script, not a test.

The monitor reads RTTs with a NETLINK_SOCK_DIAG dump per host (``monitor.netlink.SockDiag``):
the kernel walks its whole TCP hash table for each dump, whatever the namespace holds, so the
monitor visits one host at a time, in turn, at most every 0.2 s. For each testbed size this measures, with every
pair of hosts joined by a TCP connection that a forked child process keeps active (a byte each
way every 10 ms; each host's dump finds its n-1 connection ends; a thread of the
monitor's own process would hold the interpreter lock while the sampler waits for it, which a
job's ranks, processes of their own, never do):

1. one dump of one host (``SockDiag.tcp``, IPv4, and IPv4 + IPv6), the median of ``--repeat``;
2. the monitor's own cost per sample (``sample_cost_seconds / samples``) over a few seconds at
   0.1 s: without RTTs (the baseline), and with them as shipped (one host at a time, at most
   every 0.2 s: every other sample); the
   two interleaved, ``--rounds`` times each, the median kept (the machine is shared);
3. every host dumped once, back to back: what sampling all hosts each tick would add. (A dump
   in the monitor costs more than these back-to-back ones: 100-200 ms apart, the 262,144-bucket
   table is no longer in the cache.)

Writes ``bench/results/monitor_rtt.json`` with the harness's provenance (load, spare CPU).

    .venv/bin/python bench/monitor_rtt.py [--hosts 4,16] [--repeat 20] [--seconds 3] [--rounds 3]
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def _mesh(tb):
    """A TCP connection between every pair of hosts (opened inside the namespaces); the sockets."""
    from clusterlab.net.netns import in_netns

    socks, listeners = [], {}
    for h in tb.hosts:
        with in_netns(h.ns):
            ls = socket.create_server((h.addr.split("/")[0], 0))
        listeners[h.name] = ls
    for i, a in enumerate(tb.hosts):
        for b in tb.hosts[i + 1:]:
            with in_netns(a.ns):
                c = socket.create_connection(listeners[b.name].getsockname(), timeout=5)
            s, _ = listeners[b.name].accept()
            socks += [c, s]
    for ls in listeners.values():
        ls.close()
    for s in socks:
        s.setblocking(False)
    return socks


def _traffic(socks) -> int:
    """A child process sending a byte each way on every connection every 10 ms (every connection
    stays active: a host is visited every n samples); its pid (stop it with SIGTERM)."""
    pid = os.fork()
    if pid:
        return pid
    try:
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        while True:
            for s in socks:
                try:
                    s.send(b"x")
                    s.recv(4096)
                except (BlockingIOError, InterruptedError):
                    pass
            time.sleep(0.01)
    finally:
        os._exit(0)


def measure(hosts: int, repeat: int, seconds: float, rounds: int) -> dict:
    from clusterlab.cluster.testbed import StarTopo, TestbedNetwork
    from clusterlab.monitor import Monitor
    from clusterlab.monitor.netlink import SockDiag
    from clusterlab.net.netns import in_netns

    out: dict = {"hosts": hosts}
    with TestbedNetwork(StarTopo(hosts=hosts)) as tb:
        socks = _mesh(tb)
        child = _traffic(socks)
        try:
            with in_netns(tb.hosts[0].ns):
                d = SockDiag()
            for fams, key in (((socket.AF_INET,), "dump_ipv4_ms"), ((socket.AF_INET, socket.AF_INET6), "dump_both_ms")):
                ts = []
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    n = len(d.tcp(fams))
                    ts.append((time.perf_counter() - t0) * 1e3)
                out[key] = round(statistics.median(ts), 3)
            out["connections_per_host"] = n
            d.close()
            costs: dict = {False: [], True: []}
            for _ in range(rounds):  # interleaved: a load that drifts weighs on both alike
                for rtt in (False, True):
                    m = Monitor.for_testbed(tb, 0.1, capture=False)
                    for tg in m.targets:
                        tg.rtt = rtt and tg.node != "switch"
                    m.start()
                    time.sleep(seconds)
                    m.stop()
                    costs[rtt].append(round(m.meta["sample_cost_seconds"] / m.meta["samples"] * 1e3, 3))
                    if rtt:
                        rows = m.table().column("metric").to_pylist()
                        out["rtt_rows"] = sum(1 for r in rows if r == "tcp_rtt_ms")
            for rtt, key in ((False, "sample_ms_without_rtt"), (True, "sample_ms_with_rtt_in_turn")):
                out[key] = statistics.median(costs[rtt])
                out[key.replace("sample_ms", "rounds_ms")] = costs[rtt]
            diags = []
            for h in tb.hosts:
                with in_netns(h.ns):
                    diags.append(SockDiag())
            ts = []
            for _ in range(max(3, repeat // 4)):
                t0 = time.perf_counter()
                for dd in diags:
                    dd.tcp((socket.AF_INET,))
                ts.append((time.perf_counter() - t0) * 1e3)
            for dd in diags:
                dd.close()
            out["every_host_once_ms"] = round(statistics.median(ts), 3)
        finally:
            os.kill(child, signal.SIGTERM)
            os.waitpid(child, 0)
            for s in socks:
                s.close()
    return out


def main(argv=None) -> int:
    import sys

    from clusterlab.bench import harness

    ap = harness.parser(__doc__, RESULTS / "monitor_rtt.json", repeat=("--repeat", 20),
                        repeat_help="dumps per measurement")
    ap.add_argument("--hosts", default="4,16", help="testbed sizes, comma-separated (default 4,16)")
    ap.add_argument("--seconds", type=float, default=3.0, help="monitor run per mode and round (default 3 s)")
    ap.add_argument("--rounds", type=int, default=3, help="monitor runs per mode, interleaved (default 3; the median)")
    run = harness.start(ap, argv, repeat_flag="--repeat")
    if os.geteuid() != 0:
        print("bench/monitor_rtt.py needs root (network namespaces)", file=sys.stderr)
        return 2
    sizes = [int(x) for x in run.args.hosts.split(",")]
    points = []
    for n in sizes:
        p = measure(n, run.args.repeat, run.args.seconds, run.args.rounds)
        run.say(f"{n:>3} hosts: one dump {p['dump_ipv4_ms']:.2f} ms (IPv4; both families {p['dump_both_ms']:.2f}); "
                f"sample {p['sample_ms_without_rtt']:.2f} ms without RTT, {p['sample_ms_with_rtt_in_turn']:.2f} ms "
                f"with (one host every 0.2 s); every host once {p['every_host_once_ms']:.1f} ms")
        points.append(p)
        run.write({"benchmark": "monitor_rtt", "points": points}, final=False)
    run.write({"benchmark": "monitor_rtt", "points": points})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
