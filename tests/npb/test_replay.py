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
