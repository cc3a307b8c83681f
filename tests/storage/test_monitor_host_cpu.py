"""Per-host CPU of the monitor (procfs.TaskCpu): a thread's CPU is counted for the testbed
host whose network namespace it is in (root: a testbed)."""

from __future__ import annotations

import threading
import time

import pytest

from clusterlab.monitor.procfs import TaskCpu, parse_task_stat

from ..testbed.helpers import fresh_name, netns_unavailable


def _spin(seconds: float) -> None:
    """Use ``seconds`` of this thread's own CPU, however long that takes on a loaded machine."""
    t0 = time.thread_time()
    while time.thread_time() - t0 < seconds:  # a syscall: checked once per 100k additions
        sum(range(100_000))


@pytest.mark.root
def test_a_busy_thread_counts_for_its_host_and_not_for_another():
    if netns_unavailable():
        pytest.skip(netns_unavailable())
    from clusterlab.cluster.testbed import StarTopo, TestbedNetwork
    from clusterlab.net.netns import in_netns

    with TestbedNetwork(StarTopo(hosts=2), name=fresh_name()) as tb:
        cpu = TaskCpu({h.name: f"/run/netns/{h.ns}" for h in tb.hosts} | {"gone": "/nonexistent"})
        assert set(cpu.node_of.values()) == {"h0", "h1"}
        cpu.sample()
        spun, release = threading.Event(), threading.Event()

        def spin():
            # 0.3 s of this thread's own CPU (however long that takes on a loaded machine),
            # then stay alive (asleep) until sampled: an exited thread's time is not counted
            with in_netns(tb.host("h1").ns):
                _spin(0.3)
                spun.set()
                release.wait(30)

        t = threading.Thread(target=spin)
        t.start()
        try:
            assert spun.wait(60)
            got = cpu.sample()
        finally:
            release.set()
            t.join()
        user, system, waiting = got["h1"]
        assert 0.28 < user + system < 0.45, got  # the spinner's 0.3 s, by the scheduler's clock
        # Mostly user time; not 'user > system': without IRQ time accounting, softirq work of
        # other traffic that interrupts the spinner is charged to its system time (seen under load)
        assert user > 0.1 and waiting == 0, got
        assert sum(got["h0"][:2]) < 0.02, got  # nothing runs in h0


def test_parse_task_stat_survives_parentheses_in_the_name():
    assert parse_task_stat("7 (a) b) (c) S 1 7 7 0 -1 0 0 0 0 0 3 4 0 0") == ("S", 3, 4)


@pytest.mark.root
def test_a_thread_that_enters_a_host_brings_none_of_its_earlier_cpu():
    """A driver thread that worked elsewhere, then visits a host (in_netns), counts for that
    host only from then on (it used to bring its whole lifetime's CPU: a 900 % spike)."""
    if netns_unavailable():
        pytest.skip(netns_unavailable())
    from clusterlab.cluster.testbed import StarTopo, TestbedNetwork
    from clusterlab.net.netns import in_netns

    with TestbedNetwork(StarTopo(hosts=2), name=fresh_name()) as tb:
        cpu = TaskCpu({h.name: f"/run/netns/{h.ns}" for h in tb.hosts})
        entered, release = threading.Event(), threading.Event()

        def busy_then_visit():
            _spin(0.3)  # outside every host
            time.sleep(0.05)
            cpu.sample()  # the thread is older than this sample and in no host yet
            with in_netns(tb.host("h1").ns):
                entered.set()
                release.wait(30)

        t = threading.Thread(target=busy_then_visit)
        t.start()
        try:
            assert entered.wait(60)
            got = cpu.sample()
        finally:
            release.set()
            t.join()
        assert sum(got["h1"][:2]) < 0.05, got


def test_task_start_ticks_reads_field_22():
    from clusterlab.monitor.procfs import task_start_ticks

    assert task_start_ticks("9 (x (y)) R 1 9 9 0 -1 0 0 0 0 0 1 2 0 0 20 0 3 0 777 0 0") == 777
