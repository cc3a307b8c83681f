"""Gather by direct sends: every rank sends to the root, which receives in rank order."""

from __future__ import annotations

from clusterlab.comm.collectives._common import TAG, Pattern, check_root

OP, NAME = "gather", "linear"


def run(comm, data, root: int = 0):
    check_root(comm, root)
    if comm.rank != root:
        comm.send(root, data, TAG)
        return None
    return [data if r == root else comm.recv(r, TAG) for r in range(comm.size)]


def pattern(m: float, n: int) -> Pattern:
    """``m`` is the size of one rank's contribution."""
    return Pattern(hops=1, sends=n - 1, bytes=(n - 1) * m, peers=n - 1, total=(n - 1) * m, total_messages=n - 1,
                   incast=(n - 1) * m)
