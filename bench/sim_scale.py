"""How long and how much memory one all-to-all broadcast round takes to simulate, by hosts.

One round of seed 000's broadcast (``size`` to every other host, the dissemination barriers
around it) on ``Simulated(StarTopo(hosts=N, rate="155Mbit"))`` with the calibration record, one
engine process per host count: its wall time and peak resident memory (the engine's own
``ru_maxrss``; the process does nothing else), and the simulated round's time. N hosts send
N (N-1) flows at once: the work grows as N^2. The machine is shared: its load is recorded
before and after each run.

    .venv/bin/python bench/sim_scale.py [--hosts 100,300,1000] [--size 50KB]

Writes bench/results/sim_scale.json with the bench harness's provenance
(``clusterlab.bench.harness``: commit, machine, load, spare CPU, autogroup).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from clusterlab.bench import harness
from clusterlab.cluster import Simulated
from clusterlab.cluster.testbed import StarTopo
from clusterlab.errors import ConfigError
from clusterlab.monitor.provenance import load_average
from clusterlab.units import parse_size

ROOT = Path(__file__).resolve().parents[1]
CALIBRATION = ROOT / "bench" / "results" / "sim_calibration.json"


def main(argv=None) -> int:
    ap = harness.parser(__doc__, ROOT / "bench" / "results" / "sim_scale.json", output_aliases=("--out",))
    ap.add_argument("--hosts", default="100,300,1000", help="host counts (default %(default)s)")
    ap.add_argument("--size", default="50KB", help="bytes each host broadcasts (default %(default)s)")
    a = ap.parse_args(argv)
    try:
        size = parse_size(a.size, "--size", lo=1)
        hosts = [int(x) for x in a.hosts.split(",")]
    except (ConfigError, ValueError) as e:
        ap.exit(2, f"{ap.prog}: {e}\n")
    run = harness.start(ap, args=a)
    rows = []
    for n in hosts:
        sim = Simulated(StarTopo(hosts=n, rate="155Mbit"), calibration=str(CALIBRATION) if CALIBRATION.exists() else None)
        load0 = load_average()
        t0 = time.perf_counter()
        out = sim.simulate({"kind": "alltoall_broadcast", "size": size, "rounds": 1, "order": "same"}, n)
        wall = time.perf_counter() - t0
        row = {"hosts": n, "flows": n * (n - 1), "wall_seconds": round(wall, 2),
               "engine_wall_seconds": out["engine"]["wall_seconds"], "engine_max_rss_mb": out["engine"]["max_rss_mb"],
               "simulated_round_seconds": max(out["seconds"][0]), "load_before": load0, "load_after": load_average()}
        rows.append(row)
        run.say(json.dumps(row))
    rec = {"what": "one all-to-all broadcast round simulated (SimGrid 3.32 flow model, Simulated cluster): "
                   "wall time and peak memory of the engine process, by hosts",
           "size_bytes": size, "rate": "155Mbit", "calibration": sim.calibration, "engine": out["engine"],
           "rows": rows, "target": "1,000 hosts in under 10 minutes (issue 28)"}
    run.write(rec)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
