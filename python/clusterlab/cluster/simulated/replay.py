"""A recorded parallel mining run (``run_parallel(record=DIR)``, ``mining/parallel/trace.py``)
as the simulation engine's per-rank operations: pure (no engine, no clock, no network).

Each rank's log becomes a list of operations the engine's ``replay`` job executes as one actor
per rank (``engine.py``):

* ``["c", seconds]``: computation, the engine sleeps it (a host with a core of its own). A gap's
  seconds as ``trace.replay_rank`` pays them: its CPU seconds (``compute="cpu"``; ``"wall"``: the
  gap as measured), the mining part times ``scale``, the runtime part times ``runtime_scale``;
* ``["s", mailbox, bytes]``: an eager send (it leaves at once; the rank goes on, as the mesh's
  send returns once the kernel holds the bytes);
* ``["r", mailbox]``: a blocking receive;
* ``["p", k]`` / ``["e"]``: pass ``k`` begins / ends; ``["t0"]``: the job's clock starts (after
  the replay's opening barrier, as ``replay_rank``'s);
* ``["w", seconds, timeouts]``: with ``exchange_loss``, the loss/timeout model's expected RTO
  wait after a collective whose algorithm sends all at once into each rank (every rank waits it:
  each waits for the exchange's slowest message), with its share of the timeouts.

``exchange_loss`` (``(hosts, size) -> (wait, timeouts)``, the simulated cluster's ``loss_wait``)
prices the exchanges that have a broadcast round's shape, the one the loss model was fitted
to: every sender's block leaves at once towards each receiver (``BURSTS``: the direct
reduce-scatter of an all-reduce, pieces of m / n bytes from n - 1 senders; an all-at-once
all-to-all; a linear gather into the root). Exchanges without that shape (rings, trees,
pairwise steps) and HPA's blocks, which stream out while the ranks count, are not priced: the
model knows nothing of them (docs/simulation.md).

Messages are matched by mailbox name: ``a{dst}.{tag}`` for a tag the receiver takes with
``recv_any`` (HPA's blocks: any sender), ``m{dst}.{src}.{tag}`` for ``recv(src, tag)``,
``k{dst}.{src}`` for a collective's messages (one FIFO channel per pair: every rank calls the
collectives in the same order). A collective becomes the point-to-point messages of the algorithm
the mesh's cost model picks for its size and rank count (``comm.costmodel``), for the algorithms
written out below (``PATTERNS``); any other pick is replaced by the one ``FALLBACK`` names and
counted in ``substituted``. The size agreement some automatic collectives run first (a few tiny
messages) is left out.

>>> import json, os, tempfile
>>> d = tempfile.mkdtemp()
>>> for r in range(2):
...     ev = [["gap", 0.5, 0.25, 0.0], ["pass", 1], ["send", 1 - r, 7, ["bytes", 1000], 0, 0],
...           ["recv_any", 7, True, 0, 0], ["gap", 0.1, 0.1, 0.1], ["end"]]
...     with open(os.path.join(d, f"rank{r}.json"), "w") as f:
...         json.dump({"format": "clusterlab-mining-trace/2", "rank": r, "size": 2, "events": ev}, f)
>>> t = translate(d, compute="cpu", scale=2.0, runtime_scale=1.0)
>>> t["ranks"][0]["ops"]
[['s', 'k1.0', 0], ['r', 'k0.1'], ['t0'], ['c', 0.5], ['p', 1], ['s', 'a1.7', 1000], ['r', 'a0.7'], ['c', 0.1], ['e']]
>>> t["ranks"][0]["mailboxes"], t["compute_s"]
(['a0.7', 'k0.1'], [0.6, 0.6])
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from clusterlab.errors import ConfigError

COMPUTE = ("wall", "cpu")  # ``spin`` loads this machine's cores: a simulated host has its own


def spec_bytes(spec: list) -> int:
    """Payload bytes of a recorded payload shape (``trace.payload_spec``).

    >>> spec_bytes(["array", "<i8", [3, 2]]), spec_bytes(["bytes", 10]), spec_bytes(["none"])
    (48, 10, 0)
    """
    if spec[0] == "none":
        return 0
    if spec[0] == "array":
        return int(np.dtype(spec[1]).itemsize * math.prod(spec[2]))
    return int(spec[1])


# --- collectives as point-to-point messages -------------------------------------------------
# Each pattern fills ``ops[r]`` (rank r's list) with ("s", dst, bytes) and ("r", src) in the
# order the mesh's algorithm runs them (comm/collectives/<op>_<name>.py); sizes[r] is rank r's
# payload bytes, root the root rank.

def _barrier_central(ops, n, sizes, root):
    for r in range(1, n):
        ops[r] += [("s", 0, 0), ("r", 0)]
    ops[0] += [("r", r) for r in range(1, n)] + [("s", r, 0) for r in range(1, n)]


def _barrier_dissemination(ops, n, sizes, root):
    d = 1
    while d < n:
        for r in range(n):
            ops[r] += [("s", (r + d) % n, 0), ("r", (r - d) % n)]
        d <<= 1


def _bcast_flat(ops, n, sizes, root):
    for r in range(n):
        ops[r] += [("s", x, sizes[root]) for x in range(n) if x != root] if r == root else [("r", root)]


def _bcast_binomial(ops, n, sizes, root):
    for r in range(n):
        vr, mask = (r - root) % n, 1
        while mask < n:
            if vr & mask:
                ops[r].append(("r", (r - mask) % n))
                break
            mask <<= 1
        mask >>= 1
        while mask > 0:
            if vr + mask < n:
                ops[r].append(("s", (r + mask) % n, sizes[root]))
            mask >>= 1


def _gather_linear(ops, n, sizes, root):
    for r in range(n):
        ops[r] += [("r", x) for x in range(n) if x != root] if r == root else [("s", root, sizes[r])]


def _reduce_binomial(ops, n, sizes, root):
    for r in range(n):
        vr, mask = (r - root) % n, 1
        while mask < n:
            if vr & mask:
                ops[r].append(("s", (r - mask) % n, sizes[r]))
                break
            if vr + mask < n:
                ops[r].append(("r", (r + mask) % n))
            mask <<= 1


def _allreduce_reduce_bcast(ops, n, sizes, root):
    _reduce_binomial(ops, n, sizes, 0)
    _bcast_binomial(ops, n, sizes, 0)


def _allgather_recursive_doubling(ops, n, sizes, root):
    p = 1 << (n.bit_length() - 1)
    held = {r: {r} for r in range(p)}
    for r in range(p, n):  # the ranks past the largest power of two hand their block in first
        ops[r].append(("s", r - p, sizes[r]))
        ops[r - p].append(("r", r))
        held[r - p].add(r)
    mask = 1
    while mask < p:
        new = {}
        for r in range(p):
            partner = r ^ mask
            ops[r] += [("s", partner, sum(sizes[i] for i in held[r]) + 4 * len(held[r])), ("r", partner)]
            new[r] = held[r] | held[partner]
        held = new
        mask <<= 1
    for r in range(p, n):
        ops[r - p].append(("s", r, sum(sizes)))
        ops[r].append(("r", r - p))


def _allgather_ring(ops, n, sizes, root):
    for r in range(n):
        for s in range(n - 1):
            ops[r] += [("s", (r + 1) % n, sizes[(r - s) % n]), ("r", (r - 1) % n)]


def _allreduce_allgather(ops, n, sizes, root):
    _allgather_recursive_doubling(ops, n, sizes, root)


def _allreduce_reduce_scatter_allgather(ops, n, sizes, root, item=1):
    # comm/collectives/_reduce_scatter.py: piece d of the array to rank d (shifted order), the
    # pieces from every rank in rank order; then a ring allgather of the reduced pieces
    q, extra = divmod(sizes[0] // item, n)
    piece = [(q + (1 if i < extra else 0)) * item for i in range(n)]
    for r in range(n):
        ops[r] += [("s", (r + k) % n, piece[(r + k) % n]) for k in range(1, n)]
        ops[r] += [("r", j) for j in range(n) if j != r]
    _allgather_ring(ops, n, piece, root)


def _alltoall_all_at_once(ops, n, sizes, root):
    # sizes[r] is rank r's list of chunk sizes here
    for r in range(n):
        ops[r] += [("s", (r + k) % n, sizes[r][(r + k) % n]) for k in range(1, n)]
        ops[r] += [("r", (r - k) % n) for k in range(1, n)]


PATTERNS = {
    ("barrier", "central"): _barrier_central, ("barrier", "dissemination"): _barrier_dissemination,
    ("bcast", "flat"): _bcast_flat, ("bcast", "binomial"): _bcast_binomial,
    ("gather", "linear"): _gather_linear, ("reduce", "binomial"): _reduce_binomial,
    ("allreduce", "reduce_bcast"): _allreduce_reduce_bcast, ("allreduce", "allgather"): _allreduce_allgather,
    ("allreduce", "reduce_scatter_allgather"): _allreduce_reduce_scatter_allgather,
    ("allgather", "recursive_doubling"): _allgather_recursive_doubling, ("allgather", "ring"): _allgather_ring,
    ("alltoall", "all_at_once"): _alltoall_all_at_once,
}
# What stands in for a pick without a pattern here (counted in ``substituted``).
FALLBACK = {"barrier": "dissemination", "bcast": "binomial", "gather": "linear", "reduce": "binomial",
            "allreduce": "reduce_scatter_allgather", "allgather": "recursive_doubling", "alltoall": "all_at_once"}
# Where each collective's recorded event keeps its payload and root (trace._CALL_FIELDS).
_COLLECTIVES = {"barrier", "bcast", "gather", "allgather", "alltoall", "allreduce", "reduce"}


# The collectives whose algorithm sends a broadcast round's burst into every rank (op.algorithm)
# -> the block each of the n - 1 senders sends into one receiver, from the largest payload m.
BURSTS = {"allreduce.reduce_scatter_allgather": lambda m, n: -(-m // n),  # the direct reduce-scatter's piece
          "alltoall.all_at_once": lambda m, n: m, "gather.linear": lambda m, n: m}


def _burst(name: str, events: list, n: int) -> tuple[int, int] | None:
    """(senders into each receiver, block bytes) of a collective with a burst's shape, else None.

    >>> _burst("allreduce.reduce_scatter_allgather", [["allreduce", ["array", "<u4", [1000]], "sum"]] * 4, 4)
    (3, 1000)
    >>> _burst("allgather.ring", [["allgather", ["bytes", 10]]] * 4, 4) is None
    True
    """
    if name not in BURSTS:
        return None
    if events[0][0] == "alltoall":
        m = max(spec_bytes(s) for e in events for s in e[1])
    else:
        m = max(spec_bytes(e[1]) for e in events)
    size = int(BURSTS[name](m, n))
    return (n - 1, size) if size > 0 else None


def _collective(events: list, n: int, model) -> tuple[str, list, Counter]:
    """The k-th collective of every rank (``events[r]``) as each rank's point-to-point ops."""
    op = events[0][0]
    if any(e[0] != op for e in events):
        raise ConfigError(f"a recorded collective differs between ranks ({sorted({e[0] for e in events})}): "
                          "not a trace of one job")
    if op == "alltoall":
        sizes = [[spec_bytes(s) for s in e[1]] for e in events]
        m = max(max(s) for s in sizes)
    elif op == "barrier":
        sizes, m = [0] * n, 0
    else:
        sizes = [spec_bytes(e[1]) for e in events]
        m = max(sizes)
    root = {"bcast": 2, "gather": 2, "reduce": 3}.get(op)
    root = int(events[0][root]) if root is not None else 0
    exact = op in ("reduce", "allreduce") and events[0][1][0] == "array" and \
        np.dtype(events[0][1][1]).kind in "fc" and events[0][2] == "sum"
    name = model.pick(op, m, n, exact=exact) if n > 1 else FALLBACK[op]
    substituted = Counter()
    if (op, name) not in PATTERNS:
        substituted[f"{op}.{name} as {op}.{FALLBACK[op]}"] += 1
        name = FALLBACK[op]
    ops: list = [[] for _ in range(n)]
    if n > 1 and name == "reduce_scatter_allgather":  # split in whole elements, as the mesh does
        PATTERNS[op, name](ops, n, sizes, root, item=np.dtype(events[0][1][1]).itemsize)
    elif n > 1:
        PATTERNS[op, name](ops, n, sizes, root)
    return f"{op}.{name}", ops, substituted


def _opening_barrier(n: int) -> list:
    ops: list = [[] for _ in range(n)]
    if n > 1:  # replay_rank's comm.barrier() before its clock starts (the mesh's pick: any barrier will do)
        _barrier_dissemination(ops, n, None, 0)
    return ops


def translate(directory, compute: str = "cpu", scale: float = 1.0, runtime_scale: float | None = None,
              model=None, exchange_loss=None) -> dict:
    """The engine's ``replay`` job for the recording in ``directory``: ``{"ranks": [{"ops",
    "mailboxes"}], "compute_s": [per rank], "collectives": {op.algorithm: count},
    "substituted": {...}, "messages": total, "loss": [...]}``. ``model``: the cost model that
    picks the collectives' algorithms (None: the mesh's current one). ``exchange_loss``: the loss
    model's price of an all-at-once exchange (see the module's docstring); ``loss`` lists each
    priced collective (its index, algorithm, senders into each rank, block size, wait and
    timeouts added)."""
    from clusterlab.comm import costmodel
    from clusterlab.mining.parallel.trace import load_trace, recorded_size

    if compute not in COMPUTE:
        raise ConfigError(f"a simulated replay pays computation as {' or '.join(COMPUTE)} seconds, not {compute!r} "
                          "(spin burns this machine's cores; a simulated host has its own)")
    runtime_scale = scale if runtime_scale is None else runtime_scale
    for name, v in (("scale", scale), ("runtime_scale", runtime_scale)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ConfigError(f"{name} must be a finite number >= 0, got {v!r}")
    model = model or costmodel.current()
    n = recorded_size(directory)
    traces = [load_trace(directory, r)["events"] for r in range(n)]
    col = 1 if compute == "wall" else 2
    # which tags each rank takes from any sender (recv_any) and which from one (recv)
    any_tags = [{e[1] for e in ev if e[0] == "recv_any"} for ev in traces]
    for r, ev in enumerate(traces):
        both = any_tags[r] & {e[2] for e in ev if e[0] == "recv"}
        if both:
            raise ConfigError(f"{directory}: rank {r} receives tag {min(both)} both from any sender and from one; "
                              "the simulated replay matches a tag one way")
    colls = [[e for e in ev if e[0] in _COLLECTIVES] for ev in traces]
    if len({len(c) for c in colls}) > 1:
        raise ConfigError(f"{directory}: the ranks recorded different numbers of collectives: not a trace of one job")
    coll_ops, used, substituted, waits, loss = [], Counter(), Counter(), [], []
    for k in range(len(colls[0])):
        name, ops, sub = _collective([c[k] for c in colls], n, model)
        coll_ops.append(ops)
        used[name] += 1
        substituted += sub
        burst = _burst(name, [c[k] for c in colls], n) if exchange_loss is not None and n > 1 else None
        wait = timeouts = 0.0
        if burst is not None:
            wait, timeouts = exchange_loss(burst[0] + 1, burst[1])
            loss.append({"collective": k, "algorithm": name, "senders": burst[0], "size": burst[1],
                         "rto_wait_s": wait, "timeouts": timeouts})
        waits.append((wait, timeouts))

    def coll(r, ops, out, k=None):
        for o in ops:
            out.append(["s", f"k{o[1]}.{r}", o[2]] if o[0] == "s" else ["r", f"k{r}.{o[1]}"])
        if k is not None and (waits[k][0] > 0 or waits[k][1] > 0):
            out.append(["w", waits[k][0], waits[k][1] / n])

    ranks, compute_s, sends, recvs = [], [], Counter(), Counter()
    opening = _opening_barrier(n)
    for r, ev in enumerate(traces):
        out: list = []
        coll(r, opening[r], out)
        out.append(["t0"])
        k, owed, total = 0, 0.0, 0.0
        for e in ev:
            kind = e[0]
            if kind == "gap":
                rt = min(e[3], e[col]) if len(e) > 3 else 0.0
                owed += (e[col] - rt) * scale + rt * runtime_scale
                continue
            if owed > 0:  # consecutive gaps are one sleep
                out.append(["c", owed])
                total += owed
                owed = 0.0
            if kind == "pass":
                out.append(["p", int(e[1])])
            elif kind == "end":
                out.append(["e"])
            elif kind == "send":
                dst, tag = int(e[1]), int(e[2])
                out.append(["s", f"a{dst}.{tag}" if tag in any_tags[dst] else f"m{dst}.{r}.{tag}", spec_bytes(e[3])])
            elif kind == "recv":
                out.append(["r", f"m{r}.{int(e[1])}.{int(e[2])}"])
            elif kind == "recv_any":
                if e[2]:  # a poll that found nothing is replayed as nothing (as replay_rank does)
                    out.append(["r", f"a{r}.{int(e[1])}"])
            elif kind in _COLLECTIVES:
                coll(r, coll_ops[k][r], out, k)
                k += 1
            else:
                raise ConfigError(f"{directory}: unknown event {kind!r} in rank {r}'s trace")
        if owed > 0:
            out.append(["c", owed])
            total += owed
        for o in out:
            if o[0] == "s":
                sends[o[1]] += 1
            elif o[0] == "r":
                recvs[o[1]] += 1
        ranks.append({"ops": out, "mailboxes": sorted({o[1] for o in out if o[0] == "r"})})
        compute_s.append(round(total, 12))
    short = sorted(m for m in recvs if recvs[m] > sends[m])
    if short:  # a receive nothing answers would hang the simulated rank
        raise ConfigError(f"{directory}: {len(short)} mailboxes receive more messages than are sent to them "
                          f"(first: {short[0]}, {recvs[short[0]]} received, {sends[short[0]]} sent): the trace is "
                          "incomplete or not of one job")
    return {"ranks": ranks, "compute_s": compute_s, "collectives": dict(used), "substituted": dict(substituted),
            "messages": sum(sends.values()), "loss": loss}

