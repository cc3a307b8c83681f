"""Broadcast as a binomial scatter of ``n`` pieces followed by a ring allgather (van de Geijn).
Each link carries about ``2 m`` bytes instead of ``m log2 n``: the choice for large messages.

Non-roots do not know the payload's type or size, so the root packs it (dtype, shape) before
cutting it into pieces; the pieces are sent as ``uint8`` arrays."""

from __future__ import annotations

import numpy as np

from clusterlab.comm.collectives import allgather_ring, scatter_binomial
from clusterlab.comm.collectives._common import TAG, Pattern, binomial_subtree_total, ceil_log2, check_root, split
from clusterlab.comm.collectives._pack import pack, unpack

OP, NAME = "bcast", "scatter_allgather"


SEPARATIONS = ("overlap", "neighbours", "barrier")
"""How the ring waits for the scatter: ``overlap`` not at all (a rank starts its ring as soon as it
has its piece), ``neighbours`` each rank first tells its left neighbour it has its piece and waits
for its right neighbour's word, ``barrier`` every rank waits for all (a dissemination barrier)."""


def run(comm, data, root: int = 0, separate: str = "overlap"):
    check_root(comm, root)
    if separate not in SEPARATIONS:
        raise ValueError(f"separate must be one of {', '.join(SEPARATIONS)}, got {separate!r}")
    n = comm.size
    if comm.rank == root and data is None:
        raise ValueError("the root of a broadcast must pass data")
    if n == 1:
        return data
    pieces = None
    if comm.rank == root:
        pieces = split(np.frombuffer(pack([data]), dtype=np.uint8), n)
    piece = scatter_binomial.run(comm, pieces, root)
    if separate == "neighbours":  # each rank's scatter sends precede its word, so per-pair order holds
        comm.send((comm.rank - 1) % n, b"1", TAG)
        comm.recv((comm.rank + 1) % n, TAG)
    elif separate == "barrier":
        comm.barrier("dissemination")
    parts = allgather_ring.run(comm, piece)
    if comm.rank == root:
        return data
    return unpack(np.concatenate(parts))[0]


def pattern(m: float, n: int) -> Pattern:
    k = ceil_log2(n)
    return Pattern(hops=k + n - 1, sends=k + 2 * (n - 1), bytes=2 * m * (n - 1) / n, peers=k + 1,
                   total=m / n * binomial_subtree_total(n) + (n - 1) * m, total_messages=(n - 1) * (n + 1),
                   copies=4 * m)
