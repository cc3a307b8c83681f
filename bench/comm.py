#!/usr/bin/env python3
"""clusterlab's communication layer side by side with iperf3, NetPIPE (NPtcp) and MPICH.

Not a test: a measurement, run on this machine's loopback in one go:

1. point-to-point bandwidth for messages of 1 MiB and up: clusterlab's TCP mesh streaming
   messages one way (rank 0 -> 1) vs ``iperf3`` (one TCP stream, same loopback);
   target >= 0.95x iperf3;
2. 1-byte latency (half round trip): clusterlab ping-pong vs ``NPtcp``; target <= 1.2x NPtcp (issue 12),
   unpinned and with both pairs pinned to one CPU and to two (``latency_by_placement``: on a VM
   the placement moves both by about 20 us, more than either program does);
3. bcast, scatter and alltoall at 64 KiB and 1 MiB on 8 ranks (OSU-style average over ranks of
   the per-rank mean): clusterlab (the cost model's pick) vs MPICH through mpi4py; target
   <= 1.0x MPICH's time over TCP.

Which transport MPICH uses: the ``mpich`` wheel's only network module is UCX, so
``FI_PROVIDER`` (libfabric's) means nothing to it, and ``MPIR_CVAR_NOLOCAL=1`` alone only turns
off MPICH's own shared memory: UCX then still moves every message between ranks of one host
through its shared-memory and cross-memory-attach transports (``strace -f -c``: 3000
``process_vm_readv`` and 16 ``sendmsg`` for 25 alltoalls of 1 MiB, no TCP). MPICH runs three
ways (the cluster layer's ``MPICH_TRANSPORTS``, set by ``Mpirun(mpich=...)``): ``tcp``, over TCP on loopback (``MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self``;
``strace``: no ``process_vm_readv``, the data in ``sendmsg``/``recvfrom``), the target's
comparison; ``ucx_default`` (``MPIR_CVAR_NOLOCAL=1`` alone: UCX's single-copy shared memory, what
this script called "over TCP" before 2026-11-23 06:00 UTC); ``shm`` (MPICH's defaults).

Writes ``bench/results/comm.json`` (atomically) with every number, each ratio and whether its
target is met, and the bench harness's provenance (``clusterlab.bench.harness``: commit,
machine, load, spare CPU, autogroup). Needs ``iperf3`` and ``NPtcp`` (Debian: ``apt-get install -y iperf3
netpipe-tcp``; installed automatically when run as root) and ``mpi4py`` + ``mpich`` (the
``clusterlab[mpi]`` extra; ``.venv/bin/mpiexec``).

The collective comparison runs ``--runs`` times back to back (default 2), the sides interleaved
within each run (clusterlab, ``--baseline`` if given, MPICH over TCP, MPICH's UCX default);
``rows`` gives per (op, size) the algorithm, each side's time per run with min / median / max
over runs, the per-iteration distribution of every run (p50 and p99 of the slowest rank per
call, the spread over ranks) and the ratios per run with their min / median / max; the target
counts as met only when every run meets it. Each run also records the load and where the
machine's CPU went while each side ran (``cpu``: user, nice = other helpers' niced jobs, system,
idle). ``--baseline DIR`` times another checkout's collectives (its ``.venv/bin/clusterlab``, same
cost model) in the same runs: an A/B of two versions at the same load. ``--collectives-only``
skips the point-to-point anchors (then ``--model`` gives the cost model; default: the one the
last full run fitted, from ``-o``'s file). ``--every-algorithm`` also times each row with every
algorithm of its operation (``rows[i].every_algorithm``: us per run), to check the model's pick. ``--per-call`` adds bcast and scatter with connections
set up per call (seed 002).

Usage: ``.venv/bin/python bench/comm.py [--quick] [--runs 2] [--per-call] [-n 8] [-o bench/results/comm.json]
[--collectives-only [--model FILE]] [--baseline DIR] [--every-algorithm]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from clusterlab._atomic import atomic_open
from clusterlab.bench import collective as coll
from clusterlab.bench import harness
from clusterlab.bench import pingpong as pp
from clusterlab.bench.setup import connection_setup_times
from clusterlab.cluster import Local, Mpirun
from clusterlab.cluster.mpirun import MPICH_TRANSPORTS
from clusterlab.comm import costmodel

LOOPBACK = Local()  # clusterlab's ranks: local processes on the TCP mesh over loopback

HERE = Path(__file__).resolve().parent
TAG = 5
KIB, MIB = 1024, 1024 * 1024


# --- helpers running inside clusterlab ranks (module level: the launcher imports them) ---------
def stream(comm, size: int, seconds: float) -> dict | None:
    """Rank 0 sends ``size``-byte messages to rank 1 for about ``seconds``; rank 1 acknowledges
    the last one. Returns Mbit/s at rank 0."""
    if comm.rank > 1:
        return None
    buf = np.zeros(size, dtype=np.uint8)  # arrays are received in place (bytes cost one more copy)
    if comm.rank == 1:
        while True:
            head = comm.recv(0, TAG + 1)
            count = int.from_bytes(head, "little")
            if count == 0:
                return None
            for _ in range(count):
                comm.recv(0, TAG)
            comm.send(0, b"k", TAG + 2)
    # warm-up, then measure in rounds until the time is spent
    comm.send(1, (4).to_bytes(8, "little"), TAG + 1)
    for _ in range(4):
        comm.send(1, buf, TAG)
    comm.recv(1, TAG + 2)
    total, t0 = 0, time.perf_counter()
    per_round = max(4, int(256 * MIB // size))
    while time.perf_counter() - t0 < seconds:
        comm.send(1, per_round.to_bytes(8, "little"), TAG + 1)
        for _ in range(per_round):
            comm.send(1, buf, TAG)
        comm.recv(1, TAG + 2)
        total += per_round * size
    dt = time.perf_counter() - t0
    comm.send(1, (0).to_bytes(8, "little"), TAG + 1)
    return {"bytes": size, "mbps": total * 8 / dt / 1e6, "seconds": dt}


def pinned_pingpong(comm, cpus: list[int], sizes: list[int]) -> list[dict] | None:
    """Ping-pong with rank i pinned to CPU ``cpus[i]`` (where NPtcp's two ends are pinned)."""
    os.sched_setaffinity(0, {cpus[comm.rank]})
    return pp.pingpong(comm, sizes, 0.2)


# Where the two ends of a latency measurement run. On this 2-vCPU VM a wake-up on the other
# (idle) CPU costs about 20 us more than a switch on the same CPU, for NPtcp and clusterlab alike,
# so an unpinned pair measures the scheduler's placement (NPtcp 6.9 us and clusterlab 20.5 us in
# one run, 28.2 and 28.2 us in another): both are pinned the same way, both ways.
PLACEMENTS = {"same_cpu": (0, 0), "two_cpus": (0, 1)}


def latency_by_placement(upper: int = 16) -> dict:
    out = {}
    for name, cpus in PLACEMENTS.items():
        if max(cpus) >= (os.cpu_count() or 1):
            continue
        out[name] = {"cpus": list(cpus), "nptcp": nptcp(upper, cpus),
                     "clusterlab": LOOPBACK.run(pinned_pingpong, 2, list(cpus), pp.sizes(1, upper), timeout=300)[0]}
    return out


# --- MPICH worker (run under mpiexec by ``mpich``: ``python bench/comm.py --mpi-worker ...``) -------
def mpi_worker(ops: list[str], sizes: list[int], out: str) -> None:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    n, rank = comm.Get_size(), comm.Get_rank()
    results = []
    for op in ops:
        for m in sizes:
            if op == "bcast":
                buf = np.zeros(m, np.uint8)

                def call(buf=buf):
                    comm.Bcast(buf, 0)
            elif op == "scatter":
                send = np.zeros(m * n, np.uint8) if rank == 0 else None
                recv = np.empty(m, np.uint8)

                def call(send=send, recv=recv):
                    comm.Scatter(send, recv, 0)
            elif op == "alltoall":
                send = np.zeros(m * n, np.uint8)
                recv = np.empty(m * n, np.uint8)

                def call(send=send, recv=recv):
                    comm.Alltoall(send, recv)
            else:
                raise SystemExit(f"unsupported op {op}")
            iters, warm = _iterations(m)
            for _ in range(warm):
                call()
            times = np.empty(iters)
            for i in range(iters):
                comm.Barrier()
                t0 = time.perf_counter()
                call()
                times[i] = time.perf_counter() - t0
            every = comm.gather(times.tolist(), 0)  # mpi4py's pickle stays inside MPICH's own job
            if rank == 0:
                results.append({"op": op, **summarize(np.array(every) * 1e6), "bytes": m, "iterations": iters})
    if rank == 0:
        with atomic_open(out) as f:
            json.dump(results, f)


def summarize(t: np.ndarray) -> dict:
    """OSU's columns from a ranks x iterations array of call times (us), as
    ``clusterlab.bench.collective`` reports them: avg/min/max over ranks of each rank's mean,
    p50/p99 over calls of the slowest rank."""
    means, slowest = t.mean(axis=1), t.max(axis=0)
    return {"avg_us": float(means.mean()), "min_us": float(means.min()), "max_us": float(means.max()),
            "p50_us": float(np.percentile(slowest, 50)), "p99_us": float(np.percentile(slowest, 99))}


def cpu_ticks() -> list[int]:
    """The machine's CPU ticks: user, nice, system, idle, iowait, irq, softirq, steal."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:9]]


def cpu_share(t0: list[int], t1: list[int]) -> dict:
    """Where the CPU went between two ``cpu_ticks``: ``nice`` is niced background work (other
    jobs; MPICH's busy-polling ranks hand their CPU to it when they yield), ``idle``."""
    d = [b - a for a, b in zip(t0, t1, strict=True)]
    total = max(1, sum(d))
    return {"user": round(d[0] / total, 3), "nice": round(d[1] / total, 3), "system": round((d[2] + d[5] + d[6]) / total, 3),
            "idle": round((d[3] + d[4]) / total, 3)}


def _iterations(m: int) -> tuple[int, int]:
    return (100, 10) if m <= 64 * KIB else (30, 5)


# --- the anchors ----------------------------------------------------------------------------------
def ensure_tools() -> None:
    missing = [t for t in ("iperf3", "NPtcp") if shutil.which(t) is None]
    if not missing:
        return
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        print(f"installing {', '.join(missing)} (apt-get)", file=sys.stderr)
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "iperf3", "netpipe-tcp"], check=True)
        return
    raise SystemExit(f"missing {', '.join(missing)}: run `sudo apt-get install -y iperf3 netpipe-tcp` "
                     "(or run this script as root to install them)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def iperf3(seconds: float) -> dict:
    port = free_port()
    server = subprocess.Popen(["iperf3", "-s", "-1", "-p", str(port), "-B", "127.0.0.1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)  # let the server listen (a probe connection would count as its one test)
        out = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(seconds), "-J"],
                             capture_output=True, text=True, timeout=seconds + 30, check=True).stdout
    finally:
        server.terminate()
        server.wait(10)
    d = json.loads(out)
    return {"mbps": d["end"]["sum_received"]["bits_per_second"] / 1e6, "seconds": seconds,
            "write_size": d["start"]["test_start"].get("blksize")}


def nptcp(upper: int, cpus: tuple[int, int] | None = None) -> list[dict]:
    """NPtcp's rows up to ``upper`` bytes; ``cpus``: pin the receiver and the transmitter there."""
    port = free_port()
    pin = [[], []] if cpus is None else [["taskset", "-c", str(c)] for c in cpus]
    with tempfile.TemporaryDirectory() as d:
        rx = subprocess.Popen([*pin[0], "NPtcp", "-P", str(port), "-u", str(upper), "-o", f"{d}/rx.out"], cwd=d,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.3)
            subprocess.run([*pin[1], "NPtcp", "-h", "127.0.0.1", "-P", str(port), "-u", str(upper), "-o", f"{d}/np.out"],
                           cwd=d, check=True, timeout=600, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        finally:
            try:
                rx.wait(30)
            except subprocess.TimeoutExpired:
                rx.kill()
                rx.wait()
        rows = []
        for line in Path(f"{d}/np.out").read_text().splitlines():
            b, mbps, sec = line.split()[:3]
            rows.append({"bytes": int(b), "mbps": float(mbps), "usec": float(sec) * 1e6})
    return rows


def mpich(n: int, ops: list[str], sizes: list[int], transport: str) -> list[dict]:
    """The MPICH worker on ``n`` ranks under mpiexec (``Mpirun(mpich=transport)``); rank 0's rows."""
    with tempfile.TemporaryDirectory() as d:
        out = f"{d}/mpi.json"
        job = Mpirun(mpich=transport).launch([sys.executable, __file__, "--mpi-worker", ",".join(ops),
                                              ",".join(map(str, sizes)), out], n, timeout=900)
        if not job.ok:
            raise RuntimeError(f"MPICH ({transport}) job failed: {job.reason}")
        return json.loads(Path(out).read_text())


def clusterlab_collectives(n: int, ops: list[str], sizes: list[int], algorithm: str | None = None) -> list[dict]:
    out = []
    for op in ops:
        for m in sizes:
            iters, warm = _iterations(m)
            rows = LOOPBACK.run(coll.run, n, op, [m], algorithm, iters, warm, timeout=900)[0]
            out.extend({"op": op, **r} for r in rows)
    return out


def every_algorithm(n: int, ops: list[str], sizes: list[int]) -> list[dict]:
    """Each row timed with every algorithm of its operation, to check the cost model's pick (the
    rate-paced broadcast included: on loopback it is a flat fan-out plus a probe; the
    point-to-multipoint one left out: loopback has no multicast group, bench/seed002.py
    --algorithms times both on a testbed)."""
    from clusterlab.comm.collectives import ALGORITHMS

    return [r for op in ops for name in sorted(ALGORITHMS[op]) if name != "p2mp"
            for r in clusterlab_collectives(n, [op], sizes, algorithm=name)]


def checkout_collectives(checkout: Path, n: int, ops: list[str], sizes: list[int]) -> list[dict]:
    """The same calls timed by another checkout's ``clusterlab bench collective`` (its own
    venv and Rust engine; the cost model comes through the environment)."""
    exe = checkout / ".venv" / "bin" / "clusterlab"
    out = []
    for op in ops:
        for m in sizes:
            iters, warm = _iterations(m)
            text = subprocess.run([str(exe), "bench", "collective", "--op", op, "-n", str(n), "--sizes", str(m),
                                   "--iterations", str(iters), "--warmup", str(warm), "--backend", "tcp", "--json"],
                                  capture_output=True, text=True, check=True, timeout=900).stdout
            out.extend({"op": op, **json.loads(line)} for line in text.splitlines() if line.startswith("{"))
    return out


def spread(values: list[float]) -> dict:
    """min / median / max of one number over runs."""
    return {"min": float(min(values)), "median": float(np.median(values)), "max": float(max(values))}


def collective_rows(runs: list[dict], ops: list[str], sizes: list[int], sides: list[str]) -> list[dict]:
    """Per (op, size): the algorithm, each side's time per run and its spread, the per-iteration
    distribution per run, and clusterlab's ratio to every other side per run and its spread."""
    rows = []
    for op in ops:
        for m in sizes:
            row: dict = {"op": op, "bytes": m}
            for side in sides:
                cells = [next(r for r in run[side] if r["op"] == op and r["bytes"] == m) for run in runs]
                row[side] = {"avg_us": [c["avg_us"] for c in cells], "avg_us_spread": spread([c["avg_us"] for c in cells]),
                             "per_run": [{k: c.get(k) for k in ("avg_us", "min_us", "max_us", "p50_us", "p99_us",
                                                                "iterations", "algorithm")} for c in cells]}
            row["algorithm"] = row["clusterlab_collectives"]["per_run"][0]["algorithm"]
            if all("every_algorithm" in run for run in runs):
                names = sorted({c["algorithm"] for run in runs for c in run["every_algorithm"]
                                if c["op"] == op and c["bytes"] == m})
                row["every_algorithm"] = {name: [c["avg_us"] for run in runs for c in run["every_algorithm"]
                                                 if c["op"] == op and c["bytes"] == m and c["algorithm"] == name]
                                          for name in names}
            ours = row["clusterlab_collectives"]["avg_us"]
            for side in sides[1:]:
                ratios = [a / b for a, b in zip(ours, row[side]["avg_us"], strict=True)]
                row[f"ratio_vs_{side}"] = {"per_run": ratios, **spread(ratios)}
            rows.append(row)
    return rows


def main(argv=None) -> None:
    ap = harness.parser(__doc__, HERE / "results" / "comm.json", repeat=("--runs", 2),
                        repeat_help="consecutive runs of the collective comparison")
    ap.add_argument("-n", type=int, default=8, help="ranks for the collectives (default 8)")
    ap.add_argument("--quick", action="store_true", help="shorter runs (noisier)")
    ap.add_argument("--per-call", action="store_true", help="also time bcast and scatter with per-call connections")
    ap.add_argument("--collectives-only", action="store_true",
                    help="skip iperf3, NPtcp and the ping-pong (the cost model then comes from --model)")
    ap.add_argument("--model", help="cost model JSON for --collectives-only (default: the one in -o's file)")
    ap.add_argument("--baseline", type=Path, help="another checkout (with its .venv) timed in the same runs (A/B)")
    ap.add_argument("--every-algorithm", action="store_true",
                    help="also time every algorithm of each row (is the model's pick the fastest?)")
    ap.add_argument("--mpi-worker", nargs=3, metavar=("OPS", "SIZES", "OUT"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.mpi_worker:
        ops, sizes, out = a.mpi_worker
        mpi_worker(ops.split(","), [int(s) for s in sizes.split(",")], out)
        return
    bench = harness.start(ap, repeat_flag="--runs", args=a)
    ops, sizes = ["bcast", "scatter", "alltoall"], [64 * KIB, MIB]
    res: dict = {"ranks": a.n, "mpich_env": MPICH_TRANSPORTS}
    if a.baseline is not None:
        res["baseline"] = {"checkout": str(a.baseline), "commit": subprocess.run(
            ["git", "-C", str(a.baseline), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()}
    model_path = Path(tempfile.mkdtemp()) / "model.json"
    if a.collectives_only:
        if a.model:
            model = costmodel.CostModel.load(a.model)
        else:
            model = costmodel.CostModel.from_dict(json.loads(Path(a.output).read_text())["cost_model"])
    else:
        ensure_tools()
        secs = 1.0 if a.quick else 3.0
        print("p2p bandwidth: iperf3 vs clusterlab stream ...", file=sys.stderr)
        res["iperf3"] = iperf3(secs)
        res["clusterlab_stream"] = [LOOPBACK.run(stream, 2, m, secs, timeout=300)[0] for m in (MIB, 4 * MIB)]

        print("latency: NPtcp vs clusterlab ping-pong ...", file=sys.stderr)
        upper = 4 * MIB
        c0 = cpu_ticks()
        res["nptcp"] = nptcp(upper)
        res["nptcp_cpu"] = cpu_share(c0, cpu_ticks())
        cal = LOOPBACK.run(pp.calibrate, 2, pp.sizes(1, upper), 0.02 if a.quick else 0.05, timeout=900)[0]
        res["clusterlab_pingpong"], res["clusterlab_overhead_us"] = cal["rows"], cal["overhead"] * 1e6
        res["latency_by_placement"] = latency_by_placement()
        # the collectives choose with a model fitted to this ping-pong (what `clusterlab tune model` does)
        model = costmodel.fit(cal["rows"], setup_times=connection_setup_times(), overhead=cal["overhead"],
                              source="bench/comm.py ping-pong", concurrency=float(os.cpu_count() or 1))
    res["cost_model"] = model.to_dict()
    model.save(model_path)
    os.environ[costmodel.ENV] = str(model_path)

    sides = ["clusterlab_collectives"] + (["baseline"] if a.baseline else []) + ["mpich_tcp", "mpich_ucx_default"]
    print(f"collectives on {a.n} ranks: {', '.join(sides)}, {a.runs} consecutive runs ...", file=sys.stderr)
    res["runs"] = []
    for k in range(a.runs):
        run = {"load_before": os.getloadavg(), "cpu": {}}
        for side in sides:
            c0 = cpu_ticks()
            if side == "clusterlab_collectives":
                run[side] = clusterlab_collectives(a.n, ops, sizes)
            elif side == "baseline":
                run[side] = checkout_collectives(a.baseline, a.n, ops, sizes)
            else:
                run[side] = mpich(a.n, ops, sizes, side.removeprefix("mpich_"))
            run["cpu"][side] = cpu_share(c0, cpu_ticks())
        if a.every_algorithm:
            run["every_algorithm"] = every_algorithm(a.n, ops, sizes)
        if a.per_call:  # seed 002: the same calls with connections set up per call
            os.environ["CLUSTERLAB_CONNECTIONS"] = "per_call"
            try:
                run["clusterlab_per_call"] = clusterlab_collectives(a.n, ["bcast", "scatter"], sizes)
            finally:
                del os.environ["CLUSTERLAB_CONNECTIONS"]
        run["load_after"] = os.getloadavg()
        res["runs"].append(run)
        print(f"  run {k + 1}: load {run['load_before'][0]:.1f} -> {run['load_after'][0]:.1f}, cpu {run['cpu']}",
              file=sys.stderr)
    res["rows"] = collective_rows(res["runs"], ops, sizes, sides)
    res["clusterlab_collectives"] = res["runs"][0]["clusterlab_collectives"]
    res["mpich_tcp"] = res["runs"][0]["mpich_tcp"]
    res["mpich_shm"] = mpich(a.n, ops, sizes, "shm")

    # --- ratios and targets ---
    def one(rows, b):
        return next(r for r in rows if r["bytes"] == b)

    targets = []
    if not a.collectives_only:
        best_stream = max(r["mbps"] for r in res["clusterlab_stream"])
        targets.append({"what": "p2p bandwidth >= 1 MiB messages vs iperf3", "clusterlab": best_stream,
                        "anchor": res["iperf3"]["mbps"], "unit": "Mbit/s",
                        "ratio": best_stream / res["iperf3"]["mbps"], "target": ">= 0.95"})
        cl1, np1 = one(res["clusterlab_pingpong"], 1)["usec"], one(res["nptcp"], 1)["usec"]
        targets.append({"what": "1-byte half round trip vs NPtcp, unpinned (placement decides)", "clusterlab": cl1,
                        "anchor": np1, "unit": "usec", "ratio": cl1 / np1, "target": "<= 1.2"})
        for name, lat in res["latency_by_placement"].items():
            cl1, np1 = one(lat["clusterlab"], 1)["usec"], one(lat["nptcp"], 1)["usec"]
            targets.append({"what": f"1-byte half round trip vs NPtcp, both pinned {name}", "clusterlab": cl1,
                            "anchor": np1, "unit": "usec", "ratio": cl1 / np1, "target": "<= 1.2"})
    for row in res["rows"]:
        op, m = row["op"], row["bytes"]
        cl = row["clusterlab_collectives"]["per_run"][0]
        for side in sides[1:]:
            r = row[f"ratio_vs_{side}"]
            targets.append({"what": f"{op} {m // KIB} KiB on {a.n} ranks vs {side.replace('_', ' ', 1)}, every run",
                            "clusterlab": cl["avg_us"], "anchor": row[side]["per_run"][0]["avg_us"], "unit": "usec",
                            "ratio": r["max"], "ratios_per_run": r["per_run"], "ratio_min": r["min"],
                            "ratio_median": r["median"], "spread": r["max"] / r["min"] - 1, "target": "<= 1.0",
                            "algorithm": row["algorithm"], "loads": [run["load_before"][0] for run in res["runs"]]})
        mp = next(x for x in res["mpich_shm"] if x["op"] == op and x["bytes"] == m)
        targets.append({"what": f"{op} {m // KIB} KiB on {a.n} ranks vs mpich shm (reference)", "clusterlab": cl["avg_us"],
                        "anchor": mp["avg_us"], "unit": "usec", "ratio": cl["avg_us"] / mp["avg_us"],
                        "target": "<= 1.0", "algorithm": row["algorithm"]})
    for t in targets:
        bound = float(t["target"].split()[1])
        t["met"] = t["ratio"] >= bound if t["target"].startswith(">=") else t["ratio"] <= bound
    res["targets"] = targets
    for t in targets:
        bench.say(f"{'MET ' if t['met'] else 'MISS'} {t['what']:58s} clusterlab {t['clusterlab']:9.1f} "
                  f"anchor {t['anchor']:9.1f} {t['unit']:6s} ratio {t['ratio']:5.2f} (target {t['target']})")
    for row in res["rows"]:
        cells = "  ".join(f"{side.removeprefix('clusterlab_')}: "
                          + "/".join(f"{v:.0f}" for v in row[side]["avg_us"]) for side in sides)
        bench.say(f"{row['op']:8s} {row['bytes'] // KIB:5d} KiB {row['algorithm']:24s} {cells} us")
        for name, v in row.get("every_algorithm", {}).items():
            bench.say(f"{'':18s} {name:24s} " + "/".join(f"{x:.0f}" for x in v) + " us")
    bench.write(res)


if __name__ == "__main__":
    main()
