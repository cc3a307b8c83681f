"""Compute replay (mining.parallel.trace) as the studies use it: the trace covers the whole job,
and ``compute="spin"`` burns the recorded CPU seconds instead of sleeping."""

from __future__ import annotations

import json
import time

import pytest

from clusterlab.cluster import InProcess, Local
from clusterlab.errors import ConfigError
from clusterlab.mining.parallel import ParallelConfig, replay_parallel, run_parallel
from clusterlab.mining.parallel.trace import burn_cpu


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    from clusterlab.data.generate import generate_file

    d = tmp_path_factory.mktemp("replay")
    data = d / "t10.dat"
    generate_file(data, "T10I4D100K", transactions=5000, items=300, seed=3)
    rec = d / "rec"
    real = run_parallel(data, nodes=3, algorithm="hpa", min_support=0.01, cluster=Local(),
                        config=ParallelConfig(partition="itemset", local_pairs=False, block_bytes=2048), record=rec)
    return rec, real


def test_burn_cpu_uses_cpu_not_the_clock():
    c0, t0 = time.process_time(), time.perf_counter()
    used = burn_cpu(0.05)
    assert used >= 0.05 and time.process_time() - c0 >= 0.05
    assert time.perf_counter() - t0 >= 0.05


def test_trace_holds_every_call_time_and_the_tail_of_the_job(recorded):
    rec, real = recorded
    for r in range(3):
        ev = json.loads((rec / f"rank{r}.json").read_text())["events"]
        assert ev[-1][0] == "gap"  # the computation after the last message is the job's too
        calls = [e for e in ev if e[0] not in ("gap", "pass", "end")]
        assert calls and all(isinstance(e[-2], float) and e[-2] >= 0 and e[-1] >= 0 for e in calls)
        gaps = sum(e[1] for e in ev if e[0] == "gap")
        comm = sum(e[-2] for e in calls)
        # the recorded gaps and calls tile the rank's job (up to the barrier and the clock reads)
        assert gaps + comm == pytest.approx(real.ranks[r]["job_s"], rel=0.1, abs=0.02)


def test_spin_replay_burns_the_recorded_cpu_and_sends_the_same_bytes(recorded):
    rec, real = recorded
    c0 = time.process_time()
    replay_parallel(rec, compute="spin", cluster=InProcess())  # ranks as threads: their CPU is ours
    burnt = time.process_time() - c0
    cpu = sum(e[2] for r in range(3) for e in json.loads((rec / f"rank{r}.json").read_text())["events"]
              if e[0] == "gap")
    assert burnt >= 0.9 * cpu
    rp = replay_parallel(rec, Local(), compute="spin")  # over TCP as recorded: the same frames
    assert [p["bytes_sent"] for p in rp.passes] == [p["bytes_sent"] for p in real.passes]
    assert rp.compute == "spin"
    with pytest.raises(ConfigError, match="spin"):
        replay_parallel(rec, compute="guess")
