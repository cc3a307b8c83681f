"""`clusterlab run --testbed NAME --run-dir DIR`: a user's program in the hosts of a 3-host
testbed, recorded (the testbed's settings, every host's and switch port's samples, each rank's
split), then `clusterlab report` and `clusterlab diagnose` on it (root)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clusterlab.cluster.testbed import StarTopo, TestbedNetwork
from clusterlab.net.transport_config import TransportConfig
from clusterlab.units import parse_rate

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.root

# Every rank sends 2 MB to every other (an all-to-all over the emulated links), then reports the
# network namespace it ran in.
PROGRAM = """
import os, sys
from clusterlab.comm import world
c = world()
got = c.alltoall([bytes(2_000_000)] * c.size)
assert all(len(g) == 2_000_000 for g in got)
with open(os.path.join(sys.argv[1], f"ns{c.rank}"), "w") as f:
    f.write(str(os.stat("/proc/self/ns/net").st_ino))
"""


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    return subprocess.run([sys.executable, "-m", "clusterlab", *args], env=env, capture_output=True, text=True,
                          timeout=180)


@pytest.mark.slow
def test_program_on_a_testbed_recorded_reported_and_diagnosed(name, tmp_path):
    tb = TestbedNetwork(StarTopo(hosts=3, rate="100Mbit"), name=name,
                        transport=TransportConfig(rto_min=0.005, place="testbed")).up()
    try:
        prog = tmp_path / "prog.py"
        prog.write_text(PROGRAM)
        out, d = tmp_path / "out", tmp_path / "run"
        out.mkdir()
        p = _cli("run", "--testbed", name, "-n", "3", "--run-dir", str(d), "--", "python", str(prog), str(out))
        assert p.returncode == 0, p.stderr[-3000:]
        # it ends with the fidelity line (the testbed's RTO min reached it) and the diagnosis
        end = p.stderr.strip().splitlines()
        assert end[-1].startswith("diagnosis: ")
        assert any(ln.startswith("fidelity: ") and "RTO min 5 ms" in ln for ln in end[-4:]), end[-4:]
    finally:
        tb.down()
    assert len({(out / f"ns{r}").read_text() for r in range(3)}) == 3  # three hosts' namespaces
    meta = json.loads((d / "meta.json").read_text())
    assert meta["cluster"]["kind"] == "testbed" and parse_rate(meta["cluster"]["rate"], "rate") == 100e6
    assert meta["cluster"]["hosts"] == 3 and meta["transport"]["rto_min"] == 0.005
    assert meta["status"] == "ok" and meta["rank_records"] == 3
    assert {"h0", "h1", "h2", "switch"} <= set(meta["monitor"]["nodes"])
    for r in range(3):
        x = json.loads((d / "ranks" / f"rank-{r}.json").read_text())
        assert abs(x["compute_s"] + x["transfer_s"] + x["rto_wait_s"] - x["wall_s"]) < 1e-3, x
        assert x["bytes_sent"] >= 4_000_000 and x["timeouts"] is not None
        # 4 MB out of each host at 100 Mbit/s: at least 0.3 s inside the call
        assert x["transfer_s"] + x["rto_wait_s"] >= 0.3, x

    p = _cli("report", str(d))
    assert p.returncode == 0, p.stderr[-3000:]
    md = (d / "report.md").read_text()
    assert "links 100 Mbit/s" in md and "rto_min=0.005" in md and all(f"\n| {r} | " in md for r in range(3))
    assert (d / "monitor" / "switch.png").exists()
    p = _cli("diagnose", str(d), "--json")
    assert p.returncode == 0, p.stderr[-3000:]
    job = json.loads(p.stdout)["jobs"][0]
    assert job["kind"] == "program" and sorted(x["rank"] for x in job["per_rank"]) == [0, 1, 2]
    # the emulated cluster's settings reached the fidelity check (a local run is "not emulated")
    assert job["fidelity"]["line"].startswith("fidelity: ") and "RTO min 5 ms" in job["fidelity"]["line"]
