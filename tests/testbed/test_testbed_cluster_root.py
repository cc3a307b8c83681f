"""``clusterlab.cluster.Testbed`` around a ``StarTopo`` (the object a study's ``cluster=`` is):
``run`` brings the topology up for the call at the dilation its transport needs, the ranks run
in the hosts under those settings, and nothing is left behind (root)."""

from __future__ import annotations

import os

import pytest

from clusterlab.cluster import Testbed
from clusterlab.cluster.testbed import StarTopo
from clusterlab.errors import ConfigError
from clusterlab.net.transport_config import TransportConfig
from tests.comm.conftest import needs_mpi

from .helpers import (
    assert_nothing_left,
    host_congestion,
    host_rto_min_us,
    networks_brought_up,
    rank_cost_model,
    require_netns,
)

pytestmark = pytest.mark.root


def test_a_topology_comes_up_for_the_call_and_goes(monkeypatch):
    require_netns()
    ours = networks_brought_up(monkeypatch)
    tb = Testbed(StarTopo(hosts=3, rate="1Gbit"), dilation="auto")
    tcp = TransportConfig(rto_min="200ms", rto_max_offset="100ms")  # MAX 300 ms needs k >= 3.34: k = 4
    out = tb.run(host_rto_min_us, None, transport=tcp)
    assert len(out) == 3 and len({o["netns"] for o in out}) == 3
    assert os.stat("/proc/self/ns/net").st_ino not in {o["netns"] for o in out}
    assert {o["rto_min_us"] for o in out} == {800_000}  # 200 ms x 4, each host's own sysctl
    assert_nothing_left(ours)


@needs_mpi
def test_mpi_ranks_of_a_rank_function_run_in_the_hosts(monkeypatch):
    """``mesh="mpi"``: mpiexec's ranks in the hosts, with the hosts' settings (the congestion
    control a transport names becomes each host's default, which MPICH's sockets get; one the
    kernel does not let a namespace default to is refused with the reason)."""
    from clusterlab.cluster.api import mpi_congestion_why_not

    require_netns()
    ours = networks_brought_up(monkeypatch)
    tb = Testbed(StarTopo(hosts=2, rate="1Gbit"), mesh="mpi")
    out = tb.run(host_congestion, None, transport=TransportConfig(rto_min="20ms", congestion="reno"))  # reno: always allowed
    assert [o["size"] for o in out] == [2, 2] and len({o["netns"] for o in out}) == 2
    assert {(o["rto_min_us"], o["congestion"], o["backend"]) for o in out} == {(20_000, "reno", "mpi")}
    with pytest.raises(ConfigError, match="sndbuf: MPI's sockets are MPICH's"):
        Testbed(tb.topo, mesh="mpi").run(host_congestion, None, transport=TransportConfig(sndbuf="1MiB"))
    assert "tcp_allowed_congestion_control" in mpi_congestion_why_not("nosuchcc")
    assert_nothing_left(ours)


def test_ranks_pick_collectives_by_the_testbeds_links(monkeypatch, tmp_path):
    """A testbed's ranks get its cost model (link rate after dilation, port buffer), not the
    loopback fit: a 1.3 MB all-reduce on 155 Mbit/s links is a ring there, where the loopback
    model sends it whole along a binomial tree; a model the caller names in
    $CLUSTERLAB_COSTMODEL wins."""
    from clusterlab.comm import costmodel

    require_netns()
    ours = networks_brought_up(monkeypatch)
    monkeypatch.delenv(costmodel.ENV, raising=False)
    topo = StarTopo(hosts=3, rate="155Mbit", buffer="64KB", dilation=2)
    out = Testbed(topo).run(rank_cost_model, None, 1_300_000)
    assert {o["source"] for o in out} == {"testbed links: 155Mbit bridge, k = 2 (clusterlab.cluster.testbed.model)"}
    assert {(o["port_buffer"], o["pick"]) for o in out} == {(64_000, "ring")}
    assert out[0]["beta"] == pytest.approx(9014 / 8948 * 8 / 77.5e6)
    mine = tmp_path / "model.json"
    costmodel.CostModel(fixed={"allreduce": "reduce_bcast"}, source="mine").save(mine)
    monkeypatch.setenv(costmodel.ENV, str(mine))
    out = Testbed(topo).run(rank_cost_model, None, 1_300_000)
    assert {(o["source"], o["pick"]) for o in out} == {("mine", "reduce_bcast")}
    assert_nothing_left(ours)
