"""Per-namespace configuration that ``ip``/``tc`` cannot do, all in one process.

Run as ``python -m clusterlab.cluster.testbed._nsconfig`` with a JSON plan on stdin:
``[{"ns": NAME, "sysctls": {path: value}, "ifaces": [{"name": "eth0", "rps_cpu": 0,
"offloads_off": true}]}, ...]``. One process (instead of one ``ip netns exec`` per namespace)
because it visits each namespace with setns: sysctls go to /proc/sys/net (per namespace),
offloads off through the legacy SIOCETHTOOL ioctls (no ethtool binary needed), and rps_cpus
through a sysfs mounted for that namespace in a private mount namespace (sysfs shows the
interfaces of the namespace that mounted it). Prints one JSON line of warnings.

A TCP sysctl (``net/ipv4/tcp_*``: the RTO bounds, buffers, the loss-recovery knobs of a TCP
stack) that the kernel refuses, or that reads back different, is an error (exit 1, one line on
stderr naming the namespace, the sysctl and the kernel's reason), not a warning: a run must
not silently use another stack than it says.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import socket
import struct
import sys
import tempfile

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_REC, MS_SLAVE = 0x4000, 0x80000
MNT_DETACH = 2
SIOCETHTOOL = 0x8946
# Legacy ethtool "set one feature" commands (struct ethtool_value {u32 cmd; u32 data}).
ETHTOOL_SET = {"tso": 0x1F, "gso": 0x24, "gro": 0x2C}
ETHTOOL_GET = {"tso": 0x1E, "gso": 0x23, "gro": 0x2B}

libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def _ethtool(ifname: str, cmd: int, data: int = 0) -> int:
    ev = ctypes.create_string_buffer(struct.pack("II", cmd, data), 8)
    ifr = bytearray(struct.pack("16sP", ifname.encode(), ctypes.addressof(ev)).ljust(40, b"\0"))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s.fileno(), SIOCETHTOOL, ifr)
    return struct.unpack("II", ev.raw)[1]


def offload_set(ifname: str, feature: str, on: bool) -> None:
    """Turn ``feature`` (tso, gso, gro) on or off for ``ifname`` in the current namespace."""
    _ethtool(ifname, ETHTOOL_SET[feature], int(on))


def offload_off(ifname: str, feature: str) -> None:
    offload_set(ifname, feature, False)


def offload_on(ifname: str, feature: str) -> bool:
    """Is ``feature`` (tso, gso, gro) on for ``ifname`` in the current namespace?"""
    return bool(_ethtool(ifname, ETHTOOL_GET[feature]))


def write_sysctl(path: str, value) -> str | None:
    """Write ``value`` to /proc/sys/``path`` in the current namespace and read it back; None
    when it holds, else why not."""
    try:
        with open(f"/proc/sys/{path}", "w") as f:
            f.write(str(value))
        with open(f"/proc/sys/{path}") as f:
            now = f.read().split()
    except OSError as e:
        return e.strerror
    if now != str(value).split():
        return f"the kernel kept {' '.join(now)}"
    return None


def main() -> int:
    plan = json.load(sys.stdin)
    warnings: list[str] = []
    _check(libc.unshare(CLONE_NEWNS), "unshare mount namespace")
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_SLAVE, None), "make / a slave mount")
    mnt = tempfile.mkdtemp(prefix="clab-sysfs-")
    try:
        for entry in plan:
            fd = os.open(f"/run/netns/{entry['ns']}", os.O_RDONLY)
            try:
                _check(libc.setns(fd, CLONE_NEWNET), f"setns {entry['ns']}")
            finally:
                os.close(fd)
            for path, value in entry.get("sysctls", {}).items():
                why = write_sysctl(path, value)
                if why and path.startswith("net/ipv4/tcp_"):
                    print(f"{entry['ns']}: sysctl {path.replace('/', '.')}={value}: {why}", file=sys.stderr)
                    return 1
                if why:
                    warnings.append(f"{entry['ns']}: sysctl {path}={value}: {why}")
            ifaces = entry.get("ifaces", [])
            if not ifaces:
                continue
            for itf in ifaces:
                if itf.get("offloads_off"):
                    for feat in ETHTOOL_SET:
                        try:
                            offload_off(itf["name"], feat)
                        except OSError as e:
                            warnings.append(f"{entry['ns']}: {itf['name']} {feat} off: {e.strerror}")
            if any(i.get("rps_cpu") is not None for i in ifaces):
                _check(libc.mount(b"sysfs", mnt.encode(), b"sysfs", 0, None), "mount sysfs")
                try:
                    for itf in ifaces:
                        if itf.get("rps_cpu") is None:
                            continue
                        mask = format(1 << int(itf["rps_cpu"]), "x")
                        try:
                            with open(f"{mnt}/class/net/{itf['name']}/queues/rx-0/rps_cpus", "w") as f:
                                f.write(mask)
                        except OSError as e:
                            warnings.append(f"{entry['ns']}: {itf['name']} rps_cpus: {e.strerror}")
                finally:
                    libc.umount2(mnt.encode(), MNT_DETACH)
    finally:
        os.rmdir(mnt)
    print(json.dumps({"warnings": warnings}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
