"""``--auto-dilation``: rerun an emulated job at the smallest dilation whose run passes the
fidelity check (``fidelity.check``).

A dilation k runs the testbed's links at rate / k and its timers at k times their setting, so the
same job asks k times less of the machine's CPU per second and its timers span k times more
kernel jiffies. The runs go up a ladder from the starting dilation: when only the timer check
failed, straight to the smallest whole dilation at which the RTO min as run spans enough
jiffies (``timer_dilation``); when another check failed (spare CPU, link rate, drops the
emulation caused), to twice the dilation, since nothing predicts how much CPU a run at a higher
dilation frees. The first run that passes is kept; a ladder that reaches ``max_dilation``
without a pass says so and keeps the last run. Each step is a full rerun of the job.
"""

from __future__ import annotations

import math

from clusterlab.diagnose.fidelity import JIFFY_S, JIFFY_SHARE_MAX

MAX_DILATION = 16.0


def timer_dilation(rto_min_s: float) -> float:
    """The smallest whole dilation at which an RTO min of ``rto_min_s`` passes the timer check
    (one 4 ms jiffy at most ``JIFFY_SHARE_MAX`` of it as run).

    >>> timer_dilation(0.005), timer_dilation(0.2)
    (4.0, 1.0)
    """
    return float(max(1, math.ceil(JIFFY_S / JIFFY_SHARE_MAX / rto_min_s - 1e-9)))


def next_dilation(k: float, fidelity: dict, rto_min_s: float) -> float:
    """The dilation to try after a run at ``k`` failed ``fidelity``.

    >>> timer = {"checks": [{"check": "timer", "ok": False}, {"check": "cpu", "ok": True}]}
    >>> next_dilation(1.0, timer, 0.005), next_dilation(1.0, timer, 0.001)
    (4.0, 16.0)
    >>> next_dilation(3.0, {"checks": [{"check": "cpu", "ok": False}]}, 0.2)
    6.0
    """
    failed = {c["check"] for c in fidelity.get("checks", []) if not c["ok"]}
    if failed and failed <= {"timer"}:
        return max(timer_dilation(rto_min_s), k + 1)
    return max(2 * k, timer_dilation(rto_min_s) if "timer" in failed else 0.0)


def auto_dilation(run_at, start: float, rto_min_s: float, max_dilation: float = MAX_DILATION) -> dict:
    """Run ``run_at(k)`` (the job at dilation k; returns ``(result, fidelity)``, the fidelity
    of its run as ``diagnose`` gives it) from ``start`` up the ladder until a run passes.
    Returns ``{"dilation", "ok", "result", "attempts": [{"dilation", "ok", "line"}, ...]}``: the
    passing run (or the last one tried when none passed below ``max_dilation``)."""
    k, attempts = float(start), []
    while True:
        result, fid = run_at(k)
        attempts.append({"dilation": k, "ok": bool(fid["ok"]), "line": fid["line"]})
        if fid["ok"]:
            break
        nk = next_dilation(k, fid, rto_min_s)
        if nk > max_dilation:
            break
        k = nk
    return {"dilation": k, "ok": attempts[-1]["ok"], "result": result, "attempts": attempts}


def attempt_lines(auto: dict, max_dilation: float = MAX_DILATION) -> list[str]:
    """What the command prints: each run's dilation and fidelity verdict, and which was kept."""
    out = [f"auto-dilation: dilation {a['dilation']:g}: {a['line'].split(' - ')[0]}" for a in auto["attempts"]]
    if auto["ok"]:
        out.append(f"auto-dilation: kept the run at dilation {auto['dilation']:g}, the smallest tried that passes")
    else:
        out.append(f"auto-dilation: no run passed up to dilation {max_dilation:g}; kept the last one "
                   f"(dilation {auto['dilation']:g}): its times cannot be believed")
    return out
