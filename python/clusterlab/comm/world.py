"""``world()``: this process's Communicator, chosen from how the process was started.

- started by clusterlab's launcher (``clusterlab run``, ``cluster.local.run``): the TCP mesh,
  built through the launcher's rendezvous with the per-job secret from the environment;
- started by ``mpiexec``/``mpirun``: the MPI backend, or, with ``CLUSTERLAB_BACKEND=tcp``,
  the TCP mesh with its addresses and secret exchanged through MPI;
- started alone: a world of one rank.

The same program therefore runs unchanged under ``clusterlab run -n 4`` and ``mpiexec -n 4``.
At exit the communicator says goodbye to its peers; an uncaught exception instead tells every
peer that this rank failed (they raise ``PeerFailure`` naming it).

>>> c = world()
>>> (c.rank, c.size) if not (under_launcher() or under_mpi()) else (0, 1)
(0, 1)
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import sys
import threading
import time

from clusterlab.comm.communicator import Communicator
from clusterlab.comm.errors import CommError, CommTimeout, PeerFailure, ProtocolError
from clusterlab.comm.tcp import frames, handshake
from clusterlab.comm.tcp.mesh import TcpCommunicator, build_mesh, listen
from clusterlab.errors import ConfigError
from clusterlab.net.transport_config import TransportConfig

_WORLD: Communicator | None = None
_LAUNCHER: socket.socket | None = None
_LOCK = threading.Lock()

_MPI_ENV = ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALRANKID", "HYDI_CONTROL_FD")


def under_launcher() -> bool:
    from clusterlab.cluster import local

    return local.ENV_RDV in os.environ and local.ENV_RANK in os.environ


def under_mpi() -> bool:
    return any(k in os.environ for k in _MPI_ENV)


def world(timeout: float = 60.0) -> Communicator:
    """This process's Communicator (created on first call, then the same object).
    ``timeout`` bounds the set-up (rendezvous and mesh connections)."""
    global _WORLD
    with _LOCK:
        if _WORLD is None:
            if under_launcher():
                _WORLD = _from_launcher(timeout)
            elif under_mpi():
                backend = os.environ.get("CLUSTERLAB_BACKEND", "mpi")
                if backend == "tcp":
                    _WORLD = _tcp_over_mpi(timeout)
                elif backend == "mpi":
                    from clusterlab.comm.mpi import MpiCommunicator

                    _WORLD = MpiCommunicator()
                else:
                    raise ConfigError(f"CLUSTERLAB_BACKEND={backend!r}: expected tcp or mpi")
                from clusterlab.cluster import local

                if local.ENV_RDV in os.environ:  # started by launch_mpi: report results to it
                    _connect_results(_WORLD.rank, timeout)
            else:
                _WORLD = TcpCommunicator(0, 1, {}, drainer=False)
            t = os.environ.get("CLUSTERLAB_TIMEOUT")
            if t:
                _WORLD.default_timeout = float(t)
            _install_exit_hooks()
        return _WORLD


def _env(name: str) -> str:
    v = os.environ.get(name)
    if v is None:
        raise ConfigError(f"environment variable {name} is missing (was this started by the launcher?)")
    return v


def _from_launcher(timeout: float) -> Communicator:
    global _LAUNCHER
    from clusterlab.cluster import local

    rank, size = int(_env(local.ENV_RANK)), int(_env(local.ENV_SIZE))
    # keep the secret out of anything this rank starts
    secret = bytes.fromhex(os.environ.pop(local.ENV_SECRET, "") or _env(local.ENV_SECRET))
    config = TransportConfig.from_json(os.environ.get(local.ENV_TRANSPORT) or "{}")
    bind = os.environ.get(local.ENV_BIND, "127.0.0.1")
    host, _, port = _env(local.ENV_RDV).rpartition(":")
    deadline = time.monotonic() + timeout
    listener = listen(bind, 0, config, rank, backlog=max(size, 16))
    try:
        s = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        handshake.connect(s, secret, rank, handshake.LAUNCHER, max(deadline - time.monotonic(), 0.1))
        me = listener.getsockname()
        local.send_control(s, rank, {"op": "hello", "host": me[0], "port": me[1], "pid": os.getpid()})
        h, body = local.recv_frame(s, handshake.LAUNCHER, deadline, 1 << 24)
        msg = json.loads(body)
        if h.kind == frames.CONTROL and msg.get("op") == "abort":
            raise PeerFailure(int(msg.get("rank", -1)), str(msg.get("detail", "the launcher aborted the job")))
        if h.kind != frames.CONTROL or msg.get("op") != "table" or len(msg.get("table", ())) != size:
            raise ProtocolError("the launcher sent a malformed address table")
        table = [(str(a), int(p)) for a, p in msg["table"]]
    except BaseException:
        listener.close()
        raise
    _LAUNCHER = s
    return build_mesh(rank, size, table, listener, secret, config, max(deadline - time.monotonic(), 1.0))


def _connect_results(rank: int, timeout: float) -> None:
    global _LAUNCHER
    from clusterlab.cluster import local

    secret = bytes.fromhex(os.environ.pop(local.ENV_SECRET, "") or _env(local.ENV_SECRET))
    host, _, port = _env(local.ENV_RDV).rpartition(":")
    s = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # last words must not wait for an ACK
    handshake.connect(s, secret, rank, handshake.LAUNCHER, timeout)
    local.send_control(s, rank, {"op": "hello", "host": "", "port": 0, "pid": os.getpid()})
    _LAUNCHER = s


def _tcp_over_mpi(timeout: float) -> Communicator:
    """TCP mesh whose addresses and secret travel through MPI (buffers only, no pickle)."""
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    config = TransportConfig.from_json(os.environ.get("CLUSTERLAB_TRANSPORT") or "{}")
    bind = os.environ.get("CLUSTERLAB_BIND", "127.0.0.1")
    listener = listen(bind, 0, config, rank, backlog=max(size, 16))
    secret = np.frombuffer(os.urandom(32), np.uint8).copy() if rank == 0 else np.empty(32, np.uint8)
    comm.Bcast(secret, root=0)
    ip, port = listener.getsockname()[:2]
    mine = np.zeros(2, np.int64)
    mine[0] = int.from_bytes(socket.inet_aton(ip), "big")
    mine[1] = port
    allv = np.empty(2 * size, np.int64)
    comm.Allgather(mine, allv)
    table = [(socket.inet_ntoa(int(allv[2 * r]).to_bytes(4, "big")), int(allv[2 * r + 1])) for r in range(size)]
    return build_mesh(rank, size, table, listener, secret.tobytes(), config, timeout)


# --- results and errors back to the launcher ------------------------------------------------------

def send_result(body: bytes, tag: int) -> None:
    """Send this rank's return value to the launcher (no-op when there is none)."""
    if _LAUNCHER is not None and _WORLD is not None:
        from clusterlab.cluster import local

        local.send_frame(_LAUNCHER, frames.DATA_BYTES, tag, _WORLD.rank, body, timeout=30.0)


def report_error(detail: str, tb: str = "") -> None:
    """Tell the launcher and every peer that this rank failed with ``detail``."""
    global _ABORTED
    _ABORTED = True
    w = _WORLD
    if w is None:
        return
    if _LAUNCHER is not None:
        from clusterlab.cluster import local

        try:
            local.send_control(_LAUNCHER, w.rank, {"op": "error", "detail": detail, "traceback": tb[-4000:]}, 2.0)
        except (OSError, CommError):
            pass
    abort = getattr(w, "abort", None)
    if abort is not None:
        try:
            abort(detail)
        except (OSError, CommError):
            pass


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
        if not _ABORTED and not issubclass(tp, (SystemExit,)):
            report_error(f"{tp.__name__}: {value}", text)
        if prev is sys.__excepthook__:
            # One write: ranks share the launcher's stderr, and the default hook's many small
            # writes interleave with other ranks' tracebacks into unreadable (and ungreppable) text.
            try:
                sys.stderr.flush()
                os.write(2, text.encode(errors="replace"))
                return
            except OSError:
                pass
        prev(tp, value, tb)

    sys.excepthook = hook
    atexit.register(_at_exit)


def _at_exit() -> None:
    w = _WORLD
    if w is None or _ABORTED:
        return
    try:
        w.close()
    except (CommError, CommTimeout, OSError):
        pass
