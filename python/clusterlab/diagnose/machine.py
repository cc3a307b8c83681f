"""This machine's share of a local run's time: how much every rank was slowed down by other
work (``machine_factor``), which ``rules`` charges apart and ``fidelity`` flags."""

from __future__ import annotations

MACHINE_CPU_MIN_S = 0.005  # a rank's CPU seconds over the job below this (or a tenth of the busiest's) say nothing of its speed


def work(r) -> float:
    """A rank's computation at full speed: its wall compute, at most its CPU seconds."""
    return min(r.compute, r.cpu) if r.cpu is not None and r.cpu > 0 else r.compute


def machine_factor(job) -> tuple[float, str | None]:
    """``(f, how)``: the wall seconds per CPU second every rank of ``job`` was slowed down to by
    this machine's other load (at least 1), and how it was found; ``(1.0, None)`` when nothing
    tells. What a rank lost beyond ``f`` is its own starvation (a competing process on its core,
    more ranks than cores).

    * From the ranks: the least starved rank's wall computation per CPU second over the job,
      when two ranks or more computed long enough to tell (``MACHINE_CPU_MIN_S``, and a tenth
      of the busiest rank's CPU). When the run recorded the CPUs its ranks could use
      (``options["machine"]["cpus"]``), the slowdown of ranks sharing them (``nodes / cpus``)
      is the job's own and is taken out.
    * Else from the load average recorded before the job (``options["machine"]``): a rank that
      becomes runnable among ``load`` other tasks on ``cpus`` CPUs gets ``cpus / (load + 1)``
      of a core (fair share), so ``f = (load + 1) / cpus`` when that is above 1, at most the
      slowdown of the most starved rank."""
    mach = (job.options or {}).get("machine") or {}
    cpus = mach.get("cpus")
    per: dict[int, list[float]] = {}
    for p in job.passes:
        for r in p.ranks or []:
            if r.cpu is None:
                continue
            acc = per.setdefault(r.rank, [0.0, 0.0])
            acc[0] += r.compute
            acc[1] += work(r)
    if not per:
        return 1.0, None
    top = max(c for _, c in per.values())
    cand = [(w / c, k) for k, (w, c) in per.items() if c >= max(MACHINE_CPU_MIN_S, 0.1 * top)]
    if len(cand) >= 2:
        f, k = min(cand)
        own = max(1.0, job.nodes / cpus) if isinstance(cpus, (int, float)) and cpus > 0 and job.nodes else 1.0
        return max(1.0, f / own), f"rank {k}, the least starved: {f:.3g} wall seconds per CPU second"
    la = mach.get("load_before_after")
    if isinstance(cpus, (int, float)) and cpus > 0 and isinstance(la, list) and la:
        # never more than the most starved rank saw (the load average is of the last minute, not the job's)
        seen = max((w / c for w, c in per.values() if c >= max(MACHINE_CPU_MIN_S, 0.1 * top)), default=1.0)
        f = min((float(la[0]) + 1.0) / cpus, seen)
        if f > 1.0:
            return f, f"the load average before the job, {float(la[0]):g} on {cpus:g} CPUs: a runnable rank's fair share"
    return 1.0, None
