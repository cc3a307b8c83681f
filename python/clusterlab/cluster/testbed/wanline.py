"""The WAN line of a two-site testbed: the Rust delay line (``clusterlab-wan``) run in the
router namespace, started and stopped with the testbed.

``start`` runs ``python -m clusterlab.cluster.testbed.wanline`` inside ``clab-<tb>-wan`` (a
``mover``: it dies with the driver, also on SIGKILL); it opens packet sockets on ``a`` and
``b`` and moves frames between them. Every 0.1 s the line appends its per-direction histogram (packets and
bytes per 64-byte IP length bucket of the packets it carried, and its drops) to
``/run/clusterlab/testbed/<tb>.wan.trace`` (format: ``clusterlab.monitor.wan``); ``clean``
removes the file.

With ``wan_cells`` the line is ``clusterlab-atm``'s cell line (``limit_cells`` in its settings):
frames go as AAL5 cells, its totals add per direction ``frames_lost``, ``cells_in``,
``cells_out``, ``cells_dropped``, ``cells_wasted`` (cells of lost frames that used the line)
``cells_discarded`` (by ``wan_discard``: PPD's rest of a broken frame, EPD's refused frames)
and ``max_queue_cells``; the trace's drops are its lost frames.

The far side's receive work (a frame the line writes to ``a`` or ``b`` goes on through the
switch's bridge, a host port's tbf and the receiving host's IP and TCP) runs, by default, in the
context of the writer: the line's process, as if a real line also ran the receiving machine's
network stack. ``TestbedNetwork(far_side_threads=True)`` moves it into threads of its own
(``far_side_threads``): GRO on the switch's WAN ports (which makes a veth receive through NAPI)
and that NAPI threaded, one SCHED_FIFO kernel thread per port. That makes the line's process
smaller (0.14 instead of 0.26 core at MTU 1500 and 135 Mbit/s) but costs the machine more and
adds delay: measured by ``bench/wan.py --incremental 3 --idle-rtt 3`` (the machine's CPU with TCP
through the line minus over a LAN link shaped to the same rate, interleaved), 0.206 against
0.111 core at MTU 1500 (0.094 against 0.070 at 9000), and an idle RTT 0.06 ms longer (the
threads' wake-ups), which is why it is not the default.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from clusterlab.cluster.testbed import mover
from clusterlab.cluster.testbed._nsconfig import offload_set
from clusterlab.cluster.testbed.link import ROUTER_IFACES, WAN_PORTS
from clusterlab.cluster.testbed.node import in_netns
from clusterlab.monitor.wan import trace_path

TRACE_INTERVAL = 0.1


def line_settings(topo) -> dict:
    """What the delay line emulates (after dilation), as the line's process takes it; with
    ``wan_cells``, ``limit_cells`` (the cell line: ``rate_bps`` is then its cells' rate), its
    ``discard`` (and ``epd_threshold`` in cells) and ``arrival_rate_bps`` (its frames' cells
    enter the queue at that rate; 0: at once)."""
    d = {"rate_bps": topo.wan_rate_bps / topo.dilation,
         "delay_ns": int(round(topo.wan_delay_seconds * topo.dilation * 1e9)),
         "limit_bytes": int(topo.wan_queue_bytes), "shared": bool(topo.wan_shared),
         "interval_ns": int(TRACE_INTERVAL * topo.dilation * 1e9)}
    if topo.wan_cells:
        d.update(limit_cells=int(topo.wan_queue_cells), discard=topo.wan_discard,
                 arrival_rate_bps=topo.wan_arrival_rate_bps / topo.dilation)
        if topo.wan_discard == "epd":
            d["epd_threshold"] = int(topo.wan_epd_threshold_cells)
    return d


NAPI_PRIORITY = 10  # SCHED_FIFO, as the line's own thread


def _napi_threads() -> dict[int, str]:
    """Kernel threads of threaded NAPI on a WAN port: pid -> name (``napi/wan0-<napi id>``)."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        if name.split("-")[0] in {f"napi/{p}" for p in WAN_PORTS}:
            out[int(pid)] = name
    return out


def far_side_threads(switch_ns: str) -> tuple[list[int], list[str]]:
    """Move the receive work behind the switch's WAN ports into threads of their own (see the
    module's doc): GRO on and NAPI threaded on ``wan0`` and ``wan1`` in ``switch_ns``, the
    threads SCHED_FIFO. Returns their pids and warnings (a kernel without threaded NAPI keeps
    the work in the line's context and says so)."""
    before = set(_napi_threads())
    warnings = []
    try:
        with in_netns(switch_ns):
            for port in WAN_PORTS:
                offload_set(port, "gro", True)
    except OSError as e:
        return [], [f"GRO on the WAN ports: {e.strerror}; the far side's receive work stays in the line's context"]
    script = "; ".join(f"echo 1 > /sys/class/net/{p}/threaded" for p in WAN_PORTS)
    r = subprocess.run(["ip", "netns", "exec", switch_ns, "sh", "-c", script], capture_output=True, text=True,
                       timeout=30)
    if r.returncode != 0:
        return [], [f"threaded NAPI on the WAN ports: {r.stderr.strip()[-200:]}; "
                    "the far side's receive work stays in the line's context"]
    # The threads are named by port and NAPI id, not namespace: ours are the two that appeared
    # (a testbed built at the same instant by another process could add its own; then say so).
    new = sorted(set(_napi_threads()) - before)
    if len(new) != len(WAN_PORTS):
        warnings.append(f"threaded NAPI: expected {len(WAN_PORTS)} new kernel threads, found {len(new)}; "
                        "their priority is left as it is")
        return new, warnings
    for pid in new:
        try:
            os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(NAPI_PRIORITY))
        except OSError as e:
            warnings.append(f"napi thread {pid}: SCHED_FIFO: {e.strerror}")
    return new, warnings


class WanLine(mover.Mover):
    """The running line of a testbed. ``far_side``: pids of the kernel threads that do the far
    side's receive work."""

    def __init__(self, proc: subprocess.Popen, trace: str, settings: dict, far_side: list[int] | None = None):
        super().__init__(proc, trace, settings)
        self.far_side = far_side or []


def start(testbed: str, router_ns: str, topo, keep: bool, timeout: float = 15.0,
          far_side: list[int] | None = None) -> WanLine:
    """Start the line in ``router_ns``; returns once its sockets are open. ``far_side``: what
    ``far_side_threads`` returned, kept with the line for whoever measures it."""
    settings = line_settings(topo)
    trace = trace_path(testbed)
    os.makedirs(os.path.dirname(trace), exist_ok=True)
    with open(trace, "w") as f:  # the header: when the line started and what it emulates
        f.write(f"S {time.time():.6f} {json.dumps(settings, sort_keys=True)}\n")
    proc = mover.start("clusterlab.cluster.testbed.wanline", router_ns, {**settings, "trace": trace}, keep,
                       "the WAN delay line", timeout)
    return WanLine(proc, trace, settings, far_side)


def main() -> int:
    """The line's process (inside the router namespace): ``wanline JSON``."""
    from clusterlab import _core

    cfg = json.loads(sys.argv[1])
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    totals = _core.wan_delay_line(ROUTER_IFACES[0], ROUTER_IFACES[1], float(cfg["rate_bps"]), int(cfg["delay_ns"]),
                                  int(cfg["limit_bytes"]), bool(cfg["shared"]), cfg.get("trace"),
                                  int(cfg["interval_ns"]), 0 if cfg["watch"] else -1, 1, True,
                                  cfg.get("limit_cells"), cfg.get("discard", "none"), int(cfg.get("epd_threshold", 0)),
                                  float(cfg.get("arrival_rate_bps", 0.0)))
    print(json.dumps(totals), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
