"""Broadcast by flat fan-out: the root sends the whole message to every other rank in turn
(seed 002's baseline over point-to-point IP). Cheapest for tiny messages on few ranks, worst
for large ones: the root's link carries ``n - 1`` copies."""

from __future__ import annotations

from clusterlab.comm.collectives._common import TAG, Pattern, check_root

OP, NAME = "bcast", "flat"


def run(comm, data, root: int = 0):
    check_root(comm, root)
    if comm.rank != root:
        return comm.recv(root, TAG)
    if data is None:
        raise ValueError("the root of a broadcast must pass data")
    for r in range(comm.size):
        if r != root:
            comm.send(r, data, TAG)
    return data


def pattern(m: float, n: int) -> Pattern:
    return Pattern(hops=1, sends=n - 1, bytes=(n - 1) * m, peers=n - 1, total=(n - 1) * m, total_messages=n - 1)
