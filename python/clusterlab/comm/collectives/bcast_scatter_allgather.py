"""Broadcast as a binomial scatter of ``n`` pieces followed by a ring allgather (van de Geijn).
Each link carries about ``2 m`` bytes instead of ``m log2 n``: the choice for large messages.

Non-roots do not know the payload's type or size, so the root packs it (dtype, shape) before
cutting it into pieces; the pieces are sent as ``uint8`` arrays.

The scatter sends a rank's subtrees largest first. A send returns once the transport has the
data, so a parent's sends to all its children would share its one link and the largest
subtree's child would get its data last, forwarding only then: the critical path would carry
every level's whole fan-out (at 16 ranks 26 pieces, not 15; measured on the testbed,
``bench/seed002_phases.py``). So each child acknowledges its subtree, and a parent sends ``in
turn`` (waits for each child's word before the next send) when the cost model prices that
below sending ``at_once`` (acknowledgements drained at the end): ``CostModel.schedule``. When a
rank's whole fan-out fits TCP's first window (the model's ``window``: at 16 ranks up to a 64 KiB
message at MTU 9180), its sends leave its host in send order anyway and ``at_once`` saves the
acknowledgements' hops (measured at 64 KiB on 16 hosts: 7.6 ms at once against 8.0 in turn).
Either way the result is the same bytes; only the order of the wire differs.
"""

from __future__ import annotations

import numpy as np

from clusterlab.comm.collectives import allgather_ring, scatter_binomial
from clusterlab.comm.collectives._common import (
    TAG,
    Pattern,
    binomial_subtree_total,
    ceil_log2,
    check_root,
    split,
)
from clusterlab.comm.collectives._pack import pack, unpack

OP, NAME = "bcast", "scatter_allgather"
SCHEDULES = scatter_binomial.SCHEDULES
SEPARATIONS = ("overlap", "neighbours", "barrier")
"""How the ring waits for the scatter: ``overlap`` not at all (a rank starts its ring as soon as it
has its piece), ``neighbours`` each rank first tells its left neighbour it has its piece and waits
for its right neighbour's word, ``barrier`` every rank waits for all (a dissemination barrier)."""
_ACK = b"1"


def run(comm, data, root: int = 0, separate: str = "overlap", schedule: str | None = None):
    """``schedule``: ``in_turn``, ``at_once`` or None (each parent asks the cost model in force)."""
    check_root(comm, root)
    if separate not in SEPARATIONS:
        raise ValueError(f"separate must be one of {', '.join(SEPARATIONS)}, got {separate!r}")
    if schedule is not None and schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
    n = comm.size
    if comm.rank == root and data is None:
        raise ValueError("the root of a broadcast must pass data")
    if n == 1:
        return data
    pieces = None
    if comm.rank == root:
        pieces = split(np.frombuffer(pack([data]), dtype=np.uint8), n)
    piece = _scatter(comm, pieces, root, schedule)
    if separate == "neighbours":  # each rank's scatter messages precede its word, so per-pair order holds
        comm.send((comm.rank - 1) % n, _ACK, TAG)
        comm.recv((comm.rank + 1) % n, TAG)
    elif separate == "barrier":
        comm.barrier("dissemination")
    parts = allgather_ring.run(comm, piece)
    if comm.rank == root:
        return data
    return unpack(np.concatenate(parts))[0]


def _scatter(comm, pieces, root: int, schedule: str | None):
    """Binomial scatter of the root's ``pieces`` (one per rank); every child acknowledges its subtree."""
    n = comm.size
    items = None if pieces is None else [pieces[(i + root) % n] for i in range(n)]

    def choose(items):
        if schedule is not None:
            return schedule
        # a local choice: both schedules make the same bytes, so ranks need not agree
        from clusterlab.comm import costmodel

        return costmodel.current().schedule(OP, NAME, float(np.asarray(items[0]).nbytes * n), n)

    return scatter_binomial.tree(comm, items, root, acknowledge=True, schedule=choose, what="bcast scatter")


def _at_once_pieces(n: int, window_pieces: float = 0.0) -> int:
    """Pieces on the critical path of a binomial scatter whose ranks send to all their children at
    once over one link. A fan-out of at most ``window_pieces`` pieces fits TCP's first window and
    leaves in send order (largest subtree first), so a child has its subtree when the pieces sent
    before it and its own have left; a larger one's flows share the link and every child has its
    subtree only when the whole fan-out has left.

    >>> _at_once_pieces(16), _at_once_pieces(6), _at_once_pieces(2), _at_once_pieces(16, window_pieces=15)
    (26, 6, 1, 15)
    """
    done = [0] * n
    for v in range(1, n):  # parents come before children
        low = v & -v
        parent = v - low
        fan_out = min(parent & -parent if parent else 1 << ceil_log2(n), n - parent) - 1
        if fan_out <= window_pieces:  # in order: the siblings sent before v (larger subtrees) and v
            done[v] = done[parent] + sum(min(k, n - parent - k) for k in _masks_from(low, parent, n))
        else:
            done[v] = done[parent] + fan_out
    return max(done)


def _masks_from(low: int, parent: int, n: int) -> list[int]:
    """The masks of ``parent``'s children sent no later than the child ``parent + low``."""
    top = (parent & -parent) >> 1 if parent else 1 << max(0, ceil_log2(n) - 1)
    out = []
    while top >= low:
        if parent + top < n:
            out.append(top)
        top >>= 1
    return out


def patterns(m: float, n: int, window: float = 0.0) -> dict[str, Pattern]:
    """The two scatter schedules, each followed by the ring: ``in_turn`` pays a hop per level for
    the acknowledgement and moves ``(n - 1) m / n`` bytes on the critical path; ``at_once`` pays
    one hop for the last acknowledgement (collected before the ring) and moves every level's fan-out (``_at_once_pieces``), or as ``in_turn`` without its
    acknowledgements' hops where a fan-out fits ``window`` bytes (TCP's first window: it leaves
    in send order)."""
    k = ceil_log2(n)
    ring = (n - 1) * m / n
    common = dict(peers=k + 1, total=m / n * binomial_subtree_total(n) + (n - 1) * m,
                  total_messages=(n - 1) * (n + 2), copies=4 * m)
    pieces = _at_once_pieces(n, window / (m / n) if m > 0 else float("inf"))
    return {"in_turn": Pattern(hops=2 * k + n - 1, sends=2 * k + 2 * (n - 1), bytes=ring + ring, **common),
            # at once, a parent collects its children's words before its ring: one hop after the last has its subtree
            "at_once": Pattern(hops=k + n, sends=2 * k + 2 * (n - 1), bytes=pieces * m / n + ring, **common)}


def pattern(m: float, n: int) -> Pattern:
    """The ``in_turn`` schedule's pattern (``patterns`` has both; the cost model takes the cheaper)."""
    return patterns(m, n)["in_turn"]
