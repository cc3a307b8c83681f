"""The storage studies' Ganglia-style panels (seed 001 Figs. 5-7, issue 13 item 4): the study
runner's monitor samples per-host CPU and the target's backing store for the storage
workloads, and the study report draws the panels per point with their means."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from clusterlab.monitor.sampler import SCHEMA

from ..testbed.helpers import require_netns


def _monitor_rows(point: int, target: str, out_bytes: float, target_cpu: float) -> list[dict]:
    rows = []
    for i in range(1, 11):  # ten samples 0.1 s apart
        t = i * 0.1
        rows += [{"t": t, "node": "machine", "iface": "", "metric": "interval_seconds", "bucket": -1, "value": 0.1},
                 {"t": t, "node": target, "iface": "", "metric": "interval_seconds", "bucket": -1, "value": 0.1},
                 {"t": t, "node": target, "iface": "eth0", "metric": "tx_bytes", "bucket": -1, "value": out_bytes},
                 {"t": t, "node": target, "iface": "", "metric": "host_cpu_user", "bucket": -1, "value": target_cpu},
                 {"t": t, "node": target, "iface": "", "metric": "host_cpu_system", "bucket": -1, "value": 0.1},
                 {"t": t, "node": target, "iface": "", "metric": "host_io_wait", "bucket": -1, "value": 2.0},
                 {"t": t, "node": target, "iface": "", "metric": "backing_read_bytes", "bucket": -1, "value": 3e6},
                 {"t": t, "node": "h0", "iface": "", "metric": "host_cpu_user", "bucket": -1, "value": 0.25},
                 {"t": t, "node": "h0", "iface": "", "metric": "host_cpu_system", "bucket": -1, "value": 0.05},
                 {"t": t, "node": "h0", "iface": "", "metric": "host_io_wait", "bucket": -1, "value": 0.0}]
    return [{**r, "point": point} for r in rows]


def _run_dir(tmp_path, host_cpu: bool = True):
    rows = _monitor_rows(0, "h4", 5e6, 0.5) + _monitor_rows(1, "h4", 2e6, 0.2)
    if not host_cpu:
        rows = [r for r in rows if not r["metric"].startswith("host_")]
    schema = SCHEMA.append(pa.field("point", pa.int32()))
    tbl = pa.Table.from_pylist(rows, schema=schema).replace_schema_metadata(
        {"clusterlab.monitor": json.dumps({"interval": 0.1, "dilation": 1.0, "storage_host": "h4"})})
    import pyarrow.parquet as pq

    pq.write_table(tbl, tmp_path / "monitor.parquet")
    points = [{"index": i, "label": f"ranks={n}", "settings": {"ranks": n}, "dilation": 1.0,
               "monitor": {"interval": 0.1}} for i, n in enumerate((1, 4))]
    (tmp_path / "meta.json").write_text(json.dumps({"study": "s", "status": "complete", "spec": {}, "points": points}))
    table = [{"study": "s", "point": i, "label": p["label"], "rep": 0, "seconds": 1.0, "ranks": p["settings"]["ranks"]}
             for i, p in enumerate(points)]
    pq.write_table(pa.Table.from_pylist(table), tmp_path / "table.parquet")
    return tmp_path


def test_report_draws_the_storage_panels_of_every_point_with_their_means(tmp_path):
    from clusterlab.report.study import render

    res = render(_run_dir(tmp_path))
    assert [p["png"] for p in res["panels"]] == ["monitor-0-storage.png", "monitor-1-storage.png"]
    for p in res["panels"]:
        assert (tmp_path / p["png"]).stat().st_size > 10_000
    m0, m1 = (p["means"] for p in res["panels"])
    assert m0["target"] == "h4" and m0["initiator"] == "h0"
    # 5 MB per 0.1 s out of the target over 1 s: 50 MB/s; 3 MB per 0.1 s read from the backing store
    assert m0["target_out_mbps"] == pytest.approx(50.0) and m1["target_out_mbps"] == pytest.approx(20.0)
    assert m0["backing_read_mbps"] == pytest.approx(30.0) and m0["backing"] == "throttled cgroup"
    assert m0["target_cpu_user"] == pytest.approx(0.5) and m0["target_io_wait_threads"] == pytest.approx(2.0)
    assert m0["initiator_cpu_user"] == pytest.approx(0.25)
    md = (tmp_path / "report.md").read_text()
    assert "## The monitor's panels (Ganglia-style, per point)" in md
    assert "![point 1: ranks=4](monitor-1-storage.png)" in md
    assert "| 0 | ranks=1 | 0 / 50 | 0.5 / 0.1 | 2 | 30 / 0 (throttled cgroup) | h0: 0.25 / 0.05 |" in md
    assert "monitor-0-storage.png" in (tmp_path / "report.html").read_text()


def test_a_cpu_sample_above_the_machines_cores_is_named_not_drawn_silently(tmp_path):
    """The monitor once counted a thread's whole lifetime at once (a 2500 % spike on a 2-core
    machine): a per-host CPU above the machine's cores, or a negative rate, is named in the
    panels' means and in the report, and the panel is drawn cut at the cores."""
    import pyarrow.parquet as pq

    from clusterlab.report.study import render

    d = _run_dir(tmp_path)
    tbl = pq.read_table(d / "monitor.parquet")
    rows = tbl.to_pylist()
    for r in rows:
        if r["point"] == 1 and r["node"] == "h0" and r["metric"] == "host_cpu_user" and abs(r["t"] - 0.3) < 1e-9:
            r["value"] = 25.0  # 2500 % of one core
        if r["point"] == 1 and r["metric"] == "backing_read_bytes" and abs(r["t"] - 0.5) < 1e-9:
            r["value"] = -6e9
    pq.write_table(pa.Table.from_pylist(rows, schema=tbl.schema), d / "monitor.parquet")
    meta = json.loads((d / "meta.json").read_text())
    (d / "meta.json").write_text(json.dumps({**meta, "machine": {"cpus": 2}}))
    m0, m1 = (p["means"] for p in render(d)["panels"])
    assert m0["impossible"] == [] and m1["cpus"] == 2
    assert m1["impossible"] == ["read: 1 negative sample(s) (a counter reset), drawn as 0",
                                "initiator h0: 1 CPU sample(s) above the machine's 2 cores (max 2505 % of one core "
                                "at t=0.30 s)"]
    md = (d / "report.md").read_text()
    assert "**Samples that cannot be real**" in md and "point 1: initiator h0: 1 CPU sample(s)" in md


def test_no_panels_without_per_host_cpu(tmp_path):
    from clusterlab.report.study import render

    res = render(_run_dir(tmp_path, host_cpu=False))
    assert res["panels"] == [] and "Ganglia" not in (tmp_path / "report.md").read_text()


def test_the_storage_workloads_ask_the_study_monitor_for_host_cpu_and_the_backing_store():
    from types import SimpleNamespace

    from clusterlab.experiments import workloads

    tb = SimpleNamespace(name="t1", hosts=[SimpleNamespace(name=f"h{i}") for i in range(5)])
    for name in ("iscsi_bonnie", "mining_from_target"):
        opts = workloads.get(name).monitor_options(tb)
        reader = opts.pop("backing")  # the monitor's backing-store reader, bound to this testbed
        assert callable(reader) and reader.args == ("t1",)
        assert opts == {"host_cpu": True, "storage_host": "h4", "capture": False, "ifaces": ("eth0", "eth1")}
    assert getattr(workloads.get("pingpong"), "monitor_options", None) is None


@pytest.mark.root
@pytest.mark.parametrize("network", ["consolidated", "san"])
def test_a_storage_study_monitors_hosts_and_target_and_its_report_has_the_panels(tmp_path, network):
    """seed001-fig8 at its smallest (1 initiator, 20K transactions, HPA) through the runner:
    the study's monitor has per-host CPU and the throttled backing store under the target's
    host, and the target's traffic also when it takes a second switch (SAN); the report has
    the panels; no tgtd, testbed or cgroup is left."""
    require_netns()
    from clusterlab.cluster.testbed import leftovers
    from clusterlab.cluster.testbed.storage import storage_leftovers
    from clusterlab.experiments import load
    from clusterlab.experiments.runner import run_study
    from clusterlab.monitor import read_table
    from clusterlab.report.study import render

    res = run_study(load("seed001-fig8"), out_dir=tmp_path, quick=True, cache_dir=tmp_path / "cache",
                    overrides={"ranks": "1", "hosts": "2", "algorithm": "hpa", "data": "T10I4N1000D100K:20K",
                               "backing_rate": "60MB", "compare_local": "false", "network": network})
    assert res.status == "complete" and len(res.rows) == 1
    tbl, meta = read_table(tmp_path / "monitor.parquet")
    assert meta["storage_host"] == "h1" and meta["host_cpu"]
    got = {(r["node"], r["metric"]) for r in tbl.select(["node", "metric"]).to_pylist()}
    assert {("h1", "host_cpu_user"), ("h0", "host_cpu_user"), ("h1", "backing_read_bytes")} <= got
    out = render(tmp_path)
    assert [p["png"] for p in out["panels"]] == ["monitor-0-storage.png"]
    means = out["panels"][0]["means"]
    assert means["target_cpu_user"] + means["target_cpu_system"] > 0 and means["target_out_mbps"] > 0
    iface = "eth1" if network == "san" else "eth0"
    assert ("h1", "tx_bytes") in got and any(r["iface"] == iface and r["node"] == "h1" and r["metric"] == "tx_bytes"
                                             for r in tbl.to_pylist())
    name = res.meta["points"][0]["applied"]["testbed"]
    assert not any(leftovers(name).values()) and not any(storage_leftovers(name).values())
