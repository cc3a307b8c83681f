"""Shared by the testbed tests: skip reasons and small rank functions (module level, so the
launcher can import them in the ranks)."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess

import numpy as np
import pytest


def netns_unavailable() -> str | None:
    """Why namespace tests cannot run here, or None."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root (network namespaces, veth, tc)"
    for tool in ("ip", "tc", "bridge"):
        if shutil.which(tool) is None:
            return f"needs the '{tool}' program (iproute2)"
    if subprocess.run(["ip", "netns", "list"], capture_output=True).returncode != 0:
        return "'ip netns' does not work here"
    return None


def require_netns() -> None:
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)


def fresh_name() -> str:
    return "t" + secrets.token_hex(3)


def where_am_i(comm):
    """Each rank: its namespace inode, its bind address, and an allreduce over the mesh."""
    total = comm.allreduce(np.array([comm.rank + 1], dtype=np.int64))
    got = comm.allgather(np.array([comm.rank], dtype=np.int64))
    return {"rank": comm.rank, "netns": os.stat("/proc/self/ns/net").st_ino,
            "bind": os.environ.get("CLUSTERLAB_BIND"), "sum": int(total[0]),
            "gathered": [int(np.asarray(g)[0]) for g in got]}


def host_rto_min_us(comm):
    """Each rank: its namespace inode and its host's net.ipv4.tcp_rto_min_us."""
    comm.barrier()
    with open("/proc/sys/net/ipv4/tcp_rto_min_us") as f:
        return {"netns": os.stat("/proc/self/ns/net").st_ino, "rto_min_us": int(f.read())}


def rank_cost_model(comm, nbytes):
    """Each rank: the cost model it picks collective algorithms by, and its all-reduce pick for
    ``nbytes`` on the job's ranks."""
    from clusterlab.comm import costmodel

    m = costmodel.current()
    return {"source": m.source, "port_buffer": m.port_buffer, "beta": m.beta,
            "pick": m.pick("allreduce", nbytes, comm.size)}


def host_congestion(comm):
    """Each rank: the job's size, its namespace, its host's RTO minimum and default congestion
    control, and which communicator it has."""
    out = host_rto_min_us(comm)
    with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
        out["congestion"] = f.read().strip()
    return {**out, "size": comm.size, "backend": (comm.stats() if hasattr(comm, "stats") else {}).get("backend")}


MOVER_DRIVER = """
import sys, time
from clusterlab.cluster.testbed import StarTopo, TestbedNetwork
tb = TestbedNetwork(StarTopo(hosts=2, {topo}), name=sys.argv[1]).up()
print(tb.{mover}.proc.pid, flush=True)
time.sleep(600)
"""


def assert_mover_dies_with_its_driver(name: str, topo: str, mover: str) -> None:
    """A driver builds a testbed (``StarTopo(hosts=2, <topo>)``) and is SIGKILLed: its frame mover
    (``tb.<mover>``: the WAN line, the ATM switch) must stop, and nothing run in the namespaces."""
    import signal
    import subprocess
    import sys
    import time

    from clusterlab.cluster.testbed import leftovers
    from clusterlab.cluster.testbed.clean import pids_in

    drv = subprocess.Popen([sys.executable, "-c", MOVER_DRIVER.format(topo=topo, mover=mover), name],
                           stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        pid = int(drv.stdout.readline())
        assert os.path.exists(f"/proc/{pid}")
        drv.send_signal(signal.SIGKILL)
        drv.wait(10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}"):
            time.sleep(0.05)
        # the zombie is reaped by init once its parent is gone; either way it no longer runs
        alive = os.path.exists(f"/proc/{pid}") and open(f"/proc/{pid}/stat").read().split(")")[1].split()[0] != "Z"
        assert not alive, f"the {mover} outlived its driver"
        assert not pids_in(leftovers(name)["namespaces"])
    finally:
        drv.kill()
        drv.wait()


def networks_brought_up(monkeypatch) -> list[str]:
    """The names of the testbeds this test brings up from now on (so that a test checks what
    its own testbeds left, not the machine's: another test's testbed may be up meanwhile)."""
    from clusterlab.cluster.testbed import TestbedNetwork

    names: list[str] = []
    up = TestbedNetwork.up

    def recording_up(self):
        names.append(self.name)
        return up(self)

    monkeypatch.setattr(TestbedNetwork, "up", recording_up)
    return names


def assert_nothing_left(names: list[str]) -> None:
    from clusterlab.cluster.testbed import leftovers

    assert names, "no testbed was brought up"
    for n in names:
        left = leftovers(n)
        assert not left["namespaces"] and not left["processes"] and not left["state_files"], (n, left)
