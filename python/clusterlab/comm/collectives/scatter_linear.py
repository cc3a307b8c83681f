"""Scatter by direct sends: the root sends ``chunks[r]`` to each rank ``r`` in rank order."""

from __future__ import annotations

from clusterlab.comm.collectives._common import TAG, Pattern, check_chunks, check_root

OP, NAME = "scatter", "linear"


def run(comm, chunks, root: int = 0):
    check_root(comm, root)
    if comm.rank != root:
        return comm.recv(root, TAG)
    chunks = check_chunks(chunks, comm.size, "scatter")
    for r in range(comm.size):
        if r != root:
            comm.send(r, chunks[r], TAG)
    return chunks[root]


def pattern(m: float, n: int) -> Pattern:
    """``m`` is the size of one rank's chunk."""
    return Pattern(hops=1, sends=n - 1, bytes=(n - 1) * m, peers=n - 1, total=(n - 1) * m, total_messages=n - 1)
