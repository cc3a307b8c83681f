"""All-to-all by shifted (pairwise) exchange: in step k rank r sends to ``r + k`` and receives
from ``r - k`` (mod n), so every rank receives from exactly one sender at a time."""

from __future__ import annotations

from clusterlab.comm.collectives._common import TAG, Pattern, check_chunks

OP, NAME = "alltoall", "pairwise"


def run(comm, chunks):
    n, r = comm.size, comm.rank
    chunks = check_chunks(chunks, n, "alltoall")
    out = [None] * n
    out[r] = chunks[r]
    for k in range(1, n):
        dst, src = (r + k) % n, (r - k) % n
        comm.send(dst, chunks[dst], TAG)
        out[src] = comm.recv(src, TAG)
    return out


def pattern(m: float, n: int) -> Pattern:
    """``m`` is the size of one chunk (one pair's message)."""
    return Pattern(hops=n - 1, sends=2 * (n - 1), bytes=(n - 1) * m, peers=n - 1, total=n * (n - 1) * m, total_messages=n * (n - 1))
