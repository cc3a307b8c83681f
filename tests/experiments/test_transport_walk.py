"""The walk of ``--rto-min 5ms`` from ``clusterlab experiment speedup`` to the ranks' sockets:
one type (``TransportConfig``) all the way, parsed once from the command line; its JSON is what
the launcher hands the ranks, and each rank applies that same type to its sockets."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest
from click.testing import CliRunner

from clusterlab.cli import cli
from clusterlab.experiments import clusters
from clusterlab.net.transport_config import TransportConfig

speedup_mod = importlib.import_module("clusterlab.experiments.speedup")  # the package's name is the plot


class _Captured(Exception):
    pass


def rank_view(comm):
    """What a rank holds and what its sockets have in force."""
    return {"type": f"{type(comm.config).__module__}.{type(comm.config).__qualname__}",
            "config": comm.config.to_json(), "in_force": comm.stats()["transport"]["in_force"]}


def test_rto_min_walks_from_experiment_speedup_to_the_socket_as_one_type(tmp_path, monkeypatch):
    data = tmp_path / "d.dat"
    data.write_text("1 2 3\n1 2\n2 3\n")
    seen = {}

    def capture(spec, progress=None, out_dir=None):
        seen["spec"] = spec
        raise _Captured

    monkeypatch.setattr(speedup_mod, "run_speedup", capture)
    r = CliRunner().invoke(cli, ["experiment", "speedup", "--nodes", "2", "--data", str(data), "--min-support", "0.5",
                                 "--rto-min", "5ms", "-o", str(tmp_path / "out")])
    assert isinstance(r.exception, _Captured), r.output
    study = speedup_mod.speedup_study(seen["spec"])
    # the study's grid holds the parsed settings (labelled for the plot), not a second type
    [grid_tcp] = study.grid.axes["tcp"]
    assert type(grid_tcp) is TransportConfig and grid_tcp.rto_min == 0.005 and grid_tcp.label == "rto_min=5ms"
    [point] = study.points()
    assert type(point.tcp) is TransportConfig and point.tcp.place == "socket"
    assert point.tcp == grid_tcp.with_place("socket")
    with clusters.open_cluster(point, str(tmp_path / "cache")) as session:
        assert session._config == point.tcp  # what the launcher puts in the ranks' environment as JSON
        views = session.run(rank_view)
    for v in views:  # each rank read that JSON back into the same type and applied it to its sockets
        assert v["type"] == "clusterlab.net.transport_config.TransportConfig"
        assert TransportConfig.from_json(v["config"]) == point.tcp
        assert v["in_force"]["rto_min_us"] == 8000  # 5 ms in force as two 4 ms jiffies (HZ=250)


@pytest.mark.parametrize("old, new", [("--rto-jitter", "--rto-min-jitter"), ("--rto-max-extra", "--rto-max-offset")])
def test_speedup_refuses_the_old_option_names(tmp_path, old, new):
    data = tmp_path / "d.dat"
    data.write_text("1 2\n")
    r = subprocess.run([sys.executable, "-m", "clusterlab", "experiment", "speedup", "--data", str(data),
                        "--min-support", "0.5", "--rto-min", "5ms", old, "100ms", "-o", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr == f"clusterlab: error: option '{old[2:]}' is now called '{new[2:]}'\n"
    assert not (tmp_path / "out").exists()
