"""Run a parallel mining job and keep what ``diagnose`` reads: ``RUN_DIR/run.json`` in the
format of ``clusterlab mine --nodes N --json`` (launch and job seconds, per-pass and per-rank
statistics, options), plus the transport settings and the cluster it ran on. Used by the
scenario corpus (``tests/test_diagnose_scenarios.py``, ``bench/diagnose_corpus.py``) and by
``diagnose --verify`` to rerun a job with the recommended setting."""

from __future__ import annotations

import json
import os

from clusterlab._atomic import atomic_open


def record_mining(run_dir, path, nodes: int = 2, algorithm: str = "hpa", min_support=0.01, config=None,
                  transport=None, cluster=None, **kw) -> str:
    """Mine ``path`` on ``nodes`` ranks (local TCP mesh unless ``cluster``) and write
    ``run_dir/run.json``; returns its path."""
    from clusterlab.cluster import Local, Testbed
    from clusterlab.mining.parallel import ParallelConfig, run_parallel

    config = config or ParallelConfig()
    os.makedirs(run_dir, exist_ok=True)
    load0 = os.getloadavg()[0]
    r = run_parallel(path, nodes=nodes, algorithm=algorithm, min_support=min_support, cluster=cluster or Local(),
                     config=config, transport=transport, **kw)
    kind = "testbed" if isinstance(cluster, Testbed) else "local"
    out = {"file": os.fspath(path), "algorithm": f"{algorithm} x{r.nodes} ({r.where})",
           "seconds": {"mine": r.wall_s, "job": r.job_s}, "passes": r.passes, "ranks": r.ranks,
           "options": {"nodes": nodes, "algorithm": algorithm, "min_support": min_support,
                       "block_size": config.block_bytes, "partition": config.partition},
           "transport": transport.to_dict() if transport is not None else {},
           "cluster": {"kind": kind}}
    if kind == "local":  # the fidelity check of a local run: was the machine loaded (machine.machine_factor)
        out["options"]["machine"] = {"cpus": len(os.sched_getaffinity(0)),
                                     "load_before_after": [round(load0, 2), round(os.getloadavg()[0], 2)]}
    dest = os.path.join(run_dir, "run.json")
    with atomic_open(dest) as f:
        json.dump(out, f, indent=1, default=float)
    return dest
