"""Allreduce for short arrays: allgather every rank's array (recursive doubling, ``log2 n``
rounds) and fold them locally in rank order. Exact (the left-to-right rank-order fold, bit for
bit) with the fewest rounds; every rank moves ``(n - 1)`` arrays, so only short arrays pay off."""

from __future__ import annotations

from clusterlab.comm.collectives import allgather_recursive_doubling
from clusterlab.comm.collectives._common import Pattern, check_array, combine, reduce_fn

OP, NAME = "allreduce", "allgather"
EXACT = True


def run(comm, array, op: str = "sum"):
    fn, a = reduce_fn(op), check_array(array)
    parts = allgather_recursive_doubling.run(comm, a)
    acc = parts[0].copy()
    for r in range(1, comm.size):
        acc = combine(fn, acc, parts[r], r, into=True)
    return acc


def pattern(m: float, n: int) -> Pattern:
    rd = allgather_recursive_doubling.pattern(m, n)
    return Pattern(hops=rd.hops, sends=rd.sends, bytes=rd.bytes, reduce_bytes=(n - 1) * m, peers=rd.peers,
                   total=rd.total, total_messages=rd.total_messages)
