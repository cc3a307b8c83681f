"""The loss/timeout model (clusterlab.cluster.simulated.loss): its shape, and that the constants
the simulated cluster uses are the fit bench/sim_loss_fit.py recorded (no engine, no testbed)."""

import json
from pathlib import Path

import pytest

from clusterlab.cluster.simulated.loss import FITTED, LossModel, backoff_sum, fit
from clusterlab.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
BRIDGE = {"buffer": 64_000, "stack": "linux", "switch": "bridge"}


def test_backoff_doubles_and_caps():
    assert backoff_sum(0, 0.2, 120) == 0
    assert backoff_sum(1, 0.2, 120) == pytest.approx(0.2)
    assert backoff_sum(3, 0.2, 120) == pytest.approx(0.2 + 0.4 + 0.8)
    assert backoff_sum(3, 0.2, 0.3) == pytest.approx(0.2 + 0.3 + 0.3)
    assert backoff_sum(1.5, 0.2, 120) == pytest.approx(0.2 + 0.5 * 0.4)


def test_no_wait_when_the_burst_fits_the_buffer():
    m = LossModel()
    assert m.overflow(hosts=8, size=2_000, buffer=64_000) == 0
    assert m.rto_wait(hosts=8, size=2_000, rto_min=0.2, rto_max=120, **BRIDGE) == 0
    assert m.timeouts(hosts=8, size=2_000, **BRIDGE) == 0
    assert m.overflow(hosts=2, size=10**6, buffer=0) == 0


def test_wait_grows_with_fan_in_min_and_the_slower_stack_and_switch():
    m = LossModel()

    def w(**kw):
        args = {"hosts": 16, "size": 50_000, "rto_min": 0.2, "rto_max": 120.0, **BRIDGE, **kw}
        return m.rto_wait(**args)

    assert w(hosts=8) < w(hosts=16) < w(hosts=32) < w(hosts=64)
    assert w(rto_min=0.01) < w(rto_min=0.2) < w(rto_min=1.0)
    assert w() < w(stack="seed-era") and w() < w(switch="atm")
    assert w(buffer=400_000) < w(buffer=64_000)
    assert w(stack="seed-era", switch="atm", rto_max=0.5) < w(stack="seed-era", switch="atm", rto_max=60.0)
    with pytest.raises(ConfigError, match="stacks"):
        w(stack="bsd")
    with pytest.raises(ConfigError, match="rto_min"):
        w(rto_min=2.0, rto_max=1.0)


def test_fit_recovers_its_own_parameters():
    truth = LossModel(a={"linux/bridge": 1.3, "linux/atm": 2.0, "seed-era/bridge": 1.8, "seed-era/atm": 3.0},
                      beta=0.4, floor=0.03)
    pts = []
    for stack in ("linux", "seed-era"):
        for switch in ("bridge", "atm"):
            for hosts in (8, 16, 32):
                for rto_min in (0.05, 0.2, 1.0):
                    shape = {"hosts": hosts, "size": 50_000, "buffer": 64_000, "rto_min": rto_min, "rto_max": 60.0,
                             "stack": stack, "switch": switch}
                    pts.append({**shape, "rto_wait": truth.rto_wait(**shape), "timeouts": 10.0 * hosts})
    got = fit(pts)
    assert got.beta == pytest.approx(0.4, abs=0.02) and got.floor == pytest.approx(0.03, rel=0.1)
    for k, v in truth.a.items():
        assert got.a[k] == pytest.approx(v, rel=0.05)


def test_the_cluster_uses_the_recorded_fit():
    rec = json.loads((ROOT / "bench" / "results" / "sim_loss_model.json").read_text())
    fitted = rec["fit"]
    for k in ("beta", "floor", "gamma"):
        assert FITTED[k] == pytest.approx(fitted[k], abs=1e-4)
    for group in ("a", "t"):
        for k, v in fitted[group].items():
            assert FITTED[group][k] == pytest.approx(v, abs=1e-4)
    assert rec["held_out"]["points"] >= 4 and rec["train"]["points"] >= 40
