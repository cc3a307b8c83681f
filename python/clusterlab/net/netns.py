"""Entering a network namespace from a thread (the primitive the testbed's hosts, the monitor and
the storage initiator share).

``in_netns`` moves only the calling *thread* into a namespace (setns on a thread is allowed
for network namespaces); sockets and /proc/thread-self/net files opened there stay bound to
that namespace after the thread moves back, which is how the monitor reads 100 namespaces
without starting a process per sample.

>>> with in_netns(None):
...     pass
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading

from clusterlab.errors import ClusterlabError

NETNS_DIR = "/run/netns"
CLONE_NEWNET = 0x40000000
_libc = None
_lock = threading.Lock()


class TestbedError(ClusterlabError):
    """The testbed could not be built, reached or removed (the message says which step)."""

    __test__ = False  # not a pytest class


def _setns(fd: int) -> None:
    global _libc
    with _lock:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise TestbedError(f"setns failed: {os.strerror(err)} (needs root)")


@contextlib.contextmanager
def in_netns(ns: str | None):
    """Run the block with this thread in namespace ``ns`` (None: stay where it is)."""
    if ns is None:
        yield
        return
    try:
        target = os.open(os.path.join(NETNS_DIR, ns), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise TestbedError(f"network namespace {ns} does not exist") from None
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        _setns(target)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(target)
        os.close(home)

