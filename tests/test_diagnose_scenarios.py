"""The diagnosis corpus (``clusterlab.diagnose.scenarios``): each run has one cause injected,
and ``diagnose`` must name that cause first. This shared machine's own load does not excuse a
miss: the slowdown every rank saw is charged apart (``machine_load``) and flagged by the
fidelity check, not named as the job's loss. Quick scenarios run 2 ranks on loopback (a few
seconds each); testbed ones need root. ``bench/diagnose_corpus.py`` runs them all with a
record, the fix rerun beside each."""

from __future__ import annotations

import pytest

from clusterlab.diagnose import diagnose_dir
from clusterlab.diagnose.scenarios import SCENARIOS, named_first
from tests.conftest import is_root


@pytest.mark.parametrize("scenario", [pytest.param(s, marks=[pytest.mark.root] if s.root else [])
                                      for s in SCENARIOS if s.ci], ids=lambda s: s.name)
def test_the_injected_cause_is_named_first(scenario, tmp_path):
    if scenario.root and not is_root:
        pytest.skip("needs root (a namespace testbed)")
    jobs = diagnose_dir(scenario.run(str(tmp_path)))["jobs"]
    for j in jobs:
        assert named_first(j) == scenario.cause, (scenario.injected, named_first(j), j["fidelity"]["line"],
                                                 j["causes"][:3])
