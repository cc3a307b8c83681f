"""Seed 003, Fig. 6: time to move a large file front-end -> node and back against the TCP buffer
size (tcp_rmem = tcp_wmem), 4 KiB to 512 KiB, and with Linux's autotuning left on."""

from clusterlab.experiments.spec import Grid, Study, improvement, scatter
from clusterlab.experiments.studies.seed003 import AUTOTUNING, BOTH, GIGABIT, NOTES
from clusterlab.experiments.workloads.filecopy import file_transfer

STUDY = Study(
    name="seed003-fig6",
    title="Seed 003 Fig. 6: transfer time of a large file vs TCP buffer size (both directions)",
    cluster=GIGABIT,
    # The paper's check: a 512 MB file read from a RAM drive, front-end (host 0) to a node
    # (host 1) and back, each end reading and writing tmpfs (/dev/shm).
    workload=file_transfer(size="512MB", directory="/dev/shm"),
    grid=Grid(tcp_buffer=[*BOTH, AUTOTUNING]),
    repeat=1, warmup=0, monitor=False,
    quick={"hosts": "2", "size": "4MiB", "tcp_buffer": "4KiB,64KiB,autotuning"},
    report=[scatter(x="tcp_buffer", y="seconds", hue="direction",
                    title="Fig. 6(a): time to move a 512 MB file from tmpfs to tmpfs (autotuning: Linux's own triple)"),
            # Fig. 6(b), "the benefits of parameters adjustments": each buffer against the
            # default, which here is Linux's own triple with autotuning on.
            improvement(x="tcp_buffer", baseline="autotuning", hue="direction",
                        title="Fig. 6(b): each buffer's gain in transfer time over Linux's default (autotuning)")],
    notes=NOTES + (" Fig. 6 moves a 512 MB file from host 0's tmpfs to host 1's tmpfs and back (the paper's RAM "
                   "drive); each direction is timed from reading the file to the other end having written it, "
                   "and checked by CRC-32."),
)
