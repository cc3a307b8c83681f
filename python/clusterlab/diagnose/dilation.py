"""``--auto-dilation``: rerun an emulated job at the smallest dilation whose run passes the
fidelity check (``fidelity.check``).

A dilation k runs the testbed's links at rate / k and its timers at k times their setting, so the
same job asks k times less of the machine's CPU per second and its timers span k times more
kernel jiffies. The runs go up a ladder from the starting dilation: when only the timer check
failed, straight to the smallest whole dilation at which the RTO min as run spans enough
jiffies (``timer_dilation``); when another check failed (spare CPU, link rate, drops the
emulation caused), to twice the dilation, since nothing predicts how much CPU a run at a higher
dilation frees. The first run that passes is kept; a ladder that reaches ``max_dilation``
(or the highest dilation at which the kernel takes the RTO max as run: ``ladder_limit``)
without a pass says so and keeps the last run. Each step is a full rerun of the job. Each
attempt records why the next dilation was chosen, and the result why the kept one was.

The one ladder of ``bench broadcast --auto-dilation`` and ``experiment run --auto-dilation`` (per
point, through the runner's ``auto_dilation`` hook).
"""

from __future__ import annotations

import math

from clusterlab.diagnose.fidelity import JIFFY_S, JIFFY_SHARE_MAX
from clusterlab.errors import ConfigError

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


def why_next(k: float, fidelity: dict, rto_min_s: float) -> str:
    """In words, why the ladder goes from ``k`` to ``next_dilation(k, fidelity, rto_min_s)``.

    >>> why_next(1.0, {"checks": [{"check": "cpu", "ok": False}]}, 0.2)
    'cpu failed: twice the dilation (nothing predicts how much CPU a higher one frees)'
    """
    failed = [c["check"] for c in fidelity.get("checks", []) if not c["ok"]]
    if failed and set(failed) <= {"timer"}:
        return (f"only the timer failed: {timer_dilation(rto_min_s):g} is the smallest whole dilation at which the "
                f"RTO min ({rto_min_s * 1000:g} ms) as run spans {1 / JIFFY_SHARE_MAX:g} jiffies of 4 ms")
    return (f"{', '.join(failed) or 'the check'} failed: twice the dilation (nothing predicts how much CPU a higher "
            "one frees)" + (" and at least the timer's" if "timer" in failed else ""))


def ladder_limit(tcp, start: float, max_dilation: float = MAX_DILATION) -> tuple[float, str]:
    """The highest dilation the ladder may try from ``start`` and why: ``max_dilation``, or
    lower, the highest at which the kernel takes ``tcp``'s RTO max as run (MAX x k at most
    120 s). ``ConfigError`` (one line) when not even ``start`` is allowed.

    >>> from clusterlab.net.transport_config import TransportConfig
    >>> ladder_limit(TransportConfig(rto_min="200ms", rto_max="60s"), 1.0)
    (2.0, 'MAX 60s x k must lie in 1000..120000 ms (net.ipv4.tcp_rto_max_ms)')
    >>> ladder_limit(TransportConfig(), 4.0, 2.0)
    Traceback (most recent call last):
    clusterlab.errors.ConfigError: --max-dilation 2 is below the starting dilation 4 (the ladder starts there)
    """
    from clusterlab.cluster.testbed.dilation import dilation_bounds

    if max_dilation < start:
        raise ConfigError(f"--max-dilation {max_dilation:g} is below the starting dilation {start:g} (the ladder "
                          "starts there)")
    _lo, hi, why = dilation_bounds(tcp)
    if hi < start:
        raise ConfigError(f"--auto-dilation: the starting dilation {start:g} cannot express the RTO max ({why}: "
                          f"k <= {hi:.3g})")
    return (float(max_dilation), "--max-dilation") if max_dilation <= hi else (float(hi), why)


def auto_dilation(run_at, start: float, rto_min_s: float, max_dilation: float = MAX_DILATION,
                  limit_why: str = "--max-dilation") -> dict:
    """Run ``run_at(k)`` (the job at dilation k; returns ``(result, fidelity)``, the fidelity
    of its run as ``diagnose`` gives it) from ``start`` up the ladder until a run passes.
    Returns ``{"dilation", "ok", "why", "result", "attempts": [{"dilation", "ok", "line",
    "next"}, ...]}``: the passing run (or the last one tried when none passed below
    ``max_dilation``, whose reason is ``limit_why``); ``next``: why the next rung was chosen."""
    k, attempts = float(start), []
    while True:
        result, fid = run_at(k)
        attempts.append({"dilation": k, "ok": bool(fid["ok"]), "line": fid["line"]})
        if fid["ok"]:
            why = (f"dilation {k:g} is the smallest tried at which the run passes the fidelity check"
                   + (f" (not CPU-bound: {_check_text(fid, 'cpu')})" if _check_text(fid, "cpu") else ""))
            break
        nk = next_dilation(k, fid, rto_min_s)
        if nk > max_dilation:
            why = (f"no run passed: the next rung, dilation {nk:g}, is above the highest allowed, {max_dilation:g} "
                   f"({limit_why}); the last run is kept and its times cannot be believed")
            break
        attempts[-1]["next"] = f"dilation {nk:g}: {why_next(k, fid, rto_min_s)}"
        k = nk
    return {"dilation": k, "ok": attempts[-1]["ok"], "why": why, "result": result, "attempts": attempts}


def _check_text(fid: dict, name: str) -> str:
    return next((c.get("text", "") for c in fid.get("checks", []) if c["check"] == name), "")


def record(auto: dict, max_dilation: float) -> dict:
    """The ladder as a run records it (JSON: no result)."""
    return {"attempts": auto["attempts"], "dilation": auto["dilation"], "ok": auto["ok"], "why": auto["why"],
            "max_dilation": max_dilation}


def attempt_lines(auto: dict, max_dilation: float = MAX_DILATION) -> list[str]:
    """What the command prints: each run's dilation and fidelity verdict, and which was kept."""
    out = []
    for a in auto["attempts"]:
        out.append(f"auto-dilation: dilation {a['dilation']:g}: {a['line'].split(' - ')[0]}")
        if a.get("next"):
            out.append(f"auto-dilation:   next {a['next']}")
    if auto["ok"]:
        out.append(f"auto-dilation: kept the run at dilation {auto['dilation']:g}, the smallest tried that passes"
                   + (f" ({auto['why'].split(' (', 1)[1]}" if " (not CPU-bound" in auto.get("why", "") else ""))
    else:
        out.append(f"auto-dilation: no run passed up to dilation {max_dilation:g}; kept the last one "
                   f"(dilation {auto['dilation']:g}): its times cannot be believed")
    return out
