"""Gather along a binomial tree (scatter_binomial in reverse): each rank collects its
subtree's contributions and sends them to its parent in one ``pack``ed message."""

from __future__ import annotations

from clusterlab.comm.collectives._common import TAG, Pattern, binomial_subtree_total, ceil_log2, check_root
from clusterlab.comm.collectives._pack import pack, unpack
from clusterlab.comm.errors import ProtocolError

OP, NAME = "gather", "binomial"


def run(comm, data, root: int = 0):
    check_root(comm, root)
    n, rank = comm.size, comm.rank
    vr = (rank - root) % n
    items = [data]
    mask = 1
    while mask < n:
        if vr & mask:
            comm.send((rank - mask) % n, items[0] if len(items) == 1 else pack(items), TAG)
            return None
        child = vr + mask
        if child < n:
            count = min(mask, n - child)
            src = (rank + mask) % n
            msg = comm.recv(src, TAG)
            got = [msg] if count == 1 else unpack(msg)
            if len(got) != count:
                raise ProtocolError(f"gather: rank {src} sent {len(got)} contributions, expected {count}")
            items.extend(got)
        mask <<= 1
    return [items[(r - root) % n] for r in range(n)]


def pattern(m: float, n: int) -> Pattern:
    k = ceil_log2(n)
    return Pattern(hops=k, sends=k, bytes=(n - 1) * m, peers=k, total=m * binomial_subtree_total(n), total_messages=n - 1,
                   copies=2 * max(0, n - 2) * m)
