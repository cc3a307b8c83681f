"""The diagnosis as text: the fidelity line first, warnings, the dominant loss with its evidence,
fix and predicted gain, then every cause with its seconds and share of the job."""

from __future__ import annotations

from clusterlab.diagnose.rules import EXTERNAL


def _fmt(s: float) -> str:
    """A duration as the diagnosis prints it.

    >>> _fmt(3.6e-05), _fmt(0.0123), _fmt(2.5)
    ('36.0 us', '12.3 ms', '2.50 s')
    """
    return f"{s * 1e6:.1f} us" if 0 < s < 1e-3 else f"{s * 1000:.1f} ms" if s < 1 else f"{s:.2f} s"


def none_found(d: dict) -> str:
    """What a job without a dominant loss is told: its time was computation and transfer, or (a
    workload that records no split of its time) nothing in what it recorded, or (a failed job)
    that it has no time to judge.

    >>> none_found({"causes": [], "failed": "rank 6 failed: CommTimeout: rank 6: timed out"})
    'not judged: the job failed (rank 6 failed: CommTimeout: rank 6: timed out)'
    """
    if d.get("failed"):
        return f"not judged: the job failed ({d['failed']})"
    if any(c["cause"] == "unsplit" for c in d["causes"]):
        return "none found in what it recorded (its time is not split into computation, transfer and waits)"
    return "none found (the time is computation and transfer at line rate)"


def job_lines(d: dict) -> list[str]:
    lines = [d["fidelity"]["line"]]
    lines += [f"WARNING: {w}" for w in d["warnings"]]
    total = d["seconds"]
    lines.append(f"{d['job']}: " + ("failed" if d.get("failed") else _fmt(total)) + f" on {d['nodes']} ranks")
    dom = d["dominant"]
    if d.get("launch_first"):
        la = d["launch"]
        lines.append(f"named first: {la['title']}, {_fmt(la['seconds'])} outside the job")
        lines.append(f"  fix: {la['fix']}")
        lines.append(f"  predicted gain: {_fmt(la['predicted_gain_s'])} ({la['method']})")
    if dom is None:
        lines.append(f"dominant loss in the job: {none_found(d)}")
    else:
        lines.append(f"dominant loss in the job: {dom['title']}, {_fmt(dom['seconds'])} ({dom['seconds'] / max(total, 1e-9):.0%} of the job)")
        lines.append(f"  evidence: {dom['evidence']}")
        if dom["fix"]:
            lines.append(f"  fix: {dom['fix']}")
        if dom["predicted_gain_s"] is not None:
            lines.append(f"  predicted gain: {_fmt(dom['predicted_gain_s'])} "
                         f"({dom['predicted_gain_s'] / max(total, 1e-9):.0%} of the job; {dom['method']})")
        elif dom["method"]:
            lines.append(f"  predicted gain: {dom['method']}")
    lines.append("where the time went:")
    for c in d["causes"]:
        if c["seconds"] <= 0:
            continue
        lines.append(f"  {c['title']:<48} {_fmt(c['seconds']):>10} {c['seconds'] / max(total, 1e-9):>5.0%}"
                     + ("" if c["loss"] else "  (not a loss)") + ("  (not the job's)" if c["cause"] in EXTERNAL else ""))
    if d.get("launch"):
        lines.append(f"  outside the job: {d['launch']['title']:<31} {_fmt(d['launch']['seconds']):>10}")
    if "per_rank" in d:
        lines += per_rank_lines(d)
    return lines


def per_rank_lines(d: dict) -> list[str]:
    """A program run's per-rank split (wall = compute + transfer + RTO wait), or what it has
    instead: the monitor's TCP counters per host."""
    if not d["per_rank"]:
        out = ["per rank: no records (the ranks did not join clusterlab's mesh: an MPI program on MPI's own "
               "transport); the hosts' TCP counters from the monitor instead:"]
        out += [f"  {h:<10} {c.get('TcpOutSegs', 0):>10,} segments out {c.get('TcpRetransSegs', 0):>6,} retransmitted "
                f"{c.get('TcpExtTCPTimeouts', 0):>4,} timeouts" for h, c in sorted(d.get("hosts_tcp", {}).items())]
        if not d.get("hosts_tcp"):
            out.append("  (no monitor table either)")
        return out
    out = ["per rank (wall = compute + transfer + RTO wait):",
           "  rank       wall    compute   transfer   RTO wait        CPU   bytes sent  timeouts"]
    for r in d["per_rank"]:
        cpu = "-" if r["cpu_s"] is None else _fmt(r["cpu_s"])
        rto = "-" if r["rto_wait_s"] is None else _fmt(r["rto_wait_s"])
        out.append(f"  {r['rank']:>4} {_fmt(r['wall_s']):>10} {_fmt(r['compute_s']):>10} {_fmt(r['transfer_s']):>10} "
                   f"{rto:>10} {cpu:>10} {r['bytes_sent']:>12,} {'-' if r['timeouts'] is None else r['timeouts']:>9}")
    if any(r["rto_wait_s"] is None for r in d["per_rank"]):
        out.append("  (-: MPI's own transport, no TCP_INFO of its sockets: its RTO waits are inside transfer)")
    return out


def render_text(result: dict) -> str:
    """All jobs of a ``diagnose_dir`` result, one block each."""
    blocks = ["\n".join(job_lines(d)) for d in result["jobs"]]
    return "\n\n".join(blocks)
