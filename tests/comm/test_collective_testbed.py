"""Seed 002 on the testbed: the benchmark's prediction counts per-call set-up, the two-region
fit finds a shaped link's rate, and (root) a tiny run measures both connection modes."""

from __future__ import annotations

import os

import pytest

from clusterlab.bench import collective_testbed as ct
from clusterlab.bench.collective import _predict
from clusterlab.comm.costmodel import CostModel
from clusterlab.errors import ConfigError
from tests.testbed.helpers import netns_unavailable


def test_prediction_adds_the_mesh_set_up_in_per_call_mode_only():
    m = CostModel(alpha=50e-6, beta=1e-8, setup=1e-3, concurrency=0.0)
    base = _predict(m, "bcast", "binomial", 65536, 6, "persistent")
    assert base == pytest.approx(m.predict("bcast", "binomial", 65536, 6))
    assert _predict(m, "bcast", "binomial", 65536, 6, "per_call") == pytest.approx(base + 5e-3)


def test_shared_cpus_make_the_mesh_set_up_grow_with_its_connections():
    alone = CostModel(setup=1e-3, concurrency=0.0)
    shared = CostModel(setup=1e-3, concurrency=0.0, setup_cpus=2)
    assert alone.setup_time(16) == pytest.approx(15e-3)
    assert shared.setup_time(16) == pytest.approx(16 * 15 / 2 / 2 * 1e-3)  # 120 set-ups on 2 CPUs
    assert shared.setup_time(2) == alone.setup_time(2)  # one connection: its own time
    assert CostModel.from_dict(shared.to_dict()).setup_cpus == 2


def test_shared_cpus_price_every_step_of_many_simultaneous_messages():
    # 16 hosts on 2 CPUs: a ring allgather step sends 16 messages, 8 per CPU
    links = CostModel(alpha=30e-6, beta=5e-8, gamma=0.0, setup=0, overhead=0, concurrency=0)
    shared = CostModel(alpha=30e-6, beta=5e-8, gamma=0.0, setup=0, overhead=0, concurrency=0,
                       cpus=2, cpu_message=30e-6, cpu_byte=10e-9)
    chunk = 4096
    step_links = 30e-6 + 5e-8 * chunk  # 235 us on the link
    step_cpu = 8 * (30e-6 + 10e-9 * chunk)  # 568 us on the CPUs
    assert links.predict("allgather", "ring", chunk, 16) == pytest.approx(15 * step_links)
    assert shared.predict("allgather", "ring", chunk, 16) == pytest.approx(15 * step_cpu)
    # two hosts: one message per step, the link is slower than the CPU: the link's time stands
    assert shared.predict("bcast", "binomial", 65536, 2) == links.predict("bcast", "binomial", 65536, 2)
    # a flat fan-out is one step of 15 messages: 8 per CPU
    assert shared.predict("bcast", "flat", 1, 16) == pytest.approx(max(links.predict("bcast", "flat", 1, 16),
                                                                      8 * (30e-6 + 10e-9)))
    back = CostModel.from_dict(shared.to_dict())
    assert (back.cpus, back.cpu_message, back.cpu_byte) == (2, 30e-6, 10e-9)
    assert CostModel.from_dict({k: v for k, v in links.to_dict().items() if not k.startswith("cpu")}).cpus == 0
    with pytest.raises(ConfigError, match="cpu_byte"):
        CostModel(cpu_byte=-1.0)


def test_busy_cpu_seconds_leaves_out_niced_idle_and_io_wait():
    hz = os.sysconf("SC_CLK_TCK")
    assert ct.busy_cpu_seconds(f"cpu  {hz} {50 * hz} {hz} {90 * hz} {9 * hz} 0 {hz} 0 0 0") == pytest.approx(3.0)


def test_cpu_pingpong_divides_busy_time_by_messages():
    from clusterlab.comm.inproc import run_threads

    rows = run_threads(ct.cpu_pingpong, 2, [1, 4096], 0.02)[0]
    assert [r["bytes"] for r in rows] == [1, 4096]
    assert all(r["messages"] >= 10 and r["usec"] >= 0 and r["wall_usec"] > 0 for r in rows)


def test_two_region_fit_ignores_the_middle_sizes():
    rows = [{"bytes": b, "usec": 40 + b * 0.0516} for b in (1, 16, 64, 131072, 524288, 1 << 20)]
    rows += [{"bytes": 8192, "usec": 5.0}, {"bytes": 16384, "usec": 9000.0}]  # noise in the middle
    alpha, beta = ct.two_region_fit(rows)
    assert alpha == pytest.approx(40e-6, rel=0.05)
    assert 8 / beta / 1e6 == pytest.approx(155, rel=0.02)  # 155 Mbit/s


@pytest.mark.slow
def test_tiny_run_on_a_testbed_measures_both_modes():
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    from clusterlab.cluster.testbed import StarTopo, TestbedNetwork

    with TestbedNetwork(StarTopo(hosts=3, rate="155Mbit", mtu=9180, buffer="256KB")) as tb:
        model = ct.fit_model(tb, sizes=(1, 1 << 18), trial_time=0.005, cpu_sizes=ct.CPU_SIZES)
        assert 50 < 8 / model.beta / 1e6 < 300 and model.setup > 0 and model.concurrency == 0
        assert model.setup_cpus > 0 and model.details["setup_calibrated_hosts"] == 3 and model.call_setup >= 0
        assert set(model.details["empty_call_2_hosts"]) == {"per_call", "persistent"}
        assert model.cpus == (os.cpu_count() or 1) and model.cpu_message > 0 and len(model.details["cpu_pingpong"]) == 7
        assert model.window == 10 * (9180 - 52) and sorted(model.start_lateness) == ["2", "3"]
        rows = [r for mode in ct.MODES for r in ct.measure(tb, "bcast", [1 << 18], mode, model, time_per_size=0.1)]
    assert [r["connections"] for r in rows] == ["persistent", "per_call"]
    assert all(r["hosts"] == 3 and r["predicted_us"] > 0 and r["p50_us"] > 0 for r in rows)
    assert rows[1]["predicted_us"] > rows[0]["predicted_us"]  # per-call pays the set-up
    late = model.barrier_lateness(3) * 1e6  # every call timed from its barrier pays the root's lateness
    assert all(r["predicted_us"] == pytest.approx(r["predicted_call_us"] + late) for r in rows)


def test_barrier_exits_are_offsets_from_the_earliest_rank():
    from clusterlab.comm.inproc import run_threads

    got = run_threads(ct.barrier_exits, 4, 6)[0]
    assert len(got["exits"]) == 6 and len(got["calls"]) == 6
    assert all(len(row) == 4 and min(row) == 0.0 and max(row) < 1.0 for row in got["exits"])
    assert all(c > 0 for c in got["calls"]) and got["announce"] > 0
    assert ct.root_lateness(got["exits"]) >= 0


def test_the_roots_word_is_priced_where_the_collectives_send_it():
    from clusterlab.comm import collectives

    m = CostModel(alpha=30e-6, beta=5e-8, overhead=3e-6, concurrency=0, announce={"16": 4e-4})
    assert collectives.run  # the collectives are registered with the cost model
    assert m.pick("bcast", 4096, 16) != m.pick("bcast", 1 << 20, 16)  # the pick depends on the size: announced
    assert ct.announced(m, "bcast", f"auto:{m.pick('bcast', 1 << 20, 16)}", 16)
    assert not ct.announced(m, "bcast", "auto:flat", 16)  # the direct pick: data goes with the word
    assert not ct.announced(m, "bcast", "scatter_allgather", 16)  # named: nothing announced
    assert not ct.announced(m, "allgather", "auto:ring", 16)
    fixed = CostModel(alpha=30e-6, beta=5e-8, overhead=3e-6, concurrency=0, fixed={"bcast": "binomial"})
    assert not ct.announced(fixed, "bcast", "auto:binomial", 16)  # the same pick at every size
    assert m.announce_time(16) == pytest.approx(4e-4) and m.announce_time(6) == pytest.approx(4e-4)
    assert CostModel().announce_time(16) == 0.0


def test_root_lateness_is_the_median_of_the_roots_offsets():
    exits = [[3e-4, 0.0, 1e-4], [0.0, 2e-4, 5e-4], [1e-4, 0.0, 0.0], [6e-4, 0.0, 1e-3]]
    assert ct.root_lateness(exits) == pytest.approx(2e-4)  # median of 3e-4, 0, 1e-4, 6e-4
    assert ct.root_lateness(exits, root=2) == pytest.approx(3e-4)


def test_initial_window_follows_the_mtu_and_the_routes_initcwnd():
    from types import SimpleNamespace

    tb = SimpleNamespace(topo=SimpleNamespace(mtu=9180), transport=SimpleNamespace(initcwnd=None))
    assert ct.initial_window(tb) == 10 * 9128
    tb.transport.initcwnd, tb.topo.mtu = 2, 1500
    assert ct.initial_window(tb) == 2 * 1448


def test_per_call_modes_fixed_cost_is_an_empty_calls_excess_beyond_its_connection():
    m = CostModel(setup=1e-3, setup_cpus=2.0)
    # 2 hosts: an empty per-call call 6 ms, a persistent one 1 ms, one connection's set-up 1 ms: 4 ms fixed
    fixed = ct.fixed_per_call(6e-3, 1e-3, m)
    assert fixed == pytest.approx(4e-3)
    assert ct.fixed_per_call(1.5e-3, 1e-3, m) == 0.0  # never negative
    m.call_setup = fixed
    assert m.setup_time(2) == pytest.approx(5e-3) and m.setup_time(16) == pytest.approx(4e-3 + 60e-3)
    assert m.setup_time(1) == 0.0
    assert _predict(m, "bcast", "binomial", 4096, 2, "per_call") == pytest.approx(
        m.predict("bcast", "binomial", 4096, 2) + 5e-3)
    assert ct.fixed_per_call(6e-3, 1e-3, m) == pytest.approx(4e-3)  # the model's own fixed part not counted twice
    assert CostModel.from_dict(m.to_dict()).call_setup == pytest.approx(fixed)


def test_the_slowest_ranks_warm_up_sets_the_iterations():
    """A fan-out's root returns once its sends are buffered: its own warm-up time would ask for
    far more calls than fit ``time_per_size`` when a receiver is slow (a 10 Mbit/s link)."""
    import time

    from clusterlab.bench.collective import run
    from clusterlab.comm.inproc import run_threads

    def job(c):
        if c.rank == 2:
            real = c.recv

            def slow(*a, **k):
                time.sleep(0.01)
                return real(*a, **k)
            c.recv = slow
        return run(c, "bcast", [64], algorithm="flat", time_per_size=0.05)

    rows = run_threads(job, 3)[0]
    assert 3 <= rows[0]["iterations"] <= 10  # ~0.05 s / 10 ms, not the root's ~1000


@pytest.mark.slow
@pytest.mark.root
def test_paced_and_flat_with_one_slow_receiver_take_its_link_time():
    """The quick version of bench/results/seed002_paced.json: h1's link at a tenth of the others'
    bounds every broadcast; the paced one (each receiver's speed measured, the root at the
    slowest rate) gets every byte through in about that time, as the flat fan-out does."""
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    from clusterlab.cluster.testbed import StarTopo, TestbedNetwork

    size = 1 << 18
    with TestbedNetwork(StarTopo(hosts=3, rate="155Mbit", mtu=9180, buffer="256KB", host_rates="h1=15.5Mbit")) as tb:
        model = ct.fit_model(tb, sizes=(1, 1 << 18), trial_time=0.005, calibrate_hosts=None, lateness_hosts=None)
        got = {a: ct.measure(tb, "bcast", [size], "persistent", model, time_per_size=0.1, algorithm=a)[0]
               for a in ("flat", "paced")}
    link = size * 8 / 15.5e6  # 135 ms on h1's link
    for a, row in got.items():
        assert row["algorithm"] == a and 0.9 * link < row["p50_us"] * 1e-6 < 2.0 * link, (a, row["p50_us"])
