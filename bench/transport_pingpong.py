"""Quick transport check: clusterlab's TCP mesh (Rust and Python engines) and MPI backend
against NPtcp (1-byte latency) and iperf3 (bandwidth), side by side on loopback.

    .venv/bin/python bench/transport_pingpong.py [--quick] [--latency-only]
    .venv/bin/python bench/transport_pingpong.py --baseline /tmp/old --repeat 5 --latency-only

``--baseline DIR`` also runs the TCP mesh of another build (a copy of an older
``python/clusterlab`` package, with its compiled ``_core``, placed in DIR) alternately with this
one, ``--repeat`` times, so a change is measured side by side (ratios new / old) on a loaded
machine, with NPtcp before and after each pair.

Latency: half round trip of a 1-byte message (NetPIPE's definition), best of 3 runs.
Bandwidth: 1 MiB, 4 MiB and 16 MiB messages, ping-pong (NetPIPE style) and one-way streams,
against iperf3's 3-second stream. Ratios are ours / anchor (latency: lower is better,
<= 1.5 is the target; bandwidth: higher is better, >= 0.95 is the target). Writes
bench/results/transport_pingpong.json with the bench harness's provenance
(``clusterlab.bench.harness``: commit, machine, load, spare CPU, autogroup). The full,
documented benchmark is bench/comm.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from clusterlab.bench import harness
from clusterlab.cluster.mpirun import mpiexec_path

ROOT = Path(__file__).resolve().parents[1]

PROG = r"""
import json, sys, time
import numpy as np
from clusterlab.comm import world
c = world()
peer = 1 - c.rank
iters_small, sizes = int(sys.argv[1]), [int(x) for x in sys.argv[2].split(",") if x]
eng = getattr(c, "engine_name", None) or ("rust" if getattr(c, "_eng", None) is not None else "python")
out = {"engine": type(c).__name__ + ("/" + eng if type(c).__name__ == "TcpCommunicator" else "")}
def pingpong(buf, it):
    best = 1e9
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(it):
            if c.rank == 0:
                c.send(peer, buf); c.recv(peer)
            else:
                c.recv(peer); c.send(peer, buf)
        best = min(best, (time.perf_counter() - t) / it / 2)
    return best
pingpong(np.zeros(1, np.uint8), 200)
out["latency_us"] = pingpong(np.zeros(1, np.uint8), iters_small) * 1e6
rows = []
for n in sizes:
    buf = np.zeros(n, np.uint8)
    it = max(5, int(2e8 // n))
    pp = pingpong(buf, it)
    t = time.perf_counter()
    for _ in range(it):
        if c.rank == 0: c.send(peer, buf)
        else: c.recv(peer)
    if c.rank == 1: c.send(peer, b"k")
    else: c.recv(peer)
    st = (time.perf_counter() - t) / it
    rows.append({"bytes": n, "pingpong_gbps": n * 8 / pp / 1e9, "stream_gbps": n * 8 / st / 1e9})
out["bandwidth"] = rows
if c.rank == 0:
    print("RESULT " + json.dumps(out), flush=True)
"""


def run_ours(cmd_prefix: list[str], env_extra: dict, iters: int, sizes: list[int]) -> dict:
    """One run of the ping-pong program on 2 ranks; its result dict (rank 0)."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(PROG)
    try:
        env = dict(os.environ, **env_extra)
        p = subprocess.run([*cmd_prefix, sys.executable, f.name, str(iters), ",".join(map(str, sizes))],
                           env=env, capture_output=True, text=True, timeout=600)
    finally:
        os.unlink(f.name)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"benchmark run failed: {p.stderr[-2000:]}")


def nptcp_latency_us() -> float | None:
    if shutil.which("NPtcp") is None:
        return None
    best = None
    with tempfile.TemporaryDirectory() as d:
        for _ in range(3):
            srv = subprocess.Popen(["NPtcp", "-p", "0", "-l", "1", "-u", "1"], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, cwd=d)
            time.sleep(0.3)
            try:
                out = Path(d, "np.out")
                subprocess.run(["NPtcp", "-h", "127.0.0.1", "-p", "0", "-l", "1", "-u", "1", "-o", str(out)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60, cwd=d)
                secs = float(out.read_text().split()[2])  # bytes, Mbit/s, seconds (half round trip)
                best = secs if best is None else min(best, secs)
            finally:
                srv.kill()
                srv.wait()
    return best * 1e6


def iperf3_gbps() -> float | None:
    if shutil.which("iperf3") is None:
        return None
    srv = subprocess.Popen(["iperf3", "-s", "-1", "-p", "5299"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    try:
        p = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", "5299", "-t", "3", "-J"], capture_output=True,
                           text=True, timeout=60)
        return json.loads(p.stdout)["end"]["sum_received"]["bits_per_second"] / 1e9
    finally:
        srv.kill()
        srv.wait()


CPU_PATH = r"""
import sys, time
import numpy as np
from clusterlab.comm.tcp import local_mesh
a, b = local_mesh(2, drainer=False)
x = np.zeros(1, np.uint8)
best = 1e9
for _ in range(7):
    t = time.perf_counter()
    for _ in range(5000):
        a.send(1, x); b.recv(0)
    best = min(best, (time.perf_counter() - t) / 5000)
print(best * 1e6)
a.close(); b.close()
"""


def cpu_path_us(env_extra: dict) -> float:
    """Microseconds of one 1-byte send + receive pair inside one process (the message is in the
    kernel when recv runs): the CPU cost of the call path, best of 7 x 5000, little affected
    by scheduling (no wake-up of another process)."""
    p = subprocess.run([sys.executable, "-c", CPU_PATH], env=dict(os.environ, **env_extra), capture_output=True,
                       text=True, timeout=300, check=True)
    return float(p.stdout.split()[-1])


def side_by_side(baseline: str, repeat: int, iters: int, sizes: list[int], say=print) -> dict:
    """This build's TCP mesh and the one in ``baseline`` alternately, ``repeat`` times each,
    with NPtcp around every pair: latencies, ratios new / old, and the load."""
    cl = [sys.executable, "-m", "clusterlab", "run", "-n", "2", "--"]
    rows = []
    for _ in range(repeat):
        row = {"load_average": os.getloadavg()[0], "nptcp_latency_us": nptcp_latency_us()}
        row["new"] = run_ours(cl, {}, iters, sizes)
        row["old"] = run_ours(cl, {"PYTHONPATH": baseline}, iters, sizes)
        row["ratio_new_old"] = row["new"]["latency_us"] / row["old"]["latency_us"]
        row["cpu_path_us"] = {"new": cpu_path_us({}), "old": cpu_path_us({"PYTHONPATH": baseline})}
        rows.append(row)
        say(f"load {row['load_average']:5.1f}  NPtcp {row['nptcp_latency_us'] or float('nan'):6.1f} us  "
              f"new {row['new']['latency_us']:6.1f} us  old {row['old']['latency_us']:6.1f} us  "
              f"new/old {row['ratio_new_old']:.2f}  send+recv CPU path new {row['cpu_path_us']['new']:.2f} us "
              f"old {row['cpu_path_us']['old']:.2f} us")
    ratios = sorted(r["ratio_new_old"] for r in rows)
    cpu = sorted(r["cpu_path_us"]["new"] / r["cpu_path_us"]["old"] for r in rows)
    return {"baseline": baseline, "rows": rows, "median_ratio_new_old": ratios[len(ratios) // 2],
            "min_ratio": ratios[0], "max_ratio": ratios[-1], "cpu_path_median_ratio_new_old": cpu[len(cpu) // 2],
            "best_latency_us": {"new": min(r["new"]["latency_us"] for r in rows),
                                "old": min(r["old"]["latency_us"] for r in rows)},
            "best_cpu_path_us": {"new": min(r["cpu_path_us"]["new"] for r in rows),
                                 "old": min(r["cpu_path_us"]["old"] for r in rows)}}


def main(argv=None) -> None:
    ap = harness.parser(__doc__, ROOT / "bench" / "results" / "transport_pingpong.json", repeat=("--repeat", 5),
                        repeat_help="pairs of runs with --baseline")
    ap.add_argument("--quick", action="store_true", help="fewer iterations")
    ap.add_argument("--latency-only", action="store_true", help="skip the bandwidth sizes")
    ap.add_argument("--baseline", metavar="DIR", help="also run the mesh of the build in DIR, alternately")
    run = harness.start(ap, argv, repeat_flag="--repeat")
    args = run.args
    iters = 2000 if args.quick else 10000
    sizes = [] if args.latency_only else [1 << 20, 4 << 20, 16 << 20]
    if args.baseline:
        res = {"iterations": iters, **side_by_side(args.baseline, args.repeat, iters, sizes, run.say)}
        run.say(f"median new/old {res['median_ratio_new_old']:.2f} (range {res['min_ratio']:.2f}-{res['max_ratio']:.2f}),"
                f" CPU path median new/old {res['cpu_path_median_ratio_new_old']:.2f}")
        run.write(res)
        return
    cl = [sys.executable, "-m", "clusterlab", "run", "-n", "2", "--"]
    res = {"iterations": iters, "anchors": {}, "ours": {}}
    res["anchors"]["nptcp_latency_us"] = nptcp_latency_us()
    res["anchors"]["iperf3_gbps"] = iperf3_gbps()
    res["ours"]["tcp_rust"] = run_ours(cl, {}, iters, sizes)
    res["ours"]["tcp_python"] = run_ours(cl, {"CLUSTERLAB_ENGINE": "python"}, iters, sizes)
    if mpiexec_path() is not None:  # the same program under mpiexec, on MPI's own transport
        res["ours"]["mpi"] = run_ours([sys.executable, "-m", "clusterlab", "run", "--backend", "mpi", "-n", "2", "--"], {},
                                      iters, sizes)
    res["anchors"]["nptcp_latency_us_after"] = nptcp_latency_us()
    lat = min(x for x in (res["anchors"]["nptcp_latency_us"], res["anchors"]["nptcp_latency_us_after"]) if x) \
        if res["anchors"]["nptcp_latency_us"] else None
    ip = res["anchors"]["iperf3_gbps"]
    load = (run.load_before or [float("nan")])[0]
    run.say(f"load average {load:.1f} on {os.cpu_count()} cpus (numbers are noisy when loaded)")
    run.say(f"anchors: NPtcp 1-byte half round trip {lat and round(lat, 1)} us, iperf3 {ip and round(ip, 2)} Gbit/s")
    for name, o in res["ours"].items():
        r = f" ({o['latency_us'] / lat:.2f}x NPtcp)" if lat else ""
        run.say(f"{name:11} latency {o['latency_us']:7.1f} us{r}")
        for row in o["bandwidth"]:
            q = f"  ({row['pingpong_gbps'] / ip:.2f}x / {row['stream_gbps'] / ip:.2f}x iperf3)" if ip else ""
            run.say(f"{'':11} {row['bytes']:>9} B pingpong {row['pingpong_gbps']:6.2f} Gbit/s, "
                    f"stream {row['stream_gbps']:6.2f} Gbit/s{q}")
    res["ratios"] = {name: {"latency_vs_nptcp": lat and o["latency_us"] / lat,
                            "bandwidth_vs_iperf3": ip and {str(r["bytes"]): {"pingpong": r["pingpong_gbps"] / ip,
                                                                            "stream": r["stream_gbps"] / ip}
                                                           for r in o["bandwidth"]}}
                     for name, o in res["ours"].items()}
    run.write(res)


if __name__ == "__main__":
    main()
