"""Supervising the processes of a job, for every launcher (``local``: one process per rank;
``mpirun``: one ``mpiexec``).

A :class:`Supervisor` starts processes (each in its own process group, killed with the
launcher by ``PR_SET_PDEATHSIG``), runs the launcher's event loop (``poll`` on process exits
through pidfds and on whatever descriptors the launcher watches), forwards Ctrl-C and SIGTERM
to every group, and once something failed gives the rest ``grace`` seconds, then SIGTERM,
then SIGKILL, and reaps everything. It also enforces the job's timeout.
:func:`check_capacity` refuses more ranks than the machine can start, naming the limit.

>>> import sys
>>> with Supervisor(grace=1.0) as sup:
...     child = sup.spawn([sys.executable, "-c", "raise SystemExit(3)"], rank=0)
...     while sup.alive():
...         sup.step()
>>> child.rc, describe_status(child.rc)
(3, 'exited with status 3')
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import resource
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from clusterlab.errors import ClusterlabError, ConfigError

# What one rank costs, measured on a rank that joined a mesh (python, numpy, clusterlab):
# 28 MiB of private memory (38 MiB PSS), 4 threads, about 10 descriptors plus one per peer.
RANK_MEMORY = 32 << 20
RANK_TASKS = 4
RANK_FDS = 32


class LaunchError(ClusterlabError):
    """A process of the job could not be started (the message names the command and why)."""


@dataclass
class JobResult:
    """What a launched job did: per-rank exit status (negative = killed by that signal), the
    first rank that failed and why, per-rank return values (``run``) and error reports.
    ``user_error``: the failure is a clusterlab error in the input or settings (the CLI prints
    one line and exits 2); ``tracebacks``: the failing ranks' tracebacks, by rank."""

    returncodes: list[int]
    failed_rank: int | None = None
    reason: str = ""
    results: list = field(default_factory=list)
    errors: dict[int, str] = field(default_factory=dict)
    elapsed: float = 0.0
    interrupted: bool = False
    user_error: bool = False
    tracebacks: dict[int, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.failed_rank is None and not self.interrupted and all(rc == 0 for rc in self.returncodes)


def describe_status(rc: int) -> str:
    """``exited with status 3`` / ``was killed by SIGKILL`` for a returncode."""
    if rc < 0:
        try:
            return f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"was killed by signal {-rc}"
    return f"exited with status {rc}"


# --- how many ranks this machine can start --------------------------------------------------------

def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _cgroup_files(controller: str, names: tuple[str, ...]) -> list[tuple[str, str]]:
    """``(name, content)`` of a cgroup controller's files for this process (v2, else v1)."""
    text = _read("/proc/self/cgroup") or ""
    out = []
    for line in text.splitlines():
        hid, ctrls, path = (line.split(":", 2) + ["", ""])[:3]
        if hid == "0" and ctrls == "":
            base = f"/sys/fs/cgroup{path}"
        elif controller in ctrls.split(","):
            base = f"/sys/fs/cgroup/{controller}{path}"
        else:
            continue
        for n in names:
            v = _read(os.path.join(base, n))
            if v is not None:
                out.append((n, v.strip()))
    return out


def _mem_available() -> tuple[int, str]:
    avail, where = None, "MemAvailable in /proc/meminfo"
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemAvailable:"):
            avail = int(line.split()[1]) * 1024
    files = dict(_cgroup_files("memory", ("memory.max", "memory.current",
                                          "memory.limit_in_bytes", "memory.usage_in_bytes")))
    limit = files.get("memory.max") or files.get("memory.limit_in_bytes")
    used = files.get("memory.current") or files.get("memory.usage_in_bytes")
    if limit and limit.isdigit() and used and used.isdigit() and int(limit) < 1 << 60:
        room = int(limit) - int(used)
        if avail is None or room < avail:
            avail, where = room, "the memory cgroup's limit"
    return (avail if avail is not None else 1 << 62), where


def _tasks_of_uid(uid: int) -> int:
    n = 0
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        st = _read(f"/proc/{p}/status") or ""
        u = t = None
        for line in st.splitlines():
            if line.startswith("Uid:"):
                u = int(line.split()[1])
            elif line.startswith("Threads:"):
                t = int(line.split()[1])
        if u == uid and t:
            n += t
    return n


def rank_capacity(n: int) -> tuple[int, str]:
    """``(ranks this machine can start now, what limits it)``: memory (MemAvailable or the
    cgroup's limit, at ``RANK_MEMORY`` each), tasks (RLIMIT_NPROC unless root, threads-max,
    pid_max, the pids cgroup; ``RANK_TASKS`` each), descriptors (RLIMIT_NOFILE: a rank holds
    one per peer plus ``RANK_FDS``, the launcher about three per rank)."""
    limits: list[tuple[int, str]] = []
    avail, where = _mem_available()
    limits.append((avail // RANK_MEMORY,
                   f"memory: each rank needs about {RANK_MEMORY >> 20} MiB and {avail / 2**30:.1f} GiB is "
                   f"available ({where})"))
    load = (_read("/proc/loadavg") or "0 0 0 0/0").split()[3]
    total_tasks = int(load.split("/")[1])
    for path in ("/proc/sys/kernel/threads-max", "/proc/sys/kernel/pid_max"):
        v = (_read(path) or "").strip()
        if v.isdigit():
            limits.append(((int(v) - total_tasks) // RANK_TASKS,
                           f"tasks: {path[6:].replace('/', '.')} is {v} and {total_tasks} are running "
                           f"(each rank needs about {RANK_TASKS})"))
    pids = dict(_cgroup_files("pids", ("pids.max", "pids.current")))
    if pids.get("pids.max", "max").isdigit() and pids.get("pids.current", "").isdigit():
        limits.append(((int(pids["pids.max"]) - int(pids["pids.current"])) // RANK_TASKS,
                       f"tasks: the pids cgroup allows {pids['pids.max']} and {pids['pids.current']} are in use"))
    if os.geteuid() != 0:  # root is exempt from RLIMIT_NPROC
        soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]
        if soft != resource.RLIM_INFINITY:
            used = _tasks_of_uid(os.getuid())
            limits.append(((soft - used) // RANK_TASKS,
                           f"processes: RLIMIT_NPROC (ulimit -u) is {soft} and this user runs {used} tasks "
                           f"(each rank needs about {RANK_TASKS})"))
    soft_fd = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft_fd != resource.RLIM_INFINITY:
        open_fds = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0
        limits.append((min(soft_fd - RANK_FDS, (soft_fd - open_fds - 16) // 3),
                       f"open files: RLIMIT_NOFILE (ulimit -n) is {soft_fd}; each rank holds one descriptor per "
                       f"peer plus about {RANK_FDS}, the launcher about 3 per rank"))
    limit, why = min(limits, key=lambda x: x[0])
    return max(limit, 0), why


def check_capacity(n: int) -> None:
    """Refuse ``n`` ranks if this machine cannot start them (``ConfigError`` naming the limit)."""
    limit, why = rank_capacity(n)
    if n > limit:
        raise ConfigError(f"{n} ranks are more than this machine can start (at most {limit}): {why}")


# --- processes -------------------------------------------------------------------------------------

def _preexec():
    """A preexec function giving the child its own process group (so the launcher can signal
    a rank and whatever it started) and SIGKILL when the launcher dies (``PR_SET_PDEATHSIG``).
    Resolved before fork: the child only calls."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return lambda: os.setpgid(0, 0)
    parent = os.getpid()

    def pre():
        # Own process group, but the launcher's session: with scheduler autogroups a new
        # session per rank would make every rank its own CPU group, and loopback wake-ups
        # slower by a factor of 3.
        os.setpgid(0, 0)
        prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the launcher died before prctl took effect
            os._exit(1)

    return pre


def check_command(argv: list[str]) -> None:
    """``ConfigError`` unless ``argv[0]`` is an executable file (by path or on PATH)."""
    head = argv[0]
    if os.sep in head:
        if not os.path.exists(head):
            raise ConfigError(f"cannot run {head}: no such file")
        if os.path.isdir(head) or not os.access(head, os.X_OK):
            raise ConfigError(f"cannot run {head}: not an executable file")
    elif shutil.which(head) is None:
        raise ConfigError(f"cannot run {head}: command not found on PATH")


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class Child:
    """A started process: ``rank`` (its label), ``proc``, ``pgid``, exit status ``rc`` once known."""

    __slots__ = ("rank", "proc", "pgid", "pidfd", "rc", "exited_at")

    def __init__(self, rank: int, proc: subprocess.Popen):
        self.rank, self.proc, self.pgid = rank, proc, proc.pid
        self.pidfd = os.pidfd_open(proc.pid)
        self.rc: int | None = None
        self.exited_at: float | None = None


def _proc_table() -> dict[int, tuple[int, int, int]]:
    """pid -> (ppid, pgid, start time) of every process."""
    out = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        st = _read(f"/proc/{p}/stat")
        if not st:
            continue
        f = st[st.rindex(")") + 2:].split()
        out[int(p)] = (int(f[1]), int(f[2]), int(f[19]))
    return out


class Supervisor:
    """The processes of one job and the launcher's event loop around them.

    ``grace``: after the first failure, how long the others get before SIGTERM (then SIGKILL
    ``kill_after`` seconds later). ``timeout``: the whole job. ``track_descendants``: also
    remember every process the children start (``mpiexec``'s proxies run in process groups of
    their own) and kill those that are left at the end.
    """

    POLL_MS = 100  # longest sleep: signals and deadlines are checked at least this often

    def __init__(self, *, grace: float = 3.0, kill_after: float = 2.0, timeout: float | None = None,
                 track_descendants: bool = False):
        self.grace, self.kill_after, self.timeout = grace, kill_after, timeout
        self.track_descendants = track_descendants
        self.children: list[Child] = []
        self.on_exit: Callable[[Child], None] | None = None
        self.failed_rank: int | None = None
        self.reason = ""
        self.interrupted = False
        self.fail_at: float | None = None
        self.t0 = time.monotonic()
        self._poller = select.poll()
        self._watch: dict[int, Callable[[int, int], None]] = {}
        self._pidfds: dict[int, Child] = {}
        self._signal: int | None = None
        self._old_handlers: dict = {}
        self._termed = self._killed = False
        self._descendants: dict[int, int] = {}  # pid -> start time
        self._next_scan = 0.0
        self._closed = False
        self._pre = _preexec()

    # --- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> Supervisor:
        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGINT, signal.SIGTERM):
                self._old_handlers[s] = signal.signal(s, self._on_signal)
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _on_signal(self, signum, _frame) -> None:
        if self._signal is not None:  # a second Ctrl-C: no more grace
            self.fail_at = time.monotonic() - self.grace - self.kill_after
        self._signal = signum

    def spawn(self, argv: list[str], env: dict[str, str] | None = None, stdin=subprocess.DEVNULL,
              rank: int = 0, what: str | None = None, pass_fds: tuple[int, ...] = (), stdout=None) -> Child:
        """Start ``argv`` as ``rank`` (``what`` names it in errors, default "rank N"), with
        ``pass_fds`` inherited and its output to ``stdout`` (default this process's);
        ``LaunchError`` names the command and the reason if it cannot be started."""
        try:
            proc = subprocess.Popen(argv, env=env, stdin=stdin, stdout=stdout, preexec_fn=self._pre,
                                    pass_fds=pass_fds)
        except OSError as e:
            why = f"fork failed: {e.strerror or e}" if e.errno in (errno.EAGAIN, errno.ENOMEM) \
                else f"{argv[0]}: {e.strerror or e}"
            raise LaunchError(f"cannot start {what or f'rank {rank}'}: {why}") from None
        child = Child(rank, proc)
        self.children.append(child)
        self._pidfds[child.pidfd] = child
        self._poller.register(child.pidfd, select.POLLIN)
        return child

    def watch(self, fd: int, events: int, callback: Callable[[int, int], None]) -> None:
        """Call ``callback(fd, revents)`` when ``fd`` is ready for ``events``."""
        if fd in self._watch:
            self._poller.modify(fd, events)
        else:
            self._poller.register(fd, events)
        self._watch[fd] = callback

    def unwatch(self, fd: int) -> None:
        if self._watch.pop(fd, None) is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._poller.unregister(fd)

    def alive(self) -> list[Child]:
        return [c for c in self.children if c.rc is None]

    # --- failures ----------------------------------------------------------------------------
    def fail(self, rank: int, reason: str, *, now: bool = False) -> None:
        """Record a failure (the first one names the job's); start the grace clock, or with
        ``now`` skip the grace and terminate at once."""
        t = time.monotonic()
        if self.failed_rank is None and not self.interrupted:
            self.failed_rank, self.reason = rank, reason
        if now:
            t -= self.grace
        if self.fail_at is None or t < self.fail_at:
            self.fail_at = t

    def signal_all(self, sig: int) -> None:
        for c in self.alive():
            _killpg(c.pgid, sig)

    # --- the loop ----------------------------------------------------------------------------
    def step(self, max_wait: float | None = None) -> None:
        """One turn of the event loop: signals, deadlines, escalation, then one ``poll``."""
        now = time.monotonic()
        if self._signal is not None and not self.interrupted:
            self.interrupted = True
            self.failed_rank, self.reason = None, f"interrupted by {signal.Signals(self._signal).name}"
            self.signal_all(self._signal)
            self.fail_at = now if self.fail_at is None else min(self.fail_at, now)
        if self.timeout is not None and now - self.t0 > self.timeout and not self.interrupted \
                and self.failed_rank != -1:
            self.failed_rank, self.reason = -1, f"job timed out after {self.timeout:g} s"
            self.fail_at = now - self.grace
        if self.fail_at is not None:
            if not self._termed and now >= self.fail_at + self.grace:
                self._termed = True
                self.signal_all(signal.SIGTERM)
            if not self._killed and now >= self.fail_at + self.grace + self.kill_after:
                self._killed = True
                self.signal_all(signal.SIGKILL)
        if self.track_descendants and now >= self._next_scan:
            self._scan_descendants()
            self._next_scan = now + 0.5
        wait = self.POLL_MS if max_wait is None else max(0, min(self.POLL_MS, int(max_wait * 1000)))
        for fd, ev in self._poller.poll(wait):
            child = self._pidfds.get(fd)
            if child is not None:
                self._exited(child)
                continue
            cb = self._watch.get(fd)
            if cb is not None:
                cb(fd, ev)

    def _exited(self, child: Child) -> None:
        info = os.waitid(os.P_PIDFD, child.pidfd, os.WEXITED | os.WNOWAIT)  # stays a zombie: pgid reserved
        child.rc = info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
        child.exited_at = time.monotonic()
        with contextlib.suppress(KeyError, ValueError):
            self._poller.unregister(child.pidfd)
        if self.on_exit is not None:
            self.on_exit(child)

    def _scan_descendants(self) -> None:
        table = _proc_table()
        kids: dict[int, list[int]] = {}
        for pid, (ppid, _pg, _st) in table.items():
            kids.setdefault(ppid, []).append(pid)
        todo = [c.proc.pid for c in self.children]
        while todo:
            p = todo.pop()
            for k in kids.get(p, ()):
                if k not in self._descendants:
                    self._descendants[k] = table[k][2]
                todo.append(k)

    def kill_descendants(self, scan: bool = True) -> None:
        """SIGKILL every tracked descendant still running (the same process: its start time
        checked), e.g. ranks that outlived a failed ``mpiexec`` and its proxies."""
        if scan and self.track_descendants and self.children:
            self._scan_descendants()
        if self._descendants:
            table = _proc_table()
            for pid, start in self._descendants.items():
                if pid in table and table[pid][2] == start:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
            self._descendants.clear()

    def close(self) -> None:
        """Kill whatever is left (process groups, then tracked descendants), reap, restore
        the signal handlers. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self.track_descendants and self.children:
            self._scan_descendants()  # before the groups die: orphans leave the tree
        for c in self.children:  # groups are still reserved by the unreaped leaders: no pid reuse race
            _killpg(c.pgid, signal.SIGKILL)
        self.kill_descendants(scan=False)
        for c in self.children:
            with contextlib.suppress(Exception):
                c.proc.wait(timeout=5)
            if c.rc is None and c.proc.returncode is not None:
                c.rc = c.proc.returncode
            with contextlib.suppress(OSError):
                os.close(c.pidfd)
        self._pidfds.clear()
        for s, h in self._old_handlers.items():
            signal.signal(s, h)
        self._old_handlers.clear()
