"""The throttled backing store's two cgroup paths, and `clusterlab testbed clean NAME` after a
SIGKILL of the driver (root; skipped with the reason otherwise)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from clusterlab.cluster.testbed import clean, leftovers
from clusterlab.cluster.testbed import storage as st

from .test_storage_root import _require


def test_cgroup_v2_io_max_is_written_and_read_back(tmp_path, monkeypatch):
    """The v2 path as the kernel lays it out (files in a fake cgroup root: this machine may
    only have v1, and the format is what can go wrong)."""
    v2 = tmp_path / "cgroup"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    monkeypatch.setattr(st, "CGROUP_V1", str(tmp_path / "no-blkio"))
    monkeypatch.setattr(st, "CGROUP_V2", str(v2))
    cg = st._cgroup_path("t1")
    assert cg == str(v2 / "clusterlab-storage-t1")
    st._throttle(cg, "8:0", 60_000_000, 4242)
    assert (Path(cg) / "io.max").read_text() == "8:0 rbps=60000000 wbps=60000000"
    assert (Path(cg) / "cgroup.procs").read_text() == "4242"
    (Path(cg) / "io.stat").write_text("8:0 rbytes=1000 wbytes=24 rios=3 wios=1 dbytes=0 dios=0\n"
                                      "8:16 rbytes=5 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n")
    assert st.backing_io("t1") == {"read_bytes": 1005, "write_bytes": 24}
    # without the io controller (or blkio) there is no throttled backing store
    (v2 / "cgroup.controllers").write_text("cpu memory\n")
    assert st._cgroup_path("t1") is None


def test_backing_counters_survive_the_target_that_made_them(tmp_path, monkeypatch):
    """A study's point monitor outlives the workload's target: when the target's cgroup goes,
    its counts are carried on (a reader that saw them fall to zero lost the last interval's
    reads: CI saw a short job's reads vanish), and a next target on the testbed adds to them."""
    v2 = tmp_path / "cgroup"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("io\n")
    monkeypatch.setattr(st, "CGROUP_V1", str(tmp_path / "no-blkio"))
    monkeypatch.setattr(st, "CGROUP_V2", str(v2))
    monkeypatch.setattr(st, "STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(st, "STORAGE_DIR", str(tmp_path / "files"))
    monkeypatch.setattr(st, "_RETIRED", {})
    rmdir = os.rmdir

    def rmdir_cgroup(p, *a, **kw):  # a cgroup's directory goes with its files
        for f in Path(p).glob("io.*"):
            f.unlink()
        rmdir(p, *a, **kw)

    monkeypatch.setattr(os, "rmdir", rmdir_cgroup)
    cg = Path(st._cgroup_path("t2"))
    cg.mkdir()
    (cg / "io.stat").write_text("8:0 rbytes=818688 wbytes=278528 rios=3 wios=1\n")
    assert st.backing_io("t2") == {"read_bytes": 818688, "write_bytes": 278528}
    assert st.clean_storage("t2", grace=0)["cgroups"] == 1 and not cg.exists()
    assert st.backing_io("t2") == {"read_bytes": 818688, "write_bytes": 278528}
    cg.mkdir()
    (cg / "io.stat").write_text("8:0 rbytes=12 wbytes=0\n")
    assert st.backing_io("t2") == {"read_bytes": 818700, "write_bytes": 278528}
    assert st.backing_io("t3") == {"read_bytes": 0, "write_bytes": 0}


def test_cgroup_v2_io_max_on_this_kernel():
    try:
        controllers = Path("/sys/fs/cgroup/cgroup.controllers").read_text().split()
    except OSError:
        controllers = []
    if "io" not in controllers:
        pytest.skip("this machine has no cgroup v2 io controller (cgroup v1 here: blkio is used instead)")
    if os.geteuid() != 0:
        pytest.skip("needs root to make a cgroup")
    cg = "/sys/fs/cgroup/clusterlab-storage-iomax-test"
    os.makedirs(cg, exist_ok=True)
    try:
        dev = st.backing_device("/var/tmp")
        with open(os.path.join(cg, "io.max"), "w") as f:
            f.write(f"{dev} rbps=4096000 wbps=4096000")
        assert f"{dev} rbps=4096000 wbps=4096000" in Path(cg, "io.max").read_text()
    finally:
        os.rmdir(cg)


def test_testbed_clean_after_sigkill_of_the_driver_leaves_no_tgtd(tmp_path):
    """A driver with a throttled target (tgtd, its cgroup, backing files) is SIGKILLed;
    `clusterlab testbed clean NAME` then removes tgtd, its cgroup, files and namespaces."""
    _require()
    from ..testbed.helpers import fresh_name

    name = fresh_name()
    driver = textwrap.dedent(f"""
        import time
        from clusterlab.cluster.testbed import StarTopo, TestbedNetwork
        from clusterlab.cluster.testbed.storage import IscsiTarget
        tb = TestbedNetwork(StarTopo(hosts=2, rate="10Gbit", storage=True), name="{name}").up()
        t = IscsiTarget(tb, initiators=1, lun_size=1 << 20, backing_bps=10_000_000).start()
        print(t.proc.pid, t.cgroup, flush=True)
        time.sleep(120)
    """)
    p = subprocess.Popen([sys.executable, "-c", driver], stdout=subprocess.PIPE, text=True)
    try:
        pid, cgroup = p.stdout.readline().split()
        pid = int(pid)
        assert os.path.exists(f"/proc/{pid}") and os.path.isdir(cgroup)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=10)
        time.sleep(0.2)
        assert st.storage_leftovers(name)["processes"]  # SIGKILL left tgtd behind
        cli = os.path.join(os.path.dirname(sys.executable), "clusterlab")
        r = subprocess.run([cli, "testbed", "clean", name], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
            time.sleep(0.1)
        stat = Path(f"/proc/{pid}/stat").read_text() if os.path.exists(f"/proc/{pid}/stat") else ""
        assert "(tgtd)" not in stat or stat.split(")")[1].split()[0] == "Z"
        assert st.storage_leftovers(name) == {"processes": [], "files": [], "state_files": []}
        assert not os.path.exists(cgroup)
        assert not any(leftovers(name)[k] for k in ("namespaces", "processes", "state_files"))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        st.clean_storage(name)  # only matters when an assertion above failed
        clean(name)
