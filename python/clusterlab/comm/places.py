"""The two places ranks run that need no launcher: threads of this process (``InProcess``) and
the job this process already is a rank of (``Launched``). Both are ``clusterlab.cluster.Cluster``
implementations (``clusterlab.cluster`` exports them with the launchers); they live here, beside
the communicators they run on, so that a layer below the clusters (mining, npb, bench) can
default to them without importing a launcher.

``OnThisMachine`` is what a study varies of a cluster on this machine (``InProcess`` here,
``Local`` and ``Mpirun`` in ``clusterlab.cluster``): its ``ranks``, by name, as a testbed's
settings are varied (``settings``/``with_settings``); a study's ``cluster=`` is the object itself.

>>> InProcess().run(lambda c: c.size, 2)
[2, 2]
>>> c = InProcess(ranks=2)
>>> c, c.n_ranks(), c.with_settings(ranks=3), InProcess().settings()
(InProcess(ranks=2), 2, InProcess(ranks=3), {'ranks': 4})
"""

from __future__ import annotations

import copy

from clusterlab.errors import ConfigError
from clusterlab.rendezvous import contract


def has_knobs(transport) -> bool:
    """``transport`` sets something (a ``TransportConfig`` with every default sets nothing)."""
    return transport is not None and not transport.is_default()


def no_kwargs(kwargs, where: str) -> None:
    if kwargs:
        raise ConfigError(f"keyword arguments reach only in-process ranks, not {where} ones; pass them positionally")


# Ranks one machine starts as processes or threads (the testbed's 100-host studies are the largest).
MAX_LOCAL_RANKS = 1024


class OnThisMachine:
    """A cluster's ``ranks`` as a setting: how many ranks a study runs on it by default (None:
    ``DEFAULT_RANKS``); ``kind`` names the place in a study's rows. ``run``/``launch`` still
    take the number of ranks they start."""

    kind = ""
    network = ""  # what connects the ranks, in a report's words (a study's "What was emulated")
    DEFAULT_RANKS = 4
    SETTINGS = ("ranks",)
    ranks: int | None = None

    def n_ranks(self) -> int:
        return self.DEFAULT_RANKS if self.ranks is None else self.ranks

    def settings(self) -> dict:
        return {"ranks": self.n_ranks()}

    def with_settings(self, **values):
        """A copy with ``ranks`` changed (the only setting)."""
        unknown = set(values) - set(self.SETTINGS)
        if unknown:
            raise ConfigError(f"{type(self).__name__} has no setting {sorted(unknown)} (has ranks)")
        c = copy.copy(self)
        c.ranks = values.get("ranks", self.ranks)
        return c

    def check(self) -> None:
        """Ranks this machine can start (the launcher's own capacity check runs again)."""
        n = self.n_ranks()
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_LOCAL_RANKS:
            raise ConfigError(f"ranks must be 1..{MAX_LOCAL_RANKS} on one machine, got {n!r}")

    def _ranks_repr(self, given: str = "") -> str:
        parts = [given] if given else []
        if self.ranks is not None:
            parts.append(f"ranks={self.ranks!r}")
        return f"{type(self).__name__}({', '.join(parts)})"


class InProcess(OnThisMachine):
    """Ranks as threads of this process (``comm.inproc``): tests algorithms, says nothing of
    networks. ``ranks``: how many a study runs by default (``OnThisMachine``)."""

    name = "inproc"
    kind = "inprocess"
    network = "none (threads of one process)"  # what connects the ranks, in a report's words
    size = None
    multicast = True  # comm.inproc delivers a point-to-multipoint send to every rank

    def __init__(self, ranks: int | None = None):
        self.ranks = ranks

    def __repr__(self) -> str:
        return self._ranks_repr()

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
    multicast = True  # as the job's place allows (a testbed's hosts do): not refused from inside it

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
        if options.get("run_dir") is not None:
            raise ConfigError("a launched job is recorded by its launcher (clusterlab run --run-dir DIR)")
        return [fn(comm, *args, **(kwargs or {}))]

    def launch(self, argv, n, **options):
        raise ConfigError("this process is a rank of a job already: start programs from outside it")


def started_as_rank() -> bool:
    """True when this process is one rank of a job (clusterlab's launcher or mpiexec)."""
    return contract.started_by() is not None
