"""Allreduce as a direct reduce-scatter (rank r reduces piece r, folding in rank order) and a
ring allgather of the pieces. Same traffic as ``ring`` and exact: every piece is the
left-to-right rank-order fold, so the result matches ``reduce_linear`` bit for bit."""

from __future__ import annotations

import numpy as np

from clusterlab.comm.collectives import allgather_ring
from clusterlab.comm.collectives._common import Pattern, check_array, reduce_fn
from clusterlab.comm.collectives._reduce_scatter import reduce_scatter
from clusterlab.comm.errors import ProtocolError

OP, NAME = "allreduce", "reduce_scatter_allgather"
EXACT = True


def run(comm, array, op: str = "sum"):
    fn, a = reduce_fn(op), check_array(array)
    if comm.size == 1:
        return a.copy()
    pieces, mine = reduce_scatter(comm, fn, a)
    parts = allgather_ring.run(comm, mine)
    for j, (x, p) in enumerate(zip(parts, pieces, strict=True)):
        if not isinstance(x, np.ndarray) or x.shape != p.shape or x.dtype != a.dtype:
            raise ProtocolError(f"allreduce: rank {j}'s piece has the wrong shape or dtype")
    return np.concatenate(parts).reshape(a.shape)


def pattern(m: float, n: int) -> Pattern:
    f = (n - 1) / n
    return Pattern(hops=n, sends=4 * (n - 1), bytes=2 * f * m, reduce_bytes=f * m, peers=n - 1, total=2 * (n - 1) * m, total_messages=2 * n * (n - 1),
                   incast=f * m)
