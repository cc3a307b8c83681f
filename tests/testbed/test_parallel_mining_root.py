"""Parallel miners on the namespace testbed (root): rank i runs in host i over the TCP mesh,
and every algorithm's result is byte-identical to the sequential engine's."""

import subprocess
import sys

import pytest

import clusterlab
from clusterlab.cluster import Testbed as OnTestbed
from clusterlab.cluster.testbed import StarTopo, TestbedNetwork
from clusterlab.mining.parallel import mine_parallel

pytestmark = [pytest.mark.root]


def test_every_parallel_miner_on_the_testbed_equals_sequential(name, tmp_path):
    data = tmp_path / "t.dat"
    clusterlab.generate_file(data, "T10I4D3K", items=200, seed=3)
    seq = clusterlab.mine(data, min_support=0.02)
    with TestbedNetwork(StarTopo(hosts=3), name=name):
        for algorithm in ("hpa", "hpa-eld", "cd", "pfp"):
            sets, passes = mine_parallel(data, nodes=3, algorithm=algorithm, min_support=0.02, cluster=OnTestbed(name))
            assert sets.columns == seq.columns, algorithm
            assert [p["pass"] for p in passes][:1] == [1]
        # The CLI path: the same result written as SPMF by `clusterlab mine --testbed`.
        out = tmp_path / "cli.txt"
        r = subprocess.run([sys.executable, "-m", "clusterlab", "mine", str(data), "-s", "0.02", "--nodes", "3",
                            "-a", "hpa", "--testbed", name, "-o", str(out)], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        assert len(out.read_text().splitlines()) == seq.num_rows


def test_mine_on_the_testbed_ends_with_its_fidelity_line_and_diagnosis(name, tmp_path):
    """`mine --nodes N --testbed`: the last lines judge the emulation with the testbed's own settings
    (its RTO min: 5 ms is about one jiffy at dilation 1, a failed timer check) and name the loss."""
    from clusterlab.net.transport_config import TransportConfig

    data = tmp_path / "t.dat"
    clusterlab.generate_file(data, "T10I4D3K", items=200, seed=3)
    with TestbedNetwork(StarTopo(hosts=2), name=name, transport=TransportConfig(rto_min=0.005, place="testbed")):
        r = subprocess.run([sys.executable, "-m", "clusterlab", "mine", str(data), "-s", "0.02", "--nodes", "2",
                            "-a", "hpa", "--testbed", name, "-q"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[-1].startswith("diagnosis: ") and ("fix:" in lines[-1] or "none found" in lines[-1])
    fid = next(ln for ln in lines[-4:] if ln.startswith("fidelity: "))
    assert fid.startswith("fidelity: FAIL") and "RTO min 5 ms as run (1x dilated)" in fid
    assert "of samples saturated" in fid  # the spare CPU from the testbed monitor's samples over the job
