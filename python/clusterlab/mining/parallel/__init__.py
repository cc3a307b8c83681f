"""Parallel frequent-itemset mining: HPA, HPA-ELD, Count Distribution and PFP on a
``Communicator`` (clusterlab's TCP mesh, MPI, or threads for tests).

Layout (one job per module; data flows down the list, nothing imports upwards):
``config`` (settings) -> ``passes`` (the pass machinery every algorithm shares) -> one module
per algorithm (``hpa``, ``hpa_eld``, ``cd``, ``pfp``) -> ``trace`` (time attribution, record
and compute replay) -> ``wire`` (a launched job's result on the wire) -> ``driver`` (registry,
what a rank runs, launching, replaying).

>>> import tempfile, os
>>> from clusterlab.cluster import InProcess
>>> p = os.path.join(tempfile.mkdtemp(), "b.dat")
>>> _ = open(p, "w").write("1 2 3\\n1 2\\n2 3\\n1 2 3\\n4\\n")
>>> table, passes = mine_parallel(p, nodes=3, algorithm="hpa", min_support=2, cluster=InProcess())
>>> [(r["items"], r["count"]) for r in table.to_pylist()]
[([1], 3), ([2], 4), ([3], 3), ([1, 2], 3), ([1, 3], 2), ([2, 3], 3), ([1, 2, 3], 2)]
>>> [(s["pass"], s["candidates"], s["large"]) for s in passes]
[(1, 4, 3), (2, 3, 3), (3, 1, 1)]
"""

from clusterlab.mining.parallel.config import ParallelConfig
from clusterlab.mining.parallel.driver import (
    ALGORITHMS,
    ParallelRun,
    ReplayRun,
    launched_job,
    mine_parallel,
    rank_job,
    replay_job,
    replay_parallel,
    run_parallel,
    run_rank,
)
from clusterlab.mining.parallel.passes import PassStats
from clusterlab.mining.sequential import min_count_of

__all__ = ["ALGORITHMS", "ParallelConfig", "ParallelRun", "PassStats", "ReplayRun", "launched_job",
           "min_count_of", "mine_parallel", "rank_job", "replay_job", "replay_parallel", "run_parallel", "run_rank"]
