"""The report of a program run (``clusterlab run --run-dir``, ``cluster.record``):
``report.md`` with the command, the cluster, the TCP settings in force, the outcome, and each
rank's time split (wall = compute + transfer + RTO wait, from its record); the monitor's plots
go to ``monitor/`` (``clusterlab report`` draws them) and the diagnosis is appended."""

from __future__ import annotations

import shlex
from pathlib import Path

from clusterlab._atomic import atomic_open


def _ms(s) -> str:
    return "-" if s is None else f"{s * 1000:.1f}"


def _rate(v) -> str:
    from clusterlab.errors import ConfigError
    from clusterlab.units import parse_rate

    try:
        return f"{parse_rate(v, 'rate') / 1e6:g} Mbit/s"
    except ConfigError:
        return str(v)


def render(run_dir) -> dict:
    """Write ``run_dir/report.md``; ``{"ranks": records found, "status"}``."""
    from clusterlab.cluster.record import load

    d = Path(run_dir)
    run = load(d)
    meta, recs = run["meta"], run["ranks"]
    cl = meta.get("cluster") or {}
    md = [f"# {d.name}: `{shlex.join(str(a) for a in meta.get('command') or [])}` on {meta.get('ranks')} ranks", "",
          f"- command line: `{shlex.join(str(a) for a in meta.get('argv') or [])}`",
          f"- cluster: {cl.get('repr', cl.get('name'))} ({cl.get('place')}, mesh {cl.get('mesh')})"
          + (f"; links {_rate(cl['rate'])}, switch buffer {cl.get('buffer')} per port, dilation {cl.get('dilation')}"
             if cl.get("rate") else ""),
          "- transport settings in force: "
          + (", ".join(f"{k}={v}" for k, v in (meta.get("transport") or {}).items()
                       if v is not None and k not in ("place", "seed")) or "the kernel's defaults")
          + (" (MPI's own transport: only the hosts' settings reach MPICH's sockets)" if cl.get("mesh") == "mpi" else ""),
          f"- status: {meta.get('status')}" + (f" ({meta['reason']})" if meta.get("reason") else "")
          + f"; exit codes {meta.get('returncodes')}; elapsed {meta.get('elapsed_s')} s (launch included)",
          f"- load before/after: {meta.get('load_before')} / {meta.get('load_after')}; "
          f"machine {(meta.get('machine') or {}).get('host')}, {(meta.get('machine') or {}).get('cpus')} CPUs", ""]
    md += ["## Per rank", ""]
    if recs:
        md += ["Each rank's wall time from joining the mesh to closing it = compute (outside communication calls) "
               "+ transfer (inside them, waiting for peers included) + RTO wait (the longest wait of one of its "
               "connections on retransmission timeouts, `tcpi_total_rto_time`). Milliseconds.", "",
               "| rank | node | wall | compute | transfer | RTO wait | CPU | set-up | bytes sent | bytes received "
               "| retransmissions | timeouts |", "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in recs:
            md.append(f"| {r['rank']} | {r.get('node')} | {_ms(r.get('wall_s'))} | {_ms(r.get('compute_s'))} | "
                      f"{_ms(r.get('transfer_s'))} | {_ms(r.get('rto_wait_s'))} | {_ms(r.get('cpu_s'))} | "
                      f"{_ms(r.get('setup_s'))} | {r.get('bytes_sent', 0):,} | {r.get('bytes_recv', 0):,} | "
                      f"{'-' if r.get('retransmissions') is None else r['retransmissions']} | "
                      f"{'-' if r.get('timeouts') is None else r['timeouts']} |")
        md += [f"\nRank {r['rank']} failed: {r['error']} (its split is up to the failure)."
               for r in recs if r.get("error")]
        missing = sorted(set(range(int(meta.get("ranks") or 0))) - {int(r["rank"]) for r in recs})
        if missing:
            md += ["", f"No record from ranks {missing} (they failed, or did not join clusterlab's mesh)."]
    else:
        md += ["No rank records: the ranks did not join clusterlab's mesh (an MPI program on MPI's own transport "
               "writes none). What there is: the monitor's TCP counters per host (`monitor/report.md`, "
               "and the diagnosis below)."]
    if (d / "monitor.parquet").exists():
        md += ["", "## Network", "", "The monitor's plots and summary: [monitor/report.md](monitor/report.md)."]
    with atomic_open(d / "report.md") as f:
        f.write("\n".join(md) + "\n")
    return {"ranks": len(recs), "status": meta.get("status")}
