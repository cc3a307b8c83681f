"""The monitor on the local machine (loopback): counters move with real traffic, the table is
tidy and round-trips through Parquet and CSV, the report draws it. Capture needs root."""

import os
import socket
import threading
import time

import pytest

from clusterlab.monitor import Monitor, read_table
from clusterlab.monitor.capture import bucket_of

is_root = os.geteuid() == 0


def _udp_burst(n: int, payload: int) -> None:
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for _ in range(n):
        tx.sendto(b"x" * payload, rx.getsockname())
    rx.close()
    tx.close()


def _tcp_transfer(nbytes: int) -> None:
    srv = socket.create_server(("127.0.0.1", 0))
    got = []

    def serve():
        c, _ = srv.accept()
        n = 0
        while b := c.recv(1 << 16):
            n += len(b)
        got.append(n)
        c.close()

    th = threading.Thread(target=serve)
    th.start()
    with socket.create_connection(srv.getsockname()) as s:
        s.sendall(b"y" * nbytes)
    th.join(10)
    srv.close()
    assert got == [nbytes]


def test_local_monitor_sees_loopback_traffic(tmp_path):
    m = Monitor.local(interval=0.05, capture=is_root)
    with m:
        _tcp_transfer(5_000_000)
        _udp_burst(300, 1000)
        time.sleep(0.15)  # let the capture thread drain its ring
    df = m.table().to_pandas()
    lo = df[(df.node == "local") & (df.iface == "lo")]
    assert lo[lo.metric == "tx_bytes"].value.sum() >= 5_000_000 + 300 * 1000
    assert df[(df.metric == "TcpOutSegs")].value.sum() > 0
    cpu = df[df.node == "machine"]
    assert set(cpu.metric) >= {"cpu_user", "cpu_system", "cpu_idle", "cpu_softirq", "cpu_iowait", "cpu_spare"}
    spare = cpu[cpu.metric == "cpu_spare"].value
    assert ((spare >= 0) & (spare <= 1.0 + 1e-9)).all()
    assert cpu[cpu.metric.str.startswith("cpu_")].value.between(0, 1).all()
    assert m.meta["samples"] >= 3 and df.t.is_monotonic_increasing
    if is_root:
        # 1000-byte UDP payloads are 1042-byte frames on lo: bucket 16; each counted once
        b = df[(df.metric == "len_packets") & (df.bucket == bucket_of(1042))].value.sum()
        drops = m.meta["capture"]["drops"]  # the ring can overflow on a busy machine; it says so
        assert 300 <= b + drops and b < 600 and drops < 300, (b, drops)
    for name in ("monitor.parquet", "monitor.csv"):
        m.write(tmp_path / name)
        tbl, meta = read_table(tmp_path / name)
        assert tbl.num_rows == len(df) and meta["interval"] == 0.05


def test_report_writes_plots_and_summary(tmp_path):
    from click.testing import CliRunner

    from clusterlab.cli.report import report

    m = Monitor.local(interval=0.05, capture=False)
    with m:
        _tcp_transfer(1_000_000)
    m.write(tmp_path / "monitor.parquet")
    r = CliRunner().invoke(report, [str(tmp_path)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    for f in ("traffic.png", "packet_sizes.png", "tcp.png", "switch.png", "cpu.png", "report.md", "report.html",
              "summary.json"):
        assert (tmp_path / f).stat().st_size > 0, f
    assert "cpu_bound" in (tmp_path / "report.md").read_text()


def test_bad_inputs_are_clear_errors(tmp_path):
    from clusterlab.errors import ConfigError

    with pytest.raises(ConfigError, match="interval"):
        Monitor.local(interval=0)
    (tmp_path / "monitor.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ConfigError, match="not a monitor table"):
        read_table(tmp_path / "monitor.csv")
    with pytest.raises(ConfigError, match="cannot read"):
        read_table(tmp_path / "missing.parquet")
