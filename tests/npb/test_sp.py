"""NPB SP: NPB's verification (residual norms xcr, error norms xce) for class S on every
supported rank count in threads (1, 4, 9, 16: NPB's multi-partition; 2, 3, 5-8, 10: slabs of
k-planes), identical bit for bit; on the TCP mesh (slabs on 2, cells on 4) and under MPI when
mpiexec is there; NPB's cells and the messages of both decompositions; refusals. Classes W
and A take minutes: test_npb.py's CLUSTERLAB_NPB_SLOW=1 test runs them.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from clusterlab import npb
from clusterlab.cluster import InProcess, Local, Mpirun
from clusterlab.cluster.mpirun import mpiexec_path
from clusterlab.errors import ConfigError
from clusterlab.npb import sp


def values(r) -> tuple:
    v = r.verification
    return tuple(v["xcr"]["value"]), tuple(v["xce"]["value"])


@pytest.fixture(scope="module")
def one_rank():
    return npb.run("sp", "S", n=1, cluster=InProcess())


def test_class_s_verifies_on_one_rank_with_npbs_values(one_rank):
    r = one_rank
    assert r.verified and r.kernel == "SP" and r.size == "12x12x12" and r.iterations == 100
    v = r.verification
    assert v["xcr"]["error"] <= 1e-8 and v["xce"]["error"] <= 1e-8
    assert v["xcr"]["reference"][0] == 2.7470315451339479e-02 and v["xce"]["reference"][4] == 3.4177666183390531e-05
    assert r.mops > 0 and r.optype == "floating point"


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8, 9, 10, 16])
def test_class_s_identical_on_every_supported_rank_count(one_rank, n):
    r = npb.run("sp", "S", n=n, cluster=InProcess())
    assert r.verified and values(r) == values(one_rank)


def test_slabs_and_rows():
    assert sp.slabs(12, 1) == [(0, 12)] and sp.split(12, 1) == [(1, 11)]
    assert sp.slabs(12, 4) == [(0, 3), (3, 6), (6, 8), (8, 12)]
    assert sp.slabs(12, 10) == [(0, 2)] + [(k, k + 1) for k in range(2, 10)] + [(10, 12)]


def test_npbs_cells():
    """make_set's diagonal multi-partition: each rank's cells take every slice of every axis."""
    for p in (2, 3, 4):
        owners = {}
        for r in range(p * p):
            cells = sp.cell_coords(r, p)
            assert all(sorted(c[a] for c in cells) == list(range(p)) for a in range(3))
            owners.update({c: r for c in cells})
        assert len(owners) == p ** 3
    assert [sp.decomposition("W", n) for n in (16, 34, 35, 144, 169)] == ["cells", "slabs", None, "cells", None]


def test_multi_partition_messages():
    """4 ranks (2 x 2 x 2 cells of 6^3, two per rank), class S: per time step each rank sends
    its cells' faces to each of the 3 ranks owning a neighbouring cell (one message per rank),
    and per axis one forward message (the last two rows of 5 x 5 lines: 22 values per line)
    and one backward message (10 values per line) along the pipeline."""
    r = npb.run("sp", "S", n=4, cluster=InProcess(), events=True)
    assert r.verified
    for rank, ev in enumerate(r.events):
        sends = [e for e in ev if e[2] == "send"]
        faces = [e for e in sends if e[4] == sp.TAG_HALO]
        assert len(faces) == 100 * 3 and {e[3] for e in faces} == {0, 1, 2, 3} - {rank}
        for axis in range(3):
            fwd = [e for e in sends if e[4] == sp.TAG_FORWARD + axis]
            bwd = [e for e in sends if e[4] == sp.TAG_BACKWARD + axis]
            assert len(fwd) == len(bwd) == 100
            assert {e[5] for e in fwd} == {25 * 22 * 8} and {e[5] for e in bwd} == {25 * 10 * 8}
        assert len(sends) == 100 * 9


def test_slab_halo_and_transpose_messages():
    """3 ranks, class S (slabs of 4, 3, 5 planes): per time step each rank sends two planes
    of u to each neighbouring slab (2 x 144 points x 5 values), and two all-to-alls."""
    r = npb.run("sp", "S", n=3, cluster=InProcess(), events=True)
    assert r.verified
    for rank, ev in enumerate(r.events):
        halo = [e for e in ev if e[2] == "send" and e[4] == sp.TAG_HALO]
        neighbours = {rank - 1, rank + 1} & {0, 1, 2}
        assert {e[3] for e in halo} == neighbours
        assert len(halo) == 100 * len(neighbours) and {e[5] for e in halo} == {2 * 144 * 5 * 8}
        assert {e[3] for e in ev if e[2] == "send"} == {0, 1, 2} - {rank}  # the transposes reach every rank


@pytest.mark.parametrize("n", [2, 4])
def test_tcp_mesh_gives_the_same_values(one_rank, n):
    r = npb.run("sp", "S", n=n, cluster=Local())
    assert r.verified and r.backend == "tcp" and values(r) == values(one_rank)
    assert all(x["bytes_sent"] > 0 for x in r.ranks)


@pytest.mark.skipif(mpiexec_path() is None, reason="mpiexec (the mpich wheel) is not installed")
def test_mpi_backend(one_rank):
    r = npb.run("sp", "S", n=4, cluster=Mpirun())
    assert r.verified and r.backend == "mpi" and values(r) == values(one_rank)


@pytest.mark.parametrize("cls,n", [("S", 11), ("S", 25), ("W", 35), ("A", 63)])
def test_unsupported_rank_counts_are_refused(cls, n):
    with pytest.raises(ConfigError, match="SP class"):
        npb.check("sp", cls, n)


def test_cli_refuses_in_one_line():
    p = subprocess.run([sys.executable, "-m", "clusterlab", "npb", "run", "sp", "-n", "11", "--backend", "inproc"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "up to 16" in p.stderr and "1 to 10 ranks" in p.stderr, p.stderr
    p = subprocess.run([sys.executable, "-m", "clusterlab", "npb", "run", "sp", "--class", "B", "--backend", "inproc"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "S, W, A" in p.stderr, p.stderr
