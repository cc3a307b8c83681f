"""Shared by the seed 003 studies: the cluster, the buffer sweep and what differs from the paper."""

from clusterlab.experiments.spec import StarTopo, Testbed

# The paper: 12 nodes and a front-end on Gigabit Ethernet. Here: testbed hosts on one switch
# at 1 Gbit/s with Ethernet's 1500-byte frames, undilated (no RTO setting needs dilation).
GIGABIT = Testbed(StarTopo(hosts=8, rate="1Gbit", buffer="256KB", mtu=1500), dilation=1)
# Buffers from 4 KiB doubling to 512 KiB, each as 'min default max' = the value (the buffer is
# that size), then the kernel's own triple with autotuning on (None: not set).
BUFFERS = [" ".join([str(4096 << k)] * 3) for k in range(8)]
# The same buffers as bundles setting tcp_rmem and tcp_wmem together (``--set tcp_buffer=4KiB,64KiB``).
BOTH = [{"name": f"{4 << k}KiB", "rmem": b, "wmem": b} for k, b in enumerate(BUFFERS)]
AUTOTUNING = {"name": "autotuning", "rmem": None, "wmem": None}
SIZES = "1:1MiB"
NOTES = ("Each point is a NetPIPE-style ping-pong between two testbed hosts (clusterlab.bench.pingpong) with "
         "the host sysctls set to the point's value; the paper sums NetPIPE over all nodes running at once, "
         "which `clusterlab tune buffers --config python/clusterlab/tune/configs/seed003.toml` does (its "
         "result files and plots are the all-node version of these figures). 'None' is Linux's default "
         "triple with autotuning on. The testbed's links are tc-shaped veths on a 2-core machine: per-packet "
         "CPU cost, not the wire, bounds large messages, so the buffer size that saturates is smaller than "
         "on the paper's Gigabit cluster, where the best was 16-32 KB.")


def per_value_study(figure: str, variable: str, what: str):
    """Figs. 3-4: bandwidth vs message size, one line per value of ``variable`` (rmem or wmem)."""
    from clusterlab.experiments.spec import Grid, Study, scatter
    from clusterlab.experiments.workloads import pingpong

    return Study(
        name=f"seed003-fig{figure}",
        title=f"Seed 003 Fig. {figure}: TCP {what} buffer (tcp_{variable}) influence over bandwidth",
        cluster=GIGABIT,
        workload=pingpong(sizes=SIZES, trial_time=0.01),
        grid=Grid({variable: [*BUFFERS, None]}),
        repeat=3, warmup=0, monitor=False,
        quick={variable: "4096 4096 4096,65536 65536 65536", "sizes": "1:64KiB", "repeat": "1", "hosts": "2"},
        report=[scatter(x="bytes", y="mbps", hue=variable, logx=True)],
        notes=NOTES,
    )
