"""The scatter-allgather bcast's scatter schedules and phase separations: the same bytes on 1-16
ranks whatever the order on the wire, and the cost model choosing the schedule."""

from __future__ import annotations

import numpy as np
import pytest

from clusterlab.comm import collectives as C  # noqa: F401  (registers the algorithms with the cost model)
from clusterlab.comm import costmodel
from clusterlab.comm.collectives import bcast_scatter_allgather as sag
from clusterlab.comm.costmodel import CostModel
from clusterlab.comm.inproc import run_threads


@pytest.mark.parametrize("n", range(1, 17))
def test_every_schedule_and_separation_gives_the_roots_bytes(n):
    data = (np.arange(1000 + 37 * n, dtype=np.int32) * 7919).reshape(-1, 1) % 251
    root = (3 * n + 1) % n
    for schedule in (*sag.SCHEDULES, None):
        for separate in sag.SEPARATIONS:
            got = run_threads(lambda c, sep=separate, sch=schedule: sag.run(c, data if c.rank == root else None, root,
                                                                           sep, sch), n)
            assert all(g.dtype == data.dtype and g.shape == data.shape and g.tobytes() == data.tobytes()
                       for g in got), (n, schedule, separate)


def test_ranks_may_choose_different_schedules():
    """Each parent asks the model with its own piece size; mixed choices still deliver the same bytes."""
    data = bytes(range(256)) * 9
    got = run_threads(lambda c: sag.run(c, data if c.rank == 2 else None, 2, "overlap",
                                        "in_turn" if c.rank % 2 else "at_once"), 11)
    assert got == [data] * 11


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="separate must be one of"):
        run_threads(lambda c: sag.run(c, b"x" if c.rank == 0 else None, 0, "fence"), 2)
    with pytest.raises(ValueError, match="schedule must be one of"):
        run_threads(lambda c: sag.run(c, b"x" if c.rank == 0 else None, 0, "overlap", "later"), 2)


def _at_once_brute(n: int) -> int:
    """Simulate: every parent's sends share its link and all end when its fan-out is sent."""
    arrive = {0: 0}
    order = sorted(range(1, n), key=lambda v: (v.bit_count(), v))  # parents have fewer set bits
    for v in order:
        parent = v - (v & -v)
        subtree = lambda u: n if u == 0 else min(u & -u, n - u)  # noqa: E731
        arrive[v] = arrive[parent] + subtree(parent) - 1
    return max(arrive.values())


@pytest.mark.parametrize("n", range(2, 33))
def test_at_once_critical_path_matches_a_simulation(n):
    assert sag._at_once_pieces(n) == _at_once_brute(n)


def test_the_model_sends_in_turn_for_large_pieces_and_at_once_for_tiny_ones():
    m = CostModel(alpha=31e-6, beta=8 / 158e6, overhead=0.0, concurrency=0)
    assert m.schedule("bcast", "scatter_allgather", 1 << 20, 16) == "in_turn"
    assert m.schedule("bcast", "scatter_allgather", 16, 16) == "at_once"
    p = sag.patterns(1 << 20, 16)
    # in turn: 15 of the 16 pieces on the critical path, at once 26 (root 15, then 7, 3, 1)
    assert p["at_once"].bytes - p["in_turn"].bytes == pytest.approx(11 / 16 * (1 << 20))
    assert m.predict("bcast", "scatter_allgather", 1 << 20, 16) == pytest.approx(
        min(m._price(p["in_turn"], True), m._price(p["at_once"], True)))
    assert costmodel.CostModel().schedule("bcast", "binomial", 1 << 20, 16) == ""
