"""The cost model: fitting, prediction from communication patterns, picking, persistence."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusterlab.comm import collectives as C
from clusterlab.comm import costmodel
from clusterlab.comm.costmodel import CostModel, fit
from clusterlab.comm.inproc import run_threads
from clusterlab.errors import ConfigError


@settings(max_examples=40, deadline=None)
@given(alpha=st.floats(1e-6, 1e-3), beta=st.floats(1e-11, 1e-7), noise=st.floats(0, 0.02), seed=st.integers(0, 99))
def test_fit_recovers_hockney_parameters(alpha, beta, noise, seed):
    rng = np.random.default_rng(seed)
    sizes = [1, 3, 64, 1021, 4096, 65536, 1 << 20, 1 << 22]
    rows = [{"bytes": m, "usec": (alpha + beta * m) * 1e6 * (1 + noise * rng.uniform(-1, 1))} for m in sizes]
    m = fit(rows, setup_times=[1e-4, 2e-4, 3e-4], gamma=1e-10, overhead=3e-6)
    assert m.alpha == pytest.approx(alpha, rel=0.1 + 3 * noise)
    # beta only shows when large messages dominate alpha
    if beta * (1 << 22) > 10 * alpha:
        assert m.beta == pytest.approx(beta, rel=0.1 + 3 * noise)
    assert m.setup == pytest.approx(2e-4) and m.gamma == 1e-10 and m.overhead == 3e-6
    assert m.details["points"] == len(sizes)


def test_fit_refuses_too_little_data():
    with pytest.raises(ConfigError, match="at least two message sizes"):
        fit([{"bytes": 8, "usec": 10}, {"bytes": 8, "usec": 11}])


def test_predictions_follow_the_patterns():
    m = CostModel(alpha=10e-6, beta=1e-9, gamma=0.0, setup=1e-3, overhead=1e-6, concurrency=0)
    a, b, o = m.alpha, m.beta, m.overhead
    n, sz = 8, 1 << 20
    assert m.predict("bcast", "flat", sz, n) == pytest.approx(a + 7 * o + 7 * b * sz)  # one hop, 7 sends
    assert m.predict("bcast", "binomial", sz, n) == pytest.approx(3 * (a + o + b * sz))
    # the scatter sends in turn (a hop per level for the acknowledgement) when that is cheaper
    assert m.predict("bcast", "scatter_allgather", sz, n) == pytest.approx(13 * a + 20 * o + 2 * 7 / 8 * sz * b)
    assert m.predict("barrier", "dissemination", 0, 5) == pytest.approx(3 * a + 6 * o)
    assert m.predict("barrier", "central", 0, 5) == pytest.approx(2 * a + 8 * o)
    assert m.predict("alltoall", "all_at_once", sz, n) == pytest.approx(a + 14 * o + 7 * b * sz)
    assert m.predict("alltoall", "pairwise", sz, n) == pytest.approx(7 * a + 14 * o + 7 * b * sz)
    # seed 002: without kept connections, each connection opened on the critical path costs set-up
    assert m.predict("bcast", "flat", 64, n, connected=False) - m.predict("bcast", "flat", 64, n) == pytest.approx(7e-3)
    assert m.predict("bcast", "binomial", 1, 1) == 0.0
    # ranks sharing one host's CPUs: all messages and bytes over the concurrency bound the terms
    shared = CostModel(alpha=10e-6, beta=1e-9, gamma=0.0, setup=0, overhead=1e-6, concurrency=2)
    assert shared.predict("bcast", "binomial", sz, n) == pytest.approx(3 * a + 7 * o + 3.5 * sz * b)
    assert shared.predict("alltoall", "pairwise", sz, n) == pytest.approx(7 * a + 56 * o + 28 * sz * b)
    assert shared.predict("scatter", "binomial", sz, n) == pytest.approx(3 * a + 7 * o + 7 * sz * b)  # 12 m / 2 < 7 m


def test_pick_changes_with_size_and_ranks():
    m = CostModel(alpha=50e-6, beta=1e-9, gamma=0.2e-9, setup=0, overhead=5e-6, concurrency=0)
    assert m.pick("bcast", 8, 4) == "flat"  # one hop, few sends
    assert m.pick("bcast", 8, 64) == "binomial"  # 63 sends cost more than 6 hops
    assert m.pick("bcast", 8 << 20, 8) == "scatter_allgather"
    assert m.pick("alltoall", 1000, 8) == "all_at_once"
    assert m.pick("allreduce", 8, 16) == "allgather"
    assert m.pick("allreduce", 8 << 20, 16) in ("reduce_scatter_allgather", "ring")
    assert m.pick("allreduce", 8 << 20, 16, exact=True) == "reduce_scatter_allgather"
    assert m.pick("reduce", 8, 16, exact=True) in ("gather", "linear")
    for op in C.OPS:  # every pick is a real algorithm, and the table covers them all
        assert set(m.table(op, 1000, 6)) == set(C.ALGORITHMS[op])
        assert m.pick(op, 1000, 6) in C.ALGORITHMS[op]
    with pytest.raises(ValueError, match="unknown bcast algorithm"):
        m.predict("bcast", "ring", 1, 4)
    with pytest.raises(ValueError, match="unknown collective"):
        m.pick("broadcast", 1, 4)


def test_save_load_round_trip_and_bad_files(tmp_path):
    m = CostModel(alpha=1e-5, beta=2e-9, gamma=3e-10, setup=4e-4, overhead=2e-6, concurrency=3, source="test",
                  details={"points": 3})
    p = tmp_path / "model.json"
    m.save(p)
    assert CostModel.load(p) == m
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "clusterlab-costmodel/1",\n "alpha": }')
    with pytest.raises(ConfigError, match=r"bad.json:2:\d+: invalid JSON"):
        CostModel.load(bad)
    bad.write_text(json.dumps({"format": "clusterlab-costmodel/1", "alpha": -1, "beta": 0, "gamma": 0, "setup": 0}))
    with pytest.raises(ConfigError, match="alpha must be a finite number >= 0"):
        CostModel.load(bad)
    bad.write_text(json.dumps({"alpha": 1}))
    with pytest.raises(ConfigError, match="not a clusterlab cost model"):
        CostModel.load(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        CostModel.load(tmp_path / "missing.json")


def test_environment_selects_the_model(tmp_path, monkeypatch):
    p = tmp_path / "m.json"
    CostModel(alpha=1.0, beta=0, gamma=0, setup=0, source="env").save(p)
    monkeypatch.setenv(costmodel.ENV, str(p))
    assert costmodel.current().source == "env"
    monkeypatch.setenv(costmodel.ENV, str(tmp_path / "nope.json"))
    with pytest.raises(ConfigError, match="CLUSTERLAB_COSTMODEL"):
        costmodel.current()
    monkeypatch.delenv(costmodel.ENV)
    assert costmodel.current().source == "default"


@pytest.mark.parametrize("n", [2, 5, 6, 8])
def test_auto_choice_is_consistent_when_sizes_differ(n):
    """With a model whose choice depends on size, ranks that hold different sizes (or no data:
    bcast/scatter non-roots) still agree: the root announces, or ranks agree on the maximum."""
    costmodel.use(CostModel(alpha=100e-6, beta=1e-8, gamma=0, setup=0, overhead=10e-6, concurrency=0))
    try:
        assert n == 2 or C._fixed_choice(costmodel.current(), "bcast", n) is None  # the announcing path runs
        def job(c):
            big = bytes(200_000) if c.rank == n - 1 else b"s"
            out = [c.bcast(big if c.rank == 0 else None), c.bcast(b"tiny" if c.rank == 1 else None, root=1),
                   c.allgather(big), c.scatter([bytes([i]) * i * 5000 for i in range(n)] if c.rank == 0 else None)]
            return [len(x) if not isinstance(x, list) else [len(y) for y in x] for x in out]

        res = run_threads(job, n)
        for r, got in enumerate(res):
            assert got == [1, 4, [1] * (n - 1) + [200_000], r * 5000]
    finally:
        costmodel.use(None)


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_patterns_match_the_traffic_the_algorithms_send(n):
    """Each algorithm's pattern counts the messages it really sends (exactly) and the bytes
    (up to packing headers), measured on the in-process backend; a multicast group's datagrams
    count as messages (its opening handshake, once per communicator, before the call does not)."""
    from clusterlab.bench.collective import make_args

    m = 4096
    for op, mods in C.MODULES.items():
        for name, mod in mods.items():
            def job(c, op=op, name=name, group=not getattr(mod, "AUTO", True)):
                g = c.multicast() if group else None
                before = c.stats()
                C.run(op, c, name, **make_args(op, m, c.rank, c.size))
                s = c.stats()
                msgs, nbytes = s["messages_sent"] - before["messages_sent"], s["bytes_sent"] - before["bytes_sent"]
                if g is not None:
                    msgs, nbytes = msgs + g.counters["sent"], nbytes + g.counters["bytes_sent"]
                return msgs, nbytes

            sent = run_threads(job, n)
            p = mod.pattern(float(m), n)
            assert sum(x for x, _ in sent) == p.total_messages, (op, name)
            total = sum(b for _, b in sent)
            assert p.total == pytest.approx(total, rel=0.05, abs=64 * p.total_messages), (op, name, total, p.total)


def test_costmodel_does_not_import_the_algorithms_it_prices():
    """The model is the lower layer: the collectives register with it (no two modules import
    each other), and importing anything in clusterlab.comm registers them."""
    import ast
    import inspect

    from clusterlab.comm import collectives, costmodel

    tree = ast.parse(inspect.getsource(costmodel))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m and m.startswith("clusterlab.comm") for m in imported), imported
    assert set(costmodel._ALGORITHMS) == set(collectives.OPS)
    assert costmodel.CostModel().pick("bcast", 1 << 20, 8) in collectives.ALGORITHMS["bcast"]


def test_a_call_timed_from_its_barrier_pays_the_roots_calibrated_lateness():
    m = CostModel(alpha=30e-6, beta=1e-8, overhead=0, concurrency=0, setup=1e-3,
                  start_lateness={"4": 40e-6, "8": 50e-6, "16": 280e-6})
    assert m.barrier_lateness(16) == pytest.approx(280e-6) and m.barrier_lateness(12) == pytest.approx(165e-6)
    assert m.barrier_lateness(2) == pytest.approx(40e-6) and m.barrier_lateness(64) == pytest.approx(280e-6)
    assert CostModel().barrier_lateness(16) == 0.0
    for mode in ("persistent", "per_call"):
        alone = m.predict_mode("bcast", "binomial", 4096, 16, mode, calls=1) if mode == "per_call" else m.predict(
            "bcast", "binomial", 4096, 16)
        assert m.predict_from_barrier("bcast", "binomial", 4096, 16, mode) == pytest.approx(alone + 280e-6)
    # picks never include it: the same for every algorithm
    assert m.pick("bcast", 4096, 16) == CostModel(alpha=30e-6, beta=1e-8, overhead=0, concurrency=0).pick("bcast", 4096, 16)
    back = CostModel.from_dict(m.to_dict())
    assert back.start_lateness == m.start_lateness
    for bad in ({"x": 1e-4}, {"16": -1.0}, {"16": float("nan")}, {16: 1e-4}, [1e-4]):
        with pytest.raises(ConfigError, match="start_lateness"):
            CostModel(start_lateness=bad)
    with pytest.raises(ConfigError, match="window"):
        CostModel(window=-1)
    with pytest.raises(ConfigError, match="announce"):
        CostModel(announce={"16": -1e-4})
    assert CostModel.from_dict(CostModel(announce={"6": 1e-4}).to_dict()).announce == {"6": 1e-4}


def test_incast_beyond_a_switch_port_buffer_pays_a_loss_penalty():
    """With ``port_buffer`` a schedule whose ranks all send into one at once beyond it (the
    direct reduce-scatter, linear gather and reduce, all-at-once all-to-all) pays
    ``loss_penalty``: an algorithm without incast wins where the bytes are alike, the
    overflowing one still where the others move far more; 0 (the default) changes nothing."""
    from clusterlab.comm import collectives

    fast_links = dict(alpha=30e-6, beta=1e-8, overhead=0, concurrency=0)
    free, small = CostModel(**fast_links), CostModel(**fast_links, port_buffer=64_000, loss_penalty=0.2)
    bursts = {("allreduce", "reduce_scatter_allgather"), ("reduce", "linear"), ("gather", "linear"),
              ("alltoall", "all_at_once"), ("reduce", "scatter_gather")}
    for op, names in collectives.ALGORITHMS.items():
        for name in names:
            incast = costmodel._patterns(op, name, 1e6, 16)
            assert all((p.incast > 0) == ((op, name) in bursts) for p in incast.values()), (op, name)
    assert free.pick("allreduce", 1 << 20, 16) == "reduce_scatter_allgather"  # fewest hops for the bytes
    assert small.pick("allreduce", 1 << 20, 16) == "ring"  # same bytes, no incast
    rsag = free.predict("allreduce", "reduce_scatter_allgather", 1 << 20, 16)
    assert small.predict("allreduce", "reduce_scatter_allgather", 1 << 20, 16) == pytest.approx(rsag + 0.2)
    # exact (a float sum): the all-gather moves 15 arrays to every rank, more than a timeout's worth
    assert small.pick("allreduce", 1 << 24, 16, exact=True) == "reduce_scatter_allgather"
    assert small.overflows("alltoall", "all_at_once", 8192, 16) and not small.overflows("alltoall", "all_at_once", 64, 16)
    assert not free.overflows("alltoall", "all_at_once", 1 << 20, 16)
    assert small.pick("alltoall", 1 << 20, 16) == "pairwise"  # one chunk at a time: no incast
    back = CostModel.from_dict(small.to_dict())
    assert (back.port_buffer, back.loss_penalty) == (64_000, 0.2)
    for bad in ("port_buffer", "loss_penalty"):
        with pytest.raises(ConfigError, match=bad):
            CostModel(**{bad: -1})
