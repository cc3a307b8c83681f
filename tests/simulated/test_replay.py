"""HPA (compute) replay on the simulated cluster: the recording's translation into engine
operations (pure), then the engine's answers against what the flow model must give (skipped
without SimGrid's module), and a study point end to end."""

import json
from collections import Counter, deque

import pytest

from clusterlab.cluster import Simulated
from clusterlab.cluster.simulated.replay import FALLBACK, PATTERNS, translate
from clusterlab.cluster.simulated.run import why_no_engine
from clusterlab.cluster.testbed import StarTopo
from clusterlab.comm.costmodel import CostModel
from clusterlab.errors import ConfigError
from clusterlab.mining.parallel import replay_parallel
from clusterlab.mining.parallel.driver import replay_job

FORMAT = "clusterlab-mining-trace/2"


def needs_engine():
    why = why_no_engine()
    if why:
        pytest.skip(why)


def write_trace(d, events_by_rank):
    n = len(events_by_rank)
    for r, ev in enumerate(events_by_rank):
        (d / f"rank{r}.json").write_text(json.dumps({"format": FORMAT, "rank": r, "size": n, "events": ev}))
    return d


def run_ops(ranks):
    """Execute the translated ops with unbounded buffers (sends never block): every rank must
    finish (no receive left waiting) and every message be received. Returns messages per mailbox."""
    queues, pos, sent = Counter(), [0] * len(ranks), Counter()
    ready = deque(range(len(ranks)))
    stalled = 0
    while ready and stalled <= len(ready):
        r = ready.popleft()
        ops = ranks[r]["ops"]
        progressed = False
        while pos[r] < len(ops):
            op = ops[pos[r]]
            if op[0] == "s":
                queues[op[1]] += 1
                sent[op[1]] += 1
            elif op[0] == "r":
                assert op[1] in ranks[r]["mailboxes"]
                if queues[op[1]] == 0:
                    break
                queues[op[1]] -= 1
            pos[r] += 1
            progressed = True
        stalled = 0 if progressed else stalled + 1
        if pos[r] < len(ops):
            ready.append(r)
    assert all(p == len(rk["ops"]) for p, rk in zip(pos, ranks, strict=True)), "a rank waits on a receive nobody answers"
    assert sum(queues.values()) == 0, "messages left unreceived"
    return sent


def test_translation_of_gaps_messages_and_passes(tmp_path):
    ev0 = [["gap", 1.0, 0.5, 0.1], ["pass", 1], ["send", 1, 9, ["array", "<i8", [100]], 0, 0],
           ["recv", 1, 3, 0, 0], ["gap", 0.2, 0.2, 0.0], ["gap", 0.1, 0.1, 0.0], ["end"]]
    ev1 = [["pass", 1], ["recv_any", 9, False, 0, 0], ["recv_any", 9, True, 0, 0],
           ["send", 0, 3, ["bytes", 7], 0, 0], ["end"], ["gap", 0.3, 0.3, 0.3]]
    d = write_trace(tmp_path, [ev0, ev1])
    t = translate(d, compute="cpu", scale=10.0, runtime_scale=1.0)
    ops0 = t["ranks"][0]["ops"]
    start = ops0.index(["t0"])
    # gap: 0.4 CPU of mining x 10 + 0.1 of runtime x 1; two gaps in a row are one sleep
    assert ops0[start + 1:] == [["c", 4.1], ["p", 1], ["s", "a1.9", 800], ["r", "m0.1.3"], ["c", 3.0], ["e"]]
    ops1 = t["ranks"][1]["ops"]
    # the poll that found nothing is not replayed; rank 1's trailing gap is runtime (x 1)
    assert ops1[ops1.index(["t0"]) + 1:] == [["p", 1], ["r", "a1.9"], ["s", "m0.1.3", 7], ["e"], ["c", 0.3]]
    assert t["compute_s"] == [7.1, 0.3] and t["messages"] == 2 + 2  # two barrier messages
    wall = translate(d, compute="wall", scale=1.0)
    assert wall["compute_s"][0] == pytest.approx(1.3)  # 1.0 - 0.1 runtime, + 0.1 runtime, + 0.2 + 0.1
    run_ops(t["ranks"])


def test_translation_refuses_what_it_cannot_replay(tmp_path):
    (tmp_path / "a").mkdir()
    d = write_trace(tmp_path / "a", [[["recv_any", 1, True, 0, 0]], []])
    with pytest.raises(ConfigError, match="receive more messages than are sent"):
        translate(d)
    with pytest.raises(ConfigError, match="not 'spin'"):
        translate(d, compute="spin")
    with pytest.raises(ConfigError, match="scale must be"):
        translate(d, scale=-1)
    (tmp_path / "b").mkdir()
    d = write_trace(tmp_path / "b", [[["barrier", 0, 0]], [["allgather", ["bytes", 1], 0, 0]]])
    with pytest.raises(ConfigError, match="differs between ranks"):
        translate(d)
    (tmp_path / "c").mkdir()
    d = write_trace(tmp_path / "c", [[["recv", 1, 4, 0, 0], ["recv_any", 4, True, 0, 0]],
                                     [["send", 0, 4, ["bytes", 1], 0, 0]] * 2])
    with pytest.raises(ConfigError, match="both from any sender and from one"):
        translate(d)
    with pytest.raises(ConfigError, match="no recorded trace"):
        translate(tmp_path / "nothing")


@pytest.mark.parametrize("op,name", sorted(PATTERNS))
def test_every_collective_pattern_completes_and_moves_its_bytes(tmp_path, op, name):
    """Each algorithm written out, at rank counts around powers of two: it finishes with every
    message received, and an allgather's ranks receive every other rank's block."""
    for n in (1, 2, 3, 4, 5, 7, 8, 9):
        spec = ["array", "<i8", [10 + n]]
        ev = {"barrier": ["barrier"], "bcast": ["bcast", spec, n - 1], "gather": ["gather", spec, 0],
              "reduce": ["reduce", spec, "sum", n // 2], "allreduce": ["allreduce", spec, "sum"],
              "allgather": ["allgather", spec], "alltoall": ["alltoall", [["bytes", 5]] * n]}[op]
        d = tmp_path / f"{n}"
        d.mkdir()
        write_trace(d, [[ev + [0, 0]] for _ in range(n)])
        t = translate(d, model=CostModel(fixed={op: name}))
        assert n == 1 or (t["collectives"] == {f"{op}.{name}": 1} and t["substituted"] == {})
        run_ops(t["ranks"])
        if op == "allgather" and n > 1:
            got = [sum(o[2] for o in rk["ops"] if o[0] == "s" and o[1].startswith("k")) for rk in t["ranks"]]
            assert sum(got) >= n * (n - 1) * 8 * (10 + n)  # every block reaches every other rank
    assert FALLBACK[op] in {b for a, b in PATTERNS if a == op}


def test_a_pick_without_a_pattern_is_substituted_and_counted(tmp_path):
    write_trace(tmp_path, [[["allreduce", ["array", "<i8", [4]], "sum", 0, 0]] for _ in range(3)])
    t = translate(tmp_path, model=CostModel(fixed={"allreduce": "ring"}))
    assert t["substituted"] == {"allreduce.ring as allreduce.reduce_scatter_allgather": 1}
    run_ops(t["ranks"])


def test_exchange_loss_prices_the_all_at_once_exchanges_only(tmp_path):
    """Three ranks: an all-reduce of 3000 bytes by direct reduce-scatter (every rank's 1000-byte
    piece into its owner at once: a broadcast round's shape, priced once as 3 hosts' round of
    1000-byte blocks), a ring all-gather and a streamed block (not priced). Every rank waits the
    price right after the collective, with a third of its timeouts."""
    spec = ["array", "<u4", [750]]
    ev = [[["pass", 2], ["allreduce", spec, "sum", 0, 0], ["allgather", ["bytes", 64], 0, 0]]
          + ([["send", 1, 5, ["bytes", 9000], 0, 0]] if r == 0 else [])
          + ([["recv_any", 5, True, 0, 0]] if r == 1 else []) + [["end"]] for r in range(3)]
    d = write_trace(tmp_path, ev)
    priced = []

    def price(hosts, size):
        priced.append((hosts, size))
        return 0.5, 3.0
    model = CostModel(fixed={"allreduce": "reduce_scatter_allgather", "allgather": "ring"})
    t = translate(d, model=model, exchange_loss=price)
    assert priced == [(3, 1000)]
    assert t["loss"] == [{"collective": 0, "algorithm": "allreduce.reduce_scatter_allgather", "senders": 2,
                          "size": 1000, "rto_wait_s": 0.5, "timeouts": 3.0}]
    for rk in t["ranks"]:
        assert rk["ops"].count(["w", 0.5, 1.0]) == 1
        w = rk["ops"].index(["w", 0.5, 1.0])
        assert rk["ops"][w - 1][1].startswith("k") and rk["ops"][w + 1][1].startswith("k")  # between the two collectives
    run_ops(t["ranks"])
    assert translate(d, model=model)["loss"] == []  # no model, no price


def test_replay_refused_on_another_rank_count(tmp_path):
    write_trace(tmp_path, [[], []])
    with pytest.raises(ConfigError, match="recorded on 2 ranks"):
        Simulated(StarTopo(hosts=4)).run(replay_job, 3, str(tmp_path))


def test_engine_replay_against_the_analytical_time(tmp_path):
    """Two ranks: rank 0 computes 0.1 CPU seconds (x scale 3), then sends 1 MB to rank 1, which
    waits for it. Rank 1's pass: the computation, one route's latency (two links of 10 us) and
    1 MB + the frame header at 100 Mbit/s (bandwidth factor 1)."""
    needs_engine()
    ev0 = [["pass", 1], ["gap", 0.15, 0.1, 0.0], ["send", 1, 5, ["bytes", 1_000_000], 0, 0], ["end"]]
    ev1 = [["pass", 1], ["recv_any", 5, True, 0, 0], ["end"]]
    d = write_trace(tmp_path, [ev0, ev1])
    sim = Simulated(StarTopo(hosts=2, rate="100Mbit"), latency="10us", bandwidth_factor=1.0, loss_model=False)
    r = replay_parallel(d, cluster=sim, compute="cpu", scale=3.0)
    expect = 0.3 + 2 * 10e-6 + (1_000_000 + 40) * 8 / 100e6
    assert r.ranks[1]["job_s"] == pytest.approx(expect, rel=1e-3)
    assert r.ranks[0]["job_s"] == pytest.approx(0.3, rel=1e-6)  # an eager send: the sender goes on
    (p,) = r.passes
    assert p["t_total"] == pytest.approx(expect, rel=1e-3) and p["t_wait_compute"] == pytest.approx(0.3)
    assert (p["messages_sent"], p["bytes_sent"], p["timeouts"]) == (1, 1_000_040, 0)
    assert r.job_s == pytest.approx(expect, rel=1e-3)
    # deterministic: a second call gives the kept answer
    assert replay_parallel(d, cluster=sim, compute="cpu", scale=3.0).job_s == r.job_s
    # one rank: its computation alone
    one = tmp_path / "one"
    one.mkdir()
    write_trace(one, [[["pass", 1], ["gap", 0.5, 0.25, 0.05], ["end"]]])
    r1 = replay_parallel(one, cluster=sim, compute="cpu", scale=4.0, runtime_scale=1.0)
    assert r1.job_s == pytest.approx(0.2 * 4 + 0.05)
    # with the loss model on: a streamed block (recv_any) is no all-at-once exchange, nothing priced
    lossy = Simulated(StarTopo(hosts=2, rate="100Mbit"), latency="10us", bandwidth_factor=1.0)
    r2 = replay_parallel(d, cluster=lossy, compute="cpu", scale=3.0)
    assert r2.job_s == pytest.approx(r.job_s) and r2.passes[0]["rto_time_ms"] == 0


def test_study_point_replays_hpa_simulated(tmp_path):
    """A parallel_mining point with compute=replay on a simulated cluster: the run is recorded on
    this machine's loopback, replayed in the engine; rows as the testbed's replay gives them."""
    needs_engine()
    from clusterlab.experiments.runner import run_study
    from clusterlab.experiments.spec import Grid, Study
    from clusterlab.experiments.workloads import parallel_mining

    s = Study(name="hpa-sim28", cluster=Simulated(StarTopo(hosts=3, rate="155Mbit")),
              workload=parallel_mining(data="seed000:2K", min_support=0.02, compute="replay", compute_scale=10),
              grid=Grid(ranks=[1, 3]), repeat=2, warmup=0, monitor=False)
    res = run_study(s, tmp_path / "run", cache_dir=tmp_path / "cache")
    assert res.status == "complete" and len(res.rows) == 4
    one, three = res.rows[0], res.rows[2]
    assert one["cluster"] == "simulated" and one["messages_sent"] == 0 and one["seconds"] > 0
    assert three["messages_sent"] > 0 and three["itemsets"] == one["itemsets"]
    assert 0.0 <= three["time_rto_wait"] < three["seconds"]  # the loss model's waits, if an exchange overflows
    assert res.rows[2]["seconds"] == res.rows[3]["seconds"]  # deterministic repetitions
    # the recordings picked their collectives by the simulated topology's links, as the testbed's ranks would
    from clusterlab.comm.costmodel import CostModel

    models = [CostModel.load(p) for p in (tmp_path / "cache").rglob("costmodel.json")]
    assert len(models) == 2  # 1 and 3 ranks
    assert {m.source for m in models} == {"testbed links: 155Mbit bridge, k = 1 (clusterlab.cluster.testbed.model)"}
    real = Study(name="hpa-sim28", cluster=Simulated(StarTopo(hosts=2)),
                 workload=parallel_mining(data="seed000:2K", compute="real"), repeat=1, monitor=False)
    with pytest.raises(ConfigError, match="use compute=replay"):
        run_study(real, tmp_path / "real")
