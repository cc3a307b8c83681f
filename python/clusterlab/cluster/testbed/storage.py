"""A storage host on the testbed: the userspace iSCSI target ``tgtd`` (Debian package ``tgt``)
inside one host's namespace, one file-backed LUN per initiator (issue 13, seed 001's IP-SAN).

What runs where: ``tgtd -f`` is started inside the storage host's namespace (by default the
testbed's ``st`` host, ``StarTopo(storage=True)``), its iSCSI portal bound to that host's
10.x address only, port 3260. Its management socket is ``/var/run/tgtd/socket.<port>`` with a
control port of our own per testbed (``-C``), so several testbeds' daemons never collide.
Target ``tid`` i+1 (IQN ``iqn.2026-11.org.clusterlab:<testbed>.lun<i>``) has LUN 1 backed by a
sparse file ``<STORAGE_DIR>/<testbed>/lun<i>.img`` and admits only initiator i's address.

Throttled backing store (``backing_bps``): as on the seed's disks, storage rather than CPU or
network can then be the bottleneck. tgtd is put in a blkio cgroup of its own
(``/sys/fs/cgroup/blkio/clusterlab-storage-<testbed>``, cgroup v1 here; ``io.max`` under cgroup
v2) limiting its reads and writes to ``backing_bps`` bytes/s each on the disk that holds the
backing files, and opens them with O_DIRECT (the limit only sees I/O that reaches the disk;
through the page cache reads would come from RAM). The limit is shared by all LUNs, like one
RAID behind the target. Measured here: a 4 MB/s limit gives dd with O_DIRECT 4.2 MB/s on the
file system of ``STORAGE_DIR``. The cgroup's byte counters are the target's backing-store I/O
(``backing_io``).

TCP on the storage host: ``congestion`` sets its namespace's congestion control (the sender of
every READ's data) before tgtd listens; None (the default) leaves the testbed's. At 10 Gbit/s,
reno and BBR (this machine's default) gave the same reads and job times
(``bench/results/storage_mining_transfer.json``, 5 interleaved repetitions each).

Separate SAN (``SanNetwork``): seed 001 puts storage traffic on the cluster's own switch
(consolidated, the default here); for comparison a second switch, namespace
``clab-<testbed>-san`` with bridge ``br0``, joins every host through a second interface
``eth1`` (addresses ``SAN_SUBNET``, 10.1.0.x), shaped like the first (tbf at the same rate,
switch port buffers and host queues of the same size). ``IscsiTarget(..., san=...)`` then puts
the portal and the ACLs on those addresses, so iSCSI never crosses the compute switch. The
namespace goes with the testbed (``clean``/``down`` delete every ``clab-<testbed>-*``).

Stopping: tgtd ignores SIGTERM, so the LUNs and targets are removed first (tgtadm), then the
daemon is asked to exit (``--op delete --mode system``) and killed if it has not within a few
seconds; the backing files, the directory and the state file go last. After a crash of the
driver (even SIGKILL) ``clean_storage(testbed)`` does the same from the state file
``/run/clusterlab/storage/<testbed>.json``; ``storage_leftovers(testbed)`` lists what remains.

Example (needs root and tgt)::

    from clusterlab.cluster.testbed import StarTopo, TestbedNetwork
    from clusterlab.cluster.testbed.storage import IscsiTarget
    with TestbedNetwork(StarTopo(hosts=2, storage=True)) as tb, IscsiTarget(tb, initiators=2) as tgt:
        print(tgt.luns[0])   # {'portal': '10.0.0.3:3260', 'iqn': ..., 'lun': 1, ...}
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import zlib

from clusterlab._atomic import atomic_open
from clusterlab.cluster.testbed._nsconfig import write_sysctl
from clusterlab.cluster.testbed.link import burst_bytes
from clusterlab.cluster.testbed.node import Host, TestbedError, in_netns, ns_name
from clusterlab.cluster.testbed.topo import check_name
from clusterlab.errors import ConfigError
from clusterlab.net.transport_config import TransportConfig

STORAGE_DIR = "/var/tmp/clusterlab/storage"  # backing files: on disk, not in RAM (/run is tmpfs)
STATE_DIR = "/run/clusterlab/storage"
SOCKET_DIR = "/var/run/tgtd"
BSTYPES = ("rdwr", "aio")  # tgt's backing stores for a file
ISCSI_PORT = 3260
IQN_PREFIX = "iqn.2026-11.org.clusterlab"
MAX_LUN_BYTES = 1 << 40
SAN_SUBNET = ipaddress.IPv4Network("10.1.0.0/16")
CGROUP_V1 = "/sys/fs/cgroup/blkio"
CGROUP_V2 = "/sys/fs/cgroup"


def unavailable() -> str | None:
    """Why a storage host cannot run here, or None."""
    if os.geteuid() != 0:
        return "the iSCSI target needs root (tgtd in a namespace)"
    for tool in ("tgtd", "tgtadm"):
        if shutil.which(tool) is None:
            return f"needs '{tool}' (Debian package tgt; `make system-deps` as root installs it)"
    return None


def _cgroup_path(testbed: str) -> str | None:
    """Where testbed ``testbed``'s tgtd cgroup goes (v1 blkio, or v2 with the io controller), or
    None when neither is available."""
    if os.path.exists(os.path.join(CGROUP_V1, "blkio.throttle.read_bps_device")):
        return os.path.join(CGROUP_V1, f"clusterlab-storage-{testbed}")
    with contextlib.suppress(OSError):
        with open(os.path.join(CGROUP_V2, "cgroup.controllers")) as f:
            if "io" in f.read().split():
                return os.path.join(CGROUP_V2, f"clusterlab-storage-{testbed}")
    return None


def _local_cgroup(testbed: str) -> str | None:
    """The cgroup of ``IscsiTarget.local_disk_baseline``'s loop (beside tgtd's, same limit)."""
    cg = _cgroup_path(testbed)
    return None if cg is None else cg + "-local"


def _remove_cgroup(cg: str, grace: float = 2.0) -> bool:
    """rmdir a cgroup once its last process has left (a killed one leaves when it is reaped)."""
    deadline = time.monotonic() + grace
    while os.path.isdir(cg):
        try:
            os.rmdir(cg)
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
    return False


def backing_device(directory: str) -> str:
    """``MAJ:MIN`` of the whole disk holding ``directory`` (a partition's parent: throttling
    rules apply to disks)."""
    dev = os.stat(directory).st_dev
    mm = f"{os.major(dev)}:{os.minor(dev)}"
    sysdir = f"/sys/dev/block/{mm}"
    if os.path.exists(os.path.join(sysdir, "partition")):
        with open(os.path.join(sysdir, "..", "dev")) as f:
            mm = f.read().strip()
    return mm


def _throttle(cg: str, device: str, bps: int, pid: int) -> None:
    os.makedirs(cg, exist_ok=True)
    if cg.startswith(CGROUP_V1):
        for op in ("read", "write"):
            with open(os.path.join(cg, f"blkio.throttle.{op}_bps_device"), "w") as f:
                f.write(f"{device} {bps}")
    else:
        with open(os.path.join(cg, "io.max"), "w") as f:
            f.write(f"{device} rbps={bps} wbps={bps}")
    with open(os.path.join(cg, "cgroup.procs"), "w") as f:
        f.write(str(pid))


# what the cgroups of this process's stopped targets had counted, per testbed: a monitor that
# outlives the target (a study's point monitor) must not see the counters fall to zero and lose
# the target's last interval
_RETIRED: dict[str, dict[str, int]] = {}


def backing_io(testbed: str) -> dict[str, int]:
    """Bytes read and written so far by testbed ``testbed``'s throttled tgtd on its backing
    disk: its cgroup's counters plus those of the targets this process stopped before on that
    testbed (a monotonic count over the testbed's life; zeros when it never had a cgroup)."""
    name = check_name(testbed)
    out = dict(_RETIRED.get(name, {"read_bytes": 0, "write_bytes": 0}))
    cg = _cgroup_path(name)
    if cg is None or not os.path.isdir(cg):
        return out
    with contextlib.suppress(OSError):
        if cg.startswith(CGROUP_V1):
            with open(os.path.join(cg, "blkio.throttle.io_service_bytes")) as f:
                for ln in f:
                    parts = ln.split()
                    if len(parts) == 3 and parts[1] in ("Read", "Write"):
                        out[f"{parts[1].lower()}_bytes"] += int(parts[2])
        else:
            with open(os.path.join(cg, "io.stat")) as f:
                for ln in f:
                    for kv in ln.split()[1:]:
                        k, _, v = kv.partition("=")
                        if k in ("rbytes", "wbytes"):
                            out["read_bytes" if k == "rbytes" else "write_bytes"] += int(v)
    return out


def _batch(args: list[str], lines: list[str], what: str) -> None:
    try:
        p = subprocess.run(args + ["-batch", "-"], input="\n".join(lines) + "\n", capture_output=True, text=True,
                           timeout=60)
    except subprocess.TimeoutExpired:
        raise TestbedError(f"{what}: {' '.join(args)} did not finish in 60 s") from None
    if p.returncode != 0:
        raise TestbedError(f"{what}: {' '.join(args)} -batch failed: {p.stderr.strip()[:300]}")


class SanNetwork:
    """A second switch for storage traffic only: every host of ``testbed`` gets ``eth1`` on it
    (``address(host)``: 10.1.0.<index+1>). Links shaped as the testbed's own (``rate``
    overrides). Built by ``up()`` (or ``with``); removed with the testbed, or by ``down()``."""

    def __init__(self, testbed, rate: str | None = None):
        self.testbed = testbed
        self.ns = ns_name(check_name(testbed.name), "san")
        self.topo = testbed.topo if rate is None else dataclasses.replace(testbed.topo, rate=rate)

    def address(self, host: Host) -> str:
        return str(SAN_SUBNET.network_address + host.index + 1)

    def __enter__(self) -> SanNetwork:
        return self.up()

    def __exit__(self, *exc) -> None:
        self.down()

    def up(self) -> SanNetwork:
        topo, hosts = self.topo, self.testbed.hosts
        rate = int(round(topo.effective_rate_bps))
        tbf = f"root tbf rate {rate}bit burst {burst_bytes(topo)} limit"
        try:
            _batch(["ip"], [f"netns add {self.ns}"] + [
                f"link add name eth1 mtu {topo.mtu} netns {h.ns} type veth peer name s{h.index} mtu {topo.mtu} "
                f"netns {self.ns}" for h in hosts], "create the SAN switch")
            _batch(["ip", "-n", self.ns], ["link set lo up",
                                           "link add br0 type bridge stp_state 0 forward_delay 0 mcast_snooping 0"]
                   + [ln for h in hosts for ln in (f"link set s{h.index} master br0", f"link set s{h.index} up")]
                   + ["link set br0 up"], "build the SAN switch")
            _batch(["tc", "-n", self.ns], [f"qdisc replace dev s{h.index} {tbf} {topo.buffer_bytes}" for h in hosts],
                   "shape the SAN switch ports")
            for h in hosts:
                _batch(["ip", "-n", h.ns], [f"addr add {self.address(h)}/16 dev eth1", "link set eth1 up"],
                       f"configure {h.name}'s SAN interface")
                _batch(["tc", "-n", h.ns], [f"qdisc replace dev eth1 {tbf} {topo.host_queue_bytes}"],
                       f"shape {h.name}'s SAN interface")
        except BaseException:
            self.down()
            raise
        return self

    def down(self) -> None:
        """Delete the SAN switch's namespace (its veths go with it). Idempotent."""
        if os.path.exists(os.path.join("/run/netns", self.ns)):
            subprocess.run(["ip", "netns", "delete", self.ns], capture_output=True, timeout=30)


def iqn(testbed: str, index: int) -> str:
    """IQN of initiator ``index``'s target.

    >>> iqn("t1a2b3", 0)
    'iqn.2026-11.org.clusterlab:t1a2b3.lun0'
    """
    return f"{IQN_PREFIX}:{testbed}.lun{index}"


def _control_port(testbed: str) -> int:
    """A management port of this testbed's own: a hash of its name, moved on past ports whose
    socket exists (another testbed's daemon)."""
    port = 1000 + zlib.crc32(testbed.encode()) % 31000  # tgtd accepts 0..32767; 0 is the system's
    while os.path.exists(os.path.join(SOCKET_DIR, f"socket.{port}")):
        port = 1000 + (port - 1000 + 1) % 31000
    return port


def _state_path(testbed: str) -> str:
    return os.path.join(STATE_DIR, f"{testbed}.json")


def _tgtadm(port: int, *args: str, timeout: float = 10.0, check: bool = True) -> subprocess.CompletedProcess:
    cmd = ["tgtadm", "-C", str(port), *args]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TestbedError(f"{' '.join(cmd)} did not finish in {timeout} s") from None
    if check and p.returncode != 0:
        raise TestbedError(f"{' '.join(cmd)} failed: {(p.stderr or p.stdout).strip()}")
    return p


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    # "pid (comm) state ...": an exited child of ours stays a zombie until reaped
    return stat[stat.index("(") + 1:stat.rindex(")")] == "tgtd" and stat[stat.rindex(")") + 2] != "Z"


class IscsiTarget:
    """tgtd on ``host`` (default: the testbed's ``st`` host) serving one sparse LUN of
    ``lun_size`` bytes to each of the first ``initiators`` compute hosts (or to ``clients``,
    a list of ``Host``). ``direct``: tgtd opens the backing files with O_DIRECT (no page cache:
    the disk, not RAM, serves reads). ``backing_bps``: limit tgtd's reads and writes on the disk to
    that many bytes/s each (implies ``direct``). ``luns[i]``: ``{"portal", "iqn", "lun", "path",
    "size", "client"}``. ``shared``: instead, one target ``<testbed>.shared`` with one LUN that
    admits every client (per-rank regions of it: ``clusterlab.storage.source``). tgtd's own
    settings: ``iothreads`` (its ``--nr_iothreads``, the threads serving each backing store;
    tgtd's default 16) and ``bstype`` (``rdwr``: pread/pwrite from its threads, tgtd's default;
    ``aio``: Linux AIO). ``congestion``: the storage host's TCP congestion control (the
    sender of every READ's data; None: leave the namespace's)."""

    def __init__(self, testbed, initiators: int = 1, lun_size: int = 64 << 20, host: Host | None = None,
                 clients: list[Host] | None = None, direct: bool = False, backing_bps: int | None = None,
                 shared: bool = False, san: SanNetwork | None = None, iothreads: int | None = None,
                 bstype: str = "rdwr", congestion: str | None = None):
        self.testbed = testbed
        self.name = check_name(testbed.name)
        if host is None:
            host = testbed.host("st")
        self.host = host
        if clients is None:
            compute = [h for h in testbed.hosts if h is not host]
            if not 1 <= initiators <= len(compute):
                raise TestbedError(f"initiators must be 1..{len(compute)} (compute hosts), got {initiators}")
            clients = compute[:initiators]
        if not 0 < lun_size <= MAX_LUN_BYTES or lun_size % 512:
            raise TestbedError(f"LUN size must be a positive multiple of 512 bytes up to 1 TiB, got {lun_size}")
        if backing_bps is not None and not 4096 <= backing_bps <= 1 << 40:
            raise TestbedError(f"backing store rate must be 4096 B/s .. 1 TiB/s, got {backing_bps}")
        if iothreads is not None and not 1 <= iothreads <= 128:
            raise TestbedError(f"tgtd I/O threads must be 1..128, got {iothreads}")
        if bstype not in BSTYPES:
            raise TestbedError(f"backing-store type must be one of {', '.join(BSTYPES)}, got {bstype!r}")
        if congestion is not None:
            try:
                TransportConfig(congestion=congestion, place="testbed")  # the mesh's check of the name
            except ConfigError as e:
                raise TestbedError(str(e)) from None
        self.iothreads, self.bstype, self.congestion = iothreads, bstype, congestion
        self.clients = list(clients)
        self.lun_size = int(lun_size)
        self.backing_bps = None if backing_bps is None else int(backing_bps)
        self.direct = direct or backing_bps is not None
        self.cgroup: str | None = None
        self.shared = shared
        self.san = san
        self.dir = os.path.join(STORAGE_DIR, self.name)
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.luns: list[dict] = []

    def __enter__(self) -> IscsiTarget:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def backing_io(self) -> dict[str, int]:
        """Bytes read and written so far on the backing disk (``backing_io`` of this testbed;
        the monitor's ``backing=`` reader)."""
        return backing_io(self.name)

    def _addr(self, host: Host) -> str:
        return self.san.address(host) if self.san is not None else host.addr

    @property
    def portal(self) -> str:
        return f"{self._addr(self.host)}:{ISCSI_PORT}"

    def start(self) -> IscsiTarget:
        """Start tgtd, create the files, targets and LUNs; on failure remove all of it and raise."""
        reason = unavailable()
        if reason:
            raise TestbedError(reason)
        if os.path.exists(_state_path(self.name)):
            raise TestbedError(f"testbed {self.name} already has a storage host (clean_storage({self.name!r}))")
        os.makedirs(SOCKET_DIR, exist_ok=True)
        self.port = _control_port(self.name)
        try:
            if self.congestion is not None:  # before tgtd listens: accepted sockets inherit it
                with in_netns(self.host.ns):
                    why = write_sysctl("net/ipv4/tcp_congestion_control", self.congestion)
                if why:
                    raise TestbedError(f"{self.host.name}: congestion control {self.congestion}: {why}")
            os.makedirs(self.dir, exist_ok=True)
            with open(os.path.join(self.dir, "tgtd.log"), "wb") as log:  # a file: a full pipe would block tgtd
                self.proc = self.host.popen(["tgtd", "-f", "-C", str(self.port), "--iscsi", f"portal={self.portal}",
                                             *(["-t", str(self.iothreads)] if self.iothreads else [])],
                                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
            self._write_state()
            self._wait_ready()
            if self.backing_bps is not None:
                cg = _cgroup_path(self.name)
                if cg is None:
                    raise TestbedError("a throttled backing store needs the blkio (cgroup v1) or io (v2) controller")
                self.cgroup = cg
                self._write_state()  # before the cgroup exists, so that a crash leaves its path behind
                _throttle(cg, backing_device(self.dir), self.backing_bps, self.proc.pid)
            self._write_state()  # now with tgtd's own pid (the popen pid is `ip netns exec`'s, then exec'd)
            if self.shared:
                self._add_lun(0, self.clients, "shared")
            else:
                for i, client in enumerate(self.clients):
                    self._add_lun(i, [client])
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                with open(os.path.join(self.dir, "tgtd.log"), errors="replace") as f:
                    err = f.read().strip()
                raise TestbedError(f"tgtd on {self.host.name} exited with {self.proc.returncode}: {err[-300:]}")
            if _tgtadm(self.port, "--mode", "system", "--op", "show", check=False).returncode == 0:
                return
            time.sleep(0.1)
        raise TestbedError(f"tgtd on {self.host.name} did not answer on control port {self.port} in {timeout} s")

    def _add_lun(self, i: int, clients: list[Host], label: str | None = None) -> None:
        path = os.path.join(self.dir, f"{label or f'lun{i}'}.img")
        with open(path, "wb") as f:
            f.truncate(self.lun_size)  # sparse: no disk used until written
        tid = str(i + 1)
        name = f"{IQN_PREFIX}:{self.name}.{label}" if label else iqn(self.name, i)
        _tgtadm(self.port, "--lld", "iscsi", "--mode", "target", "--op", "new", "--tid", tid,
                "--targetname", name)
        _tgtadm(self.port, "--lld", "iscsi", "--mode", "logicalunit", "--op", "new", "--tid", tid,
                "--lun", "1", "--backing-store", path, "--bstype", self.bstype,
                *(["--bsoflags", "direct"] if self.direct else []))
        for client in clients:
            _tgtadm(self.port, "--lld", "iscsi", "--mode", "target", "--op", "bind", "--tid", tid,
                    "--initiator-address", self._addr(client))
        self.luns.append({"portal": self.portal, "iqn": name, "lun": 1, "path": path, "size": self.lun_size,
                          "client": clients[0].name, "client_addr": self._addr(clients[0]),
                          "url": f"iscsi://{self.portal}/{name}/1"})
        self._write_state()

    def _write_state(self) -> None:
        os.makedirs(STATE_DIR, exist_ok=True)
        with atomic_open(_state_path(self.name)) as f:
            json.dump({"testbed": self.name, "host": self.host.name, "ns": self.host.ns, "port": self.port,
                       "pid": self.proc.pid if self.proc else None, "dir": self.dir, "luns": self.luns,
                       "cgroup": self.cgroup}, f)

    def local_disk_baseline(self, size: int, block: int, seed: int = 0, timeout: float | None = None) -> dict:
        """The local baseline at the backing store's rate: the same block loop on a file beside
        the LUNs (the same disk), opened with O_DIRECT, in a cgroup of its own with the target's
        limit (``backing_bps``; needs one), so that the local file is a disk of that rate as the
        seed's local RAID was, not the page cache. Write (with fsync) then read, the block rounded
        up to whole 4 KiB pages and the size down to whole blocks: ``{"write_mbps", "read_mbps",
        "bad_blocks", "bytes", "block"}``. Run it while no initiator uses the target (it shares the
        disk, not the limit). The loop runs in a child process that dies with this one; the file
        and the cgroup go with the target (``clean_storage``), also after a crash."""
        if self.backing_bps is None:
            raise ConfigError("a local disk baseline needs the target's backing store limit (backing_bps)")
        if block <= 0 or size < block:
            raise ConfigError(f"block ({block}) must be positive and at most size ({size})")
        # direct I/O moves whole 4 KiB pages: the block rounded up to them, the size down to
        # whole blocks (a rate is measured; the bytes are reported)
        block = -(-block // 4096) * 4096
        size = max(block, size // block * block)
        cg = _local_cgroup(self.name)
        if cg is None:
            raise TestbedError("a throttled local baseline needs the blkio (cgroup v1) or io (v2) controller")
        os.makedirs(self.dir, exist_ok=True)
        path = os.path.join(self.dir, "local.img")
        timeout = timeout if timeout is not None else 60.0 + 3.0 * size / self.backing_bps
        # The child waits for a line on stdin (sent once it is in the throttled cgroup) and dies
        # with its parent (PR_SET_PDEATHSIG), so a killed driver leaves no I/O running.
        code = ("import ctypes,json,signal,sys;ctypes.CDLL(None).prctl(1,signal.SIGKILL);sys.stdin.readline();"
                "from clusterlab import _core;p,n,b,s=sys.argv[1],*map(int,sys.argv[2:5]);"
                "w=_core.local_sequential(p,n,b,s,True,True);r=_core.local_sequential(p,n,b,s,False,True);"
                "print(json.dumps([w,r]))")
        proc = subprocess.Popen([sys.executable, "-c", code, path, str(size), str(block), str(seed)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _throttle(cg, backing_device(self.dir), self.backing_bps, proc.pid)
            out, err = proc.communicate("go\n", timeout=timeout)
            if proc.returncode != 0:
                raise TestbedError(f"the local disk baseline failed: {err.strip()[-300:]}")
            (wn, ws, _), (rn, rs, bad) = json.loads(out)
            return {"write_mbps": round(wn / ws / 1e6, 2), "read_mbps": round(rn / rs / 1e6, 2), "bad_blocks": bad,
                    "backing_bps": self.backing_bps, "direct": True, "bytes": size, "block": block}
        except subprocess.TimeoutExpired:
            raise TestbedError(f"the local disk baseline did not finish in {timeout:.0f} s") from None
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            _remove_cgroup(cg)

    def stop(self) -> dict:
        """Remove LUNs and targets, stop tgtd, delete the files. Idempotent."""
        res = clean_storage(self.name)
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None
        self.luns = []
        return res


def _tgtd_pids(port: int | None) -> list[int]:
    """tgtd processes started with control port ``port``."""
    if port is None:
        return []
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if argv and os.path.basename(argv[0]) == b"tgtd" and str(port).encode() in argv and _alive(int(entry)):
                found.append(int(entry))
    return found


def storage_testbeds() -> list[str]:
    """Names of the testbeds that have (or had, before a crash) a storage host's state file."""
    try:
        return sorted(f[:-5] for f in os.listdir(STATE_DIR) if f.endswith(".json"))
    except FileNotFoundError:
        return []


def clean_storage(testbed: str, grace: float = 5.0) -> dict:
    """Stop testbed ``testbed``'s tgtd (LUNs and targets first: it ignores SIGTERM) and remove
    its backing files, socket and state file. Works from the state file alone, so after a crash
    of the driver too; call it before the testbed's namespaces are deleted (``clean``).
    Returns what was removed."""
    name = check_name(testbed)
    try:
        with open(_state_path(name)) as f:
            st = json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        st = {"port": None, "dir": os.path.join(STORAGE_DIR, name), "luns": []}
    port = st.get("port")
    removed = {"targets": 0, "killed": 0, "files": 0, "cgroups": 0}
    pids = _tgtd_pids(port)
    if pids:
        show = _tgtadm(port, "--lld", "iscsi", "--mode", "target", "--op", "show", check=False, timeout=5)
        tids = [ln.split()[1].rstrip(":") for ln in show.stdout.splitlines() if ln.startswith("Target ")]
        for tid in tids:
            _tgtadm(port, "--lld", "iscsi", "--mode", "logicalunit", "--op", "delete", "--tid", tid, "--lun", "1",
                    check=False, timeout=5)
            _tgtadm(port, "--lld", "iscsi", "--mode", "target", "--op", "delete", "--force", "--tid", tid,
                    check=False, timeout=5)
            removed["targets"] += 1
        _tgtadm(port, "--mode", "system", "--op", "delete", check=False, timeout=5)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.05)
        for p in pids:
            if _alive(p):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p, signal.SIGKILL)
                    removed["killed"] += 1
    cg = st.get("cgroup") or _cgroup_path(name)
    if cg and os.path.isdir(cg) and os.path.basename(cg) == f"clusterlab-storage-{name}":
        _RETIRED[name] = backing_io(name)  # tgtd is gone: these are the cgroup's final counts
        deadline = time.monotonic() + grace  # a killed tgtd leaves the cgroup when it is reaped
        while True:
            try:
                os.rmdir(cg)
                removed["cgroups"] = 1
                break
            except OSError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
    local = _local_cgroup(name)
    if local and _remove_cgroup(local, grace):
        removed["cgroups"] += 1
    d = st.get("dir") or os.path.join(STORAGE_DIR, name)
    if os.path.isdir(d):
        removed["files"] = len(os.listdir(d))
        shutil.rmtree(d, ignore_errors=True)
    if port is not None and not _tgtd_pids(port):
        for suffix in ("", ".lock"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(SOCKET_DIR, f"socket.{port}{suffix}"))
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_state_path(name))
    return removed


def storage_leftovers(testbed: str) -> dict:
    """What of ``testbed``'s storage host still exists: tgtd processes, backing files, state
    (and its blkio cgroup, under ``cgroups``, only when one is left)."""
    name = check_name(testbed)
    port = None
    with contextlib.suppress(FileNotFoundError, json.JSONDecodeError):
        with open(_state_path(name)) as f:
            port = json.load(f).get("port")
    d = os.path.join(STORAGE_DIR, name)
    out = {"processes": _tgtd_pids(port), "files": sorted(os.listdir(d)) if os.path.isdir(d) else [],
           "state_files": [_state_path(name)] if os.path.exists(_state_path(name)) else []}
    cgs = [c for c in (_cgroup_path(name), _local_cgroup(name)) if c and os.path.isdir(c)]
    if cgs:
        out["cgroups"] = cgs
    return out
