"""The rules: pure functions from a parsed job (``run.Job``) to the causes of its time.

Per pass, the pass's time T is split along its critical path: the computation of the rank
that computed longest (``max compute``), of which the part above the ranks' mean is *skew*
(the others wait for it) and the part its wall clock ran ahead of its CPU seconds is split into
*this machine's load* (the slowdown every rank saw, ``machine.machine_factor``: shown and
flagged by the fidelity check, never named as the job's loss) and *CPU starvation* beyond it
(the rank was ready but had no core); with per-call connections, the ranks' *connection set-up*
(recorded by ``clusterlab run --run-dir``); a job reading from the iSCSI target has its
*storage reads* taken out of its computation; the RTO wait (the longest of any rank, from
``tcpi_total_rto_time``; a stalled flow holds every rank up at the next synchronisation); and
the rest of the communication, which is split into *transfer at line rate* (the busiest rank's
bytes at the link's rate), a *slow link* (a host whose link the emulation runs below the others'
rate, ``host_rates``: that rank's bytes at its own rate, beyond the line-rate part), per-message
latency, and what is left: charged to host-queue drops
or switch drops when the run recorded them, to Nagle + delayed ACKs (``nodelay`` off), to
window-limited transfers (socket buffers set below ``WINDOW_LIMITED_BYTES``), to latency-bound
small messages (``SMALL_MESSAGE_COUNT`` or more under ``SMALL_MESSAGE_BYTES``), else to queueing
(emulated) or to ranks waiting for each other (local). An emulated cluster with a lossy link
(``loss``, the atm switch) whose losses outnumber the switch's and the host queues' drops has its
RTO waits and the rest charged to the *lossy link*; a cluster of two sites (``sites``,
``wan_delay``) has the rest charged to the *WAN*. RTO waits are *backoff* when a connection's
recovery outlasted the RTO min after its first timeout (a second expiry), or a rank waited over
``BACKOFF_RATIO`` RTO mins per timeout; switch drops of a known burst (the all-to-all
broadcast) are fixed by port buffers that hold it.

Each cause has its seconds, the evidence (which pass, rank, port), the setting that removes it
(one of the project's knobs) and a predicted gain with how it was predicted. The dominant loss
is the loss whose removal is predicted to gain most (its seconds where nothing is predicted);
compute and transfer at line rate are not losses. On a shared machine every rank computes
slower than its CPU seconds: that is starvation, and it is named first when it costs more.
The launch (process start and mesh set-up, outside the job) is reported apart, and named first
when it costs more than ``LAUNCH_WARN_RATIO`` times the job.

>>> from clusterlab.diagnose.run import Job, Pass, RankPass
>>> job = Job("demo", "mining", 1.0, passes=[Pass(2, 1.0, [RankPass(0, 1.0, 0.9, 0.9, 0.1, 0.0),
...                                                         RankPass(1, 1.0, 0.3, 0.3, 0.7, 0.0)])])
>>> d = diagnose(job)
>>> d["dominant"]["cause"], round(d["dominant"]["seconds"], 2)
('skew', 0.3)
"""

from __future__ import annotations

from clusterlab.diagnose import fidelity
from clusterlab.diagnose.machine import machine_factor
from clusterlab.diagnose.machine import work as _work

# Without a cost model (``Job.model``, set by ``run.load`` from ``comm.costmodel.current()``):
LOOPBACK_BYTES_PER_S = 1.0e9  # a local run's "line rate": loopback copies, about 1 GB/s on the lab machines
LOCAL_MESSAGE_LATENCY_S = 50e-6  # one message's half round trip on the local mesh (ping-pong)
TESTBED_MESSAGE_LATENCY_S = 200e-6
WINDOW_LIMITED_BYTES = 256 * 1024
SMALL_MESSAGE_BYTES = 2048
SMALL_MESSAGE_COUNT = 32  # a pass is latency-bound by its messages when one rank sends this many or more
NAGLE_STALL_S = 0.04  # Linux's delayed-ACK timer (40 ms): what a Nagle-held segment waits for
SOCKET_RTO_MIN_S = 0.005  # the lowest RTO min a socket can take (TCP_RTO_MIN_US)
# A wait per counted timeout above this many RTO mins: exponential backoff. tcpi_total_rto counts a
# recovery episode once, not each expiry in it (8 hosts, seed-era stack: rto == rto_recoveries on every
# rank), and one expiry waits one RTO, about the RTO min on a LAN (srtt is far below it); an episode of
# two expiries waits 1 + 2 = 3 of them. Over a rank's connections the longest wait is divided by all its
# episodes, so this underestimates the doubling, never invents it.
BACKOFF_RATIO = 2.0
RTO_MAX_FLOOR_S = 1.0  # the least TCP_RTO_MAX_MS / tcp_rto_max_ms takes
LAUNCH_WARN_RATIO = 5.0  # the launch is named first when it costs this many times the job
NOT_LOSSES = ("compute", "transfer", "unsplit")
EXTERNAL = ("machine_load",)  # losses that are this machine's, not the job's: shown, never named as the job's

CAUSE_TITLES = {
    "compute": "compute (balanced)",
    "unsplit": "not split by the workload",
    "transfer": "transfer at line rate",
    "skew": "skew between ranks (straggler)",
    "cpu_starvation": "CPU starvation",
    "machine_load": "this machine's other load (all ranks slowed)",
    "connection_setup": "connection set-up per call",
    "wan_latency": "a WAN between the ranks (its round trips)",
    "storage_reads": "reading the data from the storage target",
    "rto_wait": "RTO waits",
    "incast_switch_drops": "drops at the switch (incast): their RTO waits and recovery",
    "host_queue_drops": "host-queue tail drops: their RTO and probe-timer waits",
    "rto_backoff": "RTO waits with exponential backoff up to a long MAX",
    "nagle": "Nagle + delayed ACK on small messages",
    "window_limited": "window/buffer-limited transfers",
    "small_messages": "latency-bound small messages",
    "slow_link": "one host's link slower than the others'",
    "lossy_link": "a lossy link: its lost frames' RTO waits and recovery",
    "latency": "per-message latency",
    "queueing": "queueing behind other flows at the switch ports (no drops)",
    "comm_wait": "waiting for other ranks' messages",
    "launch": "launch and connection set-up",
}


def _rate_bytes(job) -> tuple[float, str]:
    rate = (job.cluster or {}).get("rate")
    if rate:
        return rate / 8.0, f"{rate / 1e6:g} Mbit/s"
    beta = (job.model or {}).get("beta")
    if beta:
        return 1.0 / beta, f"cost model ({job.model.get('source', 'default')}): 1/beta = {1e-9 / beta:.3g} GB/s"
    return LOOPBACK_BYTES_PER_S, "loopback, taken as 1 GB/s"


def _message_latency(job) -> float:
    """One message's cost: the cost model's alpha + overhead on a local run, else the constants."""
    if (job.cluster or {}).get("kind") == "testbed":
        return TESTBED_MESSAGE_LATENCY_S
    m = job.model or {}
    return (m["alpha"] + m.get("overhead", 0.0)) if "alpha" in m else LOCAL_MESSAGE_LATENCY_S


def _fmt(s: float) -> str:
    return f"{s * 1000:.1f} ms" if s < 1 else f"{s:.2f} s"


def _transport_bytes(v) -> int | None:
    from clusterlab.errors import ConfigError
    from clusterlab.units import parse_size

    if v in (None, ""):
        return None
    try:
        return int(v) if isinstance(v, (int, float)) else parse_size(v)
    except ConfigError:
        return None


def _workload_bytes(job) -> float:
    """Bytes one rank sends in a communication workload that records no byte counts: an
    all-to-all broadcast of ``size`` to each of the other ranks."""
    if job.options.get("workload") == "alltoall_broadcast" and job.nodes > 1:
        size = _transport_bytes(job.options.get("size"))
        return float(size * (job.nodes - 1)) if size else 0.0
    return 0.0


def pass_split(job, p, factor: float = 1.0) -> dict:
    """One pass's seconds by part (see the module's doc), with the ranks that set each part;
    ``factor``: the machine's slowdown (``machine_factor``), charged apart from the job's starvation."""
    ranks = p.ranks or []
    if not ranks:
        return {"pass": p.number, "seconds": p.seconds}
    slow = max(ranks, key=lambda r: r.compute)
    work = [_work(r) for r in ranks]
    mean_work = sum(work) / len(work)
    starved = max(0.0, slow.compute - _work(slow)) if slow.cpu is not None else 0.0
    machine = min(starved, (factor - 1.0) * _work(slow)) if slow.cpu is not None else 0.0
    starve = starved - machine
    skew = max(0.0, _work(slow) - mean_work)
    # what the skew costs at the speed the machine gave the straggler (never above its own speed)
    skew_gain = skew * (min(factor, slow.compute / _work(slow)) if slow.cpu is not None and _work(slow) > 0 else 1.0)
    # the RTO wait on the pass's critical path: the longest of any rank (a stalled flow holds up every
    # rank at the pass's next synchronisation, the receiver's wait shows as transfer)
    rto_rank = max(ranks, key=lambda r: r.rto)
    rto = min(rto_rank.rto, max(0.0, p.seconds - slow.compute))
    # the rank that waited longest per timeout of its own (a backoff: the same segment lost again)
    timed = [(min(r.rto, p.seconds) / r.timeouts, r) for r in ranks if r.timeouts > 0 and r.rto > 0]
    per_timeout, backoff_rank = max(timed, key=lambda t: t[0]) if timed else (0.0, None)
    # where recorded, the longest recovery after a first timeout (a second expiry waits 2 RTOs first)
    rec = [(r.recovery, r) for r in ranks if r.recovery]
    recovery, recovery_rank = max(rec, key=lambda t: t[0]) if rec else (0.0, None)
    comm = max(0.0, p.seconds - slow.compute - rto)
    setup_rank = max(ranks, key=lambda r: r.setup)
    setup = min(comm, setup_rank.setup)
    comm -= setup
    busiest = max(ranks, key=lambda r: r.bytes)
    rate, _ = _rate_bytes(job)
    local = (job.cluster or {}).get("kind") != "testbed"
    # a local run's "line rate" and per-message cost are the loopback's copies and system calls (the cost
    # model, fitted on a quiet machine): CPU work, slowed down as much as the ranks' computation was
    slow_cpu = factor if local else 1.0
    rate /= slow_cpu
    sent = busiest.bytes or _workload_bytes(job)
    line = min(comm, sent / rate)
    _, slow_host, slow_line = _slow_link(job, ranks, rate)
    sched = _alltoall_schedule(job, rate) if not local else None
    if sched is not None:  # the workload's own schedule at the links' rates (its send order's queueing)
        line = min(comm, sched[0])
        slow_line = sched[1] if slow_host else 0.0
    slow_extra = min(comm - line, max(0.0, slow_line - line))
    lat_each = _message_latency(job) * slow_cpu
    msgs = max(r.messages for r in ranks)
    latency = min(comm - line - slow_extra, msgs * lat_each)
    rest = max(0.0, comm - line - slow_extra - latency)
    return {"pass": p.number, "seconds": p.seconds, "compute": mean_work, "skew": skew, "skew_gain": max(skew, skew_gain), "skew_rank": slow.rank,
            "starvation": starve, "starved_rank": slow.rank, "machine": machine, "factor": factor,
            "setup": setup, "setup_rank": setup_rank.rank, "rto": rto, "rto_rank": rto_rank.rank,
            "timeouts": sum(r.timeouts for r in ranks), "rto_rank_timeouts": rto_rank.timeouts,
            "per_timeout": per_timeout, "recovery": recovery,
            "recovery_rank": None if recovery_rank is None else recovery_rank.rank, "backoff_rank": None if backoff_rank is None else backoff_rank.rank,
            "backoff_wait": 0.0 if backoff_rank is None else min(backoff_rank.rto, p.seconds),
            "backoff_timeouts": 0.0 if backoff_rank is None else backoff_rank.timeouts,
            "line": line, "slow": slow_extra, "slow_host": slow_host, "slow_line": slow_line, "latency": latency, "rest": rest,
            "messages": msgs, "bytes": sent, "busiest_rank": busiest.rank,
            "mean_message": (busiest.bytes / busiest.messages) if busiest.messages else 0.0}


def alltoall_makespan(n: int, size: float, order: str, rate_of) -> float:
    """Seconds the all-to-all broadcast of ``size`` bytes on ``n`` hosts takes at its links' rates
    (``rate_of(host)``: bytes/s of host i's link, both directions), with port buffers deep enough
    to drop nothing: each sender sends its blocks back to back at its link's rate in the order
    (``same``: to 0, 1, 2...; ``shifted``: to i+1, i+2...), each switch port drains what arrives
    for its host at that host's rate, first come first served (a fluid queue: it finishes at the
    latest ``t + (bytes arriving after t) / rate``). With ``same`` every sender starts at host 0,
    and the last port gets all its blocks at once: (2n - 3) blocks' time at one rate, against
    n - 1 with ``shifted``.

    >>> b = 50e3 / (155e6 / 8)
    >>> round(alltoall_makespan(4, 50e3, "same", lambda h: 155e6 / 8) / b, 6), \\
    ...     round(alltoall_makespan(4, 50e3, "shifted", lambda h: 155e6 / 8) / b, 6)
    (5.0, 3.0)
    """
    arrivals: dict[int, list[tuple[float, float, float]]] = {d: [] for d in range(n)}
    for src in range(n):
        dests = ([(src + k) % n for k in range(1, n)] if order == "shifted" else [d for d in range(n) if d != src])
        t = 0.0
        for d in dests:
            dt = size / rate_of(src)
            arrivals[d].append((t, t + dt, size))
            t += dt
    finish = 0.0
    for d, segs in arrivals.items():
        total = sum(x for _, _, x in segs)
        for t in sorted({p for a, e, _ in segs for p in (a, e)}):
            got = sum(x * min(1.0, max(0.0, (t - a) / (e - a))) for a, e, x in segs)
            finish = max(finish, t + (total - got) / rate_of(d))
    return finish


def _alltoall_schedule(job, rate_bytes: float) -> tuple[float, float] | None:
    """``(at the cluster's rate, at each host's own rate)``: ``alltoall_makespan`` of an
    all-to-all broadcast job (rank i in host hi); None for other workloads."""
    if job.options.get("workload") != "alltoall_broadcast" or job.nodes < 2:
        return None
    size = _transport_bytes(job.options.get("size"))
    if not size:
        return None
    order = str(job.options.get("order") or "same")
    rates = (job.cluster or {}).get("host_rates") or {}
    base = alltoall_makespan(job.nodes, size, order, lambda h: rate_bytes)
    own = alltoall_makespan(job.nodes, size, order, lambda h: min(rate_bytes, rates.get(f"h{h}", 8 * rate_bytes) / 8))
    return base, own


def _slow_link(job, ranks, rate_bytes: float) -> tuple[float, str | None, float]:
    """``(rate in bytes/s, host, seconds)`` of the slowest link a rank's traffic crosses: a host of
    ``host_rates`` below the cluster's rate (rank i runs in host hi), its rank's bytes (or the
    workload's per-rank bytes) at that rate; ``(0, None, 0)`` without one. A link is full duplex:
    what the rank sends and what it receives take the same time when they are equal (the
    all-to-all broadcast), so its own bytes stand for both."""
    rates = (job.cluster or {}).get("host_rates") or {}
    best = (0.0, None, 0.0)
    for r in ranks:
        bps = rates.get(f"h{r.rank}")
        if bps is None or bps / 8.0 >= rate_bytes:
            continue
        t = (r.bytes or _workload_bytes(job)) / (bps / 8.0)
        if t > best[2]:
            best = (bps / 8.0, f"h{r.rank}", t)
    return best


def _cause(name, seconds, evidence, fix=None, gain=None, method=None, apply=None) -> dict:
    """One cause. ``apply``: the fix as settings a rerun can take (``{"transport": {...}}`` for
    TransportConfig fields, ``{"options": {...}}`` for the job's, ``{"cluster": {...}}`` for the
    testbed's), or None when the fix is not a setting (move the load, re-split the data)."""
    return {"cause": name, "title": CAUSE_TITLES[name], "seconds": round(max(0.0, seconds), 6), "loss": name not in NOT_LOSSES,
            "evidence": evidence, "fix": fix, "predicted_gain_s": None if gain is None else round(max(0.0, gain), 6),
            "method": method, "apply": apply}


def _worst(splits, key):
    return max(splits, key=lambda s: s.get(key, 0.0)) if splits else {}


def causes(job) -> list[dict]:
    """Every cause of ``job``'s time with its seconds, evidence, fix and predicted gain."""
    factor, fast_rank = machine_factor(job)
    splits = [pass_split(job, p, factor) for p in job.passes if p.ranks]
    tot = {k: sum(s.get(k, 0.0) for s in splits) for k in ("compute", "skew", "skew_gain", "starvation", "machine", "setup", "rto",
                                                             "line", "slow", "latency", "rest")}
    out = []
    _, rate_text = _rate_bytes(job)
    st = _storage_cause(job)
    if st is not None:  # the job's reads are inside its computation time as recorded: taken out of it
        tot["compute"] = max(0.0, tot["compute"] - st["seconds"])
        out.append(st)
    if job.options.get("unsplit"):  # no compute/transfer record: calling the rest computation would invent it
        out.append(_cause("unsplit", tot["compute"], f"the workload ({job.options.get('workload') or '?'}) records no split "
                          "of its time into computation, transfer and RTO waits"))
    else:
        out.append(_cause("compute", tot["compute"], f"the ranks' mean computation per pass, summed over {len(splits)} passes"))
    w = _worst(splits, "line")
    local_job = (job.cluster or {}).get("kind") != "testbed"
    if not local_job and job.options.get("workload") == "alltoall_broadcast":
        rate_text += (f"; the all-to-all's schedule in its send order ({job.options.get('order') or 'same'}): each "
                      "sender's blocks back to back, each port draining what arrives")
    if factor > 1.0 and local_job:
        rate_text += f", {factor:.3g}x slower on this loaded machine (loopback copies are CPU work)"
    out.append(_cause("transfer", tot["line"], f"the busiest rank's bytes at the line rate ({rate_text})"
                      + (f"; most in pass {w['pass']} ({w['bytes'] / 1e6:.3g} MB from rank {w['busiest_rank']})" if w else "")))
    if tot["skew"] > 0:
        w = _worst(splits, "skew")
        fix = ("partitioning: give each rank an equal share of the work, not of the transactions (shuffle or "
               "re-split the input; with HPA try --partition " + ("itemset" if job.options.get("partition", "prefix")
                                                                 == "prefix" else "prefix") + ")")
        speed = (f", at the {factor:.3g} wall seconds per CPU second this machine gave every rank" if factor > 1.0
                 else "")
        out.append(_cause("skew", tot["skew"], f"pass {w['pass']}: rank {w['skew_rank']} computed {_fmt(w['skew'])} "
                          "longer than the ranks' mean (CPU seconds, so not starvation)", fix, tot["skew_gain"],
                          "fitted rule: a balanced split makes each pass's computation the ranks' mean" + speed))
    if tot["starvation"] > 0:
        w = _worst(splits, "starvation")
        base = (f" beyond the {factor:.3g}x every rank ran at (the machine's load; {fast_rank})" if factor > 1.0
                else "")
        out.append(_cause("cpu_starvation", tot["starvation"],
                          f"pass {w['pass']}: rank {w['starved_rank']}'s computation took {_fmt(w['starvation'])} more "
                          f"wall time than CPU time{base} (ready to run, no core free: a competing process on its "
                          "core, or more ranks than cores)",
                          "give every rank a core of its own: fewer ranks per machine (--nodes), or move the "
                          "competing process off the rank's core", tot["starvation"],
                          "fitted rule: the rank computes at the speed of the least starved rank"))
    if tot["machine"] > 0:
        w = _worst(splits, "machine")
        out.append(_cause("machine_load", tot["machine"],
                          f"every rank computed at {1 / factor:.0%} of a core or less ({fast_rank}); most in pass "
                          f"{w['pass']}",
                          "rerun on a quiet machine (this load is not the job's: the fidelity check flags it)",
                          tot["machine"], "fitted rule: computation at the ranks' CPU seconds"))
    if tot["setup"] > 0:
        w = _worst(splits, "setup")
        calls = f" ({job.options['calls']} calls)" if job.options.get("calls") else ""
        out.append(_cause("connection_setup", tot["setup"],
                          f"connections=per_call: every collective set up and tore down its connections{calls}; "
                          f"rank {w['setup_rank']} spent {_fmt(w['setup'])} connecting in pass {w['pass']}",
                          "persistent connections (connections=persistent, $CLUSTERLAB_CONNECTIONS unset): the mesh "
                          "is set up once, at launch", tot["setup"],
                          "measured: the set-up time the ranks recorded is removed",
                          {"env": {"CLUSTERLAB_CONNECTIONS": "persistent"}}))
    if tot["slow"] > 0:
        w = _worst(splits, "slow")
        host, rates = w["slow_host"], (job.cluster or {}).get("host_rates") or {}
        rate = (job.cluster or {}).get("rate")
        share = f", 1/{rate / rates[host]:.3g} of the others' {rate / 1e6:g} Mbit/s" if rate else ""
        out.append(_cause("slow_link", tot["slow"], f"pass {w['pass']}: host {host}'s link runs at "
                          f"{rates[host] / 1e6:g} Mbit/s{share}: "
                          + (f"the all-to-all's schedule takes {_fmt(w['slow_line'])} with it against "
                             if job.options.get("workload") == "alltoall_broadcast" else
                             f"rank {host[1:]}'s {w['bytes'] / 1e6:.3g} MB take {_fmt(w['slow_line'])} there against ")
                          + f"{_fmt(w['line'])} at the cluster's rate",
                          f"give host {host}'s link the others' rate (a link negotiated down or a bad cable: host_rates "
                          f"unset), or move work off rank {host[1:]}", tot["slow"],
                          "fitted rule: the transfer at the cluster's line rate", {"cluster": {"host_rates": None}}))
    if tot["rto"] > 0:
        out.append(_rto_cause(job, splits, tot["rto"]))
    if tot["latency"] > 0:
        w = _worst(splits, "latency")
        out.append(_cause("latency", tot["latency"], f"pass {w['pass']}: {w['messages']:.0f} messages from one rank"))
    if tot["rest"] > 0:
        out.append(_rest_cause(job, splits, tot["rest"]))
    return out


def _storage_cause(job) -> dict | None:
    """A job that read its data from the iSCSI target (``options["storage"]``: the slowest rank's
    read and rescan seconds), or None."""
    st = (job.options or {}).get("storage")
    if not st:
        return None
    io = min(job.seconds, float(st.get("read_seconds") or 0.0) + float(st.get("rescan_seconds") or 0.0))
    if io <= 0:
        return None
    reads = 1 + (max(0, int(st.get("passes") or 1) - 1) if st.get("rescan") else 0)
    ev = (f"the slowest rank waited {_fmt(float(st.get('read_seconds') or 0.0))} reading its partition from the iSCSI "
          f"target" + (f" and {_fmt(float(st['rescan_seconds']))} rescanning it in {reads - 1} more passes"
                       if reads > 1 and st.get("rescan_seconds") else "")
          + f" ({io / job.seconds:.0%} of the job)")
    rate = _transport_bytes(st.get("backing_rate")) if st.get("backing_rate") not in (None, "none") else None
    if rate and st.get("stored_bytes"):
        ev += (f"; the target's backing store reads {rate / 1e6:g} MB/s: {st['stored_bytes'] / 1e3:.0f} KB x {reads} "
               f"read(s) take {_fmt(st['stored_bytes'] * reads / rate)} at that rate")
    if st.get("bottleneck"):
        ev += f"; the monitor's bottleneck: {st['bottleneck']}"
    fix = ("read the data from a local copy on each host (or keep each partition in memory after the first read: "
           "rescan off, or PFP/CD, which read once), or a faster backing store")
    local = st.get("local_read_seconds")
    if local is None:
        return _cause("storage_reads", io, ev, fix, None, "no prediction: no local run to compare with "
                      "(compare_local)", None)
    gain = io - float(local) * reads
    return _cause("storage_reads", io, ev, fix, gain, f"fitted rule: each of the {reads} read(s) takes what the same "
                  f"job's read of the local file took ({_fmt(float(local))}, measured in the same repetition)",
                  {"options": {"source": "local"}})


def _rto_cause(job, splits, seconds) -> dict:
    w = _worst(splits, "rto")
    rto_min = fidelity._rto_min_s(job.transport)
    timeouts = sum(s.get("timeouts", 0.0) for s in splits) or (job.timeouts or 0)
    ev = (f"pass {w['pass']}: rank {w['rto_rank']} waited {_fmt(w['rto'])} on retransmission timeouts"
          + (f" ({timeouts:.0f} timeouts in all)" if timeouts else "") + f"; RTO min {rto_min * 1000:g} ms")
    sw = job.switch_drops or 0
    host = sum(job.host_drops_by_host or [])
    mon = job.monitor or {}
    sw = sw or mon.get("switch_drops", 0)
    host = host or mon.get("host_queue_drops", 0)
    lossy = _lossy_link(job, sw, host)
    if lossy:
        return lossy(seconds, ev)
    name = "rto_wait"
    if sw and sw >= host:
        name = "incast_switch_drops"
        ev += _drops_text(job)
    elif host:
        return _cause("host_queue_drops", seconds, ev + _host_drops_text(job), HOST_QUEUE_FIX, seconds,
                      "fitted rule: no tail drops, no timeouts", {"cluster": {"host_queue": "1000p"}})
    # a rank's wait per timeout of its own: 1, 2, 4, 8... x the RTO min once one segment is lost again
    b = _worst(splits, "per_timeout")
    rc = _worst(splits, "recovery")
    target = SOCKET_RTO_MIN_S if (job.cluster or {}).get("kind") != "testbed" else 0.01
    rtt = _rtt(job)
    if rtt:
        ev += (f"; measured RTT {rtt[0] * 1000:.3g} ms (rttvar {rtt[1] * 1000:.3g} ms): a timeout waits about "
               f"{_timeout_s(rto_min, rtt) * 1000:.4g} ms, srtt + max(4 rttvar, RTO min), "
               + (f"the RTO min {rto_min / max(rtt[0], 1e-9):.3g}x the RTT" if rto_min > _rtt_floor(rtt) else
                  "set by the RTT, not the RTO min"))
    scale = _timeout_s(target, rtt) / _timeout_s(rto_min, rtt)  # a timeout's wait after the fix, per before
    how = (f"cost model of the RTO with the measured RTT: a timeout waits srtt + max(4 rttvar, RTO min), "
           f"{_timeout_s(rto_min, rtt) * 1000:.4g} -> {_timeout_s(target, rtt) * 1000:.4g} ms" if rtt else
           f"fitted rule: an RTO wait scales with the RTO min ({rto_min * 1000:g} -> {target * 1000:g} ms)")
    backoff_ev = None
    # one expiry waits one RTO: the RTO min, or with the RTT measured srtt + max(4 rttvar, RTO min)
    one = _timeout_s(rto_min, rtt)
    one_text = f"the {rto_min * 1000:g} ms RTO min" if one == rto_min else f"the {one * 1000:.4g} ms RTO (RTT measured)"
    if rc.get("recovery", 0.0) > one:
        backoff_ev = (f"; pass {rc['pass']}: a connection of rank {rc['recovery_rank']} spent {_fmt(rc['recovery'])} "
                      f"per recovery after its first timeout, over {one_text} (a retransmission "
                      "that gets through ends it within a round trip): the same segment lost again, the timer doubled")
    elif b.get("per_timeout", 0.0) > BACKOFF_RATIO * one:
        backoff_ev = (f"; pass {b['pass']}: rank {b['backoff_rank']} waited {_fmt(b['backoff_wait'])} on "
                      f"{b['backoff_timeouts']:.0f} timeout(s) of its own, {_fmt(b['per_timeout'])} each, over "
                      f"{BACKOFF_RATIO:g}x {one_text}: the same segment lost again, the timer doubled")
    if backoff_ev:
        name = "rto_backoff"
        ev += backoff_ev + (f" (RTO max {_rto_max_text(job)})" if _rto_max_text(job) else "")
        # a chain of doublings from the RTO min, as long as the wait: capped at a MAX of 1 s (the kernel's least)
        capped = _capped_chain(seconds, rto_min, RTO_MAX_FLOOR_S)
        gain_min = seconds * (1.0 - scale) if rto_min > target * 1.01 else 0.0
        if seconds - capped > gain_min:
            return _cause(name, seconds, ev, "TransportConfig rto_max=1s (cap the backoff)", seconds - capped,
                          f"cost model of the backoff: a {_fmt(seconds)} chain of doubling waits from the "
                          f"{rto_min * 1000:g} ms RTO min, each capped at 1 s, takes {_fmt(capped)}",
                          {"transport": {"rto_max": "1s"}})
        if gain_min:
            return _cause(name, seconds, ev, f"TransportConfig rto_min={target * 1000:g}ms (the whole chain of doubling "
                          "waits scales with it; rto_max=1s caps it, rto_min_jitter spreads synchronised "
                          "retransmissions)", gain_min, f"{how} (an RTO wait, doubled or not, scales with it); capping "
                          f"at 1 s alone would gain {_fmt(seconds - capped)}",
                          {"transport": {"rto_min": f"{target * 1000:g}ms"}})
    elif name == "incast_switch_drops":
        burst = _incast_buffer(job)
        if burst:
            return _cause(name, seconds, ev, burst[0], seconds, INCAST_METHOD, burst[1])
    if rto_min <= target * 1.01:
        fix = f"{_order_fix(job)} or larger port buffers (buffer=): the RTO min is already {rto_min * 1000:g} ms"
        return _cause(name, seconds, ev, fix, None, "no prediction: the RTO min cannot go lower")
    if rtt and rto_min <= _rtt_floor(rtt):
        fix = (f"{_order_fix(job)} or larger port buffers (buffer=): the RTO follows the RTT (srtt + 4 rttvar = "
               f"{_rtt_floor(rtt) * 1000:.3g} ms is over the {rto_min * 1000:g} ms RTO min), a lower RTO min changes nothing")
        return _cause(name, seconds, ev, fix, None, "no prediction: the RTO is the RTT's, not the RTO min's")
    gain = seconds * (1.0 - scale)
    return _cause(name, seconds, ev, f"TransportConfig rto_min={target * 1000:g}ms (with rto_min_jitter to "
                  "spread synchronised timeouts)", gain, how, {"transport": {"rto_min": f"{target * 1000:g}ms"}})


def _rtt(job) -> tuple[float, float] | None:
    """The measured smoothed RTT and its variation, seconds undilated (the monitor's samples of
    the hosts' connections, ``fidelity.monitor_facts``); None when not recorded."""
    mon = job.monitor or {}
    if mon.get("rtt_ms") is None:
        return None
    return mon["rtt_ms"] / 1e3, (mon.get("rttvar_ms") or 0.0) / 1e3


def _rtt_floor(rtt) -> float:
    """What the kernel's RTO is at least, whatever the RTO min: srtt + 4 rttvar."""
    return rtt[0] + 4 * rtt[1]


def _timeout_s(rto_min: float, rtt) -> float:
    """One timeout's wait with RTO min ``rto_min``: Linux's srtt + max(4 rttvar, RTO min)
    (``tcp_set_rto``), or the RTO min alone where the RTT was not recorded."""
    return rto_min if not rtt else rtt[0] + max(4 * rtt[1], rto_min)


def _capped_chain(wait: float, rto_min: float, cap: float) -> float:
    """A wait of ``wait`` seconds made of timeouts doubling from ``rto_min`` (rto_min, 2x, 4x...;
    the last one cut short), as long as it would take with each timeout capped at ``cap``."""
    left, t, out = wait, rto_min, 0.0
    while left > 1e-9 and t > 0:
        step = min(left, t)
        out += min(step, cap)
        left -= step
        t *= 2
    return out


def _rto_max_text(job) -> str:
    v = (job.transport or {}).get("rto_max")
    return str(v) if v not in (None, "") else ""


INCAST_METHOD = "fitted rule: no drops at the switch, no RTO waits or recovery"
HOST_QUEUE_FIX = ("a host queue that holds a burst (host_queue=1000p, a NIC's txqueuelen) or send pacing "
                  "(order=shifted)")


def _host_drops(job) -> int:
    return sum(job.host_drops_by_host or []) or (job.monitor or {}).get("host_queue_drops", 0)


def _host_drops_text(job) -> str:
    hosts = job.host_drops_by_host or []
    h = max(range(len(hosts)), key=hosts.__getitem__) if hosts else None
    return f"; {_host_drops(job)} tail drops in host queues" + (f", most at host h{h} ({hosts[h]})" if h is not None else "")


def _rest_cause(job, splits, seconds) -> dict:
    w = _worst(splits, "rest")
    ev = f"pass {w['pass']}: {_fmt(w['rest'])} of communication beyond line rate and per-message latency"
    if w.get("messages"):
        ev += f" ({w['messages']:.0f} messages of {w['mean_message'] / 1024:.3g} KiB on average from rank {w['busiest_rank']})"
    t = job.transport
    nodelay = t.get("nodelay")
    buf = [b for b in (_transport_bytes(t.get("sndbuf")), _transport_bytes(t.get("rcvbuf"))) if b is not None]
    if nodelay in (False, "off", "false", 0):
        stalls = max(1, round(seconds / NAGLE_STALL_S))
        return _cause("nagle", seconds, ev + f"; nodelay off: about {stalls} delayed-ACK stalls of 40 ms",
                      "TransportConfig nodelay=on", seconds,
                      "cost model: line rate + per-message latency (the stalls go)", {"transport": {"nodelay": True}})
    if buf and min(buf) < WINDOW_LIMITED_BYTES:
        b = min(buf)
        return _cause("window_limited", seconds, ev + f"; socket buffers {b / 1024:g} KiB (a window at most that per RTT)",
                      "TransportConfig sndbuf/rcvbuf unset (autotuned) or at least the bandwidth-delay product",
                      seconds, "cost model: line rate + per-message latency", {"transport": {"sndbuf": None, "rcvbuf": None}})
    lossy = _lossy_link(job, job.switch_drops or (job.monitor or {}).get("switch_drops") or 0, _host_drops(job))
    if lossy:
        return lossy(seconds, ev + " (fast retransmissions and their recovery)")
    cl = job.cluster or {}
    if cl.get("sites") and cl.get("wan_delay"):
        d = cl["wan_delay"]
        return _cause("wan_latency", seconds, ev + f"; the ranks span two sites ({cl['sites']}) joined by a WAN of "
                      f"{d * 1000:g} ms one way (RTT {2 * d * 1000:g} ms): every exchange and synchronisation "
                      f"across it waits its round trips ({seconds / (2 * d):.3g} RTTs here)" + _rtt_seen(job),
                      "place the job's ranks in one site (sites unset), or overlap the transfers across the WAN "
                      "with computation", seconds, "fitted rule: in one site the exchange runs at the line rate",
                      {"cluster": {"sites": None}})
    if w.get("messages", 0) >= SMALL_MESSAGE_COUNT and 0 < w.get("mean_message", 0) < SMALL_MESSAGE_BYTES:
        bs = _transport_bytes(job.options.get("block_size")) or 8192
        return _cause("small_messages", seconds, ev, f"larger message blocks (--block-size {bs * 8 // 1024}KiB)",
                      seconds * 7 / 8, "fitted rule: the wait scales with the number of messages (8x fewer)",
                      {"options": {"block_size": bs * 8}})
    sw = job.switch_drops or (job.monitor or {}).get("switch_drops") or 0
    if _host_drops(job) > sw:  # a refused send with nothing in flight waits the kernel's 200 ms probe timer
        return _cause("host_queue_drops", seconds, ev + _host_drops_text(job) + " (a send the host queue refused "
                      "waits for the 200 ms probe timer, not an RTO)", HOST_QUEUE_FIX, seconds,
                      "fitted rule: no tail drops, no probe-timer waits", {"cluster": {"host_queue": "1000p"}})
    if sw:  # the switch dropped: the waits beyond line rate are the incast's queueing and drop recovery
        burst = _incast_buffer(job)
        if burst:
            return _cause("incast_switch_drops", seconds, ev + _drops_text(job) + " (queueing at the port and "
                          "recovery from the drops)", burst[0], seconds, INCAST_METHOD, burst[1])
        return _cause("incast_switch_drops", seconds, ev + _drops_text(job) + " (queueing at the port and "
                      "recovery from the drops)", _order_fix(job) + " or larger port buffers (buffer=)", None,
                      "no prediction for this part (replay with the change to measure it)")
    if (job.cluster or {}).get("kind") != "testbed" and not _drops_text(job):
        return _cause("comm_wait", seconds, ev + "; no drops or buffer limits recorded: ranks waiting for each "
                      "other's messages (computation at different times)", None, None, None)
    # Reached only when the switch dropped nothing (drops are the incast's, above): the time beyond
    # the line rate is flows sharing ports, which a larger buffer cannot shorten.
    return _cause("queueing", seconds, ev + "; no drops at the switch" + _rtt_seen(job),
                  _order_fix(job) + " (fewer flows into one port at a time)", None,
                  "no prediction (replay with the change to measure it)")


def _rtt_seen(job) -> str:
    """The measured round trips as evidence: the smoothed RTT's median and largest against the
    longest path's floor (the difference is queueing), '' when not recorded."""
    mon = job.monitor or {}
    if mon.get("rtt_ms") is None or mon.get("min_rtt_ms") is None:
        return ""
    q = max(0.0, (mon.get("rtt_max_ms") or mon["rtt_ms"]) - mon["min_rtt_ms"])
    return (f"; measured RTT {mon['rtt_ms']:.3g} ms (srtt median; max {mon.get('rtt_max_ms', mon['rtt_ms']):.3g}) "
            f"over a floor of {mon['min_rtt_ms']:.3g} ms: up to {q:.3g} ms of queueing per round trip")


def _lossy_link(job, switch_drops: int, host_drops: int):
    """With a lossy link configured (``loss``) whose losses (the monitor's frames lost on a link,
    or, unmonitored, any retransmission) outnumber the switch's and the host queues' drops: a
    function ``(seconds, evidence) -> cause``; else None."""
    loss = (job.cluster or {}).get("loss") or {}
    if not loss:
        return None
    mon = job.monitor or {}
    line = mon.get("line_losses")
    if line is None:
        line = job.retransmissions or job.timeouts or 0
    if not line or line <= max(switch_drops or 0, host_drops or 0):
        return None
    links = ", ".join(f"{h}'s link loses {p:.3%} of its cells" for h, p in loss.items())
    by_port = mon.get("line_losses_by_port") or {}
    port = max(by_port, key=by_port.get) if by_port else None
    hosts = " ".join(loss)

    def cause(seconds, ev):
        text = (f"{ev}; {links}: {line} frames lost on links" + (f" (most cells lost on the way to port {port}: "
                                                                   f"{by_port[port]})" if port else "")
                + f", {switch_drops or 0} at the switch's buffers, {host_drops or 0} in host queues")
        return _cause("lossy_link", seconds, text, f"a link without errors for {hosts} (a bad cable, NIC or "
                      "fibre: loss unset); TCP only recovers faster (rto_min lower, the linux stack's SACK/RACK)",
                      seconds, "fitted rule: no losses, no timeouts or recovery", {"cluster": {"loss": None}})
    return cause


def _incast_buffer(job):
    """``(fix, apply)`` for switch drops in a workload whose burst per port is known
    (the all-to-all broadcast: ``nodes - 1`` senders of ``size`` at once into one port): port
    buffers that hold the burst; None otherwise (the burst is not known)."""
    if job.options.get("workload") != "alltoall_broadcast" or job.nodes < 2:
        return None
    size = _transport_bytes(job.options.get("size"))
    if not size:
        return None
    burst = size * (job.nodes - 1)
    want = 1 << max(16, (2 * burst - 1).bit_length())  # a power of two at least twice the burst
    have = (job.cluster or {}).get("buffer")
    if have and have >= want:
        return None
    text = f"{want // 1024}KB" if want < 1 << 20 else f"{want >> 20}MB"
    had = f" (now {have / 1024:g} KB)" if have else ""
    return (f"port buffers that hold the burst: buffer={text}{had}, over twice the {job.nodes - 1} senders x "
            f"{size / 1000:g} KB arriving at one port at once; or {_order_fix(job)}", {"cluster": {"buffer": text}})


def _order_fix(job) -> str:
    """The send-order knob of the job's workload."""
    if job.options.get("workload") == "alltoall_broadcast":
        return "send order order=shifted (rank i starts at i+1: no port gets every sender at once)"
    return "send order/pacing"


def _drops_text(job) -> str:
    mon = job.monitor or {}
    sw = job.switch_drops or mon.get("switch_drops") or 0
    ports = {k: v for k, v in (job.switch_drops_by_port or mon.get("switch_drops_by_port") or {}).items() if v}
    port = max(ports, key=ports.get) if ports else None
    cells = mon.get("switch_cells_dropped") or 0
    return (f"; {sw} {'frames lost' if cells else 'drops'} at the switch" + (f" ({cells} cells dropped)" if cells else "")
            + (f", most at port {port} ({ports[port]})" if port else "")) if sw else ""


def _merged(cs: list[dict]) -> list[dict]:
    """Causes of the same name (a drop's RTO waits and its other waits) as one. Where the parts
    have different fixes, the merged fix names each with its part's seconds; where only some parts
    have a predicted gain, the gain stays theirs and its method says which seconds it covers (a
    10 ms RTO min shortens the timeouts of a 65 s incast, not its 58 s of queueing)."""
    groups: dict[str, list[dict]] = {}
    for c in cs:
        groups.setdefault(c["cause"], []).append(c)
    out = []
    for parts in groups.values():
        if len(parts) == 1:
            out.append(dict(parts[0]))
            continue
        m = dict(parts[0])
        total = round(sum(c["seconds"] for c in parts), 6)
        m["seconds"] = total
        m["evidence"] = "; and ".join(c["evidence"] for c in parts)
        m["apply"] = next((c["apply"] for c in parts if c["apply"]), None)
        fixes = list(dict.fromkeys(c["fix"] for c in parts if c["fix"]))
        if len(fixes) > 1:
            m["fix"] = "; ".join(f"{f} (for {_fmt(sum(c['seconds'] for c in parts if c['fix'] == f))} of it)"
                                 for f in fixes)
        else:
            m["fix"] = fixes[0] if fixes else None
        known = [c for c in parts if c["predicted_gain_s"] is not None]
        m["predicted_gain_s"] = round(sum(c["predicted_gain_s"] for c in known), 6) if known else None
        if known and len(known) < len(parts):
            covered = sum(c["seconds"] for c in known)
            m["method"] = (f"{'; '.join(dict.fromkeys(str(c['method']) for c in known))}; this covers "
                           f"{_fmt(covered)} of the {_fmt(total)}: the other {_fmt(total - covered)} "
                           "has no prediction (replay with the change to measure it)")
        elif known:
            m["method"] = "; ".join(dict.fromkeys(str(c["method"]) for c in known))
        out.append(m)
    return out


def diagnose(job) -> dict:
    """The diagnosis of one job: fidelity line, causes (largest first), dominant loss, launch."""
    cs = sorted(_merged(causes(job)), key=lambda c: -c["seconds"])
    # the dominant loss: the one whose removal gains most (its seconds where nothing is predicted)
    # (a loss under a thousandth of the job is noise, not an answer: a 1-rank job's calls to itself)
    losses = sorted((c for c in cs if c["loss"] and c["seconds"] > 1e-3 * job.seconds and c["cause"] not in EXTERNAL),
                    key=lambda c: -(c["predicted_gain_s"] if c["predicted_gain_s"] is not None else c["seconds"]))
    out = {"job": job.label, "kind": job.kind, "seconds": round(job.seconds, 6), "nodes": job.nodes,
           "fidelity": fidelity.check(job), "causes": cs, "dominant": losses[0] if losses else None, "warnings": []}
    if job.options.get("failed"):
        out["failed"] = job.options["failed"]
    if job.wall_seconds is not None and job.wall_seconds > job.seconds:
        launch = job.wall_seconds - job.seconds
        out["launch"] = _cause("launch", launch, f"{_fmt(launch)} of the run's {_fmt(job.wall_seconds)} was outside "
                               f"the job ({_fmt(job.seconds)}): starting {job.nodes} ranks and connecting them",
                               "run the job sequentially (no --nodes), or keep the ranks and connections: many "
                               "jobs in one `clusterlab run -n N` job", launch, "measured: the launch is removed")
        out["launch_first"] = launch > LAUNCH_WARN_RATIO * max(job.seconds, 1e-9)
        if out["launch_first"]:
            out["warnings"].append(f"launch and connection set-up ({_fmt(launch)}) cost {launch / max(job.seconds, 1e-9):.0f}x "
                                   f"the job ({_fmt(job.seconds)}): the job is too small for {job.nodes} ranks")
    for c in cs:  # an emulated time that the fidelity check does not trust is said beside every cause
        c["trusted"] = out["fidelity"]["ok"]
    if job.kind == "program":  # a user's program: each rank's own split, and the hosts' counters
        blind = set(job.options.get("no_tcp_info") or ())  # MPI's own transport: no TCP_INFO of ours
        out["per_rank"] = [{"rank": r.rank, "wall_s": round(r.total, 6), "compute_s": round(r.compute, 6),
                            "transfer_s": round(r.comm - r.rto, 6),
                            "rto_wait_s": None if r.rank in blind else round(r.rto, 6),
                            "cpu_s": None if r.cpu is None else round(r.cpu, 6), "bytes_sent": int(r.bytes),
                            "timeouts": None if r.rank in blind else int(r.timeouts)}
                           for p in job.passes for r in p.ranks]
        out["hosts_tcp"] = job.options.get("hosts_tcp") or {}
    return out
