"""Goodput through the two-site testbed's WAN cell line (``wan_cells``) against the offered
rate, for each discard policy: seed 004's 135 Mbit/s ATM line lost cells above about
120 Mbit/s; what does the line deliver when offered more, with plain UBR, PPD and EPD?

``offered_goodput`` sends UDP (iperf3, ``-u -b RATE``, datagrams that fill the MTU) from the
first host of site A to the first of site B for ``seconds`` per offered rate and reads the
receiver's count (iperf3's lost datagrams); the line's own totals (cells sent, wasted,
discarded) come with the testbed's teardown. Goodput is UDP payload bits per second received.

Example (needs root and iperf3)::

    from clusterlab.bench.wanline import offered_goodput
    from clusterlab.cluster.testbed import StarTopo, TestbedNetwork
    topo = StarTopo(hosts=2, sites="1+1", rate="1Gbit", mtu=1500, wan_cells=True, wan_discard="epd")
    offered_goodput(TestbedNetwork(topo), [100e6, 150e6], seconds=2)
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time

from clusterlab.errors import ClusterlabError, ConfigError

UDP_IP_OVERHEAD = 28  # IP 20 + UDP 8


def ideal_mbps(topo) -> float:
    """UDP payload Mbit/s a saturated cell line carries in MTU-sized datagrams (before dilation)."""
    return topo.wan_ip_rate_bps() * (topo.mtu - UDP_IP_OVERHEAD) / topo.mtu / 1e6


def _wait_listening(host, port: int, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        r = host.run(["ss", "-Hltn", f"sport = :{port}"], timeout=5, check=False)
        if r.stdout.strip():
            return
        time.sleep(0.05)
    raise ClusterlabError(f"wanline bench: iperf3 server not listening on {port} after {timeout:g} s")


def offered_goodput(tb, rates_bps: list[float], seconds: float = 3.0) -> dict:
    """Bring up testbed ``tb`` (a ``TestbedNetwork`` not yet up, two sites, ``wan_cells``), offer
    each rate in ``rates_bps`` (UDP payload bit/s, before dilation) across the line in turn,
    bring it down. Returns per rate the goodput and loss, and the line's totals."""
    topo = tb.topo
    if shutil.which("iperf3") is None:
        raise ConfigError("the wanline bench needs iperf3 (make system-deps installs it)")
    if not topo.has_wan or not topo.wan_cells:
        raise ConfigError("the wanline bench needs two sites and wan_cells=True")
    if not 0.5 <= seconds <= 600:
        raise ConfigError(f"seconds must be 0.5..600, got {seconds}")
    size = topo.mtu - UDP_IP_OVERHEAD
    k = topo.dilation
    points = []
    with tb:
        src, dst = tb.hosts[0], tb.hosts[topo.site_sizes[0]]
        for rate in rates_bps:
            srv = dst.popen(["iperf3", "-s", "-1", "-B", dst.addr, "-p", "5201"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
            try:
                _wait_listening(dst, 5201)
                r = src.run(["iperf3", "-c", dst.addr, "-p", "5201", "-u", "-b", str(int(rate / k)), "-l", str(size),
                             "-t", str(seconds * k), "-J"], timeout=seconds * k + 30, check=False)
            finally:
                srv.kill()
                srv.wait(5)
            try:
                out = json.loads(r.stdout)
                s = out["end"]["sum"]
            except (ValueError, KeyError):
                raise ClusterlabError(f"wanline bench: iperf3 gave no result at {rate / 1e6:g} Mbit/s: "
                                      f"{(r.stdout or r.stderr)[-200:]}") from None
            received = (s["packets"] - s["lost_packets"]) * size
            # dilated, the run took seconds * k at rate / k: bits / seconds is the undilated rate
            points.append({"offered_mbps": rate / 1e6, "sent_mbps": s["packets"] * size * 8 / seconds / 1e6,
                           "goodput_mbps": received * 8 / seconds / 1e6,
                           "lost_percent": s["lost_percent"], "datagrams": s["packets"]})
    t = tb.wan_totals or {}
    line = {key: t[key][0] for key in ("cells_out", "cells_dropped", "cells_discarded", "cells_wasted",
                                       "frames_lost", "max_queue_cells") if key in t}
    return {"discard": topo.wan_discard, "ideal_mbps": ideal_mbps(topo), "datagram_bytes": size, "points": points,
            "line": line}
