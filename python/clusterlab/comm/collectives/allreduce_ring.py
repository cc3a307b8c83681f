"""Allreduce around a ring: a ring reduce-scatter (``n - 1`` steps, each passing ``1/n`` of the
array to the right and adding the piece received from the left) and a ring allgather. Each rank
sends and receives ``2 (n - 1) / n`` of the array: bandwidth-optimal.

Piece c is summed in the ring's order ``c, c + 1, ..., c - 1`` (mod n): exact for integers,
min and max and for piece 0; other pieces of a floating-point sum can differ in the last bits
from the rank-order sum (``reduce_scatter_allgather`` moves the same bytes and is exact). Every
rank gets the same bits."""

from __future__ import annotations

import numpy as np

from clusterlab.comm.collectives._common import TAG, Pattern, check_array, check_like, reduce_fn, split

OP, NAME = "allreduce", "ring"
EXACT = False


def run(comm, array, op: str = "sum"):
    fn, a = reduce_fn(op), check_array(array)
    n, r = comm.size, comm.rank
    if n == 1:
        return a.copy()
    work = split(a.reshape(-1), n)  # views of the caller's array: replaced, never written
    right, left = (r + 1) % n, (r - 1) % n
    for s in range(n - 1):
        comm.send(right, work[(r - s) % n], TAG)
        i = (r - s - 1) % n
        got = comm.recv(left, TAG)
        # received partial first: piece i accumulates in ring order starting at rank i
        work[i] = fn(check_like(work[i], got, left), work[i])
    for s in range(n - 1):
        comm.send(right, work[(r + 1 - s) % n], TAG)
        i = (r - s) % n
        work[i] = check_like(work[i], comm.recv(left, TAG), left)
    return np.concatenate(work).reshape(a.shape)


def pattern(m: float, n: int) -> Pattern:
    f = (n - 1) / n
    return Pattern(hops=2 * (n - 1), sends=4 * (n - 1), bytes=2 * f * m, reduce_bytes=f * m, peers=2, total=2 * (n - 1) * m, total_messages=2 * n * (n - 1))
