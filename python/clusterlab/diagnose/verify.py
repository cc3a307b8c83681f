"""``diagnose --verify``: rerun a parallel mining job as recorded and with the recommended
setting, one after the other on the same cluster, and compare the measured gain with the
predicted one. Both are rerun (not the old record against a new run): on a shared machine the
load between the record and now would otherwise be counted as the fix's gain."""

from __future__ import annotations

import json
import os
from pathlib import Path

from clusterlab.errors import ConfigError


def _input_path(summary: dict, run_dir: Path) -> str:
    f = summary.get("file")
    if not f:
        raise ConfigError(f"{run_dir}: --verify needs the job's input, which this record does not name (record it "
                          "with `clusterlab mine ... --nodes N --json > DIR/summary.json`)")
    for cand in (Path(f), run_dir / f, run_dir.parent / f):
        if cand.exists():
            return str(cand)
    raise ConfigError(f"{run_dir}: --verify: the job's input {f} is not there any more")


def _algorithm(summary: dict) -> str:
    algo = str(summary.get("options", {}).get("algorithm") or "auto")
    if algo in ("auto", "hpa", "hpa-eld", "cd", "pfp") and summary.get("algorithm"):
        algo = str(summary["algorithm"]).split()[0]  # "hpa x2 (tcp)": what auto chose
    return algo


def verify(run_dir, job, diagnosis: dict, out_dir=None) -> dict:
    """Rerun ``job`` (a mining ``run.Job``) as recorded and with its dominant loss's fix."""
    from clusterlab.diagnose.record import record_mining
    from clusterlab.mining.parallel import ParallelConfig
    from clusterlab.net.transport_config import TransportConfig

    run_dir = Path(run_dir)
    dom = diagnosis.get("dominant")
    if job.kind != "mining":
        raise ConfigError(f"{run_dir}: --verify reruns parallel mining runs (`clusterlab mine --nodes N --json` "
                          "records); rerun a study with `clusterlab experiment run ... --set` instead")
    if dom is None or not dom.get("apply"):
        what = "no loss was found" if dom is None else f"its fix ({dom['fix']}) is not a setting a rerun can take"
        raise ConfigError(f"{run_dir}: nothing to verify: {what}")
    apply = dom["apply"]
    if "cluster" in apply:
        raise ConfigError(f"{run_dir}: --verify cannot change the cluster ({dom['fix']}); rerun on a testbed with it")
    if set(apply) - {"transport", "options"}:
        raise ConfigError(f"{run_dir}: --verify reruns transport settings and the block size, not this fix "
                          f"({dom['fix']}); rerun the job with it")
    summary = json.loads(Path(job.source).read_text())
    path = _input_path(summary, run_dir)
    opts = summary.get("options", {})
    base_t = {k: v for k, v in (summary.get("transport") or {}).items() if v is not None}
    try:
        before = TransportConfig(**base_t) if base_t else None
        after = TransportConfig(**{**base_t, **apply.get("transport", {})})
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{job.source}: transport settings cannot be rerun ({e})") from None
    cfg = {"block_bytes": int(opts.get("block_size") or 8192), "partition": opts.get("partition") or "prefix"}
    cfg_after = dict(cfg)
    if "block_size" in apply.get("options", {}):
        cfg_after["block_bytes"] = int(apply["options"]["block_size"])
    out = Path(out_dir or run_dir / "verify")
    kw = {"nodes": int(opts.get("nodes") or job.nodes or 2), "algorithm": _algorithm(summary),
          "min_support": opts.get("min_support", 0.01)}
    runs = {}
    for name, t, c in (("as_recorded", before, cfg), ("with_fix", after, cfg_after)):
        record_mining(out / name, path, transport=t, config=ParallelConfig(**c), **kw)
        with open(os.path.join(out / name, "run.json")) as f:
            runs[name] = float(json.load(f)["seconds"]["job"])
    measured = runs["as_recorded"] - runs["with_fix"]
    predicted = dom["predicted_gain_s"]
    return {"cause": dom["cause"], "fix": dom["fix"], "apply": apply, "predicted_gain_s": predicted,
            "method": dom["method"], "rerun_as_recorded_s": round(runs["as_recorded"], 6),
            "rerun_with_fix_s": round(runs["with_fix"], 6), "measured_gain_s": round(measured, 6),
            "measured_over_predicted": round(measured / predicted, 3) if predicted else None,
            # shares of the job: the prediction was made on the recorded run, the gain is measured on
            # two reruns, and a shared machine's load between them changes the seconds, not the share
            "predicted_share": round(predicted / job.seconds, 3) if predicted and job.seconds else None,
            "measured_share": round(measured / runs["as_recorded"], 3) if runs["as_recorded"] else None,
            "runs": str(out)}


def _pct(x) -> str:
    return "-" if x is None else f"{x:.0%}"


def verify_lines(v: dict) -> list[str]:
    ratio = v["measured_over_predicted"]
    return [f"verify: {v['fix']}",
            f"  rerun as recorded {v['rerun_as_recorded_s'] * 1000:.1f} ms, with the fix {v['rerun_with_fix_s'] * 1000:.1f} ms",
            f"  predicted gain {v['predicted_gain_s'] * 1000:.1f} ms ({v['method']}), measured {v['measured_gain_s'] * 1000:.1f} ms"
            + (f" ({ratio:.0%} of predicted)" if ratio is not None else ""),
            f"  as shares of the job: predicted {_pct(v['predicted_share'])}, measured {_pct(v['measured_share'])}",
            f"  runs in {v['runs']}"]
