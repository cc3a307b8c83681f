"""Seed 000, Fig. 2: time of the all-to-all broadcast against the maximum RTO (MIN = 200 ms).

Every point at dilation 3: MAX 500 ms needs k >= 2 (the kernel's MAX is at least 1 s) and 60 s
allows k <= 2 (at most 120 s), so no one k spans the seed's whole sweep; at k = 3 it ends at
40 s, where a MIN of 200 ms has backed off eight times (0.2 .. 25.6 s) either way."""


from clusterlab.errors import ConfigError
from clusterlab.experiments.claims import fmt, fmt_secs, groups, median_of
from clusterlab.experiments.spec import DilationCheck, Grid, Study, TransportConfig, scatter, seed_numbers
from clusterlab.experiments.studies.seed000 import NOTES, SCALES, SETUP, STACKS, SWITCH, SWITCHES, spread
from clusterlab.experiments.workloads import alltoall_broadcast
from clusterlab.units import parse_duration

STUDY = Study(
    name="seed000-fig2",
    title="Seed 000 Fig. 2: all-to-all broadcast time vs MAX (MIN = 200 ms)",
    cluster=SWITCH.with_settings(dilation=3.0),
    workload=alltoall_broadcast(size="50KB"),
    transport=TransportConfig(rto_min="200ms"),
    grid=Grid(scale=SCALES, switch=SWITCHES, stack=STACKS, rto_max=["500ms", "1s", "2s", "5s", "10s", "20s", "40s"]),
    checks=[DilationCheck({"hosts": 16, "rto_max": "1s", "stack": "seed-era", "switch": "atm"}, dilations=(3, 6))],
    repeat=10, warmup=1, monitor=True,
    quick={"scale": "16 hosts", "hosts": "8", "switch": "atm", "rto_max": "1s,40s", "repeat": "2"},
    report=[scatter(x="rto_max_s", y="seconds", hue="switch+stack+scale", logx=True),
            scatter(x="rto_max_s", y="timeouts_per_node", hue="switch+stack+scale", logx=True),
            seed_numbers("000", "Fig. 2")],
    notes=NOTES,
)


# What the paper says of this figure (its text: the figures are not in the texts), and the rule
# judging each claim from this study's rows.
def _timed_out_after(rs, x, xx) -> float | None:
    """The round timeout (s, emulated) when every row at ``x == xx`` failed by timing out: no
    round finished in it, so the time there is at least that (a lower bound, not a stall of the
    job's own making: a crash or a kill is not counted)."""
    at = [r for r in rs if r.get(x) == xx]
    if not at or not all(r.get("failed") and "timed out" in str(r["failed"]) for r in at):
        return None
    try:
        return parse_duration(str(at[0].get("round_timeout")), "round_timeout")
    except ConfigError:
        return None


def _extremes(x, y, expect_larger_at_max: bool | None, group="scale"):
    """y at the largest x against y at the smallest, per ``group``. Where no round finished at
    the largest x before the round timeout, the timeout is a lower bound of y there.

    >>> rows = [{"rto_max_s": 1.0, "seconds": 0.3, "scale": "16", "check": ""},
    ...         {"rto_max_s": 60.0, "seconds": 0.9, "scale": "16", "check": ""}]
    >>> text, ok = PAPER["Fig. 2"]["claims"][0][2](rows)
    >>> ok, text
    (True, '16: 0.9 s at MAX 60 s vs 0.3 s at MAX 1 s (3x)')
    >>> rows[1:] = [{"rto_max_s": 60.0, "seconds": None, "scale": "16", "check": "", "round_timeout": "20s",
    ...              "failed": "rank 6 failed: CommTimeout: rank 6: timed out waiting for a message"}]
    >>> PAPER["Fig. 2"]["claims"][0][2](rows)
    ('16: no round finished in 20 s at MAX 60 s (so >= 20 s) vs 0.3 s at MAX 1 s (>= 66.7x)', True)
    """
    def f(rows):
        parts, oks = [], []
        for g, rs in groups(rows, group).items():
            xs = sorted({r[x] for r in rs if r.get(x) is not None})
            if len(xs) < 2:
                continue
            lo, hi = median_of(rs, y, **{x: xs[0]}), median_of(rs, y, **{x: xs[-1]})
            bound = _timed_out_after(rs, x, xs[-1]) if hi is None else None
            if lo is None and _timed_out_after(rs, x, xs[0]) is not None:
                parts.append(f"{g}: not measured (no round finished at MAX {fmt_secs(xs[0])}, so nothing to compare with)")
                continue
            if lo is None or (hi is None and bound is None):
                continue
            if hi is None:
                ratio = bound / lo if lo else float("inf")
                parts.append(f"{g}: no round finished in {fmt_secs(bound)} at MAX {fmt_secs(xs[-1])} (so >= "
                             f"{fmt_secs(bound)}) vs {fmt(lo)} s at MAX {fmt_secs(xs[0])} (>= {fmt(ratio)}x)")
            else:
                ratio = hi / lo if lo else float("inf")
                parts.append(f"{g}: {fmt(hi)} s at MAX {fmt_secs(xs[-1])} vs {fmt(lo)} s at MAX {fmt_secs(xs[0])} "
                             f"({fmt(ratio)}x)")
            if expect_larger_at_max is not None:  # beyond noise: 10% or more (a lower bound proves only "larger")
                oks.append(ratio >= 1.1 if expect_larger_at_max else (hi is not None and ratio <= 1 / 1.1))
        return "; ".join(parts) or "not measured", (all(oks) if oks else None)
    return f


PAPER = {"Fig. 2": {
        "setup": SETUP,
        "caption": "Execution time of the broadcasting program (MIN = 200 ms); 100 nodes, barrier, 50 KB to "
                   "every other node, barrier; MAX varied up to the default 60000 ms",
        "claims": [
            ("the default MAX (60 s) makes the run longer; time tends to be smaller when MAX is short",
             "longest at MAX = 60000 ms", _extremes("rto_max_s", "seconds", True)),
            ("marks dispersed but not at random: time is decided by the retransmission interval's exponential "
             "backoff", "steps of 6 s, 12 s, 24 s", spread("rto_max_s", "seconds", None, unit=" s")),
        ]}}
