"""Incast through the testbed's switch: ``senders`` hosts each send ``nbytes`` over one TCP flow
(iperf3) to one host at once, as Floyd and Romanow (IEEE JSAC 13(4), 1995) loaded one ATM
output port with TCP flows. Goodput = all bytes / the wall time until the last flow finished
(a flow stalled in a timeout holds the result back, as in a real incast). With the ATM switch,
its own counts for the receiver's port come along: cells sent, cells of frames lost at
reassembly (link time wasted), frames lost.

``ideal_mbps``: what the receiver's link can carry as TCP payload (the cell arithmetic for the
ATM switch: full-size segments of MTU - 52 bytes in ceil((MTU + 16) / 48) cells of 53 bytes at
the cell rate; for the bridge the link rate times (MTU - 52) / (MTU + 14)).

Example (needs root and iperf3)::

    from clusterlab.bench.switch import incast
    from clusterlab.cluster.testbed import StarTopo, TestbedNetwork
    topo = StarTopo(hosts=5, rate="155.52Mbit", switch="atm", buffer="256cells", discard="epd")
    r = incast(TestbedNetwork(topo), 4, 8 << 20)
    print(r["goodput_mbps"], r["goodput_share"], r["port"]["cells_wasted"])
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time

from clusterlab.errors import ClusterlabError, ConfigError

TCP_IP_HEADERS = 52  # IPv4 20 + TCP 20 + timestamps 12


def ideal_mbps(topo) -> float:
    """TCP payload rate of one link (Mbit/s, after dilation), full-size segments.

    >>> from clusterlab.cluster.testbed import StarTopo
    >>> round(ideal_mbps(StarTopo(hosts=2, rate="155.52Mbit", switch="atm")), 2)
    134.34
    """
    payload = topo.mtu - TCP_IP_HEADERS
    if topo.switch == "atm":
        cells = -(-(topo.mtu + 16) // 48)
        return topo.cell_rate_bps / topo.dilation * payload / (cells * 53) / 1e6
    return topo.effective_rate_bps * payload / (topo.mtu + 14) / 1e6


def _wait_listening(ns: str, ports: list[int], timeout: float = 10.0) -> None:
    """Until every iperf3 server in namespace ``ns`` listens (a fixed sleep was too short on a
    loaded machine: a client found no server and iperf3 gave no result)."""
    deadline = time.monotonic() + timeout
    while True:
        out = subprocess.run(["ip", "netns", "exec", ns, "ss", "-ltnH"], capture_output=True, text=True,
                             timeout=10).stdout
        listening = {int(line.split()[3].rsplit(":", 1)[1]) for line in out.splitlines() if len(line.split()) > 3}
        if set(ports) <= listening:
            return
        if time.monotonic() > deadline:
            raise ClusterlabError(f"incast: iperf3 servers not listening on {sorted(set(ports) - listening)} "
                                  f"after {timeout:g} s")
        time.sleep(0.05)


def _tcp_state(ns: str, dst: str) -> list[str]:
    """The kernel's view (``ss -tin``) of the connections from namespace ``ns`` to ``dst``: state,
    RTO, backoff and retransmissions of a flow that did not finish."""
    try:
        out = subprocess.run(["ip", "netns", "exec", ns, "ss", "-tinH", "dst", dst], capture_output=True,
                             text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return [f"ss failed: {e}"]
    return [" ".join(line.split()) for line in out.splitlines() if line.strip()]


def incast(tb, senders: int, nbytes: int, timeout: float = 120.0) -> dict:
    """Bring up testbed ``tb`` (a ``clusterlab.cluster.testbed.TestbedNetwork`` not yet up, ``senders +
    1`` hosts or more), run the incast into h0, bring it down; returns goodput, wall time,
    retransmissions and (ATM) the port's counts. A flow not finished after ``timeout`` seconds
    (stuck in timeouts backed off to seconds) is stopped and counted in ``stalled_flows``; the
    goodput then counts the finished flows' bytes over the whole wait."""
    topo = tb.topo
    if shutil.which("iperf3") is None:
        raise ConfigError("incast needs iperf3 (make system-deps installs it)")
    if not 1 <= senders < topo.hosts:
        raise ConfigError(f"senders must be 1..{topo.hosts - 1} (the testbed has {topo.hosts} hosts), got {senders}")
    if not 0 < nbytes <= 1 << 40:
        raise ConfigError(f"nbytes must be 1 byte .. 1 TiB, got {nbytes}")
    with tb:
        dst = tb.hosts[0]
        servers = [dst.popen(["iperf3", "-s", "-1", "-B", dst.addr, "-p", str(5201 + i)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL) for i in range(senders)]
        try:
            _wait_listening(dst.ns, [5201 + i for i in range(senders)])
            t0 = time.monotonic()
            clients = [tb.hosts[i + 1].popen(["iperf3", "-c", dst.addr, "-p", str(5201 + i), "-n", str(nbytes), "-J"],
                                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                       for i in range(senders)]
            outs, stalled, stuck = [], 0, []
            for c in clients:
                try:
                    out, _ = c.communicate(timeout=max(1.0, timeout - (time.monotonic() - t0)))
                    outs.append(json.loads(out))
                except subprocess.TimeoutExpired:  # a flow stuck in backed-off timeouts: say so, with its state
                    host = tb.hosts[clients.index(c) + 1]
                    stuck.append({"host": host.name, "ss": _tcp_state(host.ns, dst.addr)})
                    c.kill()
                    c.communicate()
                    stalled += 1
            wall = time.monotonic() - t0
        finally:
            for p in servers:
                p.kill()
                p.wait(5)
    failed = [o["error"] for o in outs if o.get("error") or "sum_received" not in o.get("end", {})]
    if failed:
        raise ClusterlabError(f"incast: iperf3 failed: {failed[0] if isinstance(failed[0], str) else 'no result'}")
    received = sum(o["end"]["sum_received"]["bytes"] for o in outs)
    res = {"senders": senders, "nbytes": nbytes, "seconds": wall, "bytes": received, "stalled_flows": stalled,
           "goodput_mbps": received * 8 / wall / 1e6, "ideal_mbps": ideal_mbps(topo),
           "retransmits": sum(o["end"]["sum_sent"].get("retransmits", 0) for o in outs), "switch": topo.switch,
           "stalled": stuck}
    res["goodput_share"] = res["goodput_mbps"] / res["ideal_mbps"]
    t = tb.atm_totals
    if t:
        res["port"] = {k: t[k][0] for k in ("cells_out", "cells_dropped", "cells_discarded", "cells_wasted",
                                              "frames_delivered", "frames_lost", "max_queue_cells")}
        res["port"]["wasted_share"] = t["cells_wasted"][0] / max(1, t["cells_out"][0])
        res["switch_late_mean_us"] = t["late_mean_ns"] / 1e3
    return res
