"""Reduce for short arrays: a binomial gather of every rank's array to the root (``log2 n``
rounds), which folds them in rank order. Exact (the left-to-right rank-order fold, bit for bit)
with the fewest rounds; the root receives ``n - 1`` arrays, so only short arrays pay off."""

from __future__ import annotations

from clusterlab.comm.collectives import gather_binomial
from clusterlab.comm.collectives._common import Pattern, check_array, check_root, combine, reduce_fn

OP, NAME = "reduce", "gather"
EXACT = True


def run(comm, array, op: str = "sum", root: int = 0):
    check_root(comm, root)
    fn, a = reduce_fn(op), check_array(array)
    parts = gather_binomial.run(comm, a, root)
    if parts is None:
        return None
    acc = parts[0].copy()
    for r in range(1, comm.size):
        acc = combine(fn, acc, parts[r], r, into=True)
    return acc


def pattern(m: float, n: int) -> Pattern:
    g = gather_binomial.pattern(m, n)
    return Pattern(hops=g.hops, sends=g.sends, bytes=g.bytes, reduce_bytes=(n - 1) * m, peers=g.peers,
                   total=g.total, total_messages=g.total_messages)
