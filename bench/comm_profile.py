#!/usr/bin/env python3
"""Where a collective's time goes, per call, in counts that do not depend on the load:
messages, syscalls, context switches and CPU per rank per call, for clusterlab (one algorithm
or the model's pick) and MPICH (over TCP, or with UCX's defaults).

Each rank runs ``--calls`` timed calls, each after a barrier (as ``bench/collective.py`` and
OSU do), and reports its voluntary and involuntary context switches (all threads) and CPU time
per call. With ``--strace`` the job runs twice under ``strace -f -c`` (``--calls`` and 6x as
many) and the difference gives the syscalls per rank per call without the start-up. All counts
include the barrier before each call; ``--op barrier`` measures it alone (two barriers per call).

Not a test and not a timing: run it niced; the counts are what it is for.

Usage: ``nice -n 19 .venv/bin/python bench/comm_profile.py --op bcast --size 65536 [--algorithm flat]
[--mpich tcp|ucx_default] [--strace] [-n 8] [--calls 50]``
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from clusterlab.cluster import Local, Mpirun


def switches() -> tuple[int, int]:
    """Voluntary and involuntary context switches of this process, all threads."""
    vol = invol = 0
    for t in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{t}/status") as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches"):
                    vol += int(line.split(":")[1])
                elif line.startswith("nonvoluntary_ctxt_switches"):
                    invol += int(line.split(":")[1])
    return vol, invol


def measure(call, barrier, calls: int, warmup: int = 5) -> dict:
    """Per call: wall time (us), voluntary/involuntary switches, CPU us (this rank)."""
    for _ in range(warmup):
        call()
    barrier()
    (v0, i0), cpu0, times = switches(), time.process_time(), []
    for _ in range(calls):
        barrier()
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
    (v1, i1), cpu = switches(), time.process_time() - cpu0
    return {"us": float(np.mean(times)) * 1e6, "voluntary": (v1 - v0) / calls, "involuntary": (i1 - i0) / calls,
            "cpu_us": cpu / calls * 1e6}


def clusterlab_rank(comm, op: str, size: int, algorithm: str | None, calls: int) -> dict:
    from clusterlab.bench.collective import make_args
    from clusterlab.comm import collectives

    kw = make_args(op, size, comm.rank, comm.size)
    for _ in range(5):
        collectives.run(op, comm, algorithm, **kw)
    s0 = comm.stats()
    out = measure(lambda: collectives.run(op, comm, algorithm, **kw), lambda: comm.barrier("dissemination"), calls, 0)
    s1 = comm.stats()  # the barrier before the timed calls adds ceil(log2 n) messages in all
    out.update({k: (s1[k] - s0[k]) / calls for k in ("msgs_sent", "msgs_recv")})
    return out


def mpich_worker(op: str, size: int, calls: int, out: str) -> None:
    from mpi4py import MPI

    c = MPI.COMM_WORLD
    n = c.Get_size()
    if op == "bcast":
        buf = np.zeros(size, np.uint8)

        def call():
            c.Bcast(buf, 0)
    elif op == "scatter":
        send, recv = (np.zeros(size * n, np.uint8) if c.Get_rank() == 0 else None), np.empty(size, np.uint8)

        def call():
            c.Scatter(send, recv, 0)
    elif op == "alltoall":
        send, recv = np.zeros(size * n, np.uint8), np.empty(size * n, np.uint8)

        def call():
            c.Alltoall(send, recv)
    else:
        def call():
            c.Barrier()
    every = c.gather(measure(call, c.Barrier, calls), 0)
    if c.Get_rank() == 0:
        Path(out).write_text(json.dumps(every))


def run_job(a, calls: int, prefix: list[str]) -> list[dict]:
    """One job of ``calls`` timed calls, run under ``prefix`` (a tracer, or nothing): MPICH's
    ranks under mpiexec (``Mpirun(mpich=...)``, bench/comm.py's MPICH; ``prefix`` wraps mpiexec
    and its ranks), or clusterlab's in a process of their own that launches them (``prefix``
    wraps it and its ranks)."""
    with tempfile.TemporaryDirectory() as d:
        out = f"{d}/out.json"
        me = [sys.executable, __file__, "--op", a.op, "--size", str(a.size), "--calls", str(calls), "-n", str(a.n)]
        if a.mpich:
            job = Mpirun(mpich=a.mpich).launch([*me, "--mpi-worker", out], a.n, timeout=600, wrap=prefix,
                                               stdout=subprocess.DEVNULL)
            if not job.ok:
                raise SystemExit(f"MPICH job failed: {job.reason}")
        else:
            cmd = [*me, "--clusterlab-job", out] + (["--algorithm", a.algorithm] if a.algorithm else [])
            subprocess.run(prefix + cmd, check=True, timeout=600, stdout=subprocess.DEVNULL)
        return json.loads(Path(out).read_text())


def syscalls(a) -> dict[str, float]:
    """Syscalls per rank per call: two strace'd jobs, ``calls`` and 6x as many, subtracted."""
    counts = []
    for calls in (a.calls, 6 * a.calls):
        with tempfile.TemporaryDirectory() as d:
            run_job(a, calls, ["strace", "-f", "-c", "-o", f"{d}/s"])
            c = {}
            for line in Path(f"{d}/s").read_text().splitlines():
                m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$", line)
                if m and m.group(2) != "total":
                    c[m.group(2)] = int(m.group(1))
            counts.append(c)
    k = 5 * a.calls * a.n
    per = {s: (counts[1].get(s, 0) - counts[0].get(s, 0)) / k for s in set(counts[0]) | set(counts[1])}
    return {s: round(v, 1) for s, v in sorted(per.items(), key=lambda x: -x[1]) if v >= 0.1}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--op", default="bcast", choices=["bcast", "scatter", "alltoall", "barrier"])
    ap.add_argument("--size", type=int, default=64 * 1024)
    ap.add_argument("--algorithm", help="clusterlab's algorithm (default: the cost model's pick)")
    ap.add_argument("--mpich", choices=["tcp", "ucx_default"], help="profile MPICH instead (bench/comm.py's settings)")
    ap.add_argument("--strace", action="store_true", help="also count syscalls (strace -f -c, two jobs)")
    ap.add_argument("-n", type=int, default=8)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--mpi-worker", help=argparse.SUPPRESS)
    ap.add_argument("--clusterlab-job", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.mpi_worker:
        mpich_worker(a.op, a.size, a.calls, a.mpi_worker)
        return
    if a.clusterlab_job:
        if a.op == "barrier":
            a.algorithm = a.algorithm or "dissemination"
        rows = Local().run(clusterlab_rank, a.n, a.op, a.size, a.algorithm, a.calls, timeout=600)
        Path(a.clusterlab_job).write_text(json.dumps(rows))
        return
    rows = run_job(a, a.calls, [])
    keys = [k for k in rows[0] if k != "us"]
    res = {"op": a.op, "size": a.size, "ranks": a.n, "who": f"mpich_{a.mpich}" if a.mpich else "clusterlab",
           "algorithm": a.algorithm, "load": os.getloadavg(), "us": float(np.mean([r["us"] for r in rows])),
           **{k: round(float(np.mean([r[k] for r in rows])), 2) for k in keys}}
    if a.strace:
        res["syscalls"] = syscalls(a)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
