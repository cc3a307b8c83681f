"""Plots and a summary of one monitor table: traffic over time (all hosts and each host), packet-length
histogram, TCP retransmissions/timeouts, switch drops and backlog, CPU, and, when the table
has per-host CPU (``Monitor(host_cpu=True)``), Ganglia-style storage panels as in seed 001's
Figs. 5-7: the target's network, CPU and storage I/O, and an initiator's CPU.

With dilation k the plots show undilated time (t / k) and rates (x k), as the network would
have run at full speed.

>>> import pyarrow as pa
>>> from clusterlab.monitor.sampler import SCHEMA
>>> t = pa.Table.from_pydict({"t": [0.1, 0.1, 0.2], "node": ["h0", "machine", "machine"],
...     "iface": ["eth0", "", ""], "metric": ["tx_bytes", "cpu_idle", "cpu_idle"],
...     "bucket": [-1, -1, -1], "value": [1e6, 0.05, 0.10]}, schema=SCHEMA)
>>> s = summarize(t, {"interval": 0.1, "dilation": 1.0})
>>> s["cpu_bound"], s["mean_cpu_idle"], s["tx_bytes"]
(True, 0.075, 1000000)
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa

from clusterlab.monitor.procfs import CPU_BOUND_SPARE, cpu_bound

TCP_PLOTTED = ("TcpRetransSegs", "TcpExtTCPTimeouts", "TcpExtTCPLossProbes")


def _df(tbl: pa.Table):
    return tbl.to_pandas()


def summarize(tbl: pa.Table, meta: dict) -> dict:
    """Totals of a run: bytes, packets, retransmissions, timeouts, drops, CPU idle and spare, and
    whether the run was CPU-bound (mean spare CPU below 15%: idle, I/O wait and niced background
    work, which yields to the run; below it times measure the CPU, not the network)."""
    df = _df(tbl)
    k = float(meta.get("dilation", 1.0) or 1.0)
    hosts = df[(df.node != "switch") & (df.node != "machine")]

    def total(frame, metric):
        return int(frame.loc[frame.metric == metric, "value"].sum())

    idle = df.loc[df.metric == "cpu_idle", "value"]
    spare = df.loc[df.metric == "cpu_spare", "value"]
    out = {
        "duration_seconds": round(float(meta.get("duration", df.t.max() if len(df) else 0.0)) / k, 3),
        "dilation": k,
        "interval": meta.get("interval"),
        "samples": meta.get("samples"),
        "late_samples": meta.get("late_samples"),
        "tx_bytes": total(hosts, "tx_bytes"),
        "tx_packets": total(hosts, "tx_packets"),
        "retransmissions": total(hosts, "TcpRetransSegs"),
        "timeouts": total(hosts, "TcpExtTCPTimeouts"),
        "loss_probes": total(hosts, "TcpExtTCPLossProbes"),
        "switch_drops": total(df[df.node == "switch"], "qdisc_drops"),
        "host_queue_drops": total(hosts, "qdisc_drops"),
        # the ATM switch: cells lost at full port buffers, frames lost at reassembly, link time
        # (cells) spent on frames that were lost
        "atm_cells_dropped": total(df[df.node == "switch"], "atm_cells_dropped"),
        "atm_frames_lost": total(df[df.node == "switch"], "atm_frames_lost"),
        "atm_cells_wasted": total(df[df.node == "switch"], "atm_cells_wasted"),
        "mean_cpu_idle": round(float(idle.mean()), 3) if len(idle) else None,
        "mean_cpu_spare": round(float(spare.mean()), 3) if len(spare) else None,
        "capture": meta.get("capture"),
    }
    out["cpu_bound"] = cpu_bound(out, "mean_cpu_spare", "mean_cpu_idle")
    return out


def _rates(df, k: float, dt: float):
    """``per_s(series, node)``: a counter series indexed by real t -> undilated per-second rates.
    Each node's true sampling intervals (real seconds, keyed by node and t) divide, not the
    nominal interval (ticks can be late)."""
    ivl = {n: g.set_index("t")["value"] for n, g in df[df.metric == "interval_seconds"].groupby("node")}

    def per_s(series, node="machine"):
        iv = ivl.get(node, ivl.get("machine"))
        dts = iv.reindex(series.index).to_numpy() / k if iv is not None else np.full(len(series), np.nan)
        dts[~(dts > 0)] = dt
        return series.to_numpy() / dts
    return per_s


def sample_rounds(df) -> np.ndarray:
    """The real start time of each sample round, ascending. The sampler opens every round with
    the machine's ``interval_seconds`` row and then reads node after node, each at its own
    ``t`` (visiting 100 namespaces takes a while): a row belongs to the last round opened at or
    before its ``t``. A table without machine rows falls back to the nominal ticks."""
    opened = np.sort(df.loc[(df.node == "machine") & (df.metric == "interval_seconds"), "t"].unique())
    if len(opened):
        return opened
    iv = df.loc[df.metric == "interval_seconds", "value"]
    dt = float(iv.median()) if len(iv) else 0.1
    return np.arange(0.0, float(df.t.max()) + dt, dt) if len(df) else np.zeros(0)


def per_round(rows, rounds: np.ndarray):
    """A counter's increases summed over all nodes within each sample round (0 where no row:
    a counter row that would be 0 is left out), as a numpy array aligned with ``rounds``."""
    out = np.zeros(len(rounds))
    if len(rows) and len(rounds):
        i = np.clip(np.searchsorted(rounds, rows["t"].to_numpy(), side="right") - 1, 0, len(rounds) - 1)
        np.add.at(out, i, rows["value"].to_numpy())
    return out


def storage_panels(tbl: pa.Table, meta: dict, path, title: str = "", df=None) -> dict | None:
    """Seed 001's Ganglia-style panels (its Figs. 5-7) as one PNG at ``path``: the target's
    network in and out, its CPU (user, system) with its threads waiting for the disk, its
    backing store's reads and writes (the throttled cgroup's, else the machine's disks), and
    the first initiator's CPU, over time. The target is ``meta["storage_host"]`` (``st`` when
    not named). Returns the panels' means (MB/s, cores, threads), or None when the table has
    no per-host CPU (``Monitor(host_cpu=True)``) and nothing is drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from clusterlab._atomic import atomic_path

    df = _df(tbl) if df is None else df
    hc = df[df.metric.isin(["host_cpu_user", "host_cpu_system", "host_io_wait"])]
    if not len(hc):
        return None
    k = float(meta.get("dilation", 1.0) or 1.0)
    dt = float(meta.get("interval", 0.1)) / k
    per_s = _rates(df, k, dt)
    if "tu" not in df:
        df = df.assign(tu=df["t"] / k)
        hc = df[df.metric.isin(["host_cpu_user", "host_cpu_system", "host_io_wait"])]
    tlabel = "time [s]" + (f" (undilated, k={k:g})" if k != 1 else "")
    named = meta.get("storage_host") or "st"
    target = named if (hc.node == named).any() else None
    initiator = next((n for n in sorted(hc.node.unique(), key=lambda n: (len(n), n)) if n != target), None)
    span = float(meta.get("duration") or (df.t.max() if len(df) else 0.0)) / k or 1e-9
    cores = float(meta.get("cpus") or os.cpu_count() or 1)  # the machine sampled (its run's meta), else this one
    # "impossible": samples no machine could produce (a monitor bug to name, not a measurement)
    summary: dict = {"target": target, "initiator": initiator, "cpus": cores, "impossible": []}
    fig, axes = plt.subplots(2, 2, figsize=(12, 7))
    (a_net, a_cpu), (a_io, a_ini) = axes
    def smooth(t, rates):
        # the blkio throttle moves data in 0.1 s slices, which alias with 0.1 s samples into
        # every-other-sample spikes: draw the mean of the last 0.5 s (Ganglia averages far longer)
        import pandas as pd

        return pd.Series(rates, index=pd.to_timedelta(t, unit="s")).rolling("500ms").mean().to_numpy()

    def filled(series, grid):
        # a counter row that would be 0 is left out: put the zeros back at the other sample
        # times of the same reading (``grid``), or the line would bridge idle stretches
        return series.reindex(series.index.union(grid), fill_value=0)

    # the target's link counters are read with its own interval row; the disks, the backing
    # store and the per-host CPU share one reading time per sample
    net_times = df.loc[(df.node == target) & (df.metric == "interval_seconds"), "t"].unique()
    cpu_times = hc.loc[hc.metric == "host_cpu_user", "t"].unique()

    for metric, label in (("rx_bytes", "in"), ("tx_bytes", "out")):
        s = filled(df[(df.node == target) & (df.metric == metric)].groupby("t")["value"].sum(), net_times)
        if (s < 0).any():
            summary["impossible"].append(f"target {label}: {int((s < 0).sum())} negative sample(s)")
        summary[f"target_{label}_mbps"] = round(float(s.sum()) / span / 1e6, 2)
        if len(s):
            a_net.plot(s.index / k, smooth(s.index / k, per_s(s, target)) / 1e6, lw=0.9, label=label)
    a_net.set_title(f"target ({target}) network (0.5 s means)")
    a_net.set_ylabel("MB/s")
    back = [("backing_read_bytes", "read"), ("backing_write_bytes", "write")]
    if not df.metric.isin([m for m, _ in back]).any():  # not throttled: the machine's disks
        back = [("disk_read_bytes", "read (machine's disks)"), ("disk_write_bytes", "write (machine's disks)")]
    summary["backing"] = "throttled cgroup" if back[0][1] == "read" else "machine's disks"
    for metric, label in back:
        rows = df[df.metric == metric]
        node = rows.node.iloc[0] if len(rows) else "machine"
        # tables sampled before the monitor ignored counter resets (the target's cgroup removed
        # before the last sample gave one large negative row): named, drawn as 0
        s = rows.groupby("t")["value"].sum()
        if (s < 0).any():
            summary["impossible"].append(f"{label}: {int((s < 0).sum())} negative sample(s) (a counter reset), drawn as 0")
        s = filled(s.clip(lower=0), cpu_times)
        summary[f"backing_{label.split()[0]}_mbps"] = round(float(s.sum()) / span / 1e6, 2)
        if len(s):
            a_io.plot(s.index / k, smooth(s.index / k, per_s(s, node)) / 1e6, lw=0.9, label=label)
    a_io.set_title("target storage I/O (backing store, 0.5 s means)")
    a_io.set_ylabel("MB/s")

    def host_cpu(ax, node, what):
        ax.set_title(f"{what} ({node}) CPU")
        if node is None:
            return
        parts = [hc[(hc.node == node) & (hc.metric == m)].set_index("tu")["value"]
                 for m in ("host_cpu_user", "host_cpu_system")]
        idx = parts[0].index
        vals = [p.reindex(idx, fill_value=0).values * 100 for p in parts]
        total = vals[0] + vals[1]
        # A host cannot use more than the machine's cores: such a sample is a monitor bug
        # (as the 2500 % spike of a thread's whole lifetime counted at once was). It is named
        # in the summary (the report warns) and drawn cut at the cores with a red mark, so the
        # real samples keep their scale.
        bad = total > cores * 100
        if bad.any():
            summary["impossible"].append(
                f"{what} {node}: {int(bad.sum())} CPU sample(s) above the machine's {cores:g} cores "
                f"(max {total.max():.0f} % of one core at t={idx[bad][total[bad].argmax()]:.2f} s)")
            scale = np.where(bad, cores * 100 / np.where(total > 0, total, 1), 1.0)
            vals = [v * scale for v in vals]
            ax.plot(idx[bad], np.full(int(bad.sum()), cores * 100), "rx", label="cut: above the cores")
            ax.set_title(f"{what} ({node}) CPU: {int(bad.sum())} impossible sample(s) cut", color="r")
        ax.stackplot(idx, *vals, labels=["user", "system"])
        ax.set_ylabel("% of one core")
        w = hc[(hc.node == node) & (hc.metric == "host_io_wait")].set_index("tu")["value"]
        tw = ax.twinx()
        tw.plot(w.index, w.values, color="k", lw=0.8, label="threads in I/O wait")
        tw.set_ylabel("threads waiting for the disk")
        ax.legend(fontsize=7, loc="upper left")
        tw.legend(fontsize=7, loc="upper right")
        summary[f"{what}_cpu_user"] = round(float(parts[0].mean()), 3) if len(parts[0]) else 0.0
        summary[f"{what}_cpu_system"] = round(float(parts[1].mean()), 3) if len(parts[1]) else 0.0
        summary[f"{what}_io_wait_threads"] = round(float(w.mean()), 2) if len(w) else 0.0

    host_cpu(a_cpu, target, "target")
    host_cpu(a_ini, initiator, "initiator")
    for ax in (a_net, a_io):
        if ax.lines:
            ax.legend(fontsize=7)
    for ax in axes.flat:
        ax.set_xlabel(tlabel)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    with atomic_path(Path(path)) as tmp:
        fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")
    plt.close(fig)
    return summary


def pd_series(values, index):
    import pandas as pd

    return pd.Series(values, index=index)


def _host_colors(n: int) -> list:
    """n distinct colours (tab10 / tab20; beyond 20, spread over a continuous map)."""
    import matplotlib

    if n <= 10:
        return [matplotlib.colormaps["tab10"](i) for i in range(n)]
    if n <= 20:
        return [matplotlib.colormaps["tab20"](i) for i in range(n)]
    cmap = matplotlib.colormaps["turbo"]
    return [cmap(i / (n - 1)) for i in range(n)]


def plot_all(tbl: pa.Table, meta: dict, outdir: str | os.PathLike, title: str = "") -> list[str]:
    """Write the PNGs into ``outdir``; returns their file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from clusterlab._atomic import atomic_path

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    df = _df(tbl)
    k = float(meta.get("dilation", 1.0) or 1.0)
    dt = float(meta.get("interval", 0.1)) / k
    df["tu"] = df["t"] / k
    per_s = _rates(df, k, dt)
    tlabel = "time [s]" + (f" (undilated, k={k:g})" if k != 1 else "")
    written = []

    def save(fig, name):
        with atomic_path(outdir / name) as tmp:
            fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")
        plt.close(fig)
        written.append(name)

    # 1. traffic: every host's sum per sample round, and each host in its own colour. Each
    # sample is the mean rate over the interval it measured, drawn as a step over that interval
    # (a late sample spans its longer interval: no ramp across it), and an interval without a
    # row is 0 (a counter row that would be 0 is left out).
    tx = df[(df.metric == "tx_bytes") & (df.node != "switch") & (df.node != "machine")]
    rounds = sample_rounds(df)
    fig, (a_all, a_host) = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    if len(tx) and len(rounds):
        nodes = sorted(tx.node.unique(), key=lambda n: (len(n), n))
        per_s_round = per_s(pd_series(per_round(tx, rounds), rounds), "machine")
        a_all.plot(rounds / k, per_s_round * 8 / 1e6, lw=0.9, color="k", drawstyle="steps-pre",
                   label=f"all {len(nodes)} hosts")
        a_all.legend(fontsize=7)
        colors = _host_colors(len(nodes))
        for n, c in zip(nodes, colors, strict=True):
            times = df.loc[(df.node == n) & (df.metric == "interval_seconds"), "t"].unique()
            s = tx[tx.node == n].groupby("t")["value"].sum()
            s = s.reindex(s.index.union(times), fill_value=0)
            a_host.plot(s.index / k, per_s(s, n) * 8 / 1e6, lw=0.8, color=c, drawstyle="steps-pre",
                        label=n if len(nodes) <= 20 else None)
        if len(nodes) <= 20:
            a_host.legend(fontsize=6, ncol=5, title="host", title_fontsize=7)
    a_all.set_ylabel("sent [Mbit/s]")
    a_all.set_title(f"{title} traffic: all hosts (sum per sample interval)".strip())
    a_host.set_xlabel(tlabel)
    a_host.set_ylabel("sent [Mbit/s]")
    a_host.set_title("each host (one colour each)" if len(tx) and tx.node.nunique() <= 20
                     else "each host (too many to name)")
    save(fig, "traffic.png")

    # 2. packet-length histogram (seed 004: per 64-byte bucket)
    ln = df[df.metric == "len_packets"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
    if len(ln):
        h = ln.groupby("bucket")["value"].sum()
        a1.bar(h.index * 64, h.values, width=60, align="edge")
        a1.set_yscale("log")
        top = h.sort_values(ascending=False).index[:5]
        for b in sorted(top):
            s = ln[ln.bucket == b].groupby("t")["value"].sum()
            a2.plot(s.index / k, per_s(s, "switch"), lw=0.9, label=f"{b * 64}-{b * 64 + 63} B")
        a2.legend(fontsize=7)
    a1.set_xlabel("frame length [bytes], 64-byte buckets")
    a1.set_ylabel("packets")
    a1.set_title("packet-length histogram")
    a2.set_xlabel(tlabel)
    a2.set_ylabel("packets/s")
    a2.set_title("packets/s of the busiest length buckets")
    save(fig, "packet_sizes.png")

    # 3. TCP retransmissions / timeouts
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
    # every host's rows of one sample round are read at slightly different times: sum them per
    # round (grouping by t would draw each host's count as its own point)
    for m in TCP_PLOTTED:
        rows = df[(df.metric == m) & (df.node != "machine")]
        if len(rows) and len(rounds):
            a1.plot(rounds / k, per_round(rows, rounds), lw=0.8, drawstyle="steps-pre", label=m)
    a1.set_xlabel(tlabel)
    a1.set_ylabel("per sample interval (sum over all hosts)")
    a1.set_title("TCP retransmissions and timeouts")
    if a1.lines:
        a1.legend(fontsize=7)
    rt = df[df.metric == "TcpRetransSegs"].groupby("node")["value"].sum()
    to = df[df.metric == "TcpExtTCPTimeouts"].groupby("node")["value"].sum()
    nodes = sorted(set(rt.index) | set(to.index), key=lambda n: (len(n), n))
    if nodes:
        x = np.arange(len(nodes))
        a2.bar(x - 0.2, [rt.get(n, 0) for n in nodes], 0.4, label="retransmitted segments")
        a2.bar(x + 0.2, [to.get(n, 0) for n in nodes], 0.4, label="timeouts")
        a2.set_xticks(x, nodes, rotation=90, fontsize=6)
        a2.legend(fontsize=7)
    a2.set_title("per host, whole run")
    save(fig, "tcp.png")

    # 4. switch drops and backlog
    sw = df[df.node == "switch"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
    d = sw[sw.metric == "qdisc_drops"].groupby("tu")["value"].sum()
    if len(d):
        a1.bar(d.index, d.values, width=dt * 0.9)
    a1.set_xlabel(tlabel)
    a1.set_ylabel("packets dropped per interval")
    a1.set_title("switch output-buffer drops (all ports)")
    b = sw[sw.metric == "qdisc_backlog_bytes"]
    ports = sorted(b.iface.unique(), key=lambda n: (len(n), n))[:20]
    for port, color in zip(ports, _host_colors(len(ports)), strict=True):
        s = b[b.iface == port].set_index("tu")["value"]
        # a gauge row is written when non-zero or just back to zero: hold each value until the next
        a2.plot(s.index, s.values / 1e3, lw=0.8, label=port, drawstyle="steps-post", color=color)
    if ports:
        a2.legend(fontsize=6, ncol=4, title="switch port", title_fontsize=7)
    a2.set_xlabel(tlabel)
    a2.set_ylabel("backlog [KB]")
    a2.set_title("switch port backlog (sampled)")
    save(fig, "switch.png")

    # 5. CPU
    fig, ax = plt.subplots(figsize=(9, 4))
    cpu = df[df.node == "machine"]
    parts = [("cpu_user", "user"), ("cpu_system", "system"), ("cpu_softirq", "softirq"), ("cpu_iowait", "iowait")]
    series = [cpu[cpu.metric == m].set_index("tu")["value"] for m, _ in parts]
    if all(len(s) for s in series):
        idx = series[0].index
        nice = cpu[cpu.metric == "cpu_nice"].set_index("tu")["value"]
        if len(nice):  # niced background work yields to the run: drawn on top, above the line
            series = [(series[0] - nice.reindex(idx, fill_value=0)).clip(lower=0)] + series[1:] + [nice]
            parts = parts + [("cpu_nice", "niced (yields)")]
        ax.stackplot(idx, *[s.reindex(idx, fill_value=0).values * 100 for s in series],
                     labels=[lbl for _, lbl in parts])
        ax.axhline((1 - CPU_BOUND_SPARE) * 100, color="k", ls=":", lw=0.8, label="CPU-bound above (without niced)")
        ax.legend(fontsize=7, loc="lower right")
    ax.set_ylim(0, 100)
    ax.set_xlabel(tlabel)
    ax.set_ylabel("% of all CPUs")
    ax.set_title("CPU (whole machine, shared with anything else running)")
    save(fig, "cpu.png")

    # 6. storage panels (seed 001 Figs. 5-7, Ganglia-style): only with per-host CPU rows
    if storage_panels(tbl, meta, outdir / "storage.png", df=df) is not None:
        written.append("storage.png")
    return written


def write_report(tbl: pa.Table, meta: dict, outdir, title: str = "run", extra: dict | None = None) -> dict:
    """PNGs + ``report.md`` + ``report.html`` + ``summary.json`` in ``outdir``."""
    from clusterlab._atomic import atomic_open

    outdir = Path(outdir)
    pngs = plot_all(tbl, meta, outdir, title)
    s = summarize(tbl, meta)
    if extra:
        s["run"] = extra
    rows = [(k, v) for k, v in s.items() if k not in ("run",)]
    md = [f"# {title}", "", "| quantity | value |", "|---|---|"]
    md += [f"| {k} | {json.dumps(v) if isinstance(v, (dict, list)) else v} |" for k, v in rows]
    if s["cpu_bound"]:
        spare = s["mean_cpu_spare"] if s.get("mean_cpu_spare") is not None else s["mean_cpu_idle"]
        md += ["", f"**CPU-bound:** mean spare CPU (idle, I/O wait, niced) {spare:.0%} < {CPU_BOUND_SPARE:.0%}: times measure "
               "the CPU rather than the network (use --dilation)."]
    md += [""] + [f"![{p[:-4]}]({p})" for p in pngs]
    with atomic_open(outdir / "report.md") as f:
        f.write("\n".join(md) + "\n")
    html = ["<!doctype html><html><head><meta charset='utf-8'><title>", title, "</title></head><body>",
            f"<h1>{title}</h1><table border=1 cellpadding=3>"]
    html += [f"<tr><td>{k}</td><td>{json.dumps(v) if isinstance(v, (dict, list)) else v}</td></tr>" for k, v in rows]
    html += ["</table>"] + [f"<h2>{p[:-4]}</h2><img src='{p}'>" for p in pngs] + ["</body></html>"]
    with atomic_open(outdir / "report.html") as f:
        f.write("".join(html))
    with atomic_open(outdir / "summary.json") as f:
        json.dump(s, f, indent=1)
    return s
