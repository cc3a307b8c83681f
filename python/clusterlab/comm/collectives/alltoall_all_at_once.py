"""All-to-all as seed 000's synchronized broadcast: every rank sends its chunk to every rank
in the same order (0, 1, 2, ...), then receives. All senders aim at the same receiver at the
same moment, the pattern that overflows switch buffers and exposes TCP retransmission timers."""

from __future__ import annotations

from clusterlab.comm.collectives._common import TAG, Pattern, check_chunks

OP, NAME = "alltoall", "all_at_once"


def run(comm, chunks):
    n, r = comm.size, comm.rank
    chunks = check_chunks(chunks, n, "alltoall")
    for j in range(n):
        if j != r:
            comm.send(j, chunks[j], TAG)
    return [chunks[j] if j == r else comm.recv(j, TAG) for j in range(n)]


def pattern(m: float, n: int) -> Pattern:
    """``m`` is the size of one chunk (one pair's message)."""
    return Pattern(hops=1, sends=2 * (n - 1), bytes=(n - 1) * m, peers=n - 1, total=n * (n - 1) * m, total_messages=n * (n - 1),
                   incast=(n - 1) * m)
