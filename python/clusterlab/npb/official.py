"""Official NPB-MPI binaries (NPB 3.x, built by the user) run as the MPI ranks of a cluster the
caller gives (``Mpirun()``: the project's ``mpiexec``; ``Testbed(NAME, mesh="mpi")``: a
testbed's hosts), their report read into the same record as clusterlab's own kernels, so the
two can be compared side by side on the same ranks.

The binary is only run, never built here; its report (NPB's ``print_results``) gives class,
size, iterations, time, Mop/s and verification. Per-rank compute and traffic are not known
for it (``ranks`` is empty).

>>> r = parse_report(SAMPLE, backend="npb-mpi")
>>> r.kernel, r.cls, r.size, r.nprocs, r.verified, r.mops
('IS', 'S', '65536', 2, True, 97.2)
"""

from __future__ import annotations

import re
from pathlib import Path

from clusterlab.errors import ConfigError
from clusterlab.npb.common import NpbResult

SAMPLE = """
 IS Benchmark Completed
 Class           =                        S
 Size            =                    65536
 Iterations      =                       10
 Time in seconds =                     0.01
 Total processes =                        2
 Compiled procs  =                        2
 Mop/s total     =                    97.20
 Mop/s/process   =                    48.60
 Operation type  =              keys ranked
 Verification    =               SUCCESSFUL
"""

_FIELD = re.compile(r"^\s*(Class|Size|Iterations|Time in seconds|Total processes|Mop/s total|Operation type|Verification)\s*=\s*(.*?)\s*$", re.M)
_NAME = re.compile(r"^\s*(\w+) Benchmark Completed", re.M)


def parse_report(text: str, backend: str) -> NpbResult:
    """The record for an NPB report; ConfigError when the text has none."""
    f = dict(_FIELD.findall(text))
    name = _NAME.search(text)
    if name is None or not {"Class", "Time in seconds", "Mop/s total", "Verification"} <= f.keys():
        raise ConfigError("no NPB report (\"... Benchmark Completed\", Class, Time in seconds, Mop/s total, "
                          "Verification) in the program's output")
    return NpbResult(kernel=name.group(1), cls=f["Class"], size=re.sub(r"\s+", "", f.get("Size", "")),
                     iterations=int(f.get("Iterations", "0") or 0), nprocs=int(f.get("Total processes", "1") or 1),
                     backend=backend, seconds=float(f["Time in seconds"]), mops=float(f["Mop/s total"]),
                     optype=f.get("Operation type", ""), verified=f["Verification"] == "SUCCESSFUL",
                     verification={}, ranks=[])


def run_binary(binary: str, n: int, *, cluster, timeout: float = 1800.0) -> NpbResult:
    """``BINARY`` as ``n`` MPI ranks started by ``cluster`` (in the binary's directory, where
    NPB looks for its input files) and its report. ``cluster``: a ``clusterlab.cluster.Cluster``
    whose ``launch`` starts MPI ranks: ``Mpirun()`` (mpiexec on this machine, or a hostfile's
    hosts) or ``Testbed(NAME, mesh="mpi")`` (the ranks in a testbed's hosts, over its links).
    ConfigError if the binary is missing, fails or prints no report."""
    import tempfile

    path = Path(binary)
    if not path.is_file():
        raise ConfigError(f"{binary}: no such NPB binary")
    if n < 1:
        raise ConfigError(f"number of ranks must be at least 1, got {n}")
    path = path.resolve()
    with tempfile.TemporaryFile("w+") as out:
        # program=True: each rank runs the binary under the wrapper that checks in for it and
        # names the rank that died (the binary knows nothing of clusterlab)
        res = cluster.launch([str(path)], n, timeout=timeout, stdout=out, program=True, cwd=str(path.parent))
        out.seek(0)
        text = out.read()
    if not res.ok:
        raise ConfigError(f"{binary}: {res.reason or 'failed'}")
    # the record's backend: the official binary, and where it ran unless that is plain mpiexec
    where = "" if cluster.name == "mpi" else f" on {cluster.name}"
    return parse_report(text, backend=f"npb-mpi{where}")
