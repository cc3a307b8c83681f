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
