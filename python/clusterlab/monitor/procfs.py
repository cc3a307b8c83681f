"""Parsers of the kernel's counter files (/proc/net/snmp, /proc/net/netstat, /proc/stat,
/proc/diskstats). Pure functions of text, so they are tested without root.

>>> snmp = "Tcp: RtoAlgorithm RetransSegs\\nTcp: 1 7\\nUdp: InDatagrams\\nUdp: 3\\n"
>>> parse_snmp(snmp)
{'TcpRtoAlgorithm': 1, 'TcpRetransSegs': 7, 'UdpInDatagrams': 3}
>>> cpu = parse_cpu("cpu  10 2 30 400 5 0 7 0 0 0\\ncpu0 1 1 1 1 1 1 1 1 0 0\\n")
>>> cpu["user"], cpu["system"], cpu["idle"], cpu["iowait"], cpu["softirq"]
(12, 30, 400, 5, 7)
>>> parse_diskstats("   8       0 sda 10 0 80 0 5 0 16 0 0 0 0\\n   8       1 sda1 9 0 72 0 4 0 8 0 0 0 0\\n")
{'sda': (40960, 8192)}
"""

from __future__ import annotations

import re

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


def parse_cpu(text: str) -> dict[str, int]:
    """The aggregate ``cpu`` line of /proc/stat in clock ticks (user includes nice)."""
    for line in text.splitlines():
        if line.startswith("cpu "):
            f = [int(x) for x in line.split()[1:]]
            f += [0] * (8 - len(f))
            return {"user": f[0] + f[1], "system": f[2], "idle": f[3], "iowait": f[4], "irq": f[5],
                    "softirq": f[6], "steal": f[7]}
    raise ValueError("no aggregate cpu line in /proc/stat")


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
