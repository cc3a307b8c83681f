"""A network interface's flags and address by ioctl (``SIOCGIFFLAGS``, ``SIOCGIFADDR``), in this
process's namespace or in another one: what a program on that host sees.

>>> import socket
>>> with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
...     bool(flags(s, "lo") & IFF_LOOPBACK)
True
"""

from __future__ import annotations

import fcntl
import socket
import struct

SIOCGIFFLAGS, SIOCGIFADDR = 0x8913, 0x8915
IFF_UP, IFF_LOOPBACK, IFF_RUNNING = 0x1, 0x8, 0x40


def ifreq(sock: socket.socket, name: str, request: int) -> bytes:
    """The ``struct ifreq`` the kernel returns for ``request`` on interface ``name``."""
    return fcntl.ioctl(sock.fileno(), request, struct.pack("256s", name.encode()[:15]))


def flags(sock: socket.socket, name: str) -> int:
    """Interface ``name``'s flags (``IFF_*``; IFF_RUNNING is the kernel's operational state,
    which follows the carrier only once the link watcher has run)."""
    return struct.unpack_from("H", ifreq(sock, name, SIOCGIFFLAGS), 16)[0]


def flags_in(ns: str | None, name: str) -> int:
    """``flags`` of interface ``name`` in network namespace ``ns`` (None: this one)."""
    from clusterlab.net.netns import TestbedError, in_netns

    with in_netns(ns):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with s:
        try:
            return flags(s, name)
        except OSError as e:
            raise TestbedError(f"interface {name} in {ns}: {e.strerror}") from None
