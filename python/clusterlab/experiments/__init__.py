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
    Study,
    Tcp,
    Testbed,
    attribution,
    per_pass,
    scatter,
    seed_numbers,
    speedup,
)
from clusterlab.experiments.studies import load, names

__all__ = ["DilationCheck", "Grid", "InProcess", "Loopback", "Mpi", "Study", "Tcp", "Testbed", "attribution",
           "load", "names", "per_pass", "scatter", "seed_numbers", "speedup"]
