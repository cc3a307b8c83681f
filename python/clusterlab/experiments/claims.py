"""Helpers for the rules that judge a seed paper's claims from a study's rows (the rules
themselves live beside each figure's study, in ``clusterlab.experiments.studies``).

A rule ``rule(rows)`` returns ``(what we measured, agrees)``; ``agrees`` is None where the paper
gives no number or direction to compare with. Rows with a ``check`` (dilation checks) are left
out of every judgement.

>>> median_of([{"x": 1, "s": 2.0}, {"x": 1, "s": 4.0}, {"x": 2, "s": 9.0}], "s", x=1)
3.0
"""

from __future__ import annotations

import statistics


def groups(rows, key):
    out: dict = {}
    for r in rows:
        if r.get("check"):
            continue
        out.setdefault(r.get(key), []).append(r)
    return out


def median_of(rows, y, **where):
    v = [r[y] for r in rows if all(r.get(k) == w for k, w in where.items()) and isinstance(r.get(y), (int, float))]
    return statistics.median(v) if v else None


def fmt(x: float) -> str:
    return f"{x:.3g}"


def fmt_secs(x: float) -> str:
    return f"{x:g} s" if x >= 1 else f"{x * 1e3:g} ms"
