"""``clusterlab tune sim``: the fit recovers the settings a simulated "testbed" was made with, the
command refits a record without root, and refuses bad input in one line."""

import json

import pytest

from clusterlab.bench.alltoall_broadcast import alltoall_broadcast
from clusterlab.bench.pingpong import pingpong
from clusterlab.cli import main
from clusterlab.cluster import Simulated
from clusterlab.cluster.simulated.run import why_no_engine
from clusterlab.cluster.testbed import StarTopo
from clusterlab.tune.sim import BCAST_SIZES, PP_SIZES, fit, topology_args
from clusterlab.units import parse_duration


def cli(capsys, *argv) -> tuple[int, str]:
    with pytest.raises(SystemExit) as e:
        main(list(argv))
    out, err = capsys.readouterr()
    return e.value.code, out + err


def needs_engine():
    why = why_no_engine()
    if why:
        pytest.skip(why)


def _measured(topo, **settings):
    """What measure() returns, made by a simulated cluster of known settings."""
    true = Simulated(topo, **settings)
    pp = [{"bytes": r["bytes"], "seconds": r["usec"] * 1e-6} for r in true.run(pingpong, 2, list(PP_SIZES))[0]]
    bc = {s: {"median_seconds": true.run(alltoall_broadcast, topo.hosts, s, 1)[0][0]["seconds"], "retransmissions": 0}
          for s in BCAST_SIZES}
    return {"pingpong": pp, "broadcast": bc, "hosts": topo.hosts}


def test_fit_recovers_known_settings():
    needs_engine()
    topo = StarTopo(hosts=6, rate="155Mbit")
    f = fit(topo, _measured(topo, latency="15us", bandwidth_factor=0.9, overhead="40us", overhead_per_byte=2e-8))
    assert parse_duration(f["latency"]) == pytest.approx(15e-6, rel=0.02)
    assert f["bandwidth_factor"] == pytest.approx(0.9, rel=0.01)
    assert parse_duration(f["overhead"]) == pytest.approx(40e-6, rel=0.1)
    assert f["overhead_per_byte"] == pytest.approx(2e-8, rel=0.1)
    assert all(abs(c["error"]) < 0.02 and c["fitted"] for c in f["broadcast_check"].values())


def test_rounds_that_retransmitted_are_not_fitted():
    needs_engine()
    topo = StarTopo(hosts=4, rate="155Mbit")
    m = _measured(topo, latency="10us", bandwidth_factor=0.95, overhead="20us")
    m["broadcast"][BCAST_SIZES[-1]] = {"median_seconds": 0.2, "retransmissions": 12}  # an RTO-bound size
    m["broadcast"][BCAST_SIZES[0]].update(seconds=[m["broadcast"][BCAST_SIZES[0]]["median_seconds"]] * 3 + [0.3],
                                          retransmissions_per_round=[0, 0, 0, 5])  # one lossy round of four
    f = fit(topo, m)
    assert parse_duration(f["overhead"]) == pytest.approx(20e-6, rel=0.1) and f["overhead_per_byte"] < 1e-9
    assert f["broadcast_check"][str(BCAST_SIZES[0])]["fitted_rounds"] == 3
    last = f["broadcast_check"][str(BCAST_SIZES[-1])]
    assert not last["fitted"] and last["error"] < -0.9


def test_cli_refit_without_root(tmp_path, capsys):
    needs_engine()
    topo = StarTopo(hosts=4, rate="100Mbit")
    rec = tmp_path / "cal.json"
    rec.write_text(json.dumps({"topology_args": topology_args(topo),
                               "measured": _measured(topo, latency="12us", bandwidth_factor=0.97, overhead="30us")}))
    out = tmp_path / "refit.json"
    code, output = cli(capsys, "tune", "sim", "--refit", str(rec), "-o", str(out))
    assert code in (0, None), output
    assert "fitted: latency 12.000us" in output and "ns per byte" in output
    got = json.loads(out.read_text())
    assert got["fit"]["bandwidth_factor"] == pytest.approx(0.97, rel=0.01) and got["provenance"]["refit"]
    sim = Simulated(StarTopo(hosts=4, rate="100Mbit"), calibration=str(out))
    assert sim.calibration == str(out) and sim.engine_config()["network/bandwidth-factor"] == got["fit"]["bandwidth_factor"]


def test_cli_bad_input_is_one_line(tmp_path, capsys):
    code, output = cli(capsys, "tune", "sim", "--sizes", ",")
    assert code == 2 and "--sizes needs at least one block size" in output
    bad = tmp_path / "x.json"
    bad.write_text("[]")
    code, output = cli(capsys, "tune", "sim", "--refit", str(bad))
    assert code == 2 and "no 'measured'" in output and "Traceback" not in output
