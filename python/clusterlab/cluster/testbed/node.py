"""Hosts and the switch (Mininet's ``Node``): each is a network namespace.

A host is a namespace ``clab-<testbed>-<host>`` holding ``lo`` and ``eth0``; the switch is a
namespace ``clab-<testbed>-sw`` holding a Linux bridge ``br0`` and one port ``p<i>`` per host.
Nothing is created in the root namespace, so nothing of a testbed is visible outside it.

``in_netns`` (``clusterlab.net.netns``, re-exported here) moves only the calling *thread* into
a namespace.

>>> h = Host("t1", 3, "h3", "10.0.0.4", "02:c1:ab:00:00:03")
>>> h.ns, h.port
('clab-t1-h3', 'p3')
>>> h.prefix()
['ip', 'netns', 'exec', 'clab-t1-h3']
"""

from __future__ import annotations

import dataclasses
import subprocess

from clusterlab.cluster.testbed.topo import PREFIX
from clusterlab.net.netns import NETNS_DIR, TestbedError, in_netns

__all__ = ["NETNS_DIR", "Host", "Node", "Switch", "TestbedError", "in_netns", "ns_name"]


def ns_name(testbed: str, node: str) -> str:
    return f"{PREFIX}-{testbed}-{node}"


@dataclasses.dataclass
class Node:
    """A namespace of the testbed."""

    testbed: str
    name: str

    @property
    def ns(self) -> str:
        return ns_name(self.testbed, self.name)

    def prefix(self) -> list[str]:
        """Command prefix that runs a program inside this node."""
        return ["ip", "netns", "exec", self.ns]

    def run(self, args: list[str], timeout: float = 30.0, check: bool = True) -> subprocess.CompletedProcess:
        """Run ``args`` inside the node and wait (bounded by ``timeout``)."""
        try:
            return subprocess.run(self.prefix() + list(args), capture_output=True, text=True,
                                  timeout=timeout, check=check)
        except subprocess.CalledProcessError as e:
            raise TestbedError(f"{self.name}: {' '.join(args)} failed: {e.stderr.strip()}") from None
        except subprocess.TimeoutExpired:
            raise TestbedError(f"{self.name}: {' '.join(args)} did not finish in {timeout} s") from None

    def popen(self, args: list[str], **kw) -> subprocess.Popen:
        """Start ``args`` inside the node (caller waits; ``clean`` kills it if the caller dies)."""
        return subprocess.Popen(self.prefix() + list(args), **kw)


@dataclasses.dataclass
class Host(Node):
    """A compute (or storage) host: one interface ``eth0`` with ``address``."""

    index: int = 0
    addr: str = ""
    mac: str = ""

    def __init__(self, testbed: str, index: int, name: str, addr: str, mac: str):
        super().__init__(testbed, name)
        self.index, self.addr, self.mac = index, addr, mac

    @property
    def port(self) -> str:
        """The switch port this host is attached to."""
        return f"p{self.index}"


@dataclasses.dataclass
class Switch(Node):
    """The switch: a bridge ``br0`` whose ports' egress qdiscs model the output buffers."""

    bridge: str = "br0"

    def __init__(self, testbed: str):
        super().__init__(testbed, "sw")
        self.bridge = "br0"
