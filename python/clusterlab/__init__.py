"""clusterlab: data-intensive parallel work on commodity clusters, and what the network does to it.

>>> import clusterlab
>>> b = clusterlab.Baskets.from_lists([[1, 2, 3], [2, 3], [3]])
>>> len(b), b.n_items
(3, 3)
"""

from clusterlab._core import __version__
from clusterlab.data import Baskets, read_baskets, write_baskets
from clusterlab.data.generate import generate, generate_file  # noqa: F401 (public API)
from clusterlab.errors import BasketFormatError, ClusterlabError, ConfigError
from clusterlab.mining import mine, rules  # noqa: F401  (public API: clusterlab.mine / clusterlab.rules)

__all__ = [
    "Baskets",
    "BasketFormatError",
    "ClusterlabError",
    "ConfigError",
    "read_baskets",
    "write_baskets",
    "__version__",
]
