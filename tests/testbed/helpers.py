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
