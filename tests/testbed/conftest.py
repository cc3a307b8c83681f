import pytest

from clusterlab.cluster.testbed import clean, leftovers

from .helpers import fresh_name, require_netns


@pytest.fixture
def name():
    """A fresh testbed name; whatever the test built under it is removed and checked gone."""
    require_netns()
    n = fresh_name()
    yield n
    clean(n)
    assert not any(leftovers(n)[k] for k in ("namespaces", "processes", "state_files"))
