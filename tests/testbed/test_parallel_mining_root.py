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
