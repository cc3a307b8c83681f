"""Seed 001, Figs. 12-15 (Ganglia during HPA + bonnie): the target's network (Fig. 12), an
initiator's CPU (13), the target's CPU (14) and its storage I/O (15), against the number of
initiators; each job monitored with per-host CPU (columns of the study's table)."""

import dataclasses
import statistics

from clusterlab.experiments.claims import fmt
from clusterlab.experiments.spec import Grid, scatter, seed_numbers
from clusterlab.experiments.studies.seed001 import SETUP, by_ranks
from clusterlab.experiments.studies.seed001.fig10 import STUDY as FIG10

STUDY = dataclasses.replace(
    FIG10,
    name="seed001-fig12",
    title="Seed 001 Figs. 12-15: target network, initiator and target CPU, target storage I/O during HPA + bonnie",
    grid=Grid(bonnie=[True], ranks=[1, 2, 4, 8]),
    repeat=1,
    report=[scatter(x="ranks", y="st_tx_mbps"),
            scatter(x="ranks", y="st_rx_mbps"),
            scatter(x="ranks", y="initiator_user_cpu"),
            scatter(x="ranks", y="io_share"),
            scatter(x="ranks", y="target_cpu"),
            scatter(x="ranks", y="target_io_wait_threads"),
            scatter(x="ranks", y="backing_mbps"),
            seed_numbers("001", "Figs. 12-15")],
)


# What the paper says of this figure (its text: the figures are not in the texts), and the rule
# judging each claim from this study's rows.
def _s001_below(y, limit: float, unit=""):
    def f(rows):
        v = [r[y] for r in rows if not r.get("check") and isinstance(r.get(y), (int, float))]
        if not v:
            return "not measured", None
        return f"median {fmt(statistics.median(v))}{unit}, at most {fmt(max(v))}{unit}", max(v) <= limit
    return f


def _s001_cpu_turns(rows):
    """The first initiator's user CPU, and the share of the job spent waiting for the target
    (``io_share``: a userspace initiator's wait is idle time to the kernel, not I/O wait)."""
    user, wait = by_ranks(rows, "initiator_user_cpu"), by_ranks(rows, "io_share")
    if len(user) < 2 or len(wait) < 2:
        return "not measured", None
    lo, hi = min(user), max(user)
    text = (f"first initiator: {fmt(user[lo])} cores user, {fmt(wait[lo])} of the job reading at {lo} initiators; "
            f"{fmt(user[hi])} user, {fmt(wait[hi])} reading at {hi}")
    return text, user[hi] < user[lo] and wait[hi] > wait[lo]


def _s001_bottleneck(rows):
    names = [r.get("bottleneck") for r in rows if not r.get("check") and r.get("bottleneck")]
    if not names:
        return "not measured", None
    top = max(set(names), key=names.count)
    return f"named by the monitor: {', '.join(f'{n} x{names.count(n)}' for n in sorted(set(names)))}", \
        top == "backing store"


PAPER = {"Figs. 12-15": {
        "setup": SETUP,
        "caption": "Ganglia during HPA + bonnie++: target network (12), initiator CPU (13), target CPU (14), "
                   "target storage I/O (15)",
        "claims": [
            ("target network at most 60 MB/s (about 500 Mbit/s): margin left on Gigabit Ethernet", "<= 60 MB/s",
             _s001_below("st_tx_mbps", 60.0, " MB/s")),
            ("initiator CPU mostly user with one initiator, mostly I/O wait with more", "user -> wait",
             _s001_cpu_turns),
            ("storage I/O, not the network, bounds the system", "storage", _s001_bottleneck),
        ]}}

# The paper's Figs. 12-15 are Ganglia graphs: the record keeps the monitor's per-point panels.
RECORD_PANELS = True
