"""The diagnosis corpus, whole: every scenario of ``clusterlab.diagnose.scenarios`` (testbed ones
as root), whether the injected cause is named first, and the dominant fix rerun beside the run
as recorded: predicted against measured gain. A script, not a test.

Reruns (local ones as three alternating pairs, as recorded then with the fix, medians
compared; testbed ones as the median of their 5 repetitions): a transport or block-size fix by
``diagnose.verify`` (both settings rerun one after the other); the skewed partition with its input shuffled (the fix: an equal share of the work); the
CPU-starved rank without its cgroup's CPU limit; the per-call program with persistent
connections; the job reading from the iSCSI target rerun, then on the local file (the study's
``compare_local``); the tiny job sequentially (the launch fix); testbed runs with the fix's setting
(``--transport``/``--host-queue``/``--buffer``, no ``--host-rate``/``--loss``/``--sites``). The
load average is recorded beside every scenario, and the record carries the bench harness's
provenance for the whole run (``clusterlab.bench.harness``: commit, machine, load, the
machine's spare CPU, autogroup; 2 CPUs shared with other users: their load is part of what is
measured; the fidelity check of each local run says whether it slowed every rank down).

    python bench/diagnose_corpus.py [--quick-only] [-o bench/results/diagnose_corpus.json]
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from clusterlab.bench import harness
from clusterlab.diagnose import diagnose_dir
from clusterlab.diagnose import scenarios as sc
from clusterlab.diagnose.run import load
from clusterlab.diagnose.verify import verify
from clusterlab.monitor.provenance import load_average

ROOT = Path(__file__).resolve().parents[1]


def _kept(dirs: list, d):
    dirs.append(d)
    return d


def _job_s(d) -> float:
    return float(json.loads((Path(d) / "run.json").read_text())["seconds"]["job"])


def _median_s(d) -> float:
    return float(load(d)[0].seconds)


PAIRS = 3  # local reruns: as recorded, then with the fix, this many times; the medians are compared


def _pairs(before, after) -> tuple[float, float]:
    """Median seconds of ``before(i)`` and ``after(i)`` run alternately ``PAIRS`` times (a local
    run's seconds move with this shared machine's load from one run to the next)."""
    a, b = [], []
    for i in range(PAIRS):
        a.append(before(i))
        b.append(after(i))
    return statistics.median(a), statistics.median(b)


def _share(run_dir, cause: str) -> float | None:
    """The predicted gain of ``cause`` (the launch for "launch") as a share of the run, diagnosed
    on ``run_dir``: a rerun as recorded, so that the prediction and the fix's rerun are made
    back to back, at the same load."""
    j = diagnose_dir(run_dir)["jobs"][0]
    if cause == "launch":
        la = j.get("launch")
        return la["predicted_gain_s"] / (j["seconds"] + la["seconds"]) if la else None
    c = next((c for c in j["causes"] if c["cause"] == cause), None)
    return c["predicted_gain_s"] / j["seconds"] if c and c["predicted_gain_s"] is not None and j["seconds"] else None


def rerun_gain(s: sc.Scenario, d: str, diag: dict, work: str) -> dict:
    out = _rerun_gain(s, d, diag, work)
    shares = [x for x in (_share(r, s.cause) for r in out.pop("as_recorded_dirs")) if x is not None]
    out["rerun_predicted_share"] = round(statistics.median(shares), 3) if shares else None
    return out


def _rerun_gain(s: sc.Scenario, d: str, diag: dict, work: str) -> dict:
    """(as recorded, with the fix) rerun seconds for the fix of the injected cause as diagnosed
    (the dominant loss's when the injected cause was not found)."""
    from clusterlab.diagnose.record import record_mining

    dom = next((c for c in diag["causes"] if c["cause"] == s.cause), diag["dominant"])
    w = Path(work)
    dirs: list = []  # the reruns as recorded, diagnosed again: the back-to-back predictions
    if s.name == "tiny_job":  # the launch's share is of the whole run (launch + job)
        import clusterlab

        path = os.path.join(work, "tiny.dat")

        def before(i):
            dirs.append(w / f"tiny_again{i}")
            record_mining(w / f"tiny_again{i}", path, min_support=0.05)
            return float(json.loads((w / f"tiny_again{i}" / "run.json").read_text())["seconds"]["mine"])

        def after(i):
            t = time.perf_counter()
            clusterlab.mine(path, min_support=0.05)
            return time.perf_counter() - t

        a, b = _pairs(before, after)
        return {"rerun_as_recorded_s": a, "rerun_with_fix_s": b, "predicted_gain_s": diag["launch"]["predicted_gain_s"],
                "fix": "sequential (no --nodes)", "recorded_s": diag["seconds"] + diag["launch"]["seconds"],
                "as_recorded_dirs": dirs}
    if s.name == "skewed_partition":
        lines = Path(work, "skewed.dat").read_text().splitlines()
        random.Random(0).shuffle(lines)
        Path(work, "shuffled.dat").write_text("\n".join(lines) + "\n")

        def run(name, data):
            def one(i):
                if name == "skew_again":
                    dirs.append(w / f"{name}{i}")
                record_mining(w / f"{name}{i}", w / data, algorithm="cd", min_support=0.01)
                return _job_s(w / f"{name}{i}")
            return one

        a, b = _pairs(run("skew_again", "skewed.dat"), run("skew_fixed", "shuffled.dat"))
        return {"rerun_as_recorded_s": a, "rerun_with_fix_s": b, "predicted_gain_s": dom["predicted_gain_s"],
                "fix": "input shuffled (an equal share of the work)", "as_recorded_dirs": dirs}
    if s.name == "cpu_starved":
        a, b = _pairs(lambda i: _job_s(_kept(dirs, sc.starved_rank_job(work, f"again{i}", starved=True))),
                      lambda i: _job_s(sc.starved_rank_job(work, f"unstarved{i}", starved=False)))
        return {"rerun_as_recorded_s": a, "rerun_with_fix_s": b, "predicted_gain_s": dom["predicted_gain_s"],
                "fix": "rank 1 without its CPU limit", "as_recorded_dirs": dirs}
    if s.name == "per_call_connections":
        mode = (dom.get("apply") or {}).get("env", {}).get("CLUSTERLAB_CONNECTIONS") or "per_call"
        a, b = _pairs(lambda i: _median_s(_kept(dirs, sc.program_run(work, f"again{i}", "per_call"))),
                      lambda i: _median_s(sc.program_run(work, f"fixed{i}", mode)))
        return {"rerun_as_recorded_s": a, "rerun_with_fix_s": b, "predicted_gain_s": dom["predicted_gain_s"],
                "fix": f"CLUSTERLAB_CONNECTIONS={mode}", "as_recorded_dirs": dirs}
    if s.name == "storage_reads":  # one more repetition: from the target, then the same job on the local file
        from clusterlab.report.study import load_run

        rows, _ = load_run(_kept(dirs, sc.storage_job(work, "again")))
        return {"rerun_as_recorded_s": float(rows[0]["seconds"]), "rerun_with_fix_s": float(rows[0]["local_seconds"]),
                "predicted_gain_s": dom["predicted_gain_s"], "fix": "the same job reading the local file",
                "as_recorded_dirs": dirs}
    if s.root:
        apply = dom.get("apply") or {}
        base = sc.BROADCAST_ARGS[s.name]
        fixed = list(base)

        def put(opt: str, value: str) -> None:  # the fix replaces the same setting in the recorded ones
            if opt in fixed:
                fixed[fixed.index(opt) + 1] = value
            else:
                fixed.extend([opt, value])

        for k, v in (apply.get("transport") or {}).items():
            opt = "--" + k.replace("_", "-")
            if opt in fixed:
                put(opt, str(v))
            elif "--transport" in fixed:
                i = fixed.index("--transport") + 1
                kept = [kv for kv in fixed[i].split(",") if kv.split("=")[0] != k]
                fixed[i] = ",".join([*kept, f"{k}={v}"])
            else:
                put("--transport", f"{k}={v}")
        if "host_queue" in apply.get("cluster", {}):
            put("--host-queue", apply["cluster"]["host_queue"])
        if "buffer" in apply.get("cluster", {}):
            put("--buffer", apply["cluster"]["buffer"])
        if "sites" in apply.get("cluster", {}):  # one site: no WAN line (its options go with it)
            for opt in ("--sites", "--wan-rate", "--wan-delay", "--wan-queue"):
                if opt in fixed:
                    i = fixed.index(opt)
                    del fixed[i:i + 2]
        for key, opt in (("host_rates", "--host-rate"), ("loss", "--loss")):  # the fix: every link at --rate, none lossy
            if key in apply.get("cluster", {}) and opt in fixed:
                i = fixed.index(opt)
                del fixed[i:i + 2]
        if not apply:
            put("--order", "shifted")
        again = _kept(dirs, sc._broadcast(work, s.name + "_again", *base))
        fix = sc._broadcast(work, s.name + "_fixed", *fixed)
        return {"rerun_as_recorded_s": _median_s(again), "rerun_with_fix_s": _median_s(fix),
                "predicted_gain_s": dom["predicted_gain_s"], "fix": " ".join(fixed), "as_recorded_dirs": dirs}
    vs = [verify(d, load(d)[0], {**diag, "dominant": dom}, out_dir=os.path.join(work, f"verify{i}")) for i in range(PAIRS)]
    return {"rerun_as_recorded_s": statistics.median(v["rerun_as_recorded_s"] for v in vs),
            "rerun_with_fix_s": statistics.median(v["rerun_with_fix_s"] for v in vs),
            "predicted_gain_s": vs[0]["predicted_gain_s"], "fix": vs[0]["fix"],
            "as_recorded_dirs": [Path(v["runs"]) / "as_recorded" for v in vs]}


def _load1() -> float | None:
    la = load_average()
    return round(la[0], 2) if la else None


def main(argv=None) -> int:
    ap = harness.parser(__doc__, ROOT / "bench" / "results" / "diagnose_corpus.json")
    ap.add_argument("--quick-only", action="store_true", help="Only the scenarios that need no root.")
    run = harness.start(ap, argv)
    a = run.args
    root = os.geteuid() == 0
    rows = []
    with tempfile.TemporaryDirectory(prefix="diagnose-corpus-") as tmp:
        for s in sc.SCENARIOS:
            if s.root and (a.quick_only or not root):
                continue
            work = os.path.join(tmp, s.name)
            os.makedirs(work)
            load0 = _load1()
            t = time.perf_counter()
            d = s.run(work)
            diag = diagnose_dir(d)["jobs"][0]
            first = sc.named_first(diag)
            row = {"scenario": s.name, "injected": s.injected, "expected": s.cause, "named_first": first,
                   "named_first_ok": first == s.cause, "in_suite": s.ci, "job_s": diag["seconds"],
                   "fidelity_ok": diag["fidelity"]["ok"], "fidelity": diag["fidelity"]["line"],
                   "machine_load_s": next((c["seconds"] for c in diag["causes"] if c["cause"] == "machine_load"), 0.0)}
            try:
                g = rerun_gain(s, d, diag, work)
                measured = g["rerun_as_recorded_s"] - g["rerun_with_fix_s"]
                pred = g["predicted_gain_s"]
                row.update({k: round(v, 4) if isinstance(v, float) else v for k, v in g.items()})
                row["measured_gain_s"] = round(measured, 4)
                row["measured_over_predicted"] = round(measured / pred, 3) if pred else None
                # as shares of the job: the prediction is made on the recorded run, the gain measured on
                # two reruns; on a shared machine the load in between changes every time, not the share
                base = g.pop("recorded_s", diag["seconds"])
                ps = pred / base if pred and base else None
                ms = measured / g["rerun_as_recorded_s"] if g["rerun_as_recorded_s"] else None
                row["predicted_share"] = round(ps, 3) if ps is not None else None
                row["measured_share"] = round(ms, 3) if ms is not None else None
                row["gain_within_30pct"] = ps is not None and ms is not None and abs(ms - ps) <= 0.3 * ps
                rs = row.get("rerun_predicted_share")
                row["gain_within_30pct_back_to_back"] = rs is not None and ms is not None and abs(ms - rs) <= 0.3 * rs
            except Exception as e:  # noqa: BLE001 - a rerun that fails is recorded, the corpus goes on
                row["rerun_error"] = f"{type(e).__name__}: {e}"[:300]
            row["seconds"] = round(time.perf_counter() - t, 1)
            row["load_before_after"] = [load0, _load1()]
            run.say(json.dumps(row))
            rows.append(row)
    doc = {"scenarios": len(rows), "named_first": sum(r["named_first_ok"] for r in rows),
           "gain_within_30pct": sum(bool(r.get("gain_within_30pct")) for r in rows),
           "gain_within_30pct_back_to_back": sum(bool(r.get("gain_within_30pct_back_to_back")) for r in rows),
           "gain_means": ("measured share of the fix's gain (reruns as recorded and with the fix) within 30% of the "
                          "predicted share: gain_within_30pct, predicted on the recorded run; "
                          "gain_within_30pct_back_to_back, predicted on the reruns as recorded (median), each "
                          "diagnosed just before its fix's rerun, at the same load"),
           "loaded_machine_flagged": [r["scenario"] for r in rows if not r["fidelity_ok"]],
           "root": root, "runs": rows}
    run.say({k: v for k, v in doc.items() if k != "runs"})
    run.write(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
