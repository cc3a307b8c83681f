"""``clusterlab mine``: outputs in every format, rules, summary, and one-line errors."""

from __future__ import annotations

import json

import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

import clusterlab
from clusterlab.cli import main
from clusterlab.errors import BasketFormatError, ConfigError
from clusterlab.mining.spmf import read_spmf_itemsets, write_spmf_itemsets

TXS = "1 2 3\n1 2\n2 3\n1 2 3 4\n"


def run(capsys, *args):
    with pytest.raises(SystemExit) as e:
        main(list(args))
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


@pytest.fixture
def dat(tmp_path):
    p = tmp_path / "b.dat"
    p.write_text(TXS)
    return p


def test_parquet_output_with_rules_and_json_summary(capsys, dat, tmp_path):
    out = tmp_path / "sets.parquet"
    code, stdout, _ = run(capsys, "mine", str(dat), "-s", "50%", "--rules", "--min-confidence", "0.7",
                          "-o", str(out), "--json")
    assert code == 0
    s = json.loads(stdout)
    assert s["itemsets"] == 7 and s["itemsets_by_length"] == {"1": 3, "2": 3, "3": 1}
    assert s["peak_rss_bytes"] > 0 and "mine" in s["seconds"]
    t = pq.read_table(out)
    assert t.equals(clusterlab.mine(str(dat), 0.5))  # metadata survives the file
    r = pq.read_table(tmp_path / "sets.rules.parquet")
    assert r.num_rows == s["rules"] and min(r["confidence"].to_pylist()) >= 0.7


def test_csv_and_spmf_outputs(capsys, dat, tmp_path):
    code, _, _ = run(capsys, "mine", str(dat), "-s", "2", "--target", "closed", "-o", str(tmp_path / "c.csv"))
    assert code == 0
    t = pcsv.read_csv(tmp_path / "c.csv")
    assert t.column_names == ["items", "count", "support"]
    assert t["items"].to_pylist() == ["2", "1 2", "2 3", "1 2 3"]
    code, _, _ = run(capsys, "mine", str(dat), "-s", "2", "--max-len", "2", "-o", str(tmp_path / "s.txt"),
                     "--rules", "--min-confidence", "1")
    assert code == 0
    assert (tmp_path / "s.txt").read_text().splitlines()[:2] == ["1 #SUP: 3", "2 #SUP: 4"]
    assert "1 ==> 2 #SUP: 3 #CONF: 1" in (tmp_path / "s.rules.txt").read_text()


def test_summary_on_terminal_less_run(capsys, dat):
    code, stdout, _ = run(capsys, "mine", str(dat), "-s", "0.5")
    assert code == 0 and "frequent itemsets" in stdout and "by length" in stdout


@pytest.mark.parametrize("args, msg", [
    (["-s", "abc"], "not a number"),
    (["-s", "0"], "min_support must be > 0"),
    (["-o", "x.json"], ".parquet, .csv or .txt"),
    (["--rules", "--target", "closed"], "--rules needs all frequent itemsets"),
    (["--min-len", "3", "--max-len", "2"], "below --min-len"),
])
def test_errors_are_one_line(capsys, dat, args, msg):
    code, _, err = run(capsys, "mine", str(dat), *args)
    assert code == 2 and msg in err and "Traceback" not in err


def test_bad_file_is_one_line(capsys, tmp_path):
    p = tmp_path / "bad.dat"
    p.write_text("1 2\n-3\n")
    code, _, err = run(capsys, "mine", str(p))
    assert code == 2 and "bad.dat:2" in err


def test_spmf_round_trip_and_errors(tmp_path):
    t = clusterlab.mine([["a", "b"], ["a"], ["a", "b", "c"]], min_support=1)
    p = tmp_path / "l.txt"
    write_spmf_itemsets(t, p)
    back = read_spmf_itemsets(p, n_transactions=3)
    assert back["items"].to_pylist() == t["items"].to_pylist() and back["count"].equals(t["count"])
    (tmp_path / "bad.txt").write_text("1 2 #SUP: 3\n4 5\n")
    with pytest.raises(BasketFormatError, match="bad.txt:2"):
        read_spmf_itemsets(tmp_path / "bad.txt")
    with pytest.raises(ConfigError, match="SPMF"):
        write_spmf_itemsets(clusterlab.mine([["a b"]], 1), tmp_path / "x.txt")


@pytest.mark.parametrize("args, msg", [
    (["-s", "inf"], "not a finite number"),
    (["-s", "1e400"], "not a finite number"),
    (["-s", "nan"], "not a finite number"),
    (["-s", "2", "--rules", "--min-lift", "nan"], "--min-lift nan"),
    (["-s", "2", "--rules", "--min-lift", "-1"], "--min-lift -1"),
])
def test_non_finite_settings_are_refused(capsys, dat, args, msg):
    """`-s inf` was an OverflowError traceback, `--min-lift nan` silently kept 0 rules."""
    code, _, err = run(capsys, "mine", str(dat), *args)
    assert code == 2 and msg in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def _bad_input(tmp_path):
    """A file whose line 3 is malformed: an error naming the output proves it came first."""
    p = tmp_path / "late.dat"
    p.write_text("1 2\n2 3\nx\n")
    return p


def test_output_whose_parent_is_a_file_is_refused_before_mining(capsys, tmp_path):
    (tmp_path / "afile").write_text("")
    for out in (tmp_path / "afile" / "sets.parquet", tmp_path / "afile" / "sub" / "sets.csv"):
        code, _, err = run(capsys, "mine", str(_bad_input(tmp_path)), "-s", "1", "-o", str(out))
        assert code == 2 and "not a directory" in err and str(out) in err and "late.dat" not in err
    code, _, err = run(capsys, "mine", str(_bad_input(tmp_path)), "-s", "1", "-o", str(tmp_path))
    assert code == 2 and "directory" in err


def _mount_tmpfs(path, options: str) -> bool:
    import os
    import subprocess

    if os.geteuid() != 0:
        return False
    path.mkdir(exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True)
    return r.returncode == 0


def _umount(path) -> None:
    import subprocess

    subprocess.run(["umount", "-l", str(path)], capture_output=True)


def test_read_only_output_directory_is_refused_before_mining(capsys, tmp_path):
    import os

    ro = tmp_path / "ro"
    mounted = _mount_tmpfs(ro, "ro,size=1m")
    if not mounted:
        if os.geteuid() == 0:
            pytest.skip("cannot mount a read-only tmpfs here (root ignores directory permissions)")
        ro.mkdir()
        ro.chmod(0o555)
    try:
        out = ro / "sets.parquet"
        code, _, err = run(capsys, "mine", str(_bad_input(tmp_path)), "-s", "1", "-o", str(out))
        assert code == 2 and str(out) in err and "late.dat" not in err and "Traceback" not in err
        assert not out.exists() and os.listdir(ro) == []
    finally:
        if mounted:
            _umount(ro)


@pytest.mark.root
def test_full_disk_is_refused_before_mining_and_on_write(capsys, tmp_path):
    """ENOSPC on a tiny tmpfs (root): a full file system is refused up front; one that fills up
    while writing gives one line and leaves nothing at -o."""
    import os

    small = tmp_path / "small"
    if not _mount_tmpfs(small, "size=256k"):
        pytest.skip("needs root and tmpfs")
    try:
        (small / "fill").write_bytes(b"\0" * (256 * 1024 - 4096 * 2))
        out = small / "sets.csv"
        code, _, err = run(capsys, "mine", str(_bad_input(tmp_path)), "-s", "1", "-o", str(out))
        assert code == 2 and "No space left on device" in err and "late.dat" not in err
        # Room for the probe, not for the result: the write itself fails, atomically.
        (small / "fill").write_bytes(b"\0" * (256 * 1024 - 4096 * 20))
        big = tmp_path / "big.dat"
        big.write_text("".join(" ".join(str(i * 7 + j) for j in range(12)) + "\n" for i in range(3000)))
        code, _, err = run(capsys, "mine", str(big), "-s", "1", "--max-len", "2", "-o", str(out))
        assert code == 2 and f"cannot write {out}: " in err and "No space left on device" in err and "Traceback" not in err
        assert sorted(os.listdir(small)) == ["fill"]
    finally:
        _umount(small)


def test_mining_run_does_not_import_pandas(dat, tmp_path):
    """pyarrow's first pa.array / to_numpy call imports pandas (0.3 s, more than mining a
    100,000-transaction file takes): the CLI's whole run, rules and Parquet output included,
    must not pay it."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = ("import atexit, sys; atexit.register(lambda: print('pandas' in sys.modules)); "
            "from clusterlab.cli import main; "
            f"main(['mine', {str(dat)!r}, '-s', '0.2', '--rules', '-o', {str(tmp_path / 'o.parquet')!r}, '--json'])")
    env = {**os.environ, "PYTHONPATH": str(Path(clusterlab.__file__).parents[1])}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "False"
    assert pq.read_table(tmp_path / "o.parquet").num_rows > 0
