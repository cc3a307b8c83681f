"""Reduce-scatter by direct exchange, shared by ``reduce_scatter_gather`` and
``allreduce_reduce_scatter_allgather``: rank r owns piece r of the flattened array, receives
piece r from every rank and folds them in rank order, so each piece is the exact left-to-right
sum. Same traffic as a ring reduce-scatter: ``(n - 1) / n`` of the array in and out per rank."""

from __future__ import annotations

from clusterlab.comm.collectives._common import TAG, combine, split


def reduce_scatter(comm, fn, a):
    """(pieces of ``a``, this rank's exactly reduced piece)."""
    n, r = comm.size, comm.rank
    pieces = split(a.reshape(-1), n)
    for k in range(1, n):  # shifted order spreads the load over receivers
        dst = (r + k) % n
        comm.send(dst, pieces[dst], TAG)
    acc = None
    for j in range(n):
        x = pieces[r] if j == r else comm.recv(j, TAG)
        acc = (x.copy() if j == r else x) if acc is None else combine(fn, acc, x, j, into=True)
    return pieces, acc
