"""The all-to-all broadcast's rank 0 does not grow with the rounds it runs (issue 25's soak:
it kept each round's result as dicts, 6 KB a round at 16 ranks, +0.7 MB per 100 rounds).

Measured in process (``InProcess``: four ranks as threads) with ``tracemalloc``: the switch-drops
reader, which rank 0 calls at the start and end of every round, records the memory Python has
allocated and not freed. Counted in bytes, not timed."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np

from clusterlab.bench.alltoall_broadcast import alltoall_broadcast
from clusterlab.cluster import InProcess

ROUNDS, WARMUP_ROUNDS, RANKS = 300, 50, 4


def test_rank0_memory_stays_flat_over_rounds(tmp_path):
    """Before the fix rank 0 held 2.2 KB more after every round at four ranks (a row dict and
    four per-rank dicts); now its record is allocated once, before the first round. The limit,
    200 bytes a round, is a tenth of what the old code grew and well above what this process's
    other threads and the progress file's writes move the traced memory by (the slope over 250
    rounds was 5-23 bytes a round in five runs)."""
    traced = np.zeros(2 * (ROUNDS + 1), dtype=np.int64)  # allocated up front: the probe must not grow
    calls = np.zeros(1, dtype=np.int64)

    def drops():  # rank 0 alone calls it, twice a round
        traced[calls[0]] = tracemalloc.get_traced_memory()[0]
        calls[0] += 1
        return {"p0": 0, "p1": 0}

    progress = tmp_path / "progress.jsonl"
    tracemalloc.start()
    try:
        out = InProcess().run(alltoall_broadcast, RANKS, 64, ROUNDS, "same", 1, False, drops, 60.0, str(progress))[0]
    finally:
        tracemalloc.stop()
    assert len(out) == ROUNDS and calls[0] == 2 * (ROUNDS + 1)
    starts = traced[0::2][1 + WARMUP_ROUNDS:].astype(float)  # each measured round's start
    per_round = np.polyfit(np.arange(len(starts)), starts, 1)[0]
    assert per_round < 200, f"rank 0 grew {per_round:.0f} bytes a round"
    # the rows built at the end are the rows each round wrote to the progress file
    assert [json.loads(line) for line in progress.read_text().splitlines()] == out
    assert out[-1]["rep"] == ROUNDS - 1 and out[-1]["drops_per_port"] == {"p0": 0, "p1": 0}
    assert [r["rank"] for r in out[-1]["ranks"]] == list(range(RANKS))
