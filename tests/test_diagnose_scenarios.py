"""The diagnosis corpus (``clusterlab.diagnose.scenarios``): each run has one cause injected,
and ``diagnose`` must name that cause first, or, when this shared machine's load starved the
ranks by more (``machine_load_allows``), name the starvation first and the injected cause next. Quick scenarios run 2 ranks on loopback (a few
seconds each); testbed ones need root. ``bench/diagnose_corpus.py`` runs them all with a record."""

from __future__ import annotations

import pytest

from clusterlab.diagnose import diagnose_dir
from clusterlab.diagnose.scenarios import SCENARIOS, machine_load_allows, named_first
from tests.conftest import is_root


@pytest.mark.parametrize("scenario", [pytest.param(s, marks=[pytest.mark.root] if s.root else [])
                                      for s in SCENARIOS if s.ci], ids=lambda s: s.name)
def test_the_injected_cause_is_named_first(scenario, tmp_path):
    if scenario.root and not is_root:
        pytest.skip("needs root (a namespace testbed)")
    jobs = diagnose_dir(scenario.run(str(tmp_path)))["jobs"]
    for j in jobs:
        assert machine_load_allows(j, scenario.cause), (scenario.injected, named_first(j), j["causes"][:3])
