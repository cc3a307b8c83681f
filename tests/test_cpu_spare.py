"""Spare CPU counts niced work only where the scheduler makes it yield (autogroup off)."""

from clusterlab.experiments import runner
from clusterlab.monitor import procfs

STAT = "cpu 100 40 20 300 10 0 5 0"


def test_niced_work_is_spare_only_without_autogroup(monkeypatch):
    c = procfs.parse_cpu(STAT)
    monkeypatch.setattr(procfs, "sched_autogroup", lambda: False)
    assert procfs.cpu_spare(c) == 300 + 10 + 40
    monkeypatch.setattr(procfs, "sched_autogroup", lambda: True)
    assert procfs.cpu_spare(c) == 300 + 10


def test_autogroup_state_is_read_and_recorded():
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            on = f.read().strip() != "0"
    except OSError:  # a kernel built without autogroup
        on = False
    assert procfs.sched_autogroup() is on
    assert runner.machine()["sched_autogroup"] is on
