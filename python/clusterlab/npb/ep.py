"""EP (embarrassingly parallel): Gaussian pairs from NPB's generator, tallied in annuli.

Batches of 2^16 pairs are split among ranks as in NPB (the first ``nn mod size`` ranks take
one more); the only communication is the final reduction. NPB reduces the sums ``sx``, ``sy``
(one double each) and the 10 counts; here the counts are reduced as integers and the sums per
batch (each rank fills its own batches, zeros elsewhere, so the reduction is exact), then
added in batch order on every rank: the sums, and so the verification, are bit-identical for
every rank count.
"""

from __future__ import annotations

import numpy as np

from clusterlab import _core
from clusterlab.errors import ConfigError
from clusterlab.npb.common import Outcome, TracedComm, begin_timed, end_timed, exact_sum, rel_error

NAME = "EP"
OPTYPE = "Random numbers generated"
MK = 16
# log2 of the number of pairs, and NPB's reference sums (ep.f)
M = {"S": 24, "W": 25, "A": 28}
REFERENCE = {24: (-3.247834652034740e3, -6.958407078382297e3),
             25: (-2.863319731645753e3, -6.320053679109499e3),
             28: (-4.295875165629892e3, -1.580732573678431e4)}
EPSILON = 1e-8


def describe(cls: str) -> tuple[str, int]:
    """(NPB's size field, iterations)."""
    return str(2 ** (M[cls] + 1)), 0


def check(cls: str, n: int) -> None:
    batches = 2 ** (M[cls] - MK)
    if n > batches:
        raise ConfigError(f"EP class {cls} has {batches} batches; -n {n} would leave ranks without work")


def mops(cls: str, seconds: float) -> float:
    return 2.0 ** (M[cls] + 1) / seconds / 1e6


def run(comm: TracedComm, cls: str) -> Outcome:
    nn = 2 ** (M[cls] - MK)
    per, extra = divmod(nn, comm.size)
    count = per + (1 if comm.rank < extra else 0)
    first = comm.rank * per + min(comm.rank, extra)
    _core.npb_ep_batches(0, 1)  # warm up code and pages, as NPB touches its arrays
    t0 = begin_timed(comm)
    counts, bx, by = _core.npb_ep_batches(first, count)
    sums = np.zeros((2, nn))
    sums[0, first:first + count] = bx
    sums[1, first:first + count] = by
    counts = comm.allreduce(counts.astype(np.int64), "sum")
    sums = comm.allreduce(sums, "sum")
    sx, sy = exact_sum(sums[0]), exact_sum(sums[1])
    seconds = end_timed(comm, t0)
    rx, ry = REFERENCE[M[cls]]
    ex, ey = rel_error(sx, rx), rel_error(sy, ry)
    values = {"sx": {"value": sx, "reference": rx, "error": ex, "epsilon": EPSILON},
              "sy": {"value": sy, "reference": ry, "error": ey, "epsilon": EPSILON},
              "gaussian_pairs": int(counts.sum()), "counts": counts.tolist()}
    return Outcome(seconds, ex <= EPSILON and ey <= EPSILON, values)
