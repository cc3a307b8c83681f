"""Leave nothing behind (Mininet's ``mn -c``): kill every process inside a clusterlab
namespace, delete those namespaces (which deletes their veths and bridges), remove stray
``clab*`` interfaces in the root namespace and the state files. Touches nothing else: a
namespace counts only if its name starts with ``clab-``, a process only if its network
namespace is one of those, an interface only if its name starts with ``clab``.

Works after a SIGKILL of the driver because everything it needs is in /run/netns and /proc.

>>> ours("clab-t1-h0"), ours("clab-t1-h0", "t1"), ours("clab-t10-h0", "t1"), ours("docker-x")
(True, True, False, False)
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

from clusterlab.cluster.testbed.node import NETNS_DIR
from clusterlab.cluster.testbed.storage import clean_storage, storage_testbeds
from clusterlab.cluster.testbed.topo import PREFIX

STATE_DIR = "/run/clusterlab/testbed"


def ours(ns: str, testbed: str | None = None) -> bool:
    """Is namespace ``ns`` one of ours (of testbed ``testbed`` when given)?"""
    if testbed is None:
        return ns.startswith(PREFIX + "-")
    return ns.startswith(f"{PREFIX}-{testbed}-")


def namespaces(testbed: str | None = None) -> list[str]:
    """Our namespaces now present (of one testbed, or all)."""
    try:
        names = os.listdir(NETNS_DIR)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if ours(n, testbed))


def _ns_ids(nss: list[str]) -> dict[tuple[int, int], str]:
    ids = {}
    for ns in nss:
        with contextlib.suppress(OSError):
            st = os.stat(os.path.join(NETNS_DIR, ns))
            ids[(st.st_dev, st.st_ino)] = ns
    return ids


def pids_in(nss: list[str]) -> dict[int, str]:
    """Processes whose network namespace is one of ``nss``: pid -> namespace."""
    ids = _ns_ids(nss)
    found = {}
    if not ids:
        return found
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        with contextlib.suppress(OSError):
            st = os.stat(f"/proc/{entry}/ns/net")
            ns = ids.get((st.st_dev, st.st_ino))
            if ns is not None:
                found[int(entry)] = ns
    return found


def kill_inside(nss: list[str], grace: float = 0.5) -> int:
    """SIGTERM then SIGKILL every process in ``nss``. Returns how many were signalled."""
    pids = pids_in(nss)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while pids and time.monotonic() < deadline:
        time.sleep(0.05)
        pids = {p: n for p, n in pids.items() if os.path.exists(f"/proc/{p}")}
    for pid in pids_in(nss):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)


def root_links() -> list[str]:
    """Interfaces named ``clab*`` in the root namespace (the testbed creates none; a foreign
    tool or an older run might have)."""
    try:
        out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    names = []
    for line in out.splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            name = parts[1].strip().split("@")[0]
            if name.startswith(PREFIX):
                names.append(name)
    return names


def _files(suffix: str, testbed: str | None) -> list[str]:
    try:
        names = os.listdir(STATE_DIR)
    except FileNotFoundError:
        return []
    return [os.path.join(STATE_DIR, n) for n in names
            if n.endswith(suffix) and (testbed is None or n == f"{testbed}{suffix}")]


def state_files(testbed: str | None = None) -> list[str]:
    return _files(".json", testbed)


def trace_files(testbed: str | None = None) -> list[str]:
    """The WAN lines' histogram files (``<name>.wan.trace``, see ``wanline``) and the ATM
    switches' port counts (``<name>.atm.trace``, see ``atmswitch``)."""
    return _files(".wan.trace", testbed) + _files(".atm.trace", testbed)


def clean(testbed: str | None = None) -> dict:
    """Remove testbed ``testbed`` (or every clusterlab testbed). Idempotent.

    Returns what was removed: ``{"namespaces": n, "processes": n, "links": n}``.
    """
    # The storage host's tgtd first: it ignores SIGTERM, and its LUN files live outside the namespaces.
    for name in storage_testbeds() if testbed is None else [testbed]:
        clean_storage(name)
    nss = namespaces(testbed)
    killed = kill_inside(nss)
    if nss:
        batch = "".join(f"netns del {ns}\n" for ns in nss)
        subprocess.run(["ip", "-force", "-batch", "-"], input=batch, capture_output=True, text=True, timeout=120)
        # A namespace whose bind mount survived (e.g. busy) gets one more direct try.
        for ns in namespaces(testbed):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
    links = root_links() if testbed is None else [n for n in root_links() if n.startswith(PREFIX + testbed)]
    for name in links:
        subprocess.run(["ip", "link", "del", name], capture_output=True, timeout=30)
    for f in state_files(testbed) + trace_files(testbed):
        with contextlib.suppress(OSError):
            os.unlink(f)
    return {"namespaces": len(nss), "processes": killed, "links": len(links)}


def leftovers(testbed: str | None = None) -> dict:
    """What of ours still exists (empty lists when clean)."""
    nss = namespaces(testbed)
    return {"namespaces": nss, "processes": sorted(pids_in(nss)), "links": root_links(),
            "state_files": state_files(testbed) + trace_files(testbed)}


# Aliases that do not collide with the ``clean`` submodule name when imported elsewhere.
clean_testbed = clean
our_namespaces = namespaces
