"""clusterlab: data-intensive parallel work on commodity clusters, and what the network does to it.

>>> import clusterlab
>>> b = clusterlab.Baskets.from_lists([[1, 2, 3], [2, 3], [3]])
>>> len(b), b.n_items
(3, 3)
"""

from clusterlab._core import __version__
from clusterlab.errors import BasketFormatError, ClusterlabError, ConfigError

# The data and mining API is imported on first use (PEP 562): a rank, a launcher and every CLI
# call import ``clusterlab`` first, and numpy + pyarrow cost them ~0.25 s each when they never
# touch a basket.
_LAZY = {"Baskets": "clusterlab.data", "read_baskets": "clusterlab.data", "write_baskets": "clusterlab.data",
         "generate": "clusterlab.data.generate", "generate_file": "clusterlab.data.generate",
         "mine": "clusterlab.mining", "rules": "clusterlab.mining"}

__all__ = [
    "Baskets",
    "BasketFormatError",
    "ClusterlabError",
    "ConfigError",
    "generate",
    "generate_file",
    "mine",
    "read_baskets",
    "rules",
    "write_baskets",
    "__version__",
]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'clusterlab' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
