"""The registered studies. A seed's studies live in one folder, ``seedNNN/`` (its ``__init__``
holds what the seed's figures share: testbed, notes, the paper's set-up); each figure is one
module there defining ``STUDY`` (the spec and the workload it binds) and, where the paper states
numbers or claims for the figure, ``PAPER``: ``{figure: {"caption", "setup", "claims"}}``, each
claim ``(the paper's words, the paper's value, rule)`` where ``rule(rows)`` returns ``(what we
measured, agrees)``. A study's name is its folder and module: ``seed000/fig3.py`` is
``seed000-fig3``. Studies that reproduce no seed are single modules here (``local_speedup.py``
is ``local-speedup``). Modules whose name starts with ``_`` are helpers, not studies.

>>> [n for n in names() if n.startswith("seed000")]
['seed000-buffer', 'seed000-fig2', 'seed000-fig3', 'seed000-fig4', 'seed000-fig5', 'seed000-fig6']
>>> module("seed000-fig3")
'clusterlab.experiments.studies.seed000.fig3'
"""

from __future__ import annotations

import importlib
import pkgutil

from clusterlab.errors import ConfigError

PACKAGE = "clusterlab.experiments.studies"


def _modules() -> dict[str, str]:
    """{study name: module name} for every study module, found on disk."""
    import clusterlab.experiments.studies as pkg

    out = {}
    for m in pkgutil.iter_modules(pkg.__path__):
        if m.name.startswith("_"):
            continue
        if not m.ispkg:
            out[m.name.replace("_", "-")] = f"{PACKAGE}.{m.name}"
            continue
        sub = importlib.import_module(f"{PACKAGE}.{m.name}")
        for f in pkgutil.iter_modules(sub.__path__):
            if not f.name.startswith("_") and not f.ispkg:
                out[f"{m.name}-{f.name}".replace("_", "-")] = f"{PACKAGE}.{m.name}.{f.name}"
    return out


def names() -> list[str]:
    return sorted(_modules())


def module(name: str) -> str:
    """The module defining study ``name``."""
    mods = _modules()
    if name not in mods:
        raise ConfigError(f"no study named {name!r} (clusterlab experiment list: {', '.join(sorted(mods))})")
    return mods[name]


def load(name: str):
    """The ``Study`` named ``name``."""
    study = importlib.import_module(module(name)).STUDY
    if study.name != name:
        raise ConfigError(f"study module {name} defines a study named {study.name!r}")
    return study


def papers() -> dict:
    """What the seed papers say, from every study module's ``PAPER``: ``{seed: {figure: ...}}``
    (seed ``"000"`` from folder ``seed000``)."""
    out: dict = {}
    for mod in _modules().values():
        folder = mod.removeprefix(PACKAGE + ".").partition(".")[0]
        paper = getattr(importlib.import_module(mod), "PAPER", None)
        if paper and folder.startswith("seed"):
            out.setdefault(folder.removeprefix("seed"), {}).update(paper)
    return out
