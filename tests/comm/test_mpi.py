"""The MPI backend and the MPI launch path: the same program under mpiexec and under our launcher."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterlab.cluster.mpirun import mpiexec_path
from tests.comm.conftest import assert_nothing_left, needs_mpi

pytestmark = needs_mpi
ROOT = Path(__file__).resolve().parents[2]

PROGRAM = """
import json, os, sys
from clusterlab.comm import world
from tests.comm import scenarios
c = world()
out = {"backend": type(c).__name__, "size": c.size,
       "p2p": scenarios.p2p_roundtrip(c), "order": scenarios.tags_and_order(c)}
if sys.argv[2] == "kill" and c.rank == 1:
    os.kill(os.getpid(), 9)
out["exchange"] = scenarios.exchange_all_at_once(c, 1 << 20)
with open(os.path.join(sys.argv[1], f"rank{c.rank}.json"), "w") as f:
    json.dump(out, f)
"""


def _run(cmd, tmp_path, env_extra=None, timeout=90):
    env = dict(os.environ, PYTHONPATH=str(ROOT), **(env_extra or {}))
    t = time.monotonic()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=tmp_path)
    return p, time.monotonic() - t


def _outputs(d: Path, n: int) -> list:
    return [json.loads((d / f"rank{r}.json").read_text()) for r in range(n)]


@pytest.fixture
def prog(tmp_path):
    p = tmp_path / "prog.py"
    p.write_text(PROGRAM)
    return p


def test_same_program_same_results_under_mpiexec_and_clusterlab_run(prog, tmp_path, marker):
    runs = {}
    for name, cmd, extra in [
        ("mpi", [mpiexec_path(), "-n", "3", sys.executable, str(prog)], {}),
        ("tcp-over-mpi", [mpiexec_path(), "-n", "3", sys.executable, str(prog)], {"CLUSTERLAB_BACKEND": "tcp"}),
        ("tcp", [sys.executable, "-m", "clusterlab", "run", "-n", "3", "--", "python", str(prog)], {}),
    ]:
        d = tmp_path / name
        d.mkdir()
        p, _ = _run([*cmd, str(d), "ok", marker], tmp_path, extra)
        assert p.returncode == 0, p.stderr[-3000:]
        runs[name] = _outputs(d, 3)
    assert [o["backend"] for o in runs["mpi"]] == ["MpiCommunicator"] * 3
    assert [o["backend"] for o in runs["tcp-over-mpi"]] == ["TcpCommunicator"] * 3
    strip = [[{k: v for k, v in o.items() if k != "backend"} for o in outs] for outs in runs.values()]
    assert strip[0] == strip[1] == strip[2]
    assert_nothing_left(marker)


def test_rank_killed_under_mpiexec_ends_the_job_quickly(prog, tmp_path, marker):
    d = tmp_path / "k"
    d.mkdir()
    p, elapsed = _run([mpiexec_path(), "-n", "3", sys.executable, str(prog), str(d), "kill", marker], tmp_path,
                      timeout=60)
    assert p.returncode != 0
    assert elapsed < 10 + 3, elapsed                     # + start-up of 3 Pythons
    assert "signal 9" in (p.stdout + p.stderr) or "Killed" in (p.stdout + p.stderr)
    assert_nothing_left(marker)


def test_mpi_stats_and_abort_through_launcher():
    from clusterlab.cluster.local import run
    from tests.comm import scenarios

    res = run(scenarios.stats_after_traffic, 2, backend="mpi", timeout=60)
    for r, st in enumerate(res):
        assert st["backend"] == "mpi" and st["library"].startswith("MPICH")
        assert st["peers"][str(1 - r)]["msgs_sent"] == 5 and st["msgs_recv"] == 5
        # MPICH's sockets take the host's default congestion control: read back as the TCP mesh's is
        with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
            assert st["transport"]["in_force"] == {"congestion": f.read().strip()}


# --- several hosts: namespace testbed hosts stand in for machines (root) -----------------------

# Hydra starts its proxy on each host as `ssh -x HOST "PROXY" ARGS...`; this launcher enters
# the host's namespace instead (and dies with mpiexec, as an ssh session would).
NSEXEC = """#!/bin/sh
shift
host=$1; shift
exec setpriv --pdeathsig KILL ip netns exec {prefix}$host sh -c "exec $*"
"""

MESH_PROGRAM = """
import json, os, sys
import numpy as np
import psutil
from clusterlab.comm import world
c = world()
total = c.allreduce(np.array([c.rank + 1], dtype=np.int64))
if sys.argv[2] == "kill":
    if c.rank == 1:
        os.kill(os.getpid(), 9)
    c.allreduce(total)
mesh = [x for x in psutil.Process().net_connections(kind="tcp") if x.status == "ESTABLISHED"]
st = c.stats()
c.barrier()  # no rank says goodbye (closing its links) before every rank has looked at its own
out = {"rank": c.rank, "backend": type(c).__name__, "sum": int(total[0]),
       "netns": os.stat("/proc/self/ns/net").st_ino, "host": os.environ.get("PMI_HOSTNAME"),
       "local": sorted({x.laddr.ip for x in mesh}), "remote": sorted({x.raddr.ip for x in mesh}),
       "rto_min_us": [p["tcp_info"].get("rto_us") for p in st["peers"].values()],
       "in_force": st["transport"]["in_force"]}
with open(os.path.join(sys.argv[1], f"rank{c.rank}.json"), "w") as f:
    json.dump(out, f)
"""


@pytest.fixture
def hosts3(tmp_path):
    """A 3-host testbed, a hostfile naming its hosts, and the namespace launcher for hydra."""
    from clusterlab.cluster.testbed import StarTopo, TestbedNetwork, clean, leftovers
    from tests.testbed.helpers import fresh_name, require_netns

    require_netns()
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv (util-linux)")
    name = fresh_name()
    tb = TestbedNetwork(StarTopo(hosts=3, rate="1Gbit"), name=name).up()
    try:
        script = tmp_path / "nsexec.sh"
        script.write_text(NSEXEC.format(prefix=tb.hosts[0].ns[:-2]))
        script.chmod(0o755)
        hostfile = tmp_path / "hosts"
        hostfile.write_text("".join(f"{h.name}\n" for h in tb.hosts))
        prog = tmp_path / "prog.py"
        prog.write_text(MESH_PROGRAM)
        yield tb, str(hostfile), ["-launcher", "ssh", "-launcher-exec", str(script), "-iface", "br0"], prog
    finally:
        tb.down()
        clean(name)
        left = leftovers(name)
        assert not left["namespaces"] and not left["processes"], left


def _check_mesh_over_hosts(tb, outdir):
    outs = [json.loads((outdir / f"rank{r}.json").read_text()) for r in range(3)]
    for r, o in enumerate(outs):
        assert o["backend"] == "TcpCommunicator" and o["sum"] == 6
        assert o["host"] == tb.hosts[r].name and o["local"] == [tb.hosts[r].addr], o
        assert set(o["remote"]) >= {h.addr for h in tb.hosts if h.index != r}, o
        # rto_min 5ms in force on every connection: the RTO is far below the default 200 ms floor
        assert len(o["rto_min_us"]) == 2 and all(5000 <= rto < 100_000 for rto in o["rto_min_us"]), o
    assert len({o["netns"] for o in outs}) == 3


@pytest.mark.root
def test_mesh_spans_hosts_under_launch_mpi_with_a_hostfile(hosts3, tmp_path, marker):
    """`mpiexec -f hostfile` started by our launcher: each rank's mesh listens on its host's
    address (the route towards the rendezvous), the TCP knobs apply on every connection."""
    from clusterlab.cluster.mpirun import launch_mpi
    from clusterlab.net.netns import in_netns
    from clusterlab.net.transport_config import TransportConfig

    tb, hostfile, args, prog = hosts3
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT), CLUSTERLAB_DRAINER="0")  # stats() races the drainer
    with in_netns(tb.switch.ns):  # the "login node": on the switch, where every host reaches it
        res = launch_mpi([sys.executable, str(prog), str(out), "ok", marker], 3, backend="tcp", hostfile=hostfile,
                         mpiexec_args=args, rendezvous_host=tb.topo.switch_address, env=env,
                         config=TransportConfig(rto_min=0.005), timeout=120, setup_timeout=60)
    assert res.ok, res
    _check_mesh_over_hosts(tb, out)


@pytest.mark.root
def test_mesh_spans_hosts_under_plain_mpiexec(hosts3, tmp_path, marker):
    """The user's own `mpiexec -f hostfile` with CLUSTERLAB_BACKEND=tcp: addresses go through
    MPI, each rank listens on the source of its route towards the other hosts."""
    from clusterlab.net.transport_config import TransportConfig

    tb, hostfile, args, prog = hosts3
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT), CLUSTERLAB_BACKEND="tcp", CLUSTERLAB_DRAINER="0",
               CLUSTERLAB_TRANSPORT=TransportConfig(rto_min=0.005).to_json())
    p = subprocess.run(["ip", "netns", "exec", tb.switch.ns, mpiexec_path(), "-f", hostfile, *args, "-n", "3",
                        sys.executable, str(prog), str(out), "ok", marker], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    _check_mesh_over_hosts(tb, out)


@pytest.mark.root
def test_unreachable_host_is_named_within_the_set_up_timeout(hosts3, tmp_path, marker):
    """h2's link is down: rank 2 cannot check in; the job names rank 2 and h2 within the set-up
    timeout, the others exit, and nothing is left on any host."""
    from clusterlab.cluster.mpirun import launch_mpi
    from clusterlab.net.netns import in_netns

    tb, hostfile, args, prog = hosts3
    tb.switch.run(["ip", "link", "set", "p2", "down"])
    t = time.monotonic()
    with in_netns(tb.switch.ns):
        res = launch_mpi([sys.executable, str(prog), str(tmp_path), "ok", marker], 3, backend="tcp", hostfile=hostfile,
                         mpiexec_args=args, rendezvous_host=tb.topo.switch_address, grace=2.0,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120, setup_timeout=5)
    took = time.monotonic() - t
    assert res.failed_rank == 2 and "rank 2 on h2 did not check in within 5 s" in res.reason, res
    assert took < 5 + 2 + 2 + 5, took   # set-up timeout + grace + kill + start-up
    assert_nothing_left(marker)


@pytest.mark.root
def test_rank_death_on_another_host_is_reported_as_locally(hosts3, tmp_path, marker):
    """Rank 1 (on h1) is SIGKILLed after the mesh is up: the job names rank 1 on h1 within
    seconds and nothing is left. The others raise PeerFailure naming it, unless hydra, which
    ends the whole job when a rank dies, kills them first."""
    from clusterlab.cluster.mpirun import launch_mpi
    from clusterlab.net.netns import in_netns

    tb, hostfile, args, prog = hosts3
    t = time.monotonic()
    with in_netns(tb.switch.ns):
        res = launch_mpi([sys.executable, str(prog), str(tmp_path), "kill", marker], 3, backend="tcp",
                         hostfile=hostfile, mpiexec_args=args, rendezvous_host=tb.topo.switch_address,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120, setup_timeout=60)
    assert res.failed_rank == 1 and res.reason.startswith("rank 1 on h1 died"), res
    assert all(e.startswith("PeerFailure: rank 1 failed") for e in res.errors.values()), res
    assert time.monotonic() - t < 30
    assert_nothing_left(marker)
