"""Reduce along a binomial tree: in round k ranks with bit k set (relative to the root) send
their partial result to the rank ``2**k`` below and drop out; ``ceil(log2 n)`` rounds.

Combination order is the tree's: ``(a0 + a1) + (a2 + a3)`` and so on (relative to the root).
Exact for integers, min and max; for floating-point sums the last bits can differ from a
left-to-right sum in rank order (use ``linear`` or ``scatter_gather`` when that matters)."""

from __future__ import annotations

from clusterlab.comm.collectives._common import (
    TAG,
    Pattern,
    ceil_log2,
    check_array,
    check_root,
    combine,
    reduce_fn,
)

OP, NAME = "reduce", "binomial"
EXACT = False  # floating-point sums differ from the rank-order sum in the last bits


def run(comm, array, op: str = "sum", root: int = 0):
    check_root(comm, root)
    fn, acc = reduce_fn(op), check_array(array)
    n, rank = comm.size, comm.rank
    vr = (rank - root) % n
    fresh = False  # acc is still the caller's array: never write into it
    mask = 1
    while mask < n:
        if vr & mask:
            comm.send((rank - mask) % n, acc, TAG)
            return None
        if vr + mask < n:
            src = (rank + mask) % n
            acc = combine(fn, acc, comm.recv(src, TAG), src, into=fresh)
            fresh = True
        mask <<= 1
    return acc if fresh else acc.copy()


def pattern(m: float, n: int) -> Pattern:
    k = ceil_log2(n)
    return Pattern(hops=k, sends=k, bytes=k * m, reduce_bytes=k * m, peers=k, total=(n - 1) * m, total_messages=n - 1)
