"""Seed 002's studies: the collective workload's ``algorithm`` axis (bad values refused in one
line naming what is accepted)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from clusterlab.cli import cli, main
from clusterlab.comm import collectives
from clusterlab.errors import ConfigError
from clusterlab.experiments import load
from clusterlab.experiments.spec import Grid
from clusterlab.experiments.workloads.collective import algorithms, collective


def test_algorithm_accepts_auto_and_every_algorithm_of_the_operation():
    assert algorithms("bcast") == ["auto", *sorted(collectives.ALGORITHMS["bcast"])]
    for op in ("bcast", "scatter"):
        for name in algorithms(op):
            assert collective(op=op, algorithm=name).params["algorithm"] == name
    with pytest.raises(ConfigError) as e:
        collective(op="bcast", algorithm="ring")
    assert "\n" not in str(e.value) and "flat" in str(e.value) and "paced" in str(e.value) and "'ring'" in str(e.value)


def test_algorithm_is_a_grid_axis_of_a_seed002_study():
    import dataclasses

    s = load("seed002-fig1")
    s = dataclasses.replace(s, grid=Grid(algorithm=["flat", "binomial", "paced"], op=["bcast"]))
    points = s.points()
    assert [p.workload.params["algorithm"] for p in points] == ["flat", "binomial", "paced"]
    assert all("algorithm=" in p.label for p in points)
    bad = dataclasses.replace(s, grid=Grid(algorithm=["flat", "paced"], op=["scatter"]))
    with pytest.raises(ConfigError, match="algorithm for scatter must be one of auto, binomial, linear"):
        bad.points()


def test_a_bad_algorithm_on_the_command_line_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["experiment", "run", "seed002-fig1", "--quick", "--set", "algorithm=ring", "--dry-run"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "algorithm for bcast must be one of auto" in lines[0], err
    r = CliRunner().invoke(cli, ["experiment", "run", "seed002-fig1", "--quick", "--set", "algorithm=flat",
                                 "--dry-run"])
    assert r.exit_code == 0 and "algorithm=flat" in r.output and "every setting accepted" in r.output
