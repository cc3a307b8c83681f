"""What the diagnosis of a job needs beside the job's own records, observed around it: the
cluster it ran on (a testbed's rate, buffers and dilation), the TCP settings in force, the
machine's spare CPU over the job and its load average before and after. ``clusterlab mine
--nodes N`` wraps its job in :func:`observed` and keeps the facts in its summary, so that its
closing diagnosis (and ``clusterlab diagnose`` of the saved summary) can judge the run's fidelity.
"""

from __future__ import annotations

import contextlib
import os

MONITOR_INTERVAL = 0.1  # seconds between the testbed monitor's samples


def _cpu():
    from clusterlab.monitor.procfs import parse_cpu

    try:
        with open("/proc/stat") as f:
            return parse_cpu(f.read())
    except (OSError, ValueError):
        return None


def spare_share(before, after) -> float | None:
    """The share of this machine's CPU time between two ``parse_cpu`` readings that a run could
    have had (``procfs.cpu_spare``: idle, I/O wait, niced work); None when not told."""
    from clusterlab.monitor.procfs import cpu_spare, cpu_total

    if before is None or after is None:
        return None
    d = {k: after[k] - before[k] for k in after}
    total = cpu_total(d)
    return round(cpu_spare(d) / total, 3) if total > 0 else None


def _testbed_monitor(cluster):
    """The monitor of an attached testbed's hosts and switch ports, started (no packet capture);
    None elsewhere (a local run's fidelity is the machine's load, read without it)."""
    if getattr(cluster, "kind", None) != "testbed" or getattr(cluster, "topo", None) is not None:
        return None
    from clusterlab.monitor import Monitor

    return Monitor.for_testbed(cluster.testbed, MONITOR_INTERVAL, capture=False).start()


@contextlib.contextmanager
def observed(cluster, transport=None):
    """Yields a dict filled in when the block ends without an error: ``cluster`` (what
    ``cluster.record.cluster_info`` says: kind, and a testbed's rate, buffer, host queue,
    dilation), ``transport`` (the settings in force: ``transport``, else an attached testbed's),
    ``cpu_spare`` (this machine's over the block: a namespace testbed's hosts share its CPUs),
    ``machine`` (CPUs, load average before and after: the local fidelity check) and, on an
    attached testbed, ``monitor`` (``fidelity.monitor_facts`` of its hosts' and switch ports'
    samples over the block: spare CPU, link rate, drops)."""
    from clusterlab.cluster.record import _transport_in_force, cluster_info

    facts: dict = {}
    mon = _testbed_monitor(cluster)
    load0, cpu0 = os.getloadavg()[0], _cpu()
    try:
        yield facts
    finally:
        if mon is not None:
            mon.stop()
    spare = spare_share(cpu0, _cpu())
    if mon is not None and mon.error is None:
        from clusterlab.diagnose.fidelity import monitor_facts

        facts["monitor"] = monitor_facts(mon.table(), mon.meta)
    facts["cluster"] = cluster_info(cluster)
    facts["transport"] = {k: v for k, v in _transport_in_force(cluster, transport).items() if v is not None}
    if spare is not None:
        facts["cpu_spare"] = spare
    facts["machine"] = {"cpus": len(os.sched_getaffinity(0)),
                        "load_before_after": [round(load0, 2), round(os.getloadavg()[0], 2)]}
