"""`clusterlab run --testbed NAME --backend mpi`: an mpi4py program's and an MPI C program's ranks
in the hosts' namespaces, their data over the emulated links under the hosts' TCP settings (a
non-default rto_min in each host's `ss -tin`), a rank that dies named, nothing left behind (root,
mpi4py and the mpich wheel)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterlab.cluster.testbed import StarTopo, TestbedNetwork
from clusterlab.net.transport_config import TransportConfig
from tests.comm.conftest import needs_mpi

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.root, needs_mpi]

# Plain mpi4py (no clusterlab): Allreduce in a loop, then each rank reports where it ran and what
# its TCP connections to the other hosts say (`ss -tin`: the RTO in force, the bytes sent).
PROGRAM = r"""
import json, os, re, subprocess, sys
import numpy as np
from mpi4py import MPI
c = MPI.COMM_WORLD
x = np.full(1 << 17, c.Get_rank() + 1.0)      # 1 MiB
y = np.empty_like(x)
for _ in range(5):
    c.Allreduce(x, y)
if sys.argv[2] == "kill" and c.Get_rank() == 1:
    os.kill(os.getpid(), 9)
ss = subprocess.run(["ss", "-tin", "state", "established"], capture_output=True, text=True).stdout
conns = []
for head, info in zip(*[iter(ss.splitlines()[1:])] * 2):
    peer = head.split()[-1].rsplit(":", 1)[0]
    rto = re.search(r"\brto:([\d.]+)", info)
    sent = re.search(r"\bbytes_sent:(\d+)", info)
    conns.append({"peer": peer, "rto_ms": float(rto.group(1)) if rto else None,
                  "bytes_sent": int(sent.group(1)) if sent else 0})
c.Barrier()
out = {"rank": c.Get_rank(), "size": c.Get_size(), "sum": float(y[0]), "netns": os.stat("/proc/self/ns/net").st_ino,
       "host": os.environ.get("PMI_HOSTNAME"), "conns": conns,
       "rto_min_us": open("/proc/sys/net/ipv4/tcp_rto_min_us").read().strip()
       if os.path.exists("/proc/sys/net/ipv4/tcp_rto_min_us") else None}
with open(os.path.join(sys.argv[1], f"rank{c.Get_rank()}.json"), "w") as f:
    json.dump(out, f)
"""


@pytest.fixture
def testbed4(name, tmp_path):
    if shutil.which("setpriv") is None or shutil.which("ss") is None:
        pytest.skip("needs setpriv (util-linux) and ss (iproute2)")
    tb = TestbedNetwork(StarTopo(hosts=4, rate="1Gbit"), name=name,
                 transport=TransportConfig(rto_min=0.005, place="testbed")).up()
    prog = tmp_path / "allreduce.py"
    prog.write_text(PROGRAM)
    try:
        yield tb, prog
    finally:
        tb.down()


def _run(tb, prog, out, mode):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    return subprocess.run([sys.executable, "-m", "clusterlab", "run", "--testbed", tb.name, "--backend", "mpi",
                           "-n", "4", "--timeout", "120s", "--", "python", str(prog), str(out), mode],
                          env=env, capture_output=True, text=True, timeout=180)


def test_mpi4py_program_runs_in_the_hosts_over_the_links(testbed4, tmp_path):
    tb, prog = testbed4
    out = tmp_path / "out"
    out.mkdir()
    p = _run(tb, prog, out, "ok")
    assert p.returncode == 0, p.stderr[-3000:]
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(4)]
    addrs = {h.addr for h in tb.hosts}
    for r, o in enumerate(ranks):
        assert o["size"] == 4 and o["sum"] == 10.0        # one 4-rank world, not four 1-rank ones
        assert o["host"] == tb.hosts[r].name, o
        links = [c for c in o["conns"] if c["peer"] in addrs - {tb.hosts[r].addr}]
        assert links, o                                   # TCP to other hosts: not shared memory
        # the data crossed them: 5 Allreduces of 1 MiB send at least 1 MiB from every rank
        assert sum(c["bytes_sent"] for c in links) >= 1 << 20, o
        # rto_min 5 ms in force (the kernel's default floor is 200 ms), set and read in the namespace
        assert all(c["rto_ms"] is not None and c["rto_ms"] < 100 for c in links), o
        if o["rto_min_us"] is not None:
            assert o["rto_min_us"] == "5000", o
    assert len({o["netns"] for o in ranks}) == 4


def test_an_mpi_program_on_the_testbed_is_recorded_with_the_hosts_counters(testbed4, tmp_path):
    """`--run-dir` with an MPI program: no rank records (MPI's own sockets), the hosts' settings
    (not per-socket knobs) in meta.json, and the monitor's per-host TCP counters in diagnose."""
    tb, prog = testbed4
    out, d = tmp_path / "out", tmp_path / "run"
    out.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    p = subprocess.run([sys.executable, "-m", "clusterlab", "run", "--testbed", tb.name, "--backend", "mpi",
                        "-n", "4", "--timeout", "120s", "--run-dir", str(d), "--", "python", str(prog), str(out), "ok"],
                       env=env, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-3000:]
    meta = json.loads((d / "meta.json").read_text())
    assert meta["cluster"]["mesh"] == "mpi" and meta["rank_records"] == 0 and meta["returncodes"] == [0] * 4
    assert meta["transport"]["rto_min"] == 0.005 and "nodelay" not in meta["transport"]
    p = subprocess.run([sys.executable, "-m", "clusterlab", "diagnose", str(d), "--json"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    hosts = json.loads(p.stdout)["jobs"][0]["hosts_tcp"]
    # 5 Allreduces of 1 MiB: every host sent hundreds of segments over its link
    assert all(hosts[f"h{i}"]["TcpOutSegs"] >= 100 for i in range(4)), hosts


def test_a_killed_rank_is_named_and_nothing_is_left(testbed4, tmp_path):
    from clusterlab.cluster.testbed import leftovers

    tb, prog = testbed4
    t0 = time.monotonic()
    p = _run(tb, prog, tmp_path, "kill")
    took = time.monotonic() - t0
    assert p.returncode != 0
    assert "rank 1 on h1 failed:" in p.stderr and "SIGKILL" in p.stderr, p.stderr[-3000:]
    # within the 3 s grace and 2 s to SIGKILL of the death, plus start-up: the ranks left blocked
    # on the dead one (their proxies gone with mpiexec) are killed, not waited for (they held
    # their links open for another 10 s)
    assert took < 13, (took, p.stderr[-2000:])
    left = leftovers(tb.name)
    assert not left["processes"], left


C_PROGRAM = r"""
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* allreduce DIR MODE: 5 Allreduces of 1 MiB; MODE "kill": rank 1 then dies of SIGKILL; each
   rank writes what `ss -tin` says of its established connections to DIR/rankN.ss */
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    static double x[1 << 17], y[1 << 17];
    for (int i = 0; i < (1 << 17); i++) x[i] = rank + 1.0;
    for (int k = 0; k < 5; k++) MPI_Allreduce(x, y, 1 << 17, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (argc > 2 && strcmp(argv[2], "kill") == 0 && rank == 1) raise(SIGKILL);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "ss -tin state established > %s/rank%d.ss", argv[1], rank);
    if (system(cmd) != 0) return 3;
    MPI_Barrier(MPI_COMM_WORLD);  /* every rank looked at its connections before any closes them */
    const char *host = getenv("PMI_HOSTNAME");
    printf("rank %d of %d on %s: %g\n", rank, size, host ? host : "?", y[0]);
    MPI_Finalize();
    return 0;
}
"""


def _links(ss: str, peers: set[str]) -> list[dict]:
    """`ss -tin`'s connections to ``peers``: each one's RTO (ms) and bytes sent."""
    out, lines = [], ss.splitlines()[1:]  # each connection: its address line, then its info line
    for head, info in zip(lines[::2], lines[1::2], strict=False):
        peer = head.split()[-1].rsplit(":", 1)[0]
        if peer in peers:
            rto, sent = re.search(r"\brto:([\d.]+)", info), re.search(r"\bbytes_sent:(\d+)", info)
            out.append({"peer": peer, "rto_ms": float(rto.group(1)) if rto else None,
                        "bytes_sent": int(sent.group(1)) if sent else 0})
    return out


def _mpicc(tmp_path) -> str:
    """The C program built with the venv's mpicc (MPICH from the mpich wheel)."""
    mpicc = Path(sys.executable).with_name("mpicc")
    if not mpicc.exists() or shutil.which("cc") is None:
        pytest.skip("needs the mpich wheel's mpicc and a C compiler")
    (tmp_path / "allreduce.c").write_text(C_PROGRAM)
    subprocess.run([str(mpicc), "-O2", "-o", str(tmp_path / "allreduce"), str(tmp_path / "allreduce.c")],
                   check=True, capture_output=True, timeout=120)
    return str(tmp_path / "allreduce")


def _run_c(tb, binary, out, mode):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    return subprocess.run([sys.executable, "-m", "clusterlab", "run", "--testbed", tb.name, "--backend", "mpi", "-n",
                           "4", "--timeout", "120s", "--", binary, str(out), mode], env=env, capture_output=True,
                          text=True, timeout=180)


def test_mpi_c_program_built_with_mpicc_runs_in_the_hosts(testbed4, tmp_path):
    """An MPI C program (the venv's mpicc, MPICH from the mpich wheel) on the 4 hosts: one
    4-rank world, rank i in host hi, its data over TCP to the other hosts with the testbed's
    rto_min (5 ms, not the kernel's 200) in each host's `ss -tin`; `clusterlab run` recognises
    it as an MPI program."""
    from clusterlab.cluster.program import mpi_program

    tb, _ = testbed4
    binary = _mpicc(tmp_path)
    assert mpi_program([binary]) == f"{binary} is linked with libmpi.so"
    out = tmp_path / "out"
    out.mkdir()
    p = _run_c(tb, binary, out, "ok")
    assert p.returncode == 0, p.stderr[-3000:]
    assert sorted(p.stdout.splitlines()) == [f"rank {r} of 4 on h{r}: 10" for r in range(4)]
    addrs = {h.addr for h in tb.hosts}
    for r in range(4):
        links = _links((out / f"rank{r}.ss").read_text(), addrs - {tb.hosts[r].addr})
        assert links, r                                   # TCP to other hosts: not shared memory
        assert sum(c["bytes_sent"] for c in links) >= 1 << 20, links
        assert all(c["rto_ms"] is not None and c["rto_ms"] < 100 for c in links), links


def test_a_killed_rank_of_an_mpi_c_program_is_named_and_nothing_is_left(testbed4, tmp_path):
    from clusterlab.cluster.testbed import leftovers

    tb, _ = testbed4
    p = _run_c(tb, _mpicc(tmp_path), tmp_path, "kill")
    assert p.returncode != 0
    assert "rank 1 on h1 failed:" in p.stderr and "SIGKILL" in p.stderr, p.stderr[-3000:]
    left = leftovers(tb.name)
    assert not left["processes"], left


FAKE_NPB = r"""
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int keys = rank + 1, total = 0;
    MPI_Allreduce(&keys, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    FILE *in = fopen("npbparams.in", "r");   /* NPB binaries read their input from their directory */
    if (rank == 0)
        printf(" IS Benchmark Completed\n Class           =                        S\n"
               " Size            =                    65536\n Iterations      =                       10\n"
               " Time in seconds =                     0.01\n Total processes =                        %d\n"
               " Mop/s total     =                    97.20\n Operation type  =              keys ranked\n"
               " Verification    =               %s\n", size, in && total == size * (size + 1) / 2
               ? "SUCCESSFUL" : "UNSUCCESSFUL");
    MPI_Finalize();
    return 0;
}
"""


def test_npb_official_runs_on_the_two_site_testbed(name, tmp_path):
    """`clusterlab npb official --testbed`: an NPB-MPI binary's ranks in the hosts of a two-site
    testbed (mpiexec on its switch, hydra into the hosts, the binary's own directory as the
    working directory), its report read into the record. The binary here is a stand-in that
    prints NPB's report after an Allreduce across the WAN (the real ones are built by users)."""
    mpicc = Path(sys.executable).with_name("mpicc")
    if not mpicc.exists() or shutil.which("cc") is None or shutil.which("setpriv") is None:
        pytest.skip("needs the mpich wheel's mpicc, a C compiler and setpriv")
    (tmp_path / "fake_is.c").write_text(FAKE_NPB)
    (tmp_path / "npbparams.in").write_text("\n")
    subprocess.run([str(mpicc), "-o", str(tmp_path / "is.S.4"), str(tmp_path / "fake_is.c")], check=True,
                   capture_output=True, timeout=120)
    topo = StarTopo(hosts=4, rate="1Gbit", sites="2+2", wan_rate="135Mbit", wan_delay="2ms")
    with TestbedNetwork(topo, name=name):
        env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
        p = subprocess.run([sys.executable, "-m", "clusterlab", "npb", "official", str(tmp_path / "is.S.4"), "-n", "4",
                            "--testbed", name, "--json"], env=env, capture_output=True, text=True, timeout=180,
                           cwd="/")
    assert p.returncode == 0, p.stderr[-3000:]
    rec = json.loads(p.stdout)
    assert rec["kernel"] == "IS" and rec["nprocs"] == 4 and rec["verified"], rec
    assert rec["backend"] == f"npb-mpi on testbed {name}"
