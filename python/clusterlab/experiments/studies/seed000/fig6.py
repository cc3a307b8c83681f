"""Seed 000, Fig. 6: speedup of HPA (10M transactions, 5000 items, minimum support 0.7%) against
hosts, default vs tuned TCP retransmission timers, retransmissions and timeouts per pass."""

import json
import statistics

from clusterlab.experiments.claims import fmt, median_of
from clusterlab.experiments.spec import Grid, Study, TransportConfig, per_pass, scatter, seed_numbers, speedup
from clusterlab.experiments.studies.seed000 import NOTES, SETUP, SOLARIS, SWITCH, SWITCHES
from clusterlab.experiments.workloads import hpa_job

# Replayed compute (one real run per host count records what each rank computed; the replays
# send its messages over the testbed while each rank waits its CPU seconds): 2 cores cannot
# compute for 100 hosts, and the seed's tuned MAX (below 1 s) needs dilation, which a real job
# cannot take. "real" runs the miners (1-16 hosts, MAX 1 s for the tuned line).
COMPUTE = "replay"

TUNED = TransportConfig(rto_min="250ms", rto_min_jitter="100ms", rto_max_offset="100ms",
                        label="tuned (MIN 250..350 ms random, MAX = MIN + 100 ms)")
# A real job cannot be dilated, and MAX below 1 s needs dilation: the closest at real time.
TUNED_REAL_TIME = TransportConfig(rto_min="250ms", rto_min_jitter="100ms", rto_max="1s",
                                  label="tuned (MIN 250..350 ms random, MAX 1 s)")

# The timers as an axis of their own, each with its dilation: the tuned MAX (350-450 ms) needs
# k >= 2.86 and the default MAX (60 s) allows k <= 2, so no one k serves both. Dilation also
# divides whatever CPU the messages cost by k, which favours a dilated line; the third line,
# the default MIN at k = 3 with MAX 40 s (60 s x 3 exceeds the kernel's 120 s; these runs never
# back off near 40 s), compares default and tuned timers at the same k. (Names without commas:
# `--set timers=NAME,NAME` selects some.)
TIMERS = [
    {"name": "default (MIN 200 ms / MAX 60 s)", "rto_min": "200ms", "rto_max": "60s"},
    {"name": "default at k=3 (MIN 200 ms / MAX 40 s)", "rto_min": "200ms", "rto_max": "40s", "dilation": 3.0},
    {"name": "tuned (MIN 250..350 ms random / MAX = MIN + 100 ms)", "rto_min": "250ms", "rto_min_jitter": "100ms", "rto_max_offset": "100ms", "dilation": 3.0},
]

# The seed's 200 MHz Pentium Pro against one core of this machine: about 100x on integer code
# (an estimate chained through SPECint95/2000/2006 results, not a measurement). The network is
# the same 155 Mbit/s, so the ratio of computation to communication, which decides where the
# speedup saturates, is the seed's only when each rank's computation is replayed 100x slower.
SEED_CPU = 100
# data too: a record may join runs at two data sizes (1M on both switches, the seed's 10M on the
# cell switch), each its own lines and its own claim verdicts
HUE = "switch+timers+data" if COMPUTE == "replay" else "switch+tcp+data"

STUDY = Study(
    name="seed000-fig6",
    title="Seed 000 Fig. 6: HPA speedup, default vs tuned retransmission timers",
    cluster=SWITCH.with_settings(hosts=None),  # hosts = max(2, ranks)
    workload=hpa_job(data="seed000:10M", min_support=0.007, compute=COMPUTE),
    grid=Grid(ranks=[1, 2, 4, 8, 16] + ([32, 64, 100] if COMPUTE == "replay" else []), switch=SWITCHES,
              **({"timers": TIMERS} if COMPUTE == "replay" else {"tcp": [SOLARIS, TUNED_REAL_TIME]}),
              compute_scale=[1, SEED_CPU] if COMPUTE == "replay" else [1]),
    repeat=10, warmup=1, monitor=True,
    quick={"data": "seed000:100K", "ranks": "1,4", "compute_scale": "1", "repeat": "1", "warmup": "0", "switch": "atm"},
    report=[speedup(x="ranks", y="seconds", hue=HUE, where={"compute_scale": 1},
                    title="speedup, this machine's CPU (compute_scale 1)"),
            speedup(x="ranks", y="seconds", hue=HUE, where={"compute_scale": SEED_CPU},
                    title=f"speedup, the seed's CPU (compute replayed {SEED_CPU}x slower)"),
            scatter(x="ranks", y="seconds", hue=HUE, where={"compute_scale": SEED_CPU}),
            per_pass(y="retransmissions_by_pass", hue=HUE),
            per_pass(y="timeouts_by_pass", hue=HUE),
            seed_numbers("000", "Fig. 6")],
    notes=NOTES + " HPA here: clusterlab's HPA (prefix partitioning by default), one process per host; the "
                  "seed ran two processes per node (candidate generation and counting).",
)


# What the paper says of this figure (its text: the figures are not in the texts), and the rule
# judging each claim from this study's rows.
def _fig6_lines(rows) -> dict:
    """Fig. 6's lines: the timers (``timers`` axis, or ``tcp`` in older runs), per compute scale
    when the run has more than one."""
    key = "timers" if any(r.get("timers") for r in rows) else "tcp"
    scales = {r.get("compute_scale", 1) for r in rows if not r.get("check")}
    out: dict = {}
    for r in rows:
        if not r.get("check"):
            line = str(r.get(key)) + (f", compute x{r.get('compute_scale', 1):g}" if len(scales) > 1 else "")
            out.setdefault(line, []).append(r)
    return out


def _speedups(rows):
    """Per line: (largest host count, speedup there, speedup at the host count before it (None
    with two host counts), the line's dilations)."""
    out = {}
    for line, rs in _fig6_lines(rows).items():
        xs = sorted({r["ranks"] for r in rs if r.get("ranks") is not None})
        if len(xs) < 2:
            continue
        t = {x: median_of(rs, "seconds", ranks=x) for x in xs}
        if not (t[xs[0]] and t[xs[-1]]):
            continue
        prev = t[xs[0]] / t[xs[-2]] * xs[0] if len(xs) > 2 and t[xs[-2]] else None
        out[line] = (xs[-1], t[xs[0]] / t[xs[-1]] * xs[0], prev, frozenset(r.get("dilation", 1.0) for r in rs))
    return out


# "Beyond noise" for these rules: 10% above for "tuned above default"; a default line saturates
# when its last step of host counts gains under 5% speedup (or loses).
ABOVE, SATURATED = 1.1, 1.05


def _fig6_speedup(rows):
    """The seed's claim has two halves, both judged: the default line saturates (its speedup
    gains under 5% over its last step of host counts, or falls) and the tuned line ends at least
    10% above it. Lines are compared only at the same compute scale and dilation (a dilated
    line's messages cost the CPU k times less).

    >>> def rows(line, secs):
    ...     return [{"timers": line, "ranks": n, "seconds": s, "dilation": 3.0} for n, s in secs.items()]
    >>> flat = rows("default", {4: 40.0, 64: 5.0, 100: 5.1})
    >>> _fig6_speedup(flat + rows("tuned", {4: 40.0, 64: 4.0, 100: 3.0}))[1]
    True
    >>> _fig6_speedup(rows("default", {4: 40.0, 64: 5.0, 100: 3.6}) + rows("tuned", {4: 40.0, 64: 4.0, 100: 3.0}))[1]
    False
    >>> _fig6_speedup(flat + rows("tuned", {4: 40.0, 64: 5.0, 100: 4.9}))[1]
    False
    """
    sp = _speedups(rows)
    if not sp:
        return "not measured", None

    def says(line, n, s, prev):
        return f"{line}: {fmt(s)} at {n} hosts" + (f" ({fmt(prev)} one step before)" if prev else "")
    text = "; ".join(says(line, n, s, prev) for line, (n, s, prev, _) in sp.items())
    oks, unmatched = [], []
    for line, (_, s, _, ks) in sp.items():
        if line.startswith("tuned"):
            tail = line.partition(", compute x")[2]
            default = [(d, dprev) for other, (_, d, dprev, dk) in sp.items()
                       if other.startswith("default") and other.partition(", compute x")[2] == tail and dk == ks]
            if default:
                d, dprev = default[0]
                saturated = dprev is not None and d <= SATURATED * dprev
                oks.append(saturated and s >= ABOVE * d)
            else:
                unmatched.append(line)
    if unmatched and not oks:
        return text + "; not judged: no default line at the tuned line's dilation", None
    return text, (all(oks) if oks else None)


# "The last several passes": the second half of the passes holds at least two thirds of a line's
# retransmissions (at the largest host count, medians per pass), and more than its share of the
# transfer time: HPA's later passes carry most of the bytes, so retransmissions merely in proportion
# to the traffic would be there too.
LATE_SHARE = 2 / 3


def _fig6_passes(rows):
    """Where the retransmissions fall: per line at the largest host count, the median per pass,
    the share in the second half of the passes and that half's share of the transfer time;
    agrees when every line has at least two thirds there and more than the transfer's share.

    >>> def rows(line, per, transfer=None):
    ...     return [{"timers": line, "ranks": 100, "retransmissions_by_pass": per, "time_transfer_by_pass": transfer}]
    >>> _fig6_passes(rows("default", [5, 19, 29, 6, 71, 127, 68, 6], [1, 1, 2, 2, 2, 1, 1, 0]))
    ('default at 100 hosts, median retransmissions by pass: [5, 19, 29, 6, 71, 127, 68, 6], 82% in passes 5-8 (which took 40% of the transfer time)', True)
    >>> _fig6_passes(rows("default", [5, 19, 29, 6, 71, 127, 68, 6], [0, 0, 1, 1, 2, 3, 3, 3]))[1]  # as the traffic
    False
    >>> _fig6_passes(rows("default", [40, 60, 20, 0, 10, 10, 5, 5]))[1]
    False
    >>> _fig6_passes(rows("default", [0, 0, 0, 0]))[1] is None
    True
    """
    rs = [r for r in rows if not r.get("check") and r.get("retransmissions_by_pass")]
    if not rs:
        return "not measured", None

    def lists(g, key):
        out = [json.loads(r[key]) if isinstance(r[key], str) else r[key] for r in g if r.get(key) is not None]
        n = max((len(x) for x in out), default=0)
        return [statistics.median(x[i] if i < len(x) else 0 for x in out) for i in range(n)]
    top = max(r["ranks"] for r in rs)
    parts, oks = [], []
    for line, g in _fig6_lines([r for r in rs if r["ranks"] == top]).items():
        per, transfer = lists(g, "retransmissions_by_pass"), lists(g, "time_transfer_by_pass")
        n = len(per)
        text = f"{line} at {top} hosts, median retransmissions by pass: {per}"
        first = n // 2 + 1  # passes are numbered from 1; the second half starts after n // 2
        if sum(per) > 0 and n >= 2:
            share = sum(per[first - 1:]) / sum(per)
            text += f", {share:.0%} in passes {first}-{n}"
            ok = share >= LATE_SHARE
            if len(transfer) == n and sum(transfer) > 0:
                t_share = sum(transfer[first - 1:]) / sum(transfer)
                text += f" (which took {t_share:.0%} of the transfer time)"
                ok = ok and share > t_share
            oks.append(ok)
        parts.append(text)
    return "; ".join(parts), (all(oks) if oks else None)


PAPER = {"Fig. 6": {
        "setup": SETUP,
        "caption": "Speedup of HPA (10M transactions, 5000 items, minimum support 0.7%, ~800 MB, 8 KB message "
                   "blocks, 64 KB disk blocks) vs PCs; default (MIN 200 ms, MAX 60 s) vs tuned (MIN 250..350 ms "
                   "random per node, MAX = MIN + 100 ms)",
        "claims": [
            ("default: speedup saturates and gets worse at 100 PCs; tuned: good speedup up to 100 PCs",
             "default saturates (under 5% more speedup over its last step of hosts) and tuned ends 10% or "
             "more above it", _fig6_speedup),
            ("TCP retransmission in the last several passes (all-to-all exchange at each pass end)",
             "two thirds or more of the retransmissions in the second half of the passes (at the most "
             "hosts), more than that half's share of the transfer time", _fig6_passes),
        ]}}
