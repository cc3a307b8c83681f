"""Studies: declarative specs of the seed papers' experiments, one runner, one reporter.

>>> from clusterlab.experiments import names, load
>>> "seed000-fig3" in names()
True
>>> load("seed000-fig3").cluster.kind
'testbed'
"""

from clusterlab.experiments.spec import (
    DilationCheck,
    Grid,
    InProcess,
    Loopback,
    Mpi,
    StarTopo,
    Study,
    Testbed,
    attribution,
    per_pass,
    scatter,
    seed_numbers,
    speedup,
)
from clusterlab.experiments.studies import load, names
from clusterlab.net.transport_config import TransportConfig  # a study's TCP settings: the one type

__all__ = ["DilationCheck", "Grid", "InProcess", "Loopback", "Mpi", "StarTopo", "Study", "Testbed", "TransportConfig",
           "attribution", "load", "names", "per_pass", "scatter", "seed_numbers", "speedup"]
