"""Reduce at the root by receiving every rank's array in rank order and folding left to right:
``((a0 + a1) + a2) + ...``, the reference result, bit for bit, for every dtype."""

from __future__ import annotations

from clusterlab.comm.collectives._common import TAG, Pattern, check_array, check_root, combine, reduce_fn

OP, NAME = "reduce", "linear"
EXACT = True


def run(comm, array, op: str = "sum", root: int = 0):
    check_root(comm, root)
    fn, a = reduce_fn(op), check_array(array)
    if comm.rank != root:
        comm.send(root, a, TAG)
        return None
    acc = None
    for r in range(comm.size):
        x = a if r == root else comm.recv(r, TAG)
        acc = (x.copy() if x is a else x) if acc is None else combine(fn, acc, x, r, into=True)
    return acc


def pattern(m: float, n: int) -> Pattern:
    return Pattern(hops=1, sends=n - 1, bytes=(n - 1) * m, reduce_bytes=(n - 1) * m, peers=n - 1, total=(n - 1) * m, total_messages=n - 1,
                   incast=(n - 1) * m)
