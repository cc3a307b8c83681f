"""The one transport-settings model and parser, per-host RTO draws, dilation expressibility, and
the CLI's transport and testbed options (no root needed)."""

import re

import pytest
from click.testing import CliRunner

from clusterlab.cli import cli
from clusterlab.cluster.testbed.dilation import agree, common_dilations
from clusterlab.cluster.testbed.sysctl import host_sysctls
from clusterlab.errors import ConfigError
from clusterlab.net import tcp_info
from clusterlab.net.transport_config import TransportConfig


def test_parse_reads_every_knob_and_round_trips():
    text = ("rto_min=200ms,rto_min_jitter=100ms,rto_max_offset=100ms,congestion=reno,sndbuf=256KiB,"
            "nodelay=false,seed=3,initcwnd=2,rmem=4096 87380 6291456,window_scaling=true")
    c = TransportConfig.parse(text, place="testbed")
    assert (c.rto_min, c.rto_min_jitter, c.rto_max_offset, c.congestion, c.sndbuf, c.nodelay, c.seed, c.initcwnd) == \
        (0.2, 0.1, 0.1, "reno", 262144, False, 3, 2)
    assert TransportConfig.parse(c.to_text()) == c
    assert TransportConfig.from_json(c.to_json()) == c
    # a mapping as the CLI hands it over, and the constructor's unit strings, are the same settings
    assert TransportConfig.parse("rto_min_jitter=10ms,rto_min=5ms,congestion=reno") == \
        TransportConfig.parse({"rto_min": "5ms", "rto_min_jitter": "10ms", "congestion": "reno", "sndbuf": None}) == \
        TransportConfig(rto_min="5ms", rto_min_jitter="10ms", congestion="reno")
    # older spellings are refused naming the new one, never taken
    for old, new in (("rto_jitter", "rto_min_jitter"), ("cc", "congestion"), ("rto_max_extra", "rto_max_offset")):
        with pytest.raises(ConfigError, match=f"'{old}' is now called '{new}'"):
            TransportConfig.parse(f"rto_min=5ms,{old}=10ms")
    for bad, msg in (("rto_mni=5ms", "unknown transport setting 'rto_mni'"), ("rto_min", "not key=value"),
                     ("nodelay=maybe", "true or false"), ("initcwnd=0", "initcwnd must be 1..1000"),
                     ("rto_min=5ms,rto_max=2s,rto_max_offset=1s", "rto_max or rto_max_offset, not both"),
                     ("rto_max_offset=100ms", "needs rto_min")):
        with pytest.raises(ConfigError, match=msg):
            TransportConfig.parse(bad, place="testbed")


def test_socket_place_refuses_what_only_a_testbed_can_set():
    # docs/parallel.md's MIN 200 ms + 100 ms jitter: the socket option caps MIN at 200 ms; the testbed's sysctl does not
    with pytest.raises(ConfigError, match=r"exceeds what TCP_RTO_MIN_US accepts \(5ms..200ms\).*testbed"):
        TransportConfig.parse("rto_min=200ms,rto_min_jitter=100ms", place="socket")
    assert TransportConfig.parse("rto_min=200ms,rto_min_jitter=100ms", place="testbed").why_not(1) is None
    with pytest.raises(ConfigError, match="initcwnd is set per host on a testbed only"):
        TransportConfig.parse("initcwnd=2", place="socket")
    with pytest.raises(ConfigError, match=r"rto_max 105ms \(MIN \+ 100ms\) is outside what TCP_RTO_MAX_MS accepts.*"
                                          r"dilation 9.52..1000"):
        TransportConfig.parse("rto_min=5ms,rto_max_offset=100ms", place="socket")


def test_each_hosts_max_is_its_own_min_plus_the_offset():
    c = TransportConfig.parse("rto_min=200ms,rto_min_jitter=100ms,rto_max_offset=100ms,seed=7", place="testbed")
    d = host_sysctls(c, [f"h{i}" for i in range(40)], dilation=4)
    mins = [v["net/ipv4/tcp_rto_min_us"] for v in d.values()]
    maxs = [v["net/ipv4/tcp_rto_max_ms"] for v in d.values()]
    assert all(800_000 <= m <= 1_200_000 for m in mins) and len(set(mins)) > 30     # drawn per host, x4
    assert all(abs(mx * 1000 - (mn + 400_000)) <= 500 for mn, mx in zip(mins, maxs, strict=True))  # tied, not drawn
    assert d == host_sysctls(c, list(d), dilation=4)


def test_expressible_dilations_and_reasons():
    fig3 = TransportConfig.parse("rto_min=200ms,rto_max_offset=100ms", place="testbed")
    assert [round(k, 2) for k in fig3.dilation_range()] == [3.33, 400.0]
    ok = fig3.expressible([1, 2, 4, 8])
    assert ok[4.0] is None and ok[8.0] is None
    assert "rto_max 300ms (MIN + 100ms) is outside what net.ipv4.tcp_rto_max_ms accepts (1s..120s); dilations 3.33..400" in ok[1.0]
    default_max = TransportConfig.parse("rto_min=200ms,rto_max=60s", place="testbed")   # seed 000's default MAX
    assert [k for k, why in default_max.expressible([1, 2, 4]).items() if why is None] == [1.0, 2.0]
    assert "dilation 4 is 240s" in default_max.why_not(4)
    assert common_dilations(fig3, [1, 2, 4, 8, 16]) == [4.0, 8.0, 16.0]
    assert TransportConfig.parse("rto_min=5ms").why_not(2).startswith("only a testbed dilates")
    assert TransportConfig.parse("rto_max=121s", place="testbed").dilation_range() is None


def test_agree_within_tolerance():
    assert agree([1.0, 1.1, 0.9], [1.05, 1.0, 1.08])["ok"]
    r = agree([1.0], [1.2], tolerance=0.10)
    assert not r["ok"] and r["ratio"] == 1.2
    with pytest.raises(ConfigError):
        agree([], [1.0])


def test_rto_delta_sums_and_takes_the_longest_wait():
    before = {0: {"total_retrans": 0, "total_rto": 0, "total_rto_recoveries": 0, "total_rto_time_ms": 0, "rto_us": 8000},
              1: {"total_retrans": 1, "total_rto": 1, "total_rto_recoveries": 1, "total_rto_time_ms": 5, "rto_us": 8000}}
    after = {0: {"total_retrans": 4, "total_rto": 2, "total_rto_recoveries": 1, "total_rto_time_ms": 40, "rto_us": 16000},
             1: {"total_retrans": 1, "total_rto": 1, "total_rto_recoveries": 1, "total_rto_time_ms": 5, "rto_us": 8000}}
    d = tcp_info.rto_delta(before, after)
    assert d["total"] == {"total_retrans": 4, "total_rto": 2, "total_rto_recoveries": 1, "total_rto_time_ms": 40}
    assert d["rto_wait_s"] == pytest.approx(0.040 + 0.016)
    assert d["per_connection"][1] == {"total_retrans": 0, "total_rto": 0, "total_rto_recoveries": 0,
                                      "total_rto_time_ms": 0}


def test_cli_transport_options_old_and_new_names():
    from clusterlab.cli.options import transport_options

    got = {}

    import click

    @click.command()
    @transport_options(testbed_knobs=True)
    def cmd(transport):
        got["t"] = transport

    r = CliRunner().invoke(cmd, ["--rto-min", "5ms", "--rto-min-jitter", "10ms", "--congestion", "reno", "--seed", "4",
                                 "--transport", "rto_max_offset=100ms,initcwnd=2"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert got["t"] == {"rto_min": "5ms", "rto_min_jitter": "10ms", "congestion": "reno", "seed": 4,
                        "rto_max_offset": "100ms", "initcwnd": "2"}
    r = CliRunner().invoke(cmd, ["--rto-min", "5ms", "--transport", "rto_min=6ms"])
    assert r.exit_code != 0 and "given both" in str(r.exception)
    for old, new in (("--rto-jitter", "--rto-min-jitter"), ("--cc", "--congestion"), ("--tb-seed", "--seed")):
        r = CliRunner().invoke(cmd, [old, "10ms"])
        assert r.exit_code != 0 and str(r.exception) == f"option '{old[2:]}' is now called '{new[2:]}'", r.output
    r = CliRunner().invoke(cmd, ["--transport", "rto_jitter=10ms"])
    assert str(r.exception) == "--transport setting 'rto_jitter' is now called 'rto_min_jitter'"


def test_run_refuses_a_minimum_the_socket_option_cannot_take():
    r = CliRunner().invoke(cli, ["run", "-n", "2", "--rto-min", "200ms", "--rto-min-jitter", "100ms", "--",
                                 "python", "-c", "pass"])
    assert r.exit_code != 0 and "TCP_RTO_MIN_US accepts (5ms..200ms)" in str(r.exception)


def test_testbed_up_refuses_instead_of_clamping():
    # `testbed up --rto-min 300s` used to write 120 s (clamped) without a word; it is refused before anything is built
    for args, msg in ((["--rto-min", "300s"], "above the kernel's default maximum RTO"),
                      (["--rto-min", "5ms", "--rto-max", "500ms"], r"rto_max 500ms is outside .*dilations 2..240"),
                      (["--rto-min", "200ms", "--rto-max-offset", "100ms"], "dilations 3.33..400 can express it")):
        r = CliRunner().invoke(cli, ["testbed", "up", "--hosts", "2", *args])
        assert r.exit_code != 0 and isinstance(r.exception, ConfigError), r.output
        assert re.search(msg, str(r.exception)), str(r.exception)


@pytest.mark.parametrize("args, msg", [
    (["--hosts", "4", "--host-rate", "h4=15Mbit"], "host_rates: no host 'h4' (hosts h0..h3)"),
    (["--hosts", "4", "--host-rate", "h3=fast"], "host_rates: h3: cannot read rate 'fast'"),
    (["--hosts", "4", "--host-rate", "h3"], "host_rates: 'h3' is not host=rate"),
    (["--hosts", "4", "--host-rate", "h3=1Mbit", "--host-rate", "h3=2Mbit"], "host_rates: h3 given twice"),
    (["--hosts", "4", "--switch", "atm", "--host-rate", "h3=15Mbit"], "the atm switch's cell model runs every port"),
    (["--host-rate", "h1=15Mbit"], "--host-rate and --loss need --hosts"),
    (["--switch", "atm", "--loss", "h1:1%"], "--host-rate and --loss need --hosts"),
    (["--hosts", "4", "--loss", "h1:1%"], "loss is the atm switch's"),
    (["--hosts", "4", "--switch", "atm", "--loss", "h1:2"], "loss: h1's 2 is outside 0..50%"),
])
def test_bench_broadcast_refuses_a_bad_host_rate_in_one_line(args, msg, capsys):
    from clusterlab.cli import main

    with pytest.raises(SystemExit) as e:
        main(["bench", "broadcast", "--reps", "1", *args])
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert e.value.code == 2 and len(lines) == 1 and msg in lines[0], err


def test_testbed_up_names_the_slower_link_and_its_shaper_lines():
    from clusterlab.cli.testbed import make_topo
    from clusterlab.cluster.testbed import link

    t = make_topo(4, "155Mbit", "64KB", "1000p", None, 10.0, False, host_rates=("h3=15.5Mbit", "h1=100Mbit"))
    assert t.host_rates == "h1=100Mbit h3=15.5Mbit"
    ports = link.port_qdisc_lines(t)
    assert [ln.split()[7] for ln in ports] == ["15500000bit", "10000000bit", "15500000bit", "1550000bit"]
    assert link.host_qdisc_lines(t, 3)[0].split()[7] == "1550000bit"
    assert link.host_qdisc_lines(t, 0)[0].split()[7] == "15500000bit"
    from clusterlab.cluster import Testbed
    from clusterlab.cluster.testbed import StarTopo

    back = StarTopo.from_dict(t.to_dict())  # the testbed's state file: `testbed status|exec|down` see it
    assert back.host_rates == t.host_rates and [back.link_rate_bps(i) for i in range(4)] == [155e6, 100e6, 155e6, 15.5e6]
    assert "(at their own rate: h1=100Mbit, h3=15.5Mbit)" in Testbed(t).switch_description()
    assert Testbed(t).with_settings(host_rates=None).topo.host_rates is None


def test_testbed_clean_needs_a_name_or_all():
    r = CliRunner().invoke(cli, ["testbed", "clean"])
    assert r.exit_code != 0 and "name the testbed to clean" in str(r.exception)
    r = CliRunner().invoke(cli, ["testbed", "clean", "Bad-Name"])
    assert r.exit_code != 0 and "1-8 lowercase" in str(r.exception)
    r = CliRunner().invoke(cli, ["testbed", "clean", "lab", "--all"])
    assert r.exit_code != 0 and "not both" in str(r.exception)


@pytest.mark.parametrize("sub", [[], ["up"], ["down"], ["clean"], ["status"], ["exec"]])
def test_every_testbed_help_has_examples(sub):
    r = CliRunner().invoke(cli, ["testbed", *sub, "--help"])
    assert r.exit_code == 0 and "Examples:" in r.output and "clusterlab testbed" in r.output


def test_named_stacks_set_the_seed_era_knobs_and_round_trip():
    c = TransportConfig.parse("stack=seed-era,rto_min=5ms", place="testbed")
    assert (c.congestion, c.initcwnd, c.sack, c.recovery, c.early_retrans, c.frto, c.timestamps) == \
        ("reno", 2, False, False, False, False, False)
    assert c.to_text() == "rto_min=5ms,stack=seed-era,place=testbed"
    assert TransportConfig.parse(c.to_text()) == c and TransportConfig.from_json(c.to_json()) == c
    s = c.namespace_sysctls(0)
    assert {k: s[k] for k in s if k != "net/ipv4/tcp_rto_min_us"} == {
        "net/ipv4/tcp_sack": 0, "net/ipv4/tcp_recovery": 0, "net/ipv4/tcp_early_retrans": 0,
        "net/ipv4/tcp_frto": 0, "net/ipv4/tcp_timestamps": 0}
    assert c.route_attributes() == {"initcwnd": 2} and c.stack_name() == "seed-era"
    # a knob beside the profile wins over it; single knobs without a profile
    c = TransportConfig.parse("stack=seed-era,sack=true,initcwnd=4", place="testbed")
    assert (c.sack, c.initcwnd, c.timestamps) == (True, 4, False)
    assert c.stack_name() == "seed-era with sack=true, initcwnd=4"
    assert TransportConfig.parse("timestamps=off", place="testbed").namespace_sysctls(0) == \
        {"net/ipv4/tcp_timestamps": 0}
    assert TransportConfig.parse("stack=linux", place="testbed").namespace_sysctls(0) == {}
    assert TransportConfig.parse("stack=linux").stack_name() == "linux"   # loopback takes linux (nothing set)
    for bad, msg in (("stack=solaris", "stack must be one of linux, seed-era, got 'solaris'"),
                     ("sack=maybe", "sack must be true or false"), ("frto=2", "frto must be true or false")):
        with pytest.raises(ConfigError, match=msg):
            TransportConfig.parse(bad, place="testbed")
    with pytest.raises(ConfigError, match="stack seed-era sets .* per host, on a testbed only"):
        TransportConfig.parse("stack=seed-era", place="socket")
    with pytest.raises(ConfigError, match="sack is set per host on a testbed only"):
        TransportConfig.parse("sack=false", place="socket")


@pytest.mark.parametrize("args, msg", [
    (["--transport", "stack=solaris"], "stack must be one of linux, seed-era, got 'solaris'"),
    (["--transport", "stack=seed-era"], "stack seed-era sets"),          # loopback: no per-host sysctls
    (["--hosts", "4", "--transport", "sack=perhaps"], "sack must be true or false"),
])
def test_bench_broadcast_refuses_a_bad_stack_in_one_line(args, msg, capsys):
    from clusterlab.cli import main

    with pytest.raises(SystemExit) as e:
        main(["bench", "broadcast", "--reps", "1", *args])
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert e.value.code == 2 and len(lines) == 1 and msg in lines[0], err


@pytest.mark.root
def test_seed_era_sysctls_land_in_every_host_namespace(name):
    """Every host namespace gets the seed-era knobs (and only host namespaces: the switch and this
    machine keep theirs); a connection between two hosts really runs without SACK and timestamps,
    with Reno and an initial window of 2 on the route."""
    import subprocess
    import sys

    from clusterlab.cluster.testbed import StarTopo, TestbedNetwork

    want = {"tcp_sack": "0", "tcp_recovery": "0", "tcp_early_retrans": "0", "tcp_frto": "0", "tcp_timestamps": "0"}
    root = {k: open(f"/proc/sys/net/ipv4/{k}").read().strip() for k in want}
    t = TransportConfig.parse("stack=seed-era", place="testbed")
    with TestbedNetwork(StarTopo(hosts=3), name=name, transport=t) as tb:
        for h in tb.hosts:
            got = dict(zip(want, h.run(["cat", *(f"/proc/sys/net/ipv4/{k}" for k in want)]).stdout.split(), strict=True))
            assert got == want, (h.name, got)
            assert "initcwnd 2" in h.run(["ip", "route", "show", "10.0.0.0/16"]).stdout
        sw = dict(zip(want, tb.switch.run(["cat", *(f"/proc/sys/net/ipv4/{k}" for k in want)]).stdout.split(),
                      strict=True))
        assert sw == root
        h0, h1 = tb.hosts[:2]
        srv = h1.popen([sys.executable, "-c", "import socket;s=socket.create_server(('10.0.0.2',5002));c,_=s.accept();"
                        "c.recv(1)"], stdout=subprocess.PIPE, text=True)
        # tcp_info byte 5 is tcpi_options: 1 timestamps, 2 SACK
        out = h0.run([sys.executable, "-c", "import socket,time\nfor _ in range(50):\n try: s=socket.create_connection("
                      "('10.0.0.2',5002),timeout=2);break\n except OSError: time.sleep(0.1)\n"
                      "s.setsockopt(socket.IPPROTO_TCP,socket.TCP_CONGESTION,b'reno')\n"
                      "i=s.getsockopt(socket.IPPROTO_TCP,socket.TCP_INFO,104);print(i[5]);s.send(b'x')"], timeout=60)
        srv.communicate(timeout=30)
        assert out.returncode == 0 and int(out.stdout) & 3 == 0, out
    assert {k: open(f"/proc/sys/net/ipv4/{k}").read().strip() for k in want} == root
