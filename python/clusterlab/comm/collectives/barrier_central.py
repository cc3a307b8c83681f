"""Barrier through a coordinator: every rank tells rank 0 it arrived, rank 0 releases all."""

from __future__ import annotations

from clusterlab.comm.collectives._common import TAG, Pattern

OP, NAME = "barrier", "central"


def run(comm):
    if comm.rank != 0:
        comm.send(0, b"", TAG)
        comm.recv(0, TAG)
        return
    for r in range(1, comm.size):
        comm.recv(r, TAG)
    for r in range(1, comm.size):
        comm.send(r, b"", TAG)


def pattern(m: float, n: int) -> Pattern:
    return Pattern(hops=2, sends=2 * (n - 1), bytes=0.0, peers=n - 1, total_messages=2 * (n - 1))
