"""Where a run was made, for the records every run directory keeps (``meta.json`` of a study,
of ``clusterlab run --run-dir``): the machine, its load, the clusterlab version and git revision.
"""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
from pathlib import Path

from clusterlab.monitor.procfs import sched_autogroup


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None when /proc does not say)."""
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except (OSError, ValueError):
        return None


def git_revision() -> dict:
    """The commit of the clusterlab source in use, and whether it had local changes."""
    src = Path(__file__).resolve().parents[1]
    try:
        rev = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=10)
        if rev.returncode != 0:
            return {"revision": None}
        dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
        return {"revision": rev.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.TimeoutExpired):
        return {"revision": None}


def machine() -> dict:
    """This machine: host, kernel, CPUs and their model, memory, affinity, autogroup."""
    u = platform.uname()
    out = {"host": u.node, "system": u.system, "kernel": u.release, "machine": u.machine,
           "cpus": os.cpu_count(), "python": platform.python_version()}
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    out["cpu_model"] = line.split(":", 1)[1].strip()
                    break
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/meminfo") as f:
            out["memory_bytes"] = int(f.readline().split()[1]) * 1024
    with contextlib.suppress(AttributeError):
        out["affinity"] = len(os.sched_getaffinity(0))
    # With autogroup on, "nice 19" background work takes an equal share beside this run.
    out["sched_autogroup"] = sched_autogroup()
    return out


def version() -> str:
    """clusterlab's version (\"unknown\" without the built core)."""
    try:
        from clusterlab import __version__

        return __version__
    except ImportError:  # the Rust core is not built: still record the runs
        return "unknown"
