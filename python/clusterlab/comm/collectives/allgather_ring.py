"""Allgather around a ring: in each of ``n - 1`` steps every rank passes the block it received
last to its right neighbour. Bandwidth-optimal; latency grows linearly with ``n``."""

from __future__ import annotations

from clusterlab.comm.collectives._common import TAG, Pattern

OP, NAME = "allgather", "ring"


def run(comm, data):
    n, r = comm.size, comm.rank
    blocks = [None] * n
    blocks[r] = data
    right, left = (r + 1) % n, (r - 1) % n
    for s in range(n - 1):
        comm.send(right, blocks[(r - s) % n], TAG)
        blocks[(r - s - 1) % n] = comm.recv(left, TAG)
    return blocks


def pattern(m: float, n: int) -> Pattern:
    """``m`` is the size of one rank's contribution."""
    return Pattern(hops=n - 1, sends=2 * (n - 1), bytes=(n - 1) * m, peers=2, total=n * (n - 1) * m, total_messages=n * (n - 1))
