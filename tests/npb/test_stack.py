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
    assert npb_replay(engine="mpi").params["engine"] == "mpi"  # mpiexec's ranks in the hosts, MPICH's sockets
    with pytest.raises(ConfigError, match=r"engine 'ucx': one of mpi, python, rust \(the TCP mesh's engines, or MPI\)"):
        npb_replay(engine="ucx")
    # a grid or --set value is refused when the study expands, not when its point runs
    with pytest.raises(ConfigError, match="engine 'tcp'"):
        load("seed004-stack").workload.with_params(engine="tcp")


def test_cli_refuses_a_bad_engine_in_one_line():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "clusterlab", "experiment", "run",
                        "seed004-stack", "--set", "engine=ucx", "--dry-run"], capture_output=True, text=True,
                       timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert "engine 'ucx'" in lines[0] and "mpi, python, rust" in lines[0]


def test_the_study_is_the_stack_grid_over_the_135m_line():
    s = load("seed004-stack")
    points = s.points()
    got = {(p.settings["kernel"], p.tcp.congestion, p.settings["engine"]) for p in points}
    kernels = ("cg", "ft", "is", "mg")
    assert got == {(k, cc, e) for k in kernels for cc in STUDY_CC for e in ("rust", "python")} | \
        {(k, "reno", "mpi") for k in kernels}  # MPI: the host's default, reno (every kernel lets a namespace set it)
    assert s.repeat == 3 and all(p.settings["network"] == "135M" and p.settings["cls"] == "W" for p in points)
    topo = s.cluster.topo
    assert topo.sites == "4+4" and topo.wan_rate == "135Mbit" and topo.wan_delay == "6ms"
    q = s.with_quick().points()
    assert {p.settings["cls"] for p in q} == {"S"} and {p.settings["kernel"] for p in q} == {"is"}
    assert {(p.tcp.congestion, p.settings["engine"]) for p in q} == {("cubic", "python"), ("bbr", "python"),
                                                                     ("reno", "mpi")}
    assert "MPI is the third engine" in s.notes


def test_mpi_points_take_only_a_congestion_control_a_namespace_can_default_to():
    from clusterlab.experiments.clusters import check_point

    p = next(p for p in load("seed004-stack").points() if p.settings["engine"] == "mpi")
    check_point(p)
    with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f, \
            open("/proc/sys/net/ipv4/tcp_allowed_congestion_control") as g:
        restricted = sorted(set(f.read().split()) - set(g.read().split()))
    if not restricted:
        pytest.skip("every congestion control available here is one a namespace may default to")
    with pytest.raises(ConfigError, match="cannot reach MPI ranks .*tcp_allowed_congestion_control"):
        check_point(dataclasses.replace(p, tcp=TransportConfig(congestion=restricted[0])))


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
    """--quick end to end: every row's ranks used the engine asked for (Python, not the default,
    or MPI: mpiexec's ranks in the hosts) and the point's congestion control, read back from the
    ranks; nothing is left behind."""
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
    assert all(r["engine"] == r["protocol_stack"].split("/")[1] and r["congestion_in_force"] == r["congestion"]
               for r in rows)
    assert {(r["congestion"], r["engine"]) for r in rows} == {("cubic", "python"), ("bbr", "python"), ("reno", "mpi")}
    assert all(r["seconds"] > 0 for r in rows)
    for pm in meta["points"]:
        assert not any(leftovers(pm["applied"]["testbed"]).values())
    assert "Seed 004, stack: the paper beside ours" in (tmp_path / "report.md").read_text()
