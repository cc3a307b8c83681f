"""``clusterlab tune buffers`` (seed 003): the config's one-line errors, the paper's choice
rules, the kernel's refusals, and (root) a small sweep on a testbed with its result files."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from clusterlab.errors import ConfigError
from clusterlab.tune import buffers, config
from clusterlab.tune.results import FRAGMENT, bezier, write_results
from tests.testbed.helpers import netns_unavailable

CONFIGS = Path(config.__file__).parent / "configs"
GOOD = '[cluster]\nhosts = 4\n\n[[test]]\nvariable = "tcp_rmem"\nstart = "4KiB"\nend = "32KiB"\n'


def _write(tmp_path, text, name="t.toml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize("text, where, words", [
    (GOOD.replace('end = "32KiB"', 'end = "2KiB"'), ":7:7:", "below start"),
    (GOOD.replace('start = "4KiB"', 'start = 0'), ":6:9:", "1..2147483647"),
    (GOOD.replace('"tcp_rmem"', '"tcp_foo"'), ":5:12:", "tcp_window_scaling, tcp_rmem, tcp_wmem"),
    (GOOD.replace("hosts = 4", "hosts = 1"), ":2:9:", "hosts must be"),
    (GOOD.replace("hosts = 4", "hosts = 4\nspeed = 3"), ":3:9:", "unknown key 'speed'"),
    (GOOD.replace('start = "4KiB"', 'start = "4KiB'), ":6:14:", "not valid TOML"),
    ('[cluster]\nhosts = 4\n[[test]]\nvariable = "tcp_window_scaling"\nstart = 0\nend = 2\n', ":6:7:", "0 or 1"),
    (GOOD + 'form = "half"\n', ":8:8:", "form must be one of"),
    ("[cluster]\nhosts = 4\n", ":1:1:", "no [[test]]"),
    (GOOD + '[pingpong]\nsizes = "9:3"\n', ":9:9:", "LO:HI"),
    (GOOD.replace('place = "testbed"', '').replace("hosts = 4", 'place = "cluster"\nhosts = ["a", "a"]'),
     ":3:9:", "no repeats"),
])
def test_bad_config_is_one_line_naming_file_line_column(tmp_path, text, where, words):
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        config.load(path)
    msg = str(e.value)
    assert msg.startswith(path + where), msg
    assert words in msg and "\n" not in msg


def test_cli_bad_config_exits_2_with_one_line(tmp_path):
    path = _write(tmp_path, GOOD.replace('end = "32KiB"', 'end = "2KiB"'))
    p = subprocess.run([sys.executable, "-m", "clusterlab", "tune", "buffers", "--config", path],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and f"{path}:7:7:" in p.stderr and "Traceback" not in p.stderr


def test_shipped_configs_load():
    c = config.load(CONFIGS / "seed003.toml")
    assert [t.variable for t in c.tests] == ["tcp_window_scaling", "tcp_rmem", "tcp_wmem"]
    assert c.tests[0].values() == [0, 1]
    assert c.tests[1].values() == [4096 << k for k in range(8)]  # 4 KiB .. 512 KiB, doubling
    assert c.hosts == 8 and c.rate == "1Gbit"
    config.load(CONFIGS / "quick.toml")
    large = config.load(CONFIGS / "seed003-large.toml")
    assert large.size_lo == 4096 and large.tests == c.tests


def test_best_per_size_first_value_wins_a_tie_and_max_count_breaks_ties_by_total():
    values = [1, 2, 3]
    sums = {1: {10: 5.0, 20: 1.0, 30: 1.0}, 2: {10: 5.0, 20: 9.0, 30: 1.0}, 3: {10: 4.0, 20: 1.0, 30: 9.5}}
    best = buffers.best_per_size(values, sums)
    assert best == {10: 1, 20: 2, 30: 3}  # 10: a tie between 1 and 2 goes to the earlier value
    assert buffers.most_frequent_best(values, best, sums) == 2  # each best once; 2 has the largest total
    sums[3][10] = 6.0
    best = buffers.best_per_size(values, sums)
    assert buffers.most_frequent_best(values, best, sums) == 3  # best for 2 of 3 sizes


def test_sysctl_value_forms():
    assert buffers.sysctl_value("tcp_rmem", 8192, "fixed", "4096 131072 6291456") == "8192 8192 8192"
    assert buffers.sysctl_value("tcp_rmem", 8192, "min", "4096 131072 6291456") == "8192 131072 6291456"
    assert buffers.sysctl_value("tcp_wmem", 8192, "max", "4096 16384 4194304") == "4096 16384 8192"
    assert buffers.sysctl_value("tcp_window_scaling", 1, "fixed", "0") == "1"


def test_real_cluster_needs_the_launcher_and_refuses_unlisted_hosts(tmp_path):
    path = _write(tmp_path, GOOD.replace("hosts = 4", 'place = "cluster"\nhosts = ["nodeA", "nodeB"]'))
    c = config.load(path)
    with pytest.raises(ConfigError, match="mpiexec"):
        buffers.tune_buffers(c)
    with pytest.raises(ConfigError, match="not in the config's hosts"):
        buffers._check_host(buffers.plan_of(c), "192.0.2.77")


def test_bezier_keeps_end_points():
    x, y = bezier([0.0, 1.0, 2.0, 3.0], [1.0, 5.0, -3.0, 2.0], points=11)
    assert (x[0], y[0], x[-1], y[-1]) == (0.0, 1.0, 3.0, 2.0)
    assert min(y) > -3.0 and max(y) < 5.0  # inside the control polygon's hull


def _netns():
    reason = netns_unavailable()
    if reason:
        pytest.skip(reason)


def test_kernel_refusal_names_the_reason_and_leaves_the_value():
    _netns()
    from clusterlab.net.netns import in_netns

    ns = f"clab-t{secrets.token_hex(3)}-h0"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        with in_netns(ns):
            before = buffers._read("tcp_rmem")
            with pytest.raises(ConfigError, match="the kernel refused net.ipv4.tcp_rmem = '0 0 0': Invalid argument"):
                buffers._write("tcp_rmem", "0 0 0")
            assert buffers._read("tcp_rmem") == before
            buffers._write("tcp_rmem", "8192 8192 8192")
            assert buffers._read("tcp_rmem") == "8192 8192 8192"
        assert Path("/proc/sys/net/ipv4/tcp_rmem").read_text().split() != ["8192"] * 3  # the namespace's own
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


def test_quick_sweep_on_a_testbed_writes_every_result(tmp_path):
    _netns()
    c = config.load(CONFIGS / "quick.toml")
    res = buffers.tune_buffers(c, timeout=240)
    (t,) = res["tests"]
    assert t["variable"] == "tcp_rmem" and t["values"] == [8192, 16384]
    assert t["chosen"] in t["values"] and t["applied"] == f"{t['chosen']} {t['chosen']} {t['chosen']}"
    assert sum(t["counts"].values()) == len(t["best_per_size"]) > 10
    for v in t["values"]:
        run = t["runs"][str(v)]
        assert run["sysctl"] == f"{v} {v} {v}" and len(run["nodes"]) == 2
        assert all(r["mbps"] > 0 for rows in run["nodes"] for r in rows)
        # S is the sum over nodes, per size
        nb = str(run["nodes"][0][-1]["bytes"])
        assert t["sums"][str(v)][nb] == pytest.approx(sum(rows[-1]["mbps"] for rows in run["nodes"]))
    files = write_results(res, tmp_path / "out")
    names = {p.name for p in files}
    assert {"tune.json", "pingpong.csv", "sums.csv", FRAGMENT, "tcp_rmem.png", "buffers.png"} <= names
    assert f"net.ipv4.tcp_rmem = {t['applied']}" in (tmp_path / "out" / FRAGMENT).read_text()
    assert json.loads((tmp_path / "out" / "tune.json").read_text())["tests"][0]["chosen"] == t["chosen"]
    assert not [f for f in os.listdir(tmp_path / "out") if f.startswith(".")]  # no temporary left


def test_ping_pong_listener_refuses_a_stranger_and_takes_the_predecessor():
    import socket
    import threading

    from clusterlab.rendezvous import handshake
    from clusterlab.tune import netpipe

    secret = os.urandom(32)
    lst = socket.create_server(("127.0.0.1", 0))
    port = lst.getsockname()[1]
    got: list = []
    t = threading.Thread(target=netpipe._accept_predecessor, args=(lst, secret, 3, 2, got))
    t.start()
    with socket.create_connection(("127.0.0.1", port)) as stranger:
        stranger.sendall(b"GET / HTTP/1.0\r\n\r\n")
    with socket.create_connection(("127.0.0.1", port)) as wrong_key:
        with pytest.raises(Exception):  # noqa: B017 - the acceptor hangs up on it
            handshake.connect(wrong_key, os.urandom(32), 2, 3, 5.0)
    with socket.create_connection(("127.0.0.1", port)) as pred:
        handshake.connect(pred, secret, 2, 3, 5.0)
        t.join(10)
        assert len(got) == 1 and isinstance(got[0], socket.socket)
        got[0].close()
    lst.close()
