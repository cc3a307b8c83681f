"""Allreduce as a binomial reduce to rank 0 followed by a binomial broadcast: ``2 log2 n``
rounds of the whole array, the choice for short arrays. Combination order is the binomial
tree's (see ``reduce_binomial``); every rank gets the same bits."""

from __future__ import annotations

from clusterlab.comm.collectives import bcast_binomial, reduce_binomial
from clusterlab.comm.collectives._common import Pattern, ceil_log2, check_array

OP, NAME = "allreduce", "reduce_bcast"
EXACT = False


def run(comm, array, op: str = "sum"):
    a = check_array(array)
    out = reduce_binomial.run(comm, a, op, 0)
    return bcast_binomial.run(comm, out, 0)


def pattern(m: float, n: int) -> Pattern:
    k = ceil_log2(n)
    return Pattern(hops=2 * k, sends=2 * k, bytes=2 * k * m, reduce_bytes=k * m, peers=k, total=2 * (n - 1) * m, total_messages=2 * (n - 1))
