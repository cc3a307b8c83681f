"""What a workload's result columns mean, and undoing dilation on them.

A workload returns whatever it measures; the runner keeps every key as a column. Time
columns follow one naming rule so that dilation is undone in one place (``undilate``) and the
report can draw a time split: ``seconds`` (the repetition's time), ``*_seconds`` and
``time_<part>`` (time attributed to a part: compute, transfer, rto_wait, ...), all in seconds;
lists of them per pass or per host end in ``_by_pass`` / ``_per_host``.

>>> undilate({"seconds": 4.0, "time_rto_wait": 2.0, "retransmissions": 8, "seconds_by_pass": [2.0, 2.0]}, 4)
{'seconds': 1.0, 'time_rto_wait': 0.5, 'retransmissions': 8, 'seconds_by_pass': [0.5, 0.5]}
"""

from __future__ import annotations


def is_time_column(name: str) -> bool:
    for suffix in ("_by_pass", "_per_host"):
        name = name.removesuffix(suffix)
    return name == "seconds" or name.endswith("_seconds") or name.startswith("time_")


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def undilate(row: dict, k: float) -> dict:
    """Time columns divided by the dilation ``k`` (the network ran k times slower)."""
    if k == 1.0:
        return row
    out = {}
    for c, v in row.items():
        if is_time_column(c) and _number(v):
            v = v / k
        elif is_time_column(c) and isinstance(v, list) and all(_number(x) for x in v):
            v = [x / k for x in v]
        out[c] = v
    return out
