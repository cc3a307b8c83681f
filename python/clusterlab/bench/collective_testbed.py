"""Seed 002's collective timings on a namespace testbed, with the cost model beside them.

``fit_model(tb)`` fits the cost model *on the testbed's links*: a ping-pong between hosts 0 and
1 (alpha, beta, per-message overhead) and the time to open and authenticate one connection
across the switch (``setup``), with ``concurrency=0`` (every host has its own link and the
switch is non-blocking), and the CPU time per message and per byte of the machine the hosts
share (``cpu_pingpong``: the model prices every step's messages on the shared CPUs). ``measure(tb, op, sizes, mode, model)`` runs the OSU-style collective
benchmark (``bench.collective.run``) on every host with the persistent mesh or per-call
connections, and each row carries the model's prediction for that mode. ``relative_error``
is measured / predicted - 1 per row.

Example (needs root)::

    from clusterlab.cluster.testbed import StarTopo, TestbedNetwork
    with TestbedNetwork(StarTopo(hosts=6, rate="155Mbit", mtu=9180)) as tb:
        model = fit_model(tb)
        rows = measure(tb, "bcast", [65536, 1 << 20], "per_call", model)
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import statistics
import tempfile
import time

import numpy as np

from clusterlab.comm import costmodel
from clusterlab.errors import ConfigError

MODES = ("persistent", "per_call")
CPU_SIZES = (1, 16, 64, 4096, 65536, 262144, 1 << 20)  # the CPU ping-pong's sizes (1..64 B: per message)


def _my_address() -> str:
    from clusterlab.rendezvous import address, contract

    return os.environ.get(contract.ENV_BIND) or address.choose()


def setup_times(comm, count: int = 20) -> list[float] | None:
    """Rank 0 opens ``count`` connections to rank 1 across the network and runs the mesh's
    authentication handshake on each; rank 0 returns the seconds per connection."""
    from clusterlab.bench.setup import serve_handshakes, time_handshakes

    if comm.rank > 1:
        comm.barrier()
        return None
    secret = comm.bcast(os.urandom(32) if comm.rank == 0 else None, root=0, algorithm="binomial")
    if comm.rank == 1:
        lsock = socket.create_server((_my_address(), 0))
        lsock.settimeout(30)
        comm.send(0, json.dumps([_my_address(), lsock.getsockname()[1]]).encode(), 7)
        try:
            serve_handshakes(lsock, secret, count)
        finally:
            lsock.close()
        comm.barrier()
        return None
    host, port = json.loads(comm.recv(1, 7))
    out = time_handshakes(host, port, secret, count)
    comm.barrier()
    return out


def two_region_fit(rows: list[dict], small: int = 64, large: int = 65536) -> tuple[float, float]:
    """(alpha, beta) of a shaped link: alpha the median half round trip of messages up to
    ``small`` bytes, beta the least-squares slope of the rest of the time over messages of at
    least ``large`` bytes. (``costmodel.fit`` minimises the relative error over every size, which
    on a tc-shaped link under load lets the noisy middle sizes pull beta to twice the line rate.)

    >>> rows = [{"bytes": b, "usec": 50 + b * 0.05} for b in (1, 8, 64, 65536, 1 << 20)]
    >>> a, b = two_region_fit(rows)
    >>> round(a * 1e6), round(b * 1e9, 3)
    (50, 50.0)
    """
    smalls = [float(r["usec"]) * 1e-6 for r in rows if r["bytes"] <= small]
    bigs = [(float(r["bytes"]), float(r["usec"]) * 1e-6) for r in rows if r["bytes"] >= large]
    if not smalls or len(bigs) < 1:
        raise ConfigError(f"the fit needs ping-pong rows up to {small} bytes and from {large} bytes")
    alpha = float(statistics.median(smalls))
    beta = sum(m * (t - alpha) for m, t in bigs) / sum(m * m for m, _ in bigs)
    return alpha, max(beta, 0.0)


def busy_cpu_seconds(stat: str | None = None) -> float:
    """CPU seconds this machine has spent busy at nice 0 or below since boot, from ``/proc/stat``:
    user + system + irq + softirq + steal (niced jobs, idle and I/O wait excluded, so other
    helpers' niced builds do not count).

    >>> busy_cpu_seconds("cpu  100 900 50 1000 7 3 2 0 0 0\\n") * os.sysconf("SC_CLK_TCK")
    155.0
    """
    if stat is None:
        with open("/proc/stat") as f:
            stat = f.readline()
    v = [int(x) for x in stat.split()[1:9]]
    user, _nice, system, _idle, _iowait, irq, softirq, steal = v
    return (user + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def cpu_pingpong(comm, sizes: list[int], seconds: float = 0.4, pairs: int = 1) -> list[dict] | None:
    """The CPU time per message when ``pairs`` ping-pongs run at once: rank 2i ping-pongs with
    rank 2i + 1 (i < ``pairs``), every pair the same number of round trips per size (about
    ``seconds`` for the first pair), and the CPU time all those rank processes used meanwhile
    (all their threads, and the kernel's network work done in their context:
    ``time.process_time``) is divided by the messages sent. With one pair that is a message's
    own cost; with as many ranks as hosts it includes what ranks sharing the CPUs pay each other
    (context switches, caches). Rank 0 returns rows ``bytes``, ``usec`` (CPU microseconds per
    message), ``machine_usec`` (the same from the whole machine's busy time,
    ``busy_cpu_seconds``, which other jobs' network interrupts inflate), ``wall_usec`` (half a
    round trip of pair 0), ``messages`` (all pairs), ``pairs``; the others None."""
    import struct

    pairs = max(1, min(int(pairs), comm.size // 2))
    me = comm.rank
    active = me < 2 * pairs
    peer = me + 1 if me % 2 == 0 else me - 1
    rows = []
    for nb in sizes:
        buf = np.zeros(nb, dtype=np.uint8)
        if me == 0:
            t0 = time.perf_counter()
            comm.send(1, buf, 12)  # how long one round trip takes alone, to size the run
            comm.recv(1, 12)
            reps = max(5, int(seconds / max(time.perf_counter() - t0, 1e-6)))
        elif me == 1:
            comm.send(0, comm.recv(0, 12), 12)
        reps = struct.unpack("<Q", comm.bcast(struct.pack("<Q", reps) if me == 0 else None, root=0))[0]
        if active and me % 2 == 0:  # warm-up
            comm.send(peer, buf, 12)
            comm.recv(peer, 12)
        elif active:
            comm.send(peer, comm.recv(peer, 12), 12)
        comm.barrier()
        busy0, cpu0, t0 = busy_cpu_seconds(), time.process_time(), time.perf_counter()
        if active and me % 2 == 0:
            for _ in range(reps):
                comm.send(peer, buf, 12)
                comm.recv(peer, 12)
        elif active:
            for _ in range(reps):
                comm.send(peer, comm.recv(peer, 12), 12)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        cpus = comm.gather(np.array([cpu if active else 0.0]), root=0)
        busy = busy_cpu_seconds() - busy0
        if me == 0:
            total = float(sum(float(np.asarray(c).ravel()[0]) for c in cpus))
            msgs = 2 * reps * pairs
            rows.append({"bytes": nb, "usec": total / msgs * 1e6, "machine_usec": busy / msgs * 1e6,
                         "wall_usec": wall / (2 * reps) * 1e6, "messages": msgs, "pairs": pairs})
    return rows if me == 0 else None


def barrier_exits(comm, count: int = 100, nbytes: int = 1) -> dict | None:
    """How late the ranks leave a barrier, as the OSU-style benchmark times it: ``count`` times a
    dissemination barrier, each rank reads CLOCK_MONOTONIC as it leaves (the testbed's hosts
    share one machine, so their clocks are one clock), then a ``nbytes`` bcast from rank 0 (the
    model's pick; the "empty call" between barriers). Rank 0 returns ``exits`` (per barrier,
    each rank's exit minus the earliest rank's, seconds) and ``calls`` (per barrier, the slowest
    rank's time of the empty call from its own exit) and ``announce`` (seconds per call of a flat
    1-byte bcast, ``count`` calls back to back: the root's word of its pick to every rank, which
    an automatic bcast or scatter sends before the algorithm); the others None."""
    from clusterlab.comm import collectives

    data = np.zeros(nbytes, dtype=np.uint8)
    kw = {"data": data if comm.rank == 0 else None, "root": 0}
    for _ in range(3):  # warm-up: connections, caches
        comm.barrier("dissemination")
        collectives.run("bcast", comm, None, **kw)
    exits, ends = np.empty(count), np.empty(count)
    for i in range(count):
        comm.barrier("dissemination")
        exits[i] = time.clock_gettime(time.CLOCK_MONOTONIC)
        collectives.run("bcast", comm, None, **kw)
        ends[i] = time.clock_gettime(time.CLOCK_MONOTONIC)
    byte = np.zeros(1, dtype=np.uint8) if comm.rank == 0 else None
    collectives.run("bcast", comm, "flat", data=byte, root=0)
    comm.barrier("dissemination")
    t0 = time.clock_gettime(time.CLOCK_MONOTONIC)
    for _ in range(count):  # the root's announcement alone: one byte to every rank, back to back
        collectives.run("bcast", comm, "flat", data=byte, root=0)
    flat = time.clock_gettime(time.CLOCK_MONOTONIC) - t0
    got = comm.gather(np.concatenate([exits, ends, [flat]]), 0, "linear")
    if comm.rank:
        return None
    g = np.stack([np.asarray(x, dtype=float) for x in got])  # ranks x (2 count + 1)
    e, t = g[:, :count], g[:, count:2 * count]
    return {"exits": (e - e.min(axis=0)).T.tolist(), "calls": (t - e).max(axis=0).tolist(),
            "announce": float(g[:, -1].max()) / count}


def root_lateness(exits: list[list[float]], root: int = 0) -> float:
    """The median over barriers of how much later the root left a barrier than the earliest rank
    (seconds): what a call timed from its barrier pays before the root's data can leave, on the
    clock of a rank that left first and waits for it.

    >>> root_lateness([[0.0, 1e-3, 2e-3], [3e-3, 0.0, 1e-3], [1e-3, 0.0, 0.0]])
    0.001
    """
    return float(statistics.median(row[root] for row in exits))


def per_call_overhead(comm, calls: int = 20) -> float:
    """Seconds per call this rank spent setting up and releasing its per-call connections over
    ``calls`` barriers (the communicator must be a per-call one)."""
    for _ in range(calls):
        comm.barrier()
    st = comm.stats()
    return (st["setup_seconds"] + st["teardown_seconds"]) / max(1, st["calls"])


LINUX_INITCWND = 10  # segments: TCP's initial congestion window on Linux (RFC 6928) unless a route sets one
LATENESS_HOSTS = (2, 4, 8, 16)  # host counts of the barrier-exit calibration (and the testbed's own)


def initial_window(tb) -> int:
    """Bytes TCP sends on a fresh connection of ``tb`` before its first acknowledgement: the
    initial window (the testbed's ``initcwnd`` route attribute, else Linux's 10 segments) times
    the segment size (MTU - 40 bytes of IPv4/TCP headers - 12 of timestamps)."""
    segments = getattr(getattr(tb, "transport", None), "initcwnd", None) or LINUX_INITCWND
    return int(segments) * (int(tb.topo.mtu) - 52)


def fit_model(tb, sizes: tuple[int, int] = (1, 1 << 20), trial_time: float = 0.02,
              calibrate_hosts: int | None = 8,
              cpu_sizes: tuple[int, ...] | None = None,
              lateness_hosts: tuple[int, ...] | None = LATENESS_HOSTS) -> costmodel.CostModel:
    """The cost model of ``tb``'s links (ping-pong between hosts 0 and 1, set-up across the switch).

    ``window`` is TCP's initial window at the testbed's MTU (``initial_window``: nothing
    measured). With ``lateness_hosts``, ``start_lateness`` is how late the root leaves a barrier
    at each of those host counts (and the testbed's own), from 100 barriers each with an empty
    (1-byte) bcast between them (``barrier_exits``, ``root_lateness``): what a call timed from
    its own barrier pays beside the call (``CostModel.predict_from_barrier``); ``announce`` is a
    flat 1-byte bcast's time per call there (the root's word of its pick, ``announced``). None
    of them looks at the collectives the model is judged on.

    The testbed's hosts share this machine's CPUs, so a per-call mesh's set-ups queue for them:
    with ``calibrate_hosts`` = k, ``setup`` is fitted from the set-up and release time of a
    per-call mesh of k hosts (the slowest rank's, per call, over 20 barriers) as k(k-1)/2
    set-ups over the CPU count (``setup_cpus``), and ``call_setup`` is what an empty (1-byte)
    per-call call at 2 hosts, timed from its barrier (``barrier_exits``' ``calls``, median of 20),
    costs beyond a persistent one and that one connection (``fixed_per_call``); otherwise
    ``setup`` is one connection's set-up measured alone.

    The hosts' messages share the CPUs too: with ``cpu_sizes``, ``cpu_message`` and ``cpu_byte``
    are fitted (``two_region_fit``) to the busy CPU time per message of a ping-pong between
    hosts 0 and 1 at those sizes (``cpu_pingpong``), and ``cpus`` is the CPU count, so the
    model prices a step of many simultaneous messages (``CostModel.cpu_step``). Off by default:
    measured on 16 hosts (bench/results/seed002_cpu_model.json) the fitted CPU cost per byte made
    the model pick a binomial bcast that ran 2.7x slower than the scatter-allgather it replaced."""
    from clusterlab.bench import pingpong as pp
    from clusterlab.comm.tcp.mesh import CONNECTIONS_ENV

    cal = tb.run(pp.calibrate, 2, pp.sizes(*sizes), trial_time, timeout=600)[0]
    setup = tb.run(setup_times, 2, timeout=120)[0]
    m = costmodel.fit(cal["rows"], setup_times=setup, source=f"testbed {tb.topo.rate} {tb.topo.hosts} hosts",
                      concurrency=0.0, overhead=cal["overhead"])
    alpha, beta = two_region_fit(cal["rows"])
    m = dataclasses.replace(m, alpha=alpha, beta=beta)
    m.details["setup_samples"] = len(setup)
    m.details["setup_stdev"] = statistics.pstdev(setup)
    m.details["setup_alone"] = m.setup
    if cpu_sizes:
        cpu_rows = tb.run(cpu_pingpong, 2, list(cpu_sizes), timeout=300)[0]
        cpu_message, cpu_byte = two_region_fit(cpu_rows, large=max(cpu_sizes) // 16)
        m = dataclasses.replace(m, cpus=float(os.cpu_count() or 1), cpu_message=cpu_message, cpu_byte=cpu_byte)
        m.details["cpu_pingpong"] = [{k: round(v, 2) if isinstance(v, float) else v for k, v in r.items()}
                                     for r in cpu_rows]
    m = dataclasses.replace(m, window=float(initial_window(tb)))
    hosts = len(tb.placement())
    if lateness_hosts:
        late, spans, word = {}, {}, {}
        for n in sorted({h for h in lateness_hosts if 2 <= h <= hosts} | {hosts}):
            got = tb.run(barrier_exits, n, 100, timeout=300)[0]
            late[str(n)] = root_lateness(got["exits"])
            spans[str(n)] = float(statistics.median(max(row) for row in got["exits"]))
            word[str(n)] = got["announce"]
        m = dataclasses.replace(m, start_lateness=late, announce=word)
        m.details["barrier_exit_span"] = spans
    k = min(calibrate_hosts or 0, hosts)
    if k >= 3:
        cpus = float(os.cpu_count() or 1)
        env = dict(os.environ, **{CONNECTIONS_ENV: "per_call"})
        per_call = max(tb.run(per_call_overhead, k, 20, timeout=300, env=env))
        m = dataclasses.replace(m, setup=per_call * cpus / (k * (k - 1) / 2), setup_cpus=cpus)
        # the fixed part: what a per-call call of one byte costs at 2 hosts beyond a persistent one and
        # its one connection's set-up and release (starting the call's communicator, saying goodbye)
        # (each call from its own barrier: back to back, a per-call rank opens the next call's
        # connections while the last one runs, and the fixed part hides)
        alone = dict(os.environ, **{CONNECTIONS_ENV: "persistent"})
        two_per_call = statistics.median(tb.run(barrier_exits, 2, 20, timeout=300, env=env)[0]["calls"])
        two_persistent = statistics.median(tb.run(barrier_exits, 2, 20, timeout=300, env=alone)[0]["calls"])
        m = dataclasses.replace(m, call_setup=fixed_per_call(two_per_call, two_persistent, m))
        m.details.update({"setup_calibrated_hosts": k, "per_call_overhead": per_call,
                          "empty_call_2_hosts": {"per_call": two_per_call, "persistent": two_persistent}})
    return m


def fixed_per_call(per_call: float, persistent: float, model: costmodel.CostModel) -> float:
    """``call_setup``: seconds an empty per-call call at 2 hosts costs beyond a persistent one and
    beyond ``model``'s set-up of its one connection (never below 0).

    >>> fixed_per_call(6e-3, 1e-3, costmodel.CostModel(setup=1.5e-3, setup_cpus=2))
    0.0035
    """
    one = dataclasses.replace(model, call_setup=0.0).setup_time(2)
    return round(max(0.0, per_call - persistent - one), 12)


def announced(model: costmodel.CostModel, op: str, label: str, n: int) -> bool:
    """Whether the benchmark's call labelled ``label`` (``auto:NAME``: the model's pick) sent the
    root's 1-byte word of its pick to every rank before the algorithm: bcast and scatter when the
    pick depends on the size and is not the direct one (``clusterlab.comm.collectives``).

    >>> m = costmodel.CostModel(alpha=30e-6, beta=5e-8, overhead=3e-6, concurrency=0)
    >>> announced(m, "bcast", "auto:scatter_allgather", 16), announced(m, "bcast", "binomial", 16)
    (True, False)
    """
    from clusterlab.comm import collectives

    return label.startswith("auto:") and collectives.announces(model, op, label.removeprefix("auto:"), n)


def measure(tb, op: str, sizes: list[int], mode: str, model: costmodel.CostModel, nranks: int | None = None,
            time_per_size: float = 0.5, algorithm: str | None = None) -> list[dict]:
    """``bench.collective.run`` on the testbed's hosts in connection ``mode`` under ``model``,
    with ``algorithm`` by name (None: the model's pick, ``auto:NAME``). Each
    call is timed from its own barrier, so ``predicted_us`` is ``CostModel.predict_from_barrier``'s
    plus, for an ``announced`` pick, ``announce_time`` (``predicted_call_us``: without the
    barrier's term, what back-to-back calls pay)."""
    from clusterlab.bench.collective import run as bench_run
    from clusterlab.comm.tcp.mesh import CONNECTIONS_ENV

    if mode not in MODES:
        raise ConfigError(f"connection mode must be one of {', '.join(MODES)}, got {mode!r}")
    with tempfile.TemporaryDirectory(prefix="clab-model-") as d:
        path = os.path.join(d, "model.json")
        model.save(path)
        env = dict(os.environ, CLUSTERLAB_COSTMODEL=path, **{CONNECTIONS_ENV: mode})
        rows = tb.run(bench_run, nranks, op, sizes, algorithm, None, None, time_per_size, timeout=900, env=env)[0]
    n = nranks or len(tb.placement())
    linked = dataclasses.replace(model, cpus=0.0)  # the same model without the shared CPUs' step term
    late = model.barrier_lateness(n)  # every call is timed from its own barrier: the root leaves it late
    for r in rows:
        word = model.announce_time(n) if announced(model, op, r["algorithm"], n) else 0.0
        r["predicted_call_us"] = r["predicted_us"] + word * 1e6
        r["predicted_us"] = r["predicted_call_us"] + late * 1e6
        algorithm = str(r.get("algorithm", "")).removeprefix("auto:")
        if algorithm and model.cpus > 0:
            t = (linked.predict_mode(op, algorithm, r["bytes"], n, "per_call") if mode == "per_call"
                 else linked.predict(op, algorithm, r["bytes"], n))
            r["predicted_links_only_us"] = (t + word + late) * 1e6
        r.update({"op": op, "hosts": n, "connections": mode,
                  "relative_error": r["p50_us"] / r["predicted_us"] - 1 if r["predicted_us"] > 0 else None})
    return rows


def batched(comm, op: str, sizes: list[int], time_per_size: float = 0.3) -> list[dict] | None:
    """Calls of ``op`` back to back between two barriers, per size (about ``time_per_size``
    seconds): rank 0 returns rows ``bytes``, ``batched_us`` (the slowest rank's time over the
    calls / calls), ``calls``, ``algorithm``. Unlike ``bench.collective.run``, whose every call
    starts at a barrier and whose p50 is the slowest rank's time of a call, no rank's time
    includes how late the others left a barrier (milliseconds when 16 hosts share 2 CPUs)."""
    from clusterlab.bench.collective import _label, make_args
    from clusterlab.comm import collectives

    model = costmodel.current()
    rows = []
    for m in sizes:
        kw = make_args(op, m, comm.rank, comm.size)
        name, label = _label(op, None, m, comm.size, model)
        comm.barrier("dissemination")
        t0 = time.perf_counter()
        for _ in range(2):  # warm-up, and how long a call takes
            collectives.run(op, comm, None, **kw)
        per_call = (time.perf_counter() - t0) / 2
        want = np.array([max(3, min(500, int(time_per_size / max(per_call, 1e-6))))], dtype=np.int64)
        calls = int(comm.bcast(want if comm.rank == 0 else None, 0, "binomial")[0])
        comm.barrier("dissemination")
        t0 = time.perf_counter()
        for _ in range(calls):
            collectives.run(op, comm, None, **kw)
        mine = time.perf_counter() - t0
        every = comm.gather(np.array([mine]), 0, "linear")
        if comm.rank == 0:
            rows.append({"bytes": m, "batched_us": max(float(np.asarray(e).ravel()[0]) for e in every) / calls * 1e6,
                         "calls": calls, "algorithm": label})
    return rows if comm.rank == 0 else None


def measure_batched(tb, op: str, sizes: list[int], mode: str, model: costmodel.CostModel, nranks: int | None = None,
                    time_per_size: float = 0.3) -> list[dict]:
    """``batched`` on the testbed's hosts in connection ``mode`` under ``model``, each row with
    the model's prediction (with ``announce_time`` for an ``announced`` pick) and
    ``batched_error`` (measured / predicted - 1)."""
    from clusterlab.bench.collective import _predict
    from clusterlab.comm.tcp.mesh import CONNECTIONS_ENV

    if mode not in MODES:
        raise ConfigError(f"connection mode must be one of {', '.join(MODES)}, got {mode!r}")
    n = nranks or len(tb.placement())
    with tempfile.TemporaryDirectory(prefix="clab-model-") as d:
        path = os.path.join(d, "model.json")
        model.save(path)
        env = dict(os.environ, CLUSTERLAB_COSTMODEL=path, **{CONNECTIONS_ENV: mode})
        rows = tb.run(batched, nranks, op, sizes, time_per_size, timeout=900, env=env)[0]
    for r in rows:
        word = model.announce_time(n) if announced(model, op, r["algorithm"], n) else 0.0
        pred = (_predict(model, op, r["algorithm"].removeprefix("auto:"), r["bytes"], n, mode) + word) * 1e6
        r.update({"op": op, "hosts": n, "connections": mode, "predicted_us": pred,
                  "batched_error": r["batched_us"] / pred - 1 if pred > 0 else None})
    return rows


def _context_switches() -> int:
    with open("/proc/self/status") as f:
        return sum(int(line.split(":")[1]) for line in f if "ctxt_switches" in line)


def in_situ(comm, op: str, m: int, algorithm: str, calls: int) -> dict | None:
    """Where a collective's time goes on shared CPUs: ``calls`` calls of ``op`` (bcast of ``m``
    bytes, allgather of ``m / n`` bytes per rank, or scatter of ``m / n`` bytes to each rank) with
    ``algorithm`` back to back after 3 warm-up calls. Rank 0 returns the wall time per call, the CPU time of all ranks per call
    and their context switches per call."""
    data = np.ones(m, dtype=np.uint8)

    def once():
        if op == "bcast":
            comm.bcast(data if comm.rank == 0 else None, root=0, algorithm=algorithm)
        elif op == "scatter":
            comm.scatter([data[: m // comm.size]] * comm.size if comm.rank == 0 else None, root=0,
                         algorithm=algorithm)
        else:
            comm.allgather(np.ones(m // comm.size, dtype=np.uint8), algorithm=algorithm)

    for _ in range(3):
        once()
    comm.barrier()
    c0, x0, t0 = time.process_time(), _context_switches(), time.perf_counter()
    for _ in range(calls):
        once()
    comm.barrier()
    wall = time.perf_counter() - t0
    got = comm.gather(np.array([time.process_time() - c0, _context_switches() - x0, wall]), root=0)
    if comm.rank:
        return None
    g = np.array([np.asarray(x).ravel() for x in got])
    return {"op": op, "m": m, "alg": algorithm, "n": comm.size, "wall_ms_per_call": g[0, 2] / calls * 1e3,
            "cpu_ms_per_call_all_ranks": g[:, 0].sum() / calls * 1e3, "ctx_per_call_all_ranks": g[:, 1].sum() / calls}


def median_abs_error(rows: list[dict]) -> float:
    """The median over rows of |measured / predicted - 1|."""
    errs = [abs(r["relative_error"]) for r in rows if r.get("relative_error") is not None]
    if not errs:
        raise ConfigError("no rows with a prediction")
    return float(statistics.median(errs))
