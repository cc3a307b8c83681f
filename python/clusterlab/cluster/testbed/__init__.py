"""A cluster on one machine: network namespaces around a bridge switch, links shaped by tc.

Vocabulary as in Mininet: ``topo`` (what to build), ``node`` (hosts and the switch),
``link`` (veth pairs and their shaping), ``net`` (up and down), ``clean`` (nothing left
behind), ``sysctl`` (per-host TCP settings).
"""

from clusterlab.cluster.testbed.clean import clean, leftovers
from clusterlab.cluster.testbed.net import Testbed, require_root
from clusterlab.cluster.testbed.node import Host, Switch, TestbedError
from clusterlab.cluster.testbed.topo import StarTopo

__all__ = ["Host", "StarTopo", "Switch", "Testbed", "TestbedError", "clean", "leftovers",
           "require_root"]
