"""A seed figure is one module in its seed's folder: adding one touches nothing else. A toy seed
(``seed999/``) put on the studies package's path is listed, dry-runs, runs, and its report
judges the paper's claim with the rule the module holds."""

from __future__ import annotations

import sys
import textwrap

import pytest
from click.testing import CliRunner

import clusterlab.experiments.studies as studies
from clusterlab.cli import cli

INIT = '''
SETUP = [("nodes", "two toy hosts")]
'''

FIG1 = '''
from clusterlab.experiments import Grid, InProcess, Study, seed_numbers
from clusterlab.experiments.claims import median_of
from clusterlab.experiments.studies.seed999 import SETUP
from clusterlab.experiments.workloads import pingpong

STUDY = Study(name="seed999-fig1", cluster=InProcess(ranks=2), workload=pingpong(sizes="8", trial_time=0.001),
              grid=Grid(sizes=["8", "64"]), repeat=2, warmup=0, monitor=False,
              report=[seed_numbers("999", "Fig. 1")])


def _took_time(rows):
    m = median_of([r for r in rows if not r.get("check")], "seconds")
    return ("not measured", None) if m is None else (f"median {m:.3g} s", m > 0)


PAPER = {"Fig. 1": {"caption": "a toy figure", "setup": SETUP,
                    "claims": [("every run takes some time", "> 0 s", _took_time)]}}
'''


@pytest.fixture
def toy_seed(tmp_path, monkeypatch):
    folder = tmp_path / "seed999"
    folder.mkdir()
    (folder / "__init__.py").write_text(textwrap.dedent(INIT))
    (folder / "fig1.py").write_text(textwrap.dedent(FIG1))
    monkeypatch.setattr(studies, "__path__", [*studies.__path__, str(tmp_path)])
    yield
    for m in [m for m in sys.modules if m.startswith("clusterlab.experiments.studies.seed999")]:
        del sys.modules[m]


def test_a_new_seed_figure_is_one_folder(toy_seed, tmp_path):
    assert "seed999-fig1" in studies.names()
    assert studies.module("seed999-fig1") == "clusterlab.experiments.studies.seed999.fig1"
    assert studies.load("seed999-fig1").name == "seed999-fig1"
    assert list(studies.papers()["999"]) == ["Fig. 1"]
    r = CliRunner().invoke(cli, ["experiment", "list"])
    assert r.exit_code == 0 and "seed999-fig1" in r.output, r.output
    r = CliRunner().invoke(cli, ["experiment", "run", "seed999-fig1", "--dry-run"])
    assert r.exit_code == 0 and "2 points x 2 repetitions; every setting accepted" in r.output, r.output
    runs = tmp_path / "runs"
    r = CliRunner().invoke(cli, ["experiment", "run", "seed999-fig1", "--runs", str(runs)])
    assert r.exit_code == 0, r.output
    report = next((runs / "seed999-fig1").iterdir()) / "report.md"
    text = report.read_text()
    assert "Seed 999, Fig. 1: the paper beside ours" in text and "two toy hosts" in text
    assert "every run takes some time" in text and "(agrees)" in text


def test_seed_helpers_are_not_studies():
    """A seed folder's ``__init__`` (shared settings, the paper's set-up) is no study, and every
    seed figure's name is its folder and module."""
    names = studies.names()
    assert "seed000" not in names and not [n for n in names if n.startswith("seed000-_")]
    for n in names:
        mod = studies.module(n)
        assert mod.removeprefix("clusterlab.experiments.studies.").replace(".", "-").replace("_", "-") == n
