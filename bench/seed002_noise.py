"""Noise or model error? The 16-host persistent bcast of seed 002 (4 KiB, 64 KiB, 256 KiB,
1 MiB) timed both ways, each call from its own barrier (``collective_testbed.measure``, the
study's timing) and back to back (``measure_batched``), in interleaved rounds, with the load and
the busiest other processes recorded per round; and how late the ranks leave the benchmark's
barrier at 2..16 hosts (``collective_testbed.barrier_exits``: every rank's CLOCK_MONOTONIC exit
time, one clock on the testbed). The record carries the bench harness's provenance
(``clusterlab.bench.harness``: commit, machine, load, spare CPU, autogroup). Root:

    .venv/bin/python bench/seed002_noise.py   # ~3 min -> bench/results/seed002_noise.json
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from clusterlab.bench import collective_testbed as ct
from clusterlab.bench import harness
from clusterlab.cluster.testbed import StarTopo, TestbedNetwork
from clusterlab.monitor.provenance import load_average

SIZES = [4096, 65536, 262144, 1 << 20]
# the same 16-host bcast by four paths: the benchmark's (the root announces the model's pick, then
# the algorithm; collectives.run), and the scatter-allgather called directly with each rank
# asking the model for its schedule, or told one
PATHS = ("auto", "sag_model", "sag_in_turn", "sag_at_once", "announce")
# "announce": only what the root's announcement costs alone, a flat bcast of one byte


def paths(comm, m: int, rounds: int, calls: int) -> list[dict] | None:
    """``rounds`` x every path of ``PATHS``, ``calls`` bcasts of ``m`` bytes back to back between two
    barriers; rank 0 returns per round and path the slowest rank's time per call."""
    import numpy as np

    from clusterlab.comm import collectives
    from clusterlab.comm.collectives import bcast_scatter_allgather as sag

    data = np.zeros(m, dtype=np.uint8) if comm.rank == 0 else None

    byte = np.zeros(1, dtype=np.uint8) if comm.rank == 0 else None

    def once(path):
        if path == "auto":
            return collectives.run("bcast", comm, None, data=data, root=0)
        if path == "announce":
            return collectives.run("bcast", comm, "flat", data=byte, root=0)
        return sag.run(comm, data, 0, "overlap", {"sag_model": None, "sag_in_turn": "in_turn",
                                                  "sag_at_once": "at_once"}[path])

    rows = []
    for rnd in range(rounds):
        for path in PATHS:
            once(path)
            comm.barrier("dissemination")
            t0 = time.perf_counter()
            for _ in range(calls):
                once(path)
            mine = time.perf_counter() - t0
            every = comm.gather(np.array([mine]), 0, "linear")
            if comm.rank == 0:
                rows.append({"round": rnd, "path": path, "ms_per_call": max(float(np.asarray(e).ravel()[0])
                                                                            for e in every) / calls * 1e3})
    return rows if comm.rank == 0 else None


def others() -> list[str]:
    """The busiest processes other than this run's (pid, nice, %CPU since start, command)."""
    out = subprocess.run(["ps", "-eo", "pid,ni,pcpu,etimes,comm", "--sort=-pcpu"], capture_output=True, text=True,
                         timeout=10).stdout.splitlines()
    return [" ".join(line.split()) for line in out[1:9]]


def autogroup() -> str:
    """This process's scheduler autogroup and its nice (``/proc/self/autogroup``): with autogroup on,
    CFS shares the CPUs between sessions' groups first, so another session's niced job gets as
    much CPU as this whole run's group unless the groups' nice values differ."""
    try:
        return open("/proc/self/autogroup").read().strip()
    except OSError:
        return "no autogroup"


def set_autogroup_nice(nice: int) -> None:
    with open("/proc/self/autogroup", "w") as f:
        f.write(str(nice))


def main(argv=None) -> int:
    ap = harness.parser(__doc__, Path(__file__).parent / "results" / "seed002_noise.json", output_aliases=("--out",))
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the bcast timed both ways (0: only "
                    "the barrier exits; with --paths: twice as many rounds of the paths) (default %(default)s)")
    ap.add_argument("--exit-hosts", default="2,4,6,8,16", help="host counts of the barrier-exit calibration")
    ap.add_argument("--time-per-size", type=float, default=0.4, help="seconds of calls per size (default %(default)s)")
    ap.add_argument("--paths", type=int, default=0, metavar="BYTES",
                    help="only compare the bcast's paths (PATHS) at this size, back to back, in rounds")
    ap.add_argument("--autogroup-nice", type=int, default=None, metavar="N",
                    help="run in a session of its own (setsid) and alternate rounds with its autogroup at nice 0 "
                         "and at N (an A/B of other sessions' niced jobs taking CPU from the run)")
    run = harness.start(ap, argv)
    a = run.args
    if os.geteuid() != 0:
        ap.exit(2, f"{ap.prog}: needs root (namespace testbed)\n")
    out = {"others_start": others(), "autogroup": autogroup(), "exits": {}, "rounds": []}
    t0 = time.perf_counter()
    with TestbedNetwork(StarTopo(hosts=16, rate="155Mbit", mtu=9180, buffer="256KB")) as tb:
        model = ct.fit_model(tb)
        out["model"] = model.to_dict()
        if a.paths:
            import tempfile

            with tempfile.TemporaryDirectory(prefix="clab-model-") as d:
                path = os.path.join(d, "model.json")
                model.save(path)
                env = dict(os.environ, CLUSTERLAB_COSTMODEL=path)
                out["paths"] = tb.run(paths, 16, a.paths, 2 * a.rounds, 20, timeout=300, env=env)[0]
            for p in PATHS:
                got = [r["ms_per_call"] for r in out["paths"] if r["path"] == p]
                run.say(f"{p:12s} {a.paths} B: {statistics.median(got):.2f} ms per call (rounds {got})")
            a.exit_hosts, a.rounds = "", 0
        for n in (int(h) for h in a.exit_hosts.split(",") if h):
            got = tb.run(ct.barrier_exits, n, 100, timeout=300)[0]
            spans = [max(row) for row in got["exits"]]
            out["exits"][str(n)] = {"root_lateness_us": ct.root_lateness(got["exits"]) * 1e6,
                                    "span_us": statistics.median(spans) * 1e6,
                                    "empty_call_us": statistics.median(got["calls"]) * 1e6,
                                    "per_rank_median_us": [statistics.median(row[r] for row in got["exits"]) * 1e6
                                                           for r in range(n)]}
            run.say(n, "hosts", {k: v for k, v in out["exits"][str(n)].items() if k != "per_rank_median_us"})
        for i in range(a.rounds):
            rnd = {"loadavg_start": load_average()}
            if a.autogroup_nice is not None:  # alternate rounds: this session's group at nice 0, then at N
                set_autogroup_nice(a.autogroup_nice if i % 2 else 0)
                rnd["autogroup"] = autogroup()
                got = tb.run(ct.barrier_exits, 16, 100, timeout=300)[0]
                rnd["root_lateness_us"] = ct.root_lateness(got["exits"]) * 1e6
                rnd["exit_span_us"] = statistics.median(max(row) for row in got["exits"]) * 1e6
                run.say(f"round {i} {rnd['autogroup']}: root lateness {rnd['root_lateness_us']:.0f} us, exit span "
                        f"{rnd['exit_span_us']:.0f} us")
            rows = ct.measure(tb, "bcast", SIZES, "persistent", model, nranks=16, time_per_size=a.time_per_size)
            back = ct.measure_batched(tb, "bcast", SIZES, "persistent", model, nranks=16,
                                      time_per_size=a.time_per_size)
            rnd["rows"] = [{"bytes": r["bytes"], "algorithm": r["algorithm"], "barrier_us": r["p50_us"],
                            "predicted_us": r["predicted_us"], "back_to_back_us": b["batched_us"]}
                           for r, b in zip(rows, back, strict=True)]
            rnd.update({"loadavg_end": load_average(), "others": others()})
            for r in rnd["rows"]:
                run.say(f"round {i} {r['bytes']:8d} B barrier {r['barrier_us'] / 1e3:8.2f} ms  back to back "
                        f"{r['back_to_back_us'] / 1e3:8.2f} ms  predicted {r['predicted_us'] / 1e3:8.2f} ms "
                        f"{r['algorithm']}")
            out["rounds"].append(rnd)
    out.update({"others_end": others(), "seconds": time.perf_counter() - t0})
    run.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
