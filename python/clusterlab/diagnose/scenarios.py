"""The corpus: runs with one known cause injected each, to check that ``diagnose`` names it first.

Quick scenarios run 2 ranks on the loopback mesh (no root, a few seconds each); testbed ones
run seed 000's all-to-all broadcast on a namespace testbed (root, a few seconds each).
This machine's own load is no injected cause: the rules charge the slowdown every rank saw
apart (``machine_load``, flagged by the fidelity check), so it does not change what is named. Each ``Scenario.run(workdir)``
records a run directory and returns it; ``named_first(result)`` is what the diagnosis names
first. ``tests/test_diagnose_scenarios.py`` runs them; ``bench/diagnose_corpus.py`` runs all
and keeps a record.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

from clusterlab.diagnose.record import record_mining


@dataclasses.dataclass
class Scenario:
    name: str
    cause: str  # the cause the diagnosis must name first
    injected: str  # what was done, in words
    run: Callable[[str], str]
    root: bool = False
    ci: bool = True  # in the test suite (False: only bench/diagnose_corpus.py runs it, it is not reproduced yet)


def named_first(job_diagnosis: dict) -> str | None:
    """The cause a diagnosis names first: the launch when it dwarfs the job, else the dominant loss."""
    if job_diagnosis.get("launch_first"):
        return "launch"
    d = job_diagnosis.get("dominant")
    return d["cause"] if d else None


def _write(path: str, rows) -> str:
    with open(path, "w") as f:
        for r in rows:
            f.write(" ".join(map(str, r)) + "\n")
    return path


def _quest(workdir: str, name: str, items: int) -> str:
    from clusterlab.data.generate import generate_file

    path = os.path.join(workdir, f"{name}-{items}.dat")
    if not os.path.exists(path):
        generate_file(path, name, items=items, seed=0)
    return path


def skewed_partition(workdir: str) -> str:
    """Rank 0's half of the file: short transactions of rare items (nothing left after pass 1);
    rank 1's: long transactions of 40 common items (every pass counts them). Count Distribution
    counts each rank's own transactions, so rank 1 computes every pass alone."""
    rng = np.random.default_rng(0)
    n = 10000
    rows = [sorted(1000 + rng.choice(9000, 3, replace=False)) for _ in range(n * 5 // 2)]
    rows += [sorted(rng.choice(40, 14, replace=False)) for _ in range(n)]
    path = _write(os.path.join(workdir, "skewed.dat"), rows)
    d = os.path.join(workdir, "skewed_partition")
    record_mining(d, path, algorithm="cd", min_support=0.01)
    return d


CPU_CGROUP_V1 = "/sys/fs/cgroup/cpu"
CPU_CGROUP_V2 = "/sys/fs/cgroup"
STARVED_SHARE = 0.1  # of one CPU: well below what other users' load leaves a rank on this 2-CPU machine


def _cpu_cgroup(name: str, share: float) -> str:
    """A CPU cgroup of its own (root) limited to ``share`` of one CPU; its directory."""
    period = 100_000
    if os.path.exists(os.path.join(CPU_CGROUP_V1, "cpu.cfs_quota_us")):
        d = os.path.join(CPU_CGROUP_V1, name)
        os.makedirs(d)
        with open(os.path.join(d, "cpu.cfs_period_us"), "w") as f:
            f.write(str(period))
        with open(os.path.join(d, "cpu.cfs_quota_us"), "w") as f:
            f.write(str(int(share * period)))
        return d
    with open(os.path.join(CPU_CGROUP_V2, "cgroup.controllers")) as f:
        if "cpu" not in f.read().split():
            raise RuntimeError("no CPU cgroup controller (cgroup v1 cpu or v2 cpu.max) on this machine")
    d = os.path.join(CPU_CGROUP_V2, name)
    os.makedirs(d)
    with open(os.path.join(d, "cpu.max"), "w") as f:
        f.write(f"{int(share * period)} {period}")
    return d


def starved_rank_job(workdir: str, name: str, starved: bool) -> str:
    """The CD job of ``cpu_starved``: rank 1 in a CPU cgroup limited to ``STARVED_SHARE`` of one
    CPU when ``starved`` (root), else both ranks as usual."""
    path = _quest(workdir, "T10I4D20K", 500)
    d = os.path.join(workdir, name)
    if not starved:
        record_mining(d, path, algorithm="cd", min_support=0.001)
        return d
    from clusterlab.cluster import Local

    cg = _cpu_cgroup(f"clusterlab-starved-{os.getpid()}-{name}", STARVED_SHARE)
    try:
        prefix = ["sh", "-c", 'echo $$ > "$0" && exec "$@"', os.path.join(cg, "cgroup.procs")]
        record_mining(d, path, algorithm="cd", min_support=0.001, cluster=Local(prefix={1: prefix}))
    finally:
        for _ in range(50):  # the rank has exited; its cgroup goes once the kernel has let go of it
            try:
                os.rmdir(cg)
                break
            except OSError:
                time.sleep(0.1)
    return d


def cpu_starved(workdir: str) -> str:
    """One CPU-starved rank: rank 1 in a CPU cgroup limited to 10% of one CPU (the share a busy
    machine or a co-scheduled job leaves it); rank 0 free. Count Distribution waits for rank 1
    at every pass's all-reduce."""
    return starved_rank_job(workdir, "cpu_starved", starved=True)


PER_CALL_PROGRAM = """import numpy as np
from clusterlab.comm import world

c = world()
x = np.ones(64)
for _ in range(int(__import__("sys").argv[1])):
    x = c.allreduce(x) / c.size
c.close()
"""


def program_run(workdir: str, name: str, connections: str, calls: int = 600) -> str:
    """``clusterlab run -n 2 --run-dir`` of a program of ``calls`` small all-reduces, with
    ``$CLUSTERLAB_CONNECTIONS`` set to ``connections``."""
    prog = os.path.join(workdir, "allreduce_loop.py")
    with open(prog, "w") as f:
        f.write(PER_CALL_PROGRAM)
    d = os.path.join(workdir, name)
    env = {**os.environ, "CLUSTERLAB_CONNECTIONS": connections}
    argv = [sys.executable, "-m", "clusterlab", "run", "-n", "2", "--run-dir", d, "--", sys.executable, prog,
            str(calls)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()[-300:]}")
    return d


def per_call_connections(workdir: str) -> str:
    """600 small all-reduces, each over connections set up for that call (seed 002's switched
    virtual circuits: ``CLUSTERLAB_CONNECTIONS=per_call``)."""
    return program_run(workdir, "per_call_connections", "per_call")


def tiny_buffers(workdir: str) -> str:
    """4 KiB socket buffers; pass 2 all-reduces a 2,800-item pair triangle (16 MB of 32-bit counts)."""
    from clusterlab.net.transport_config import TransportConfig

    rng = np.random.default_rng(1)
    path = _write(os.path.join(workdir, "wide.dat"), (sorted(rng.choice(2800, 8, replace=False)) for _ in range(4000)))
    d = os.path.join(workdir, "tiny_buffers")
    record_mining(d, path, min_support=0.0005, transport=TransportConfig(sndbuf="4KiB", rcvbuf="4KiB"))
    return d


def nagle(workdir: str) -> str:
    """TCP_NODELAY off: HPA's last, small blocks of each pass wait for a delayed ACK."""
    from clusterlab.net.transport_config import TransportConfig

    path = _quest(workdir, "T10I4D20K", 500)
    d = os.path.join(workdir, "nagle")
    record_mining(d, path, min_support=0.003, transport=TransportConfig(nodelay=False))
    return d


def tiny_job(workdir: str) -> str:
    """200 transactions on 2 ranks: starting and connecting the ranks is the run."""
    rng = np.random.default_rng(2)
    path = _write(os.path.join(workdir, "tiny.dat"), (sorted(rng.choice(50, 5, replace=False)) for _ in range(200)))
    d = os.path.join(workdir, "tiny_job")
    record_mining(d, path, min_support=0.05)
    return d


def _broadcast(workdir: str, name: str, *args: str) -> str:
    d = os.path.join(workdir, name)
    hosts = [] if "--hosts" in args else ["--hosts", "4"]
    argv = [sys.executable, "-m", "clusterlab", "bench", "broadcast", *hosts, "--size", "50KB", "--reps", "5",
            "--run-dir", d, *args]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()[-300:]}")
    return d


def incast(workdir: str) -> str:
    """8 hosts each send 50 KB to all others at once into 64 KB switch port buffers (7 x 50 KB
    arrive at each port together; at 4 hosts, 3 x 50 KB, the drops are mostly recovered within
    the schedule's own time and the median repetition may lose next to nothing)."""
    return _broadcast(workdir, "incast", *BROADCAST_ARGS["incast"])


def host_queue_drops(workdir: str) -> str:
    """A deep switch but host egress queues of 4 packets: the hosts drop their own bursts."""
    return _broadcast(workdir, "host_queue_drops", *BROADCAST_ARGS["host_queue_drops"])


def seed_era_backoff(workdir: str) -> str:
    """Seed 000's stack (no SACK/RACK/TLP) with MAX 60 s, 8 hosts and 10 KB port buffers (one
    jumbo frame): the senders' synchronised retransmissions collide again, one segment times out
    again and again, and its timer doubles (200, 400, 800 ms...)."""
    return _broadcast(workdir, "seed_era_backoff", *BROADCAST_ARGS["seed_era_backoff"])


def slow_link(workdir: str) -> str:
    """Host h3's link at a tenth of the others' 155 Mbit/s, port buffers deep enough (4 MB) that
    nothing is dropped: every transfer to and from h3 waits for its link."""
    return _broadcast(workdir, "slow_link", *BROADCAST_ARGS["slow_link"])


def lossy_link(workdir: str) -> str:
    """The atm switch with host h3's link losing 0.1% of its cells each way (a 9180-byte frame:
    17.5%; a repetition sends about 34 of them across that link, so one without a loss is rare,
    0.825^34 = 0.14%), port buffers deep enough (100000 cells) that the switch itself loses nothing."""
    return _broadcast(workdir, "lossy_link", *BROADCAST_ARGS["lossy_link"])


def wan(workdir: str) -> str:
    """Hosts h0, h1 in one site, h2, h3 in another, joined by a WAN line of 12 ms one way (155
    Mbit/s, deep queues: nothing dropped): half of every rank's exchange crosses it."""
    return _broadcast(workdir, "wan", *BROADCAST_ARGS["wan"])


STORAGE_DATA = "T10I4N1000D100K:20K"
STORAGE_BACKING_RATE = "2MB"  # bytes/s the target's backing store reads (and writes), all LUNs together


def storage_job(workdir: str, name: str, backing_rate: str = STORAGE_BACKING_RATE) -> str:
    """HPA on 2 hosts reading its partitions from the iSCSI target on a third (tgt, a file-backed
    LUN throttled to ``backing_rate``), rescanning them every pass as seed 001's did, and the same
    job on the local file right after (``compare_local``): a one-point study run."""
    from clusterlab.cluster import Testbed
    from clusterlab.cluster.testbed import StarTopo
    from clusterlab.experiments.runner import run_study
    from clusterlab.experiments.spec import Study
    from clusterlab.experiments.workloads.storage import mining_from_target

    d = os.path.join(workdir, name)
    study = Study(name="diagnose-" + name.replace("_", "-"), cluster=Testbed(StarTopo(hosts=3, rate="1Gbit", buffer="256KB"), ranks=2),
                  workload=mining_from_target(data=STORAGE_DATA, min_support=0.01, algorithm="hpa",
                                              backing_rate=backing_rate, compare_local=True, rescan=True),
                  repeat=1, warmup=0, monitor=True)
    run_study(study, d, cache_dir=os.path.join(workdir, "cache"))
    return d


def storage_reads(workdir: str) -> str:
    """HPA reading its data from an iSCSI target whose backing store gives 2 MB/s (a slow disk
    shared by the initiators), rescanning it every pass: the job waits for the target."""
    return storage_job(workdir, "storage_reads")


# The bench broadcast options of each testbed scenario (bench/diagnose_corpus.py reruns them with the fix).
BROADCAST_ARGS = {
    "incast": ["--hosts", "8", "--buffer", "64KB", "--rto-min", "200ms"],
    "host_queue_drops": ["--buffer", "4MB", "--host-queue", "4p", "--rto-min", "200ms"],
    "seed_era_backoff": ["--hosts", "8", "--buffer", "10KB", "--transport", "stack=seed-era,rto_min=200ms,rto_max=60s"],
    "slow_link": ["--buffer", "4MB", "--host-rate", "h3=15.5Mbit"],
    "lossy_link": ["--switch", "atm", "--rate", "155.52Mbit", "--buffer", "100000cells", "--loss", "h3:0.1%"],
    "wan": ["--buffer", "4MB", "--sites", "2+2", "--wan-rate", "155Mbit", "--wan-delay", "12ms", "--wan-queue", "4MB"],
}


SCENARIOS = [
    Scenario("skewed_partition", "skew", "rank 1 holds every long transaction (CD)", skewed_partition),
    Scenario("cpu_starved", "cpu_starvation", "rank 1 limited to 10% of a CPU (cgroup)", cpu_starved, root=True),
    Scenario("per_call_connections", "connection_setup", "600 all-reduces, connections=per_call",
             per_call_connections),
    Scenario("tiny_buffers", "window_limited", "sndbuf=rcvbuf=4KiB", tiny_buffers),
    Scenario("nagle", "nagle", "nodelay=off", nagle),
    Scenario("tiny_job", "launch", "200 transactions on 2 ranks", tiny_job),
    Scenario("incast", "incast_switch_drops", "8-host all-to-all into 64 KB port buffers", incast, root=True),
    Scenario("host_queue_drops", "host_queue_drops", "4-packet host queues", host_queue_drops, root=True),
    Scenario("slow_link", "slow_link", "h3's link at 15.5 Mbit/s, the others at 155 Mbit/s", slow_link, root=True),
    Scenario("lossy_link", "lossy_link", "atm switch, h3's link loses 0.1% of its cells", lossy_link, root=True),
    Scenario("storage_reads", "storage_reads", "HPA rescanning from an iSCSI target throttled to 2 MB/s",
             storage_reads, root=True),
    Scenario("wan", "wan_latency", "sites 2+2 joined by a 12 ms (one way) WAN", wan, root=True),
    Scenario("seed_era_backoff", "rto_backoff", "seed-era stack, MAX 60 s, 8 hosts, 10 KB port buffers",
             seed_era_backoff, root=True),
]
