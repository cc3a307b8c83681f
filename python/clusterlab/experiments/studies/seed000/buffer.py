"""Seed 000's unknown: the AN1000's cell buffer per output port. Fig. 5's comparison (every host
drawing its own MIN from [200, 300 ms] against MIN 200 ms on every host, MAX = MIN + 100 ms) on
the ATM cell switch at port buffers from 256 to 8192 cells (13.6 KB to 434 KB), both TCP stacks,
at dilation 10 as Fig. 5. The paper does not give the buffer, so this study says at which buffer
sizes the seed's claim appears, not whether the seed was right."""

import statistics

from clusterlab.experiments.claims import fmt
from clusterlab.experiments.spec import Grid, Study, TransportConfig, scatter, seed_numbers
from clusterlab.experiments.studies.seed000 import NOTES, SETUP, STACKS, SWITCH
from clusterlab.experiments.workloads import alltoall_broadcast

BUFFERS = ["256cells", "512cells", "1024cells", "2048cells", "4096cells", "8192cells"]

STUDY = Study(
    name="seed000-buffer",
    title="Seed 000, the ATM switch's port buffer: random vs fixed MIN (Fig. 5) at 256..8192 cells",
    cluster=SWITCH.with_settings(dilation=10.0, switch="atm", rate="155.52Mbit", mtu=9180),
    # A round unfinished after 30 s (undilated; rounds that recover take well under 1 s) fails
    # its point: with MIN 200 ms on every host, flows whose retransmissions collide at a small
    # buffer retransmit in step every MAX and lose the same cells each time (an 8-host try at
    # 256 cells waited 6.5 minutes for the kernel to give up).
    workload=alltoall_broadcast(size="50KB", round_timeout="30s"),
    transport=TransportConfig(rto_min="200ms", rto_max_offset="100ms"),
    grid=Grid(buffer=BUFFERS, stack=STACKS, rto_min_jitter=["0ms", "100ms"]),
    repeat=5, warmup=1, monitor=True,
    quick={"hosts": "8", "buffer": "1024cells,8192cells", "stack": "seed-era", "repeat": "1"},
    report=[scatter(x="buffer", y="retransmissions_per_node", hue="rto_min_jitter+stack"),
            scatter(x="buffer", y="seconds", hue="rto_min_jitter+stack"),
            seed_numbers("000", "Fig. 5, port buffer")],
    notes=NOTES + " This study varies the port buffer (the paper does not give it); 16 hosts, the all-to-all "
                  "broadcast of Figs. 3-5, MIN 200 ms fixed or random in [200, 300 ms], MAX = MIN + 100 ms.",
)


def _cells(r) -> int:
    return int(str(r["buffer"]).removesuffix("cells"))


def _per_buffer(y: str, expect_lower: bool, margin: float = 0.9, tolerance: float = 0.25):
    """Random against fixed MIN at each buffer size and stack (the same dilation throughout):
    the ratio of means, and which buffers give the seed's effect. The verdict is the one the
    buffers agree on, or none when they split (then the text says where each holds)."""
    def f(rows):
        every = [r for r in rows if not r.get("check") and r.get("buffer")]
        rs = [r for r in every if isinstance(r.get(y), (int, float))]
        parts, oks = [], []
        for st in sorted({r.get("stack") for r in every}, key=str):
            cells = []
            for b in sorted({_cells(r) for r in every if r.get("stack") == st}):
                failed = sorted({"random" if r.get("rto_min_jitter_s") else "fixed" for r in every
                                 if r.get("stack") == st and _cells(r) == b and r.get("failed")})
                at = [r for r in rs if r.get("stack") == st and _cells(r) == b]
                fixed = [r[y] for r in at if not r.get("rto_min_jitter_s")]
                rand = [r[y] for r in at if r.get("rto_min_jitter_s")]
                if failed:  # a round never finished: no ratio, but where it happens is the finding
                    cells.append(f"{b}: the job failed with {' and '.join(failed)} MIN")
                    continue
                if not fixed or not rand or not statistics.mean(fixed):
                    continue
                ratio = statistics.mean(rand) / statistics.mean(fixed)
                ok = ratio < margin if expect_lower else abs(ratio - 1) <= tolerance
                oks.append(ok)
                cells.append(f"{b}: {fmt(ratio)}x{'' if ok else ' (no)'}")
            if cells:
                parts.append(f"{st} TCP, random/fixed by buffer cells: " + ", ".join(cells))
        if not oks:
            return "not measured", None
        verdict = True if all(oks) else False if not any(oks) else None
        return "; ".join(parts), verdict
    return f


PAPER = {"Fig. 5, port buffer": {
    "setup": SETUP,
    "caption": "Fig. 5's claims on the ATM switch at port buffers of 256..8192 cells (the buffer is not in the "
               "paper): random MIN in [200, 300 ms] per host against MIN 200 ms on every host",
    "claims": [
        ("retransmissions totally lower than with the same MIN on every node (Fig. 4)", "lower",
         _per_buffer("retransmissions_per_node", True)),
        ("execution time almost the same as in Fig. 3", "same", _per_buffer("seconds", False)),
    ]}}
