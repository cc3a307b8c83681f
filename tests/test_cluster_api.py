"""``clusterlab.cluster``: the one Cluster protocol, the flags that name one, and what `run`
refuses (an MPI program under clusterlab's own launcher)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from clusterlab.cluster import Cluster, InProcess, Launched, Local, Mpirun, Testbed, from_options
from clusterlab.cluster.local import _example_sum
from clusterlab.cluster.program import mpi_program
from clusterlab.errors import ConfigError
from clusterlab.net.transport_config import TransportConfig
from tests.comm.conftest import needs_mpi

ROOT = Path(__file__).resolve().parents[1]


def test_every_implementation_is_a_cluster():
    for c in (InProcess(), Local(), Mpirun(), Testbed("lab"), Launched()):
        assert isinstance(c, Cluster)


def test_the_flags_name_one_cluster_each():
    assert isinstance(from_options("inproc"), InProcess)
    assert isinstance(from_options("tcp"), Local)
    assert isinstance(from_options("mpi"), Mpirun) and from_options("mpi").mesh == "mpi"
    assert from_options("tcp", launcher="mpiexec").mesh == "tcp"
    assert isinstance(from_options("world"), Launched)
    tb = from_options("mpi", testbed="lab")
    assert isinstance(tb, Testbed) and tb.mesh == "mpi" and tb.name == "testbed lab"
    for bad, match in [(dict(backend="carrier-pigeon"), "unknown backend"),
                       (dict(backend="mpi", launcher="local"), "needs --launcher mpiexec"),
                       (dict(backend="inproc", testbed="lab"), "not --backend inproc")]:
        with pytest.raises(ConfigError, match=match):
            from_options(**bad)


def test_the_launcher_names_the_mesh_and_the_rank_joins_it():
    """Which mesh a rank joins is the launcher's word (``CLUSTERLAB_BACKEND``, read by the
    contract); the rank side has one way to join each mesh the contract names, no list of its own."""
    from clusterlab.cluster import api
    from clusterlab.comm.world import JOIN
    from clusterlab.rendezvous import contract

    assert api.MESHES is contract.MESHES and set(JOIN) == set(contract.MESHES)
    launcher = {contract.ENV_RDV: "127.0.0.1:1", contract.ENV_RANK: "0"}
    assert contract.mesh(launcher) == "tcp" and contract.mesh({**launcher, contract.ENV_BACKEND: "tcp"}) == "tcp"
    assert contract.mesh({"PMI_RANK": "1"}) == "mpi"
    assert contract.mesh({"OMPI_COMM_WORLD_SIZE": "2", contract.ENV_BACKEND: "tcp"}) == "tcp"
    for env, match in [({"PMI_RANK": "1", contract.ENV_BACKEND: "carrier-pigeon"}, "expected tcp or mpi"),
                       ({**launcher, contract.ENV_BACKEND: "mpi"}, "needs MPI's launcher")]:
        with pytest.raises(ConfigError, match=match):
            contract.mesh(env)


def test_ranks_on_this_machine_are_a_setting_of_the_cluster_itself():
    """A study varies ``ranks`` on the cluster object a Python user runs on (one class each)."""
    from clusterlab import experiments

    assert experiments.InProcess is InProcess
    for c, kind in ((InProcess(), "inprocess"), (Local(iface="lo"), "loopback"), (Mpirun(mesh="tcp"), "mpi")):
        d = c.with_settings(ranks=3)
        assert (c.kind, c.settings(), d.settings(), type(d), c.ranks) == (kind, {"ranks": 4}, {"ranks": 3}, type(c), None)
        assert vars(d) == {**vars(c), "ranks": 3}  # the rest kept
    assert InProcess(ranks=2).run(_example_sum, 3) == [3, 3, 3]  # run takes its own number of ranks
    with pytest.raises(ConfigError, match="ranks must be 1..1024"):
        InProcess(ranks=0).check()
    with pytest.raises(ConfigError, match="no setting"):
        Local().with_settings(hosts=2)


def test_run_on_threads_and_on_local_processes():
    assert InProcess().run(_example_sum, 3) == [3, 3, 3]
    assert Local().run(_example_sum, 2, timeout=60) == [2, 2]


def test_settings_a_cluster_cannot_apply_are_refused():
    tcp = TransportConfig(rto_min=0.005)
    with pytest.raises(ConfigError, match="not to in-process ranks"):
        InProcess().run(_example_sum, 2, transport=tcp)
    assert InProcess().run(_example_sum, 2, transport=TransportConfig()) == [2, 2]  # nothing set: fine
    with pytest.raises(ConfigError, match="not to MPI's own transport"):
        Mpirun().launch(["true"], 2, transport=tcp)
    with pytest.raises(ConfigError, match="keyword arguments reach only in-process ranks"):
        Local().run(_example_sum, 2, kwargs={"x": 1})


def test_mpi_programs_are_recognised(tmp_path):
    script = tmp_path / "a.py"
    script.write_text("import numpy\nfrom mpi4py import MPI\n")
    plain = tmp_path / "b.py"
    plain.write_text("from clusterlab.comm import world\n")
    assert mpi_program(["python", str(script)]) == f"{script} imports mpi4py"
    assert mpi_program(["python", str(plain)]) is None
    assert mpi_program([sys.executable, "-c", "pass"]) is None    # an ELF binary without libmpi


def test_run_refuses_an_mpi4py_program_with_the_command_that_works(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text("from mpi4py import MPI\nprint(MPI.COMM_WORLD.Get_size())\n")
    p = subprocess.run([sys.executable, "-m", "clusterlab", "run", "-n", "3", "--", "python", str(script)],
                       env=dict(os.environ, PYTHONPATH=str(ROOT / "python")), capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().splitlines() == [
        f"clusterlab: error: {script} imports mpi4py: under clusterlab's launcher each of the 3 ranks would be its "
        f"own one-rank MPI world; run it under mpiexec: clusterlab run --backend mpi -n 3 -- python {script}"]


def test_run_on_a_testbed_refuses_socket_settings_it_cannot_apply(tmp_path):
    """A testbed's TCP settings are its hosts' sysctls (set by `testbed up`): `run --testbed`
    refuses its own, with the command that sets them, before anything starts."""
    script = tmp_path / "prog.py"
    script.write_text("print(1)\n")
    p = subprocess.run([sys.executable, "-m", "clusterlab", "run", "--testbed", "lab", "--rto-min", "5ms", "-n", "2",
                        "--", "python", str(script)], env=dict(os.environ, PYTHONPATH=str(ROOT / "python")),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "clusterlab testbed up --name NAME --rto-min" in p.stderr, p.stderr


def env_of(comm, key):
    """A rank function (module-level: ranks import it): ``key`` in this rank's environment."""
    return os.environ.get(key)


def test_local_starts_the_ranks_named_under_their_prefix():
    """``Local(prefix={rank: command})``: those ranks start under the command, the others as usual."""
    got = Local(prefix={1: ["env", "M24_PREFIXED=yes"]}).run(env_of, 3, "M24_PREFIXED", timeout=60)
    assert got == [None, "yes", None]
    with pytest.raises(ConfigError, match=r"prefix names rank 3; the job has ranks 0..1"):
        Local(prefix={3: ["nice"]}).run(env_of, 2, "X", timeout=60)
    with pytest.raises(ConfigError, match="prefix must map ranks"):
        Local(prefix={1: "nice"})


@needs_mpi
def test_mpirun_sets_how_mpich_moves_data_the_ranks_directory_and_a_wrapper(tmp_path, monkeypatch):
    """``Mpirun(mpich="tcp")`` replaces the caller's MPICH/UCX/libfabric settings with its own;
    ``cwd=`` is the ranks' directory; ``wrap=`` is a command mpiexec (and so every rank) runs under."""
    monkeypatch.setenv("UCX_TLS", "sm")
    monkeypatch.setenv("FI_PROVIDER", "sockets")
    out = tmp_path / "rank"
    report = 'echo "$UCX_TLS ${FI_PROVIDER:-none} ${MPIR_CVAR_NOLOCAL:-none} ${M24_WRAPPED:-no} $(pwd)" > "$0.$PMI_RANK"'
    job = Mpirun(mpich="tcp").launch(["sh", "-c", report, str(out)], 2, cwd=str(tmp_path), program=True, timeout=60,
                                     wrap=["env", "M24_WRAPPED=yes"])
    assert job.ok, job.reason
    for r in range(2):
        assert (tmp_path / f"rank.{r}").read_text().split() == ["tcp,self", "none", "1", "yes", str(tmp_path)]
    job = Mpirun().launch(["sh", "-c", report, str(out)], 1, program=True, timeout=60)  # None: the environment's
    assert job.ok, job.reason
    assert (tmp_path / "rank.0").read_text().split()[:3] == ["sm", "sockets", "none"]
    with pytest.raises(ConfigError, match="unknown MPICH transport 'udp'"):
        Mpirun(mpich="udp")


def test_a_testbed_with_a_storage_host_runs_one_rank_per_compute_host_by_default():
    """The storage host ``st`` is never a rank: given no rank count, the Testbed cluster starts
    one rank per compute host (it counted ``st`` and asked for a rank too many)."""
    from types import SimpleNamespace

    from clusterlab.cluster.testbed import TestbedNetwork

    class Net:
        name = "m24fake"
        hosts = [SimpleNamespace(name=h, prefix=lambda: [], addr="10.0.0.1", ns=f"clab-m24fake-{h}")
                 for h in ("h0", "h1", "st")]
        placement = TestbedNetwork.placement

    net = Net()
    assert Testbed(net)._default_n(net) == 2 and [p["host"] for p in net.placement(None)] == ["h0", "h1"]
