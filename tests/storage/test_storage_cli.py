"""``clusterlab bench storage``: bad input is one line and exit 2, before anything is built."""

import pytest

from clusterlab.bench.storage import parse_counts
from clusterlab.cli import main
from clusterlab.errors import ConfigError


@pytest.mark.parametrize("args, msg", [
    (["--initiators", "x"], "--initiators"),
    (["--initiators", "0..4"], "--initiators"),
    (["--initiators", "4..2"], "--initiators"),
    (["--hosts", "2", "--initiators", "1..4"], "--hosts >= 4"),
    (["--block", "100"], "--block"),
    (["--size", "1MB", "--block", "3MB"], "--block"),
    (["--rate", "fast"], "rate"),
    (["--connections", "0"], "--connections"),
    (["--backing-rate", "fast"], "--backing-rate"),
    (["--backing-rate", "1KB"], "--backing-rate"),
])
def test_bad_input_is_one_line_exit_2(args, msg, capsys):
    with pytest.raises(SystemExit) as e:
        main(["bench", "storage", *args])
    out, err = capsys.readouterr()
    assert e.value.code == 2 and out == "", err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and msg in lines[0], err


def test_parse_counts():
    assert parse_counts("1..8") == [1, 2, 4, 8] and parse_counts("3") == [3]
    with pytest.raises(ConfigError):
        parse_counts("1..")


def _table(rows):
    import pyarrow as pa

    from clusterlab.monitor.sampler import SCHEMA

    cols = {c: [] for c in SCHEMA.names}
    for t, node, metric, value in rows:
        for c, v in zip(SCHEMA.names, (t, node, "", metric, -1, value), strict=True):
            cols[c].append(v)
    return pa.Table.from_pydict(cols, schema=SCHEMA)


def _phase(st_tx, idle, nice, backing=None):
    rows = [(1.0, "machine", "interval_seconds", 1.0), (1.0, "st", "tx_bytes", st_tx),
            (1.0, "machine", "cpu_idle", idle), (1.0, "machine", "cpu_nice", nice),
            (1.0, "machine", "cpu_iowait", 0.0), (1.0, "st", "host_cpu_user", 0.2), (1.0, "st", "host_cpu_system", 0.1),
            (1.0, "h0", "host_cpu_user", 0.05), (1.0, "h0", "host_cpu_system", 0.05)]
    if backing is not None:
        rows.append((1.0, "st", "backing_read_bytes", backing))
    return _table(rows)


def test_phase_usage_names_the_bottleneck():
    from clusterlab.bench.storage import phase_usage

    full_link = phase_usage(_phase(18.5e6, 0.5, 0.0), "st", 155e6)
    assert full_link["bottleneck"] == "network" and full_link["st_link_utilization"] == 0.955
    assert full_link["target_cpu"] == 0.3 and full_link["initiator_cpu"] == 0.1
    disk = phase_usage(_phase(10e6, 0.5, 0.0, backing=9.5e6), "st", 1e9, backing_bps=10e6)
    assert disk["bottleneck"] == "backing store" and disk["backing_mbps"] == 9.5
    # a target on another host (the studies use the testbed's last host): same backing rows
    assert phase_usage(_phase(10e6, 0.5, 0.0, backing=9.5e6), "h8", 1e9, backing_bps=10e6)["backing_mbps"] == 9.5
    assert phase_usage(_phase(10e6, 0.05, 0.0), "st", 1e9)["bottleneck"] == "cpu"
    # niced jobs of other users keep the machine busy, but this run is not short of CPU
    others = phase_usage(_phase(10e6, 0.05, 0.5), "st", 1e9)
    assert others["bottleneck"] == "latency" and others["cpu_nice_others"] == 0.5
    t = _phase(50e6, 0.5, 0.0)
    import pyarrow as pa

    drops = pa.Table.from_pydict({"t": [1.0], "node": ["switch"], "iface": ["p8"], "metric": ["qdisc_drops"],
                                  "bucket": [-1], "value": [12.0]}, schema=t.schema)
    got = phase_usage(pa.concat_tables([t, drops]), "st", 1e9, storage_port="p8")
    assert got["bottleneck"] == "incast" and got["port_drops"] == 12
