"""Seed 003, Fig. 6: time to move a large file front-end -> node and back against the TCP buffer
size (tcp_rmem = tcp_wmem), 4 KiB to 512 KiB, and with Linux's autotuning left on."""

from clusterlab.experiments.spec import Grid, Study, scatter
from clusterlab.experiments.studies._seed003 import AUTOTUNING, BOTH, GIGABIT, NOTES
from clusterlab.experiments.workloads import pingpong

STUDY = Study(
    name="seed003-fig6",
    title="Seed 003 Fig. 6: transfer time of a large file vs TCP buffer size (both directions)",
    cluster=GIGABIT,
    # One message of 64 MiB from host 0's memory to host 1 and back: the paper's 512 MB file
    # read from a RAM drive, front-end to node and back (its time is 8x ours at the same rate).
    workload=pingpong(sizes="64MiB", trial_time=0.001),
    grid=Grid(tcp_buffer=[*BOTH, AUTOTUNING]),
    repeat=3, warmup=0, monitor=False,
    quick={"repeat": "1", "hosts": "2", "sizes": "4MiB", "tcp_buffer": "4KiB,64KiB,autotuning"},
    report=[scatter(x="tcp_buffer", y="seconds", title="one-way time of a 64 MiB message (autotuning: Linux's own triple)")],
    notes=NOTES + (" Fig. 6 moves the message between memories (what the paper's RAM drive gives: no disk), "
                   "each way once per round trip; seconds is the one-way time, best of 3 trials."),
)
