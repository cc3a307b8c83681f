"""As root: every study's every setting is accepted by the kernel (written into a scratch
network namespace and read back), and a seed study runs --quick end to end, leaving nothing."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from clusterlab.experiments import clusters, load, names
from clusterlab.experiments.spec import Testbed

from ..testbed.helpers import require_netns

pytestmark = pytest.mark.root


@pytest.fixture(autouse=True)
def _netns():
    require_netns()


def test_the_kernel_accepts_every_setting_of_every_study():
    merged: dict = {}
    for n in names():
        s = load(n)
        for p in s.points() + s.with_quick().points():
            if isinstance(p.cluster, Testbed):
                for h, sc in clusters.testbed_sysctls(p).items():
                    merged[f"{n}:{p.index}:{h}"] = sc
    clusters.kernel_accepts(merged)  # raises naming the first value the kernel refuses


def test_the_kernel_refuses_what_the_spec_refuses():
    from clusterlab.errors import ConfigError

    with pytest.raises(ConfigError, match="the kernel refuses net.ipv4.tcp_rto_max_ms = 999"):
        clusters.kernel_accepts({"h0": {clusters.MAX_SYSCTL: 999}})


@pytest.mark.slow
def test_seed000_fig2_quick_runs_and_reports(tmp_path):
    from clusterlab.cli import cli
    from clusterlab.cluster.testbed import leftovers

    # 4 hosts, not the quick run's 8, and no warm-up round: the same points, checks and report;
    # half the namespaces and rounds that end sooner (the suite's time; README's seed000-fig3 run
    # has 4 hosts too)
    r = CliRunner().invoke(cli, ["experiment", "run", "seed000-fig2", "--quick", "--set", "repeat=2", "--set",
                                 "hosts=4", "--set", "warmup=0", "--out", str(tmp_path)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["repetitions"] == 2 * len(meta["points"])
    md = (tmp_path / "report.md").read_text()
    assert "Seed 000, Fig. 2: the paper beside ours" in md and "## Dilation checks" in md
    assert (tmp_path / "monitor.parquet").exists()
    rows = __import__("pyarrow.parquet", fromlist=["x"]).read_table(tmp_path / "table.parquet").to_pylist()
    assert {r["dilation"] for r in rows} == {3.0, 6.0}  # the figure's one k, and the check's second
    assert {r["switch"] for r in rows} == {"atm"} and "ATM cell switch" in meta["emulated"]["network"]
    assert "(atm switch" not in md  # one switch in the quick run: no side-by-side split
    for pm in meta["points"]:
        mx = pm["applied"]["rto_max_ms_per_host"]
        assert all(v == round(pm["settings"]["rto_max_s"] * pm["dilation"] * 1000) for v in mx)
        assert not any(leftovers(pm["applied"]["testbed"]).values())
    # both TCP stacks ran, each point says which, and the report judges the seed against each
    assert {r["stack"] for r in rows} == {"linux", "seed-era"}
    for pm in meta["points"]:
        assert pm["applied"]["tcp_stack"] == pm["settings"]["stack"]
        if pm["settings"]["stack"] == "seed-era":
            assert set(pm["applied"]["stack_sysctls"].values()) == {0} and len(pm["applied"]["stack_sysctls"]) == 5
    assert "seed-era TCP as seed 000's Solaris 2.5.1 had it" in meta["emulated"]["tcp stack"]
    assert "(seed-era TCP)" in md and "(linux TCP)" in md


@pytest.mark.slow
def test_seed000_fig6_quick_replays_recorded_compute(tmp_path):
    """The replay workload end to end: one real run per host count recorded, then replayed under
    both transport settings (the tuned one dilated), with its time attributed."""
    from clusterlab.cli import cli

    r = CliRunner().invoke(cli, ["experiment", "run", "seed000-fig6", "--quick", "--out", str(tmp_path)],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["status"] == "complete" and "replayed" in meta["emulated"]["compute"]
    rows = __import__("pyarrow.parquet", fromlist=["x"]).read_table(tmp_path / "table.parquet").to_pylist()
    assert {(r["ranks"], r["dilation"]) for r in rows} == {(1, 1.0), (1, 3.0), (4, 1.0), (4, 3.0)}
    assert len(rows) == 6  # default at k = 1, default at k = 3, tuned at k = 3; 1 and 4 hosts
    by_ranks: dict = {}
    for row in rows:  # both settings replay the same recording: the same result and bytes
        by_ranks.setdefault(row["ranks"], set()).add((row["itemsets"], row["bytes_sent"]))
        parts = row["time_compute"] + row["time_transfer"] + row["time_rto_wait"]
        # the slowest rank's split of each pass adds up to the pass
        assert 0 < parts == pytest.approx(sum(_listed(row["seconds_by_pass"])), rel=1e-6), row
    assert all(len(v) == 1 for v in by_ranks.values())
    assert (tmp_path / "attribution.png").exists()


def _listed(v) -> list:
    return json.loads(v) if isinstance(v, str) else list(v)
