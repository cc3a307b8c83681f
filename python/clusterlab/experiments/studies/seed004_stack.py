"""Seed 004, section 6 re-cast for today: the protocol stack under NPB across the 135M-ATM line.
The seed ran NPB 2.3 over LAM MPI on BSD/OS 3.1 and on RedHat Linux 6.2 (Linux generally faster;
the seed suspects BSD/OS's mbuf chains). Today's stack choices are the congestion control
(reno, cubic, bbr; per socket) and clusterlab's TCP mesh engine (Rust or the Python reference)."""

from clusterlab.experiments.spec import Grid, Study, Testbed, TransportConfig, scatter, seed_numbers
from clusterlab.experiments.workloads.npb import npb_replay

CONGESTION = [TransportConfig(congestion=cc, label=cc) for cc in ("reno", "cubic", "bbr")]

STUDY = Study(
    name="seed004-stack",
    title="Seed 004 protocol stacks re-cast: NPB at 8 ranks over 135M-ATM, congestion control x mesh engine",
    cluster=Testbed(hosts=8, rate="1Gbit", sites="4+4", wan_rate="135Mbit", wan_delay="6ms", wan_queue="256KiB",
                    dilation=1.0),
    workload=npb_replay(cls="W", network="135M"),
    grid=Grid(kernel=["cg", "ft", "is", "mg"], tcp=CONGESTION, engine=["rust", "python"]),
    repeat=3, warmup=0, monitor=False,
    # --quick: every congestion control on the Python engine (not the default: proves it reaches the ranks)
    quick={"cls": "S", "repeat": "1", "kernel": "cg,is", "engine": "python"},
    report=[scatter(x="kernel", y="seconds", hue="cc_engine"), scatter(x="kernel", y="speedup", hue="cc_engine"),
            seed_numbers("004", "stack")],
    notes=("Every 8-rank point is replayed: each kernel runs for real once (threads, verified), recording every "
           "rank's messages and its compute; the replay sleeps the compute and sends the same messages over the "
           "testbed (4 + 4 hosts, 1 Gbit/s site switches, the WAN delay line at 135 Mbit/s each way, 12 ms RTT). "
           "The speedup's numerator is the real 1-rank CPU time. Only the stack varies: congestion control set "
           "per socket (TCP_CONGESTION, read back from the ranks: congestion_in_force) and the mesh engine the "
           "ranks use ($CLUSTERLAB_ENGINE, read back: engine). The seed compared whole stacks (BSD/OS 3.1 vs "
           "RedHat Linux 6.2 under LAM MPI 6.4) on real Xeons; both are gone. MPI is not a third engine here: the "
           "testbed starts ranks only through clusterlab's own launcher (one process per host namespace); "
           "launch_mpi has no placement into testbed hosts. Class W (S with --quick); the seed ran S, W, A."),
)
