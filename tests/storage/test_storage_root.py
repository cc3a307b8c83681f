"""The iSCSI storage host (tgtd in a testbed namespace) and the libiscsi initiator (root, tgt,
libiscsi; each test skips with the reason otherwise). Small LUNs, unshaped links: ~20 s."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from clusterlab.cluster.testbed import StarTopo, TestbedNetwork, clean, leftovers
from clusterlab.cluster.testbed import storage as st
from clusterlab.cluster.testbed.storage import (
    SOCKET_DIR,
    IscsiTarget,
    clean_storage,
    storage_leftovers,
    unavailable,
)
from clusterlab.errors import ConfigError
from clusterlab.net.netns import in_netns

from ..testbed.helpers import fresh_name, netns_unavailable

pytestmark = pytest.mark.root
FAST = "10Gbit"


def _require():
    reason = netns_unavailable() or unavailable()
    if reason is None:
        from clusterlab.storage.iscsi import available

        reason = available()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def name():
    _require()
    n = fresh_name()
    yield n
    clean_storage(n)
    clean(n)
    assert storage_leftovers(n) == {"processes": [], "files": [], "state_files": []}
    assert not any(leftovers(n)[k] for k in ("namespaces", "processes", "state_files"))


def _nothing_left(name: str, port: int) -> None:
    assert storage_leftovers(name) == {"processes": [], "files": [], "state_files": []}
    assert not os.path.exists(os.path.join(SOCKET_DIR, f"socket.{port}"))


def _congestion(ns: str | None = None) -> str:
    with in_netns(ns), open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
        return f.read().strip()


def test_target_runs_in_the_storage_host_and_is_gone_after_stop(name):
    with TestbedNetwork(StarTopo(hosts=2, rate=FAST, storage=True), name=name) as tb:
        tgt = IscsiTarget(tb, initiators=2, lun_size=4 << 20, congestion="reno").start()
        try:
            pids = storage_leftovers(name)["processes"]
            assert len(pids) == 1
            st_ns = os.stat(f"/run/netns/{tb.host('st').ns}").st_ino
            assert os.stat(f"/proc/{pids[0]}/ns/net").st_ino == st_ns  # inside st, not the root namespace
            listening = tb.host("st").run(["ss", "-Hltn"]).stdout
            assert f"{tb.host('st').addr}:3260" in listening and "0.0.0.0:3260" not in listening
            assert sorted(storage_leftovers(name)["files"]) == ["lun0.img", "lun1.img", "tgtd.log"]
            assert os.stat(tgt.luns[0]["path"]).st_blocks == 0  # sparse until written
            # the storage host (the sender of every READ's data) runs what was asked; compute hosts keep theirs
            assert _congestion(tb.host("st").ns) == "reno"
            assert _congestion(tb.host("h0").ns) == _congestion()
        finally:
            port = tgt.port
            res = tgt.stop()
        assert res["targets"] == 2 and res["killed"] == 0  # it exited when asked, not by SIGKILL
        _nothing_left(name, port)


def test_after_sigkill_of_the_driver_clean_removes_everything(name):
    driver = textwrap.dedent(f"""
        import sys, time
        from clusterlab.cluster.testbed import StarTopo, TestbedNetwork
        from clusterlab.cluster.testbed.storage import IscsiTarget
        tb = TestbedNetwork(StarTopo(hosts=2, rate="{FAST}", storage=True), name="{name}").up()
        IscsiTarget(tb, initiators=1, lun_size=1 << 20).start()
        print("ready", flush=True)
        time.sleep(120)
    """)
    p = subprocess.Popen([sys.executable, "-c", driver], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        assert len(storage_leftovers(name)["processes"]) == 1
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=10)
        time.sleep(0.2)
        assert storage_leftovers(name)["processes"]  # SIGKILL left tgtd behind...
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    res = clean_storage(name)  # ...and the state file is enough to remove it
    assert res["targets"] == 1 and res["files"] == 2
    assert storage_leftovers(name) == {"processes": [], "files": [], "state_files": []}


def _open(tb, tgt, i, host=None, connections=1):
    from clusterlab.storage.iscsi import open_lun

    d = tgt.luns[i]
    with in_netns(tb.host(host or d["client"]).ns):
        return open_lun(d["portal"], d["iqn"], d["lun"], timeout=10, connections=connections)


def test_several_sessions_stripe_blocks_and_read_back_what_one_wrote(name):
    with TestbedNetwork(StarTopo(hosts=2, rate=FAST, storage=True), name=name) as tb, \
            IscsiTarget(tb, initiators=1, lun_size=4 << 20) as tgt:
        data = os.urandom(3 << 20)
        with _open(tb, tgt, 0) as one:
            one.write(0, data)
        with _open(tb, tgt, 0, connections=4) as lun:
            assert lun.connections == 4
            # striped 64 KB commands over 4 sessions land each block in its own place; a tail
            # shorter than a block is read too
            assert lun.read(0, len(data), block=64 << 10) == data
            assert lun.read(512, len(data) - 1024, block=64 << 10) == data[512:-512]
            w = lun.write_sequential(2 << 20, block=64 << 10, offset=1 << 20, seed=3)
            r = lun.read_sequential(2 << 20, block=64 << 10, offset=1 << 20, seed=3)
            assert (w.nbytes, r.nbytes, r.bad_blocks) == (2 << 20, 2 << 20, 0)
            assert lun.read_sequential(2 << 20, block=64 << 10, offset=1 << 20, seed=4).bad_blocks == 32
            with pytest.raises(ValueError, match="block"):
                lun.read(0, 1 << 20, block=1000)
        with _open(tb, tgt, 0) as one:  # what 4 sessions wrote, one session reads back
            assert one.read_sequential(2 << 20, block=1 << 20, offset=1 << 20, seed=3).bad_blocks == 0


def test_one_initiator_reads_back_what_it_wrote(name):
    with TestbedNetwork(StarTopo(hosts=2, rate=FAST, storage=True), name=name) as tb, \
            IscsiTarget(tb, initiators=2, lun_size=4 << 20) as tgt:
        with _open(tb, tgt, 0) as lun:
            assert lun.size == 4 << 20 and lun.block_length == 512
            data = os.urandom(3 * 65536)
            lun.write(65536, data)
            assert lun.read(65536, len(data)) == data
            assert lun.read(0, 512) == bytes(512)  # untouched blocks of the sparse file
            w = lun.write_sequential(2 << 20, block=64 << 10, offset=1 << 20, seed=7)
            r = lun.read_sequential(2 << 20, block=64 << 10, offset=1 << 20, seed=7)
            assert (w.nbytes, r.nbytes, r.bad_blocks) == (2 << 20, 2 << 20, 0) and w.seconds > 0
            # the check can fail: another seed's pattern is not what is on the LUN
            assert lun.read_sequential(2 << 20, block=64 << 10, offset=1 << 20, seed=8).bad_blocks == 32
            with pytest.raises(ValueError, match="beyond the LUN"):
                lun.read(4 << 20, 512)
            with pytest.raises(ValueError, match="multiples"):
                lun.read(100, 512)
        with open(tgt.luns[0]["path"], "rb") as f:  # the bytes are in the backing file
            f.seek(65536)
            assert f.read(len(data)) == data
        with pytest.raises(OSError, match="login"):  # h0 is not in lun1's ACL
            _open(tb, tgt, 1, host="h0")


def test_throttled_backing_store_limits_the_target_and_its_cgroup_goes(name):
    from clusterlab.cluster.testbed.storage import backing_io

    with TestbedNetwork(StarTopo(hosts=2, rate=FAST, storage=True), name=name) as tb, \
            IscsiTarget(tb, initiators=2, lun_size=4 << 20, backing_bps=2_000_000) as tgt:
        assert storage_leftovers(name)["cgroups"]
        with _open(tb, tgt, 0, connections=2) as a, _open(tb, tgt, 1, connections=2) as b:
            w = a.write_sequential(2 << 20, block=64 << 10, seed=1)
            w2 = b.write_sequential(2 << 20, block=64 << 10, seed=2)
            r = a.read_sequential(2 << 20, block=64 << 10, seed=1)
        # 2 MB/s shared by both LUNs (unthrottled at 10 Gbit/s this takes milliseconds)
        assert 0.7 < w.seconds < 5 and 0.7 < w2.seconds < 5 and 0.7 < r.seconds < 5 and r.bad_blocks == 0
        io = backing_io(name)
        assert io["write_bytes"] >= 4 << 20 and io["read_bytes"] >= 2 << 20  # O_DIRECT: all reached the disk
        port = tgt.port
    _nothing_left(name, port)
    assert "cgroups" not in storage_leftovers(name)


def test_separate_san_carries_the_iscsi_traffic_off_the_compute_switch(name):
    from clusterlab.cluster.testbed.storage import SanNetwork

    def tx(tb, host, iface):
        return int(tb.host(host).run(["cat", f"/sys/class/net/{iface}/statistics/tx_bytes"]).stdout)

    with TestbedNetwork(StarTopo(hosts=2, rate=FAST, storage=True), name=name) as tb, SanNetwork(tb) as san, \
            IscsiTarget(tb, initiators=1, lun_size=4 << 20, san=san) as tgt:
        assert tgt.portal == "10.1.0.3:3260"
        before = {i: tx(tb, "st", i) for i in ("eth0", "eth1")}
        with _open(tb, tgt, 0) as lun:
            lun.write_sequential(2 << 20, seed=1)
            assert lun.read_sequential(2 << 20, seed=1).bad_blocks == 0
        assert tx(tb, "st", "eth1") - before["eth1"] > 2 << 20
        assert tx(tb, "st", "eth0") - before["eth0"] < 64 << 10
    assert not os.path.exists(f"/run/netns/{san.ns}")


def test_two_initiators_at_once_on_their_own_luns(name):
    from clusterlab.experiments.storage_bench import run

    res = run(hosts=2, initiators=[2], size=4 << 20, block=64 << 10, rate=None, baseline=True, bonnie=False,
              name=name, timeout=10)
    (r,) = res["runs"]
    assert r["initiators"] == 2
    if shutil.which("iperf3") is None:  # `make system-deps` installs it; without it the run says so
        assert r["tcp"]["to_target"] == {"error": "iperf3 is not installed"}
    else:
        assert r["tcp"]["to_target"]["mbps"] > 0 and r["tcp"]["from_target"]["mbps"] > 0  # on the same links
    assert r["read"]["monitor"]["bottleneck"] in ("network", "backing store", "cpu", "latency")
    for op in ("write", "read"):
        rows = r[op]["per_initiator"]
        assert [x["initiator"] for x in rows] == [0, 1] and all(x["mbps"] > 0 for x in rows)
        assert r[op]["aggregate_mbps"] > 0
    assert all(x["bad_blocks"] == 0 for x in r["read"]["per_initiator"])
    assert res["local"]["bad_blocks"] == 0 and res["local"]["read_mbps"] > 0
    assert storage_leftovers(name) == {"processes": [], "files": [], "state_files": []}
    assert not leftovers(name)["namespaces"]


def _as_a_foreground_job():
    """A background job of a non-interactive shell (``make test &``, nohup, CI runners)
    inherits SIGINT and SIGQUIT *ignored*, and Python then never raises KeyboardInterrupt;
    exec keeps that. The child here plays a command started at a terminal, so SIGINT is reset
    (this, not the benchmark, was why the test hung inside some whole-suite runs)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_benchmark_interrupted_mid_run_leaves_nothing(name, sig, code):
    import json

    from clusterlab.cluster.testbed.storage import STATE_DIR

    exe = os.path.join(os.path.dirname(sys.executable), "clusterlab")
    p = subprocess.Popen([exe, "bench", "storage", "--hosts", "2", "--initiators", "2", "--size", "64MB",
                          "--rate", "155Mbit", "--name", name, "--no-baseline"], start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_as_a_foreground_job)
    try:
        deadline = time.monotonic() + 60
        state = os.path.join(STATE_DIR, f"{name}.json")
        while time.monotonic() < deadline:  # target up with both LUNs: the run is under way
            try:
                if len(json.load(open(state))["luns"]) == 2:
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.1)
        else:
            pytest.fail("the target did not come up in 60 s")
        time.sleep(1.0)
        p.send_signal(sig)
        assert p.wait(timeout=60) == code
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert storage_leftovers(name) == {"processes": [], "files": [], "state_files": []}
    assert not any(leftovers(name)[k] for k in ("namespaces", "processes", "state_files"))


def test_tgtd_settings_iothreads_and_aio_backing_store_serve_the_same_bytes(name):
    with TestbedNetwork(StarTopo(hosts=2, rate=FAST, storage=True), name=name) as tb, \
            IscsiTarget(tb, initiators=1, lun_size=4 << 20, iothreads=2, bstype="aio") as tgt:
        with open(f"/proc/{tgt.proc.pid}/cmdline") as f:
            assert f.read().split("\0")[-3:-1] == ["-t", "2"]
        with _open(tb, tgt, 0) as lun:
            w = lun.write_sequential(2 << 20, block=64 << 10, seed=3)
            r = lun.read_sequential(2 << 20, block=64 << 10, seed=3)
            assert (w.nbytes, r.nbytes, r.bad_blocks) == (2 << 20, 2 << 20, 0)
            assert lun.read_sequential(2 << 20, block=64 << 10, seed=4).bad_blocks == 32


@pytest.mark.parametrize(("kw", "msg"), [({"iothreads": 0}, "I/O threads must be 1..128"),
                                          ({"bstype": "mmap"}, "backing-store type must be one of rdwr, aio"),
                                          ({"congestion": "vegas2"}, "congestion control 'vegas2' is not available")])
def test_tgtd_settings_out_of_range_are_refused(kw, msg):
    from types import SimpleNamespace

    from clusterlab.cluster.testbed import TestbedError

    host = SimpleNamespace(name="st")
    with pytest.raises(TestbedError, match=msg):
        IscsiTarget(SimpleNamespace(name="tx1", hosts=[host]), host=host, clients=[SimpleNamespace(name="h0")], **kw)


def test_local_disk_baseline_runs_at_the_backing_stores_rate_and_leaves_nothing(name):
    """Seed 001's local baseline on a throttled store: the block loop on the target's disk
    with direct I/O under the same limit (8 MB/s) is a disk of that rate, not the page cache
    (GB/s); its file and cgroup are gone afterwards."""
    with TestbedNetwork(StarTopo(hosts=2, rate=FAST, storage=True), name=name) as tb:
        with IscsiTarget(tb, initiators=1, lun_size=4 << 20, backing_bps=8_000_000) as tgt:
            r = tgt.local_disk_baseline(4_000_000, 64_000)  # SI sizes: whole 4 KiB pages for direct I/O
            assert r["bad_blocks"] == 0 and r["direct"] and (r["block"], r["bytes"]) == (65536, 3_997_696)
            for what in ("write_mbps", "read_mbps"):
                assert 2.0 < r[what] < 16.0, r  # the limit, give or take: not the page cache
            assert "local.img" not in storage_leftovers(name)["files"]
            assert not os.path.isdir(st._local_cgroup(name))
        with pytest.raises(ConfigError, match="backing store limit"):
            IscsiTarget(tb, initiators=1, lun_size=4 << 20).local_disk_baseline(4 << 20, 64 << 10)
