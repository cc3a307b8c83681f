"""Seed 003 Fig. 6's workload: a file moved between RAM drives both ways, checked."""

from __future__ import annotations


def test_file_transfer_moves_the_file_both_ways_and_checks_it(tmp_path):
    """Seed 003 Fig. 6's workload on the in-process backend: a row per direction per repetition,
    the file checked at both ends, nothing left in the directory."""
    from clusterlab.comm.inproc import run_threads
    from clusterlab.experiments.workloads.filecopy import transfer

    rows = run_threads(lambda c: transfer(c, 3 << 20, str(tmp_path), 2), 3)[0]
    assert [(r["rep"], r["direction"]) for r in rows] == [(0, "forward"), (0, "backward"), (1, "forward"),
                                                           (1, "backward")]
    assert all(r["seconds"] > 0 and r["mbps"] > 0 for r in rows)
    assert list(tmp_path.iterdir()) == []
