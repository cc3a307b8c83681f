"""`experiment merge`: runs of one study in parts made one run, and a study that reports
another's runs (seed000-fig4 is seed000-fig3's runs) made from them."""

import json

import pytest

from clusterlab.errors import ConfigError
from clusterlab.experiments.studies import load
from clusterlab.report.merge import merge_runs
from clusterlab.report.study import load_run


def _run(d, study, labels, started, emulated=None):
    d.mkdir(parents=True)
    meta = {"emulated": emulated or {}, "study": study, "title": load(study).title, "status": "complete", "spec": load(study).to_dict(),
            "started": started, "finished": started + 10, "repetitions": len(labels),
            "git": {"revision": f"{started:040d}"}, "points": [{"index": i, "label": lab} for i, lab in enumerate(labels)]}
    (d / "meta.json").write_text(json.dumps(meta))
    (d / "table.csv").write_text("point,rep,seconds\n" + "".join(f"{i},0,{i + 1}.5\n" for i in range(len(labels))))
    return d


def test_parts_merge_into_one_run_with_every_point_once_and_each_parts_provenance(tmp_path):
    a = _run(tmp_path / "a", "seed000-fig3", ["p", "q"], 100)
    b = _run(tmp_path / "b", "seed000-fig3", ["r"], 200)
    out = merge_runs([b, a], tmp_path / "m")
    rows, meta = load_run(out)
    assert [pm["label"] for pm in meta["points"]] == ["p", "q", "r"]  # parts in the order they ran
    assert sorted((r["point"], r["seconds"]) for r in rows) == [(0, 1.5), (1, 2.5), (2, 1.5)]
    assert [p["points"] for p in meta["parts"]] == [[0, 1], [2]]
    assert meta["git"]["revision"] == f"{200:040d}" and meta["study"] == "seed000-fig3"
    with pytest.raises(ConfigError, match="'q' is in both"):
        merge_runs([a, _run(tmp_path / "c", "seed000-fig3", ["q"], 300)], tmp_path / "m2")
    with pytest.raises(ConfigError, match="at least two"):
        merge_runs([a], tmp_path / "m3")


def test_a_run_is_made_the_run_of_a_study_that_reports_the_same_points(tmp_path):
    a = _run(tmp_path / "a", "seed000-fig3", ["p"], 100)
    out = merge_runs([a], tmp_path / "m", as_study="seed000-fig4")
    _, meta = load_run(out)
    fig4 = load("seed000-fig4").to_dict()
    assert meta["study"] == "seed000-fig4" and meta["reported_from"] == "seed000-fig3"
    assert meta["title"] == fig4["title"] and meta["spec"]["report"] == json.loads(json.dumps(fig4["report"]))
    assert meta["spec"]["grid"] == json.loads(json.dumps(load("seed000-fig3").to_dict()["grid"]))
    _, same = load_run(merge_runs([a], tmp_path / "m1", as_study="seed000-fig3"))
    assert same["study"] == "seed000-fig3" and "reported_from" not in same  # its own study: not "another's runs"
    # seed000-fig5 runs other points (random MIN): it cannot report fig3's runs
    with pytest.raises(ConfigError, match=r"does not report the runs of seed000-fig3 \(its .*grid"):
        merge_runs([a], tmp_path / "m2", as_study="seed000-fig5")
    assert not (tmp_path / "m2").exists()


def test_an_interrupted_run_gives_its_finished_points_only_when_asked(tmp_path):
    a = _run(tmp_path / "a", "seed000-fig3", ["p", "q"], 100)
    meta = json.loads((a / "meta.json").read_text())
    meta["status"] = "running"  # the machine went down: the runner never wrote its end
    del meta["finished"]
    meta["points"] = [{**meta["points"][0], "started": 100, "seconds": 7}]  # p finished, q was under way
    (a / "meta.json").write_text(json.dumps(meta))
    b = _run(tmp_path / "b", "seed000-fig3", ["q"], 200)
    with pytest.raises(ConfigError, match="status 'running': only complete runs.*--finished-points"):
        merge_runs([a, b], tmp_path / "m")
    rows, merged = load_run(merge_runs([a, b], tmp_path / "m", finished_points=True))
    assert [pm["label"] for pm in merged["points"]] == ["p", "q"]
    assert sorted((r["point"], r["seconds"]) for r in rows) == [(0, 1.5), (1, 1.5)]  # a's q repetition left out
    assert merged["parts"][0]["stopped"] == "running after 1 point; 1 repetition of the next left out"
    assert merged["parts"][0]["finished"] == 107 and "stopped" not in merged["parts"][1]
    # interrupted (Ctrl-C): the runner wrote its meta with the point it was in, started, no seconds
    meta["status"] = "interrupted"
    meta["points"] = [{**meta["points"][0]}, {"index": 1, "label": "q", "started": 108}]
    (a / "meta.json").write_text(json.dumps(meta))
    rows, merged = load_run(merge_runs([a, b], tmp_path / "m1", finished_points=True))
    assert [pm["label"] for pm in merged["points"]] == ["p", "q"] and len(rows) == 2
    assert merged["parts"][0]["stopped"] == "interrupted after 1 point; 1 repetition of the next left out"
    meta["points"] = [{"index": 0, "label": "p", "started": 100}]
    (a / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match="no point finished"):
        merge_runs([a, b], tmp_path / "m3", finished_points=True)
    meta["points"] = []
    (a / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match="no point finished"):
        merge_runs([a, b], tmp_path / "m2", finished_points=True)


def test_what_was_emulated_is_said_per_point_across_parts_and_merges_of_merges(tmp_path):
    both = {"network": "a bridge; a host queue at points 0, 1; a cell switch at point 2", "cluster": "testbed"}
    a = _run(tmp_path / "a", "seed000-fig3", ["p", "q", "r"], 100, both)
    b = _run(tmp_path / "b", "seed000-fig3", ["s"], 200, {"network": "a cell switch", "cluster": "testbed"})
    ab = merge_runs([a, b], tmp_path / "ab")
    _, meta = load_run(ab)
    assert meta["emulated"] == {"network": "a bridge; a host queue at points 0, 1; a cell switch at points 2, 3",
                                "cluster": "testbed"}
    c = _run(tmp_path / "c", "seed000-fig3", ["t"], 300, {"network": "a bridge; a host queue", "cluster": "testbed"})
    _, again = load_run(merge_runs([ab, c], tmp_path / "abc"))  # no "part 1: part 1: ..."
    assert again["emulated"]["network"] == "a bridge; a host queue at points 0, 1, 4; a cell switch at points 2, 3"
