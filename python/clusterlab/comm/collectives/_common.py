"""Helpers shared by the collective algorithms: the tag, reduction operators, the
communication ``Pattern`` the cost model prices, and argument checks.

>>> ceil_log2(1), ceil_log2(5), ceil_log2(8)
(0, 3, 3)
>>> [c.tolist() for c in split(np.arange(5), 3)]
[[0, 1], [2, 3], [4]]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from clusterlab.comm.payload import COLLECTIVE_TAG, nbytes

TAG = COLLECTIVE_TAG
OPS = {"sum": np.add, "min": np.minimum, "max": np.maximum}


@dataclass(frozen=True)
class Pattern:
    """What an algorithm costs for ``n`` ranks and ``m`` bytes, along its critical path:

    - ``hops``: messages that wait for one another (each pays the latency alpha);
    - ``sends``: messages the busiest rank sends or receives (each pays the per-message CPU
      overhead, even when they overlap in flight: a flat fan-out is 1 hop and n - 1 sends);
    - ``bytes``: bytes moved one after another (beta each);
    - ``reduce_bytes`` combined and ``copies`` (bytes copied to pack several payloads into
      one message), both local memory work (gamma each);
    - ``peers``: connections opened one after another when connections are not kept (set-up);
    - ``total`` and ``total_messages``: bytes and messages over all links together, what
      counts when links are not independent (ranks sharing one host's CPUs and loopback);
    - ``incast``: bytes that many ranks send into one rank at the same moment (what a switch
      port must hold: ``CostModel.port_buffer``), 0 when no rank receives from several at once.
    """

    hops: float
    sends: float
    bytes: float
    reduce_bytes: float = 0.0
    peers: float = 0.0
    total: float = 0.0
    total_messages: float = 0.0
    copies: float = 0.0
    incast: float = 0.0


def ceil_log2(n: int) -> int:
    return max(0, (n - 1).bit_length())


def binomial_subtree_total(n: int) -> int:
    """Sum of the subtree sizes of every non-root rank of a binomial tree on ``n`` ranks (the
    chunks a binomial scatter or gather moves in all).

    >>> binomial_subtree_total(8), binomial_subtree_total(5)
    (12, 5)
    """
    return sum(min(v & -v, n - v) for v in range(1, n))


def split(flat: np.ndarray, n: int) -> list[np.ndarray]:
    """``n`` consecutive views of ``flat``, sizes differing by at most one element, larger first."""
    q, r = divmod(flat.shape[0], n)
    bounds = [0]
    for i in range(n):
        bounds.append(bounds[-1] + q + (1 if i < r else 0))
    return [flat[bounds[i]:bounds[i + 1]] for i in range(n)]


def reduce_fn(op: str):
    try:
        return OPS[op]
    except KeyError:
        raise ValueError(f"unknown reduction {op!r} (use {', '.join(OPS)})") from None


def check_array(array) -> np.ndarray:
    if not isinstance(array, np.ndarray):
        raise TypeError(f"reductions take numpy arrays, not {type(array).__name__}")
    if array.dtype.kind not in "biufc":
        raise TypeError(f"cannot reduce arrays of dtype {array.dtype}")
    return np.ascontiguousarray(array)


def check_like(ref: np.ndarray, other, source: int) -> np.ndarray:
    """``other`` (from rank ``source``) if it matches ``ref`` in dtype and shape, else ValueError."""
    if not isinstance(other, np.ndarray) or other.dtype != ref.dtype or other.shape != ref.shape:
        what = f"{other.dtype}{list(other.shape)}" if isinstance(other, np.ndarray) else type(other).__name__
        raise ValueError(f"rank {source} contributed {what}, expected {ref.dtype}{list(ref.shape)} "
                         "(every rank must reduce arrays of the same dtype and shape)")
    return other


def combine(fn, acc: np.ndarray, other, source: int, into: bool = False) -> np.ndarray:
    """``fn(acc, other)`` (``acc`` first: the sum order is part of the result), after checking
    ``other``; in place when ``into`` and ``acc`` is writable (a fresh array of ours)."""
    check_like(acc, other, source)
    if into and acc.flags.writeable:
        return fn(acc, other, out=acc)
    return fn(acc, other)


def check_chunks(chunks, n: int, what: str) -> list:
    if chunks is None or len(chunks) != n:
        got = "None" if chunks is None else f"{len(chunks)} chunks"
        raise ValueError(f"{what} needs one chunk per rank ({n}), got {got}")
    return list(chunks)


def check_root(comm, root: int) -> None:
    if not 0 <= root < comm.size:
        raise ValueError(f"root {root} is not a rank (size {comm.size})")


__all__ = ["TAG", "Pattern", "binomial_subtree_total", "ceil_log2", "split", "reduce_fn", "check_array", "check_like", "combine", "check_chunks",
           "check_root", "nbytes"]


def as_sent(out: np.ndarray, template, size: int, shape: tuple, what: str):
    """The received bytes ``out`` as the root's payload was: an array of ``template``'s dtype
    and ``shape`` (checked against ``size``), else ``bytes``.

    >>> as_sent(np.arange(8, dtype=np.uint8), np.zeros(0, np.int32), 8, (2,), "x").tolist()
    [50462976, 117835012]
    """
    if isinstance(template, np.ndarray):
        dt = template.dtype
        if size != dt.itemsize * math.prod(shape):
            from clusterlab.comm.errors import ProtocolError

            raise ProtocolError(f"{what}: {size} bytes cannot hold an array of shape {shape} and dtype {dt}")
        return out.view(dt).reshape(shape)
    return out.tobytes()
