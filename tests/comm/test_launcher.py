"""The local launcher: results, failures named within seconds, signals, nothing left behind."""

import os
import signal
import subprocess
import sys
import time

import pytest

from clusterlab.cluster.local import RankHost, launch, run
from clusterlab.comm import CommTimeout, PeerFailure
from clusterlab.errors import ConfigError
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
    assert ei.value.rank == 2 and "SIGKILL" in str(ei.value) or backend == "mpi"
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


def test_secret_not_on_command_line(marker):
    res = launch([sys.executable, "-c", "import os,sys; print(open('/proc/self/cmdline').read()); "
                  "sys.exit(0 if len(os.environ['CLUSTERLAB_SECRET']) == 64 else 4)", marker], 1, timeout=30)
    assert res.ok


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
