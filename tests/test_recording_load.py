"""The foreign CPU share of a compute replay's recording (``experiments.recording_load``): the
arithmetic from two snapshots, the file, the warning, and the report's line."""

import json
import os
import subprocess
import sys

from clusterlab.experiments import recording_load as rl
from clusterlab.report.study import noisy_recordings


def _snap(user=0, system=0, irq=0, softirq=0, steal=0, idle=0, wall=0.0, self_cpu=0.0, children_cpu=0.0, load1=None):
    return rl.Snapshot(ticks={"user": user, "nice": 0, "system": system, "idle": idle, "iowait": 0, "irq": irq,
                              "softirq": softirq, "steal": steal},
                       wall=wall, self_cpu=self_cpu, children_cpu=children_cpu, load1=load1)


def test_foreign_share_is_the_busy_cpu_the_job_did_not_use():
    before = _snap(user=100, system=50, idle=1000, wall=100.0, self_cpu=2.0, children_cpu=10.0, load1=0.3)
    # 10 s on 2 CPUs: busy 12 s (user 8, system 2, irq 1, softirq 0.5, steal 0.5), the job 9 s
    after = _snap(user=900, system=250, irq=100, softirq=50, steal=50, idle=1800, wall=110.0, self_cpu=3.0,
                  children_cpu=18.0, load1=2.4)
    m = rl.foreign_load(before, after, cpus=2, hz=100)
    assert m["machine_busy_cpu_s"] == 12.0
    assert m["job_cpu_s"] == 9.0
    assert m["foreign_cpu_s"] == 3.0
    assert m["foreign_cpu_share"] == 0.15  # 3 s of 10 s x 2 CPUs
    assert m["wall_s"] == 10.0 and m["cpus"] == 2
    assert (m["load_before"], m["load_after"]) == (0.3, 2.4)
    assert rl.is_noisy(m["foreign_cpu_share"])


def test_only_foreign_cpu_beyond_the_cores_the_ranks_left_idle_displaced_them():
    """One rank on two cores (the 10M seed000 recording beside a 4-host replay: 4.8 s of other
    work in 14.4 s) leaves a core to other work: not noisy. Four ranks on two cores: every
    foreign second displaced them. A rank whose threads kept more cores busy counts those."""
    before = _snap(wall=0.0)
    after = _snap(user=2043, idle=800, wall=14.39, children_cpu=15.66)
    one = rl.foreign_load(before, after, cpus=2, hz=100, ranks=1)
    assert one["foreign_cpu_share"] == 0.1657 and one["displaced_cpu_share"] == 0.0
    assert not rl.is_noisy(rl.noisy_share(one))
    four = rl.foreign_load(before, after, cpus=2, hz=100, ranks=4)
    assert four["displaced_cpu_share"] == four["foreign_cpu_share"] and rl.is_noisy(rl.noisy_share(four))
    # one rank whose counting threads kept 1.5 cores busy (21 CPU-s in 14 s) left 7 CPU-s: 10 s of
    # other work displaced it by 3 s
    busy_rank = rl.foreign_load(before, _snap(user=3100, wall=14.0, children_cpu=21.0), cpus=2, hz=100, ranks=1)
    assert busy_rank["foreign_cpu_s"] == 10.0 and busy_rank["displaced_cpu_share"] == round(3.0 / 28, 4)
    assert rl.noisy_share({"foreign_cpu_share": 0.2}) == 0.2 and rl.noisy_share(None) is None  # an older recording


def test_idle_ticks_do_not_count_and_small_negatives_clamp_to_zero():
    before = _snap(user=0, wall=0.0)
    # the job's rusage a little above the ticks (granularity): no foreign CPU, not negative
    after = _snap(user=400, idle=100_000, wall=5.0, children_cpu=4.02)
    m = rl.foreign_load(before, after, cpus=2, hz=100)
    assert m["foreign_cpu_s"] == 0.0 and m["foreign_cpu_share"] == 0.0
    assert not rl.is_noisy(m["foreign_cpu_share"])


def test_zero_wall_gives_zero_share():
    s = _snap(user=10, wall=1.0)
    assert rl.foreign_load(s, s, cpus=2, hz=100)["foreign_cpu_share"] == 0.0


def test_threshold_and_warning():
    assert rl.FOREIGN_CPU_WARN == 0.10
    assert not rl.is_noisy(0.10) and rl.is_noisy(0.11)
    assert not rl.is_noisy(None) and not rl.is_noisy(True)
    w = rl.warning(16, 0.4)
    assert "recording of 16 ranks: 40% of the machine's CPU went to other processes" in w
    assert "record on a quiet machine" in w


def test_reaped_children_count_as_the_job(tmp_path):
    """The ranks are children the launcher waits for: their CPU is in RUSAGE_CHILDREN, so a
    job alone on the machine is not foreign to itself."""
    before = rl.snapshot()
    subprocess.run([sys.executable, "-c", "import time\nt = time.process_time()\n"
                    "while time.process_time() - t < 0.3: pass"], check=True)
    after = rl.snapshot()
    assert after.children_cpu - before.children_cpu >= 0.25
    m = rl.foreign_load(before, after, os.cpu_count() or 1, os.sysconf("SC_CLK_TCK"))
    assert m["job_cpu_s"] >= 0.25 and m["machine_busy_cpu_s"] > 0
    assert 0.0 <= m["foreign_cpu_share"] <= 1.0


def test_file_round_trip(tmp_path):
    assert rl.read(tmp_path) is None  # an older recording: nothing said
    rl.write(tmp_path, {"foreign_cpu_share": 0.2, "wall_s": 3.0})
    assert json.loads((tmp_path / rl.RECORDING_FILE).read_text())["foreign_cpu_share"] == 0.2
    assert rl.read(tmp_path)["wall_s"] == 3.0
    assert [p.name for p in tmp_path.iterdir()] == [rl.RECORDING_FILE]  # no temporary left


def test_report_names_the_noisy_recordings_only():
    rows = [{"point": 0, "ranks": 16, "recording_foreign_cpu": 0.3}, {"point": 0, "ranks": 16, "recording_foreign_cpu": 0.3},
            {"point": 1, "ranks": 16, "recording_foreign_cpu": 0.3}, {"point": 2, "ranks": 4, "recording_foreign_cpu": 0.05}]
    line = noisy_recordings(rows, {"points": []})
    assert "noisy recordings" in line and "16 ranks: 30% of the machine (2 points)" in line
    assert "4 ranks" not in line
    # without a ranks column: the point's label
    assert "p-seven" in noisy_recordings([{"point": 7, "recording_foreign_cpu": 0.5}],
                                         {"points": [{"index": 7, "label": "p-seven"}]})
    # older runs (no field) and quiet recordings: nothing said
    assert noisy_recordings([{"point": 0, "ranks": 2}], {}) is None
    assert noisy_recordings([{"point": 0, "ranks": 2, "recording_foreign_cpu": None}], {}) is None
    assert noisy_recordings(rows[3:], {}) is None
