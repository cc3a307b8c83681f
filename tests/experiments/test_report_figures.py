"""The figures say what they show: the data drawn is the data meant (the monitor's TCP plot sums
every host per sample interval; idle intervals are 0, not a ramp), categorical axes have no
lines joining categories, tick labels stay short, the legend names its variable and the title
carries the set-up. Checked on the drawn figures' artists, from small synthetic runs."""

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

matplotlib = pytest.importorskip("matplotlib")
pytest.importorskip("pandas")


@pytest.fixture
def drawn(monkeypatch):
    """Every figure saved, by file name (the figure objects outlive plt.close)."""
    from matplotlib.figure import Figure

    figs = {}
    real = Figure.savefig

    def savefig(self, fname, *a, **kw):
        figs[Path(fname).name.split(".tmp-")[0].lstrip(".")] = self
        return real(self, fname, *a, **kw)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return figs


def _monitor_table(hosts, rounds, value_of):
    """A monitor table as the sampler writes it: each round opens with the machine's interval
    row, then each host is read a little later at its own t; ``value_of(round, host)`` None
    leaves the counter row out (a zero)."""
    from clusterlab.monitor.sampler import SCHEMA

    cols = {c: [] for c in ("t", "node", "iface", "metric", "bucket", "value")}

    def row(t, node, metric, value, iface=""):
        for c, v in zip(cols, (t, node, iface, metric, -1, float(value)), strict=True):
            cols[c].append(v)

    for i in range(rounds):
        t0 = 0.1 * (i + 1)
        row(t0, "machine", "interval_seconds", 0.1)
        for j in range(hosts):
            t = t0 + 0.004 * (j + 1)  # visiting the namespaces takes time
            row(t, f"h{j}", "interval_seconds", 0.1)
            v = value_of(i, j)
            if v is not None:
                row(t, f"h{j}", "TcpRetransSegs", v)
                row(t, f"h{j}", "tx_bytes", v * 1000, iface="eth0")
    return pa.Table.from_pydict(cols, schema=SCHEMA)


def test_tcp_plot_sums_every_host_per_interval_and_traffic_fills_idle_intervals(tmp_path, drawn):
    from clusterlab.report.monitor_plots import plot_all

    hosts, rounds = 16, 4
    value_of = lambda i, j: None if (i == 2 or (i == 1 and j == 0)) else 10 + j  # noqa: E731
    plot_all(_monitor_table(hosts, rounds, value_of), {"interval": 0.1, "dilation": 1.0}, tmp_path)
    want = [sum(value_of(i, j) or 0 for j in range(hosts)) for i in range(rounds)]
    assert want == [280, 270, 0, 280]
    a1 = drawn["tcp.png"].axes[0]
    line = next(ln for ln in a1.lines if ln.get_label() == "TcpRetransSegs")
    assert list(line.get_ydata()) == want  # one value per interval, every host summed
    assert "all hosts" in a1.get_ylabel()

    a_all, a_host = drawn["traffic.png"].axes[:2]
    total = a_all.lines[0]
    np.testing.assert_allclose(total.get_ydata(), [w * 1000 * 8 / 0.1 / 1e6 for w in want])
    assert len(a_host.lines) == hosts
    assert len({tuple(ln.get_color()) if not isinstance(ln.get_color(), str) else ln.get_color()
                for ln in a_host.lines}) == hosts  # each host its own colour
    h0 = next(ln for ln in a_host.lines if ln.get_label() == "h0")
    assert list(h0.get_ydata()) == pytest.approx([0.8, 0.0, 0.0, 0.8])  # idle intervals are 0, not a ramp
    assert all(ln.get_drawstyle() == "steps-pre" for ln in [total, *a_host.lines])


def _study_run(d: Path, rows: list[dict], report: list[dict], grid: dict) -> Path:
    d.mkdir()
    points = list(dict.fromkeys(r["point"] for r in rows))
    meta = {"format": 1, "study": "synthetic", "title": "A synthetic study", "status": "complete",
            "spec": {"name": "synthetic", "cluster": {"kind": "testbed", "rate": "155Mbit", "buffer": "64KB"},
                     "grid": grid, "report": report, "checks": []},
            "machine": {"cpus": 2}, "emulated": {},
            "points": [{"index": p, "label": next(r["label"] for r in rows if r["point"] == p), "dilation": 1.0}
                       for p in points]}
    (d / "meta.json").write_text(json.dumps(meta))
    pq.write_table(pa.Table.from_pylist(rows), d / "table.parquet")
    return d


def _base(point, rep, **kw):
    return {"study": "synthetic", "point": point, "check": "", "rep": rep, "cluster": "testbed", "hosts": 8,
            "rate": "155Mbit", "buffer": "64KB", "switch": "bridge", "dilation": 1.0, "tcp": "MIN 5ms", **kw}


def test_categorical_x_draws_bars_without_joining_lines_and_names_the_legend(tmp_path, drawn):
    from clusterlab.report.study import render

    rows, point = [], 0
    for kernel in ("cg", "ep", "ft"):
        for network in ("lan", "135M"):
            for rep in range(3):
                rows.append(_base(point, rep, label=f"kernel={kernel}, network={network}", kernel=kernel,
                                  network=network, seconds=1.0 + rep, speedup=2.0 + point + rep))
            point += 1
    d = _study_run(tmp_path / "run", rows, [{"kind": "scatter", "x": "kernel", "y": "speedup", "hue": "network"}],
                   {"kernel": ["cg", "ep", "ft"], "network": ["lan", "135M"]})
    render(d)
    ax = drawn["fig1-scatter-speedup.png"].axes[0]
    joined = [ln for ln in ax.lines if len(ln.get_xdata()) > 1 and ln.get_linestyle() not in ("None", "")]
    assert not joined, "a categorical axis must not join its categories with lines"
    assert len(ax.patches) == 6  # a median bar per kernel and network
    bars = sorted((p.get_x() + p.get_width() / 2, p.get_height()) for p in ax.patches)
    assert bars[0][1] == 3.0  # cg on lan: median of 2, 3, 4
    assert ax.get_legend().get_title().get_text() == "network"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["lan", "135M"]
    title = ax.get_title()
    assert "8 hosts" in title and "155Mbit" in title and "64KB" in title and "bridge switch" in title
    assert "dilation k=1" in title and "TCP: MIN 5ms" in title


def test_an_unset_hue_value_is_named_not_called_median(tmp_path, drawn):
    """seed003-fig3's last line is rmem None (Linux's own triple): its legend entry says the
    value is not set; "median" is only the name of a line when there is no hue at all."""
    from clusterlab.report.study import render

    rows = [_base(i, 0, label=f"rmem={v}", rmem=v, bytes=b, mbps=float(b) / 10)
            for i, v in enumerate(["4096 4096 4096", None]) for b in (1, 1024)]
    d = _study_run(tmp_path / "run", rows, [{"kind": "scatter", "x": "bytes", "y": "mbps", "hue": "rmem"}],
                   {"rmem": ["4096 4096 4096", None]})
    render(d)
    ax = drawn["fig1-scatter-mbps.png"].axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["4096 4096 4096", "not set (default)"]


def test_improvement_draws_each_setting_against_the_baseline(tmp_path, drawn):
    """Seed 003's Fig. 6(b): each buffer's gain over the default, per direction; the baseline
    itself is no bar, and a setting twice as fast is +100%."""
    from clusterlab.report.study import render

    rows, point = [], 0
    for buf, secs in (("4KiB", 20.0), ("16KiB", 5.0), ("autotuning", 10.0)):
        for direction in ("forward", "backward"):
            rows.append(_base(point, 0, label=f"tcp_buffer={buf}", tcp_buffer=buf, direction=direction,
                              seconds=secs * (1.0 if direction == "forward" else 2.0)))
        point += 1
    d = _study_run(tmp_path / "run", rows, [{"kind": "improvement", "x": "tcp_buffer", "y": "seconds",
                                             "hue": "direction", "baseline": "autotuning"}],
                   {"tcp_buffer": ["4KiB", "16KiB", "autotuning"]})
    render(d)
    ax = drawn["fig1-improvement-seconds.png"].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["4KiB", "16KiB"]
    heights = sorted(round(p.get_height(), 6) for p in ax.patches)
    assert heights == [-50.0, -50.0, 100.0, 100.0]
    assert ax.get_legend().get_title().get_text() == "direction"
    assert "tcp_buffer=autotuning" in ax.get_ylabel()


def test_attribution_keeps_settings_out_of_the_ticks(tmp_path, drawn):
    from clusterlab.report.study import TICK_LABEL_MAX, render

    timers = ["default (MIN 200 ms / MAX 60 s)", "default at k=3 (MIN 200 ms / MAX 40 s)",
              "tuned (MIN 250..350 ms random / MAX = MIN + 100 ms)"]
    rows, point = [], 0
    for ranks in (1, 2, 4, 8, 16):
        for tm in timers:
            label = f"ranks={ranks}, timers={tm}, compute_scale=1, data=seed000:1M"
            for rep in range(2):
                rows.append(_base(point, rep, label=label, ranks=ranks, timers=tm, compute_scale=1, seconds=2.0,
                                  time_compute=1.0 / ranks, time_transfer=0.5 * ranks, time_rto_wait=0.1))
            point += 1
    d = _study_run(tmp_path / "run", rows, [{"kind": "speedup", "x": "ranks", "y": "seconds", "hue": "timers"}],
                   {"ranks": [1, 2, 4, 8, 16], "timers": timers, "compute_scale": [1]})
    render(d)
    fig = drawn["attribution.png"]
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 3  # one per timer setting, named in its title
    for ax, tm in zip(panels, timers, strict=True):
        ticks = [t.get_text() for t in ax.get_xticklabels()]
        assert ticks == ["1", "2", "4", "8", "16"]
        assert all(len(t) <= TICK_LABEL_MAX for t in ticks)
        assert tm.split()[0] in ax.get_title() and ax.get_xlabel() == "hosts"
        transfer = [p.get_height() for p in ax.patches][10:15]  # parts sorted: compute, rto_wait, transfer
        assert transfer == pytest.approx([0.5, 1.0, 2.0, 4.0, 8.0])
    assert "155Mbit" in fig._suptitle.get_text()


def test_long_categories_become_short_keys(tmp_path, drawn):
    from clusterlab.report.study import TICK_LABEL_MAX, render

    settings = ["MIN 250ms..350ms random per node, MAX = MIN + 100ms", "kernel default"]
    rows = [_base(i, rep, label=f"tcp={s}", tcp=s, seconds=1.0 + i) for i, s in enumerate(settings) for rep in range(2)]
    d = _study_run(tmp_path / "run", rows, [{"kind": "scatter", "x": "tcp", "y": "seconds"}],
                   {"tcp": settings})
    render(d)
    ax = drawn["fig1-scatter-seconds.png"].axes[0]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == ["A", "B"] and all(len(t) <= TICK_LABEL_MAX for t in ticks)
    keys = " ".join(t.get_text() for t in ax.texts)
    assert "A: MIN 250ms..350ms random per node" in keys and "B: kernel default" in keys


def test_point_labels_say_what_holds():
    from clusterlab.experiments.spec import Grid, StarTopo, Study, Testbed, TransportConfig
    from clusterlab.experiments.workloads import alltoall_broadcast

    scaled = Study(name="x", cluster=Testbed(StarTopo(hosts=16), dilation=1.0), workload=alltoall_broadcast(),
                   grid=Grid(scale=[{"name": "16 hosts", "hosts": 16}]))
    label = scaled.with_settings({"hosts": "8"}).points()[0].settings["label"]
    assert label.startswith("scale=hosts=8 (set; replaces '16 hosts')"), label
    tuned = Study(name="y", cluster=Testbed(StarTopo(hosts=4), dilation=1.0), workload=alltoall_broadcast(),
                  transport=TransportConfig(rto_min="5ms"))
    assert tuned.points()[0].settings["label"] == "TCP: MIN 5ms"
