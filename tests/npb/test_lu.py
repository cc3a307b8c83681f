"""NPB LU: NPB's verification (residual norms xcr, error norms xce, surface integral xci)
for class S on 1, 2, 4 and 8 ranks, in threads and on the TCP mesh (and under MPI when
mpiexec is there), identical for every rank count; NPB's process grid and wavefront messages;
refusals. Classes W and A take minutes: test_npb.py's CLUSTERLAB_NPB_SLOW=1 test runs them.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from clusterlab import npb
from clusterlab.cluster import InProcess, Local, Mpirun
from clusterlab.cluster.mpirun import mpiexec_path
from clusterlab.errors import ConfigError
from clusterlab.npb import lu


def values(r) -> tuple:
    v = r.verification
    return tuple(v["xcr"]["value"]), tuple(v["xce"]["value"]), v["xci"]["value"]


@pytest.fixture(scope="module")
def one_rank():
    return npb.run("lu", "S", n=1, cluster=InProcess())


def test_class_s_verifies_on_one_rank_with_npbs_values(one_rank):
    r = one_rank
    assert r.verified and r.kernel == "LU" and r.size == "12x12x12" and r.iterations == 50
    v = r.verification
    assert v["xcr"]["error"] <= 1e-8 and v["xce"]["error"] <= 1e-8 and v["xci"]["error"] <= 1e-8
    assert v["xcr"]["reference"][0] == 1.6196343210976702e-02 and v["xci"]["reference"] == 7.8418928865937083
    assert r.mops > 0 and r.optype == "floating point"


@pytest.mark.parametrize("n", [2, 4, 8])
def test_class_s_identical_on_npbs_process_grids(one_rank, n):
    r = npb.run("lu", "S", n=n, cluster=InProcess())
    assert r.verified and values(r) == values(one_rank)


def test_process_grid_is_npbs():
    assert [lu.process_grid(n) for n in (1, 2, 4, 6, 8, 9, 12)] == [(1, 1), (2, 1), (2, 2), (3, 2), (4, 2), (3, 3), (4, 3)]
    assert lu.process_grid(3) is None and lu.process_grid(10) is None


def test_wavefront_messages_are_npbs(one_rank):
    """2x2 grid: per iteration and k-plane, each rank sends one boundary line to each of its
    two neighbours (to south/east after blts, to north/west after buts): 50 x 10 x 2."""
    r = npb.run("lu", "S", n=4, cluster=InProcess(), events=True)
    assert r.verified and values(r) == values(one_rank)
    for ev in r.events:
        wave = [e for e in ev if e[2] == "send" and 1 <= e[4] <= 4]
        assert len(wave) == 50 * 10 * 2
        # a line of the 12-point plane's interior this rank holds: 5 values x 5 points (6 minus the boundary)
        assert {e[5] for e in wave} == {5 * 5 * 8}


def test_tcp_mesh_gives_the_same_values(one_rank):
    r = npb.run("lu", "S", n=2, cluster=Local())
    assert r.verified and r.backend == "tcp" and values(r) == values(one_rank)
    assert all(x["bytes_sent"] > 0 for x in r.ranks)


@pytest.mark.skipif(mpiexec_path() is None, reason="mpiexec (the mpich wheel) is not installed")
def test_mpi_backend(one_rank):
    r = npb.run("lu", "S", n=4, cluster=Mpirun())
    assert r.verified and r.backend == "mpi" and values(r) == values(one_rank)


@pytest.mark.parametrize("n", [3, 5, 10, 64])
def test_unsupported_rank_counts_are_refused(n):
    with pytest.raises(ConfigError, match="LU"):
        npb.run("lu", "S", n=n)


def test_cli_refuses_in_one_line():
    p = subprocess.run([sys.executable, "-m", "clusterlab", "npb", "run", "lu", "-n", "3", "--backend", "inproc"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "xdim x ydim" in p.stderr, p.stderr
    p = subprocess.run([sys.executable, "-m", "clusterlab", "npb", "run", "lu", "--class", "B", "--backend", "inproc"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "S, W, A" in p.stderr, p.stderr
