#!/usr/bin/env python3
"""Write ``bench/results/README.md``: one line per benchmark record in ``bench/results/``, with
what it measures, the command that reproduces it and the provenance its JSON holds. A record
written through the bench harness (``clusterlab.bench.harness``) has a ``provenance`` block:
its date, commit (and whether the checkout had local changes), load average before -> after,
spare CPU and autogroup are read from there. An older record is searched for what it holds
(a date, commit or load under one of the names used before the harness); "not recorded"
where it has none, "no provenance" where it has nothing at all (``git log --
bench/results/NAME`` then says when it was committed). Not a benchmark; it runs nothing.

    .venv/bin/python bench/results_readme.py           # rewrite the README
    .venv/bin/python bench/results_readme.py --check   # exit 1 if the README is stale

``RECORDS`` is the list of records: a file in ``bench/results/`` that is not listed there (or
as a figure of one) is not a record, and ``tests/test_bench_results.py`` fails on it. A new
run of a benchmark replaces its record (git keeps the history); a run that is not the record
(an A/B, an attempt, raw repetitions) goes under ``runs/`` (out of git) and its story in
``docs/notes/``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
PY = ".venv/bin/python"


@dataclass(frozen=True)
class Record:
    name: str  # the JSON in bench/results
    what: str
    command: str
    figures: tuple[str, ...] = ()
    doc: str = ""  # where the docs read it


RECORDS = (
    Record("auto_model.json", "every mining kernel's time per row (sparse, dense, seed000-style), the model behind "
           "`mine(algorithm=\"auto\")`", f"{PY} bench/auto_model.py", doc="docs/mining.md"),
    Record("comm.json", "the communication layer vs iperf3 (bandwidth), NPtcp (1-byte latency by placement) and MPICH "
           "(collectives over TCP and over UCX shared memory), 8 ranks", f"{PY} bench/comm.py --runs 2",
           doc="docs/collectives.md, docs/comm.md"),
    Record("comm_latency_ab.json", "1-byte half round trip of this checkout vs the one before the Rust send/recv "
           "path, with NPtcp, per CPU placement", f"{PY} bench/comm_latency_ab.py --baseline CHECKOUT --runs 8",
           doc="docs/comm.md"),
    Record("diagnose_corpus.json", "the diagnosis corpus: whether each injected cause is named first, predicted vs "
           "measured gain of the fix", f"sudo {PY} bench/diagnose_corpus.py", doc="docs/diagnose.md"),
    Record("fim.json", "frequent itemset mining vs pyfim, mlxtend and efficient-apriori: time and peak memory per row",
           f"{PY} bench/fim.py", ("fim.png",), doc="docs/mining.md"),
    Record("first_call.json", "the fixed cost of a first mining call: `clusterlab mine T10I4D100K.dat -s 0.01` (a fresh "
           "process each run) vs later calls in one process, the first call split into its parts",
           f"{PY} bench/first_call.py", doc="docs/mining.md"),
    Record("fuzz_parsers.json", "a long fuzz of the FIMI and CSV basket parsers (runs, crashes)",
           f"{PY} bench/fuzz_parsers.py --seconds 120"),
    Record("generate.json", "generating the seed000 workload and parsing it back, against issue targets",
           f"{PY} bench/generate.py", doc="docs/generator.md"),
    Record("hpa_block_size.json", "HPA with seed 000's scheme on the full seed000 file against the message block size",
           f"{PY} bench/hpa_block_size.py --file /work/data/seed000.dat --repeat 2 --baseline MAIN/python --apriori 2",
           doc="docs/parallel.md"),
    Record("lists.json", "input from Python lists: list conversion vs pyfim's mining", f"{PY} bench/lists.py",
           doc="docs/mining.md"),
    Record("monitor_rtt.json", "what sampling the hosts' round trips (NETLINK_SOCK_DIAG, one host per sample) costs "
           "the testbed monitor per sample, against the monitor without it, at 4 and 16 hosts",
           f"{PY} bench/monitor_rtt.py", doc="docs/testbed.md"),
    Record("npb.json", "NPB kernels in clusterlab vs the official NPB serial build, per kernel and class",
           f"{PY} bench/npb.py --npb-cpu-bin DIR --classes S,W,A --build \"how the binaries were built\"",
           doc="docs/npb.md"),
    Record("npb_verify.json", "NPB verification on every kernel, class S/W/A, 1-8 ranks, backends inproc/tcp/mpi",
           f"{PY} bench/npb_verify.py", doc="docs/npb.md"),
    Record("packed_codec.json", "the packed-basket decoder and HPA's reduce_transactions, old vs new code in one run",
           f"{PY} bench/packed_codec.py --base BASE", doc="docs/notes/storage.md"),
    Record("parallel.json", "HPA/PFP/CD/HPA-ELD on 2 local ranks vs the sequential engine and pyfim, 1M "
           "seed000-style transactions at 0.7%", f"{PY} bench/parallel.py --repeat 3", doc="docs/parallel.md"),
    Record("parallel_seed000.json", "the same on the full seed000 file (issue 11's targets): wall, CPU, memory",
           f"{PY} bench/parallel.py --seed000 /work/data/seed000.dat", doc="docs/parallel.md"),
    Record("replay_compute_scaling.json", "the computation a replay waits per rank against the rank count",
           f"{PY} bench/replay_compute_scaling.py --ranks 1,4,16,64,100", doc="docs/studies.md"),
    Record("replay_validation.json", "compute replay vs real HPA runs on the testbed (4, 8, 16 hosts)",
           f"sudo {PY} bench/replay_validation.py", doc="docs/studies.md, docs/parallel.md (read by the runner)"),
    Record("seed000_fig2_stack.json", "seed 000 Fig. 2's hypothesis: the 16/32/100-host broadcast with MAX 1 s and 60 s, "
           "Linux vs seed-era TCP (per-round results of `clusterlab bench broadcast --json`)",
           "clusterlab bench broadcast --json --hosts N [--dilation k] --rto-min 200ms --rto-max {1s,60s} "
           "[--transport stack=seed-era] (one run per tag in the JSON)", doc="docs/studies.md"),
    Record("seed000_sequential.json", "sequential mining of the full seed000 file against Count Distribution on one "
           "rank (issue 30, item 2): read + mine time, CPU and peak memory per kernel, interleaved rounds",
           f"{PY} bench/seed000_sequential.py /work/data/seed000.dat --repeat 3", doc="docs/mining.md"),
    Record("seed002.json", "seed 002 Figs. 1-3 on the testbed: bcast/scatter time vs size (6 hosts) and vs hosts "
           "(2-16), persistent and per-call connections, against the cost model", f"{PY} bench/seed002.py",
           ("seed002.png",), doc="docs/collectives.md"),
    Record("seed002_batched.json", "the cost model's accuracy record: 6 and 16 hosts, 4 KiB-1 MiB, each call from its "
           "own barrier and back to back", f"{PY} bench/seed002.py --hosts 6,16 --sizes 4096,65536,262144,1048576 "
           "--all-sizes --batched -o bench/results/seed002_batched.json", ("seed002_batched.png",),
           doc="docs/collectives.md, docs/studies.md"),
    Record("seed002_cpu_model.json", "the cost model with the shared-CPU step term (`--cpu-term`), 6 and 16 hosts: why "
           "the term is off by default", f"{PY} bench/seed002.py --hosts 6,16 --all-sizes --cpu-term "
           "-o bench/results/seed002_cpu_model.json", ("seed002_cpu_model.png",), doc="docs/studies.md"),
    Record("seed002_in_situ.json", "where the 16-host bcast's time goes: wall, CPU of all ranks, context switches per "
           "call vs the model's link price (allgather ring, bcast)", f"{PY} bench/seed002_in_situ.py",
           doc="docs/studies.md"),
    Record("seed002_in_situ_scatter.json", "the same for the 16-host scatter",
           f"{PY} bench/seed002_in_situ.py --only scatter -o bench/results/seed002_in_situ_scatter.json",
           doc="docs/studies.md"),
    Record("seed002_paced.json", "every point-to-point bcast (flat, binomial, scatter-allgather, the rate-paced one) "
           "on 6 hosts with one slow receiver (h1 at 15.5 Mbit/s, the others 155), 64 KiB and 1 MiB",
           f"sudo {PY} bench/seed002.py --algorithms flat,binomial,scatter_allgather,paced --hosts 6 "
           "--host-rates h1=15.5Mbit -o bench/results/seed002_paced.json", doc="docs/collectives.md"),
    Record("seed002_noise.json", "noise or model error: the 16-host persistent bcast timed from its barrier and back "
           "to back, interleaved rounds, with the load and the busiest other processes", f"{PY} bench/seed002_noise.py",
           doc="docs/collectives.md"),
    Record("seed002_noise_paths_64k.json", "the 64 KiB bcast through each code path (collectives.run, the "
           "scatter-allgather directly, in turn, at once, a flat 1-byte bcast)",
           f"{PY} bench/seed002_noise.py --paths 65536 --rounds 8 -o bench/results/seed002_noise_paths_64k.json",
           doc="docs/collectives.md, docs/studies.md"),
    Record("seed002_phases.json", "the scatter-allgather bcast's phases at 16 hosts, 1 MiB: scatter at once vs in "
           "turn, ring overlapped/after neighbours/after a barrier, phase times", f"{PY} bench/seed002_phases.py",
           doc="docs/studies.md"),
    Record("seed002_phases_256k.json", "the same A/B at 256 KiB",
           f"{PY} bench/seed002_phases.py --bytes 262144 -o bench/results/seed002_phases_256k.json",
           doc="docs/studies.md"),
    Record("seed002_phases_64k.json", "the same A/B at 64 KiB",
           f"{PY} bench/seed002_phases.py --bytes 65536 -o bench/results/seed002_phases_64k.json",
           doc="docs/studies.md, tests/comm/test_bcast_scatter_allgather.py"),
    Record("sim_calibration.json", "the simulated cluster (SimGrid) calibrated from an 8-host testbed: ping-pong and "
           "small broadcast rounds, the fitted latency, bandwidth factor and per-message overhead",
           "sudo clusterlab tune sim --hosts 8 --rate 155Mbit -o bench/results/sim_calibration.json",
           doc="docs/simulation.md"),
    Record("sim_loss_model.json", "the simulated cluster's loss/timeout model fitted to recorded testbed broadcast "
           "rounds (seed000-fig2/fig3/buffer tables, seed000_fig2_stack.json) and checked on sim_validation.json's "
           "points held out: parameters, every point's observed and modelled wait", f"{PY} bench/sim_loss_fit.py",
           doc="docs/simulation.md"),
    Record("sim_replay_validation.json", "the same HPA recording (seed000:1M) replayed on the testbed (k = 3) and on the "
           "simulated cluster (calibrated; flows alone and with the loss model per pass) at 8, 16, 32 and 64 hosts: job times, per pass, errors",
           f"sudo {PY} bench/sim_replay_validation.py", doc="docs/simulation.md"),
    Record("sim_scale.json", "one all-to-all broadcast round simulated on 100, 300 and 1,000 hosts: wall time and "
           "peak memory of the engine", f"{PY} bench/sim_scale.py", doc="docs/simulation.md"),
    Record("sim_validation.json", "simulated (calibrated in the same run; flow model alone and plus the loss model) "
           "vs testbed median broadcast round (50 KB and 2 KB, default timers) at 8, 16 and 32 hosts, the errors per "
           "point", f"sudo {PY} bench/sim_validation.py", doc="docs/simulation.md"),
    Record("soak.json", "300 all-to-all rounds of 50 KB on 16 ranks (loopback, and 16 testbed hosts): each "
           "process's resident memory, its slope per 100 rounds after the warm-up and a verdict (flat, steps, grows)",
           f"{PY} bench/soak.py && sudo {PY} bench/soak.py --testbed", doc="docs/testbed.md"),
    Record("storage.json", "iSCSI (tgt + libiscsi) sequential write/read on the testbed vs local, per link rate, "
           "initiator count and connections", f"sudo {PY} bench/storage.py --size 16MB", doc="docs/storage.md"),
    Record("storage_1gbit.json", "the same at 1 Gbit/s (the seed's rate), 64 MB per initiator",
           f"sudo {PY} bench/storage.py --rates 1Gbit --counts 1,8 --connections 4 --size 64MB --reps 2 "
           "--out bench/results/storage_1gbit.json", doc="docs/storage.md"),
    Record("storage_throttled.json", "the same with the target's backing store throttled to 60 MB/s, with and without "
           "a SAN", f"sudo {PY} bench/storage.py --backing-rate 60MB --san both --out bench/results/storage_throttled.json",
           doc="docs/storage.md"),
    Record("storage_mining.json", "HPA/PFP/CD on 4 testbed hosts reading their data through iSCSI vs locally, "
           "10 Gbit/s, packed and text layouts (issue 13's 1.3x target)",
           f"sudo {PY} bench/storage.py --mining 1000000 --counts 4 --rates 10Gbit --reps 6 --layout packed,fimi",
           doc="docs/storage.md"),
    Record("storage_mining_1gbit.json", "the same at 1 Gbit/s, packed layout",
           f"sudo {PY} bench/storage.py --mining 1000000 --counts 4 --rates 1Gbit --reps 4 "
           "--out bench/results/storage_mining_1gbit.json", doc="docs/storage.md"),
    Record("storage_mining_transfer.json", "the same at 10 Gbit/s with the links' tbf bucket (two frames vs 100 us) and "
           "the storage host's congestion control (reno vs BBR): the evidence for the bucket default",
           f"sudo {PY} bench/storage.py --mining 1000000 --counts 4 --rates 10Gbit --reps 5 "
           "--tbf-bucket auto,1us --congestion reno,bbr --out bench/results/storage_mining_transfer.json",
           doc="docs/storage.md, cluster/testbed/link.py"),
    Record("stream.json", "mining results larger than memory (`--memory`) vs in memory vs pyfim: time, peak memory",
           f"{PY} bench/stream.py", doc="docs/mining.md"),
    Record("stream_chess_low.json", "the same at chess 20% and 15% (0.29 and 1.0 billion itemsets): streamed within "
           "`--memory 2GB`, the in-memory run at its cap, pyfim given 120 s", f"{PY} bench/stream.py --rows chess20,chess15 "
           "--timeout 1800 --pyfim-timeout 120 -o bench/results/stream_chess_low.json", doc="docs/mining.md"),
    Record("stream_parallel.json", "the same on 2 ranks (`mine -n 2 -a hpa|cd|pfp --memory 1GB` per rank): each "
           "rank's peak streamed vs in memory, bytes spilled, whether the two files are the same bytes",
           f"{PY} bench/stream.py --nodes 2 --algorithms hpa,cd,pfp --rows chess50,chess40 --memory 1GB --timeout 400 "
           "-o bench/results/stream_parallel.json", doc="docs/mining.md"),
    Record("stream_rules.json", "the same with association rules (`--rules`, confidence 0.9): out of core from the "
           "streamed itemset file vs rules() in memory", f"{PY} bench/stream.py --rows chess50,t10-0.005 --rules 0.9 "
           "-o bench/results/stream_rules.json", doc="docs/mining.md"),
    Record("switch.json", "the ATM cell switch: UBR/PPD/EPD ordering under a TCP incast, and what it costs the machine",
           f"sudo {PY} bench/switch.py --incast 3 --cost 3", doc="docs/atm.md"),
    Record("testbed.json", "the namespace testbed against issue 10's targets: bring-up/teardown, the 16-host incast "
           "table, dilation agreement, 100 hosts", f"sudo {PY} bench/testbed.py --reps 5 --hosts100",
           doc="docs/testbed.md"),
    Record("transport_pingpong.json", "quick transport check: the TCP mesh and MPI backend vs NPtcp and iperf3",
           f"{PY} bench/transport_pingpong.py --quick"),
    Record("tune_auto.json", "`tune auto` vs the full grid on the 16-host incast (search, grid, comparison, replay)",
           f"sudo {PY} bench/tune_auto.py search; ... grid; ... compare", doc="docs/tune.md"),
    Record("tune_auto_hpa.json", "the same with an HPA job as the objective (6 hosts, seed000:200K)",
           f"sudo {PY} bench/tune_auto.py search --workload hpa; ... grid --workload hpa; ... compare --workload hpa",
           doc="docs/tune.md"),
    Record("tune_buffers.json", "`clusterlab tune buffers`: three runs each of seed003.toml and seed003-large.toml on "
           "8 testbed hosts (chosen values, counts, per-value sums)",
           "sudo clusterlab tune buffers --config python/clusterlab/tune/configs/seed003.toml -o DIR (3 runs; then seed003-large.toml)",
           ("tune_buffers_rmem.png", "tune_buffers_fig5.png"), doc="docs/tune.md"),
    Record("wan.json", "the WAN delay line against issue 14's targets: rate, RTT, CPU, incremental CPU, idle RTT",
           f"sudo {PY} bench/wan.py", doc="docs/testbed.md"),
    Record("wan_cells.json", "goodput through the WAN cell line vs offered UDP rate, discard none/PPD/EPD, MTU 1500 "
           "and 9000", f"sudo nice -n 10 {PY} bench/wan_cells.py", doc="docs/atm.md"),
    Record("wan_overload.json", "the WAN line overloaded: UDP both ways at 40-100 Mbit/s each on the 135 Mbit/s line, delivered vs offered",
           f"sudo {PY} bench/wan.py --sweep-only -o bench/results/wan_overload.json", ("wan_overload.png",),
           doc="docs/testbed.md"),
)

DATE = re.compile(r"^(started|when|date|finished)$")
COMMIT = re.compile(r"^(commit|head|revision)$")
BEFORE = re.compile(r"^(load_before|loadavg_before|load_avg_start|loadavg_start|load_at_start|load_average)$")
AFTER = re.compile(r"^(load_after|loadavg_after|load_avg_end|loadavg_end|load_at_end)$")


def _find(doc, pattern: re.Pattern, depth: int = 4):
    """The first value (breadth first over dicts, not lists) whose key matches, with its path."""
    level = [("", doc)]
    for _ in range(depth):
        nxt = []
        for path, d in level:
            if not isinstance(d, dict):
                continue
            for k, v in d.items():
                if pattern.match(k) and v not in (None, "", []):
                    return f"{path}{k}", v
                if k == "commits" and isinstance(v, dict) and pattern is COMMIT and "this" in v:
                    return f"{path}commits.this", v["this"]
                if isinstance(v, dict):
                    nxt.append((f"{path}{k}.", v))
        level = nxt
    return None, None


def _load1(v) -> str:
    """The 1-minute load of a recorded load average (list, '1.1 1.7 ...' or a number)."""
    if isinstance(v, (list, tuple)):
        v = v[0]
    if isinstance(v, str):
        v = v.split()[0]
    return f"{float(v):.1f}"


def _harness(p: dict) -> dict[str, str]:
    """What the table shows of a harness provenance block."""
    rev = (p.get("git") or {}).get("revision")
    dirty = (p.get("git") or {}).get("dirty")
    b, a = p.get("load_before"), p.get("load_after")
    spare = p.get("cpu_spare")
    return {"date": str(p["date"]).replace("T", " ")[:16],
            "commit": (rev[:10] + (" (dirty)" if dirty else "")) if rev else "not recorded",
            "load": (f"{_load1(b)} -> {_load1(a)}" if a else _load1(b)) if b else "not recorded",
            "spare": (f"{spare:.0%}" if spare is not None else "not recorded")
                     + f", autogroup {'on' if p.get('sched_autogroup') else 'off'}"}


def provenance(doc) -> dict[str, str]:
    p = doc.get("provenance") if isinstance(doc, dict) else None
    if isinstance(p, dict) and "format" in p and "date" in p:
        return _harness(p)
    out = {}
    path, v = _find(doc, DATE)
    out["date"] = str(v).replace("T", " ")[:16] + (f" (`{path}`)" if "." in path else "") if v else "not recorded"
    path, v = _find(doc, COMMIT)
    if isinstance(v, dict):
        v = v.get("revision")
    out["commit"] = str(v)[:10] if v else "not recorded"
    _, b = _find(doc, BEFORE)
    _, a = _find(doc, AFTER)
    out["load"] = (f"{_load1(b)} -> {_load1(a)}" if a is not None else _load1(b)) if b is not None else "not recorded"
    if set(out.values()) == {"not recorded"}:
        out = dict.fromkeys(out, "no provenance")
    out["spare"] = "not recorded"
    return out


def render(results: Path = RESULTS) -> str:
    lines = [
        "# Benchmark records",
        "",
        "One record per benchmark (or per configuration the docs quote), written by the script in the",
        "command column; a new run replaces the record and git keeps the history. A/B runs, attempts",
        "and raw repetitions are not kept here (they go under `runs/`, out of git; their story is in",
        "`docs/notes/`). Generated by `.venv/bin/python bench/results_readme.py` from the JSON files.",
        "",
        "Provenance: a record written through the bench harness (`clusterlab.bench.harness`) carries a",
        "`provenance` block (date, commit and whether the checkout had local changes, machine, load",
        "average before and after, spare CPU over the run and whether the scheduler's autogroup was on);",
        "the columns below come from it. Older records show what their JSON holds: \"not recorded\"",
        "where it has none of a field, \"no provenance\" where it has no date, commit or load at all",
        "(`git log -- bench/results/NAME` says when it was committed). Load is the 1-minute load average",
        "of the whole machine (2 cores, shared); spare CPU is the share of the machine's CPU time the run",
        "did not use and no other work took.",
        "",
        "| record | what it measures | command | date (UTC) | commit | load | spare CPU, autogroup | read by |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in RECORDS:
        p = provenance(json.loads((results / r.name).read_text()))
        name = f"[{r.name}]({r.name})" + "".join(f"<br>[{f}]({f})" for f in r.figures)
        lines.append(f"| {name} | {r.what} | `{r.command}` | {p['date']} | {p['commit']} | {p['load']} | {p['spare']} | "
                     f"{r.doc or '-'} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if bench/results/README.md is not what this writes")
    a = ap.parse_args()
    text = render()
    readme = RESULTS / "README.md"
    if a.check:
        if not readme.exists() or readme.read_text() != text:
            print(f"{readme} is stale: run {PY} bench/results_readme.py", file=sys.stderr)
            sys.exit(1)
        return
    from clusterlab._atomic import atomic_open

    with atomic_open(readme) as f:
        f.write(text)
    print(f"-> {readme}")


if __name__ == "__main__":
    main()
