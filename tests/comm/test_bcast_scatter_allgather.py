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


def _at_once_brute(n: int, window_pieces: float = 0) -> int:
    """Simulate: every parent's sends share its link and all end when its fan-out is sent, unless
    the fan-out fits the window: then its pieces leave one child after another, largest first."""
    arrive = {0: 0}
    order = sorted(range(1, n), key=lambda v: (v.bit_count(), v))  # parents have fewer set bits
    subtree = lambda u: n if u == 0 else min(u & -u, n - u)  # noqa: E731
    for v in order:
        parent = v - (v & -v)
        if subtree(parent) - 1 > window_pieces:
            arrive[v] = arrive[parent] + subtree(parent) - 1
            continue
        children = [c for c in range(parent + 1, n) if c - (c & -c) == parent]  # parent + each mask
        clock = arrive[parent]
        for c in sorted(children, key=subtree, reverse=True):  # the send order: largest subtree first
            clock += subtree(c)
            if c == v:
                arrive[v] = clock
    return max(arrive.values())


@pytest.mark.parametrize("n", range(2, 33))
def test_at_once_critical_path_matches_a_simulation(n):
    assert sag._at_once_pieces(n) == _at_once_brute(n)
    for w in (1, 3, 7, 15, 1e9):
        assert sag._at_once_pieces(n, w) == _at_once_brute(n, w), (n, w)
    assert sag._at_once_pieces(n, 1e9) == n - 1  # everything in order: one piece per rank


def test_the_model_sends_at_once_where_the_fan_out_fits_tcps_first_window():
    """16 hosts, MTU 9180 (window 10 x 9128 bytes): the root's 64 KiB fan-out (15 pieces of 4 KiB)
    leaves in send order, so at once saves the acknowledgements' hops (measured 7.6 vs 8.0 ms,
    bench/results/seed002_phases_64k.json); from 256 KiB (16 KiB pieces) it does not fit."""
    m = CostModel(alpha=31e-6, beta=8 / 158e6, overhead=7e-6, concurrency=0, window=10 * 9128)
    assert m.schedule("bcast", "scatter_allgather", 65536, 16) == "at_once"
    assert m.schedule("bcast", "scatter_allgather", 262144, 16) == "in_turn"
    assert m.schedule("bcast", "scatter_allgather", 1 << 20, 16) == "in_turn"
    assert m.schedule("bcast", "scatter_allgather", 65536, 6) == "at_once"
    p = sag.patterns(65536, 16, 10 * 9128)
    # in turn: a word per level (4 hops); at once: the last child's word before the ring (1 hop)
    assert p["at_once"].bytes == p["in_turn"].bytes and p["in_turn"].hops - p["at_once"].hops == 3
    # without the window the at-once fan-out costs 26 pieces and the model sends in turn
    assert CostModel(alpha=31e-6, beta=8 / 158e6, overhead=7e-6, concurrency=0).schedule(
        "bcast", "scatter_allgather", 65536, 16) == "in_turn"
    assert CostModel.from_dict(m.to_dict()).window == m.window


def test_the_schedule_is_asked_once_per_model_and_size(monkeypatch):
    calls = []
    real = sag.patterns
    monkeypatch.setattr(sag, "patterns", lambda *a: calls.append(a) or real(*a))
    m = CostModel(alpha=29e-6, beta=7e-8, overhead=0, concurrency=0)
    first = [m.schedule("bcast", "scatter_allgather", 65536, 16) for _ in range(5)]
    assert len(set(first)) == 1 and len(calls) == 1
    m.window = 1e6  # another model: asked again
    m.schedule("bcast", "scatter_allgather", 65536, 16)
    assert len(calls) == 2


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
