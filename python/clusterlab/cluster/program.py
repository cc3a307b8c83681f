"""A program that knows nothing of clusterlab as one rank of a job: ``python -m
clusterlab.cluster.program ARGV...`` checks in at the launcher's rendezvous as this MPI rank
(hello, with its host), runs ``ARGV`` as its child with the rank's environment (the job's secret
and rendezvous removed, so the program cannot join in its place), forwards SIGINT/SIGTERM/SIGHUP
to it, and tells the launcher how it ended: a goodbye, or an error naming this rank and the
status ("was killed by SIGKILL"). It exits with the child's status.

That is how ``launch_mpi(..., program=True)`` names the rank of an MPI program (mpi4py, an MPI C
binary) that died: mpiexec itself only says that some process did.

``mpi_program(argv)`` tells whether ``argv`` is such a program (a script importing mpi4py, an
executable linked with an MPI library).
"""

from __future__ import annotations

import ast
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from clusterlab.cluster.supervisor import describe_status
from clusterlab.errors import ConfigError
from clusterlab.rendezvous import contract, handshake

_MPI_RANK_ENV = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK")
_MPI_LIBS = (b"libmpi.so", b"libmpich.so", b"libmpi_mpifh.so")


def mpi_program(argv: list[str]) -> str | None:
    """What makes ``argv`` an MPI program, or None: a Python script that imports mpi4py, or an
    executable linked with an MPI library. (A program that uses ``clusterlab.comm.world()`` is
    not one: ``world()`` takes whichever transport its launcher gives it.)"""
    exe = argv[0]
    if os.path.basename(exe).startswith("python") and len(argv) > 1 and argv[1].endswith(".py"):
        try:
            tree = ast.parse(Path(argv[1]).read_bytes())
        except (OSError, SyntaxError, ValueError):
            return None
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n == "mpi4py" or n.startswith("mpi4py.") for n in names):
                return f"{argv[1]} imports mpi4py"
        return None
    path = exe if os.sep in exe else shutil.which(exe)
    try:
        with open(path or exe, "rb") as f:
            if f.read(4) != b"\x7fELF":
                return None
            f.seek(0)
            image = f.read(64 << 20)
    except OSError:
        return None
    for lib in _MPI_LIBS:
        if lib in image:
            return f"{exe} is linked with {lib.decode()}"
    return None


class MpiProgramRefused(ConfigError):
    """An MPI program given to a cluster that would start it as N one-rank MPI worlds (its own
    launcher, not mpiexec). ``why`` says what makes it one."""

    def __init__(self, why: str, n: int):
        self.why, self.n = why, n
        super().__init__(f"{why}: started by clusterlab's launcher each of the {n} ranks would be its own one-rank "
                         "MPI world; run it under mpiexec (Mpirun(), Testbed(NAME, mesh='mpi'))")


def refuse_mpi_program(argv: list[str], n: int) -> None:
    """``MpiProgramRefused`` when ``argv`` is an MPI program (``mpi_program``)."""
    why = mpi_program(argv)
    if why:
        raise MpiProgramRefused(why, n)


def _rank() -> int:
    for k in _MPI_RANK_ENV:
        if os.environ.get(k, "").isdigit():
            return int(os.environ[k])
    raise ConfigError("clusterlab.cluster.program runs under mpiexec (no PMI_RANK in the environment)")


def _check_in(rank: int, timeout: float) -> socket.socket:
    secret_hex = os.environ.pop(contract.ENV_SECRET, "")
    host, _, port = os.environ.pop(contract.ENV_RDV).rpartition(":")
    try:
        secret = bytes.fromhex(secret_hex)
    except ValueError:
        raise ConfigError(f"{contract.ENV_SECRET} is not hex") from None
    deadline = time.monotonic() + timeout
    s = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    handshake.connect(s, secret, rank, contract.LAUNCHER, max(deadline - time.monotonic(), 0.1))
    node = os.environ.get("PMI_HOSTNAME") or socket.gethostname()
    contract.send_all(s, contract.control_frame(rank, contract.hello("", 0, node, os.getpid())),
                      max(deadline - time.monotonic(), 0.1))
    return s


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: python -m clusterlab.cluster.program PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    rank = _rank()
    link = _check_in(rank, float(os.environ.get(contract.ENV_SETUP_TIMEOUT) or 60.0))
    for k in list(os.environ):
        if k.startswith("CLUSTERLAB_") and k != contract.ENV_TRANSPORT:
            del os.environ[k]  # the program is not a clusterlab rank: world() must not join as one
    # close_fds=False: the PMI connection hydra gave this process (PMI_FD) is the program's
    child = subprocess.Popen(argv, close_fds=False, preexec_fn=_die_with_parent)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: child.send_signal(s))
    while True:
        try:
            rc = child.wait()
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for clarity
            continue
    msg = {"op": "bye"} if rc == 0 else {"op": "error", "detail": f"{argv[0]} {describe_status(rc)}", "traceback": "",
                                         "user": False, "culprit": rank}
    try:
        contract.send_all(link, contract.control_frame(rank, msg), 2.0)
    except OSError:
        pass
    link.close()
    return rc if rc >= 0 else 128 - rc


def _die_with_parent() -> None:
    """The child goes with this wrapper (hydra kills the wrapper, not its children)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


if __name__ == "__main__":
    sys.exit(main())
