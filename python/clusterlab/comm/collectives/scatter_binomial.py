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
    items = None
    if comm.rank == root:
        chunks = check_chunks(chunks, comm.size, "scatter")
        items = [chunks[(i + root) % comm.size] for i in range(comm.size)]  # relative rank order
    return tree(comm, items, root)


_ACK = b"1"
SCHEDULES = ("in_turn", "at_once")


def tree(comm, items, root: int, acknowledge: bool = False, schedule=None, what: str = "scatter"):
    """The binomial scatter of the root's ``items`` (one per rank, in rank order relative to the
    root); every rank returns its own. With ``acknowledge`` each child tells its parent it has its
    subtree (one byte), and ``schedule(items)`` (called once a rank has its subtree) says how the
    rank sends to its children: ``in_turn`` waits for each child's word before the next send,
    ``at_once`` sends all and collects the words after (the scatter-allgather bcast's scatter)."""
    n, rank = comm.size, comm.rank
    vr = (rank - root) % n
    if vr == 0:
        mask = 1 << ceil_log2(n)
    else:
        mask = vr & -vr  # lowest set bit: the parent is vr - mask
        count = min(mask, n - vr)
        parent = (rank - mask) % n
        msg = comm.recv(parent, TAG)
        items = [msg] if count == 1 else unpack(msg)
        if len(items) != count:
            raise ProtocolError(f"{what}: rank {parent} sent {len(items)} chunks, expected {count}")
        if acknowledge:
            comm.send(parent, _ACK, TAG)
    in_turn = acknowledge and schedule(items) == "in_turn"
    children = []
    mask >>= 1
    while mask > 0:
        child = vr + mask
        if child < n:
            count = min(mask, n - child)
            sub = items[mask:mask + count]
            dest = (rank + mask) % n
            comm.send(dest, sub[0] if count == 1 else pack(sub), TAG)
            children.append(dest)
            if in_turn:
                comm.recv(dest, TAG)
        mask >>= 1
    if acknowledge and not in_turn:
        for dest in children:
            comm.recv(dest, TAG)
    return items[0]


def pattern(m: float, n: int) -> Pattern:
    k = ceil_log2(n)
    return Pattern(hops=k, sends=k, bytes=(n - 1) * m, peers=k, total=m * binomial_subtree_total(n), total_messages=n - 1,
                   copies=2 * max(0, n - 2) * m)
