"""Reduce as a reduce-scatter (each rank reduces ``1/n`` of the array, in rank order) followed
by a gather of the pieces at the root (Rabenseifner's idea for long vectors). Exact: the result
is the left-to-right rank-order fold, bit for bit."""

from __future__ import annotations

import numpy as np

from clusterlab.comm.collectives._common import TAG, Pattern, check_array, check_root, reduce_fn
from clusterlab.comm.collectives._reduce_scatter import reduce_scatter
from clusterlab.comm.errors import ProtocolError

OP, NAME = "reduce", "scatter_gather"
EXACT = True


def run(comm, array, op: str = "sum", root: int = 0):
    check_root(comm, root)
    fn, a = reduce_fn(op), check_array(array)
    n, r = comm.size, comm.rank
    pieces, mine = reduce_scatter(comm, fn, a)
    if r != root:
        comm.send(root, mine, TAG)
        return None
    parts = []
    for j in range(n):
        x = mine if j == r else comm.recv(j, TAG)
        if not isinstance(x, np.ndarray) or x.shape != pieces[j].shape or x.dtype != a.dtype:
            raise ProtocolError(f"reduce: rank {j} returned a piece of the wrong shape or dtype")
        parts.append(x)
    return np.concatenate(parts).reshape(a.shape) if parts else a.copy()


def pattern(m: float, n: int) -> Pattern:
    f = (n - 1) / n
    return Pattern(hops=2, sends=3 * (n - 1), bytes=2 * f * m, reduce_bytes=f * m, peers=n - 1, total=(n - 1) * m + f * m,
                   total_messages=(n + 1) * (n - 1), incast=f * m)
