"""Seed 002 Figs. 1-3 on the namespace testbed: MPI_Bcast / MPI_Scatter times against data size
on 6 hosts (Fig. 1) and against host count at 64 KB and 1 MB (Figs. 2-3), with the persistent
mesh and with per-call connections (seed 002's connection set-up per call), each beside the
cost model's prediction (fitted on the testbed's own links) and its error.

Run as root:
    .venv/bin/python bench/seed002.py            # ~5 min
    .venv/bin/python bench/seed002.py --quick                           # 2..4 hosts, a smoke test

``--algorithms flat,paced,...`` times bcast with each named algorithm instead (every one in each
of ``--modes``), on the bridge or the ATM cell switch (``--switch``), optionally with slower
links for some hosts (``--host-rates h1=15.5Mbit``: the slowest receiver the paced broadcast
matches); the rows and the median per line go to ``-o``:
    .venv/bin/python bench/seed002.py --algorithms flat,binomial,scatter_allgather,paced \
        --hosts 6 --host-rates h1=15.5Mbit -o bench/results/seed002_paced.json

Writes bench/results/seed002.json (rows, models, median |error| per (hosts, op, mode)) with the
bench harness's provenance (``clusterlab.bench.harness``: commit, machine, load, spare CPU,
autogroup), and bench/results/seed002.png beside it.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

from clusterlab._atomic import atomic_path
from clusterlab.bench import collective_testbed as ct
from clusterlab.bench import harness
from clusterlab.cluster.testbed import StarTopo, TestbedNetwork
from clusterlab.monitor.provenance import load_average

OPS = ("bcast", "scatter")
RESULTS = Path(__file__).parent / "results"


def main(argv=None) -> int:
    ap = harness.parser(__doc__, RESULTS / "seed002.json", output_aliases=("--out",),
                        output_help="the record, written atomically with its provenance, and its figure beside it "
                                    "(.png; not with --algorithms) (default bench/results/seed002.json)")
    ap.add_argument("--rate", default="155Mbit", help="link rate (seed 002: ATM 155 Mbit/s)")
    ap.add_argument("--mtu", type=int, default=9180, help="MTU (classical IP over ATM: 9180)")
    ap.add_argument("--fig1-hosts", type=int, default=6)
    ap.add_argument("--hosts", default="2,4,6,8,16", help="host counts of Figs. 2-3")
    ap.add_argument("--sizes", default=ap_default_sizes(), help="Fig. 1 sizes (bytes)")
    ap.add_argument("--time-per-size", type=float, default=0.4)
    ap.add_argument("--all-sizes", action="store_true", help="every size at every host count (default: "
                    "the sizes at --fig1-hosts only, 64 KiB and 1 MiB elsewhere)")
    ap.add_argument("--cpu-term", action="store_true", help="fit and use the shared-CPU step term "
                    "(collective_testbed.fit_model's cpu_sizes)")
    ap.add_argument("--batched", action="store_true", help="also time the calls back to back between two "
                    "barriers (collective_testbed.batched), beside each call timed from its own barrier")
    ap.add_argument("--quick", action="store_true", help="2..4 hosts, two sizes")
    ap.add_argument("--algorithms", help="bcast with each of these algorithms (comma list) at every --hosts count, "
                    "64 KiB and 1 MiB unless --sizes is given, instead of Figs. 1-3")
    ap.add_argument("--modes", default="persistent", help="with --algorithms: connection modes (comma list)")
    ap.add_argument("--switch", default="bridge", choices=("bridge", "atm"), help="with --algorithms: the switch")
    ap.add_argument("--host-rates", help="with --algorithms: slower links, e.g. h1=15.5Mbit")
    run = harness.start(ap, argv)
    a = run.args
    if os.geteuid() != 0:
        ap.exit(2, f"{ap.prog}: needs root (namespace testbed)\n")
    if a.algorithms:
        return algorithms(a, run)
    if a.quick:
        a.fig1_hosts, a.hosts, a.sizes, a.time_per_size = 4, "2,4", "65536,1048576", 0.2
    sizes = [int(s) for s in a.sizes.split(",")]
    host_counts = sorted({int(h) for h in a.hosts.split(",")} | {a.fig1_hosts})
    big = max(host_counts)
    t0 = time.perf_counter()
    rows: list[dict] = []
    with TestbedNetwork(StarTopo(hosts=big, rate=a.rate, mtu=a.mtu, buffer="256KB")) as tb:
        model = ct.fit_model(tb, cpu_sizes=ct.CPU_SIZES if a.cpu_term else None)
        run.say(f"model: alpha {model.alpha * 1e6:.1f} us, beta {8 / model.beta / 1e6 if model.beta else 0:.1f} Mbit/s, "
              f"set-up {model.setup * 1e6:.0f} us, overhead {model.overhead * 1e6:.1f} us, CPU per message "
              f"{model.cpu_message * 1e6:.1f} us + {model.cpu_byte * 1e9:.2f} ns/B on {model.cpus:g} CPUs, per-call "
              f"fixed {model.call_setup * 1e3:.2f} ms, window {model.window:.0f} B, root's barrier lateness "
              + ", ".join(f"{k} hosts {v * 1e6:.0f} us" for k, v in model.start_lateness.items()))
        for n in host_counts:
            these = sizes if n == a.fig1_hosts or a.all_sizes else [65536, 1048576]
            for op in OPS:
                for mode in ct.MODES:
                    got = ct.measure(tb, op, these, mode, model, nranks=n, time_per_size=a.time_per_size)
                    for r in got:
                        run.say(f"{n:3d} hosts {op:8s} {mode:10s} {r['bytes']:8d} B  measured {r['p50_us'] / 1e3:8.2f} ms"
                                f"  predicted {r['predicted_us'] / 1e3:8.2f} ms  error {r['relative_error']:+.0%}"
                                f"  {r['algorithm']}")
                    rows += got
                    if a.batched:
                        by = {r["bytes"]: r for r in got}
                        for b in ct.measure_batched(tb, op, these, mode, model, nranks=n,
                                                    time_per_size=a.time_per_size):
                            row = by[b["bytes"]]
                            row.update({"batched_us": b["batched_us"], "batched_calls": b["calls"],
                                        "batched_algorithm": b["algorithm"], "batched_error": b["batched_error"]})
                            run.say(f"{n:3d} hosts {op:8s} {mode:10s} {b['bytes']:8d} B  back to back "
                                    f"{b['batched_us'] / 1e3:8.2f} ms  predicted {b['predicted_us'] / 1e3:8.2f} ms  "
                                    f"error {b['batched_error']:+.0%}")
    summary, links_only, batched_summary = {}, {}, {}
    for n in host_counts:
        for op in OPS:
            for mode in ct.MODES:
                sel = [r for r in rows if r["hosts"] == n and r["op"] == op and r["connections"] == mode]
                if sel:
                    summary[f"{n} hosts {op} {mode}"] = round(ct.median_abs_error(sel), 3)
                    back = [abs(r["batched_error"]) for r in sel if r.get("batched_error") is not None]
                    if back:
                        batched_summary[f"{n} hosts {op} {mode}"] = round(statistics.median(back), 3)
                    links = [abs(r["p50_us"] / r["predicted_links_only_us"] - 1) for r in sel
                             if r.get("predicted_links_only_us")]
                    if links:
                        links_only[f"{n} hosts {op} {mode}"] = round(statistics.median(links), 3)
    out = {"rate": a.rate, "mtu": a.mtu, "fig1_hosts": a.fig1_hosts, "hosts": host_counts,
           "model": model.to_dict(), "rows": rows, "median_abs_error": summary,
           "median_abs_error_links_only": links_only,
           "median_abs_error_batched": batched_summary,
           "seconds": time.perf_counter() - t0,
           "note": "p50 of the slowest rank per call, each call timed from its own barrier, vs the cost model "
                   "fitted on the same testbed's links (predicted_us: the call plus the root's calibrated barrier "
                   "lateness, CostModel.predict_from_barrier; predicted_call_us: the call alone); batched_us: "
                   "calls back to back, against the call alone; predicted_links_only_us: without the shared-CPU "
                   "step term (--cpu-term)"}
    for k, v in summary.items():
        run.say(f"median |error| {k}: {v:.0%}" + (f" (back to back: {batched_summary[k]:.0%})" if k in batched_summary
                                                  else ""))
    run.write(out)
    plot(out, run.output.with_suffix(".png"))
    return 0


def algorithms(a, run: harness.Run) -> int:
    """``--algorithms``: bcast with each named algorithm in each mode at each host count."""
    from clusterlab.comm import collectives

    names = [x for x in a.algorithms.split(",") if x]
    modes = [x for x in a.modes.split(",") if x]
    bad = [x for x in names if x not in collectives.ALGORITHMS["bcast"]] + [m for m in modes if m not in ct.MODES]
    if bad:
        print(f"seed002.py: --algorithms/--modes: {', '.join(bad)} unknown (bcast: "
              f"{', '.join(sorted(collectives.ALGORITHMS['bcast']))}; modes: {', '.join(ct.MODES)})", file=sys.stderr)
        return 2
    sizes = [int(x) for x in a.sizes.split(",")] if a.sizes != ap_default_sizes() else [65536, 1048576]
    hosts = sorted({int(h) for h in a.hosts.split(",")})
    kw = {"switch": "atm", "rate": "155.52Mbit", "buffer": "1000cells"} if a.switch == "atm" else \
        {"rate": a.rate, "mtu": a.mtu, "buffer": "256KB", "host_rates": a.host_rates}
    t0 = time.perf_counter()
    rows: list[dict] = []
    with TestbedNetwork(StarTopo(hosts=max(hosts), **kw)) as tb:
        model = ct.fit_model(tb)
        for n in hosts:
            for name in names:
                for mode in modes:
                    got = ct.measure(tb, "bcast", sizes, mode, model, nranks=n, time_per_size=a.time_per_size,
                                     algorithm=name)
                    for r in got:
                        r["load"] = (load_average() or [None])[0]
                        run.say(f"{n:3d} hosts {name:18s} {mode:10s} {r['bytes']:8d} B  p50 {r['p50_us'] / 1e3:8.2f} ms"
                                f"  predicted {r['predicted_us'] / 1e3:8.2f} ms  load {r['load']}")
                    rows += got
    out = {"switch": a.switch, "topology": {k: v for k, v in kw.items() if v is not None}, "hosts": hosts,
           "algorithms": names, "modes": modes, "model": model.to_dict(), "rows": rows,
           "p50_ms": {f"{r['hosts']} hosts {r['algorithm']} {r['connections']} {r['bytes']}": round(r["p50_us"] / 1e3, 3)
                      for r in rows},
           "seconds": time.perf_counter() - t0,
           "note": "p50 over calls of the slowest rank, each call timed from its own barrier (bench.collective), "
                   "bcast with the named algorithm; predicted_us: the cost model fitted on the same testbed"}
    run.write(out)
    return 0


def ap_default_sizes() -> str:
    return "1024,4096,16384,65536,262144,1048576"


def plot(out: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = out["rows"]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    style = {"persistent": "-", "per_call": "--"}
    for op, color in zip(OPS, ("C0", "C1"), strict=True):
        for mode in ct.MODES:
            sel = sorted((r for r in rows if r["hosts"] == out["fig1_hosts"] and r["op"] == op
                          and r["connections"] == mode), key=lambda r: r["bytes"])
            x = [r["bytes"] / 1024 for r in sel]
            axes[0].plot(x, [r["p50_us"] / 1e3 for r in sel], style[mode], color=color, marker="o",
                         label=f"{op} {mode} measured")
            axes[0].plot(x, [r["predicted_us"] / 1e3 for r in sel], style[mode], color=color, alpha=0.4,
                         marker="x", label=f"{op} {mode} model")
            for ax, size in ((axes[1], 65536), (axes[2], 1048576)):
                sel = sorted((r for r in rows if r["bytes"] == size and r["op"] == op and r["connections"] == mode),
                             key=lambda r: r["hosts"])
                ax.plot([r["hosts"] for r in sel], [r["p50_us"] / 1e3 for r in sel], style[mode], color=color,
                        marker="o", label=f"{op} {mode} measured")
                ax.plot([r["hosts"] for r in sel], [r["predicted_us"] / 1e3 for r in sel], style[mode], color=color,
                        alpha=0.4, marker="x", label=f"{op} {mode} model")
    axes[0].set(xscale="log", yscale="log", xlabel="data size (KB)", ylabel="time (ms)",
                title=f"Fig. 1: {out['fig1_hosts']} hosts, {out['rate']}")
    axes[1].set(xlabel="hosts", ylabel="time (ms)", title="Fig. 2: 64 KB")
    axes[2].set(xlabel="hosts", ylabel="time (ms)", title="Fig. 3: 1 MB")
    for ax in axes:
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=6)
    errs = ", ".join(f"{k}: {v:.0%}" for k, v in out["median_abs_error"].items() if k.startswith(f"{out['fig1_hosts']} "))
    fig.suptitle(f"seed 002 on the testbed (median |model error| at {out['fig1_hosts']} hosts: {errs})", fontsize=9)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
