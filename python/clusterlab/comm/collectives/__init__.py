"""Collective operations as algorithms over point-to-point messages, one module per algorithm.

``ALGORITHMS[op][name]`` is the function; ``run(op, comm, algorithm=None, **kw)`` calls one by
name or lets the cost model (``clusterlab.comm.costmodel``) pick the fastest for the size and
rank count. Algorithms use only ``comm.send``/``comm.recv`` with ``COLLECTIVE_TAG`` and bytes
or numpy payloads (never pickle), work for any number of ranks, and accept bytes payloads of
different sizes wherever the operation allows (gather, allgather, alltoall, scatter).

Reductions (sum, min, max): ``reduce.linear``, ``reduce.gather``, ``reduce.scatter_gather``,
``allreduce.allgather`` and ``allreduce.reduce_scatter_allgather`` give the left-to-right
rank-order fold bit for bit;
the tree and ring ones combine in another order, which only matters for floating-point sums
(last bits). When it picks, the cost model only considers the exact ones for floating-point
sums, so results do not depend on which algorithm it chose.

Every rank must take the same decision. Where ranks cannot know the size (bcast and scatter:
only the root has the data; gather, allgather, alltoall: sizes may differ) and the model's
choice depends on the size, the root sends its choice to every rank directly (one byte each,
followed at once by the data when the choice is the flat/linear one), or the ranks agree on
the largest size first (a dissemination max, ``ceil(log2 n)`` tiny messages).

>>> from clusterlab.comm.inproc import run_threads
>>> run_threads(lambda c: run("allgather", c, "ring", data=bytes([c.rank]) * c.rank), 3)[0]
[b'', b'\\x01', b'\\x02\\x02']
>>> sorted(ALGORITHMS["bcast"])
['binomial', 'flat', 'p2mp', 'paced', 'scatter_allgather']
"""

from __future__ import annotations

import struct

import numpy as np

from clusterlab.comm import costmodel
from clusterlab.comm.collectives import (
    allgather_recursive_doubling,
    allgather_ring,
    allreduce_allgather,
    allreduce_reduce_bcast,
    allreduce_reduce_scatter_allgather,
    allreduce_ring,
    alltoall_all_at_once,
    alltoall_pairwise,
    barrier_central,
    barrier_dissemination,
    bcast_binomial,
    bcast_flat,
    bcast_p2mp,
    bcast_paced,
    bcast_scatter_allgather,
    gather_binomial,
    gather_linear,
    reduce_binomial,
    reduce_gather,
    reduce_linear,
    reduce_scatter_gather,
    scatter_binomial,
    scatter_linear,
)
from clusterlab.comm.collectives._common import TAG, ceil_log2, check_chunks, check_root, nbytes
from clusterlab.comm.errors import ProtocolError

_ALL = [bcast_flat, bcast_binomial, bcast_p2mp, bcast_paced, bcast_scatter_allgather, scatter_linear, scatter_binomial, gather_linear,
        gather_binomial, allgather_ring, allgather_recursive_doubling, alltoall_all_at_once, alltoall_pairwise,
        barrier_central, barrier_dissemination, reduce_binomial, reduce_linear, reduce_gather, reduce_scatter_gather,
        allreduce_ring, allreduce_reduce_scatter_allgather, allreduce_reduce_bcast, allreduce_allgather]

OPS = ("barrier", "bcast", "scatter", "gather", "allgather", "alltoall", "reduce", "allreduce")
MODULES: dict[str, dict] = {op: {} for op in OPS}
for _m in _ALL:
    MODULES[_m.OP][_m.NAME] = _m
ALGORITHMS: dict[str, dict] = {op: {name: m.run for name, m in names.items()} for op, names in MODULES.items()}
costmodel.register(MODULES)  # the model prices these (it does not import the algorithms)

# Keyword arguments of each operation (what ``run`` forwards to the algorithm).
ARGS = {"barrier": (), "bcast": ("data", "root"), "scatter": ("chunks", "root"), "gather": ("data", "root"),
        "allgather": ("data",), "alltoall": ("chunks",), "reduce": ("array", "op", "root"),
        "allreduce": ("array", "op")}


def run(op: str, comm, /, algorithm: str | None = None, **kw):
    """Run collective ``op`` on ``comm`` with the named ``algorithm`` or the cost model's pick.
    (``op`` is positional-only: reductions take an ``op`` keyword of their own, "sum" etc.)

    >>> from clusterlab.comm.inproc import run_threads
    >>> run_threads(lambda c: run("bcast", c, "binomial", data=b"hi" if c.rank == 0 else None), 3)
    [b'hi', b'hi', b'hi']
    """
    if getattr(comm, "connections", "persistent") != "persistent":  # per-call: the communicator connects first
        return comm._collective(op, algorithm, **kw)
    if op not in MODULES:
        raise ValueError(f"unknown collective {op!r} (one of {', '.join(OPS)})")
    unknown = set(kw) - set(ARGS[op])
    if unknown:
        raise TypeError(f"{op} got unexpected arguments {sorted(unknown)} (takes {list(ARGS[op])})")
    if algorithm is not None:
        if algorithm not in ALGORITHMS[op]:
            raise ValueError(f"unknown {op} algorithm {algorithm!r} (one of {', '.join(sorted(ALGORITHMS[op]))})")
        return ALGORITHMS[op][algorithm](comm, **kw)
    return _auto(op, comm, kw)


# --- choosing by the cost model, consistently on every rank ------------------------------------
_SIZES = [1 << k for k in range(0, 33, 2)]
_fixed_cache: dict = {}


def _fixed_choice(model, op: str, n: int) -> str | None:
    """The model's pick when it is the same for every size, else None."""
    key = (id(model), model.alpha, model.beta, model.gamma, op, n)
    if key not in _fixed_cache:
        picks = {model.pick(op, m, n) for m in _SIZES}
        _fixed_cache[key] = picks.pop() if len(picks) == 1 else None
    return _fixed_cache[key]


def _agree_max(comm, value: int) -> int:
    """The largest ``value`` over all ranks (dissemination pattern; max is idempotent)."""
    n, r = comm.size, comm.rank
    d = 1
    while d < n:
        comm.send((r + d) % n, struct.pack("<Q", value), TAG)
        got = comm.recv((r - d) % n, TAG)
        if len(got) != 8:
            raise ProtocolError(f"size agreement: rank {(r - d) % n} sent {len(got)} bytes, expected 8")
        value = max(value, struct.unpack("<Q", got)[0])
        d <<= 1
    return value


def _auto(op: str, comm, kw: dict):
    model, n = costmodel.current(), comm.size
    names = sorted(ALGORITHMS[op])
    if op == "barrier":
        return ALGORITHMS[op][model.pick(op, 0, n)](comm)
    if op in ("reduce", "allreduce"):
        a = kw["array"]
        exact = isinstance(a, np.ndarray) and a.dtype.kind in "fc" and kw.get("op", "sum") == "sum"
        nb = a.nbytes if isinstance(a, np.ndarray) else 0
        return ALGORITHMS[op][model.pick(op, nb, n, exact=exact)](comm, **kw)
    fixed = _fixed_choice(model, op, n)
    if fixed is not None:
        return ALGORITHMS[op][fixed](comm, **kw)
    if op in ("bcast", "scatter"):
        return _announced(op, comm, model, names, kw)
    if op in ("gather", "allgather"):
        m = nbytes(kw["data"])
    else:
        m = max((nbytes(c) for c in kw["chunks"]), default=0) if kw.get("chunks") is not None else 0
    return ALGORITHMS[op][model.pick(op, _agree_max(comm, m), n)](comm, **kw)


# The algorithm in which the root sends each rank its data directly (bcast: the whole message,
# scatter: its chunk): when the root picks it, each rank's announcement and data go back to back.
_DIRECT = {"bcast": "flat", "scatter": "linear"}


def announces(model, op: str, name: str, n: int) -> bool:
    """Whether an automatic ``op`` on ``n`` ranks whose pick is ``name`` sends the root's
    1-byte word of its pick to every rank before the algorithm's data: bcast and scatter when the
    pick depends on the size (not ``_fixed_choice``) and is not the direct one (whose data travels
    with the word).

    >>> from clusterlab.comm import costmodel
    >>> m = costmodel.CostModel(alpha=30e-6, beta=5e-8, overhead=3e-6, concurrency=0)
    >>> announces(m, "bcast", "scatter_allgather", 16), announces(m, "bcast", "flat", 16)
    (True, False)
    """
    direct = _DIRECT.get(op)
    return direct is not None and name != direct and _fixed_choice(model, op, n) is None


def _announced(op: str, comm, model, names: list[str], kw: dict):
    """bcast/scatter: the root picks and tells every other rank directly (one hop of one byte:
    ranks cannot know whom to listen to before they know the algorithm), then the algorithm runs.
    Nothing is packed or copied. When the pick is the direct one (flat, linear), each rank's
    data follows its announcement at once, so a rank wakes once for both."""
    root = kw.get("root", 0)
    check_root(comm, root)
    n, rank = comm.size, comm.rank
    if rank != root:
        head = comm.recv(root, TAG)
        if not isinstance(head, np.ndarray) or head.dtype != np.uint8 or head.size != 1 or int(head[0]) >= len(names):
            raise ProtocolError(f"{op}: malformed algorithm announcement from root {root}")
        return ALGORITHMS[op][names[int(head[0])]](comm, **kw)
    if op == "bcast":
        if kw.get("data") is None:
            raise ValueError("the root of a broadcast must pass data")
        m = nbytes(kw["data"])
    else:
        m = max(nbytes(c) for c in check_chunks(kw.get("chunks"), n, "scatter"))
    name = model.pick(op, m, n)
    head = np.array([names.index(name)], dtype=np.uint8)
    if name != _DIRECT[op]:
        for r in range(n):
            if r != root:
                comm.send(r, head, TAG)
        return ALGORITHMS[op][name](comm, **kw)
    if op == "bcast":
        payload = [kw["data"]] * n
    else:
        payload = check_chunks(kw.get("chunks"), n, "scatter")
    for r in range(n):
        if r != root:
            comm.send(r, head, TAG)
            comm.send(r, payload[r], TAG)
    return payload[root]


__all__ = ["ALGORITHMS", "MODULES", "OPS", "ARGS", "announces", "run", "ceil_log2"]
