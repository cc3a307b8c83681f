"""Dissemination barrier (Hensgen, Finkel, Manber): in round k rank r signals ``r + 2**k`` and
waits for ``r - 2**k`` (mod n); after ``ceil(log2 n)`` rounds everyone has heard, directly or
not, from everyone. Works for any ``n``."""

from __future__ import annotations

from clusterlab.comm.collectives._common import TAG, Pattern, ceil_log2

OP, NAME = "barrier", "dissemination"


def run(comm):
    n, r = comm.size, comm.rank
    d = 1
    while d < n:
        comm.send((r + d) % n, b"", TAG)
        comm.recv((r - d) % n, TAG)
        d <<= 1


def pattern(m: float, n: int) -> Pattern:
    k = ceil_log2(n)
    return Pattern(hops=k, sends=2 * k, bytes=0.0, peers=k, total_messages=n * k)
