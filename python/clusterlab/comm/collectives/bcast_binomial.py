"""Broadcast along a binomial tree: in round k every rank that has the message sends it to
the rank ``2**k`` places further (relative to the root). ``ceil(log2 n)`` rounds of the whole
message: the choice for small and medium messages."""

from __future__ import annotations

from clusterlab.comm.collectives._common import TAG, Pattern, ceil_log2, check_root

OP, NAME = "bcast", "binomial"


def run(comm, data, root: int = 0):
    check_root(comm, root)
    n, rank = comm.size, comm.rank
    vr = (rank - root) % n
    if vr == 0 and data is None:
        raise ValueError("the root of a broadcast must pass data")
    mask = 1
    while mask < n:
        if vr & mask:  # lowest set bit: the parent is vr - mask
            data = comm.recv((rank - mask) % n, TAG)
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:  # larger subtrees first, so the deepest path starts earliest
        if vr + mask < n:
            comm.send((rank + mask) % n, data, TAG)
        mask >>= 1
    return data


def pattern(m: float, n: int) -> Pattern:
    k = ceil_log2(n)
    return Pattern(hops=k, sends=k, bytes=k * m, peers=k, total=(n - 1) * m, total_messages=n - 1)
