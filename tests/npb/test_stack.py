"""seed004-stack: the NPB replay's mesh engine and congestion control are settings of the study,
refused with the reason when bad, and (as root) really reach the ranks' sockets."""

from __future__ import annotations

import dataclasses
import json
import socket

import pytest
from click.testing import CliRunner

from clusterlab.errors import ConfigError
from clusterlab.experiments import load
from clusterlab.experiments.workloads.npb import npb_replay, npb_wan
from clusterlab.net.transport_config import TransportConfig

from ..testbed.helpers import require_netns

STUDY_CC = ("reno", "cubic", "bbr")


def test_engine_is_a_setting_and_a_bad_one_is_refused():
    assert npb_replay(kernel="cg").params["engine"] == "rust"
    assert npb_wan(engine="python").params["engine"] == "python"
    with pytest.raises(ConfigError, match="engine 'mpi': the TCP mesh engine is one of python, rust"):
        npb_replay(engine="mpi")
    # a grid or --set value is refused when the study expands, not when its point runs
    with pytest.raises(ConfigError, match="engine 'tcp'"):
        load("seed004-stack").workload.with_params(engine="tcp")


def test_cli_refuses_a_bad_engine_in_one_line():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "clusterlab", "experiment", "run",
                        "seed004-stack", "--set", "engine=mpi", "--dry-run"], capture_output=True, text=True,
                       timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert "engine 'mpi'" in lines[0] and "python, rust" in lines[0]


def test_the_study_is_the_stack_grid_over_the_135m_line():
    s = load("seed004-stack")
    points = s.points()
    got = {(p.settings["kernel"], p.tcp.congestion, p.settings["engine"]) for p in points}
    assert got == {(k, cc, e) for k in ("cg", "ft", "is", "mg") for cc in STUDY_CC for e in ("rust", "python")}
    assert s.repeat == 3 and all(p.settings["network"] == "135M" and p.settings["cls"] == "W" for p in points)
    assert s.cluster.sites == "4+4" and s.cluster.wan_rate == "135Mbit" and s.cluster.wan_delay == "6ms"
    q = s.with_quick().points()
    assert {p.settings["cls"] for p in q} == {"S"} and {p.settings["kernel"] for p in q} == {"is"}
    assert {p.tcp.congestion for p in q} == set(STUDY_CC)
    assert "MPI is not a third engine" in s.notes


def test_a_congestion_control_the_kernel_lacks_is_refused_with_the_reason():
    from clusterlab.experiments.clusters import check_point

    p = load("seed004-stack").points()[0]
    for cc in STUDY_CC:
        check_point(dataclasses.replace(p, tcp=TransportConfig(congestion=cc)))
    with pytest.raises(ConfigError, match="congestion control 'nosuchcc' is not available here"):
        check_point(dataclasses.replace(p, tcp=TransportConfig(congestion="nosuchcc")))


@pytest.mark.root
def test_the_kernel_takes_every_congestion_control_of_the_study():
    """Each one set on a socket inside a scratch namespace and read back (the module is loaded)."""
    import os
    import secrets
    import subprocess

    from clusterlab.net.netns import in_netns

    require_netns()
    ns = f"clab-k{secrets.token_hex(3)}-x"
    subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True, timeout=30)
    try:
        with in_netns(ns):
            for cc in STUDY_CC:
                with socket.socket() as s:
                    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
                    assert s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode() == cc
            with socket.socket() as s, pytest.raises(OSError):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"nosuchcc")
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
    assert not os.path.exists(f"/run/netns/{ns}")


@pytest.mark.root
@pytest.mark.slow
def test_seed004_stack_quick_runs_on_the_asked_engine_and_congestion(tmp_path):
    """--quick end to end: every row's ranks used the Python engine (not the default) and the
    point's congestion control, read back from the ranks; nothing is left behind."""
    from clusterlab.cli import cli
    from clusterlab.cluster.testbed import leftovers

    require_netns()
    r = CliRunner().invoke(cli, ["experiment", "run", "seed004-stack", "--quick", "--out", str(tmp_path)],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["status"] == "complete"
    rows = __import__("pyarrow.parquet", fromlist=["x"]).read_table(tmp_path / "table.parquet").to_pylist()
    assert len(rows) == 3 and all(r["replayed"] and r["verified"] for r in rows)
    assert all(r["engine"] == "python" and r["congestion_in_force"] == r["congestion"] for r in rows)
    assert {r["congestion"] for r in rows} == set(STUDY_CC)
    assert all(r["seconds"] > 0 for r in rows)
    for pm in meta["points"]:
        assert not any(leftovers(pm["applied"]["testbed"]).values())
    assert "Seed 004, stack: the paper beside ours" in (tmp_path / "report.md").read_text()
