"""Scatter along a binomial tree: the root sends each child the chunks of its whole subtree in
one message, ``ceil(log2 n)`` rounds. Subtrees of several ranks travel ``pack``ed; a subtree of
one rank gets its chunk as is (both ends know the subtree size, so no header is needed)."""

from __future__ import annotations

from clusterlab.comm.collectives._common import (
    TAG,
    Pattern,
    binomial_subtree_total,
    ceil_log2,
    check_chunks,
    check_root,
)
from clusterlab.comm.collectives._pack import pack, unpack
from clusterlab.comm.errors import ProtocolError

OP, NAME = "scatter", "binomial"


def run(comm, chunks, root: int = 0):
    check_root(comm, root)
    n, rank = comm.size, comm.rank
    vr = (rank - root) % n
    if vr == 0:
        chunks = check_chunks(chunks, n, "scatter")
        items = [chunks[(i + root) % n] for i in range(n)]  # relative rank order
        mask = 1 << ceil_log2(n)
    else:
        mask = vr & -vr  # lowest set bit: the parent is vr - mask
        count = min(mask, n - vr)
        msg = comm.recv((rank - mask) % n, TAG)
        items = [msg] if count == 1 else unpack(msg)
        if len(items) != count:
            raise ProtocolError(f"scatter: rank {(rank - mask) % n} sent {len(items)} chunks, expected {count}")
    mask >>= 1
    while mask > 0:
        child = vr + mask
        if child < n:
            count = min(mask, n - child)
            sub = items[mask:mask + count]
            comm.send((rank + mask) % n, sub[0] if count == 1 else pack(sub), TAG)
        mask >>= 1
    return items[0]


def pattern(m: float, n: int) -> Pattern:
    k = ceil_log2(n)
    return Pattern(hops=k, sends=k, bytes=(n - 1) * m, peers=k, total=m * binomial_subtree_total(n), total_messages=n - 1,
                   copies=2 * max(0, n - 2) * m)
