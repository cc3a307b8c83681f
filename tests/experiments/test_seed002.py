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


def test_the_ethernet_line_is_a_network_choice_also_in_a_quick_run():
    from clusterlab.experiments.clusters import star_topo
    from clusterlab.experiments.runner import prepare

    for name in ("seed002-fig1", "seed002-fig2", "seed002-fig3", "seed002-algorithms"):
        _, points = prepare(load(name), quick=True, overrides={"network": "ethernet-10"})
        topos = [star_topo(p) for p in points]
        assert points and all(t.rate_bps == 10e6 and t.mtu == 1500 and t.switch == "bridge" for t in topos), name
        assert all("network=ethernet-10" in p.label for p in points)
    _, points = prepare(load("seed002-fig2"), quick=True)
    assert {star_topo(p).rate_bps for p in points} == {155e6}  # the quick run: the records' network
    with pytest.raises(ConfigError, match="choose among"):
        prepare(load("seed002-fig2"), overrides={"network": "ethernet-100"})


def test_the_p2mp_study_compares_lines_on_the_cell_switch():
    from clusterlab.experiments.clusters import star_topo

    points = load("seed002-p2mp").points()
    assert {star_topo(p).switch for p in points} == {"atm"}
    lines = {(p.workload.params["algorithm"], p.workload.params["connections"]) for p in points}
    assert lines == {("flat", "persistent"), ("auto", "persistent"), ("p2mp", "per_call"), ("p2mp", "persistent")}
    assert sorted({star_topo(p).hosts for p in points}) == [2, 4, 6, 8, 16]


def test_the_p2mp_claims_compare_the_lines_at_every_host_count():
    from clusterlab.experiments.studies.seed002.p2mp import PAPER

    def rows(p2mp, flat, nbytes):
        return [{"line": ln, "hosts": h, "bytes": nbytes, "seconds": t}
                for ln, ts in (("p2mp-per-call", p2mp), ("p2p-flat", flat)) for h, t in zip((2, 6), ts, strict=True)]

    slower = PAPER["Fig. 2"]["claims"][0][2]
    faster = PAPER["Fig. 3"]["claims"][0][2]
    assert slower(rows([2.0, 3.0], [1.0, 1.0], 65536))[1] is True
    text, ok = slower(rows([0.5, 3.0], [1.0, 1.0], 65536))
    assert ok is False and "2 hosts 0.5x" in text and "6 hosts 3x" in text
    assert faster(rows([0.5, 0.2], [1.0, 1.0], 1048576))[1] is True
    assert faster(rows([0.5, 0.2], [1.0, 1.0], 65536)) == ("not measured", None)
