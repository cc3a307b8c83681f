"""Every docstring example in the package runs as a test."""

import doctest
import importlib
import pkgutil

import pytest

import clusterlab

MODULES = sorted(
    m.name for m in pkgutil.walk_packages(clusterlab.__path__, "clusterlab.")
    if not m.name.startswith(("clusterlab.cli", "clusterlab.__main__"))
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    mod = importlib.import_module(name)
    res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert res.failed == 0
