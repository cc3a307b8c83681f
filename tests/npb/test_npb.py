"""NPB kernels: NPB's own verification for class S on 1, 2, 4 (and 8) ranks, in threads, on
the TCP mesh and under MPI; verification values bit-identical for every rank count and
backend; the generator bit-exact; the CLI's report, JSON, trace and refusals.

Classes W and A take minutes on two shared cores: they run only with CLUSTERLAB_NPB_SLOW=1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from clusterlab import _core, npb
from clusterlab.cluster import InProcess, Local, Mpirun
from clusterlab.cluster.mpirun import mpiexec_path
from clusterlab.errors import ConfigError

# the quantity each kernel verifies, as it appears in the result record
KEY = {"ep": ("sx", "value"), "is": ("test_key_ranks",), "cg": ("zeta", "value"),
       "mg": ("l2_norm", "value"), "ft": ("checksums",), "lu": (), "sp": ()}
# 8 ranks where the decomposition is new there (CG's non-square 2x4 grid, MG's 2x2x2, LU's 4x2);
# LU's checked quantity is its whole verification (residual and error norms, surface integral)
RANKS = {"ep": (1, 3), "is": (1, 3, 4), "cg": (1, 2, 4, 8), "mg": (1, 2, 4, 8), "ft": (1, 2, 4),
         "lu": (1, 2, 4, 8), "sp": (1, 4)}


def checked(res) -> object:
    v = res.verification
    for k in KEY[res.kernel.lower()]:
        v = v[k]
    return v


def randlc_dp(x: float, a: float) -> tuple[float, float]:
    """NPB's double-precision randlc (the specification's 23-bit split), in plain Python."""
    r23, t23 = 0.5 ** 23, 2.0 ** 23
    r46, t46 = r23 * r23, t23 * t23
    a1 = float(int(r23 * a))
    a2 = a - t23 * a1
    x1 = float(int(r23 * x))
    x2 = x - t23 * x1
    t1 = a1 * x2 + a2 * x1
    z = t1 - t23 * float(int(r23 * t1))
    t3 = t23 * z + a2 * x2
    x = t3 - t46 * float(int(r46 * t3))
    return x, r46 * x


def test_generator_is_bit_exact_with_npbs_formula():
    for seed, a in ((314159265.0, 1220703125.0), (271828183.0, 1220703125.0), (314159265.0, 5.0 ** 13)):
        vals, state = _core.npb_vranlc(3000, seed, a)
        x = seed
        for v in vals:
            x, want = randlc_dp(x, a)
            assert v == want
        assert state == x
    assert _core.npb_pow46(1220703125.0, 2) == randlc_dp(1220703125.0, 1220703125.0)[0]
    with pytest.raises(ValueError):
        _core.npb_vranlc(1, 0.5, 3.0)


@pytest.mark.parametrize("kernel", npb.KERNELS)
def test_class_s_verifies_and_is_identical_for_every_rank_count(kernel):
    results = [npb.run(kernel, "S", n=n, cluster=InProcess()) for n in RANKS[kernel]]
    for r in results:
        assert r.verified, (r.nprocs, r.verification)
        assert r.seconds > 0 and r.mops > 0 and len(r.ranks) == r.nprocs
        assert all(x["compute_s"] > 0 for x in r.ranks)
    values = [checked(r) for r in results]
    assert all(v == values[0] for v in values), values
    multi = [r for r in results if r.nprocs > 1]
    assert all(sum(x["bytes_sent"] for x in r.ranks) > 0 for r in multi)


def test_tcp_mesh_gives_the_same_values_and_records_traffic():
    ref = {k: checked(npb.run(k, "S", n=1, cluster=InProcess())) for k in ("cg", "mg", "ft")}
    for kernel, n in (("cg", 2), ("mg", 2), ("ft", 2)):
        r = npb.run(kernel, "S", n=n, cluster=Local(), events=True)
        assert r.verified and r.backend == "tcp" and r.nprocs == n
        assert checked(r) == ref[kernel]
        assert len(r.events) == n and all(len(e) > 0 for e in r.events)
        for rank, ev in zip(r.ranks, r.events, strict=True):
            sent = [e for e in ev if e[2] == "send"]
            assert rank["messages_sent"] == len(sent) and rank["bytes_sent"] == sum(e[5] for e in sent)
            assert abs(rank["compute_s"] - sum(e[0] for e in ev)) <= rank["compute_s"]


def test_tcp_knobs_reach_the_mesh():
    from clusterlab.net.transport_config import TransportConfig

    r = npb.run("ep", "S", n=2, cluster=Local(), transport=TransportConfig(rcvbuf=1 << 20, congestion="reno"))
    assert r.verified


@pytest.mark.skipif(mpiexec_path() is None, reason="mpiexec (the mpich wheel) is not installed")
def test_mpi_backend():
    r = npb.run("cg", "S", n=2, cluster=Mpirun())
    assert r.verified and r.backend == "mpi"
    assert checked(r) == checked(npb.run("cg", "S", n=1))


@pytest.mark.skipif(mpiexec_path() is None, reason="mpiexec (the mpich wheel) is not installed")
@pytest.mark.parametrize("kernel,n", [("mg", 2), ("cg", 4)])
def test_mpi_backend_with_misaligned_messages(kernel, n):
    """MPI hands back arrays at odd offsets; MG's halos (2+ ranks) and CG's exchanges (4+) failed
    with "not contiguous or is misaligned" before received arrays were aligned."""
    r = npb.run(kernel, "S", n=n, cluster=Mpirun())
    assert r.verified and checked(r) == checked(npb.run(kernel, "S", n=1))


@pytest.mark.parametrize("kernel,n", [("cg", 3), ("mg", 16), ("mg", 3), ("ft", 3), ("ep", 0), ("is", 129), ("lu", 3),
                                      ("lu", 64), ("sp", 11)])
def test_unsupported_rank_counts_are_refused(kernel, n):
    with pytest.raises(ConfigError):
        npb.run(kernel, "S", n=n)


def test_bad_kernel_class_backend_refused():
    with pytest.raises(ConfigError, match="one of ep, is, cg, mg, ft, lu, sp"):
        npb.run("bt", "S")
    with pytest.raises(ConfigError, match="S, W, A"):
        npb.run("cg", "B")
    from clusterlab.cluster import from_options

    with pytest.raises(ConfigError, match="unknown backend"):
        from_options("carrier-pigeon")


def test_result_report_has_npbs_fields():
    text = npb.run("ep", "S", n=1).report()
    for field in ("Class", "Size", "Iterations", "Time in seconds", "Mop/s total", "Verification", "SUCCESSFUL"):
        assert field in text


def _cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "clusterlab", "npb", *args], capture_output=True, text=True,
                          timeout=300, **kw)


def test_cli_json_trace_and_errors(tmp_path):
    trace = tmp_path / "t.json"
    p = _cli("run", "mg", "--class", "S", "-n", "2", "--backend", "inproc", "--json", "--trace", str(trace))
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    assert rec["verified"] and rec["class"] == "S" and rec["nprocs"] == 2 and "events" not in rec
    full = json.loads(trace.read_text())
    assert len(full["events"]) == 2
    p = _cli("run", "mg", "-n", "5", "--backend", "inproc")
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "1, 2, 4 or 8" in p.stderr
    p = _cli("run", "cg", "--class", "Q")
    assert p.returncode == 2 and "S, W, A" in p.stderr
    # TCP settings: the cluster that cannot apply them refuses (the command asks it, not its type)
    p = _cli("run", "ep", "--backend", "inproc", "--rto-min", "5ms")
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "not to in-process ranks" in p.stderr, p.stderr
    if mpiexec_path() is not None:
        p = _cli("run", "ep", "-n", "2", "--backend", "mpi", "--rto-min", "5ms")
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and "not to MPI's own transport" in p.stderr, p.stderr
    p = _cli("run", "is", "--class", "s", "-n", "2")
    assert p.returncode == 0 and "SUCCESSFUL" in p.stdout and "tcp" in p.stdout


SLOW = os.environ.get("CLUSTERLAB_NPB_SLOW") == "1"


@pytest.mark.slow
@pytest.mark.skipif(not SLOW, reason="classes W and A take minutes on 2 cores; set CLUSTERLAB_NPB_SLOW=1")
@pytest.mark.parametrize("cls", ["W", "A"])
@pytest.mark.parametrize("kernel", npb.KERNELS)
def test_classes_w_and_a_verify(kernel, cls):
    one = npb.run(kernel, cls, n=1)
    two = npb.run(kernel, cls, n=2, cluster=Local())
    assert one.verified and two.verified
    assert checked(one) == checked(two)


def test_exact_sum_is_left_to_right():
    from clusterlab.npb.common import exact_sum

    v = np.array([1e16, 1.0, -1e16, 1.0])
    assert exact_sum(v) == ((1e16 + 1.0) - 1e16) + 1.0


@pytest.mark.skipif(mpiexec_path() is None, reason="mpiexec (the mpich wheel) is not installed")
def test_official_binary_report_is_read(tmp_path):
    """A stand-in for an NPB-MPI binary (rank 0 prints NPB's report) run under mpiexec."""
    from clusterlab.npb.official import SAMPLE, parse_report

    fake = tmp_path / "is.S.2"
    # NPB reads its input files from the working directory: the binary's own
    fake.write_text(f"#!/bin/sh\n[ \"$(pwd)\" = {tmp_path.resolve()} ] || {{ echo wrong cwd $(pwd) >&2; exit 4; }}\n"
                    "[ \"${PMI_RANK:-0}\" = 0 ] && cat <<'EOF'\n" + SAMPLE + "EOF\nexit 0\n")
    fake.chmod(0o755)
    p = _cli("official", str(fake), "-n", "2", "--json", cwd="/")
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    assert rec["kernel"] == "IS" and rec["verified"] and rec["nprocs"] == 2 and rec["backend"] == "npb-mpi"
    # from Python the cluster starts the ranks; its own mpiexec arguments and the call's both reach mpiexec
    from clusterlab.npb.official import run_binary

    marked = tmp_path / "marked"
    marked.write_text(fake.read_text().replace("exit 0", "[ \"$NPB_MARK\" = 7 ] || exit 5\nexit 0"))
    marked.chmod(0o755)
    assert run_binary(str(marked), 2, cluster=Mpirun(mpiexec_args=["-genv", "NPB_MARK", "7"])).verified
    # a rank that fails is named
    bad = tmp_path / "bad"
    bad.write_text("#!/bin/sh\n[ \"$PMI_RANK\" = 1 ] && exit 3\nexit 0\n")
    bad.chmod(0o755)
    p = _cli("official", str(bad), "-n", "2")
    assert p.returncode == 2 and "rank 1 failed" in p.stderr and "exited with status 3" in p.stderr, p.stderr
    with pytest.raises(ConfigError, match="no NPB report"):
        parse_report("Segmentation fault", backend="npb-mpi")
    p = _cli("official", str(tmp_path / "missing"))
    assert p.returncode == 2 and "no such NPB binary" in p.stderr
