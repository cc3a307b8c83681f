"""The point-to-multipoint broadcast (``collectives.bcast_p2mp``) and the multicast groups under
it: correct under loss (NAKs, retransmission to the group or point-to-point), stray datagrams
ignored, refused where there is no multicast (loopback, outside a testbed host), never the cost
model's pick; as root, through the ATM cell switch, also with a lossy link."""

from __future__ import annotations

import numpy as np
import pytest

from clusterlab.comm import collectives as C
from clusterlab.comm.collectives import bcast_p2mp
from clusterlab.comm.costmodel import CostModel
from clusterlab.comm.errors import CommError, PeerFailure
from clusterlab.comm.inproc import run_threads
from clusterlab.comm.tcp import multicast as udp
from tests.testbed.helpers import fresh_name, require_netns


def _bcast(c, data, root):
    got = C.run("bcast", c, "p2mp", data=data if c.rank == root else None, root=root)
    g = c.multicast()
    return got, dict(g.counters)


@pytest.mark.parametrize("loss", [0.0, 0.1, 0.4])
def test_every_rank_gets_the_data_whatever_the_group_loses(loss):
    rng = np.random.default_rng(3)
    arr = rng.random((70, 33))  # 18,480 bytes: 3 frames
    blob = bytes(rng.integers(0, 256, 200_000, dtype=np.uint8))  # 23 frames, several windows of 4
    for data, root in ((arr, 0), (blob, 2), (b"", 1), (np.arange(3, dtype=np.int16), 3)):
        res = run_threads(_bcast, 5, data, root, multicast_loss=loss)
        for got, _ in res:
            if isinstance(data, np.ndarray):
                assert got.dtype == data.dtype and got.shape == data.shape and got.tobytes() == data.tobytes()
            else:
                assert got == data
        resent = res[root][1]["resent_multicast"] + res[root][1]["resent_direct"]
        if loss == 0.0:
            assert resent == 0
        elif len(data) > 100_000:
            assert resent > 0  # 23 frames to 4 receivers at 10% or 40% loss: something is resent


def test_the_root_sends_each_frame_once_when_nothing_is_lost():
    res = run_threads(_bcast, 4, bytes(100_000), 0)
    frames = -(-100_000 // (9000 - bcast_p2mp.FRAME.size))
    windows = -(-frames // max(bcast_p2mp.MIN_WINDOW, (1 << 24) // (4 * 9000)))
    assert res[0][1]["sent"] == frames + windows  # the frames and an end marker per window
    assert all(r[1]["received"] >= frames for r in res[1:])


def test_a_window_smaller_than_the_data_still_gets_through(monkeypatch):
    monkeypatch.setattr(bcast_p2mp, "MIN_WINDOW", 2)

    def job(c):
        c.multicast().receive_buffer = 4 * 9000 * 2  # 2 frames per window
        return _bcast(c, bytes(range(256)) * 200, 0)

    res = run_threads(job, 3, multicast_loss=0.2)
    assert all(got == bytes(range(256)) * 200 for got, _ in res)


def test_stray_and_malformed_datagrams_are_ignored():
    def job(c):
        g = c.multicast()
        if c.rank == 1:  # junk of every kind before the call: too short, wrong call, wrong length
            g.send(b"x")
            g.send(bcast_p2mp.FRAME.pack(99, 0, 1, 1), b"junk")
            g.send(bcast_p2mp.FRAME.pack(1, 0, 1, 1), b"wrong length")
        c.barrier()
        return C.run("bcast", c, "p2mp", data=b"payload" * 10 if c.rank == 0 else None, root=0)

    assert run_threads(job, 3) == [b"payload" * 10] * 3


def test_a_malformed_report_is_a_protocol_error_naming_the_rank():
    def job(c):
        g = c.multicast()
        if c.rank == 0:
            return C.run("bcast", c, "p2mp", data=b"abc", root=0)
        g.calls += 1
        c.recv(0, bcast_p2mp.TAG)  # the header
        c.send(0, np.array([7, 1, 2], dtype=np.int64), bcast_p2mp.TAG)  # a report of another call
        return None

    res = run_threads(job, 2, return_exceptions=True, timeout=10)
    assert "malformed report" in str(res[0]) and "rank 1" in str(res[0])


def test_the_cost_model_never_picks_it_even_where_it_is_cheapest():
    m = CostModel(alpha=30e-6, beta=1e-7, overhead=1e-6, concurrency=0)
    t = m.table("bcast", 1 << 20, 16)
    assert t["p2mp"] == min(t.values())  # the data leaves the root once
    assert m.pick("bcast", 1 << 20, 16) != "p2mp"


def test_loopback_has_no_group_and_every_rank_says_so():
    import threading

    from clusterlab.comm.tcp.mesh import local_mesh

    comms = local_mesh(3, default_timeout=10)
    errs: list = [None] * 3

    def body(r):
        try:
            C.run("bcast", comms[r], "p2mp", data=b"x" if r == 0 else None)
        except (CommError, PeerFailure) as e:
            errs[r] = e

    ts = [threading.Thread(target=body, args=(r,)) for r in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(15)
    for c in comms:
        c.close()
    assert all(isinstance(e, CommError) for e in errs), errs
    assert "loopback" in str(errs[0])


def test_only_testbed_hosts_may_open_a_group():
    from clusterlab.cluster.testbed.topo import PREFIX

    assert udp.TESTBED_NS_PREFIX == PREFIX + "-"
    assert "loopback" in udp.why_not("127.0.0.1")
    assert "IPv4" in udp.why_not("::1") or "loopback" in udp.why_not("::1")
    assert udp.testbed_namespace() is None  # the tests run in the machine's namespace
    assert "testbed host" in udp.why_not("10.0.0.1")


# --- as root: through the ATM cell switch --------------------------------------------------------
def _testbed_bcast(comm, size, calls):
    data = np.arange(size, dtype=np.uint8) if comm.rank == 0 else None
    ok = True
    for _ in range(calls):
        got = C.run("bcast", comm, "p2mp", data=data, root=0)
        ok = ok and np.array_equal(got, np.arange(size, dtype=np.uint8))
    g = comm.multicast()
    return ok, dict(g.counters), g.max_payload


@pytest.mark.root
@pytest.mark.parametrize("loss", [None, "h2:0.02%"])
def test_through_the_atm_switch_the_root_sends_once(loss):
    require_netns()
    from clusterlab.cluster.testbed import StarTopo, TestbedNetwork

    topo = StarTopo(hosts=4, rate="155.52Mbit", switch="atm", buffer="1000cells", **({"loss": loss} if loss else {}))
    with TestbedNetwork(topo, name=fresh_name()) as tb:
        res = tb.run(_testbed_bcast, 4, 1 << 20, 3, timeout=120)
    assert all(ok for ok, _, _ in res)
    assert res[0][2] == 9180 - 28 - udp.MAC
    root = res[0][1]
    frames = -(-(1 << 20) // (res[0][2] - bcast_p2mp.FRAME.size))
    assert root["rejected"] == 0 and all(r[1]["rejected"] == 0 for r in res)
    if loss is None:
        assert root["resent_multicast"] + root["resent_direct"] == 0
        assert root["sent"] == 3 * (frames + 1)  # each frame once, and an end marker, per call
    else:  # h2's link loses 3.8% of its 192-cell frames: NAKed and resent point to point
        assert root["resent_direct"] > 0 and root["resent_multicast"] == 0
