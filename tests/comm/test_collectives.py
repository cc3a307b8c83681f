"""Every collective algorithm against a straightforward reference, on every backend.

Hypothesis draws rank counts (powers of two and not), roots, payload kinds and sizes (bytes of
different lengths per rank where the operation allows, arrays of several dtypes and shapes).
"""

from __future__ import annotations

import functools
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterlab.comm import collectives as C
from clusterlab.comm import costmodel
from clusterlab.comm.collectives._pack import pack, unpack
from clusterlab.comm.costmodel import CostModel
from clusterlab.comm.errors import CommTimeout, PeerFailure, ProtocolError
from clusterlab.comm.inproc import run_threads, world

from . import spmd_cases
from .backends import BACKENDS, PROCESS_BACKENDS, launch, launch_processes

CASES = [(op, name) for op in C.OPS for name in [*sorted(C.ALGORITHMS[op]), None]]
# Algorithms that need a multicast group (bcast p2mp): the in-process backend has one; the TCP
# mesh has one only inside testbed hosts (tests/comm/test_p2mp.py), not on loopback.
MULTICAST = {(op, name) for op, name in CASES if name and not getattr(C.MODULES[op][name], "AUTO", True)}
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
DTYPES = [np.uint8, np.int32, np.int64, np.float32, np.float64]


def same(got, want) -> bool:
    if isinstance(want, np.ndarray):
        return (isinstance(got, np.ndarray) and got.dtype == want.dtype and got.shape == want.shape
                and got.tobytes() == want.tobytes())
    return isinstance(got, (bytes, bytearray, memoryview)) and bytes(got) == bytes(want)


def fold(fn, arrays):
    return functools.reduce(lambda a, b: fn(a, b), arrays[1:], arrays[0].copy())


@st.composite
def payload(draw, rng_seed=None):
    """A bytes payload or a small array."""
    if draw(st.booleans()):
        return draw(st.binary(min_size=0, max_size=300))
    dt = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = draw(st.sampled_from([(0,), (1,), (7,), (3, 4), (33,)]))
    seed = draw(st.integers(0, 2**32 - 1))
    return (np.random.default_rng(seed).random(shape) * 100).astype(dt)


def _job(op, name, n, root, per_rank, red_op):
    """The SPMD function and the expected per-rank results."""
    if op == "barrier":
        return (lambda c: C.run("barrier", c, name)), [None] * n
    if op == "bcast":
        data = per_rank[root]
        return (lambda c: C.run("bcast", c, name, data=data if c.rank == root else None, root=root)), [data] * n
    if op == "scatter":
        return ((lambda c: C.run("scatter", c, name, chunks=per_rank if c.rank == root else None, root=root)),
                list(per_rank))
    if op == "gather":
        return ((lambda c: C.run("gather", c, name, data=per_rank[c.rank], root=root)),
                [list(per_rank) if r == root else None for r in range(n)])
    if op == "allgather":
        return (lambda c: C.run("allgather", c, name, data=per_rank[c.rank])), [list(per_rank)] * n
    if op == "alltoall":
        grid = [[per_rank[(i + j) % n] for j in range(n)] for i in range(n)]  # grid[src][dst]
        return ((lambda c: C.run("alltoall", c, name, chunks=grid[c.rank])),
                [[grid[i][j] for i in range(n)] for j in range(n)])
    ref = fold(C._common.OPS[red_op], per_rank)
    if op == "reduce":
        return ((lambda c: C.run("reduce", c, name, array=per_rank[c.rank], op=red_op, root=root)),
                [ref if r == root else None for r in range(n)])
    return (lambda c: C.run("allreduce", c, name, array=per_rank[c.rank], op=red_op)), [ref] * n


def _exact(op, name, arrays, red_op) -> bool:
    if op not in ("reduce", "allreduce") or arrays[0].dtype.kind not in "fc" or red_op != "sum":
        return True
    if name is None:
        return True  # the model only picks exact algorithms for floating-point sums
    return C.MODULES[op][name].EXACT


def check(results, expected, op, name, arrays=None, red_op="sum"):
    exact = _exact(op, name, arrays, red_op) if arrays is not None else True
    for r, (got, want) in enumerate(zip(results, expected, strict=True)):
        if want is None:
            assert got is None, f"rank {r}"
        elif isinstance(want, list):
            assert isinstance(got, list) and len(got) == len(want), f"rank {r}"
            for i, (g, w) in enumerate(zip(got, want, strict=True)):
                assert same(g, w), f"rank {r} item {i}: {g!r} != {w!r}"
        elif exact:
            assert same(got, want), f"rank {r}: {got!r} != {want!r}"
        else:
            assert isinstance(got, np.ndarray) and got.dtype == want.dtype and got.shape == want.shape
            # Another summation order differs by rounding: bound it by the summands' size, not the
            # result's (a sum near zero after cancellation has no relative accuracy to speak of).
            scale = max(float(np.max(np.abs(a))) for a in arrays) if want.size else 0.0
            atol = 4 * len(arrays) * float(np.finfo(want.dtype).eps) * scale
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=atol)
    if op == "allreduce":  # whatever the order, every rank holds the same bits
        assert len({g.tobytes() for g in results}) == 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("op", "name"), CASES, ids=[f"{o}-{a or 'auto'}" for o, a in CASES])
@SETTINGS
@given(data=st.data())
def test_algorithm_matches_reference(backend, op, name, data):
    if (op, name) in MULTICAST and backend != "inproc":
        pytest.skip("needs a multicast group: loopback has none (testbed runs: tests/comm/test_p2mp.py)")
    n = data.draw(st.integers(1, 9), label="ranks")
    root = data.draw(st.integers(0, n - 1), label="root")
    red_op = "sum"
    if op in ("reduce", "allreduce"):
        dt = np.dtype(data.draw(st.sampled_from(DTYPES)))
        shape = data.draw(st.sampled_from([(0,), (1,), (5,), (3, 7), (100,)]))
        red_op = data.draw(st.sampled_from(["sum", "min", "max"]))
        seed = data.draw(st.integers(0, 2**32 - 1))
        rng = np.random.default_rng(seed)
        per_rank = [(rng.random(shape) * 1000 - 500).astype(dt) for _ in range(n)]
    elif op == "bcast":
        per_rank = [data.draw(payload())] * n
    else:
        per_rank = [data.draw(payload()) for _ in range(n)]
    fn, expected = _job(op, name, n, root, per_rank, red_op)
    results = launch(backend, fn, n)
    check(results, expected, op, name, per_rank if op in ("reduce", "allreduce") else None, red_op)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float_sums_exact_where_documented(backend):
    """Exact algorithms give the rank-order fold bit for bit; the others stay close."""
    n = 7
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(1001) * 10.0 ** rng.integers(-8, 8, 1001) for _ in range(n)]
    ref = fold(np.add, arrays)
    for name, mod in C.MODULES["allreduce"].items():
        res = launch(backend, lambda c, name=name: C.run("allreduce", c, name, array=arrays[c.rank]), n)
        assert len({r.tobytes() for r in res}) == 1
        if mod.EXACT:
            assert res[0].tobytes() == ref.tobytes(), name
    for name, mod in C.MODULES["reduce"].items():
        res = launch(backend, lambda c, name=name: C.run("reduce", c, name, array=arrays[c.rank], root=2), n)
        if mod.EXACT:
            assert res[2].tobytes() == ref.tobytes(), name
        np.testing.assert_allclose(res[2], ref, rtol=1e-9, atol=1e-300)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mixed_sequence_on_one_communicator(backend):
    """Many collectives of different kinds and algorithms back to back share one tag safely."""
    n = 6
    seq = [(op, name) for op, name in CASES if backend == "inproc" or (op, name) not in MULTICAST]

    def job(c):
        out = []
        for i, (op, name) in enumerate(seq):
            if op == "barrier":
                C.run(op, c, name)
            elif op == "bcast":
                out.append(C.run(op, c, name, data=bytes([i]) * (i * 97) if c.rank == i % n else None, root=i % n))
            elif op == "scatter":
                out.append(C.run(op, c, name, chunks=[bytes([j]) * j * i for j in range(n)] if c.rank == 1 else None,
                                 root=1))
            elif op == "gather":
                out.append(C.run(op, c, name, data=bytes([c.rank]) * i, root=n - 1))
            elif op == "allgather":
                out.append(C.run(op, c, name, data=np.full(c.rank + i, c.rank)))
            elif op == "alltoall":
                out.append(C.run(op, c, name, chunks=[bytes([c.rank, j, i]) for j in range(n)]))
            else:
                kw = {"root": 0} if op == "reduce" else {}
                out.append(C.run(op, c, name, array=np.arange(i, i + 50) * (c.rank + 1), **kw))
        return out

    results = launch(backend, job, n)
    for r in range(1, n):
        k = 0
        for op, _ in seq:
            if op == "barrier":
                continue
            if op in ("allgather", "alltoall", "allreduce", "bcast"):
                a, b = results[0][k], results[r][k]
                if op == "alltoall":
                    assert [bytes(x)[1] for x in b] == [r] * n
                elif op == "allreduce":
                    assert a.tobytes() == b.tobytes()
                elif op == "allgather":
                    assert all(same(x, y) for x, y in zip(a, b, strict=True))
                else:
                    assert same(a, b)
            k += 1


def _dying(comm, after: int):
    """Make ``comm`` raise (as if its process were killed) at its point-to-point call number
    ``after + 1`` (sends and receives count)."""
    count = [0]

    def wrap(real):
        def call(*a, **k):
            count[0] += 1
            if count[0] > after:
                raise RuntimeError(f"rank {comm.rank} killed")
            return real(*a, **k)
        return call

    comm.send, comm.recv = wrap(comm.send), wrap(comm.recv)  # the calls collectives make


@pytest.mark.parametrize(("op", "name"), [c for c in CASES if c[1] is not None],
                         ids=[f"{o}-{a}" for o, a in CASES if a is not None])
def test_rank_killed_mid_collective_inproc(op, name):
    """A rank dying part-way through a collective makes every other rank raise PeerFailure naming
    it, at once (not after the timeout)."""
    n, victim = 6, 4
    fn, _ = _job(op, name, n, 0, [np.arange(64, dtype=np.int64) * (r + 1) for r in range(n)], "sum")

    def job(c):
        if c.rank == victim:
            _dying(c, after=1 if op in ("alltoall", "allreduce", "allgather") else 0)
        return fn(c)

    t0 = time.monotonic()
    res = run_threads(job, n, timeout=20, return_exceptions=True)
    assert time.monotonic() - t0 < 5
    assert isinstance(res[victim], RuntimeError)
    for r, x in enumerate(res):
        if r != victim and isinstance(x, BaseException):
            assert isinstance(x, PeerFailure) and x.rank == victim, (r, x)
    # Some rank needed the victim's data, so cannot have finished normally (in a flat bcast or
    # linear scatter the victim only receives: nobody needs it).
    assert (op, name) in {("bcast", "flat"), ("scatter", "linear")} or any(isinstance(x, PeerFailure) for r, x in enumerate(res) if r != victim)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_arguments_are_clear_errors(backend):
    def wrong_chunks(c):
        return C.run("scatter", c, "linear", chunks=[b"a"] if c.rank == 0 else None)

    with pytest.raises(ValueError, match="one chunk per rank"):
        launch(backend, wrong_chunks, 3)

    def mismatched(c):
        return C.run("reduce", c, "linear", array=np.zeros(3 + (c.rank == 2)), root=0)

    with pytest.raises(ValueError, match="rank 2 contributed float64\\[4\\], expected float64\\[3\\]"):
        launch(backend, mismatched, 3)
    with pytest.raises(ValueError, match="unknown bcast algorithm 'ring'"):
        launch(backend, lambda c: C.run("bcast", c, "ring", data=b"x", root=0), 2)
    with pytest.raises(ValueError, match="unknown reduction 'avg'"):
        launch(backend, lambda c: C.run("allreduce", c, "ring", array=np.zeros(2), op="avg"), 2)
    with pytest.raises(ValueError, match="unknown collective"):
        C.run("broadcast", world(1)[0])


def test_communicator_methods_use_collectives():
    def job(c):
        return (c.bcast(b"x" if c.rank == 0 else None), c.allreduce(np.array([c.rank]), "max").tolist(),
                c.alltoallv(np.arange(c.size) + 10 * c.rank, [1] * c.size)[0].tolist(), c.gather(bytes([c.rank])))

    res = run_threads(job, 3)
    assert res[0] == (b"x", [2], [0, 10, 20], [b"\x00", b"\x01", b"\x02"])
    assert res[1][:3] == (b"x", [2], [1, 11, 21]) and res[1][3] is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=50), st.builds(
    lambda dt, k: np.arange(k).astype(dt), st.sampled_from(DTYPES + [np.complex128, np.bool_]),
    st.integers(0, 20))), max_size=6))
def test_pack_round_trip(items):
    out = unpack(pack(items))
    assert len(out) == len(items)
    for a, b in zip(out, items, strict=True):
        assert same(a, b)


def test_unpack_refuses_corrupt_messages():
    good = pack([b"abc", np.arange(4, dtype=np.int32)])
    for bad in (good[:-1], good + b"x", b"XXXX" + good[4:], good[:10], b""):
        with pytest.raises(ProtocolError):
            unpack(bad)
    evil = good.replace(b"<i4", b"|O8")
    with pytest.raises(ProtocolError, match="refused dtype"):
        unpack(evil)
    with pytest.raises(TypeError, match="plain numeric"):
        pack([np.array(["a"], dtype=object)])


def test_inproc_timeout_and_closed_peer():
    a, b = world(2, default_timeout=0.2)
    t0 = time.monotonic()
    with pytest.raises(CommTimeout, match="no message from rank 1"):
        a.recv(1)
    assert time.monotonic() - t0 < 1
    b.close()
    with pytest.raises(PeerFailure, match="rank 1 failed: closed"):
        a.recv(1)
    with pytest.raises(TypeError, match="bytes-like or a numpy array"):
        a.send(1, "text")


# --- ranks as separate processes (the launcher; mpiexec for MPI) ---------------------------------
KILL_CASES = [("bcast", "binomial"), ("scatter", "binomial"), ("gather", "binomial"),
              ("allgather", "recursive_doubling"), ("alltoall", "pairwise"), ("barrier", "dissemination"),
              ("reduce", "scatter_gather"), ("allreduce", "ring")]


@pytest.mark.parametrize("backend", PROCESS_BACKENDS)
@pytest.mark.parametrize("n", [3, 5])
def test_processes_give_the_inproc_results(backend, n):
    """Every algorithm (and the model's pick) run back to back in one job of n processes gives,
    on every rank, exactly the bytes the in-process backend gives (which the property tests
    above check against the reference)."""
    seeds = [1, 2]
    got = launch_processes(backend, spmd_cases.all_cases, n, seeds)
    want = run_threads(spmd_cases.all_cases, n, seeds)
    labels = [f"{op}/{name or 'auto'}/seed {s}" for s in seeds for op, name in spmd_cases.cases()]
    for r in range(n):
        bad = [lab for lab, g, w in zip(labels, got[r], want[r], strict=True) if g != w]
        assert not bad, f"rank {r} differs from inproc in {bad}"


# Under mpiexec the failed rank is inferred: hydra kills every other rank as soon as one dies, so
# the launcher sees all their links drop at nearly the same moment and may name another rank
# (about one run in ten; docs/comm.md). The TCP backend names the victim exactly.
MPI_NAMING = "under mpiexec the first failed rank is inferred from the order the links dropped"


@pytest.mark.parametrize("backend", PROCESS_BACKENDS)
@pytest.mark.parametrize(("op", "name"), KILL_CASES, ids=[f"{o}-{a}" for o, a in KILL_CASES])
def test_rank_process_killed_mid_collective(backend, op, name):
    """A rank's process exits abruptly inside a collective: the job fails within seconds naming
    that rank, and every rank that needed it exits non-zero."""
    n = 5
    root = spmd_cases.case_inputs(op, n, 0)[1]
    # a rank others depend on after its failure point (in a 5-rank recursive doubling, rank 4
    # only hands its block over and waits: nobody needs it afterwards)
    victim = root if op in ("bcast", "scatter") else 1 if op == "allgather" else (root + 2) % n
    after = 1 if op in ("alltoall", "allreduce", "allgather", "barrier") else 0
    t0 = time.monotonic()
    with pytest.raises(PeerFailure) as ei:
        launch_processes(backend, spmd_cases.die_mid, n, op, name, victim, after, timeout=60)
    assert time.monotonic() - t0 < 15
    if backend == "mpi" and ei.value.rank != victim:
        pytest.xfail(MPI_NAMING)
    assert ei.value.rank == victim
    res = getattr(ei.value, "result", None)
    if res is not None:
        assert res.returncodes[victim] != 0
        # Ranks that no longer needed it may finish normally (senders to a dead root; in an
        # allgather a block already passed on); someone must have needed it.
        if op not in ("gather", "reduce"):
            assert any(rc != 0 for r, rc in enumerate(res.returncodes) if r != victim), res.returncodes


# --- the model's pick, announced by the root -----------------------------------------------------
# Models whose bcast / scatter choice changes with the size, so that the root must announce it.
ANNOUNCING = {"bcast": CostModel(alpha=100e-6, beta=1e-8, gamma=0, setup=0, overhead=10e-6, concurrency=0),
              "scatter": CostModel(alpha=1e-6, beta=1e-9, gamma=1e-7, setup=0, overhead=1e-3, concurrency=0)}
ODD_SIZES = [0, 1, 999, 70_001, 300_003]


def _announced_job(op, n, root, m):
    if op == "bcast":
        data = np.arange(m, dtype=np.uint8)
        return (lambda c: C.run("bcast", c, data=data if c.rank == root else None, root=root)), [data] * n
    chunks = [(np.arange(m + r, dtype=np.uint8) if r % 2 else bytes(range(256)) * (m // 256) + b"x" * r)
              for r in range(n)]  # arrays and bytes of different sizes
    return (lambda c: C.run("scatter", c, chunks=chunks if c.rank == root else None, root=root)), chunks


@pytest.mark.parametrize("n", range(1, 9))
@pytest.mark.parametrize("op", ["bcast", "scatter"])
def test_announced_choice_gives_every_rank_the_sequential_result(op, n):
    """Whatever the root picks for the size (flat/linear, whose data follows the announcement,
    or another algorithm), every rank gets exactly the data, for any root and odd sizes."""
    model = ANNOUNCING[op]
    picks = {model.pick(op, m, n) for m in ODD_SIZES}
    # sizes on both sides of the model's switch (on 3 ranks binomial scatter saves no message)
    assert n < (3 if op == "bcast" else 4) or len(picks) > 1, picks
    costmodel.use(model)
    try:
        for root in sorted({0, n // 2, n - 1}):
            for m in ODD_SIZES:
                fn, want = _announced_job(op, n, root, m)
                check(run_threads(fn, n), want, op, None)
    finally:
        costmodel.use(None)


@pytest.mark.parametrize("n", [4, 5, 8])
@pytest.mark.parametrize("op", ["bcast", "scatter"])
def test_announcement_costs_one_byte_per_rank(op, n):
    """The root's choice reaches each rank as one 1-byte message from the root, and the data is
    neither packed nor sent twice: the traffic is the chosen algorithm's plus n - 1 bytes in
    n - 1 messages."""
    model = ANNOUNCING[op]
    costmodel.use(model)
    try:
        for m in ODD_SIZES[1:]:
            name = model.pick(op, m, n)
            assert C._fixed_choice(model, op, n) is None

            def traffic(c, algorithm, m=m):
                fn, _ = _announced_job(op, n, 0, m)
                if algorithm is None:
                    fn(c)
                else:
                    kw = {"data": np.arange(m, dtype=np.uint8) if c.rank == 0 else None} if op == "bcast" else \
                        {"chunks": _announced_job(op, n, 0, m)[1] if c.rank == 0 else None}
                    C.run(op, c, algorithm, **kw)
                s = c.stats()
                return s["messages_sent"], s["bytes_sent"]

            auto = run_threads(lambda c: traffic(c, None), n)
            alone = run_threads(lambda c, name=name: traffic(c, name), n)
            assert sum(x for x, _ in auto) == sum(x for x, _ in alone) + n - 1, (op, m, name)
            assert sum(b for _, b in auto) == sum(b for _, b in alone) + n - 1, (op, m, name)
    finally:
        costmodel.use(None)
