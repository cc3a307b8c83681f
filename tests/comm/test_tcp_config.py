"""TransportConfig against the kernel facts, per-rank jitter, settings in force, TCP_INFO."""

import socket

import pytest

from clusterlab.cluster.local import run
from clusterlab.comm.tcp import local_mesh
from clusterlab.errors import ConfigError
from clusterlab.net import tcp_info
from clusterlab.net.transport_config import TransportConfig
from tests.comm import scenarios


@pytest.mark.parametrize("kw, message", [
    (dict(rto_min=0.001), r"rto_min 1ms is below what TCP_RTO_MIN_US accepts \(5ms..200ms\)"),
    (dict(rto_min=0.3), r"exceeds what TCP_RTO_MIN_US accepts \(5ms..200ms\).*net.ipv4.tcp_rto_min_us"),
    (dict(rto_min=0.19, rto_min_jitter=0.02), r"rto_min 190ms \+ jitter 20ms exceeds"),
    (dict(rto_max=0.5), r"rto_max 500ms is outside what TCP_RTO_MAX_MS accepts \(1s..120s\)"),
    (dict(rto_max=121), r"outside what TCP_RTO_MAX_MS accepts \(1s..120s\)"),
    (dict(rto_min_jitter=0.01), "needs its base value"),
    (dict(rto_min=0.01, rto_min_jitter=-1), "jitter must be >= 0"),
    (dict(sndbuf=100), "at least 4096 bytes"),
    (dict(congestion="no-such-cc"), r"not available here \(accepted: "),
])
def test_impossible_settings_are_refused(kw, message):
    with pytest.raises(ConfigError, match=message):
        TransportConfig(**kw, place="socket")
    with pytest.raises(ConfigError, match=message):  # not yet placed: refused when placed on sockets
        TransportConfig(**kw).with_place("socket")


def test_unit_strings_and_old_names():
    assert TransportConfig(rto_min="5ms", rto_min_jitter="10ms", sndbuf="1MiB", sack="off", initcwnd="2") == \
        TransportConfig(rto_min=0.005, rto_min_jitter=0.01, sndbuf=1 << 20, sack=False, initcwnd=2)
    for old, new in (("rto_jitter", "rto_min_jitter"), ("rto_max_extra", "rto_max_offset"), ("cc", "congestion")):
        with pytest.raises(ConfigError, match=f"^transport setting '{old}' is now called '{new}'$"):
            TransportConfig.parse(f"rto_min=5ms,{old}=10ms")
        with pytest.raises(ConfigError, match=f"is now called '{new}'"):
            TransportConfig.from_json(f'{{"{old}": 1}}')
    s = socket.socket()
    try:  # applied before it is placed: at the socket, where 1 ms is refused
        with pytest.raises(ConfigError, match="below what TCP_RTO_MIN_US accepts"):
            TransportConfig(rto_min="1ms").apply(s, 0)
    finally:
        s.close()


def test_jitter_is_per_rank_deterministic_and_in_range():
    c = TransportConfig(rto_min=0.005, rto_min_jitter=0.05, rto_max=1.0, rto_max_jitter=2.0, seed=42)
    draws = [c.for_rank(r) for r in range(16)]
    assert all(5000 <= d.rto_min_us <= 55000 and 1000 <= d.rto_max_ms <= 3000 for d in draws)
    assert len({d.rto_min_us for d in draws}) > 8                     # ranks differ
    assert draws == [TransportConfig(rto_min=0.005, rto_min_jitter=0.05, rto_max=1.0, rto_max_jitter=2.0,
                                     seed=42).for_rank(r) for r in range(16)]  # reproducible
    assert draws != [TransportConfig(rto_min=0.005, rto_min_jitter=0.05, seed=43).for_rank(r) for r in range(16)]
    assert TransportConfig(rto_min=0.02).for_rank(3).rto_min_us == 20000  # no jitter: exact


def test_apply_reports_what_the_kernel_has_in_force():
    s = socket.socket()
    got = TransportConfig(rto_min=0.005, rto_max=2.0, sndbuf=1 << 20, rcvbuf=1 << 19, congestion="reno").apply(s, 0)
    s.close()
    assert got["rto_min_us"] == 8000       # 5 ms rounds up to two 4 ms jiffies
    assert got["rto_max_ms"] == 2000
    assert got["sndbuf"] == 2 << 20 and got["rcvbuf"] == 1 << 20  # the kernel doubles them
    assert got["congestion"] == "reno" and got["nodelay"] is True


def test_json_round_trip_and_unknown_keys():
    c = TransportConfig(rto_min=0.01, rto_min_jitter=0.004, seed=3, congestion="reno")
    assert TransportConfig.from_json(c.to_json()) == c
    with pytest.raises(ConfigError, match="unknown keys"):
        TransportConfig.from_json('{"rto_minimum": 1}')


def test_tcp_info_parse_offsets():
    raw = bytearray(280)
    raw[0] = 1
    raw[8:12] = (204000).to_bytes(4, "little")
    raw[68:72] = (55).to_bytes(4, "little")
    raw[100:104] = (7).to_bytes(4, "little")
    raw[240:242] = (3).to_bytes(2, "little")
    info = tcp_info.parse(bytes(raw))
    assert (info["state"], info["rto_us"], info["rtt_us"], info["total_retrans"], info["total_rto"]) == (1, 204000, 55, 7, 3)
    assert "total_rto" not in tcp_info.parse(bytes(raw[:200]))   # older kernels: absent, not zero


def test_stats_record_tcp_info_and_settings_per_connection():
    a, b = local_mesh(2, config=TransportConfig(rto_min=0.012, rto_max=3.0))
    try:
        a.send(1, b"x" * 1000)
        b.recv(0)
        st = a.stats()
        conn = st["peers"][1]
        assert conn["bytes_sent"] == 1000 + 24 and conn["msgs_sent"] == 1
        ti = conn["tcp_info"]
        assert ti["state"] == 1 and ti["rtt_us"] > 0 and "total_retrans" in ti and "total_rto" in ti
        assert ti["rto_us"] >= 12000       # the lowered minimum is what the kernel now uses
        assert st["transport"]["in_force"]["rto_min_us"] == 12000
        assert st["transport"]["in_force"]["rto_max_ms"] == 3000
    finally:
        a.close()
        b.close()


def test_stats_from_launched_ranks():
    res = run(scenarios.stats_after_traffic, 2, config=TransportConfig(rto_min=0.008, rto_min_jitter=0.02, seed=5))
    draws = [TransportConfig(rto_min=0.008, rto_min_jitter=0.02, seed=5).for_rank(r).rto_min_us for r in range(2)]
    for r, st in enumerate(res):
        peer = st["peers"][str(1 - r)]
        assert peer["msgs_sent"] == 5 and peer["msgs_recv"] == 5
        assert peer["tcp_info"]["bytes_received"] >= 5 * 800_000
        assert st["transport"]["requested"]["rto_min_us"] == draws[r]
        # in force: the draw rounded up to 4 ms jiffies
        assert st["transport"]["in_force"]["rto_min_us"] == -(-draws[r] // 4000) * 4000


def test_stats_while_the_drainer_reads():
    """stats() from another thread while the background drainer is inside the engine (it used
    to raise 'Already mutably borrowed' on the Rust engine)."""
    import threading
    import time

    a, b = local_mesh(2)
    try:
        stop = time.monotonic() + 1.5
        errors = []

        def sender():
            while time.monotonic() < stop:
                b.send(0, bytes(1 << 16))  # a is away from communication calls: its drainer reads

        t = threading.Thread(target=sender)
        t.start()
        while time.monotonic() < stop:
            try:
                a.stats()
            except RuntimeError as e:
                errors.append(e)
            time.sleep(0.001)
        t.join(10)
        assert errors == []
    finally:
        a.close()
        b.close()


def _congestion(sock: socket.socket) -> str:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).split(b"\0", 1)[0].decode()


def _have_cubic() -> bool:
    try:
        with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
            return "cubic" in f.read().split()
    except OSError:
        return False


@pytest.mark.skipif(not _have_cubic(), reason="the kernel has no cubic congestion control")
def test_loopback_connections_use_cubic_unless_told_otherwise():
    """Between ranks of one host the mesh uses cubic when no congestion control is asked for
    (the system's BBR paces and models every loopback connection: 30% more CPU per byte); a
    named one is kept."""
    comms = local_mesh(3)
    try:
        for c in comms:
            assert {_congestion(p.sock) for p in c._conns.values()} == {"cubic"}
            assert c.stats()["transport"]["in_force"]["congestion"] == "cubic"
        comms[0].send(1, b"x")
        assert comms[1].recv(0) == b"x"
    finally:
        for c in comms:
            c.close()
    comms = local_mesh(2, config=TransportConfig(congestion="reno"))
    try:
        assert {_congestion(p.sock) for c in comms for p in c._conns.values()} == {"reno"}
    finally:
        for c in comms:
            c.close()


@pytest.mark.parametrize("length", [0, 8, 103, 104, 240, 244, 248, 280, 512])
def test_tcp_info_parse_reads_every_field_a_buffer_holds_at_its_offset(length):
    """``parse`` reads a buffer in one unpack (a layout per length); each field must be the one
    at its offset, and a field the buffer cuts short is absent (an older kernel's prefix)."""
    import struct

    raw = bytes((7 * i + 3) % 251 for i in range(length))
    got = tcp_info.parse(raw)
    want = {name: struct.unpack_from("<" + code, raw, off)[0] for name, code, off in tcp_info.FIELDS
            if off + struct.calcsize("<" + code) <= length}
    assert got == want
