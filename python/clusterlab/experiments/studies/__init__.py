"""The registered studies: each module here defines ``STUDY`` (its name is the module's, with
'-' for '_': ``seed000_fig3.py`` is ``seed000-fig3``).

>>> [n for n in names() if n.startswith("seed000")]
['seed000-fig2', 'seed000-fig3', 'seed000-fig4', 'seed000-fig5', 'seed000-fig6']
"""

from __future__ import annotations

import importlib
import pkgutil

from clusterlab.errors import ConfigError


def names() -> list[str]:
    import clusterlab.experiments.studies as pkg

    return sorted(m.name.replace("_", "-") for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_"))


def load(name: str):
    """The ``Study`` named ``name``."""
    if name not in names():
        raise ConfigError(f"no study named {name!r} (clusterlab experiment list: {', '.join(names())})")
    study = importlib.import_module(f"clusterlab.experiments.studies.{name.replace('-', '_')}").STUDY
    if study.name != name:
        raise ConfigError(f"study module {name} defines a study named {study.name!r}")
    return study
