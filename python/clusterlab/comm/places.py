"""The two places ranks run that need no launcher: threads of this process (``InProcess``) and
the job this process already is a rank of (``Launched``). Both are ``clusterlab.cluster.Cluster``
implementations (``clusterlab.cluster`` exports them with the launchers); they live here, beside
the communicators they run on, so that a layer below the clusters (mining, npb, bench) can
default to them without importing a launcher.

>>> InProcess().run(lambda c: c.size, 2)
[2, 2]
"""

from __future__ import annotations

from clusterlab.errors import ConfigError
from clusterlab.rendezvous import contract


def has_knobs(transport) -> bool:
    """``transport`` sets something (a ``TransportConfig`` with every default sets nothing)."""
    return transport is not None and not transport.is_default()


def no_kwargs(kwargs, where: str) -> None:
    if kwargs:
        raise ConfigError(f"keyword arguments reach only in-process ranks, not {where} ones; pass them positionally")


class InProcess:
    """Ranks as threads of this process."""

    name = "inproc"
    size = None

    def __repr__(self) -> str:
        return "InProcess()"

    def run(self, fn, n, *args, transport=None, timeout: float | None = 300.0, kwargs=None, **options) -> list:
        from clusterlab.comm.inproc import run_threads

        if has_knobs(transport):
            raise ConfigError("TCP settings apply to ranks on a TCP mesh (Local, Testbed, Mpirun(mesh='tcp')), "
                              "not to in-process ranks")
        if options:
            raise ConfigError(f"in-process ranks take no {', '.join(sorted(options))}")
        return run_threads(fn, n, *args, timeout=300.0 if timeout is None else timeout, **(kwargs or {}))

    def launch(self, argv, n, **options):
        raise ConfigError("in-process ranks are threads: a program needs Local, Mpirun or Testbed")


class Launched:
    """This process is one rank of a job another launcher started: ``run`` calls ``fn`` on this
    rank's communicator (every rank calls; each gets its own result)."""

    name = "launched"

    def __repr__(self) -> str:
        return "Launched()"

    @property
    def comm(self):
        from clusterlab.comm import world

        return world()

    @property
    def size(self) -> int:
        return self.comm.size

    def run(self, fn, n, *args, transport=None, timeout: float | None = None, kwargs=None, **options) -> list:
        comm = self.comm
        if n is not None and n != comm.size:
            raise ConfigError(f"this job has {comm.size} ranks, not -n {n}")
        if has_knobs(transport):
            raise ConfigError("a launched job's TCP settings are its launcher's (clusterlab run --rto-min ...)")
        return [fn(comm, *args, **(kwargs or {}))]

    def launch(self, argv, n, **options):
        raise ConfigError("this process is a rank of a job already: start programs from outside it")


def started_as_rank() -> bool:
    """True when this process is one rank of a job (clusterlab's launcher or mpiexec)."""
    return contract.started_by() is not None
