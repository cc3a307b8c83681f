"""Every CLI command's options fed hostile values (empty, negative, zero, nan, inf, 1e400, huge,
wrong unit, wrong type, unwritable path): each must end with exit status 2, exactly one line
on stderr, no traceback, and nothing left behind (the test runs in an empty directory).

The CLI runs in-process (``clusterlab.cli.main`` with argv), so the table takes seconds. The
commands that need a testbed (root, network namespaces) are marked ``root``.
``test_every_option_is_covered`` fails when a command or option is added without cases here.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import tempfile
from pathlib import Path

import click
import pytest

from clusterlab.cli import cli, main

from .conftest import is_root

# --- hostile values by kind ---------------------------------------------------------------------
HUGE = "1" + "0" * 30
INT = ["", "-1", "nan", "inf", "1e400", HUGE, "abc", "1.5"]
POS_INT = [*INT, "0"]
FLOAT = ["", "nan", "inf", "-inf", "1e400", "abc", "-1"]
POS_FLOAT = [*FLOAT, "0"]
UNIT_FLOAT = [*FLOAT, "1.5"]
SIZE = ["", "-1", "nan", "inf", "1e400", "12parsecs", "abc", "1e30"]
POS_SIZE = [*SIZE, "0"]
DURATION = ["", "-1ms", "nan", "inf", "1e400s", "5lightyears", "abc"]
RATE = ["", "-1Mbit", "nan", "inf", "1e400bit", "fast", "0"]
CHOICE = ["", "nope"]
# Never a real device: code that failed to refuse one would replace it (as root, /dev/null for
# the whole machine); "@socket" is a socket file of the test's own, not a regular file either.
UNWRITABLE_FILE = ["/proc/x/out", "@socket", "@data/x", "@dir", "/"]
UNWRITABLE_DIR = ["/proc/x/out", "@socket", "@data", "@data/x"]
TRANSPORT = {"--transport": ["rto_min=1e400ms", "nope=1", "x", "rto_min=", "sndbuf=-1"],
             "--rto-min": DURATION, "--rto-min-jitter": DURATION, "--rto-max": DURATION,
             "--rto-max-jitter": DURATION, "--rto-max-offset": DURATION, "--congestion": ["", "nope", "../x"],
             "--sndbuf": SIZE, "--rcvbuf": SIZE}
TESTBED_KNOBS = {"--initcwnd": INT, "--rmem": SIZE + ["1 2"], "--wmem": SIZE + ["1 2"]}
# without --sites and --wan-cells even a valid policy or threshold is refused with the reason
WAN_DISCARD = {"--wan-discard": [*CHOICE, "ppd", "epd"], "--wan-epd-threshold": [*POS_SIZE, "10cells", "x"]}
TOPO = {"--rate": RATE, "--buffer": POS_SIZE, "--host-queue": POS_SIZE + ["-1p"], "--mtu": POS_INT + ["67", "65001"],
        "--dilation": FLOAT + ["0", "0.5"], "--switch": CHOICE, "--discard": CHOICE,
        "--epd-threshold": ["", "-1", "nan", "1e400", "abc"],
        "--host-rate": ["", "h9=10Mbit", "h0", "h0=fast", "h0=-1Mbit", "h0=1e400bit", "h0=1Mbit h0=2Mbit"],
        "--loss": ["", "h9:1%", "h0", "h0:nan", "h0:60%", "h0:-1%"], "--loss-seed": INT}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """Inputs the commands read (outside the directory each case runs in)."""
    d = tmp_path_factory.mktemp("inputs")
    data = d / "t.dat"
    data.write_text("1 2 3\n1 2\n2 3\n1 3\n")
    model = d / "model.json"
    model.write_text("[1, 2")
    tomls = {}
    for name, text in {
        "list_of_numbers": "test = [1, 2]\n",
        "list_of_names": 'test = ["tcp_rmem"]\n',
        "not_toml": "[cluster\n",
        "huge": '[[test]]\nvariable = "tcp_rmem"\nstart = "4KiB"\nend = "1e400"\n',
        "nan": '[[test]]\nvariable = "tcp_rmem"\nstart = "nan"\nend = "64KiB"\n',
        "output_unwritable": '[[test]]\nvariable = "tcp_rmem"\nstart = "4KiB"\nend = "64KiB"\n[output]\n'
                             'dir = "/proc/x/out"\n',
    }.items():
        tomls[name] = d / f"{name}.toml"
        tomls[name].write_text(text)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(d / "sock"))  # the file stays after close: neither a regular file nor a directory
    sock.close()
    hostfile = d / "hosts"
    hostfile.write_text("a:b:c\n")
    runs = _damaged_runs(d / "runs")
    return {"data": data, "model": model, "hostfile": hostfile, "dir": d, "socket": d / "sock", **tomls, **runs}


def _damaged_runs(root: Path) -> dict[str, Path]:
    out = {}
    for name in ("meta_list", "meta_dir", "meta_not_json", "meta_spec_list", "torn_parquet", "no_table",
                 "monitor_torn"):
        out[name] = root / name
        out[name].mkdir(parents=True)
    meta = {"study": "x", "status": "complete", "spec": {"report": [{"kind": "scatter", "x": "rep", "y": "seconds"}]},
            "points": [{"index": 0}]}
    (out["meta_list"] / "meta.json").write_text("[]")
    (out["meta_dir"] / "meta.json").mkdir()
    (out["meta_not_json"] / "meta.json").write_text("{")
    (out["meta_spec_list"] / "meta.json").write_text(json.dumps({**meta, "spec": []}))
    (out["torn_parquet"] / "meta.json").write_text(json.dumps(meta))
    (out["torn_parquet"] / "table.parquet").write_bytes(b"PAR1\x00\x01")
    (out["no_table"] / "meta.json").write_text(json.dumps(meta))
    (out["monitor_torn"] / "monitor.parquet").write_bytes(b"PAR1")
    for name, label in (("run_a", "a"), ("run_b", "b")):  # two complete runs of one study: merge's parts
        out[name] = root / name
        out[name].mkdir(parents=True)
        (out[name] / "meta.json").write_text(json.dumps({**meta, "points": [{"index": 0, "label": label}]}))
        (out[name] / "table.csv").write_text("point,rep,seconds\n0,0,1.0\n")
    return out


# --- the table ----------------------------------------------------------------------------------
# command -> (argv before the option, {option: values}); values may name a fixture file as "@name"
# and the output directory as "{out}".
def table() -> dict[tuple[str, ...], tuple[list[str], dict[str, list[str]]]]:
    return {
        ("gen",): (["gen", "T10I4D100K", "--transactions", "10", "-o", "{out}/x.dat"], {
            "NAME": ["", "NOPE", "T10I4"], "--output": UNWRITABLE_FILE, "--preset": CHOICE, "--items": POS_INT,
            "--patterns": POS_INT, "--transactions": POS_INT, "--correlation": UNIT_FLOAT,
            "--corruption-mean": UNIT_FLOAT, "--corruption-sd": UNIT_FLOAT, "--seed": INT[1:],
            "--threads": POS_INT, "--partitions": POS_INT}),
        ("stats",): (["stats", "@data"], {
            "FILE": ["", "/nonexistent.dat", "@dir", "@model"], "--format": CHOICE, "--top": INT}),
        ("mine",): (["mine", "@data", "--min-support", "0.5", "--quiet"], {
            "FILE": ["", "/nonexistent.dat", "@dir"], "--min-support": [*POS_FLOAT, "1.5", "150%"],
            "--algorithm": CHOICE, "--target": CHOICE, "--min-len": POS_INT, "--max-len": POS_INT,
            "--threads": POS_INT, "--format": CHOICE, "--output": UNWRITABLE_FILE, "--min-confidence": UNIT_FLOAT,
            "--min-lift": FLOAT, "--consequents": CHOICE, "--rules-output": UNWRITABLE_FILE,
            "--nodes": POS_INT, "--backend": CHOICE, "--block-size": POS_SIZE, "--partition": CHOICE,
            "--testbed": ["", "NOPE"], "--memory": POS_SIZE, "--max-dilation": [*FLOAT, "0", "0.5"],
            "--timeout": [*DURATION, "0", "0.5s", "169h", "10d"]}),
        ("demo",): (["demo", "--workdir", "{out}/demo"], {
            "--workdir": UNWRITABLE_DIR, "--transactions": POS_INT, "--nodes": POS_INT, "--min-support": POS_FLOAT}),
        ("bench", "pingpong"): (["bench", "pingpong", "--backend", "inproc", "--np-out", ""], {
            "--sizes": ["", "8:2", "-1:8", "1:1e400", "1:nan", "12parsecs", "a:b:c"], "--perturbation": INT,
            "--trial-time": POS_FLOAT, "--trials": POS_INT, "--np-out": UNWRITABLE_FILE, "--backend": CHOICE}),
        ("bench", "collective"): (["bench", "collective", "--backend", "inproc", "--op", "bcast"], {
            "--op": CHOICE, "--ranks": POS_INT, "--algorithm": ["", "ring"], "--sizes": ["", "8:2", "1:1e400", "nan"],
            "--iterations": POS_INT, "--warmup": INT, "--time-per-size": POS_FLOAT,
            "--model": ["/nonexistent.json", "@dir", "@model"], "--backend": CHOICE}),
        ("bench", "broadcast"): (["bench", "broadcast", "--reps", "1", "--warmup", "0"], {
            "--size": [*POS_SIZE, "1000GB"], "--reps": POS_INT, "--warmup": INT, "--order": CHOICE,
            "--ranks": [*POS_INT, "1", "100000"], "--hosts": [*POS_INT, "1", "100000"], "--interval": POS_FLOAT,
            "--run-dir": UNWRITABLE_DIR, "--sites": ["", "4+3", "a+b", "0+2", "2+2"], "--wan-rate": RATE,
            "--wan-delay": DURATION, "--wan-queue": POS_SIZE, **WAN_DISCARD,
            "--max-dilation": [*FLOAT, "0", "0.5"],
            **TOPO, **TRANSPORT, **TESTBED_KNOBS, "--seed": INT[1:]}),
        ("experiment", "run"): (["experiment", "run", "local-speedup", "--quick", "--dry-run"], {
            "NAME": ["", "nope", "../x"],
            "--set": ["", "=", "repeat", "repeat=", "repeat=nan", "repeat=0", "repeat=1e400", "warmup=-1",
                      "ranks=100000", "ranks=0", "min_support=nan", "min_support=inf", "min_support=-1",
                      "data=/nonexistent.dat", "block_size=1e400", "block_size=-1", "rto_min=1e400ms",
                      "rto_min=nan", "tcp=seed=abc", "tcp=nope=1", "nope=1", "monitor_interval=inf",
                      "compute_scale=nan", "algorithm=nope"],
            "--max-dilation": [*FLOAT, "0", "0.5"],
            "--runs": UNWRITABLE_DIR, "--out": UNWRITABLE_DIR, "--records": UNWRITABLE_DIR}),
        ("experiment", "report"): (["experiment", "report"], {
            "RUN_DIR": ["", "/nonexistent", "@data", "@meta_list", "@meta_dir", "@meta_not_json", "@meta_spec_list",
                        "@torn_parquet", "@no_table"]}),
        ("experiment", "speedup"): (["experiment", "speedup", "--data", "@data", "--min-support", "0.5", "--nodes",
                                     "1", "-o", "{out}/sp"], {
            "--algorithm": CHOICE, "--nodes": ["", "0", "-1", "a", "1e400", "100000", "1,,2"],
            "--data": ["", "/nonexistent.dat", "@dir"], "--min-support": POS_FLOAT,
            "--transport": ["x", "nope=1", "rto_min=1e400ms"], "--rto-min": DURATION, "--rto-min-jitter": DURATION,
            "--rto-max-offset": DURATION, "--repeat": POS_INT, "--backend": CHOICE, "--block-size": POS_SIZE,
            "--output": UNWRITABLE_DIR}),
        ("report",): (["report"], {
            "RUN_DIR": ["", "/nonexistent", "@data", "@meta_list", "@meta_dir", "@meta_not_json", "@meta_spec_list",
                        "@torn_parquet", "@no_table", "@monitor_torn", "/proc/self"],
            "--title": []}),
        ("diagnose",): (["diagnose"], {
            "RUN_DIR": ["", "/nonexistent", "@data", "@dir", "@meta_list", "@meta_dir", "@meta_not_json",
                        "@meta_spec_list", "@torn_parquet", "@no_table", "@monitor_torn", "/proc/self"]}),
        ("monitor",): (["monitor", "--no-capture", "-o", "{out}/m.parquet", "--duration", "0.01"], {
            "--interval": POS_FLOAT, "--duration": POS_FLOAT, "--out": UNWRITABLE_FILE,
            "COMMAND": ["--", "/nonexistent/cmd"], "--testbed": ["NOPE", "../x"]}),
        ("npb", "run"): (["npb", "run", "ep", "--class", "S", "-n", "1"], {
            "KERNEL": ["", "xx"], "--class": ["", "Z", "SS"], "--ranks": POS_INT, "--backend": CHOICE,
            "--seed": INT[1:], "--timeout": POS_FLOAT, "--trace": UNWRITABLE_FILE, **TRANSPORT}),
        ("npb", "official"): (["npb", "official", "@data"], {
            "BINARY": ["", "/nonexistent", "@dir"], "--ranks": POS_INT, "--timeout": POS_FLOAT,
            "--testbed": ["", "UPPER", "../x"]}),
        ("run",): (["run", "-n", "1"], {
            "--nodes": POS_INT, "--backend": CHOICE, **TRANSPORT, "--seed": INT[1:], "--timeout": DURATION,
            "--comm-timeout": DURATION, "--grace": DURATION, "--setup-timeout": DURATION, "--launcher": CHOICE,
            "--hostfile": ["/nonexistent", "@hostfile", "@dir"], "--iface": [], "--rendezvous": [],
            "--mpiexec-args": [], "COMMAND": ["/nonexistent/cmd", ""], "--testbed": ["", "UPPER", "../x"],
            "--run-dir": UNWRITABLE_DIR, "--monitor-interval": [*POS_FLOAT, "0.001", "61"]}),
        ("tune", "model"): (["tune", "model", "--backend", "inproc", "-o", "{out}/m.json"], {
            "--ranks": POS_INT, "--output": UNWRITABLE_FILE, "--sizes": ["", "8:2", "1:1e400", "nan"],
            "--trial-time": POS_FLOAT, "--backend": CHOICE, "--concurrency": FLOAT}),
        ("tune", "buffers"): (["tune", "buffers", "--no-plots"], {
            "--config": ["", "/nonexistent.toml", "@dir", "@list_of_numbers", "@list_of_names", "@not_toml", "@huge",
                         "@nan", "@output_unwritable"],
            "--output": UNWRITABLE_DIR}),
        ("experiment", "list"): (["experiment", "list"], {}),
        ("experiment", "status"): (["experiment", "status"], {
            "NAMES": ["nope", "../x"], "--records": ["/nonexistent", "@data"]}),
        ("experiment", "merge"): (["experiment", "merge", "@run_a", "@run_b", "-o", "{out}/m", "--no-report"], {
            "RUN_DIRS": ["", "/nonexistent", "@data", "@dir", "@meta_list", "@meta_not_json", "@no_table", "@run_a"],
            "--out": UNWRITABLE_DIR, "--records": UNWRITABLE_DIR, "--as": ["", "nope", "seed000-fig4"]}),
        ("experiment", "record"): (["experiment", "record"], {
            "RUN_DIR": ["", "/nonexistent", "@data", "@dir", "@meta_list", "@meta_not_json", "@no_table"],
            "--records": UNWRITABLE_DIR}),
    }


ROOT_TABLE = {
    ("testbed", "up"): (["testbed", "up", "--hosts", "2"], {
        "--hosts": [*POS_INT, "1", "100000"], "--name": ["", "UPPER", "x" * 20, "../x"], **TOPO,
        "--sites": ["", "4+3", "a+b", "0+2"], "--wan-rate": RATE, "--wan-delay": DURATION, "--wan-queue": POS_SIZE,
        **WAN_DISCARD, **TRANSPORT, **TESTBED_KNOBS, "--seed": INT[1:]}),
    ("testbed", "exec"): (["testbed", "exec"], {"NAME": ["", "UPPER", "../x", "zzcorr"], "HOST": [],
                                                 "COMMAND": []}),
    ("testbed", "down"): (["testbed", "down"], {"NAME": ["", "UPPER", "../x", "x" * 20]}),
    ("testbed", "clean"): (["testbed", "clean"], {"NAME": ["", "UPPER", "../x", "x" * 20]}),
    ("testbed", "status"): (["testbed", "status"], {"NAME": ["UPPER"]}),
    ("bench", "storage"): (["bench", "storage", "--hosts", "8"], {
        "--hosts": POS_INT, "--initiators": ["", "0", "-1", "a", "1e400"], "--size": POS_SIZE, "--block": POS_SIZE,
        "--rate": RATE, "--connections": POS_INT, "--backing-rate": RATE, "--name": ["UPPER", "../x"]}),
    ("tune", "auto"): (["tune", "auto", "--hosts", "2"], {
        "--workload": CHOICE, "--size": POS_SIZE, "--data": ["/nonexistent.dat"], "--min-support": POS_FLOAT,
        "--hosts": POS_INT, "--rate": RATE, "--buffer": POS_SIZE, "--mtu": POS_INT, "--grid": ["", "x", "rto_min="],
        "--runs": POS_INT, "--budget": POS_INT, "--eta": POS_INT, "--confirm": INT, "--output": UNWRITABLE_FILE,
        "--dilation": [*FLOAT, "0", "0.5", "100000"], "--name": ["", "UPPER", "x" * 20, "../x"]}),
    ("tune", "sim"): (["tune", "sim", "--hosts", "2"], {
        "--hosts": [*POS_INT, "1"], "--rate": RATE, "--buffer": POS_SIZE, "--mtu": POS_INT, "--switch": CHOICE,
        "--sizes": ["", "x", "0KB", "nan"], "--reps": POS_INT, "--name": ["", "UPPER", "../x"],
        "--refit": ["/nonexistent.json", "@dir", "@data"], "--output": UNWRITABLE_FILE}),
}
# Options with no hostile value of their own (free text that is only passed on, or a flag).
FREE_TEXT = {("report",): {"--title"}, ("diagnose",): {"--json", "--verify"}, ("run",): {"--iface", "--rendezvous", "--mpiexec-args"},
             ("testbed", "exec"): {"HOST", "COMMAND"}, ("tune", "sim"): {"--json"}}

ENVIRONMENT = [("CLUSTERLAB_TIMEOUT", v) for v in ["abc", "-5", "nan", "inf", "1e400", "0", "5lightyears"]] + \
              [("CLUSTERLAB_SETUP_TIMEOUT", v) for v in ["abc", "-5", "nan"]]


def _cases(tbl):
    for cmd, (base, opts) in tbl.items():
        for opt, values in opts.items():
            for v in values:
                yield pytest.param(cmd, base, opt, v, id=f"{' '.join(cmd)} {opt}={v!r}")


def _argv(base: list[str], opt: str, value: str, files: dict, out: Path) -> list[str]:
    def fill(x: str) -> str:
        if x.startswith("@") and x[1:].split("/")[0] in files:
            name, _, rest = x[1:].partition("/")
            return str(files[name]) + (f"/{rest}" if rest else "")
        return x.replace("{out}", str(out))

    argv = [fill(a) for a in base]
    value = fill(value)
    if opt in ("NAME", "KERNEL") and len(argv) > 2:  # replace the positional argument the base gives
        pos = 2 if argv[0] in ("experiment", "npb") else 1
        argv[pos] = value
    elif opt in ("FILE", "BINARY") and len(argv) > 1:
        argv[argv.index(fill(base[2 if argv[0] == "npb" else 1]))] = value
    elif opt in ("RUN_DIR", "RUN_DIRS", "NAME", "NAMES"):
        argv.append(value)
    elif opt == "COMMAND":
        argv += ["--", value] if value != "--" else ["--", "/nonexistent/cmd"]
    else:
        argv += [opt, value]
        if argv[0] == "run":
            argv += ["--", "true"]
    return argv


def _run(argv: list[str], capsys) -> tuple[object, str, str]:
    try:
        main(argv)
        code = 0
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def _check(argv, capsys, workdir: Path, before: set[str]) -> None:
    code, out, err = _run(argv, capsys)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode), "/dev/null was replaced"
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err, (argv, err)
    assert code == 2, (argv, code, err, out[-300:])
    assert len(lines) == 1, (argv, err)
    assert sorted(os.listdir(workdir)) == [], (argv, os.listdir(workdir))
    tmp = Path(tempfile.gettempdir())
    assert sorted(os.listdir(tmp)) == sorted(before), (argv, os.listdir(tmp))


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """An empty working directory, and a temporary directory of the case's own (TMPDIR, also
    for the ranks it starts): both must be left as they were."""
    d = tmp_path / "cwd"
    d.mkdir()
    monkeypatch.chdir(d)
    t = tmp_path / "tmp"
    t.mkdir()
    monkeypatch.setenv("TMPDIR", str(t))
    monkeypatch.setattr(tempfile, "tempdir", str(t))
    return d


@pytest.mark.parametrize(("cmd", "base", "opt", "value"), list(_cases(table())))
def test_hostile_value_is_one_line_exit_2(cmd, base, opt, value, files, workdir, capsys):
    _check(_argv(base, opt, value, files, workdir), capsys, workdir, set(os.listdir(tempfile.gettempdir())))


@pytest.mark.root
@pytest.mark.timeout(60)  # a value that got through would build and run a testbed
@pytest.mark.skipif(not is_root, reason="needs root (testbed commands)")
@pytest.mark.serial  # alone (make test): the cases share the testbed name zzhost and the state file zzcorr
@pytest.mark.parametrize(("cmd", "base", "opt", "value"), list(_cases(ROOT_TABLE)))
def test_hostile_value_on_testbed_commands(cmd, base, opt, value, files, workdir, capsys):
    from clusterlab.cluster.testbed import clean, leftovers

    state = Path("/run/clusterlab/testbed")
    state.mkdir(parents=True, exist_ok=True)
    (state / "zzcorr.json").write_text("{")
    try:
        argv = _argv(base, opt, value, files, workdir)
        if cmd == ("testbed", "up") and opt != "--name":
            argv += ["--name", "zzhost"]
        if cmd == ("testbed", "exec"):
            argv += ["h0", "--", "true"]
        _check(argv, capsys, workdir, set(os.listdir(tempfile.gettempdir())))
        assert not any(leftovers("zzhost")[k] for k in ("namespaces", "processes")), argv
    finally:
        (state / "zzcorr.json").unlink()
        clean("zzhost")


@pytest.mark.parametrize(("name", "value"), ENVIRONMENT)
def test_hostile_environment_variable_is_one_line(name, value, monkeypatch, capsys, workdir):
    monkeypatch.setenv(name, value)
    code, _, err = _run(["experiment", "list"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and name in err and "Traceback" not in err, err


def _options(cmd: click.Command) -> set[str]:
    out = set()
    for p in cmd.params:
        if isinstance(p, click.Option):
            # hidden options are old spellings that only refuse (tests/experiments/test_transport_walk.py)
            if p.is_flag or p.name == "help" or p.hidden:
                continue
            out.add(max(p.opts, key=len))
        else:
            out.add(p.name.upper())
    return out


def _commands():
    ctx = click.Context(cli)

    def walk(c, path):
        if isinstance(c, click.Group):
            for n in c.list_commands(ctx):
                yield from walk(c.get_command(ctx, n), (*path, n))
        else:
            yield path, c

    return list(walk(cli, ()))


def test_every_option_is_covered():
    """Every command is in a table, and every option of it has hostile values (or is free
    text that is only passed on)."""
    tables = {**table(), **ROOT_TABLE}
    missing = []
    for path, cmd in _commands():
        if path not in tables:
            missing.append(" ".join(path))
            continue
        opts = tables[path][1]
        covered = {o for o, v in opts.items() if v} | FREE_TEXT.get(path, set())
        # the option given by its short or long name in the table
        for o in sorted(_options(cmd) - covered):
            missing.append(f"{' '.join(path)} {o}")
    assert not missing, f"commands/options without hostile cases: {missing}"
