"""Fixed-width text tables of a parallel mining run: the per-pass summary and the per-rank
figures (time, CPU, peak memory). Pure formatting: the numbers come from
``clusterlab.mining.parallel.run_parallel``.
"""

from __future__ import annotations


def format_passes(passes: list[dict]) -> str:
    """The per-pass summary: time (the slowest rank's) split into computation, transfer and
    waiting on retransmission timeouts (each the largest over ranks; see docs/parallel.md),
    the owners' counting and the end-of-pass synchronisation, then bytes and messages (all
    ranks), TCP retransmissions and RTOs. ``*`` marks a pass that kept the machine's cores busy
    (CPU-bound).

    >>> print(format_passes([{"pass": 1, "candidates": 5, "large": 3, "t_total": 0.01, "t_compute": 0.006,
    ...                       "t_transfer": 0.004, "bytes_sent": 2048, "messages_sent": 2, "retransmissions": 0,
    ...                       "timeouts": 0}]))  # doctest: +NORMALIZE_WHITESPACE
    pass candidates  large  time_s compute_s transfer_s rto_s count_s sync_s  KB_sent  msgs retrans  rto
       1          5      3   0.010     0.006      0.004 0.000   0.000  0.000      2.0     2       0    0
    """
    head = (f"{'pass':>4} {'candidates':>10} {'large':>6} {'time_s':>7} {'compute_s':>9} {'transfer_s':>10} "
            f"{'rto_s':>5} {'count_s':>7} {'sync_s':>6} {'KB_sent':>8} {'msgs':>5} {'retrans':>7} {'rto':>4}")
    lines = [head]
    for p in passes:
        g = p.get
        mark = " *" if g("cpu_bound") else ""
        lines.append(f"{g('pass', 0):>4} {g('candidates', 0):>10} {g('large', 0):>6} {g('t_total', 0):>7.3f} "
                     f"{g('t_compute', 0):>9.3f} {g('t_transfer', 0):>10.3f} {g('t_rto', 0):>5.3f} "
                     f"{g('t_count', 0):>7.3f} {g('t_sync', 0):>6.3f} {g('bytes_sent', 0) / 1024:>8.1f} "
                     f"{g('messages_sent', 0):>5} {g('retransmissions', 0):>7} {g('timeouts', 0):>4}{mark}")
    if any(p.get("cpu_bound") for p in passes):
        lines.append("* CPU-bound: the ranks kept this machine's cores busy; times include waiting for a core")
    return "\n".join(lines)


def format_ranks(ranks: list[dict]) -> str:
    """One line per rank: job and read time, CPU time, peak memory; then the total memory
    (threads of one process share theirs, so it is counted once).

    >>> print(format_ranks([{"rank": 0, "job_s": 1.5, "read_s": 0.5, "cpu_s": 1.4, "peak_rss_bytes": 2**30},
    ...                     {"rank": 1, "job_s": 1.4, "read_s": 0.6, "cpu_s": 1.3, "peak_rss_bytes": 2**29}]))
    rank  job_s read_s  cpu_s  peak_MiB
       0  1.500  0.500  1.400    1024.0
       1  1.400  0.600  1.300     512.0
     all                         1536.0
    """
    lines = [f"{'rank':>4} {'job_s':>6} {'read_s':>6} {'cpu_s':>6} {'peak_MiB':>9}"]
    for r in ranks:
        lines.append(f"{r['rank']:>4} {r['job_s']:>6.3f} {r['read_s']:>6.3f} {r['cpu_s']:>6.3f} "
                     f"{r['peak_rss_bytes'] / 2**20:>9.1f}")
    shared = any(r.get("shared_process") for r in ranks)
    total = max((r["peak_rss_bytes"] for r in ranks), default=0) if shared else sum(r["peak_rss_bytes"] for r in ranks)
    lines.append(f"{'all':>4} {'':>6} {'':>6} {'':>6} {total / 2**20:>9.1f}" + ("  (one process: threads)" if shared else ""))
    return "\n".join(lines)
