"""Allgather by recursive doubling: in round k ranks ``2**k`` apart swap everything they hold,
``log2 n`` rounds. For ``n`` not a power of two the ranks above the largest power of two
``p`` first hand their block to rank ``r - p`` and get the full result back at the end."""

from __future__ import annotations

import numpy as np

from clusterlab.comm.collectives._common import TAG, Pattern, ceil_log2
from clusterlab.comm.collectives._pack import pack, unpack
from clusterlab.comm.errors import ProtocolError

OP, NAME = "allgather", "recursive_doubling"


def run(comm, data):
    n, r = comm.size, comm.rank
    p = 1 << (n.bit_length() - 1)
    if r >= p:
        comm.send(r - p, data, TAG)
        blocks = unpack(comm.recv(r - p, TAG))
        if len(blocks) != n:
            raise ProtocolError(f"allgather: rank {r - p} sent {len(blocks)} blocks, expected {n}")
        blocks[r] = data
        return blocks
    held = {r: data}
    if r + p < n:
        held[r + p] = comm.recv(r + p, TAG)
    mask = 1
    while mask < p:
        partner = r ^ mask
        ids = sorted(held)
        comm.send(partner, pack([np.array(ids, dtype=np.uint32)] + [held[i] for i in ids]), TAG)
        got = unpack(comm.recv(partner, TAG))
        gids = got[0] if got and isinstance(got[0], np.ndarray) else None
        if gids is None or len(gids) != len(got) - 1 or any(not 0 <= int(i) < n for i in gids):
            raise ProtocolError(f"allgather: malformed block list from rank {partner}")
        for i, b in zip(gids.tolist(), got[1:], strict=True):
            held[i] = b
        mask <<= 1
    if len(held) != n:
        raise ProtocolError(f"allgather: rank {r} ended with {len(held)} of {n} blocks")
    blocks = [held[i] for i in range(n)]
    if r + p < n:
        comm.send(r + p, pack(blocks), TAG)
    return blocks


def pattern(m: float, n: int) -> Pattern:
    p = 1 << (n.bit_length() - 1)
    k = ceil_log2(p)
    if p == n:
        return Pattern(hops=k, sends=2 * k, bytes=(n - 1) * m, peers=k, total=n * (n - 1) * m, total_messages=n * k,
                       copies=2 * (n - 1) * m)
    return Pattern(hops=k + 2, sends=2 * k + 2, bytes=(p - 1) * 2 * m + m + n * m, peers=k + 1,
                   total=(n - p) * m + (p * n - n) * m + (n - p) * n * m,
                   total_messages=2 * (n - p) + p * k, copies=2 * (n - 1) * m + 2 * n * m)
