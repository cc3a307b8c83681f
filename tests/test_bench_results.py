"""``bench/results/`` holds records only: every file is a record listed in
``bench/results_readme.py`` (or one of its figures), every listed record exists, each command
names a script that exists, and ``bench/results/README.md`` is what the script writes."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


@pytest.fixture(scope="module")
def index():
    spec = importlib.util.spec_from_file_location("results_readme", ROOT / "bench" / "results_readme.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look the module up
    spec.loader.exec_module(mod)
    return mod


def test_every_file_is_a_listed_record_and_every_record_exists(index):
    listed = {r.name for r in index.RECORDS} | {f for r in index.RECORDS for f in r.figures}
    present = {p.name for p in RESULTS.iterdir()} - {"README.md"}
    assert present - listed == set(), "not a record (list it in bench/results_readme.py, or move it out of git)"
    assert listed - present == set(), "listed but missing"
    assert len({r.name for r in index.RECORDS}) == len(index.RECORDS)


def test_commands_name_existing_scripts(index):
    for r in index.RECORDS:
        scripts = re.findall(r"bench/[a-z0-9_]+\.py", r.command)
        assert scripts or r.command.startswith(("clusterlab ", "sudo clusterlab ")), r.name
        for s in scripts:
            assert (ROOT / s).is_file(), (r.name, s)


def test_readme_is_current(index):
    assert (RESULTS / "README.md").read_text() == index.render(), \
        "bench/results/README.md is stale: run .venv/bin/python bench/results_readme.py"


def test_provenance_reads_what_a_record_holds(index):
    p = index.provenance({"machine": {"cpus": 2, "loadavg_before": ["3.75", "3.2", "4.4"]},
                          "started": "2026-11-23T10:49:38Z", "load_after": [3.886, 1.6, 0.7],
                          "x": {"provenance": {"git": {"revision": "9ce7cc3b1f55aca5603b873f47a76b01326b255c"}}}})
    assert p == {"date": "2026-11-23 10:49", "commit": "9ce7cc3b1f", "load": "3.8 -> 3.9", "spare": "not recorded"}
    assert index.provenance({"rows": []}) == {"date": "no provenance", "commit": "no provenance",
                                              "load": "no provenance", "spare": "not recorded"}


def test_provenance_reads_the_harness_block(index):
    """A record written through clusterlab.bench.harness: the table reads its provenance block."""
    block = {"format": 1, "date": "2026-11-28T18:20:12Z", "git": {"revision": "e3f1541242efabc5", "dirty": True},
             "load_before": [1.06, 1.9, 3.2], "load_after": [2.44, 2.0, 3.1], "cpu_spare": 0.477,
             "sched_autogroup": False}
    p = index.provenance({"rows": [], "commit": "elsewhere", "provenance": block})
    assert p == {"date": "2026-11-28 18:20", "commit": "e3f1541242 (dirty)", "load": "1.1 -> 2.4",
                 "spare": "48%, autogroup off"}
    p = index.provenance({"provenance": {**block, "git": {"revision": None}, "cpu_spare": None,
                                         "sched_autogroup": True}})
    assert p["commit"] == "not recorded" and p["spare"] == "not recorded, autogroup on"
