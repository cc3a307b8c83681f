"""The ATM cell switch of a testbed (``StarTopo(switch="atm")``): the Rust switch
(``clusterlab-atm``) run as a ``mover`` in the switch namespace, started and stopped with the
testbed (it dies with the driver, also on SIGKILL).

It reads every frame that arrives on a port, finds the output port(s) from static entries
(``link.atm_fdb``; group and unknown destinations are flooded within the site), and passes it
through the cell model: AAL5 segmentation into 53-byte cells, cells of frames that arrive at
once interleaved at the output port, a cell buffer per port, a frame delivered only if all its
cells got through (when its last cell leaves), discard none / PPD / EPD. Every 0.1 s (x
dilation) it appends each busy port's counts to ``/run/clusterlab/testbed/<tb>.atm.trace``
(format: ``clusterlab.monitor.atm``); ``clean`` removes the file. A host in ``StarTopo.loss`` has a
lossy link: the model loses each of its cells with that probability, either direction.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from clusterlab.cluster.testbed import mover
from clusterlab.cluster.testbed.link import atm_fdb, atm_ports
from clusterlab.cluster.testbed.mover import STATE_DIR

TRACE_INTERVAL = 0.1


def trace_path(testbed: str) -> str:
    return os.path.join(STATE_DIR, f"{testbed}.atm.trace")


def switch_settings(topo) -> dict:
    """What the switch emulates (after dilation), as the switch's process takes it.

    >>> from clusterlab.cluster.testbed.topo import StarTopo
    >>> s = switch_settings(StarTopo(hosts=2, rate="155.52Mbit", switch="atm", buffer="500cells", dilation=2))
    >>> s["cell_ps"], s["buffer_cells"], s["discard"], s["ports"], s["line_loss"]
    (5662393, 500, 'none', ['p0', 'p1', 'pc'], [])
    >>> switch_settings(StarTopo(hosts=2, switch="atm", loss="h1:0.1%", loss_seed=5))["line_loss"]
    [0.0, 0.001, 0.0]
    """
    ports = atm_ports(topo)
    lossy = topo.line_loss()
    return {"ports": [p for p, _ in ports], "sites": [s for _, s in ports],
            "fdb": [list(e) for e in atm_fdb(topo)],
            "cell_ps": int(round(topo.cell_seconds * 1e12)), "buffer_cells": topo.buffer_cells,
            "discard": topo.discard, "epd_threshold": topo.epd_threshold_cells if topo.discard == "epd" else 0,
            "interval_ns": int(TRACE_INTERVAL * topo.dilation * 1e9),
            # per port, the probability its link loses a cell (node i's port is i); empty: none
            "line_loss": [lossy.get(i, 0.0) for i in range(len(ports))] if lossy else [], "loss_seed": topo.loss_seed}


def start(testbed: str, switch_ns: str, topo, keep: bool, timeout: float = 15.0) -> mover.Mover:
    """Start the switch in ``switch_ns``; returns once its socket is open."""
    settings = switch_settings(topo)
    trace = trace_path(testbed)
    os.makedirs(STATE_DIR, exist_ok=True)
    with open(trace, "w") as f:  # the header: when the switch started and what it emulates
        header = {k: v for k, v in settings.items() if k != "fdb"}
        f.write(f"S {time.time():.6f} {json.dumps(header, sort_keys=True)}\n")
    proc = mover.start("clusterlab.cluster.testbed.atmswitch", switch_ns, {**settings, "trace": trace}, keep,
                       "the ATM switch", timeout)
    return mover.Mover(proc, trace, settings)


def main() -> int:
    """The switch's process (inside the switch namespace): ``atmswitch JSON``."""
    from clusterlab import _core

    cfg = json.loads(sys.argv[1])
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    totals = _core.atm_switch(cfg["ports"], cfg["sites"], [tuple(e) for e in cfg["fdb"]], int(cfg["cell_ps"]),
                              int(cfg["buffer_cells"]), cfg["discard"], int(cfg["epd_threshold"]), cfg.get("trace"),
                              int(cfg["interval_ns"]), 0 if cfg["watch"] else -1, 1, True,
                              [float(p) for p in cfg.get("line_loss") or []], int(cfg.get("loss_seed", 1)))
    print(json.dumps(totals), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
