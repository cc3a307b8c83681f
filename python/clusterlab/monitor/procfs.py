"""Parsers of the kernel's counter files (/proc/net/dev, /proc/net/snmp, /proc/net/netstat,
/proc/stat, /proc/diskstats). Pure functions of text, so they are tested without root.

>>> snmp = "Tcp: RtoAlgorithm RetransSegs\\nTcp: 1 7\\nUdp: InDatagrams\\nUdp: 3\\n"
>>> parse_snmp(snmp)
{'TcpRtoAlgorithm': 1, 'TcpRetransSegs': 7, 'UdpInDatagrams': 3}
>>> cpu = parse_cpu("cpu  10 2 30 400 5 0 7 0 0 0\\ncpu0 1 1 1 1 1 1 1 1 0 0\\n")
>>> cpu["user"], cpu["nice"], cpu["system"], cpu["idle"], cpu["iowait"], cpu["softirq"]
(12, 2, 30, 400, 5, 7)
>>> parse_task_stat("41 (tgt d) D 1 41 41 0 -1 4194560 9 0 0 0 17 5 0 0 20 0 1 0 99 0 0")
('D', 17, 5)
>>> parse_diskstats("   8       0 sda 10 0 80 0 5 0 16 0 0 0 0\\n   8       1 sda1 9 0 72 0 4 0 8 0 0 0 0\\n")
{'sda': (40960, 8192)}
"""

from __future__ import annotations

import contextlib
import os
import re
import time

# TCP counters recorded per namespace (nstat names: the header of the line + the field).
TCP_COUNTERS = (
    "TcpOutSegs", "TcpInSegs", "TcpRetransSegs", "TcpExtTCPTimeouts", "TcpExtTCPLossProbes",
    "TcpExtTCPFastRetrans", "TcpExtTCPSlowStartRetrans", "TcpExtTCPSpuriousRTOs",
    "TcpExtTCPLostRetransmit", "TcpExtTCPSackRecovery", "TcpExtTCPRenoRecovery",
    "TcpExtTCPOFOQueue", "TcpExtTCPBacklogDrop", "TcpExtListenDrops", "TcpExtTCPWinProbe",
)
SECTOR = 512
_PARTITION = re.compile(r"^(sd[a-z]+|vd[a-z]+|xvd[a-z]+|hd[a-z]+)\d+$|^(nvme\d+n\d+|mmcblk\d+)p\d+$")


def parse_snmp(text: str) -> dict[str, int]:
    """/proc/net/snmp or /proc/net/netstat: pairs of lines ``Hdr: names`` / ``Hdr: values``,
    flattened to nstat's names (``TcpRetransSegs``, ``TcpExtTCPTimeouts``)."""
    out: dict[str, int] = {}
    lines = text.splitlines()
    for names, values in zip(lines[0::2], lines[1::2], strict=False):
        hdr, _, ns = names.partition(":")
        _, _, vs = values.partition(":")
        for n, v in zip(ns.split(), vs.split(), strict=False):
            try:
                out[hdr + n] = int(v)
            except ValueError:
                continue
    return out


class CounterReader:
    """Pick a few counters out of /proc/net/snmp or netstat text, fast: the name lines never
    change, so the positions of the wanted counters are found once and reused.

    >>> r = CounterReader(("TcpRetransSegs", "TcpExtTCPTimeouts"))
    >>> r.read("Tcp: A RetransSegs\\nTcp: 1 7\\nTcpExt: TCPTimeouts B\\nTcpExt: 3 4\\n")
    {'TcpRetransSegs': 7, 'TcpExtTCPTimeouts': 3}
    """

    def __init__(self, wanted):
        self.wanted = set(wanted)
        self.layout: dict[str, list[tuple[str, int]]] | None = None

    def read(self, text: str) -> dict[str, int]:
        lines = text.splitlines()
        if self.layout is None:
            self.layout = {}
            for names in lines[0::2]:
                hdr, _, ns = names.partition(":")
                picks = [(hdr + n, i) for i, n in enumerate(ns.split()) if hdr + n in self.wanted]
                if picks:
                    self.layout[hdr + ":"] = picks
        out = {}
        for line in lines[1::2]:
            hdr, _, vs = line.partition(" ")
            picks = self.layout.get(hdr)
            if picks:
                f = vs.split()
                for name, i in picks:
                    out[name] = int(f[i])
        return out


def parse_net_dev(text: str) -> dict[str, dict[str, int]]:
    """/proc/net/dev: per interface rx/tx bytes, packets and drops.

    >>> parse_net_dev("Inter-|...\\n face |...\\n  eth0: 100 2 0 1 0 0 0 0 300 4 0 5 0 0 0 0\\n")["eth0"]
    {'rx_bytes': 100, 'rx_packets': 2, 'rx_dropped': 1, 'tx_bytes': 300, 'tx_packets': 4, 'tx_dropped': 5}
    """
    out = {}
    for line in text.splitlines()[2:]:
        name, _, rest = line.partition(":")
        f = rest.split()
        if len(f) >= 12:
            out[name.strip()] = {"rx_bytes": int(f[0]), "rx_packets": int(f[1]), "rx_dropped": int(f[3]),
                                 "tx_bytes": int(f[8]), "tx_packets": int(f[9]), "tx_dropped": int(f[11])}
    return out


def parse_cpu(text: str) -> dict[str, int]:
    """The aggregate ``cpu`` line of /proc/stat in clock ticks (user includes nice; ``nice``
    alone too: the other users of a shared machine run niced)."""
    for line in text.splitlines():
        if line.startswith("cpu "):
            f = [int(x) for x in line.split()[1:]]
            f += [0] * (8 - len(f))
            return {"user": f[0] + f[1], "nice": f[1], "system": f[2], "idle": f[3], "iowait": f[4], "irq": f[5],
                    "softirq": f[6], "steal": f[7]}
    raise ValueError("no aggregate cpu line in /proc/stat")


def cpu_total(c: dict[str, int]) -> int:
    """All ticks of a ``parse_cpu`` dict (``nice`` is inside ``user``, so it is not added twice)."""
    return sum(v for k, v in c.items() if k != "nice")


def sched_autogroup() -> bool:
    """Whether the scheduler's autogroup is on (``kernel.sched_autogroup_enabled``). Then every
    session is its own CPU group and shares the CPUs with the others whatever its processes'
    nice: another session's niced work does not yield to a run at nice 0."""
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            return f.read().strip() not in ("", "0")
    except OSError:
        return False


def cpu_spare(c: dict[str, int], niced_yields: bool | None = None) -> int:
    """Ticks a run could have had: idle, I/O wait, and niced (background) work, which the
    scheduler gives up to a run at nice 0 (weight 15 against 1024 at nice 19) unless autogroup
    is on (``niced_yields``, default: ``not sched_autogroup()``): then niced work in another
    session takes its group's share and is not counted as spare.

    >>> c = parse_cpu("cpu 100 40 20 300 10 0 5 0")
    >>> cpu_total(c), cpu_spare(c, True), cpu_spare(c, False)
    (475, 350, 310)
    """
    if niced_yields is None:
        niced_yields = not sched_autogroup()
    return c["idle"] + c["iowait"] + (c["nice"] if niced_yields else 0)


# Below this share of spare CPU a run's times measure the CPU as well as the network.
CPU_BOUND_SPARE = 0.15


def cpu_bound(row: dict, spare: str = "cpu_spare", idle: str = "cpu_idle") -> bool:
    """Whether a round, a point or a run was CPU-bound: its spare CPU (``row[spare]``; rows
    written before spare CPU was recorded have only ``row[idle]``) below ``CPU_BOUND_SPARE``.

    >>> cpu_bound({"cpu_idle": 0.0, "cpu_spare": 0.6}), cpu_bound({"cpu_idle": 0.1}), cpu_bound({})
    (False, True, False)
    """
    v = row.get(spare)
    v = row.get(idle) if v is None else v
    return v is not None and v < CPU_BOUND_SPARE


def parse_diskstats(text: str) -> dict[str, tuple[int, int]]:
    """Bytes read and written per whole disk (partitions, loop and ram devices skipped)."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) < 10:
            continue
        name = f[2]
        if name.startswith(("loop", "ram", "zram", "dm-", "md")) or _PARTITION.match(name):
            continue
        out[name] = (int(f[5]) * SECTOR, int(f[9]) * SECTOR)
    return out


def task_start_ticks(text: str) -> int:
    """When a task started, in clock ticks since boot (field 22 of its stat line).

    >>> task_start_ticks("7 (a) b) S 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 12345 0")
    12345
    """
    return int(text[text.rindex(")") + 2:].split()[19])


def parse_task_stat(text: str) -> tuple[str, int, int]:
    """(state, user ticks, system ticks) from a /proc/<pid>/task/<tid>/stat line (the command
    name may contain spaces and parentheses: fields are counted after the last ')')."""
    f = text[text.rindex(")") + 2:].split()
    return f[0], int(f[11]), int(f[12])


class TaskCpu:
    """CPU time of the tasks (threads) in each of a set of network namespaces: which testbed
    host a thread works for is the namespace it is in (a thread that entered a host's
    namespace counts for that host, as do threads it starts afterwards).

    ``sample()`` -> ``{node: (user seconds, system seconds, threads in state D)}``: CPU time used
    since the previous sample by threads alive at both (and all of it for threads new since
    then). The time on CPU is the scheduler's (``schedstat``, nanoseconds); it is split into
    user and system in the proportion of the thread's tick counts (``stat``: 10 ms ticks, too
    coarse alone for 0.1 s samples). D (uninterruptible sleep) is where a thread waits for the
    disk, e.g. tgtd's in a throttled read or write, so its count is the host's I/O wait, sampled.
    A thread seen for the first time that is older than the previous sample entered the
    namespace meanwhile (a driver thread visiting a host): its earlier CPU is not the host's,
    so it counts from this sample on."""

    def __init__(self, namespaces: dict[str, str]):
        self.node_of: dict[int, str] = {}
        for node, path in namespaces.items():
            with contextlib.suppress(OSError):
                self.node_of[os.stat(path).st_ino] = node
        self.prev: dict[int, int] = {}
        self.first = True
        self.prev_ticks = 0.0  # the previous sample, in clock ticks since boot (a thread's start time's unit)

    def sample(self) -> dict[str, tuple[float, float, int]]:
        out = {n: [0.0, 0.0, 0] for n in self.node_of.values()}
        now_ticks = time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK")
        seen: dict[int, int] = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in tids:
                base = f"/proc/{pid}/task/{tid}"
                try:
                    node = self.node_of.get(os.stat(f"{base}/ns/net").st_ino)
                    if node is None:
                        continue
                    with open(f"{base}/stat") as fh:
                        text = fh.read()
                    state, ut, st = parse_task_stat(text)
                    with open(f"{base}/schedstat") as fh:
                        ns = int(fh.read().split()[0])
                except (OSError, ValueError, IndexError):
                    continue  # exited meanwhile
                t = int(tid)
                seen[t] = ns
                if t in self.prev:
                    before = self.prev[t]
                elif self.first or task_start_ticks(text) < self.prev_ticks - 1:  # ticks are whole: 1 of slack
                    before = ns  # here before the previous sample: only its CPU from now on is the host's
                else:
                    before = 0  # born since the previous sample: all of its CPU
                used = (ns - before) / 1e9
                user = ut / (ut + st) if ut + st else 0.5
                acc = out[node]
                acc[0] += used * user
                acc[1] += used * (1 - user)
                acc[2] += state == "D"
        self.prev, self.first, self.prev_ticks = seen, False, now_ticks
        return {n: tuple(v) for n, v in out.items()}
