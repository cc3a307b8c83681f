"""Fit the simulated cluster's loss/timeout model (clusterlab.cluster.simulated.loss) from testbed
rounds the project already records, and check it on rounds held out.

Training: the all-to-all broadcast rounds of results/seed000-fig2, seed000-fig3 and
seed000-buffer (table.parquet: 16 hosts, bridge and atm, linux and seed-era stacks, MIN 10 ms..1 s,
MAX 500 ms..40 s, atm port buffers 256..8192 cells) and bench/results/seed000_fig2_stack.json
(16, 32 and 100 hosts). Held out: bench/results/sim_validation.json's testbed points (8, 16 and 32
hosts, bridge, linux, default timers, 50 KB and 2 KB blocks: a separate run, and the only 8-host
and 2 KB rounds), where the round time flow + model is also compared with the testbed's median.
Each point is a median over its rounds of the wait the model stands for, the round's time
beyond what its links alone take ((hosts - 1) blocks into one port at the line rate: at these
lossy points, RTO waits and the other ranks' waits on them; the ranks' own ``rto_wait_s`` counts
only a rank's own sockets and misses waits on another rank's timeouts, so it is recorded beside,
``max_rank_rto_wait``, not fitted), and the timeouts per round. No testbed, no root: reads records only.

    .venv/bin/python bench/sim_loss_fit.py

Writes bench/results/sim_loss_model.json with the bench harness's provenance
(``clusterlab.bench.harness``: commit, machine, load, spare CPU, autogroup).
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from clusterlab.bench import harness
from clusterlab.cluster.simulated.loss import LossModel, fit
from clusterlab.units import parse_duration, parse_rate, parse_size

ROOT = Path(__file__).resolve().parents[1]
CELL = 53  # bytes per ATM cell: an atm port buffer given in cells
LINUX_RTO_MAX = 120.0


def _buffer(text) -> int:
    text = str(text)
    return int(text[:-5]) * CELL if text.endswith("cells") else parse_size(text, "buffer")


def _excess(seconds: float, shape: dict, rate: float) -> float:
    """The round's time beyond what its links alone take ((hosts - 1) blocks through one port at
    the line rate; an atm cell carries 48 of its 53 bytes): the wait the model stands for."""
    payload = rate * (48 / 53 if shape["switch"] == "atm" else 1.0)
    return max(0.0, seconds - (shape["hosts"] - 1) * (shape["size"] + 40) * 8 / payload)


def _group(rows, key, shape, source):
    groups = {}
    for k, r in zip(key, rows, strict=True):
        groups.setdefault(k, []).append(r)
    out = []
    for k, rs in groups.items():
        out.append({**shape[k], "rounds": len(rs), "source": source,
                    "rto_wait": statistics.median(r["wait"] for r in rs),
                    "timeouts": statistics.median(r["timeouts"] for r in rs),
                    "max_rank_rto_wait": statistics.median(r["max_rank_rto_wait"] for r in rs),
                    "seconds": statistics.median(r["seconds"] for r in rs)})
    return out


def from_tables() -> list[dict]:
    import pandas as pd

    points = []
    for study in ("seed000-fig2", "seed000-fig3", "seed000-buffer"):
        t = pd.read_parquet(ROOT / "results" / study / "table.parquet")
        if "failed" in t:
            t = t[t["failed"].isna()]
        t = t[t["per_rank"].notna() & t["seconds"].notna()]
        rows, keys, shapes = [], [], {}
        for _, r in t.iterrows():
            rto_max = r.get("rto_max")
            shape = {"hosts": int(r["hosts"]), "size": parse_size(r["size"], "size"), "buffer": _buffer(r["buffer"]),
                     "rto_min": parse_duration(r["rto_min"], "rto_min"),
                     "rto_max": LINUX_RTO_MAX if rto_max is None or (isinstance(rto_max, float) and math.isnan(rto_max))
                     else parse_duration(rto_max, "rto_max"),
                     "stack": r["stack"] or "linux", "switch": r.get("switch") or "bridge"}
            k = tuple(sorted(shape.items()))
            shapes[k] = shape
            keys.append(k)
            ranks = json.loads(r["per_rank"])
            rows.append({"wait": _excess(float(r["seconds"]), shape, parse_rate(r["rate"], "rate")),
                         "max_rank_rto_wait": max(x["rto_wait_s"] for x in ranks),
                         "timeouts": float(r["timeouts"]), "seconds": float(r["seconds"])})
        points += _group(rows, keys, shapes, f"results/{study}")
    return points


def from_stack_json() -> list[dict]:
    d = json.loads((ROOT / "bench" / "results" / "seed000_fig2_stack.json").read_text())
    points = []
    for tag, run in d["runs"].items():
        s = run["settings"]
        tr = dict(kv.split("=", 1) for kv in s["transport"].split(","))
        shape = {"hosts": s["hosts"], "size": s["size"], "buffer": s["buffer_bytes"],
                 "rto_min": parse_duration(tr.get("rto_min", "200ms")),
                 "rto_max": parse_duration(tr["rto_max"]) if "rto_max" in tr else LINUX_RTO_MAX,
                 "stack": tr.get("stack", "linux"), "switch": s.get("switch", "bridge")}
        rows = [{"wait": _excess(r["seconds"], shape, parse_rate(s["rate"], "rate")),
                 "max_rank_rto_wait": max(x["rto_wait_s"] for x in r["ranks"]),
                 "timeouts": float(r["timeouts"]), "seconds": r["seconds"]}
                for r in run["reps"] if r.get("ranks")]
        if rows:
            points += _group(rows, [tag] * len(rows), {tag: shape}, f"bench/results/seed000_fig2_stack.json:{tag}")
    return points


def held_out() -> list[dict]:
    d = json.loads((ROOT / "bench" / "results" / "sim_validation.json").read_text())
    points = []
    for p in d["points"]:
        tb = p["testbed"]
        shape = {"hosts": p["hosts"], "size": p["size_bytes"], "buffer": parse_size(d["buffer"]),
                 "rto_min": 0.2, "rto_max": LINUX_RTO_MAX, "stack": "linux", "switch": d["switch"]}
        points.append({**shape, "rounds": len(tb["seconds"]), "source": "bench/results/sim_validation.json",
                       "rto_wait": statistics.median(_excess(x, shape, parse_rate(d["rate"])) for x in tb["seconds"]),
                       "slowest_rank_rto_wait": statistics.median(tb["slowest_rank_rto_wait_s"]),
                       "timeouts": statistics.median(tb["timeouts"]), "seconds": tb["median_s"],
                       "flow_seconds": p["calibrated"].get("flow_seconds", p["calibrated"]["seconds"])})
    return points


def evaluate(m: LossModel, points: list[dict]) -> list[dict]:
    out = []
    for p in points:
        shape = {k: p[k] for k in ("hosts", "size", "buffer", "rto_min", "rto_max", "stack", "switch")}
        w = m.rto_wait(**shape)
        to = m.timeouts(**{k: shape[k] for k in ("hosts", "size", "buffer", "stack", "switch")})
        e = {**p, "model_rto_wait": w, "model_timeouts": to, "wait_error_s": w - p["rto_wait"]}
        if "flow_seconds" in p:
            e["flow_plus_loss_s"] = p["flow_seconds"] + w
            e["flow_error"] = p["flow_seconds"] / p["seconds"] - 1
            e["flow_plus_loss_error"] = e["flow_plus_loss_s"] / p["seconds"] - 1
        out.append(e)
    return out


def summary(rows: list[dict]) -> dict:
    err = [abs(r["wait_error_s"]) for r in rows]
    rel = [abs(r["model_rto_wait"] - r["rto_wait"]) / r["rto_wait"] for r in rows if r["rto_wait"] > 0.01]
    return {"points": len(rows), "median_abs_wait_error_s": statistics.median(err),
            "max_abs_wait_error_s": max(err),
            "median_rel_wait_error": statistics.median(rel) if rel else None}


def main(argv=None) -> int:
    ap = harness.parser(__doc__, ROOT / "bench" / "results" / "sim_loss_model.json", output_aliases=("--out",))
    run = harness.start(ap, argv)
    train = from_tables() + from_stack_json()
    test = held_out()
    m = fit(train)
    tr, te = evaluate(m, train), evaluate(m, test)
    rec = {"what": "loss/timeout model for the simulated cluster (clusterlab.cluster.simulated.loss): fitted "
                   "parameters, training and held-out points (medians per point)",
           "fit": m.as_dict(), "train": summary(tr), "held_out": summary(te),
           "train_points": tr, "held_out_points": te}
    run.say(json.dumps(m.as_dict()))
    run.say("train", rec["train"])
    run.say("held out", rec["held_out"])
    for r in te:
        run.say(f"  held out {r['hosts']} hosts {r['size']} B: wait {r['rto_wait']:.3f} s, model {r['model_rto_wait']:.3f} s;"
                f" round {r['seconds'] * 1e3:.1f} ms, flow {r['flow_error']:+.1%}, flow+loss {r['flow_plus_loss_error']:+.1%}")
    run.write(rec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
