"""Per-call connections: every collective sets up its own authenticated connections and tears
them down, on every algorithm, with set-up time counted; the cost model prices both modes."""

import threading
import time

import numpy as np
import pytest

from clusterlab.comm import CommError
from clusterlab.comm import collectives as C
from clusterlab.comm.costmodel import CostModel
from clusterlab.comm.tcp import mesh
from clusterlab.errors import ConfigError


def _run(comms, fn):
    out, errs = [None] * len(comms), []

    def one(c):
        try:
            out[c.rank] = fn(c)
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errs.append(e)

    ts = [threading.Thread(target=one, args=(c,)) for c in comms]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    if errs:
        raise errs[0]
    return out


@pytest.fixture
def comms():
    cs = mesh.local_mesh(4, connections="per_call", default_timeout=20)
    yield cs
    for c in cs:
        c.close()


def test_every_collective_and_algorithm_over_per_call_connections(comms):
    def job(c):
        got = []
        for name in sorted(n for n in C.ALGORITHMS["bcast"] if n != "p2mp"):  # p2mp: no multicast on loopback
            got.append(bytes(C.run("bcast", c, name, data=b"x" * 70_000 if c.rank == 2 else None, root=2)))
        got.append(c.scatter([np.arange(5) * r for r in range(4)] if c.rank == 0 else None)[-1])
        got.append(c.alltoall([bytes([c.rank, j]) for j in range(4)]))
        got.append(c.allreduce(np.ones(3) * c.rank, algorithm="ring").tolist())
        c.barrier()
        return got, c.stats()

    res = _run(comms, job)
    for r, (got, st) in enumerate(res):
        assert got[:4] == [b"x" * 70_000] * 4
        assert got[4] == 4 * r and got[5] == [bytes([j, r]) for j in range(4)] and got[6] == [6.0, 6.0, 6.0]
        assert st["connections"] == "per_call" and st["calls"] == 8 and st["setup_seconds"] > 0


def test_connections_do_not_outlive_the_call(comms):
    """After a call no connection is left: the next one sets up anew, and a rank that has not
    arrived yet is waited for (the call cannot start without it)."""
    def job(c):
        c.barrier()
        if c.rank == 3:
            time.sleep(0.5)
        t = time.monotonic()
        c.barrier()
        return time.monotonic() - t

    waited = _run(comms, job)
    assert min(waited[:3]) >= 0.3  # the others waited for rank 3 to set up its connections
    with pytest.raises(CommError, match="collectives only"):
        comms[0].send(1, b"x")


def test_mode_is_chosen_by_argument_or_environment(monkeypatch):
    with pytest.raises(ConfigError, match="connections='sometimes'"):
        mesh.local_mesh(2, connections="sometimes")
    monkeypatch.setenv("CLUSTERLAB_CONNECTIONS", "per_call")
    cs = mesh.local_mesh(2)
    try:
        assert [c.connections for c in cs] == ["per_call", "per_call"]
    finally:
        for c in cs:
            c.close()
    monkeypatch.delenv("CLUSTERLAB_CONNECTIONS")
    cs = mesh.local_mesh(2)
    try:
        assert [c.connections for c in cs] == ["persistent", "persistent"]
    finally:
        for c in cs:
            c.close()


def test_cost_model_counts_set_up_per_call_or_once():
    m = CostModel(alpha=20e-6, beta=1e-9, setup=1e-3, overhead=0, concurrency=0)
    base = m.predict("scatter", "binomial", 65536, 6)
    assert m.predict_mode("scatter", "binomial", 65536, 6, "per_call") == pytest.approx(base + 5e-3)
    assert m.predict_mode("scatter", "binomial", 65536, 6, "persistent", calls=10) == pytest.approx(base + 5e-4)
    assert m.choose("scatter", 65536, 6, calls=10)[0] == "persistent"
    assert m.choose("scatter", 65536, 6, calls=1)[0] == "persistent"  # a tie: no reason to reconnect
    assert m.choose("scatter", 65536, 6, modes=("per_call",))[0] == "per_call"
    with pytest.raises(ValueError, match="connection mode"):
        m.predict_mode("scatter", "binomial", 1, 6, "sometimes")
