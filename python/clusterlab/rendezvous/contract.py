"""The contract between a launcher and its ranks: what one side puts in the environment, and
what the two say on the launcher link. Both sides import this module; it imports neither.

Environment of a rank (set by ``cluster.local.launch`` or ``cluster.mpirun.launch_mpi``):

========================== ==============================================================
``CLUSTERLAB_RANK``         this rank (the local launcher; under mpiexec the MPI rank)
``CLUSTERLAB_SIZE``         number of ranks
``CLUSTERLAB_RENDEZVOUS``   ``host:port`` of the launcher's rendezvous
``CLUSTERLAB_SECRET_FD``    the local launcher: a pipe holding the per-job secret (hex), read
                           and closed by the rank; never the secret itself
``CLUSTERLAB_SECRET``       under mpiexec (which does not pass descriptors on): the per-job
                           secret, hex (read and blanked by the rank)
``CLUSTERLAB_BIND``         address the mesh listener binds to
``CLUSTERLAB_IFACE``        or: the interface whose address it binds to
``CLUSTERLAB_TRANSPORT``    the ``TransportConfig`` as JSON
``CLUSTERLAB_TIMEOUT``      default timeout of blocking calls, seconds
``CLUSTERLAB_SETUP_TIMEOUT`` how long a rank may take to join the mesh, seconds
``CLUSTERLAB_BACKEND``      the mesh that joins the ranks (``MESHES``): ``tcp`` (clusterlab's TCP
                           mesh) or ``mpi`` (MPI's own transport, under mpiexec only); unset:
                           ``tcp`` under clusterlab's launcher, ``mpi`` under a bare mpiexec
``CLUSTERLAB_RUN_DIR``      a run directory (``clusterlab run --run-dir``): each rank that joins
                           ``world()`` times its communication calls and writes its record,
                           ``RUN_DIR/ranks/rank-N.json`` (``comm.rank_record``), at exit
========================== ==============================================================

How a process was started (``started_by``) and which mesh it joins (``mesh``) are read here, so
the launchers (``clusterlab.cluster``) choose and the rank (``clusterlab.comm.world``) follows;
neither side keeps a list of its own.

The launcher link, after the rank authenticated as itself to ``LAUNCHER`` (the handshake of
``rendezvous.handshake``), carries frames of ``rendezvous.frames`` (never pickle)::

    rank -> launcher   CONTROL {"op": "hello", "host", "port", "node", "pid"}   its mesh address
    launcher -> rank   CONTROL {"op": "table", "table": [[host, port], ...]}    everyone's
                    or CONTROL {"op": "abort", "rank", "detail"}                 set-up failed
    rank -> launcher   DATA_BYTES tag RESULT_JSON_TAG or RESULT_BYTES_TAG       ``run()``'s value
    rank -> launcher   CONTROL {"op": "error", "detail", "traceback", "user", "culprit"}

``user`` marks a clusterlab error in the input or settings (``ConfigError``...: one line, no
traceback); ``culprit`` is the rank the error blames (itself, or the peer a ``PeerFailure``
names), so the launcher can tell a cause from its consequences.

>>> body = control_frame(3, hello("10.0.0.4", 4242, "node4"))
>>> reader = FrameReader(3)
>>> [(h.kind == frames.CONTROL, parse_control(b)["op"]) for h, b in reader.feed(body[:10]) + reader.feed(body[10:])]
[(True, 'hello')]
"""

from __future__ import annotations

import json
import os
import socket

from clusterlab.errors import ClusterlabError, ConfigError
from clusterlab.rendezvous import frames
from clusterlab.rendezvous.errors import CommError, CommTimeout, PeerFailure, ProtocolError
from clusterlab.rendezvous.handshake import LAUNCHER, recv_exact

ENV_RANK = "CLUSTERLAB_RANK"
ENV_SIZE = "CLUSTERLAB_SIZE"
ENV_RDV = "CLUSTERLAB_RENDEZVOUS"
ENV_SECRET = "CLUSTERLAB_SECRET"
ENV_SECRET_FD = "CLUSTERLAB_SECRET_FD"
ENV_BIND = "CLUSTERLAB_BIND"
ENV_IFACE = "CLUSTERLAB_IFACE"
ENV_TRANSPORT = "CLUSTERLAB_TRANSPORT"
ENV_TIMEOUT = "CLUSTERLAB_TIMEOUT"
ENV_SETUP_TIMEOUT = "CLUSTERLAB_SETUP_TIMEOUT"
ENV_BACKEND = "CLUSTERLAB_BACKEND"
ENV_LAUNCHER_PID = "CLUSTERLAB_LAUNCHER_PID"
ENV_RUN_DIR = "CLUSTERLAB_RUN_DIR"

# What joins a job's processes: clusterlab's TCP mesh, or MPI's own transport (under mpiexec).
MESHES = ("tcp", "mpi")
# What mpiexec/mpirun (MPICH's hydra, Open MPI, PMIx) put in the environment of the ranks they start.
MPI_ENV = ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALRANKID", "HYDI_CONTROL_FD")
MPI_RANK_ENV = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK")

RESULT_JSON_TAG = 1
RESULT_BYTES_TAG = 2
MAX_RESULT = 1 << 30          # a return value (run())
MAX_CONTROL = 1 << 20         # a control message (frames.py refuses larger CONTROL frames)
MAX_TRACEBACK = 8000          # characters of a traceback kept in an error report

__all__ = ["LAUNCHER", "MESHES", "FrameReader", "control_frame", "error_report", "hello", "is_user_error", "mesh",
           "parse_control", "recv_control", "result_frame", "send_all", "started_by"]


# --- how this process was started ------------------------------------------------------------

def started_by(env=None) -> str | None:
    """``"launcher"`` (clusterlab's local launcher: it names the rank and its rendezvous),
    ``"mpiexec"`` (an MPI launcher's environment; ``launch_mpi`` adds its rendezvous), or None
    (started alone).

    >>> started_by({}), started_by({"PMI_RANK": "0"}), started_by({ENV_RDV: "h:1", ENV_RANK: "0"})
    (None, 'mpiexec', 'launcher')
    """
    env = os.environ if env is None else env
    if ENV_RDV in env and ENV_RANK in env:
        return "launcher"
    if any(k in env for k in MPI_ENV):
        return "mpiexec"
    return None


def mesh(env=None) -> str:
    """The mesh this rank joins, as its launcher said (``CLUSTERLAB_BACKEND``, one of
    ``MESHES``); unset: ``tcp`` under clusterlab's launcher, ``mpi`` under a bare mpiexec.

    >>> mesh({"PMI_RANK": "0"}), mesh({"PMI_RANK": "0", ENV_BACKEND: "tcp"})
    ('mpi', 'tcp')
    >>> mesh({ENV_RDV: "h:1", ENV_RANK: "0", ENV_BACKEND: "mpi"})
    Traceback (most recent call last):
    ...
    clusterlab.errors.ConfigError: CLUSTERLAB_BACKEND=mpi needs MPI's launcher (mpiexec); clusterlab's starts TCP ranks
    """
    env = os.environ if env is None else env
    how = started_by(env)
    value = env.get(ENV_BACKEND) or ("mpi" if how == "mpiexec" else "tcp")
    if value not in MESHES:
        raise ConfigError(f"{ENV_BACKEND}={value!r}: expected {' or '.join(MESHES)}")
    if value == "mpi" and how != "mpiexec":
        raise ConfigError(f"{ENV_BACKEND}=mpi needs MPI's launcher (mpiexec); clusterlab's starts TCP ranks")
    return value


# --- messages ----------------------------------------------------------------------------------

def hello(host: str, port: int, node: str = "", pid: int = 0) -> dict:
    return {"op": "hello", "host": host, "port": port, "node": node, "pid": pid}


def table(addresses: list[tuple[str, int]]) -> dict:
    return {"op": "table", "table": [[h, p] for h, p in addresses]}


def abort(rank: int, detail: str) -> dict:
    return {"op": "abort", "rank": rank, "detail": detail}


def is_user_error(exc: BaseException) -> bool:
    """A clusterlab error in the input or settings (one line, no traceback), as opposed to a
    bug or a communication failure."""
    return isinstance(exc, ClusterlabError) and not isinstance(exc, CommError)


def error_report(rank: int, exc: BaseException, tb: str = "") -> dict:
    """What a failing rank tells the launcher about ``exc``."""
    culprit = exc.rank if isinstance(exc, PeerFailure) and isinstance(exc.rank, int) and exc.rank >= 0 else rank
    return {"op": "error", "detail": f"{type(exc).__name__}: {exc}", "traceback": tb[-MAX_TRACEBACK:],
            "user": is_user_error(exc), "culprit": culprit}


def parse_control(body: bytes) -> dict:
    """A control message, checked for shape (``ProtocolError`` otherwise)."""
    try:
        msg = json.loads(body)
    except ValueError:
        raise ProtocolError("a control message is not JSON") from None
    if not isinstance(msg, dict) or not isinstance(msg.get("op"), str):
        raise ProtocolError("a control message has no op")
    op = msg["op"]
    if op == "hello" and not (isinstance(msg.get("host"), str) and isinstance(msg.get("port"), int)
                              and 0 <= msg["port"] < 65536):
        raise ProtocolError("a hello carries a malformed address")
    if op == "table" and not (isinstance(msg.get("table"), list) and all(
            isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) and isinstance(e[1], int)
            for e in msg["table"])):
        raise ProtocolError("the address table is malformed")
    if op in ("abort", "error") and not isinstance(msg.get("detail", ""), str):
        raise ProtocolError(f"an {op} message has a malformed detail")
    return msg


# --- frames --------------------------------------------------------------------------------------

def _frame(kind: int, tag: int, source: int, body: bytes) -> bytes:
    return frames.encode_header(kind, tag, source, length=len(body)) + body


def control_frame(source: int, msg: dict) -> bytes:
    return _frame(frames.CONTROL, 0, source, json.dumps(msg).encode())


def result_frame(source: int, body: bytes, tag: int) -> bytes:
    return _frame(frames.DATA_BYTES, tag, source, body)


def send_all(sock: socket.socket, data: bytes, timeout: float) -> None:
    """Blocking send bounded by ``timeout`` (the rank side; the launcher never blocks)."""
    sock.settimeout(timeout)
    try:
        sock.sendall(data)
    except TimeoutError:
        raise CommTimeout("sending to the launcher timed out") from None


def recv_control(sock: socket.socket, expect_source: int, deadline: float) -> dict:
    """Blocking read of one control frame before ``deadline`` (the rank waiting for its table)."""
    who = "the launcher" if expect_source == LAUNCHER else f"rank {expect_source}"
    h = frames.decode_fixed(recv_exact(sock, frames.HEADER.size, deadline, who), expect_source, MAX_CONTROL)
    if h.kind != frames.CONTROL:
        raise ProtocolError(f"{who} sent an unexpected frame kind {h.kind} on the launcher link")
    return parse_control(recv_exact(sock, h.length, deadline, who) if h.length else b"")


class FrameReader:
    """Frames of one launcher link, assembled from whatever ``recv`` returned (the launcher's
    event loop never waits for the rest of a frame). Checks every header before buffering."""

    def __init__(self, expect_source: int, max_frame: int = MAX_RESULT):
        self.expect_source, self.max_frame = expect_source, max_frame
        self._buf = bytearray()
        self._head: frames.Header | None = None

    def feed(self, data: bytes) -> list[tuple[frames.Header, bytes]]:
        self._buf += data
        out = []
        while True:
            if self._head is None:
                if len(self._buf) < frames.HEADER.size:
                    return out
                h = frames.decode_fixed(bytes(self._buf[:frames.HEADER.size]), self.expect_source, self.max_frame)
                if h.kind not in (frames.CONTROL, frames.DATA_BYTES):
                    raise ProtocolError(f"rank {self.expect_source} sent an unexpected frame kind {h.kind} "
                                        "on the launcher link")
                del self._buf[:frames.HEADER.size]
                self._head = h
            if len(self._buf) < self._head.length:
                return out
            body = bytes(self._buf[:self._head.length])
            del self._buf[:self._head.length]
            out.append((self._head, body))
            self._head = None

    @property
    def pending(self) -> bool:
        """True while part of a frame is buffered."""
        return bool(self._buf) or self._head is not None
