"""Bring a testbed up and down (Mininet's ``Mininet``), concurrently and fast.

Creating namespaces and veth pairs is one ``ip -batch`` process; each namespace's addresses,
neighbours and qdiscs are one ``ip -n``/``tc -n`` batch, run a few at a time; sysctls,
offloads and rps_cpus for every namespace are one helper process (``_nsconfig``). 100 hosts
come up and go down in seconds, not minutes.

Every live testbed is removed when the driver exits, raises, or gets SIGINT/SIGTERM; after a
SIGKILL, ``clusterlab testbed clean`` removes it (see ``clean``).

Example (needs root)::

    from clusterlab.cluster.testbed import StarTopo, TestbedNetwork
    with TestbedNetwork(StarTopo(hosts=8, rate="155Mbit", buffer="64KB")) as tb:
        print(tb.hosts[1].run(["ip", "-br", "addr"]).stdout)
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time

from clusterlab._atomic import atomic_open
from clusterlab.cluster.testbed import atmswitch, link, mover, wanline
from clusterlab.cluster.testbed.clean import STATE_DIR, clean_testbed, our_namespaces
from clusterlab.cluster.testbed.node import NETNS_DIR, Host, Node, Switch, TestbedError, in_netns, ns_name
from clusterlab.cluster.testbed.sysctl import BASE_SYSCTLS, host_sysctls, raise_machine_backlog
from clusterlab.cluster.testbed.topo import StarTopo, check_name
from clusterlab.errors import ConfigError
from clusterlab.net.transport_config import TransportConfig

# A switch forwards frames without a firewall: with br_netfilter loaded (Docker loads it) every
# bridged frame also went through iptables (br_nf_pre_routing: 8% of the WAN line's CPU at MTU
# 1500, in its context). Per namespace; only where the module made the sysctls exist.
SWITCH_SYSCTLS = {f"net/bridge/bridge-nf-call-{t}": 0 for t in ("iptables", "ip6tables", "arptables")
                  if os.path.exists(f"/proc/sys/net/bridge/bridge-nf-call-{t}")}

_live: dict[str, TestbedNetwork] = {}
_live_lock = threading.Lock()
_handlers_installed = False


def require_root() -> None:
    """Raise a clear error unless we can build namespaces (root, ``ip`` and ``tc`` present)."""
    if os.geteuid() != 0:
        raise TestbedError("the testbed needs root (network namespaces, veth, tc)")
    for tool in ("ip", "tc", "bridge"):
        if shutil.which(tool) is None:
            raise TestbedError(f"the testbed needs the '{tool}' program (package iproute2)")


def _run(args: list[str], batch: list[str], what: str, timeout: float = 120.0) -> None:
    if not batch:
        return
    try:
        p = subprocess.run(args + ["-batch", "-"], input="\n".join(batch) + "\n", capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TestbedError(f"{what}: {' '.join(args)} did not finish in {timeout} s") from None
    if p.returncode != 0:
        raise TestbedError(f"{what}: {' '.join(args)} -batch failed: {p.stderr.strip()[:500]}")


def _on_signal(signum, frame):
    shutdown_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_handlers() -> None:
    global _handlers_installed
    if _handlers_installed:
        return
    _handlers_installed = True
    atexit.register(shutdown_all)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) in (signal.SIG_DFL, None):
                signal.signal(sig, _on_signal)
        # SIGINT stays KeyboardInterrupt: the `with` block and atexit tear down.


def shutdown_all() -> None:
    """Bring down every testbed this process brought up (atexit and signal handlers)."""
    with _live_lock:
        tbs = list(_live.values())
    for tb in tbs:
        with contextlib.suppress(Exception):
            tb.down()


def _configure(plan: list[dict]) -> list[str]:
    """Apply a namespaces plan (sysctls, receive CPUs, offloads; ``_nsconfig``) in a child
    process; returns its warnings."""
    env = dict(os.environ)
    pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env["PYTHONPATH"] = pkg_root + os.pathsep + env.get("PYTHONPATH", "")
    try:
        p = subprocess.run([sys.executable, "-m", "clusterlab.cluster.testbed._nsconfig"], input=json.dumps(plan),
                           capture_output=True, text=True, timeout=120, env=env)
    except subprocess.TimeoutExpired:
        raise TestbedError("configuring namespaces (sysctl, rps, offloads) took over 120 s") from None
    if p.returncode != 0:
        raise TestbedError(f"configuring namespaces failed: {p.stderr.strip()[-500:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])["warnings"]


class TestbedNetwork:
    """A star network of namespaces: ``hosts`` (list of ``Host``) around one ``switch``.

    ``transport``: the TCP settings (a ``TransportConfig``, applied at ``place="testbed"``:
    per-host sysctls and routes, with timers multiplied by the topology's dilation; the
    per-socket knobs go to every rank that ``run`` starts). A setting the kernel cannot take
    at this dilation is refused here, before anything is built. ``rps``: pin each interface's receive processing to one CPU (without it veth
    spreads a flow over CPUs, reorders it, and TCP retransmits without any loss).
    ``offloads_off``: no TSO/GSO/GRO, so the links carry MTU-sized packets as real links do.
    ``static_neigh``: permanent ARP entries and static bridge entries (no ARP, no flooding).
    ``keep``: do not remove the testbed when this process exits (``clusterlab testbed up``).
    ``far_side_threads``: with a WAN line, run the receive work behind the switch's WAN ports in
    threaded NAPI (``wanline.far_side_threads``); by default it stays in the line's process,
    which costs the machine less and adds less delay (``bench/wan.py --incremental/--idle-rtt``).
    """

    __test__ = False  # not a pytest class

    def __init__(self, topo: StarTopo, name: str | None = None, transport: TransportConfig | None = None,
                 rps: bool = True, offloads_off: bool = True, static_neigh: bool = True, keep: bool = False,
                 far_side_threads: bool = False):
        self.topo = topo
        self.name = check_name(name) if name else secrets.token_hex(2)
        if transport is not None and not isinstance(transport, TransportConfig):
            raise ConfigError(f"transport must be a TransportConfig (TransportConfig.parse reads text), got "
                              f"{type(transport).__name__}")
        self.transport = (transport or TransportConfig()).with_place("testbed")
        why = self.transport.why_not(topo.dilation)
        if why:
            raise ConfigError(why)
        self.rps, self.offloads_off, self.static_neigh, self.keep = rps, offloads_off, static_neigh, keep
        self.far_side_threads = far_side_threads
        self.hosts = [Host(self.name, i, h, topo.address(i), topo.mac(i)) for i, h in enumerate(topo.host_names())]
        self.switch = Switch(self.name)
        self.router = Node(self.name, link.ROUTER) if topo.has_wan else None
        self.wan: wanline.WanLine | None = None
        self.wan_totals: dict | None = None  # the line's own counts, once it stopped
        self.atm: mover.Mover | None = None
        self.atm_totals: dict | None = None  # the ATM switch's own counts, once it stopped
        self.timings: dict[str, float] = {}
        self.warnings: list[str] = []
        self.machine_sysctls: dict[str, int] = {}  # machine-wide limits this testbed raised (left raised)
        self.is_up = False

    # --- lifecycle --------------------------------------------------------------------------
    def __enter__(self) -> TestbedNetwork:
        return self.up()

    def __exit__(self, *exc) -> None:
        self.down()

    def namespaces(self) -> list[str]:
        return [h.ns for h in self.hosts] + [self.switch.ns] + ([self.router.ns] if self.router else [])

    def up(self) -> TestbedNetwork:
        """Build everything; on any failure remove what was built and raise ``TestbedError``."""
        require_root()
        if our_namespaces(self.name):
            raise TestbedError(f"testbed {self.name} already exists (clusterlab testbed down {self.name})")
        _install_handlers()
        with _live_lock:
            _live[self.name] = self
        t0 = time.perf_counter()
        try:
            self._write_state()
            self.machine_sysctls = raise_machine_backlog(len(self.hosts))
            _run(["ip"], [f"netns add {ns}" for ns in self.namespaces()]
                 + link.veth_lines(self.name, self.topo), "create namespaces and links")
            self.timings["namespaces_links"] = time.perf_counter() - t0
            t = time.perf_counter()
            self._configure_namespaces()
            self.timings["sysctl_rps_offloads"] = time.perf_counter() - t
            t = time.perf_counter()
            self._addresses_and_qdiscs()
            self.timings["addresses_qdiscs"] = time.perf_counter() - t
            if self.router is not None:
                t = time.perf_counter()
                far_side, warn = wanline.far_side_threads(self.switch.ns) if self.far_side_threads else ([], [])
                self.warnings += warn
                self.wan = wanline.start(self.name, self.router.ns, self.topo, self.keep, far_side=far_side)
                self.timings["wan_line"] = time.perf_counter() - t
            if self.topo.switch == "atm":
                t = time.perf_counter()
                self._wait_links_up([p for p, _ in link.atm_ports(self.topo)] + [link.SWITCH_IFACE])
                self.atm = atmswitch.start(self.name, self.switch.ns, self.topo, self.keep)
                self.timings["atm_switch"] = time.perf_counter() - t
            else:
                self._wait_forwarding([h.port for h in self.hosts] + (list(link.WAN_PORTS) if self.router else []))
            self._wait_hosts_running()
        except BaseException:
            self.down()
            raise
        self.timings["up"] = time.perf_counter() - t0
        self.is_up = True
        if self.keep:  # outlives this process: `clusterlab testbed down` removes it
            with _live_lock:
                _live.pop(self.name, None)
        return self

    def down(self) -> dict:
        """Kill every process in the testbed's namespaces and delete them. Idempotent."""
        t = time.perf_counter()
        with _live_lock:
            _live.pop(self.name, None)
        try:
            if self.atm is not None:
                self.atm_totals = self.atm.stop()
        finally:
            self.atm = None
            try:
                if self.wan is not None:
                    self.wan_totals = self.wan.stop()
            finally:
                self.wan = None
                res = clean_testbed(self.name)
        self.timings["down"] = time.perf_counter() - t
        self.is_up = False
        return res

    def _wait_forwarding(self, ports, timeout: float = 5.0) -> None:
        """Wait until the bridge forwards on ``ports``: a port whose veth peer came up after it
        (a host's eth0, the router's ends) stays disabled until the kernel's link watcher (up to
        a second later) reports the carrier, and the bridge drops what arrives meanwhile (a
        first datagram lost; TCP hides it behind a 1 s SYN retransmission)."""
        self._wait_ports(["bridge", "-n", self.switch.ns, "-j", "link", "show"], "state", "forwarding", ports,
                         "forwarding", timeout)

    def _wait_links_up(self, ifaces, timeout: float = 5.0) -> None:
        """Wait until the switch namespace's ``ifaces`` have their carrier (a veth whose peer
        came up later reports it up to a second after; a frame sent before is lost)."""
        self._wait_ports(["ip", "-n", self.switch.ns, "-j", "link", "show"], "operstate", "UP", ifaces, "up",
                         timeout)

    def _wait_hosts_running(self, timeout: float = 5.0) -> None:
        """Wait until every host's eth0 is IFF_RUNNING, as programs there see it: MPICH's UCX
        takes an interface without it for absent and fails at MPI_Init ("Destination is
        unreachable"). Normally already so (``link.PORT_IFINDEX`` says why it can lag)."""
        from clusterlab.net.iface import IFF_RUNNING, flags_in

        deadline = time.monotonic() + timeout
        waiting = list(self.hosts)
        while waiting:
            waiting = [h for h in waiting if not flags_in(h.ns, "eth0") & IFF_RUNNING]
            if waiting and time.monotonic() > deadline:
                raise TestbedError(f"eth0 of {', '.join(h.name for h in waiting)} not running after {timeout} s")
            if waiting:
                time.sleep(0.02)

    @staticmethod
    def _wait_ports(cmd, key: str, want: str, ports, what: str, timeout: float) -> None:
        """Poll ``cmd`` (JSON, one entry per interface) until every port's ``key`` is ``want``."""
        deadline = time.monotonic() + timeout
        states: dict = {}
        while time.monotonic() < deadline:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout
            states = {e.get("ifname"): e.get(key) for e in json.loads(out or "[]")}
            if all(states.get(p) == want for p in ports):
                return
            time.sleep(0.05)
        late = [p for p in ports if states.get(p) != want]
        raise TestbedError(f"switch ports {late} not {what} after {timeout} s: {states}")

    def _configure_namespaces(self) -> None:
        cpus = sorted(os.sched_getaffinity(0))
        draws = host_sysctls(self.transport, [h.name for h in self.hosts], self.topo.dilation)
        plan = []
        for h in self.hosts:
            cpu = cpus[h.index % len(cpus)] if self.rps else None
            plan.append({"ns": h.ns, "sysctls": draws[h.name],
                         "ifaces": [{"name": "eth0", "rps_cpu": cpu, "offloads_off": self.offloads_off}]})
        # (with far_side_threads, GRO goes back on for these once they are up)
        wan_ports = [{"name": p, "rps_cpu": None, "offloads_off": True} for p in link.WAN_PORTS]
        plan.append({"ns": self.switch.ns, "sysctls": {**BASE_SYSCTLS, **SWITCH_SYSCTLS},
                     "ifaces": [{"name": h.port, "rps_cpu": cpus[h.index % len(cpus)] if self.rps else None,
                                 "offloads_off": self.offloads_off} for h in self.hosts]
                     + (wan_ports if self.router else [])
                     # the cell switch counts each frame's cells: no GRO merging on its ports
                     + ([{"name": p, "rps_cpu": None, "offloads_off": True}
                         for p in (link.CONTROL_PORT, link.SWITCH_IFACE)] if self.topo.switch == "atm" else [])})
        if self.router is not None:  # the line forwards frames as they are: no GRO merging
            plan.append({"ns": self.router.ns, "sysctls": dict(BASE_SYSCTLS),
                         "ifaces": [{"name": e, "rps_cpu": None, "offloads_off": True} for e in link.ROUTER_IFACES]})
        self.warnings += _configure(plan)
        self.sysctls = draws

    def set_timers(self, transport) -> dict[str, dict]:
        """Set every host's RTO bounds to ``transport``'s (a ``TransportConfig``; its MIN and
        MAX, jitter and offset, drawn per host as at bring-up) times the dilation, on a testbed
        that is up; bounds it leaves unset go back to the kernel's (the MIN x the dilation). For
        settings tried one after another on one testbed (``tune auto --dilation``): a dilated
        RTO is a sysctl, the socket options take 5-200 ms only. Returns the values by host."""
        from clusterlab.net.transport_config import KERNEL_RTO_MIN

        k = self.topo.dilation
        t = transport.with_place("testbed")
        why = t.why_not(k)
        if why:
            raise ConfigError(why)
        keys = ("net/ipv4/tcp_rto_min_us", "net/ipv4/tcp_rto_max_ms")
        draws = {}
        for h in self.hosts:
            s = {key: v for key, v in t.namespace_sysctls(h.index, k).items() if key in keys}
            s.setdefault(keys[0], round(KERNEL_RTO_MIN * k * 1e6))
            s.setdefault(keys[1], 120_000)
            draws[h.name] = s
        self.warnings += _configure([{"ns": h.ns, "sysctls": draws[h.name], "ifaces": []} for h in self.hosts])
        for h in self.hosts:
            self.sysctls.setdefault(h.name, {}).update(draws[h.name])
        return draws

    def _addresses_and_qdiscs(self) -> None:
        topo = self.topo

        route = self.transport.route_attributes()

        def host_job(h: Host):
            _run(["ip", "-n", h.ns], link.host_lines(topo, h.index, self.static_neigh, route), f"configure {h.name}")
            _run(["tc", "-n", h.ns], link.host_qdisc_lines(topo, h.index), f"shape {h.name}")

        def router_job():
            _run(["ip", "-n", self.router.ns], link.router_lines(topo), "build the WAN router")

        def switch_job():
            sw = self.switch.ns
            _run(["ip", "-n", sw], link.switch_lines(topo), "build the switch")
            if self.static_neigh and topo.switch == "bridge":
                _run(["bridge", "-n", sw], link.fdb_lines(topo), "static switch entries")
            _run(["tc", "-n", sw], link.port_qdisc_lines(topo), "shape the switch ports")

        workers = max(2, min(8, 2 * (os.cpu_count() or 1)))
        with cf.ThreadPoolExecutor(workers) as ex:
            futs = [ex.submit(switch_job)] + [ex.submit(host_job, h) for h in self.hosts]
            if self.router is not None:
                futs.append(ex.submit(router_job))
            for f in futs:
                f.result()

    # --- state (for `clusterlab testbed status|exec|down` from another process) -------------
    def _write_state(self) -> None:
        os.makedirs(STATE_DIR, exist_ok=True)
        with atomic_open(os.path.join(STATE_DIR, f"{self.name}.json")) as f:
            json.dump(self.describe(), f, indent=1)

    def describe(self) -> dict:
        return {"name": self.name, "topo": self.topo.to_dict(), "transport": self.transport.to_json(),
                "rps": self.rps, "offloads_off": self.offloads_off, "static_neigh": self.static_neigh,
                "driver_pid": None if self.keep else os.getpid(), "created": time.time(),
                "hosts": [{"name": h.name, "ns": h.ns, "address": h.addr, "mac": h.mac, "port": h.port}
                          for h in self.hosts],
                "switch": self.switch.ns, "router": self.router.ns if self.router else None}

    @classmethod
    def attach(cls, name: str) -> TestbedNetwork:
        """The testbed ``name`` that another process brought up (for status/exec/down)."""
        path = os.path.join(STATE_DIR, f"{check_name(name)}.json")
        try:
            with open(path) as f:
                d = json.load(f)
        except FileNotFoundError:
            raise TestbedError(f"no testbed named {name} (see clusterlab testbed status)") from None
        except (OSError, ValueError) as e:
            raise TestbedError(f"{path}: damaged state file ({e}); take the testbed down with "
                               f"clusterlab testbed clean {name}") from None
        if "transport" not in d:
            raise TestbedError(f"{path}: written by an older clusterlab (no transport settings); take the "
                               f"testbed down with clusterlab testbed clean {name}")
        try:
            transport = TransportConfig.from_json(d["transport"])
            tb = cls(StarTopo.from_dict(d["topo"]), name=name, transport=transport, rps=d["rps"],
                     offloads_off=d["offloads_off"], static_neigh=d["static_neigh"], keep=True)
        except (KeyError, TypeError, AttributeError, ValueError) as e:
            raise TestbedError(f"{path}: damaged state file ({type(e).__name__}: {e}); take the testbed down "
                               f"with clusterlab testbed clean {name}") from None
        tb.is_up = all(os.path.exists(os.path.join(NETNS_DIR, ns)) for ns in tb.namespaces())
        return tb

    # --- running things on it ---------------------------------------------------------------
    def host(self, name_or_index: str | int) -> Host:
        for h in self.hosts:
            if h.name == name_or_index or h.index == name_or_index:
                return h
        raise TestbedError(f"testbed {self.name} has no host {name_or_index!r}")

    def placement(self, nranks: int | None = None) -> list[dict]:
        """Where rank i runs: ``{"prefix": [...ip netns exec NS], "address": "10.0.0.i+1"}``.
        Ranks go to compute hosts in order (the storage host is never a rank)."""
        compute = [h for h in self.hosts if h.name != "st"]
        n = len(compute) if nranks is None else nranks
        if n > len(compute):
            raise TestbedError(f"{n} ranks but the testbed has {len(compute)} hosts")
        return [{"prefix": h.prefix(), "address": h.addr, "host": h.name, "ns": h.ns} for h in compute[:n]]

    def switch_ns(self) -> str:
        return ns_name(self.name, "sw")

    def cost_model(self):
        """The cost model this testbed's ranks pick collective algorithms by: its links' rate and
        port buffer (``testbed.model.link_model``), not the loopback fit."""
        from clusterlab.cluster.testbed.model import link_model

        return link_model(self.topo, initcwnd=self.transport.initcwnd)

    @contextlib.contextmanager
    def from_the_switch(self, nranks: int | None, transport=None, env: dict | None = None):
        """What clusterlab's launcher needs to start ``nranks`` ranks here (rank i in compute host
        i, its mesh on the host's address; None: one per compute host): the ranks' hosts, their
        TCP settings (this testbed's own unless ``transport``), the rendezvous address, the
        switch's, and their environment: ``env`` (default ``os.environ``) naming this testbed's
        cost model (``cost_model``) in ``$CLUSTERLAB_COSTMODEL`` unless it names one already, with
        this thread in the switch's namespace, where every host reaches it. Both ``run`` and
        ``clusterlab.cluster.Testbed``'s ``launch`` start ranks through it."""
        import tempfile

        from clusterlab.cluster.local import RankHost
        from clusterlab.comm import costmodel

        hosts = [RankHost(prefix=p["prefix"], bind=p["address"]) for p in self.placement(nranks)]
        env = dict(os.environ if env is None else env)
        with tempfile.TemporaryDirectory(prefix="clusterlab-model-") as d:
            if not env.get(costmodel.ENV):
                env[costmodel.ENV] = os.path.join(d, "costmodel.json")
                self.cost_model().save(env[costmodel.ENV])
            with in_netns(self.switch.ns):
                yield hosts, self.transport if transport is None else transport, self.topo.switch_address, env

    def run(self, fn, nranks: int | None = None, *args, config=None, timeout: float | None = 300.0, **kw) -> list:
        """Run ``fn(comm, *args)`` with rank i in host i (``clusterlab.cluster.local.run``, as
        ``clusterlab.cluster.Testbed(self).run`` does): each rank's mesh listener binds to its
        host's address, the launcher's rendezvous listens on the switch's. ``config``: the
        ranks' transport settings; by default the testbed's own (its per-socket knobs; the RTO
        bounds are already the hosts' sysctls). The ranks pick collective algorithms by the
        testbed's cost model (``from_the_switch``)."""
        from clusterlab.cluster.local import run as local_run

        with self.from_the_switch(nranks, config, kw.pop("env", None)) as (hosts, config, where, env):
            return local_run(fn, len(hosts), *args, config=config, timeout=timeout, hosts=hosts,
                             rendezvous_host=where, env=env, **kw)
