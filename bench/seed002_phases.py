"""Do the scatter-allgather bcast's two phases contend? A 1 MiB bcast on 16 testbed hosts with
the scatter sent ``at_once`` or ``in_turn`` (``bcast_scatter_allgather``) and the ring started as
soon as a rank has its scatter piece (``overlap``), after the ring neighbours have theirs
(``neighbours``) or after a barrier (``barrier``), interleaved in rounds,
each with the TCP retransmissions and timeouts of every host (its namespace's
``/proc/net/{snmp,netstat}``) and the switch ports' tbf drops per call. The record carries the
bench harness's provenance (``clusterlab.bench.harness``: commit, machine, load, spare CPU,
autogroup). Root:

    .venv/bin/python bench/seed002_phases.py   # ~2 min -> bench/results/seed002_phases.json
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from clusterlab.bench import harness
from clusterlab.cluster.testbed import StarTopo, TestbedNetwork

# (scatter schedule, separation): at_once + overlap is the bcast before the scatter sent in turn
VARIANTS = (("at_once", "overlap"), ("in_turn", "overlap"), ("in_turn", "neighbours"), ("in_turn", "barrier"),
            ("at_once", "barrier"))
TCP_COUNTERS = ("RetransSegs", "TCPTimeouts", "TCPLossProbes", "TCPFastRetrans", "TCPSlowStartRetrans",
                "TCPLostRetransmit", "TCPSpuriousRTOs", "TCPSACKReorder", "TCPDSACKRecv")


def tcp_counters() -> dict[str, int]:
    """This network namespace's TCP counters (``nstat``'s sources)."""
    out = {}
    for path in ("/proc/net/snmp", "/proc/net/netstat"):
        lines = open(path).read().splitlines()
        for names, values in zip(lines[::2], lines[1::2], strict=True):
            for k, v in zip(names.split()[1:], values.split()[1:], strict=True):
                if k in TCP_COUNTERS:
                    out[k] = int(v)
    return out


def switch_drops(switch_ns: str) -> int:
    qd = json.loads(subprocess.run(["tc", "-n", switch_ns, "-s", "-j", "qdisc", "show"], capture_output=True,
                                   text=True, check=True, timeout=10).stdout)
    return sum(int(q.get("drops", 0)) for q in qd if str(q.get("dev", "")).startswith("p"))


def phases(comm, m: int, rounds: int, calls: int, switch_ns: str) -> list[dict] | None:
    """``rounds`` x each variant, ``calls`` bcasts back to back per variant (after one warm-up)."""
    from clusterlab.comm.collectives import bcast_scatter_allgather as sag

    data = np.arange(m, dtype=np.uint8)
    rows = []
    for rnd in range(rounds):
        for sched, v in VARIANTS:
            sag.run(comm, data if comm.rank == 0 else None, 0, v, sched)
            comm.barrier("dissemination")
            drops0 = switch_drops(switch_ns) if comm.rank == 0 else 0
            c0 = tcp_counters()
            comm.barrier("dissemination")
            ends, t0 = [], time.perf_counter()
            for _ in range(calls):
                got = sag.run(comm, data if comm.rank == 0 else None, 0, v, sched)
                ends.append(time.perf_counter() - t0)
            c1 = tcp_counters()
            if not np.array_equal(np.asarray(got), data):
                raise AssertionError(f"rank {comm.rank}: {v} bcast differs")
            comm.barrier("dissemination")
            drops = switch_drops(switch_ns) - drops0 if comm.rank == 0 else 0
            mine = np.array(ends + [c1[k] - c0.get(k, 0) for k in TCP_COUNTERS], dtype=np.float64)
            every = comm.gather(mine, 0, "linear")
            if comm.rank == 0:
                g = np.array([np.asarray(e).ravel() for e in every])
                slowest_end = g[:, :calls].max(axis=0)  # call i ends when its slowest rank has it
                per_call = np.diff(np.concatenate([[0.0], slowest_end])) * 1e3
                tcp = {k: int(g[:, calls + i].sum()) for i, k in enumerate(TCP_COUNTERS)}
                rows.append({"round": rnd, "variant": f"{sched}+{v}", "calls": calls, "ms_per_call": float(slowest_end[-1]) / calls * 1e3,
                             "call_ms": [round(float(x), 2) for x in per_call], "switch_drops": drops,
                             "tcp_all_hosts": tcp})
    return rows if comm.rank == 0 else None


def phase_times(comm, m: int, calls: int, schedule: str) -> dict | None:
    """Where a barrier-separated call's time goes: each rank's time (from its own exit of a
    barrier before the call) when it has its scatter piece, leaves the barrier, ends the ring and
    has the payload unpacked; rank 0 returns the slowest rank's, median over ``calls`` calls, and
    the same for the scatter and the ring each started alone at a barrier."""
    from clusterlab.comm.collectives import allgather_ring
    from clusterlab.comm.collectives import bcast_scatter_allgather as sag
    from clusterlab.comm.collectives._common import split
    from clusterlab.comm.collectives._pack import pack, unpack

    data = np.arange(m, dtype=np.uint8)
    stamps = []
    for i in range(calls + 1):
        comm.barrier("dissemination")
        t0 = time.perf_counter()
        pieces = split(np.frombuffer(pack([data]), dtype=np.uint8), comm.size) if comm.rank == 0 else None
        piece = sag._scatter(comm, pieces, 0, schedule)
        t1 = time.perf_counter()
        comm.barrier("dissemination")
        t2 = time.perf_counter()
        parts = allgather_ring.run(comm, piece)
        t3 = time.perf_counter()
        unpack(np.concatenate(parts))
        t4 = time.perf_counter()
        comm.barrier("dissemination")
        t5 = time.perf_counter()
        allgather_ring.run(comm, piece)
        t6 = time.perf_counter()
        if i:  # the first call warms up
            stamps.append([t1 - t0, t2 - t0, t3 - t0, t4 - t0, t6 - t5])
    every = comm.gather(np.array(stamps), 0, "linear")
    if comm.rank:
        return None
    g = np.array([np.asarray(e) for e in every])  # rank x call x stamp
    slowest = g.max(axis=0)
    names = ("scatter_done", "barrier_done", "ring_done", "unpacked", "ring_alone_at_barrier")
    return {"schedule": schedule, "calls": calls, **{f"{k}_ms": round(float(np.median(slowest[:, j])) * 1e3, 2) for j, k in enumerate(names)},
            "scatter_done_per_rank_ms": [round(float(x) * 1e3, 1) for x in np.median(g[:, :, 0], axis=1)]}


def summary(rows: list[dict]) -> dict:
    out = {}
    for sched, sep in VARIANTS:
        v = f"{sched}+{sep}"
        rs = [r for r in rows if r["variant"] == v]
        calls = [x for r in rs for x in r["call_ms"]]
        n = sum(r["calls"] for r in rs)
        out[v] = {"ms_per_call_rounds": [round(r["ms_per_call"], 1) for r in rs],
                  "call_ms_median": statistics.median(calls), "call_ms_min": min(calls), "call_ms_max": max(calls),
                  "call_ms_p90": float(np.percentile(calls, 90)),
                  "switch_drops_per_call": sum(r["switch_drops"] for r in rs) / n,
                  **{f"{k}_per_call": sum(r["tcp_all_hosts"][k] for r in rs) / n for k in TCP_COUNTERS}}
    return out


def main(argv=None) -> int:
    ap = harness.parser(__doc__, Path(__file__).parent / "results" / "seed002_phases.json", repeat=("--rounds", 4),
                        repeat_help="interleaved rounds of every variant", output_aliases=("--out",))
    ap.add_argument("--hosts", type=int, default=16, help="testbed hosts (default %(default)s)")
    ap.add_argument("--bytes", type=int, default=1 << 20, help="the bcast's size (default %(default)s)")
    ap.add_argument("--calls", type=int, default=8, help="calls per variant and round (default %(default)s)")
    ap.add_argument("--phase-calls", type=int, default=10, help="calls timed phase by phase (0: none)")
    run = harness.start(ap, argv, repeat_flag="--rounds")
    a = run.args
    if os.geteuid() != 0:
        ap.exit(2, f"{ap.prog}: needs root (namespace testbed)\n")
    out = {"hosts": a.hosts, "bytes": a.bytes}
    t0 = time.perf_counter()
    with TestbedNetwork(StarTopo(hosts=a.hosts, rate="155Mbit", mtu=9180, buffer="256KB")) as tb:
        out["rows"] = tb.run(phases, a.hosts, a.bytes, a.rounds, a.calls, tb.switch_ns(), timeout=300)[0]
        out["phase_times"] = []
        for sched in ("at_once", "in_turn") if a.phase_calls else ():
            out["phase_times"].append(tb.run(phase_times, a.hosts, a.bytes, a.phase_calls, sched, timeout=300)[0])
            run.say(json.dumps(out["phase_times"][-1]))
    out["summary"] = summary(out["rows"])
    out["seconds"] = time.perf_counter() - t0
    run.say(json.dumps(out["summary"], indent=1))
    run.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
