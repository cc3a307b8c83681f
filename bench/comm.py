#!/usr/bin/env python3
"""clusterlab's communication layer side by side with iperf3, NetPIPE (NPtcp) and MPICH.

Not a test: a measurement, run on this machine's loopback in one go:

1. point-to-point bandwidth for messages of 1 MiB and up: clusterlab's TCP mesh streaming
   messages one way (rank 0 -> 1) vs ``iperf3`` (one TCP stream, same loopback);
   target >= 0.95x iperf3;
2. 1-byte latency (half round trip): clusterlab ping-pong vs ``NPtcp``; target <= 1.5x NPtcp;
3. bcast, scatter and alltoall at 64 KiB and 1 MiB on 8 ranks (OSU-style average over ranks of
   the per-rank mean): clusterlab (the cost model's pick) vs MPICH through mpi4py; target
   <= 1.0x MPICH's time. MPICH runs twice: over TCP on loopback (``MPIR_CVAR_NOLOCAL=1``,
   libfabric's tcp provider: the same transport as clusterlab, the target's comparison) and
   with its default intra-node shared memory (reported for reference).

Writes ``bench/results/comm.json`` (atomically) with every number, each ratio and whether its
target is met. Needs ``iperf3`` and ``NPtcp`` (Debian: ``apt-get install -y iperf3
netpipe-tcp``; installed automatically when run as root) and ``mpi4py`` + ``mpich`` (the
``clusterlab[mpi]`` extra; ``.venv/bin/mpiexec``).

The collective comparison runs ``--runs`` times back to back (default 2); each row records the
ratio of every run, the spread (largest / smallest - 1) and the load, and the target counts
as met only when every run meets it; each run also records where the machine's CPU went while
clusterlab and while MPICH ran (``cpu``: user, nice = other helpers' niced jobs, system, idle),
since MPICH's busy-polling ranks lose most to background work. ``--per-call`` adds bcast and scatter with connections
set up per call (seed 002).

Usage: ``.venv/bin/python bench/comm.py [--quick] [--runs 2] [--per-call] [-n 8] [-o bench/results/comm.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
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
from clusterlab.bench import pingpong as pp
from clusterlab.bench.setup import connection_setup_times
from clusterlab.cluster import local
from clusterlab.comm import costmodel

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


# --- MPICH worker (run under mpiexec: ``python bench/comm.py --mpi-worker ...``) ----------------
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
            means = comm.gather(float(times.mean()), 0)  # mpi4py's pickle stays inside MPICH's own job
            if rank == 0:
                results.append({"op": op, "bytes": m, "avg_us": float(np.mean(means)) * 1e6,
                                "min_us": min(means) * 1e6, "max_us": max(means) * 1e6, "iterations": iters})
    if rank == 0:
        with atomic_open(out) as f:
            json.dump(results, f)


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


def nptcp(upper: int) -> list[dict]:
    port = free_port()
    with tempfile.TemporaryDirectory() as d:
        rx = subprocess.Popen(["NPtcp", "-P", str(port), "-u", str(upper), "-o", f"{d}/rx.out"], cwd=d,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.3)
            subprocess.run(["NPtcp", "-h", "127.0.0.1", "-P", str(port), "-u", str(upper), "-o", f"{d}/np.out"],
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


def mpich(n: int, ops: list[str], sizes: list[int], over_tcp: bool) -> list[dict]:
    mpiexec = Path(sys.executable).with_name("mpiexec")
    env = dict(os.environ)
    if over_tcp:
        env.update(MPIR_CVAR_NOLOCAL="1", FI_PROVIDER="tcp")
    with tempfile.TemporaryDirectory() as d:
        out = f"{d}/mpi.json"
        subprocess.run([str(mpiexec), "-n", str(n), sys.executable, __file__, "--mpi-worker", ",".join(ops),
                        ",".join(map(str, sizes)), out], env=env, check=True, timeout=900)
        return json.loads(Path(out).read_text())


def clusterlab_collectives(n: int, ops: list[str], sizes: list[int], backend: str = "tcp") -> list[dict]:
    out = []
    for op in ops:
        for m in sizes:
            iters, warm = _iterations(m)
            rows = local.run(coll.run, n, op, [m], None, iters, warm, backend=backend, timeout=900)[0]
            out.extend({"op": op, **r} for r in rows)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=8, help="ranks for the collectives (default 8)")
    ap.add_argument("-o", default=str(HERE / "results" / "comm.json"))
    ap.add_argument("--quick", action="store_true", help="shorter runs (noisier)")
    ap.add_argument("--runs", type=int, default=2, help="consecutive runs of the collective comparison (default 2)")
    ap.add_argument("--per-call", action="store_true", help="also time bcast and scatter with per-call connections")
    ap.add_argument("--mpi-worker", nargs=3, metavar=("OPS", "SIZES", "OUT"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.mpi_worker:
        ops, sizes, out = a.mpi_worker
        mpi_worker(ops.split(","), [int(s) for s in sizes.split(",")], out)
        return
    ensure_tools()
    secs = 1.0 if a.quick else 3.0
    ops, sizes = ["bcast", "scatter", "alltoall"], [64 * KIB, MIB]
    res: dict = {"host": platform.node(), "cpus": os.cpu_count(), "load_before": os.getloadavg(),
                 "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "ranks": a.n}

    print("p2p bandwidth: iperf3 vs clusterlab stream ...", file=sys.stderr)
    res["iperf3"] = iperf3(secs)
    res["clusterlab_stream"] = [local.run(stream, 2, m, secs, timeout=300)[0] for m in (MIB, 4 * MIB)]

    print("latency: NPtcp vs clusterlab ping-pong ...", file=sys.stderr)
    upper = 4 * MIB
    c0 = cpu_ticks()
    res["nptcp"] = nptcp(upper)
    res["nptcp_cpu"] = cpu_share(c0, cpu_ticks())
    cal = local.run(pp.calibrate, 2, pp.sizes(1, upper), 0.02 if a.quick else 0.05, timeout=900)[0]
    res["clusterlab_pingpong"], res["clusterlab_overhead_us"] = cal["rows"], cal["overhead"] * 1e6
    # the collectives choose with a model fitted to this ping-pong (what `clusterlab tune model` does)
    model = costmodel.fit(cal["rows"], setup_times=connection_setup_times(), overhead=cal["overhead"],
                          source="bench/comm.py ping-pong", concurrency=float(os.cpu_count() or 1))
    res["cost_model"] = model.to_dict()
    model_path = Path(tempfile.mkdtemp()) / "model.json"
    model.save(model_path)
    os.environ[costmodel.ENV] = str(model_path)

    print(f"collectives on {a.n} ranks: clusterlab vs MPICH, {a.runs} consecutive runs ...", file=sys.stderr)
    res["runs"] = []
    for k in range(a.runs):
        run = {"load_before": os.getloadavg()}
        c0 = cpu_ticks()
        run["clusterlab_collectives"] = clusterlab_collectives(a.n, ops, sizes)
        c1 = cpu_ticks()
        run["mpich_tcp"] = mpich(a.n, ops, sizes, over_tcp=True)
        run["cpu"] = {"clusterlab": cpu_share(c0, c1), "mpich_tcp": cpu_share(c1, cpu_ticks())}
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
    res["clusterlab_collectives"] = res["runs"][0]["clusterlab_collectives"]
    res["mpich_tcp"] = res["runs"][0]["mpich_tcp"]
    res["mpich_shm"] = mpich(a.n, ops, sizes, over_tcp=False)
    res["load_after"] = os.getloadavg()

    # --- ratios and targets ---
    def one(rows, b):
        return next(r for r in rows if r["bytes"] == b)

    targets = []
    best_stream = max(r["mbps"] for r in res["clusterlab_stream"])
    targets.append({"what": "p2p bandwidth >= 1 MiB messages vs iperf3", "clusterlab": best_stream,
                    "anchor": res["iperf3"]["mbps"], "unit": "Mbit/s", "ratio": best_stream / res["iperf3"]["mbps"],
                    "target": ">= 0.95"})
    cl1, np1 = one(res["clusterlab_pingpong"], 1)["usec"], one(res["nptcp"], 1)["usec"]
    targets.append({"what": "1-byte half round trip vs NPtcp", "clusterlab": cl1, "anchor": np1, "unit": "usec",
                    "ratio": cl1 / np1, "target": "<= 1.5"})
    for op in ops:
        for m in sizes:
            cl = next(r for r in res["clusterlab_collectives"] if r["op"] == op and r["bytes"] == m)
            pred = cl["predicted_us"]
            per_run = []
            for run in res["runs"]:
                c = next(r for r in run["clusterlab_collectives"] if r["op"] == op and r["bytes"] == m)
                mp = next(r for r in run["mpich_tcp"] if r["op"] == op and r["bytes"] == m)
                per_run.append(c["avg_us"] / mp["avg_us"])
            targets.append({"what": f"{op} {m // KIB} KiB on {a.n} ranks vs mpich over tcp, every run",
                            "clusterlab": cl["avg_us"], "anchor": next(
                                r for r in res["mpich_tcp"] if r["op"] == op and r["bytes"] == m)["avg_us"],
                            "unit": "usec", "ratio": max(per_run), "ratios_per_run": per_run,
                            "spread": max(per_run) / min(per_run) - 1, "target": "<= 1.0",
                            "algorithm": cl["algorithm"], "predicted_us": pred,
                            "loads": [run["load_before"][0] for run in res["runs"]]})
            for kind in ("mpich_tcp", "mpich_shm"):
                mp = next(r for r in res[kind] if r["op"] == op and r["bytes"] == m)
                targets.append({"what": f"{op} {m // KIB} KiB on {a.n} ranks vs {kind.replace('_', ' over ')}",
                                "clusterlab": cl["avg_us"], "anchor": mp["avg_us"], "unit": "usec",
                                "ratio": cl["avg_us"] / mp["avg_us"], "target": "<= 1.0",
                                "algorithm": cl["algorithm"], "predicted_us": pred})
    for t in targets:
        bound = float(t["target"].split()[1])
        t["met"] = t["ratio"] >= bound if t["target"].startswith(">=") else t["ratio"] <= bound
    res["targets"] = targets
    Path(a.o).parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(a.o) as f:
        json.dump(res, f, indent=1)
    for t in targets:
        print(f"{'MET ' if t['met'] else 'MISS'} {t['what']:52s} clusterlab {t['clusterlab']:10.1f} "
              f"anchor {t['anchor']:10.1f} {t['unit']:7s} ratio {t['ratio']:6.2f} (target {t['target']})")
    print(f"-> {a.o}")


if __name__ == "__main__":
    main()
