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

The one ladder of ``bench broadcast --auto-dilation``, ``experiment run --auto-dilation`` (per
point, through the runner's ``auto_dilation`` hook) and ``mine --testbed NAME --auto-dilation``,
whose real job is the first rung and whose higher rungs replay it (``mine_auto_dilation``: a
real job's computation would not slow down with the network).
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


# --- mine --testbed NAME --auto-dilation: higher rungs replay the recorded job ------------------

def replay_name(testbed: str) -> str:
    """A fresh testbed name for a replay beside ``testbed`` (its first 4 characters, then ``r``
    and 2 random hex digits: 1-8 lowercase letters and digits)."""
    import os

    return f"{testbed[:4]}r{os.urandom(1).hex()}"


def undilated_passes(passes: list, k: float) -> list:
    """A replay's per-pass rows (``ReplayRun.passes``) in the form of ``mine --nodes``'s passes,
    times divided by the dilation ``k``: each rank's ``t_total``, ``t_compute`` (its waits for
    the recorded computation), ``t_comm`` and ``t_rto`` (its ``tcpi_total_rto_time``, at most its
    communication).

    >>> p = undilated_passes([{"pass": 1, "t_total": 4.0, "bytes_sent": 8, "messages_sent": 2, "timeouts": 0,
    ...     "retransmissions": 0, "ranks": [{"rank": 0, "t_total": 4.0, "t_wait_compute": 1.0, "t_comm": 3.0,
    ...     "rto_time_ms": 800, "bytes_sent": 8, "messages_sent": 2, "timeouts": 1}]}], 4.0)
    >>> p[0]["t_total"], p[0]["ranks"][0]["t_compute"], p[0]["ranks"][0]["t_comm"], p[0]["ranks"][0]["t_rto"]
    (1.0, 0.25, 0.75, 0.2)
    """
    out = []
    for p in passes:
        ranks = []
        for x in p["ranks"]:
            comm = max(0.0, x["t_total"] - x["t_wait_compute"])
            ranks.append({"rank": x["rank"], "t_total": x["t_total"] / k, "t_compute": x["t_wait_compute"] / k,
                          "t_comm": comm / k, "t_rto": min(comm, x.get("rto_time_ms", 0) / 1000.0) / k,
                          "bytes_sent": x.get("bytes_sent", 0), "messages_sent": x.get("messages_sent", 0),
                          "timeouts": x.get("timeouts", 0), "retransmissions": x.get("retransmissions", 0)})
        out.append({"pass": p["pass"], "t_total": p["t_total"] / k, "bytes_sent": p.get("bytes_sent", 0),
                    "messages_sent": p.get("messages_sent", 0), "retransmissions": p.get("retransmissions", 0),
                    "timeouts": p.get("timeouts", 0), "ranks": ranks})
    return out


def replay_mining_at(record_dir: str, testbed, k: float, summary: dict) -> dict:
    """Replay the job recorded in ``record_dir`` (``run_parallel(record=...)``) on a fresh testbed
    of ``testbed``'s topology and TCP settings (a ``TestbedNetwork`` that is up) at dilation
    ``k``: each rank sends the recorded messages and waits its recorded CPU seconds times k, as
    a study's ``compute=replay`` does. Returns ``summary`` (the real run's, ``mine --json``'s)
    with the replay's undilated passes and job time, and the cluster, transport, spare CPU,
    load and monitor facts of the replay (what ``diagnose_summary`` judges)."""
    import dataclasses

    from clusterlab.cluster import Testbed
    from clusterlab.cluster.testbed import TestbedNetwork
    from clusterlab.diagnose.observe import observed
    from clusterlab.mining.parallel import replay_parallel

    topo = dataclasses.replace(testbed.topo, dilation=float(k))
    with TestbedNetwork(topo, name=replay_name(testbed.name), transport=testbed.transport) as net:
        cluster = Testbed(net)
        with observed(cluster) as facts:
            rr = replay_parallel(record_dir, cluster=cluster, compute="cpu", scale=k, runtime_scale=k,
                                 setup_timeout=max(60.0, 3.0 * len(net.hosts)))
    out = {**summary, "passes": undilated_passes(rr.passes, k),
           "seconds": {"job": round(rr.job_s / k, 6), "replay_wall": round(rr.wall_s, 4)},
           "replay": {"dilation": k, "compute": "cpu", "testbed": net.name,
                      "job_s_as_run": round(rr.job_s, 6)}}
    for key in ("monitor", "cpu_spare", "cluster", "transport"):
        out.pop(key, None)
    out.update({k2: v for k2, v in facts.items() if k2 != "machine"})
    out["options"] = {**summary.get("options", {}), **({"machine": facts["machine"]} if "machine" in facts else {})}
    return out


def mine_auto_dilation(summary: dict, fidelity: dict, record_dir: str, testbed, max_dilation: float) -> dict:
    """``mine --testbed NAME --auto-dilation``: the ladder (``auto_dilation``) with the real run
    on ``testbed`` as its first rung (``summary`` and its ``fidelity``, at the testbed's
    dilation, 1) and replays of it (``replay_mining_at``) above; ``result`` is the kept run's
    summary. A real job cannot itself run dilated: its computation would not slow down."""
    from clusterlab.diagnose import diagnose_summary
    from clusterlab.diagnose.fidelity import _rto_min_s

    k0 = float(testbed.topo.dilation)
    limit, why = ladder_limit(testbed.transport, k0, max_dilation)

    def run_at(k):
        if k == k0:
            return summary, fidelity
        s = replay_mining_at(record_dir, testbed, k, summary)
        return s, diagnose_summary(s)["jobs"][0]["fidelity"]

    auto = auto_dilation(run_at, k0, _rto_min_s(testbed.transport.to_dict()), limit, why)
    auto["limit"] = limit
    return auto


def check_mine(testbed_name: str | None, backend: str, dilation: float | None = None) -> None:
    """Refuse (one line) what ``mine --auto-dilation`` cannot do."""
    if not testbed_name:
        raise ConfigError("--auto-dilation needs --testbed NAME (a local run has nothing emulated to dilate)")
    if backend != "tcp":
        raise ConfigError("--auto-dilation replays the job on the TCP mesh: drop --backend mpi")
    if dilation is not None and dilation != 1.0:
        raise ConfigError(f"--auto-dilation: testbed {testbed_name} runs at dilation {dilation:g}, and the real job's "
                          "computation does not slow down with it: bring it up at --dilation 1 (the ladder's higher "
                          "rungs replay the job dilated)")
