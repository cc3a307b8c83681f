"""seed000-buffer's rule: random vs fixed MIN per port buffer and stack, a buffer where the job
failed named as such (no ratio), and a verdict only when the buffers agree."""

from clusterlab.experiments.studies import load
from clusterlab.experiments.studies.seed000.buffer import PAPER

LOWER = PAPER["Fig. 5, port buffer"]["claims"][0][2]


def _row(cells, jitter, y=None, failed=False, stack="seed-era"):
    r = {"buffer": f"{cells}cells", "stack": stack, "rto_min_jitter_s": jitter}
    if failed:
        r["failed"] = "rank 1 failed: CommTimeout"
    else:
        r["retransmissions_per_node"] = y
    return r


def test_failed_buffers_are_named_and_a_split_is_not_one_verdict():
    rows = [_row(256, 0.0, failed=True), _row(256, 0.1, 3.0), _row(1024, 0.0, 10.0), _row(1024, 0.1, 5.0),
            _row(8192, 0.0, 10.0), _row(8192, 0.1, 9.5)]
    text, ok = LOWER(rows)
    assert text == "seed-era TCP, random/fixed by buffer cells: 256: the job failed with fixed MIN, 1024: 0.5x, 8192: 0.95x (no)"
    assert ok is None
    assert LOWER(rows[2:4]) == ("seed-era TCP, random/fixed by buffer cells: 1024: 0.5x", True)
    assert LOWER(rows[4:])[1] is False


def test_the_sweep_is_one_switch_one_dilation():
    pts = [p for p in load("seed000-buffer").points() if not p.check]
    assert {p.settings["switch"] for p in pts} == {"atm"} and {p.dilation for p in pts} == {10.0}
    assert sorted({p.settings["buffer"] for p in pts}, key=lambda b: int(b[:-5]))[::5] == ["256cells", "8192cells"]
