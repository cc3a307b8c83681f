"""iSCSI initiator: open a LUN by portal, IQN and LUN number, move blocks, time sequential
loops. The work is in Rust over libiscsi (``clusterlab._core.IscsiLun``, GIL released);
libiscsi is loaded when the first LUN is opened, so only this says when it is missing.

A LUN opened in a thread that has entered a testbed host's namespace
(``clusterlab.net.netns.in_netns``) keeps that host's network: its socket belongs
to the namespace where it was created.

Example (needs a target, e.g. ``clusterlab.cluster.testbed.storage.IscsiTarget``)::

    with open_lun("10.0.0.3:3260", "iqn.2026-11.org.clusterlab:t1.lun0") as lun:
        w = lun.write_sequential(64 << 20, block=64 << 10)
        r = lun.read_sequential(64 << 20, block=64 << 10)
        print(w.mbps, r.mbps, r.bad_blocks)
"""

from __future__ import annotations

import dataclasses
import os
import socket

from clusterlab import _core
from clusterlab.errors import ConfigError


def available() -> str | None:
    """Why the initiator cannot run here (libiscsi missing), or None."""
    import ctypes.util

    if ctypes.util.find_library("iscsi") is None:
        return "needs libiscsi (Debian package libiscsi7 / libiscsi-dev; `make system-deps` as root)"
    return None


@dataclasses.dataclass(frozen=True)
class Transfer:
    """One timed sequential loop: ``nbytes`` in ``seconds``; ``bad_blocks``: read blocks that
    differ from what the write loop with the same seed wrote (0 for writes)."""

    nbytes: int
    seconds: float
    bad_blocks: int = 0

    @property
    def mbps(self) -> float:
        """Megabytes (10^6 bytes) per second."""
        return self.nbytes / self.seconds / 1e6 if self.seconds > 0 else float("inf")


def default_initiator_name() -> str:
    return f"iqn.2026-11.org.clusterlab:initiator.{socket.gethostname()}.{os.getpid()}"


class Lun:
    """An initiator logged in to one LUN over ``connections`` sessions (the block loops and
    ``read(..., block=)`` keep that many commands in flight, one per session). Blocks, offsets
    and sizes are bytes, multiples of ``block_length``. Use from one thread at a time."""

    def __init__(self, portal: str, target: str, lun: int = 1, initiator: str | None = None, timeout: int = 30,
                 connections: int = 1):
        if ":" not in portal:
            portal = f"{portal}:3260"
        self._lun = _core.IscsiLun(portal, target, int(lun), initiator or default_initiator_name(), int(timeout),
                                   int(connections))
        self.portal, self.target, self.lun = portal, target, lun

    @property
    def connections(self) -> int:
        return self._lun.connections

    @property
    def block_length(self) -> int:
        return self._lun.block_length

    @property
    def size(self) -> int:
        return self._lun.size

    def read(self, offset: int, length: int, block: int = 0) -> bytes:
        """``length`` bytes at ``offset``; ``block`` > 0: in commands of that many bytes striped
        over the sessions (0: as few commands as possible, one session)."""
        return self._lun.read(offset, length, block)

    def write(self, offset: int, data: bytes) -> None:
        self._lun.write(offset, data)

    def write_sequential(self, size: int, block: int = 64 << 10, offset: int = 0, seed: int = 0) -> Transfer:
        """bonnie-style block write: ``size`` bytes from ``offset`` in ``block``-byte commands."""
        n, secs = self._lun.write_sequential(offset, size, block, seed)
        return Transfer(n, secs)

    def read_sequential(self, size: int, block: int = 64 << 10, offset: int = 0, seed: int = 0) -> Transfer:
        """bonnie-style block read, each block checked against the pattern of ``seed``."""
        n, secs, bad = self._lun.read_sequential(offset, size, block, seed)
        return Transfer(n, secs, bad)

    def close(self) -> None:
        self._lun.close()

    def __enter__(self) -> Lun:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_lun(portal: str, target: str, lun: int = 1, initiator: str | None = None, timeout: int = 30,
             connections: int = 1) -> Lun:
    """Log in to ``target`` at ``portal`` and open LUN ``lun`` over ``connections`` sessions
    (raises OSError naming the step)."""
    if timeout < 1:
        raise ConfigError(f"timeout must be at least 1 s, got {timeout}")
    if not 1 <= connections <= 64:
        raise ConfigError(f"connections must be 1..64, got {connections}")
    return Lun(portal, target, lun, initiator, timeout, connections)


def local_sequential(path: str, size: int, block: int = 64 << 10, seed: int = 0) -> tuple[Transfer, Transfer]:
    """The same block loop on a local file (write with fsync, then read): the local baseline.

    The read may come from the page cache (bonnie++ avoids it with a file of twice RAM); the
    iSCSI target's file-backed LUNs use the same page cache, so the comparison is like for like.
    """
    n, secs, _ = _core.local_sequential(path, size, block, seed, True)
    w = Transfer(n, secs)
    n, secs, bad = _core.local_sequential(path, size, block, seed, False)
    return w, Transfer(n, secs, bad)
