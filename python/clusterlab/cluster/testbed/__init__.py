"""A cluster on one machine: network namespaces around a bridge switch, links shaped by tc.

Vocabulary as in Mininet: ``topo`` (what to build), ``node`` (hosts and the switch),
``link`` (veth pairs and their shaping), ``net`` (up and down), ``clean`` (nothing left
behind), ``sysctl`` (per-host TCP settings). The live network is ``TestbedNetwork``; the
``Cluster`` that runs ranks in its hosts is ``clusterlab.cluster.Testbed``.
"""

from clusterlab.cluster.testbed.clean import clean, leftovers
from clusterlab.cluster.testbed.net import TestbedNetwork, require_root
from clusterlab.cluster.testbed.node import Host, Switch, TestbedError
from clusterlab.cluster.testbed.topo import StarTopo

__all__ = ["Host", "StarTopo", "Switch", "TestbedError", "TestbedNetwork", "clean", "leftovers",
           "require_root"]


def __getattr__(name: str):
    # The live network was called Testbed, like the Cluster that runs ranks in it: say where each went.
    if name == "Testbed":
        raise ImportError("clusterlab.cluster.testbed.Testbed is now TestbedNetwork (the namespaces, links and "
                          "switch); the Cluster that runs ranks in them is clusterlab.cluster.Testbed")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
