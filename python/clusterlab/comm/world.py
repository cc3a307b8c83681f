"""``world()``: this process's Communicator, chosen from how the process was started.

- started by clusterlab's launcher (``clusterlab run``, ``cluster.local.run``): the TCP mesh,
  built through the launcher's rendezvous with the per-job secret from the environment;
- started by ``mpiexec``/``mpirun``: the MPI backend, or, with ``CLUSTERLAB_BACKEND=tcp``,
  the TCP mesh; its addresses travel through the launcher when ``launch_mpi`` started the
  job, else through MPI. Each rank listens on its host's routable address (``CLUSTERLAB_BIND``,
  ``CLUSTERLAB_IFACE``, else the route towards the launcher or the other hosts:
  ``clusterlab.rendezvous.address``);
- started alone: a world of one rank.

Which of these is not decided here: the launcher (``clusterlab.cluster``) chose it and said so
in the environment, and ``clusterlab.rendezvous.contract`` reads it (``started_by``, ``mesh``);
this module only joins the mesh named, by ``JOIN``, one entry per ``contract.MESHES``.
What a launcher and its ranks say to each other is ``clusterlab.rendezvous.contract``. The same program
therefore runs unchanged under ``clusterlab run -n 4`` and ``mpiexec -n 4``. At exit the
communicator says goodbye to its peers; an uncaught exception instead tells every peer that
this rank failed (they raise ``PeerFailure`` naming it) and the launcher what it was: the
launcher prints it once (one line for a clusterlab error in the input or settings, the
traceback of a bug), so the rank itself prints nothing. With ``CLUSTERLAB_RUN_DIR`` set
(``clusterlab run --run-dir``) the communicator's calls are timed and the rank's record written
into the run directory when it closes (``comm.rank_record``).

>>> c = world()
>>> (c.rank, c.size) if not (under_launcher() or under_mpi()) else (0, 1)
(0, 1)
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import socket
import sys
import threading
import time

from clusterlab.comm.communicator import Communicator
from clusterlab.comm.errors import CommError, CommTimeout, PeerFailure, ProtocolError
from clusterlab.comm.tcp.mesh import TcpCommunicator, build_mesh, listen
from clusterlab.errors import ClusterlabError, ConfigError
from clusterlab.net.transport_config import TransportConfig
from clusterlab.rendezvous import address, contract, handshake
from clusterlab.units import env_duration

_WORLD: Communicator | None = None
_RECORDER = None  # comm.rank_record's recorder of _WORLD, in a run with a run directory
_LAUNCHER: socket.socket | None = None
_RANK: int | None = None  # known before the communicator exists (error reports during set-up)
_LOCK = threading.Lock()

DEFAULT_SETUP_TIMEOUT = 60.0


def under_launcher() -> bool:
    """Started by clusterlab's local launcher (``contract.started_by``)."""
    return contract.started_by() == "launcher"


def under_mpi() -> bool:
    """Started by mpiexec (``contract.started_by``; ``launch_mpi``'s jobs too)."""
    return contract.started_by() == "mpiexec"


def world(timeout: float | None = None) -> Communicator:
    """This process's Communicator (created on first call, then the same object).
    ``timeout`` bounds the set-up (rendezvous and mesh connections; default
    ``CLUSTERLAB_SETUP_TIMEOUT`` or 60 s)."""
    global _WORLD
    with _LOCK:
        if _WORLD is None:
            setup = timeout if timeout is not None else \
                env_duration(contract.ENV_SETUP_TIMEOUT, DEFAULT_SETUP_TIMEOUT)
            _install_exit_hooks()
            how = contract.started_by()
            if how is None:
                _WORLD = TcpCommunicator(0, 1, {}, drainer=False)
            else:
                join = JOIN[contract.mesh()]  # the mesh the launcher named
                rank = int(_env(contract.ENV_RANK)) if how == "launcher" else _mpi_rank()
                # a launcher (clusterlab's, or launch_mpi) has a rendezvous to join; a bare
                # mpiexec's ranks find each other through MPI
                _WORLD = join(rank, setup, contract.ENV_RDV in os.environ)
            t = env_duration(contract.ENV_TIMEOUT, None)
            if t is not None:
                _WORLD.default_timeout = t
            if how is not None and os.environ.get(contract.ENV_RUN_DIR):
                from clusterlab.comm import rank_record

                global _RECORDER
                _RECORDER = rank_record.attach(_WORLD, os.environ[contract.ENV_RUN_DIR], _node())
        return _WORLD


def _env(name: str) -> str:
    v = os.environ.get(name)
    if v is None:
        raise ConfigError(f"environment variable {name} is missing (was this started by the launcher?)")
    return v


def _mpi_rank() -> int:
    for k in contract.MPI_RANK_ENV:
        if os.environ.get(k, "").isdigit():
            return int(os.environ[k])
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_rank()


def _node() -> str:
    """The host this rank runs on, as the launcher should name it."""
    return os.environ.get("PMI_HOSTNAME") or socket.gethostname()


def _take_secret() -> bytes:
    """The job secret, removed from the environment (so programs this rank starts do not
    inherit it) and blanked in the process's initial environment block (so
    ``/proc/PID/environ`` no longer shows it)."""
    fd_text = os.environ.pop(contract.ENV_SECRET_FD, None)
    if fd_text is not None:  # the local launcher's pipe
        return _read_secret_fd(fd_text)
    name = contract.ENV_SECRET
    raw = _env(name)
    try:
        secret = bytes.fromhex(raw)
    except ValueError:
        raise ConfigError(f"{name} is not hex") from None
    try:
        libc = ctypes.CDLL(None)
        libc.getenv.restype = ctypes.c_void_p
        addr = libc.getenv(name.encode())
    except (OSError, AttributeError):  # pragma: no cover - not glibc/Linux
        addr = None
    os.environ.pop(name, None)  # unsetenv: later children do not get it
    if addr:
        start = addr - len(name) - 1
        stat = open("/proc/self/stat").read()
        fields = stat[stat.rindex(")") + 2:].split()
        env_start, env_end = int(fields[47]), int(fields[48])  # fields 50 and 51 of proc(5)
        if env_start <= start and addr + len(raw) <= env_end:  # only the kernel-provided block
            ctypes.memset(start, 0, len(name) + 1 + len(raw))
    return secret


def _read_secret_fd(fd_text: str) -> bytes:
    name = contract.ENV_SECRET_FD
    if not fd_text.isdigit():
        raise ConfigError(f"{name}={fd_text!r} is not a file descriptor")
    fd, data = int(fd_text), b""
    try:
        while len(data) < 4096:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    except OSError as e:
        raise ConfigError(f"{name}={fd}: cannot read the job secret: {e.strerror or e}") from None
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    try:
        return bytes.fromhex(data.decode("ascii").strip())
    except ValueError:
        raise ConfigError(f"{name}={fd}: the job secret is not hex") from None


def _rendezvous() -> tuple[str, int]:
    host, _, port = _env(contract.ENV_RDV).rpartition(":")
    return host.strip("[]"), int(port)


def _join_tcp(rank: int, timeout: float, via_launcher: bool) -> Communicator:
    """The TCP mesh: addresses through the launcher's rendezvous, else through MPI."""
    return _join_launcher(rank, True, timeout) if via_launcher else _tcp_over_mpi(timeout)


def _join_mpi(rank: int, timeout: float, via_launcher: bool) -> Communicator:
    """MPI's own transport (under mpiexec); a launcher's rendezvous, if any, still hears this
    rank check in (and its failure)."""
    if via_launcher:
        return _join_launcher(rank, False, timeout)
    from clusterlab.comm.mpi import MpiCommunicator

    return MpiCommunicator()


def _join_launcher(rank: int, tcp: bool, timeout: float) -> Communicator:
    """Check in with the launcher's rendezvous (hello with this rank's mesh address); for the
    TCP mesh (``tcp``) wait for the address table and connect it; else the MPI communicator."""
    global _LAUNCHER, _RANK
    _RANK = rank
    size = int(_env(contract.ENV_SIZE))
    secret = _take_secret()
    deadline = time.monotonic() + timeout
    host, port = _rendezvous()
    config = TransportConfig.from_json(os.environ.get(contract.ENV_TRANSPORT) or "{}")
    listener = s = None
    try:
        if tcp:
            bind = address.choose(bind=os.environ.get(contract.ENV_BIND), iface=os.environ.get(contract.ENV_IFACE),
                                  towards=host)
            listener = listen(bind, 0, config, rank, backlog=max(size, 16))
        try:
            s = socket.create_connection((host, port), timeout=max(deadline - time.monotonic(), 0.1))
        except OSError as e:
            raise CommError(f"rank {rank} cannot reach the launcher at {host}:{port}: {e.strerror or e}") from None
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # last words must not wait for an ACK
        handshake.connect(s, secret, rank, contract.LAUNCHER, max(deadline - time.monotonic(), 0.1))
        me = listener.getsockname()[:2] if listener is not None else ("", 0)
        contract.send_all(s, contract.control_frame(rank, contract.hello(me[0], me[1], _node(), os.getpid())),
                          max(deadline - time.monotonic(), 0.1))
        _LAUNCHER = s
        if not tcp:
            from clusterlab.comm.mpi import MpiCommunicator

            return MpiCommunicator()
        msg = contract.recv_control(s, contract.LAUNCHER, deadline)
        if msg["op"] == "abort":
            raise PeerFailure(int(msg.get("rank", -1)), str(msg.get("detail", "the launcher aborted the job")))
        if msg["op"] != "table" or len(msg["table"]) != size:
            raise ProtocolError("the launcher sent a malformed address table")
        table = [(str(a), int(p)) for a, p in msg["table"]]
    except BaseException:
        if listener is not None:
            listener.close()
        if s is not None and _LAUNCHER is not s:
            s.close()
        raise
    return build_mesh(rank, size, table, listener, secret, config, max(deadline - time.monotonic(), 1.0))


_ADDR_BYTES = 1024  # per rank: its candidate addresses, then its mesh address (ASCII)


def _tcp_over_mpi(timeout: float) -> Communicator:
    """TCP mesh whose addresses and secret travel through MPI (fixed-size buffers, no pickle).
    Each rank listens on ``CLUSTERLAB_BIND`` / ``CLUSTERLAB_IFACE``'s address, else on the
    source of its route towards the first rank on another host (loopback if all share one)."""
    global _RANK
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    _RANK = rank
    config = TransportConfig.from_json(os.environ.get(contract.ENV_TRANSPORT) or "{}")

    def allgather_text(text: str) -> list[str]:
        raw = text.encode()
        if len(raw) >= _ADDR_BYTES:
            raise ConfigError(f"rank {rank}: too many addresses to exchange ({text[:80]}...)")
        mine = np.zeros(_ADDR_BYTES, np.uint8)
        mine[:len(raw)] = np.frombuffer(raw, np.uint8)
        every = np.empty(_ADDR_BYTES * size, np.uint8)
        comm.Allgather(mine, every)
        return [bytes(every[i * _ADDR_BYTES:(i + 1) * _ADDR_BYTES]).rstrip(b"\0").decode() for i in range(size)]

    bind, iface = os.environ.get(contract.ENV_BIND), os.environ.get(contract.ENV_IFACE)
    if bind or iface:
        ip = address.choose(bind=bind, iface=iface)
    else:
        mine = [a for _, a in address.local_addresses()]
        peers = [t.split() for t in allgather_text(" ".join(mine))]
        ip = address.choose_among_peers(mine, peers[:rank] + peers[rank + 1:])
    listener = listen(ip, 0, config, rank, backlog=max(size, 16))
    try:
        secret = np.frombuffer(os.urandom(32), np.uint8).copy() if rank == 0 else np.empty(32, np.uint8)
        comm.Bcast(secret, root=0)
        host, port = listener.getsockname()[:2]
        table = [(h, int(p)) for h, p in (t.rsplit(" ", 1) for t in allgather_text(f"{host} {port}"))]
    except BaseException:
        listener.close()
        raise
    return build_mesh(rank, size, table, listener, secret.tobytes(), config, timeout)


# How a rank joins each mesh a launcher may name (``contract.MESHES``; a test checks they agree).
JOIN = {"tcp": _join_tcp, "mpi": _join_mpi}


# --- results and errors back to the launcher ------------------------------------------------------

def send_result(body: bytes, tag: int) -> None:
    """Send this rank's return value to the launcher (no-op when there is none)."""
    if _LAUNCHER is not None and _RANK is not None:
        contract.send_all(_LAUNCHER, contract.result_frame(_RANK, body, tag), 30.0)


def _tell_launcher(msg: dict) -> bool:
    if _LAUNCHER is None or _RANK is None:
        return False
    try:
        contract.send_all(_LAUNCHER, contract.control_frame(_RANK, msg), 2.0)
    except (OSError, CommError):
        return False
    return True


def _fail(report: dict) -> bool:
    """Tell the launcher and every peer that this rank failed; True if the launcher heard it."""
    global _ABORTED
    _ABORTED = True
    if _RECORDER is not None:  # the split up to the failure, before the connections go
        _RECORDER.write(error=str(report.get("detail", "")))
    told = _tell_launcher(report)
    abort = getattr(_WORLD, "abort", None)
    if abort is not None:
        try:
            abort(report["detail"])
        except (OSError, CommError):
            pass
    return told


def report_error(detail: str, tb: str = "") -> None:
    """Tell the launcher and every peer that this rank failed with ``detail``."""
    rank = _RANK if _RANK is not None else -1
    _fail({"op": "error", "detail": detail, "traceback": tb[-contract.MAX_TRACEBACK:], "user": False,
           "culprit": rank})


_ABORTED = False
_HOOKED = False


def _install_exit_hooks() -> None:
    global _HOOKED
    if _HOOKED:
        return
    _HOOKED = True
    prev = sys.excepthook

    def hook(tp, value, tb):
        import traceback

        text = "".join(traceback.format_exception(tp, value, tb))
        if not _ABORTED and _fail(contract.error_report(_RANK if _RANK is not None else -1, value, text)):
            return  # the launcher prints it, once for the job
        if isinstance(value, ClusterlabError):
            who = f"rank {_RANK}: " if _RANK is not None else ""
            _write(f"clusterlab: error: {who}{tp.__name__}: {value}\n")
            return
        if prev is sys.__excepthook__:
            # One write: ranks share the launcher's stderr, and the default hook's many small
            # writes interleave with other ranks' tracebacks into unreadable (and ungreppable) text.
            if _write(text):
                return
        prev(tp, value, tb)

    sys.excepthook = hook
    atexit.register(_at_exit)


def _write(text: str) -> bool:
    try:
        sys.stderr.flush()
        os.write(2, text.encode(errors="replace"))
    except OSError:
        return False
    return True


def _at_exit() -> None:
    w = _WORLD
    if w is None or _ABORTED:
        return
    # The launcher forwards an interrupt to every rank; one arriving while the rank says goodbye
    # must not print a traceback per rank (the goodbye is bounded by its own timeouts, and the
    # launcher escalates to SIGTERM/SIGKILL).
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        w.close()
    except (CommError, CommTimeout, OSError, KeyboardInterrupt):
        return
    _tell_launcher({"op": "bye"})
