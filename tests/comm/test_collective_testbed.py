"""Seed 002 on the testbed: the benchmark's prediction counts per-call set-up, the two-region
fit finds a shaped link's rate, and (root) a tiny run measures both connection modes."""

from __future__ import annotations

import pytest

from clusterlab.bench import collective_testbed as ct
from clusterlab.bench.collective import _predict
from clusterlab.comm.costmodel import CostModel
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


def test_two_region_fit_ignores_the_middle_sizes():
    rows = [{"bytes": b, "usec": 40 + b * 0.0516} for b in (1, 16, 64, 131072, 524288, 1 << 20)]
    rows += [{"bytes": 8192, "usec": 5.0}, {"bytes": 16384, "usec": 9000.0}]  # noise in the middle
    alpha, beta = ct.two_region_fit(rows)
    assert alpha == pytest.approx(40e-6, rel=0.05)
    assert 8 / beta / 1e6 == pytest.approx(155, rel=0.02)  # 155 Mbit/s


def test_tiny_run_on_a_testbed_measures_both_modes():
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)
    from clusterlab.cluster.testbed import StarTopo, Testbed

    with Testbed(StarTopo(hosts=3, rate="155Mbit", mtu=9180, buffer="256KB")) as tb:
        model = ct.fit_model(tb, sizes=(1, 1 << 18), trial_time=0.005)
        assert 50 < 8 / model.beta / 1e6 < 300 and model.setup > 0 and model.concurrency == 0
        assert model.setup_cpus > 0 and model.details["setup_calibrated_hosts"] == 3
        rows = [r for mode in ct.MODES for r in ct.measure(tb, "bcast", [1 << 18], mode, model, time_per_size=0.1)]
    assert [r["connections"] for r in rows] == ["persistent", "per_call"]
    assert all(r["hosts"] == 3 and r["predicted_us"] > 0 and r["p50_us"] > 0 for r in rows)
    assert rows[1]["predicted_us"] > rows[0]["predicted_us"]  # per-call pays the set-up
