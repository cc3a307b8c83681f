"""The testbed for real (root): it comes up with the fidelity settings, hosts talk over it,
a Communicator job and the broadcast benchmark run on it, and nothing is left afterwards,
also when the driver is killed."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from clusterlab.cluster.testbed import StarTopo, TestbedNetwork, leftovers
from clusterlab.errors import ConfigError
from clusterlab.net.netns import in_netns
from clusterlab.net.transport_config import TransportConfig

from .helpers import where_am_i

pytestmark = [pytest.mark.root]

PYTHON = sys.executable


def _gone(name):
    left = leftovers(name)
    return not left["namespaces"] and not left["processes"] and not left["state_files"]


def test_up_talk_down(name):
    from clusterlab.cluster.testbed._nsconfig import offload_on

    topo = StarTopo(hosts=4, rate="155Mbit", buffer="64KB")
    with TestbedNetwork(topo, name=name, transport=TransportConfig(rto_min="5ms", rto_min_jitter="10ms", seed=1)) as tb:
        h0, h3 = tb.hosts[0], tb.hosts[3]
        # fidelity defaults
        assert h3.run(["cat", "/sys/class/net/eth0/mtu"]).stdout.strip() == "9000"
        rps = [h.run(["cat", "/sys/class/net/eth0/queues/rx-0/rps_cpus"]).stdout.strip() for h in tb.hosts]
        assert all(int(r.replace(",", ""), 16).bit_count() == 1 for r in rps), rps
        with in_netns(h0.ns):
            assert not any(offload_on("eth0", f) for f in ("tso", "gso", "gro"))
        neigh = h0.run(["ip", "neigh", "show", "dev", "eth0"]).stdout
        assert neigh.count("PERMANENT") == 4  # three peers and the switch
        rto = [int(h.run(["cat", "/proc/sys/net/ipv4/tcp_rto_min_us"]).stdout) for h in tb.hosts]
        assert all(5000 <= r <= 15000 for r in rto) and rto == [tb.sysctls[h.name]["net/ipv4/tcp_rto_min_us"]
                                                                  for h in tb.hosts]
        qd = tb.switch.run(["tc", "qdisc", "show", "dev", "p2"]).stdout
        # tc shows the byte limit as the latency it allows: (64000 - 18018) B at 155 Mbit/s = 2.37 ms
        assert "tbf" in qd and "rate 155Mbit" in qd and "lat 2.37ms" in qd, qd
        # TCP from h0 to h3 across the switch, and h3 reaches the switch's address
        srv = h3.popen([PYTHON, "-c", "import socket;s=socket.create_server(('10.0.0.4',5001));c,_=s.accept();"
                        "n=0\nwhile (b:=c.recv(65536)): n+=len(b)\nprint(n)"], stdout=subprocess.PIPE, text=True)
        out = h0.run([PYTHON, "-c", "import socket,time\nfor _ in range(50):\n try: s=socket.create_connection("
                      "('10.0.0.4',5001),timeout=2);break\n except OSError: time.sleep(0.1)\n"
                      "s.sendall(b'z'*2_000_000);s.close()"], timeout=60)
        assert out.returncode == 0
        assert srv.communicate(timeout=30)[0].strip() == "2000000"
        # nothing of the testbed exists in the root namespace
        assert "10.0.0." not in subprocess.run(["ip", "-br", "addr"], capture_output=True, text=True).stdout
    assert _gone(name)


def test_communicator_runs_one_rank_per_host(name):
    with TestbedNetwork(StarTopo(hosts=5), name=name) as tb:
        res = tb.run(where_am_i)
        inodes = [os.stat(f"/run/netns/{h.ns}").st_ino for h in tb.hosts]
    assert [r["rank"] for r in res] == list(range(5))
    assert [r["netns"] for r in res] == inodes
    assert [r["bind"] for r in res] == [f"10.0.0.{i + 1}" for i in range(5)]
    assert all(r["sum"] == 15 and r["gathered"] == list(range(5)) for r in res)
    assert _gone(name)


def test_broadcast_benchmark_and_monitor(name, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from clusterlab.cli.bench_broadcast import broadcast
    from clusterlab.monitor import read_table

    # The benchmark's testbed gets a random name (in the result): it must be gone afterwards. (Other
    # programs may bring testbeds up meanwhile, so compare by name, not with the whole machine.)
    r = CliRunner().invoke(broadcast, ["--hosts", "4", "--size", "50KB", "--reps", "2", "--json",
                                       "--rto-min", "5ms", "--run-dir", str(tmp_path)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    out = json.loads(r.output.strip().splitlines()[-1])
    assert out["settings"]["hosts"] == 4 and out["settings"]["size"] == 50000
    assert len(out["reps"]) == 2
    for rep in out["reps"]:
        assert rep["seconds"] > 0.0077  # 150 KB into each host at 155 Mbit/s cannot be faster
        assert len(rep["retransmissions_per_host"]) == 4 and len(rep["drops_per_port"]) == 4
        assert rep["drops"] == sum(rep["drops_per_port"].values())
        # time attribution per rank (TCP_INFO deltas) and the hosts' own queue drops
        assert [x["rank"] for x in rep["ranks"]] == [0, 1, 2, 3] and len(rep["host_drops_per_host"]) == 4
        for x in rep["ranks"]:
            assert 0 < x["seconds"] <= rep["seconds"] + 1e-5  # rounded to microseconds
            assert x["transfer_s"] + x["rto_wait_s"] >= x["seconds"] - 1e-6 and x["rto"] >= 0
    assert all(5000 <= v <= 8000 for v in out["settings"]["rto_min_us_per_host"])
    tbl, meta = read_table(tmp_path / "monitor.parquet")
    df = tbl.to_pandas()
    sent = df[(df.metric == "tx_bytes") & (df.iface == "eth0")].groupby("node").value.sum()
    assert set(sent.index) == {"h0", "h1", "h2", "h3"} and (sent > 3 * 3 * 50000).all()
    jumbo = df[(df.metric == "len_packets") & (df.bucket == 9014 // 64)].value.sum()
    assert jumbo >= 4 * 3 * 3 * 5  # 50 KB blocks travel as 9000-byte packets (offloads off)
    assert not any(leftovers(out["settings"]["testbed"])[k] for k in ("namespaces", "processes", "state_files"))


DRIVER = """
import subprocess, sys, time
from clusterlab.cluster.testbed import StarTopo, TestbedNetwork
tb = TestbedNetwork(StarTopo(hosts=3), name=sys.argv[1]).up()
p = tb.hosts[1].popen(["sh", "-c", "echo in; exec sleep 300"], stdout=subprocess.PIPE, text=True)
p.stdout.readline()  # inside the namespace (ip netns exec has joined it): the pid is there to be found
print(p.pid, flush=True)
time.sleep(300)
"""


def _start_driver(name):
    d = subprocess.Popen([PYTHON, "-c", DRIVER, name], stdout=subprocess.PIPE, text=True)
    line = d.stdout.readline()
    assert line.strip().isdigit(), "driver did not start"
    return d, int(line)


def test_clean_after_sigkill_of_the_driver(name):
    d, child = _start_driver(name)
    assert len(leftovers(name)["namespaces"]) == 4
    d.kill()
    d.wait(10)
    left = leftovers(name)
    assert len(left["namespaces"]) == 4 and child in left["processes"]  # SIGKILL cannot be caught
    from clusterlab.cli import main

    with pytest.raises(SystemExit) as e:
        main(["testbed", "down", name])
    assert e.value.code == 0
    assert _gone(name)
    assert not os.path.exists(f"/proc/{child}") or open(f"/proc/{child}/stat").read().split()[2] == "Z"


def test_sigterm_of_the_driver_cleans_up(name):
    d, child = _start_driver(name)
    d.send_signal(signal.SIGTERM)
    assert d.wait(30) == -signal.SIGTERM
    deadline = time.monotonic() + 10
    while not _gone(name) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(name)


def test_per_host_rto_bounds_and_initcwnd_on_a_dilated_testbed(name):
    """Seed 000's MAX = that host's own MIN + 100 ms, expressible at dilation 4 (x4: MAX >= 1.2 s),
    written per host; the initial window is a route attribute of each host."""
    from clusterlab.net.transport_config import TransportConfig

    t = TransportConfig.parse("rto_min=200ms,rto_min_jitter=100ms,rto_max_offset=100ms,initcwnd=2,seed=1",
                              place="testbed")
    with TestbedNetwork(StarTopo(hosts=3, dilation=4), name=name, transport=t) as tb:
        for h in tb.hosts:
            mn = int(h.run(["cat", "/proc/sys/net/ipv4/tcp_rto_min_us"]).stdout)
            mx = int(h.run(["cat", "/proc/sys/net/ipv4/tcp_rto_max_ms"]).stdout)
            assert 800_000 <= mn <= 1_200_000 and abs(mx * 1000 - (mn + 400_000)) <= 500, (mn, mx)
            assert "initcwnd 2" in h.run(["ip", "route", "show", "10.0.0.0/16"]).stdout
    assert _gone(name)
    with pytest.raises(ConfigError, match="dilations 3.33..300 can express it"):
        TestbedNetwork(StarTopo(hosts=3), name=name, transport=t)
