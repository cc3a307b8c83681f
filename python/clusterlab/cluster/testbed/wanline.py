"""The WAN line of a two-site testbed: the Rust delay line (``clusterlab-wan``) run in the
router namespace, started and stopped with the testbed.

``start`` runs ``python -m clusterlab.cluster.testbed.wanline`` inside ``clab-<tb>-wan``; it
opens packet sockets on ``a`` and ``b``, says ``ready`` and moves frames until its stdin
reaches end of file. The driver holds the other end of that pipe, so the line dies with the
driver, also on SIGKILL; a testbed kept after its driver (``clusterlab testbed up``) has a line
without a pipe, and ``testbed down|clean NAME`` kills it with every other process of the
testbed's namespaces. Every 0.1 s the line appends its per-direction histogram (packets and
bytes per 64-byte IP length bucket of the packets it carried, and its drops) to
``/run/clusterlab/testbed/<tb>.wan.trace`` (format: ``clusterlab.monitor.wan``); ``clean``
removes the file.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time

from clusterlab.cluster.testbed.link import ROUTER_IFACES
from clusterlab.cluster.testbed.node import TestbedError

TRACE_INTERVAL = 0.1
STATE_DIR = "/run/clusterlab/testbed"


def trace_path(testbed: str) -> str:
    return os.path.join(STATE_DIR, f"{testbed}.wan.trace")


def line_settings(topo) -> dict:
    """What the delay line emulates (after dilation), as the line's process takes it."""
    return {"rate_bps": topo.wan_rate_bps / topo.dilation,
            "delay_ns": int(round(topo.wan_delay_seconds * topo.dilation * 1e9)),
            "limit_bytes": int(topo.wan_queue_bytes), "shared": bool(topo.wan_shared),
            "interval_ns": int(TRACE_INTERVAL * topo.dilation * 1e9)}


class WanLine:
    """The running line of testbed ``name`` (its process and, unless kept, the lifeline pipe)."""

    def __init__(self, proc: subprocess.Popen, trace: str, settings: dict):
        self.proc, self.trace, self.settings = proc, trace, settings

    def stop(self, timeout: float = 5.0) -> dict | None:
        """Close the lifeline and collect the line's totals (None if it was killed)."""
        if self.proc.stdin is None:  # a kept line has no lifeline and no reader: end it
            self.proc.kill()
            self.proc.wait(timeout)
            return None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout)
            return None
        out = self.proc.stdout.read()
        self.proc.stdout.close()
        self.proc.stderr.close()
        for line in reversed((out or "").splitlines()):
            if line.startswith("{"):
                return json.loads(line)
        return None


def start(testbed: str, router_ns: str, topo, keep: bool, timeout: float = 15.0) -> WanLine:
    """Start the line in ``router_ns``; returns once its sockets are open."""
    settings = line_settings(topo)
    trace = trace_path(testbed)
    os.makedirs(STATE_DIR, exist_ok=True)
    with open(trace, "w") as f:  # the header: when the line started and what it emulates
        f.write(f"S {time.time():.6f} {json.dumps(settings, sort_keys=True)}\n")
    env = dict(os.environ)
    pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env["PYTHONPATH"] = pkg_root + os.pathsep + env.get("PYTHONPATH", "")
    args = ["ip", "netns", "exec", router_ns, sys.executable, "-m", "clusterlab.cluster.testbed.wanline",
            json.dumps({**settings, "trace": trace, "watch": not keep})]
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL if keep else subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=keep)  # a kept line must not get the terminal's Ctrl-C
    deadline = time.monotonic() + timeout
    first = ""
    while time.monotonic() < deadline:
        r, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if r:
            first = proc.stdout.readline()
            break
    if first.strip() != "ready":
        proc.kill()
        _, err = proc.communicate()
        why = (err or "").strip().splitlines()[-1:] or [f"no answer in {timeout} s"]
        raise TestbedError(f"the WAN delay line did not start: {why[0]}")
    if keep:  # nobody reads it later: let it go (its output is only the final totals)
        proc.stdout.close()
        proc.stderr.close()
    return WanLine(proc, trace, settings)


def main() -> int:
    """The line's process (inside the router namespace): ``wanline JSON``."""
    from clusterlab import _core

    cfg = json.loads(sys.argv[1])
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    totals = _core.wan_delay_line(ROUTER_IFACES[0], ROUTER_IFACES[1], float(cfg["rate_bps"]), int(cfg["delay_ns"]),
                                  int(cfg["limit_bytes"]), bool(cfg["shared"]), cfg.get("trace"),
                                  int(cfg["interval_ns"]), 0 if cfg["watch"] else -1, 1, True)
    print(json.dumps(totals), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
