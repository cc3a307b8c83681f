"""The Simulated cluster: its settings and refusals (no engine needed), then the engine's
answers against what the flow model must give (skipped without SimGrid's module)."""

import json

import pytest

from clusterlab.bench.alltoall_broadcast import alltoall_broadcast
from clusterlab.bench.pingpong import pingpong
from clusterlab.cluster import Cluster, Simulated
from clusterlab.cluster.simulated.cluster import MESSAGE_HEADER
from clusterlab.cluster.simulated.run import why_no_engine
from clusterlab.cluster.testbed import StarTopo
from clusterlab.errors import ConfigError
from clusterlab.net.transport_config import TransportConfig


def needs_engine():
    why = why_no_engine()
    if why:
        pytest.skip(why)


def _where_am_i(comm):
    return comm.rank


def test_is_a_cluster_with_the_testbeds_settings():
    s = Simulated(StarTopo(hosts=8, rate="155Mbit"))
    assert isinstance(s, Cluster)
    st = s.settings()
    assert st["hosts"] == 8 and st["rate"] == "155Mbit" and st["latency_factor"] == 1.0
    t = s.with_settings(hosts=16, buffer="128KB", latency="5us")
    assert (t.n_ranks(), t.topo.buffer, t.latency, t.platform.latency_s) == (16, "128KB", "5us", 5e-6)
    with pytest.raises(ConfigError, match="no setting"):
        s.with_settings(colour="red")
    with pytest.raises(ConfigError, match="ranks must be 1..hosts"):
        Simulated(StarTopo(hosts=4), ranks=5)


def test_refuses_what_it_cannot_model():
    s = Simulated(StarTopo(hosts=4))
    with pytest.raises(ConfigError, match="only the rank functions it has a model of"):
        s.run(_where_am_i, 4)
    with pytest.raises(ConfigError, match="no TCP timers"):
        s.run(alltoall_broadcast, 4, 1000, 1, transport=TransportConfig(sndbuf="64KB"))
    with pytest.raises(ConfigError, match="no TCP timers"):  # the timers reach only the loss model
        s.with_settings(loss_model=False).run(alltoall_broadcast, 4, 1000, 1, transport=TransportConfig(rto_min="5ms"))
    with pytest.raises(ConfigError, match="no TCP timers"):  # a per-host spread is not in the loss model
        s.run(alltoall_broadcast, 4, 1000, 1, transport=TransportConfig(rto_min="5ms", rto_min_jitter="1ms"))
    with pytest.raises(ConfigError, match="loss_model must be"):
        Simulated(StarTopo(hosts=4), loss_model="maybe")
    assert Simulated(StarTopo(hosts=4)).with_settings(loss_model="false").loss_model is False
    with pytest.raises(ConfigError, match="not programs"):
        s.launch(["true"], 4)


def test_calibration_record(tmp_path):
    rec = tmp_path / "cal.json"
    rec.write_text(json.dumps({"fit": {"latency": "30us", "latency_factor": 1.5, "bandwidth_factor": 0.95}}))
    s = Simulated(StarTopo(hosts=4), calibration=str(rec))
    assert (s.latency, s.engine_config()["network/latency-factor"], s.engine_config()["network/bandwidth-factor"]) == (
        "30us", 1.5, 0.95)
    rec.write_text("{}")
    with pytest.raises(ConfigError, match="no 'fit'"):
        Simulated(StarTopo(hosts=4), calibration=str(rec))
    with pytest.raises(ConfigError, match="No such file"):
        Simulated(StarTopo(hosts=4), calibration=str(tmp_path / "none.json"))


def test_pingpong_latency_and_bandwidth():
    needs_engine()
    s = Simulated(StarTopo(hosts=2, rate="100Mbit"), latency="10us", bandwidth_factor=1.0)
    rows = s.run(pingpong, 2, [1, 10_000_000])[0]
    # one way: two links' latency, then the bytes (and the header) at the link rate
    assert rows[0]["usec"] == pytest.approx(20 + (1 + MESSAGE_HEADER) * 8 / 100e6 * 1e6, rel=0.01)
    assert rows[1]["mbps"] == pytest.approx(100 * 10_000_000 / (10_000_000 + MESSAGE_HEADER), rel=0.01)
    slow = Simulated(StarTopo(hosts=2, rate="100Mbit"), latency="10us", latency_factor=3.0, bandwidth_factor=0.5)
    rows2 = slow.run(pingpong, 2, [1, 10_000_000])[0]
    assert rows2[0]["usec"] == pytest.approx(60 + (1 + MESSAGE_HEADER) * 8 / 50e6 * 1e6, rel=0.01)
    assert rows2[1]["mbps"] == pytest.approx(rows[1]["mbps"] / 2, rel=0.01)


def test_broadcast_round_is_the_links_time():
    needs_engine()
    n, size, rate = 8, 50_000, 155e6
    s = Simulated(StarTopo(hosts=n, rate="155Mbit"), latency="10us", bandwidth_factor=1.0)
    out = s.run(alltoall_broadcast, n, size, 3, "same")
    assert out[1:] == [None] * (n - 1)
    rows = out[0]
    assert [r["rep"] for r in rows] == [0, 1, 2] and len(rows[0]["ranks"]) == n
    # every link carries n-1 blocks each way at once; then the closing barrier (3 steps of 2 links)
    expect = (n - 1) * (size + MESSAGE_HEADER) * 8 / rate
    assert expect < rows[0]["flow_seconds"] < expect + 3 * (2 * 10e-6 + MESSAGE_HEADER * 8 / rate) + 2e-4
    # 7 blocks of 50 KB into a 64 KB port buffer: the loss model's wait is added, and said so
    wait = rows[0]["loss_model_rto_wait_s"]
    assert wait == pytest.approx(s.loss_wait(n, size)[0]) and wait > 0.1
    assert rows[0]["seconds"] == pytest.approx(rows[0]["flow_seconds"] + wait) and "loss model" in rows[0]["time_model"]
    flow = s.with_settings(loss_model=False).run(alltoall_broadcast, n, size, 1)[0][0]
    assert flow["seconds"] == flow["flow_seconds"] == pytest.approx(rows[0]["flow_seconds"])
    assert flow["loss_model_rto_wait_s"] == 0 and "flow time only" in flow["time_model"]
    # tuned timers reach the model: a 10 ms MIN waits far less than the default 200 ms
    tuned = s.run(alltoall_broadcast, n, size, 1, transport=TransportConfig(rto_min="10ms"))[0][0]
    assert tuned["loss_model_rto_wait_s"] < wait / 2
    # shifted order moves the same bytes over the same links: the same time in a flow model
    shifted = s.run(alltoall_broadcast, n, size, 1, "shifted")[0][0]["seconds"]
    assert shifted == pytest.approx(rows[0]["seconds"], rel=1e-6)


def test_wan_line_is_the_bottleneck():
    needs_engine()
    size = 200_000
    one = Simulated(StarTopo(hosts=8, rate="1Gbit"), bandwidth_factor=1.0, loss_model=False)
    two = Simulated(StarTopo(hosts=8, rate="1Gbit", sites="4+4", wan_rate="100Mbit", wan_delay="5ms"),
                    bandwidth_factor=1.0, loss_model=False)
    t1 = one.run(alltoall_broadcast, 8, size, 1)[0][0]["seconds"]
    t2 = two.run(alltoall_broadcast, 8, size, 1)[0][0]["seconds"]
    # 16 blocks cross the line each way at 100 Mbit/s
    assert t2 > 16 * size * 8 / 100e6 > 5 * t1


def test_blocking_backplane_slows_the_round():
    needs_engine()
    from clusterlab.cluster.simulated.platform import Platform

    s = Simulated(StarTopo(hosts=8, rate="155Mbit"), bandwidth_factor=1.0, loss_model=False)
    full = s.run(alltoall_broadcast, 8, 100_000, 1)[0][0]["seconds"]
    s.platform = Platform.of(s.topo, latency=s.latency, backplane=0.25)  # a switch carrying 2 links' worth
    quarter = s.run(alltoall_broadcast, 8, 100_000, 1)[0][0]["seconds"]
    assert quarter == pytest.approx(4 * full, rel=0.05)


def test_overhead_is_paid_per_message():
    needs_engine()
    n, o = 8, 100e-6
    base = Simulated(StarTopo(hosts=n, rate="10Gbit"), bandwidth_factor=1.0)
    slow = Simulated(StarTopo(hosts=n, rate="10Gbit"), bandwidth_factor=1.0, overhead="100us")
    t0 = base.run(alltoall_broadcast, n, 100, 1)[0][0]["seconds"]
    t1 = slow.run(alltoall_broadcast, n, 100, 1)[0][0]["seconds"]
    # n-1 sends and n-1 receives, then the closing barrier's 3 steps of a send and a receive
    assert t1 - t0 == pytest.approx((2 * (n - 1) + 2 * 3) * o, rel=0.01)
    # the ping-pong has none (its per-message time is in its calibrated latency)
    assert slow.run(pingpong, 2, [1])[0][0]["usec"] == base.run(pingpong, 2, [1])[0][0]["usec"]
