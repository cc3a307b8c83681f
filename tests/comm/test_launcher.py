"""The local launcher: results, failures named within seconds, signals, nothing left behind."""

import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from clusterlab.cluster.local import RankHost, launch, run
from clusterlab.comm import CommTimeout, PeerFailure
from clusterlab.errors import ConfigError
from clusterlab.rendezvous import handshake
from tests.comm import scenarios
from tests.comm.conftest import BACKENDS, assert_nothing_left, processes_with


def test_return_values_json_and_bytes():
    assert run(scenarios.return_types, 3) == [b"\x00raw bytes\xff", {"array": [0, 1, 2], "scalar": 1.5},
                                              [2, 3, "text"]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_sigkill_mid_exchange_names_the_victim_everywhere(backend, marker):
    t = time.monotonic()
    with pytest.raises(PeerFailure) as ei:
        run(scenarios.kill_mid_exchange, 4, 2, 30, marker, backend=backend, timeout=60, grace=3.0)
    elapsed = time.monotonic() - t
    res = ei.value.result
    if backend == "mpi" and ei.value.rank != 2:
        pytest.xfail("under mpiexec the first failed rank is inferred from the order the links dropped")
    assert ei.value.rank == 2 and "SIGKILL" in str(ei.value), str(ei.value)
    assert res.failed_rank == 2
    assert elapsed < 10 + 3, f"job took {elapsed:.1f} s to end"   # + process start-up
    assert all(rc != 0 for rc in res.returncodes)
    if backend == "tcp":
        # every survivor raised PeerFailure naming rank 2, and reported it
        for r in (0, 1, 3):
            assert "PeerFailure: rank 2 failed" in res.errors[r], res.errors
    assert_nothing_left(marker)


@pytest.mark.parametrize("backend", BACKENDS)
def test_exception_in_one_rank_fails_the_job_naming_it(backend, marker):
    with pytest.raises(PeerFailure, match="rank 1 failed.*deliberate failure on rank 1") as ei:
        run(scenarios.raise_on, 3, 1, marker, backend=backend, timeout=60)
    if backend == "tcp":
        res = ei.value.result
        assert "ValueError: deliberate failure" in res.errors[1]
        for r in (0, 2):
            assert "PeerFailure: rank 1 failed: ValueError: deliberate failure on rank 1" in res.errors[r]
    assert_nothing_left(marker)


def test_job_timeout_kills_everything(marker):
    t = time.monotonic()
    with pytest.raises(CommTimeout, match="timed out after 1 s"):
        run(scenarios.sleepy, 2, 60, marker, timeout=1.0, grace=0.5)
    assert time.monotonic() - t < 8
    assert_nothing_left(marker)


def test_bad_arguments():
    with pytest.raises(ConfigError, match="at least 1"):
        launch(["true"], 0)
    with pytest.raises(ConfigError, match="module-level"):
        run(lambda c: 1, 2)
    with pytest.raises(ConfigError, match="hosts has 1 entries for 2 ranks"):
        launch(["true"], 2, hosts=[RankHost()])


def test_host_prefix_hook_places_ranks():
    """The namespace hook: each rank's command gets its own prefix and bind address (here an
    ``env`` prefix stands in for ``ip netns exec NS``, which needs root)."""
    hosts = [RankHost(prefix=["env", f"CL_WHERE=h{r}"], bind="127.0.0.1") for r in range(2)]
    res = launch([sys.executable, "-c", "import os,sys; sys.exit(0 if os.environ['CL_WHERE'] == "
                  "'h' + os.environ['CLUSTERLAB_RANK'] else 3)"], 2, hosts=hosts, timeout=30)
    assert res.ok, res


SECRET_CHECK = (
    "import os, sys\n"
    "secret = os.read(int(os.environ['CLUSTERLAB_SECRET_FD']), 4096).decode()\n"
    "mine = open('/proc/self/cmdline', 'rb').read()\n"
    "parent = open(f'/proc/{os.getppid()}/cmdline', 'rb').read()\n"
    "environ = open('/proc/self/environ', 'rb').read()\n"
    "print(mine.replace(b'\\0', b' ').decode())\n"
    "sys.exit(0 if len(secret) == 64 and secret.encode() not in mine + parent + environ else 4)\n")


def test_secret_not_on_command_line_nor_in_the_environment(marker):
    """The rank reads the secret from the pipe the launcher hands it (CLUSTERLAB_SECRET_FD),
    and neither its command line, its launcher's, nor its environment carries it (exit 4 if
    they do; an exception if there is no pipe)."""
    res = launch([sys.executable, "-c", SECRET_CHECK, marker], 1, timeout=30)
    assert res.returncodes == [0], res


SECRET_TRACES = (
    "import json, os, subprocess, sys\n"
    "fd = int(os.environ['CLUSTERLAB_SECRET_FD'])\n"
    "from clusterlab.comm import world\n"
    "c = world()\n"
    "environ = open('/proc/self/environ', 'rb').read()\n"
    "child = subprocess.run(['env'], capture_output=True, text=True).stdout\n"
    "try:\n"
    "    os.fstat(fd)\n"
    "    fd_open = True\n"
    "except OSError:\n"
    "    fd_open = False\n"
    "found = {'name_in_proc_environ': b'CLUSTERLAB_SECRET=' in environ, 'fd_open': fd_open,\n"
    "         'os_environ': 'CLUSTERLAB_SECRET' in os.environ or 'CLUSTERLAB_SECRET_FD' in os.environ,\n"
    "         'child_env': 'CLUSTERLAB_SECRET' in child}\n"
    "print(json.dumps(found), flush=True)\n"
    "sys.exit(5 if any(found.values()) else 0)\n")


def test_secret_removed_from_the_rank_environment(marker):
    """docs/comm.md: the secret never is in the rank's environment, and world() closes the
    pipe it came through: nothing of it in os.environ, /proc/PID/environ or a child's
    environment (exit 5 otherwise)."""
    res = launch([sys.executable, "-c", SECRET_TRACES, marker], 2, timeout=60)
    assert res.returncodes == [0, 0], res


def _cli(args, marker, **kw):
    return subprocess.Popen([sys.executable, "-m", "clusterlab", "run", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def test_cli_runs_a_script_and_reports_a_death(tmp_path, marker):
    prog = tmp_path / "prog.py"
    prog.write_text(
        "import os, signal, sys\n"
        "from clusterlab.comm import world\n"
        "c = world()\n"
        "peer = (c.rank + 1) % c.size\n"
        "for i in range(50):\n"
        "    c.send(peer, b'x'); c.recv((c.rank - 1) % c.size)\n"
        "    if sys.argv[1] == 'kill' and c.rank == 1 and i == 10: os.kill(os.getpid(), signal.SIGKILL)\n"
        "sys.stdout.write(f'rank {c.rank} ok\\n'); sys.stdout.flush()\n")
    p = _cli(["-n", "3", "--rto-min", "5ms", "--", "python", str(prog), "ok", marker], marker)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert sorted(out.split("\n")[:3]) == ["rank 0 ok", "rank 1 ok", "rank 2 ok"]
    t = time.monotonic()
    p = _cli(["-n", "3", "--", "python", str(prog), "kill", marker], marker)
    out, err = p.communicate(timeout=60)
    assert p.returncode != 0 and time.monotonic() - t < 13
    assert "clusterlab run: rank 1 was killed by SIGKILL" in err
    assert err.count("PeerFailure: rank 1 failed") == 2, err
    assert_nothing_left(marker)


def test_cli_refuses_impossible_settings():
    p = subprocess.run([sys.executable, "-m", "clusterlab", "run", "-n", "2", "--rto-min", "300ms", "--", "true"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "TCP_RTO_MIN_US accepts (5ms..200ms)" in p.stderr and "net.ipv4.tcp_rto_min_us" in p.stderr


def test_ctrl_c_is_forwarded_and_everything_stops(tmp_path, marker):
    prog = tmp_path / "wait.py"
    prog.write_text("import sys, time\nfrom clusterlab.comm import world\nc = world()\nsys.stdout.write('up\\n'); sys.stdout.flush()\n"
                    "time.sleep(60)\n")
    p = _cli(["-n", "3", "--", "python", str(prog), marker], marker)
    ups = 0
    deadline = time.monotonic() + 30
    while ups < 3 and time.monotonic() < deadline:
        if p.stdout.readline().startswith("up"):
            ups += 1
    assert ups == 3
    t = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=20)
    assert p.returncode == 130 and time.monotonic() - t < 8, err
    assert "interrupted by SIGINT" in err
    assert_nothing_left(marker)


def test_killing_the_launcher_leaves_no_rank_behind(tmp_path, marker):
    prog = tmp_path / "wait.py"
    prog.write_text("import sys, time\nfrom clusterlab.comm import world\nc = world()\nsys.stdout.write('up\\n'); sys.stdout.flush()\n"
                    "time.sleep(60)\n")
    p = _cli(["-n", "2", "--", "python", str(prog), marker], marker)
    for _ in range(2):
        assert p.stdout.readline().startswith("up")
    assert len(processes_with(marker)) >= 2
    os.kill(p.pid, signal.SIGKILL)
    p.wait(10)
    assert_nothing_left(marker, within=5)


# --- the rendezvous under idle and garbage connections ------------------------------------------

GATED = (
    "import os, pathlib, sys, time\n"
    "d, mode = pathlib.Path(sys.argv[1]), sys.argv[2]\n"
    "r = int(os.environ['CLUSTERLAB_RANK'])\n"
    "if r == 0:\n"
    "    (d / 'rdv.tmp').write_text(os.environ['CLUSTERLAB_RENDEZVOUS']); (d / 'rdv.tmp').rename(d / 'rdv')\n"
    "while not (d / 'go').exists(): time.sleep(0.02)\n"
    "if mode == 'die' and r == 1: sys.exit(3)\n"
    "from clusterlab.comm import world\n"
    "c = world()\n"
    "c.barrier()\n")


def _pester(rdv: str) -> list[socket.socket]:
    """18 idle connections, garbage, a HELLO that then idles, and a wrong MAC, all at once."""
    host, port = rdv.rsplit(":", 1)
    addr = (host, int(port))
    socks = [socket.create_connection(addr, timeout=5) for _ in range(18)]
    for junk in (b"GET / HTTP/1.0\r\n\r\n", os.urandom(200), b"CLBH" + os.urandom(60), b"\0" * 44):
        s = socket.create_connection(addr, timeout=5)
        s.sendall(junk)
        socks.append(s)
    hello = handshake._HELLO.pack(handshake.HS_MAGIC, handshake.HS_VERSION, 0, handshake.LAUNCHER, os.urandom(32))
    s = socket.create_connection(addr, timeout=5)
    s.sendall(hello)  # then nothing: must not hold rank 0's place
    socks.append(s)
    s = socket.create_connection(addr, timeout=5)
    s.sendall(handshake._HELLO.pack(handshake.HS_MAGIC, handshake.HS_VERSION, 1, handshake.LAUNCHER, os.urandom(32)))
    s.recv(handshake._REPLY.size)
    s.sendall(b"\1" * 32)  # a MAC made without the secret
    socks.append(s)
    return socks


def _gated_job(tmp_path, marker, mode):
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("res", launch(
        [sys.executable, "-c", GATED, str(tmp_path), mode, marker], 3, timeout=60, setup_timeout=30)))
    t.start()
    deadline = time.monotonic() + 30
    while not (tmp_path / "rdv").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    socks = _pester((tmp_path / "rdv").read_text())
    go = time.monotonic()
    (tmp_path / "go").touch()
    t.join(60)
    took = time.monotonic() - go
    for s in socks:
        s.close()
    assert not t.is_alive()
    return out["res"], took


def test_idle_and_garbage_connections_do_not_delay_the_set_up(tmp_path, marker):
    """Handshakes run beside each other in the launcher's loop, each with its own deadline:
    18 idle connections, garbage and a half-finished handshake cost the job nothing (the old
    serial handshake waited 5 s for each, and a 2-second job failed after 70 s)."""
    res, took = _gated_job(tmp_path, marker, "ok")
    assert res.ok, res
    assert took < 10, f"the job took {took:.1f} s after its ranks were let go"
    assert_nothing_left(marker)


def test_rank_death_during_set_up_is_named_despite_idle_connections(tmp_path, marker):
    """Rank 1 exits before joining while idle and garbage connections are pending: the others
    are told at once, exit non-zero, and the job names rank 1 within seconds."""
    res, took = _gated_job(tmp_path, marker, "die")
    assert res.failed_rank == 1 and "rank 1 exited with status 3" in res.reason, res
    assert res.returncodes[1] == 3 and res.returncodes[0] != 0 and res.returncodes[2] != 0, res
    assert "PeerFailure: rank 1 failed" in res.errors[0] and "PeerFailure: rank 1 failed" in res.errors[2], res
    assert took < 8, f"the death was named {took:.1f} s after the ranks were let go"
    assert_nothing_left(marker)


# --- robustness: one line, exit status 2 ---------------------------------------------------------

def _one_line_error(p, *needles):
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def _cli_run(args, **kw):
    return subprocess.run([sys.executable, "-m", "clusterlab", *args], capture_output=True, text=True,
                          timeout=120, **kw)


@pytest.mark.parametrize("kind, why", [("missing", "no such file"), ("not-executable", "not an executable file"),
                                       ("garbage", "Exec format error")])
def test_cli_command_that_cannot_run_is_one_line(tmp_path, kind, why):
    """`run -n 2 -- /nonexistent`, a file without execute permission, and one the kernel
    cannot exec (ENOEXEC): one line naming the command, exit 2, not a traceback."""
    command = tmp_path / "prog"
    if kind != "missing":
        command.write_bytes(b"\x7fELF-not-really" + bytes(range(64)))
        command.chmod(0o755 if kind == "garbage" else 0o644)
    _one_line_error(_cli_run(["run", "-n", "2", "--", str(command)]), str(command), why)


FORK_FAILS = (
    "import errno, subprocess, sys\n"
    "real, calls = subprocess.Popen, []\n"
    "def popen(*a, **k):\n"
    "    calls.append(1)\n"
    "    if len(calls) == 2: raise BlockingIOError(errno.EAGAIN, 'Resource temporarily unavailable')\n"
    "    return real(*a, **k)\n"
    "subprocess.Popen = popen\n"
    "from clusterlab.cli import main\n"
    "main(sys.argv[1:])\n")


def test_fork_failure_is_one_line_and_leaves_nothing(marker):
    """The second rank cannot be forked (EAGAIN): one line naming it, exit 2, and the first
    rank (already started) is gone."""
    p = subprocess.run([sys.executable, "-c", FORK_FAILS, "run", "-n", "3", "--", "python", "-c",
                        "import time; time.sleep(30)", marker], capture_output=True, text=True, timeout=60)
    _one_line_error(p, "cannot start rank 1", "fork failed", "Resource temporarily unavailable")
    assert_nothing_left(marker)


def test_launch_refuses_more_ranks_than_the_machine_can_start(tmp_path, monkeypatch):
    """An injected limit (ranks needing 1 TiB each), so that nothing is ever started: the
    refusal names the limit, in ``launch`` itself."""
    from clusterlab.cluster import supervisor

    monkeypatch.setattr(supervisor, "RANK_MEMORY", 1 << 40)
    with pytest.raises(ConfigError, match=r"2 ranks are more than this machine can start \(at most 0\): "
                                          r"memory: each rank needs about 1048576 MiB"):
        launch(["true"], 2)


def _low_nofile():
    resource.setrlimit(resource.RLIMIT_NOFILE, (100, 100))


def test_mine_nodes_gets_the_rank_limit(tmp_path):
    """Every caller of launch() gets the refusal, e.g. `mine --nodes` (the limit is made small
    with `ulimit -n 100`, so nothing starts whatever the machine's memory)."""
    data = tmp_path / "d.dat"
    data.write_text("1 2\n2 3\n")
    p = subprocess.run([sys.executable, "-m", "clusterlab", "mine", str(data), "--nodes", "200", "-s", "0.5"],
                       capture_output=True, text=True, timeout=60, preexec_fn=_low_nofile)
    _one_line_error(p, "200 ranks are more than this machine can start", "RLIMIT_NOFILE (ulimit -n) is 100")


def test_rank_limit_names_the_open_file_limit():
    """With `ulimit -n 100`, 200 ranks cannot hold their mesh sockets: the message says so."""
    p = subprocess.run([sys.executable, "-m", "clusterlab", "run", "-n", "200", "--", "true"],
                       capture_output=True, text=True, timeout=60, preexec_fn=_low_nofile)
    _one_line_error(p, "200 ranks are more than this machine can start", "RLIMIT_NOFILE (ulimit -n) is 100")


USER_ERROR = (
    "import sys\n"
    "from clusterlab.comm import world\n"
    "from clusterlab.errors import ConfigError\n"
    "c = world()\n"
    "if sys.argv[1] == 'all' or c.rank == 1:\n"
    "    raise ConfigError('CLUSTERLAB_COSTMODEL=/nonexistent.json: cannot read cost model')\n"
    "c.barrier()\n")


@pytest.mark.parametrize("which", ["all", "one"])
def test_user_error_in_ranks_is_one_line(tmp_path, marker, which):
    """A ConfigError in one rank (or every rank) is not a bug: no rank prints a traceback, the
    job prints one line naming a rank and the error, exit 2."""
    prog = tmp_path / "prog.py"
    prog.write_text(USER_ERROR)
    p = _cli_run(["run", "-n", "3", "--", "python", str(prog), which, marker])
    _one_line_error(p, "clusterlab run: rank", "failed: ConfigError: CLUSTERLAB_COSTMODEL=/nonexistent.json")
    if which == "one":
        assert "rank 1 failed" in p.stderr
    assert_nothing_left(marker)


def test_missing_cost_model_under_mine_nodes_is_one_line(tmp_path):
    """The issue's example: every rank of `mine --nodes 2` fails to read CLUSTERLAB_COSTMODEL."""
    data = tmp_path / "d.dat"
    data.write_text("1 2 3\n1 2\n2 3\n1 3\n")
    p = _cli_run(["mine", str(data), "--nodes", "2", "-s", "0.5"],
                 env=dict(os.environ, CLUSTERLAB_COSTMODEL=str(tmp_path / "none.json")))
    _one_line_error(p, "rank", "ConfigError", "CLUSTERLAB_COSTMODEL=")


def test_a_result_still_in_flight_when_the_rank_exits_is_read():
    """A rank's last words can arrive after its process ended (the kernel sends a closed socket's
    queued bytes: a 100-rank job's result on a busy, dilated testbed link lost rank 0's result).
    Here a fake rank sends half its result frame, the launcher reads what arrived (as it does
    when the process exits), the rest comes 0.5 s later: read_to_end must assemble it."""
    from clusterlab.cluster.checkin import Rendezvous
    from clusterlab.cluster.supervisor import Supervisor
    from clusterlab.rendezvous import contract

    secret, body = os.urandom(32), os.urandom(300_000)
    frame = contract.result_frame(0, body, contract.RESULT_BYTES_TAG)
    with Supervisor(timeout=30) as sup:
        rdv = Rendezvous(sup, 1, secret)
        half = threading.Event()

        def rank():
            with socket.create_connection(rdv.address) as s:
                handshake.connect(s, secret, 0, handshake.LAUNCHER, 5.0)
                s.sendall(frame[: len(frame) // 2])
                half.set()
                time.sleep(0.5)
                s.sendall(frame[len(frame) // 2:])

        t = threading.Thread(target=rank)
        t.start()
        end = time.monotonic() + 10
        while not half.is_set() and time.monotonic() < end:
            sup.step(max_wait=0.05)
        time.sleep(0.1)
        rdv.drain(0)  # what had arrived when the process "ended"
        assert rdv.links[0].result is None
        rdv.read_to_end(5.0)
        t.join(5)
        assert rdv.links[0].result == body and not rdv.connected
        rdv.close()
