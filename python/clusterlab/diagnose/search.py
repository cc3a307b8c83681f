"""Whether a ``clusterlab tune auto`` search can be believed: the fidelity check
(``fidelity.check``) of every visit of every setting, and the search's verdict in one line.

A search ranks settings by their runs' times. A setting whose runs fail the check (a CPU-bound
machine, an RTO min of a few 4 ms jiffies as run) has times that are partly the emulation's, so
the ranking, and the setting chosen, cannot be believed; a search at another ``--dilation``
that passes can. Each visit (one launch of the workload at one setting: its warm-up and runs)
is observed as ``mine --testbed`` observes its job (``observe.observed``: the monitor of the
testbed's hosts and switch ports, this machine's spare CPU, the settings in force, with the
setting's own RTO bounds undilated, which the timer check multiplies by the dilation).
``search_fidelity`` judges the visits: a setting passes when every visit of it does, the search
when every setting visited does. When it fails, the dilation to search at again is the
``--auto-dilation`` ladder's next rung (``dilation.next_dilation``) from the highest any failing
setting needs: the smallest that passes when only the timer failed, twice the dilation when
anything else did (nothing predicts how much CPU a higher one frees).
"""

from __future__ import annotations

import contextlib

from clusterlab.diagnose.dilation import next_dilation, why_next
from clusterlab.diagnose.fidelity import _rto_min_s, check
from clusterlab.diagnose.run import Job, _cluster_of
from clusterlab.errors import ConfigError


@contextlib.contextmanager
def observe_visit(tb, setting: dict):
    """The ``watch`` hook of ``tune.auto.tune_auto``: what ``observed`` records of testbed ``tb``
    (a ``TestbedNetwork`` that is up) over one visit of ``setting``."""
    from clusterlab.cluster import Testbed
    from clusterlab.diagnose.observe import observed
    from clusterlab.tune.auto import transport_of

    with observed(Testbed(tb), transport_of(setting)) as facts:
        yield facts


def visit_fidelity(visit: dict) -> dict:
    """The fidelity verdict of one visit (its ``observed`` facts)."""
    job = Job(label=visit.get("setting", "visit"), kind="monitor", seconds=0.0,
              cluster=_cluster_of(visit.get("cluster") or {}),
              transport={k: v for k, v in (visit.get("transport") or {}).items() if v is not None},
              cpu_spare=visit.get("cpu_spare"),
              monitor=visit["monitor"] if isinstance(visit.get("monitor"), dict) else None)
    return check(job)


def _failed(fid: dict) -> list[str]:
    return [c["check"] for c in fid.get("checks", []) if not c["ok"]]


def search_fidelity(visits: list[dict], dilation: float, chosen: str | None = None) -> dict:
    """The verdict of a search from its visits (``tune_auto(watch=observe_visit)``'s ``visits``:
    each ``{"setting", "phase", "runs", **observed facts}``) at ``dilation``; ``chosen``: the
    setting the search chose (text). Returns ``{"dilation", "ok", "line", "settings": [{"setting",
    "ok", "visits", "failed_visits", "failed", "line"}], "chosen_ok", "next_dilation", "why",
    "visits": [each visit with its "ok" and "line"]}``; ``next_dilation`` (None when it
    passes) the dilation to search at again, ``why`` why that one."""
    k = float(dilation)
    per: dict[str, dict] = {}
    judged = []
    for v in visits:
        fid = visit_fidelity(v)
        judged.append({**v, "ok": fid["ok"], "line": fid["line"]})
        s = per.setdefault(v.get("setting"), {"setting": v.get("setting"), "ok": True, "visits": 0, "failed_visits": 0,
                                              "failed": [], "line": fid["line"], "_fid": fid, "_rto": 0.0})
        s["visits"] += 1
        s["_rto"] = _rto_min_s(v.get("transport") or {})
        if not fid["ok"]:
            if s["ok"]:  # the first failing visit's line stands for the setting
                s["line"], s["_fid"] = fid["line"], fid
            s["ok"] = False
            s["failed_visits"] += 1
            s["failed"] += [c for c in _failed(fid) if c not in s["failed"]]
        elif s["ok"]:
            s["line"], s["_fid"] = fid["line"], fid  # the last visit's, while every visit passed
    settings = list(per.values())
    bad = [s for s in settings if not s["ok"]]
    out: dict = {"dilation": k, "ok": not bad and bool(settings), "settings": [], "chosen": chosen,
                 "chosen_ok": per[chosen]["ok"] if chosen in per else None, "next_dilation": None, "why": None}
    if not settings:
        out["line"] = "fidelity: not judged (no setting was visited with the monitor)"
    elif not bad:
        ref = per.get(chosen) or settings[-1]
        detail = ref["line"].split(" - ", 1)[1] if " - " in ref["line"] else ""
        out["line"] = (f"fidelity: PASS - every setting's runs pass the check at dilation {k:g} ({len(settings)} "
                       f"settings, {len(judged)} visits); " + (f"the chosen {ref['setting']}'s: " if ref is per.get(chosen)
                                                                else f"{ref['setting']}'s: ") + detail)
    else:
        nexts = []
        for s in bad:  # every failed check of every visit of the setting: the rung it needs
            merged = {"checks": [{"check": c, "ok": False} for c in s["failed"]]}
            nexts.append((next_dilation(k, merged, s["_rto"]), s, merged))
        nk, worst, merged = max(nexts, key=lambda x: x[0])
        out["next_dilation"] = nk
        out["why"] = f"{worst['setting']}: {why_next(k, merged, worst['_rto'])}"
        texts = {}
        for s in bad:
            for c in s["_fid"].get("checks", []):
                if not c["ok"]:
                    texts.setdefault(c["check"], c["text"])
        which = "; ".join(f"{s['setting']} ({', '.join(s['failed'])}" + ("; the chosen setting" if s["setting"] == chosen
                                                                        else "") + ")" for s in bad)
        among = f", not the chosen {chosen}" if out["chosen_ok"] else ""
        first = "; ".join(f"{name}: {t}" for name, t in texts.items())
        rerun = f"search again at --dilation {nk:g} ({out['why']})"
        try:
            from clusterlab.tune.auto import check_dilation

            check_dilation([dict(p.split("=", 1) for p in s["setting"].split(",")) for s in settings], nk)
        except ConfigError as e:  # a setting the kernel cannot take there: dropping it is the user's choice
            rerun += f"; but {e}: drop that setting from --grid"
        out["line"] = (f"fidelity: FAIL ({len(bad)} of {len(settings)} settings visited fail at dilation {k:g}{among}: "
                       f"{which}; {first}) - their times are partly the emulation's, so the ranking cannot be "
                       f"believed: {rerun}")
    for s in settings:
        out["settings"].append({key: v for key, v in s.items() if not key.startswith("_")})
    out["visits"] = judged
    return out


def setting_lines(result: dict) -> list[str]:
    """What ``tune auto`` prints before the search's line: each failing setting's verdict."""
    return [f"fidelity of {s['setting']} ({s['failed_visits']} of {s['visits']} visits fail): "
            f"{s['line'].split(' - ')[0].removeprefix('fidelity: ')}" for s in result["settings"] if not s["ok"]]
