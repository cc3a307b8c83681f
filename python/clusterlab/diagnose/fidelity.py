"""Whether an emulated (testbed) run can be believed: the fidelity check.

Each check compares what the emulation was asked for with what the run recorded:

* CPU: mean spare CPU (idle, I/O wait, niced work) and the share of monitor samples below
  ``CPU_BOUND_SPARE`` (saturated): a starved host cannot keep its link's rate or its timers;
* link rate: the highest per-interval send rate of any host's interface in an interval when its
  shaper held packets back (``qdisc_overlimits``: demand above the rate) against the configured
  rate divided by the dilation;
* RTT: the round trips the monitor sampled from the hosts' connections (``tcp_rtt_ms`` and
  kin, undilated) against those the topology allows (``StarTopo.rtt_bounds``): the minimum RTT
  of the connections between two sites must reach the configured propagation (a WAN's delay
  in force; not judged when none was sampled), and the largest
  smoothed RTT stay within ``RTT_CEILING_FACTOR`` times the propagation plus every queue on the
  path plus the kernel's unscaled delayed ACK (200 ms as run) - beyond that the emulation
  itself delayed the packets (a starved host, a late timer);
* drops where none are expected: interface drops outside the switch ports and host queues
  (``rx_dropped``/``tx_dropped`` of a host: the emulation itself lost packets); packets the
  monitor's own capture missed are told apart (its packet sizes, not the network's);
* timer granularity: the kernel's HZ=250 jiffy (4 ms) against the RTO minimum as it runs
  (dilated: times the dilation): an RTO min of a few jiffies is rounded by up to 4 ms; and
  told beside it, the timer-wheel bucket the RTO max as run falls in (``wheel_bucket_s``).

``check(job)`` returns ``{"ok": bool | None, "line": str, "checks": [...]}`` (None: a testbed
run without the monitor's samples, not checked). A local run has nothing
emulated, but its times are still this machine's: it fails when the machine was loaded, i.e.
every rank computed at under ``MACHINE_SHARE_MIN`` of a core (``machine.machine_factor``: the
least starved rank's wall seconds per CPU second, else the load average recorded before the job). That slowdown is then charged apart (``machine_load``), never named as the job's loss.
"""

from __future__ import annotations

from clusterlab.errors import ConfigError
from clusterlab.monitor.procfs import CPU_BOUND_SPARE

JIFFY_S = 0.004  # HZ=250 (the lab kernels)
JIFFY_SHARE_MAX = 0.25  # one jiffy above this share of the RTO min: the timer cannot be that fine
RATE_SHARE_MIN = 0.5  # a link that queued data yet sent at under half its rate: the shaper lagged
SATURATED_SHARE_MAX = 0.2
SUSTAINED_INTERVALS = 10
BUSY_SAMPLES_MIN = 3  # intervals with a host's shaper holding packets back before its send rate is judged
LINUX_RTO_MIN_S = 0.2
DELACK_MAX_S = 0.2  # TCP_DELACK_MAX: an ACK can wait this long (as run: not dilated)
RTT_CEILING_FACTOR = 2.0  # a smoothed RTT above this many times what the topology allows: the emulation's delay
RTT_FLOOR_SHARE = 0.9  # a minimum RTT under this share of the configured propagation: the delay was not in force
MACHINE_SHARE_MIN = 2 / 3  # a local run whose least starved rank got less of a core than this: a loaded machine


def read_monitor(path):
    from clusterlab.monitor import read_table

    try:
        return read_table(path)
    except (OSError, ValueError) as e:
        raise ConfigError(f"{path}: cannot read ({' '.join(str(e).split())[:200]})") from None


def monitor_facts(tbl, meta: dict, point=None) -> dict:
    """What the fidelity check needs from a monitor table (one point's rows of a study's);
    ``tbl``: a pyarrow table or its pandas frame (a study's, converted once for all points)."""
    df = tbl if hasattr(tbl, "loc") else tbl.to_pandas()
    counts_capture = bool((df.metric == "capture_drops").any())
    if point is not None and "point" in df.columns:
        df = df[df.point == point]
        own = (meta.get("per_point") or {}).get(str(point))  # a study's table: this point's dilation, RTT bounds
        if isinstance(own, dict):
            meta = {**meta, **{k: v for k, v in own.items() if v is not None}}
    out: dict = {"samples": int((df.metric == "cpu_idle").sum())}
    spare = df.loc[df.metric == "cpu_spare", "value"]
    if not len(spare):
        spare = df.loc[df.metric == "cpu_idle", "value"]
    if len(spare):
        out["mean_cpu_spare"] = round(float(spare.mean()), 3)
        out["saturated_share"] = round(float((spare < CPU_BOUND_SPARE).mean()), 3)
    hosts = df[(df.node != "switch") & (df.node != "machine") & (df.iface != "")]
    ivl = df[df.metric == "interval_seconds"].set_index(["node", "t"])["value"]
    # the send rate only counts in intervals when the host's queue held data (demand was there)
    # (the shaper held packets back for tokens: qdisc_overlimits grew in the interval)
    over = hosts[(hosts.metric == "qdisc_overlimits") & (hosts.value > 0)]
    busy = set(zip(over.node, over.t, strict=True))
    peak = 0.0
    tx = hosts[hosts.metric == "tx_bytes"]
    for node, t, v in zip(tx.node, tx.t, tx.value, strict=True):
        dt = ivl.get((node, t), meta.get("interval") or 0.1)
        if (node, t) in busy and dt and dt > 0:
            peak = max(peak, float(v) / float(dt))
    out["busy_samples"] = len(busy)
    out["max_host_tx_bytes"] = float(tx.groupby("node").value.sum().max()) if len(tx) else 0.0
    out["interval"] = float(meta.get("interval") or 0.1)
    out["peak_tx_bytes_per_s"] = round(peak, 1)
    out["unexpected_drops"] = int(hosts.loc[hosts.metric.isin(["rx_dropped"]), "value"].sum())
    # the monitor's own capture (its packet sizes): this point's count; the table's metadata is
    # the last point's (a study's table), so it only stands in for tables without the metric
    if counts_capture:
        out["capture_drops"] = int(df.loc[df.metric == "capture_drops", "value"].sum())
    else:
        out["capture_drops"] = int((meta.get("capture") or {}).get("drops") or 0) if isinstance(meta.get("capture"), dict) else 0
    out["dilation"] = float(meta.get("dilation") or 1.0)
    out.update(_rtt_facts(df, out["dilation"], meta.get("rtt_bounds")))
    # drops at the switch: the bridge's port queues, or frames the ATM switch lost (cells dropped)
    # (less the frames a lossy link lost: the line's, not the switch's)
    sw = df[df.node == "switch"]
    out["line_losses"] = int(sw.loc[sw.metric == "atm_frames_line_lost", "value"].sum())
    out["switch_drops"] = int(sw.loc[sw.metric.isin(["qdisc_drops", "atm_frames_lost"]), "value"].sum()) - out["line_losses"]
    lost = sw[sw.metric == "atm_cells_line_lost"]
    out["line_losses_by_port"] = {str(k): int(v) for k, v in lost.groupby("iface").value.sum().items() if v}
    out["host_queue_drops"] = int(hosts.loc[hosts.metric == "qdisc_drops", "value"].sum())
    # per port in the total's unit: packets (bridge) or frames lost (ATM; their cells said beside)
    by_port = df[(df.node == "switch") & (df.metric.isin(["qdisc_drops", "atm_frames_lost"]))]
    out["switch_drops_by_port"] = {str(k): int(v) for k, v in by_port.groupby("iface").value.sum().items() if v}
    out["switch_cells_dropped"] = int(sw.loc[sw.metric == "atm_cells_dropped", "value"].sum())
    return out


RTT_METRICS = ("tcp_rtt_ms", "tcp_rtt_max_ms", "tcp_rttvar_ms", "tcp_min_rtt_ms", "tcp_rto_ms", "tcp_min_rtt_far_ms")


def _rtt_facts(df, k: float, bounds) -> dict:
    """The round trips the monitor sampled (``sampler``'s ``tcp_rtt_ms`` and kin, ms as run),
    undilated (/ k): ``rtt_ms`` the median of the hosts' mean srtt per sample, ``rtt_max_ms``
    the largest srtt, ``rttvar_ms`` the median RTT variation, ``min_rtt_ms`` the largest
    connection minimum (the longest path's floor), ``rto_seen_ms`` the largest RTO,
    ``min_rtt_far_ms`` the largest minimum of a connection between two sites; with the
    topology's ``rtt_bounds``: ``rtt_floor_ms`` and ``rtt_ceiling_ms``."""
    rt = df[df.metric.isin(RTT_METRICS)]
    out: dict = {}
    if len(rt):
        by = {m: rt.loc[rt.metric == m, "value"] for m in RTT_METRICS}
        if len(by["tcp_rtt_ms"]):
            out.update(rtt_ms=round(float(by["tcp_rtt_ms"].median()) / k, 4),
                       rtt_max_ms=round(float(by["tcp_rtt_max_ms"].max()) / k, 4),
                       rttvar_ms=round(float(by["tcp_rttvar_ms"].median()) / k, 4),
                       min_rtt_ms=round(float(by["tcp_min_rtt_ms"].max()) / k, 4),
                       rto_seen_ms=round(float(by["tcp_rto_ms"].max()) / k, 3),
                       rtt_samples=int(len(by["tcp_rtt_ms"])))
        if len(by["tcp_min_rtt_far_ms"]):  # connections between the two sites (the WAN's propagation applies)
            out["min_rtt_far_ms"] = round(float(by["tcp_min_rtt_far_ms"].max()) / k, 4)
    if isinstance(bounds, dict):
        out.update(rtt_floor_ms=bounds.get("floor_ms"), rtt_ceiling_ms=bounds.get("ceiling_ms"))
    return out


def rtt_check(mon: dict, k: float) -> tuple[bool, str]:
    """The RTT check of the monitor's facts (``monitor_facts``) at dilation ``k``: ``(ok, text)``.

    >>> rtt_check({"rtt_ms": 0.3, "rtt_max_ms": 5.0, "rttvar_ms": 0.1, "min_rtt_ms": 0.05,
    ...            "rtt_floor_ms": 0.0, "rtt_ceiling_ms": 20.0}, 1.0)[0]
    True
    >>> ok, text = rtt_check({"rtt_ms": 900.0, "rtt_max_ms": 26000.0, "rttvar_ms": 400.0, "min_rtt_ms": 170.0,
    ...                       "rtt_floor_ms": 166.0, "rtt_ceiling_ms": 300.0}, 1.0)
    >>> ok, text.split(": ")[-1][:40]
    (False, 'the emulation itself delayed packets (a ')
    """
    rtt, mx, var, lo = mon["rtt_ms"], mon.get("rtt_max_ms"), mon.get("rttvar_ms"), mon.get("min_rtt_ms")
    floor, ceil = mon.get("rtt_floor_ms"), mon.get("rtt_ceiling_ms")
    text = (f"RTT {rtt:.3g} ms (srtt median" + (f", max {mx:.3g}" if mx is not None else "")
            + (f", rttvar {var:.3g}" if var is not None else "") + (f", min {lo:.3g}" if lo is not None else "")
            + (f"; undilated from {k:g}x" if k != 1 else "") + ")")
    if floor is None or ceil is None:
        return True, text + " (not judged: the topology's RTTs not recorded)"
    allowed = RTT_CEILING_FACTOR * (ceil + DELACK_MAX_S * 1e3 / k)
    text += f"; the topology allows {floor:g}..{ceil:.3g} ms"
    far = mon.get("min_rtt_far_ms")
    if floor and far is None:
        text += " (no connection between the sites sampled: the propagation not judged)"
    elif floor and far < RTT_FLOOR_SHARE * floor:
        return False, text + (f": the shortest round trip between the sites, {far:.3g} ms, is under the configured "
                              f"{floor:g} ms propagation (the WAN delay was not in force)")
    if mx is not None and mx > allowed:
        return False, text + (f": an srtt of {mx:.3g} ms is over {allowed:.3g} ms ({RTT_CEILING_FACTOR:g}x the "
                              "propagation, every queue on the path and a 200 ms delayed ACK): the emulation "
                              "itself delayed packets (a starved host or a late timer)")
    return True, text


def _seconds(transport: dict, key: str, default: float | None) -> float | None:
    """A transport setting in seconds (a number or a duration text), ``default`` when unset or unreadable."""
    from clusterlab.units import parse_duration

    v = transport.get(key)
    if v in (None, ""):
        return default
    try:
        return float(v) if isinstance(v, (int, float)) else parse_duration(v, key)
    except ConfigError:
        return default


def _rto_min_s(transport: dict) -> float:
    return _seconds(transport, "rto_min", LINUX_RTO_MIN_S)


def wheel_bucket_s(timeout_s: float, hz: int = 250) -> float:
    """The granularity the kernel's timer wheel gives a timer of ``timeout_s``: level n of the
    wheel holds 64 buckets of 8**n jiffies and a timer is rounded up to its level's bucket, so
    timers armed within one bucket expire together (on one kernel: every emulated host).

    >>> [wheel_bucket_s(t) for t in (0.2, 0.6, 10.0, 120.0)]
    [0.004, 0.032, 0.256, 2.048]
    """
    jiffies = max(1, int(timeout_s * hz))
    level = 0
    while jiffies >= 63 * 8 ** level and level < 8:  # LVL_START(n + 1): 63 << (3 n) jiffies
        level += 1
    return 8 ** level / hz


def check(job) -> dict:
    """The fidelity verdict of ``job`` (a ``run.Job``)."""
    cl = job.cluster or {}
    if cl.get("kind") != "testbed":
        return _local(job)
    k = float(cl.get("dilation") or 1.0)
    mon = job.monitor or {}
    checks = []

    def add(name, ok, text, **values):
        checks.append({"check": name, "ok": ok, "text": text, **values})

    spare = mon.get("mean_cpu_spare", job.cpu_spare)
    sat = mon.get("saturated_share")
    if spare is None:
        add("cpu", True, "spare CPU not recorded (run with the monitor)")
    else:
        ok = spare >= CPU_BOUND_SPARE and (sat is None or sat <= SATURATED_SHARE_MAX)
        add("cpu", ok, f"spare CPU {spare:.0%}" + (f", {sat:.0%} of samples saturated" if sat is not None else "")
            + ("" if ok else f" (wanted spare >= {CPU_BOUND_SPARE:.0%} and at most {SATURATED_SHARE_MAX:.0%} saturated: "
                             "a starved host cannot keep its link rate and timers)"),
            mean_cpu_spare=spare, saturated_share=sat)
    rate = cl.get("rate")
    peak = mon.get("peak_tx_bytes_per_s")
    # a sustained transfer: the busiest host sent at least SUSTAINED_INTERVALS intervals' worth at the rate
    sustained = rate and mon.get("max_host_tx_bytes", 0) >= SUSTAINED_INTERVALS * mon.get("interval", 0.1) * rate / 8 / k
    if rate and peak and sustained and mon.get("busy_samples", 0) >= BUSY_SAMPLES_MIN:
        want = rate / 8.0 / k
        share = peak / want
        ok = share >= RATE_SHARE_MIN
        add("link_rate", ok, f"peak link rate {share:.0%} of the configured {rate / 1e6:g} Mbit/s"
            + (f" / {k:g}" if k != 1 else ""), achieved_share=round(share, 3))
    else:
        add("link_rate", True, "link rate not checked (no sustained transfer: fewer than 3 monitor samples with a "
            f"host's shaper holding packets back, or under {SUSTAINED_INTERVALS} intervals' worth of data)")
    if "rtt_ms" in mon:
        ok, text = rtt_check(mon, k)
        add("rtt", ok, text, rtt_ms=mon["rtt_ms"])
    else:
        add("rtt", True, "RTT not recorded (no connection of a host sent while the monitor sampled, or a run "
            "from before RTTs were recorded)")
    drops = int(mon.get("unexpected_drops") or 0)
    add("drops", drops == 0, "no drops outside the switch ports and host queues" if drops == 0 else
        f"{drops} packets dropped outside the switch ports and host queues (the emulation lost them)",
        unexpected_drops=drops)
    missed = int(mon.get("capture_drops") or 0)
    if missed:  # the monitor's view, not the network's: told, not judged
        add("capture", True, f"the monitor's capture missed {missed} packets (its packet sizes, not the network)",
            capture_drops=missed)
    rto_real = _rto_min_s(job.transport) * k
    share = JIFFY_S / rto_real
    add("timer", share <= JIFFY_SHARE_MAX,
        f"RTO min {rto_real * 1000:g} ms as run ({k:g}x dilated) is {rto_real / JIFFY_S:.3g} jiffies of 4 ms (HZ=250)"
        + ("" if share <= JIFFY_SHARE_MAX else ": rounded up to whole jiffies, the timer is off by up to "
           f"{share:.0%}; dilate more")
        + _wheel_note(_seconds(job.transport, "rto_max", None), k),
        jiffy_share=round(share, 3))
    bad = [c for c in checks if not c["ok"]]
    # without the monitor's samples the CPU, link-rate and RTT checks had nothing to judge: a
    # PASS would vouch for what nobody looked at (ok None: not known, neither trusted nor failed)
    unknown = spare is None and not bad
    head = ("fidelity: FAIL (" + "; ".join(c["text"] for c in bad) + ")" if bad else
            "fidelity: NOT CHECKED (no monitor samples: spare CPU, link rate and RTT unknown)" if unknown else
            "fidelity: PASS")
    detail = "; ".join(c["text"] for c in checks if c["ok"] and not (unknown and c["check"] == "cpu"))
    return {"ok": None if unknown else not bad, "emulated": True, "checks": checks,
            "line": f"{head}" + (f" - {detail}" if detail else "")}


def _wheel_note(rto_max: float | None, k: float) -> str:
    """Where the longest backoff sits in the timer wheel (told, not judged: it is why lock-step
    retransmission is more exact here than between separate machines, docs/studies.md)."""
    if not rto_max:
        return ""
    b = wheel_bucket_s(rto_max * k)
    return (f"; backoffs up to the RTO max as run, {rto_max * k:g} s, expire in timer-wheel buckets of up to "
            f"{b * 1000:g} ms (equal timeouts of all hosts together)") if b > JIFFY_S else ""


def _local(job) -> dict:
    """A local run: nothing emulated; was the machine loaded (every rank slowed down)?"""
    from clusterlab.diagnose.machine import machine_factor

    f, how = machine_factor(job)
    load = (job.options or {}).get("machine") or {}
    la = load.get("load_before_after")
    lt = (f"; load average {la[0]:g} before, {la[1]:g} after on {load.get('cpus', '?')} CPUs" if la else "")
    if how is None and f == 1.0 and not la:
        return {"ok": True, "emulated": False, "checks": [],
                "line": "fidelity: not emulated (a local run: the times are this machine's; its load not told: "
                        "fewer than two ranks with CPU seconds to compare, no load average recorded)"}
    share = 1.0 / f
    ok = share >= MACHINE_SHARE_MIN
    text = (f"every rank computed at {share:.0%} of a core or more ({how or 'no slowdown seen'}){lt}" + ("" if ok else
            f" (wanted >= {MACHINE_SHARE_MIN:.0%}: the machine was loaded by other work; that slowdown of every rank "
            "is charged apart, as the machine's load, and the job's gains are predicted at this speed)"))
    check = {"check": "machine_load", "ok": ok, "text": text, "core_share": round(share, 3)}
    head = "fidelity: PASS" if ok else f"fidelity: FAIL ({text})"
    return {"ok": ok, "emulated": False, "checks": [check],
            "line": head + (" - not emulated (a local run: the times are this machine's); " + text if ok else "")}
