"""Compute replay (mining.parallel.trace) as the studies use it: the trace covers the whole job,
and ``compute="spin"`` burns the recorded CPU seconds instead of sleeping."""

from __future__ import annotations

import json
import time

import numpy as np
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


def test_replay_scales_the_mining_and_not_the_runtime(tmp_path, monkeypatch):
    """A slower CPU's scale multiplies the mining a gap did, not the runtime part of it (the
    per-pass statistics read TCP_INFO per peer and grow with the ranks): scaled along, the
    per-rank computation of a 64-rank job shrank 4.5x from 1 rank instead of ~64x."""
    from clusterlab.comm.inproc import run_threads
    from clusterlab.mining.parallel import trace

    def job(comm):
        t = trace.TracedComm(comm, record=True)
        t.mark_pass(1)
        burn_cpu(0.05)  # mining
        with t.runtime():
            burn_cpu(0.05)  # statistics
        t.end_pass()
        t.save(tmp_path)

    run_threads(job, 1)
    gaps = [e for e in json.loads((tmp_path / "rank0.json").read_text())["events"] if e[0] == "gap"]
    cpu, runtime = sum(e[2] for e in gaps), sum(e[3] for e in gaps)
    assert 0.05 <= runtime <= cpu - 0.05
    slept: list = []
    monkeypatch.setattr(trace, "_sleep", lambda s: slept.append(s) or s)
    run_threads(lambda c: trace.replay_rank(c, tmp_path, "cpu", scale=10, runtime_scale=1), 1)
    assert sum(slept) == pytest.approx((cpu - runtime) * 10 + runtime, abs=trace.SLEEP_MIN)
    slept.clear()  # without runtime_scale, every gap takes the scale (recordings compared like with like)
    run_threads(lambda c: trace.replay_rank(c, tmp_path, "cpu", scale=10), 1)
    assert sum(slept) == pytest.approx(cpu * 10, abs=trace.SLEEP_MIN)


def test_a_runtime_region_holds_calls_and_other_threads_stay_mining(tmp_path):
    """HPA's receive loop is a runtime region with calls in it (between them it hands blocks to
    the counting thread): the calls stay communication, this thread's CPU between them is
    runtime, and what another thread computes meanwhile (the counting) stays mining. Before,
    that loop's CPU was mining and at 100 ranks made each rank's replay at x100 2x too long."""
    import threading

    from clusterlab.comm.inproc import run_threads
    from clusterlab.mining.parallel import trace

    def job(comm):
        t = trace.TracedComm(comm, record=True)
        t.mark_pass(1)
        burn_cpu(0.03)  # mining before the region
        with t.runtime():
            for _ in range(3):
                t.allreduce(np.ones(2), "sum")
                burn_cpu(0.02)  # the loop's bookkeeping
            counting = threading.Thread(target=burn_cpu, args=(0.05,))
            counting.start()
            counting.join()  # this thread waits (no CPU); the other one counts
        burn_cpu(0.03)  # mining after it
        t.end_pass()
        t.save(tmp_path)

    run_threads(job, 1)
    ev = json.loads((tmp_path / "rank0.json").read_text())["events"]
    assert [e[0] for e in ev].count("allreduce") == 3
    gaps = [e for e in ev if e[0] == "gap"]
    cpu, runtime = sum(e[2] for e in gaps), sum(e[3] for e in gaps)
    assert 0.06 <= runtime < 0.075, gaps
    assert cpu - runtime >= 0.03 + 0.05 + 0.03, gaps


def test_a_recorded_job_logs_its_statistics_as_runtime(recorded, monkeypatch):
    """Every pass of a real job over TCP reads each peer's TCP_INFO: that CPU is in the gaps'
    runtime part, and a replay pays it times runtime_scale."""
    from clusterlab.mining.parallel import trace

    rec, _ = recorded
    owed = 0.0
    for r in range(3):
        ev = json.loads((rec / f"rank{r}.json").read_text())["events"]
        assert all(len(e) == 4 and 0 <= e[3] <= e[2] for e in ev if e[0] == "gap")
        runtime_by_pass, cur = {}, None
        for e in ev:
            if e[0] == "pass":
                cur = e[1]
            elif e[0] == "gap" and cur is not None:
                runtime_by_pass[cur] = runtime_by_pass.get(cur, 0.0) + e[3]
        assert runtime_by_pass and all(v > 0 for v in runtime_by_pass.values())
        owed += sum((e[2] - e[3]) * 50 + e[3] * 2 for e in ev if e[0] == "gap")
    slept: list = []
    monkeypatch.setattr(trace, "_sleep", lambda s: slept.append(s) or s)
    replay_parallel(rec, cluster=InProcess(), compute="cpu", scale=50, runtime_scale=2)
    assert sum(slept) == pytest.approx(owed, abs=3 * trace.SLEEP_MIN)


def test_the_communicators_own_threads_are_runtime(tmp_path):
    """The TCP mesh's drainer reads sockets while the program computes (its CPU was 74 ms per
    rank of a 64-rank job): a gap logs the CPU of the communicator's background threads as
    runtime, not as the program's mining."""
    import threading

    from clusterlab.mining.parallel import trace

    go, done, stop = threading.Event(), threading.Event(), threading.Event()

    def drainer():  # lives as long as its communicator, as the mesh's does
        go.wait(10)
        burn_cpu(0.05)
        done.set()
        stop.wait(10)

    th = threading.Thread(target=drainer, daemon=True)
    th.start()

    class Inner:
        rank, size = 0, 1

        def background_threads(self):
            return [th]

    t = trace.TracedComm(Inner(), record=True)
    t.mark_pass(1)
    go.set()
    assert done.wait(10)
    t.end_pass()
    t.save(tmp_path)
    stop.set()
    gaps = [e for e in json.loads((tmp_path / "rank0.json").read_text())["events"] if e[0] == "gap"]
    assert sum(e[3] for e in gaps) >= 0.05
    assert all(0 <= e[3] <= e[2] for e in gaps)
