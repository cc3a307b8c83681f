"""Compute replay of NPB runs: the replay sends exactly the recorded messages and takes at
least the recorded compute; the seed 004 workload builds the right networks."""

import pytest

from clusterlab.comm.inproc import run_threads
from clusterlab.errors import ConfigError
from clusterlab.experiments.workloads.npb import npb_wan, topology
from clusterlab.npb.replay import record, replay_rank


class Counting:
    """Wraps a communicator and counts what goes through it."""

    def __init__(self, comm):
        self.comm, self.rank, self.size = comm, comm.rank, comm.size
        self.sent = self.bytes = 0

    def send(self, dest, data, tag=0):
        self.sent += 1
        self.bytes += data.nbytes
        self.comm.send(dest, data, tag)

    def recv(self, source, tag=0):
        return self.comm.recv(source, tag)

    def barrier(self):
        self.comm.barrier()


def counted_replay(comm, events):
    c = Counting(comm)
    out = replay_rank(c, events)
    return {**out, "sent": c.sent, "bytes": c.bytes}


@pytest.mark.parametrize("kernel", ["cg", "is", "mg"])
def test_replay_sends_the_recorded_messages(kernel):
    rec = record(kernel, "S", 4)
    assert rec["verified"] and len(rec["events"]) == 4
    out = run_threads(counted_replay, 4, rec["events"])
    for r, o in zip(rec["ranks"], out, strict=True):
        assert o["sent"] == r["messages_sent"] and o["bytes"] == r["bytes_sent"]
        assert o["seconds"] >= 0.9 * r["compute_cpu_s"]


def test_replay_refuses_another_job_size():
    rec = record("ep", "S", 2)
    with pytest.raises(Exception, match="recording has 2 ranks"):
        run_threads(replay_rank, 3, rec["events"])


def test_workload_networks():
    assert not topology(npb_wan(network="lan").params).has_wan
    t = topology(npb_wan(network="135M").params)
    assert t.site_sizes == (4, 4) and not t.wan_shared and t.wan_rate_bps == 135e6 and t.wan_delay_seconds == 0.006
    assert topology(npb_wan(network="67M").params).wan_shared
    with pytest.raises(ConfigError, match="network 'atm'"):
        npb_wan(network="atm")


def test_seed004_studies_declare_their_two_site_testbed():
    """The study's Testbed(StarTopo(...)) carries the sites and the WAN line; each point's topology is what the
    study declared and the workload refuses a point whose network is not that testbed."""
    from clusterlab.cluster import Testbed
    from clusterlab.cluster.testbed import StarTopo
    from clusterlab.experiments.clusters import star_topo
    from clusterlab.experiments.studies.seed004.table3 import STUDY
    from clusterlab.experiments.workloads.npb import check_network, npb_replay

    topos = {p.settings["network"]: star_topo(p) for p in STUDY.points()}
    assert not topos["lan"].has_wan and topos["lan"].rate_bps == 100e6 and topos["lan"].hosts == 8
    assert topos["135M"].site_sizes == (4, 4) and not topos["135M"].wan_shared
    assert topos["135M"].wan_rate_bps == 135e6 and topos["135M"].wan_delay_seconds == 0.006
    assert topos["67M"].wan_shared and topos["67M"].wan_queue_bytes == 256 * 1024
    assert "shared by both directions" in Testbed(StarTopo(hosts=8, sites="4+4", wan_shared=True)).wan_description()
    assert Testbed(StarTopo(hosts=8)).wan_description() is None
    with pytest.raises(ConfigError, match="must add up to hosts=8"):
        Testbed(StarTopo(hosts=8)).with_settings(sites="5+4")
    with pytest.raises(ConfigError, match="network '135M' needs"):
        check_network("135M", StarTopo(hosts=8), 8)
    with pytest.raises(ConfigError, match="nodes=8 ranks need as many hosts"):
        check_network("lan", StarTopo(hosts=4), 8)
    with pytest.raises(ConfigError, match="runs on the study's Testbed"):
        topology(npb_replay(network="135M").params)
