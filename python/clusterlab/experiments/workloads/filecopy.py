"""A file moved front-end -> node and back, each end reading from and writing to a RAM drive
(tmpfs): seed 003's check of its tuned buffers (a 512 MB file, Fig. 6), as a study workload.

Rank 0 (the front-end) writes a file of ``size`` bytes on tmpfs once; each repetition then
times both directions: ``forward`` (rank 0 reads its file and sends it; rank 1 receives it and
writes it to its own tmpfs file; time until rank 1 has written it) and ``backward`` (the same
from rank 1 to rank 0). Each row: ``direction``, ``seconds`` (undilated), ``mbps`` (file bytes
over that time). After each direction the written file's CRC-32 is compared with the source's:
a transfer that arrives wrong fails the point. Files are removed afterwards, also on failure.

>>> file_transfer(size="512MB").params
{'size': '512MB', 'directory': '/dev/shm'}
"""

from __future__ import annotations

import os
import time
import zlib

import numpy as np

from clusterlab.errors import ConfigError
from clusterlab.experiments.spec import Workload
from clusterlab.units import parse_size

TAG = 11
_CHUNK = 1 << 20


def file_transfer(size: str = "512MB", directory: str = "/dev/shm") -> Workload:
    if parse_size(size, "size") < 1:
        raise ConfigError(f"size must be at least 1 byte, got {size!r}")
    return Workload("file_transfer", {"size": size, "directory": directory},
                    check=lambda p: file_transfer(**p) and None)


def _crc(path: str) -> int:
    crc = 0
    with open(path, "rb") as f:
        while block := f.read(16 * _CHUNK):
            crc = zlib.crc32(block, crc)
    return crc


def _read(path: str, nbytes: int) -> np.ndarray:
    buf = np.empty(nbytes, dtype=np.uint8)
    with open(path, "rb", buffering=0) as f:
        got = f.readinto(memoryview(buf))
    if got != nbytes:
        raise RuntimeError(f"{path}: read {got} of {nbytes} bytes")
    return buf


def _write(path: str, data: np.ndarray) -> None:
    with open(path, "wb", buffering=0) as f:
        f.write(memoryview(np.ascontiguousarray(data)))


def transfer(comm, nbytes: int, directory: str, reps: int) -> list[dict] | None:
    """Rank function (ranks 0 and 1; others wait): see the module docstring."""
    if comm.rank > 1:  # not part of the transfer: meet the others at their barriers
        for _ in range(2 * reps + 1):
            comm.barrier()
        return None
    if not os.path.isdir(directory):
        raise ConfigError(f"{directory} is not a directory (the RAM drive the file lives on)")
    mine = os.path.join(directory, f"clusterlab-filecopy-{os.getpid()}-{comm.rank}.dat")
    got = os.path.join(directory, f"clusterlab-filecopy-{os.getpid()}-{comm.rank}-in.dat")
    rows = []
    try:
        if comm.rank == 0:  # the front-end's file: a random MiB repeated (cheap, not compressible per MiB)
            block = np.random.default_rng(3).integers(0, 256, _CHUNK, dtype=np.uint8)
            with open(mine, "wb") as f:
                for off in range(0, nbytes, _CHUNK):
                    f.write(memoryview(block[:min(_CHUNK, nbytes - off)]))
            want = _crc(mine)
        for rep in range(reps):
            for direction, src in (("forward", 0), ("backward", 1)):
                comm.barrier()
                if comm.rank == src:
                    path = mine if src == 0 else got
                    t0 = time.perf_counter()
                    comm.send(1 - src, _read(path, nbytes), TAG)
                    comm.recv(1 - src, TAG + 1)  # written at the other end
                    seconds = time.perf_counter() - t0
                else:
                    data = comm.recv(src, TAG)
                    _write(got, data)
                    del data
                    comm.send(src, b"w", TAG + 1)
                    seconds = None
                if comm.rank == 0:
                    if direction == "backward" and _crc(got) != want:
                        raise RuntimeError("the file came back different (CRC-32 mismatch)")
                    if direction == "forward":
                        other = comm.recv(1, TAG + 2)
                        if int.from_bytes(other, "little") != want:
                            raise RuntimeError("the file arrived different at rank 1 (CRC-32 mismatch)")
                        rows.append({"rep": rep, "direction": direction, "seconds": seconds,
                                     "mbps": nbytes * 8 / seconds / 1e6})
                    else:
                        t = comm.recv(1, TAG + 3)  # the sender's time
                        secs = float(np.frombuffer(t, dtype=np.float64)[0])
                        rows.append({"rep": rep, "direction": direction, "seconds": secs,
                                     "mbps": nbytes * 8 / secs / 1e6})
                elif direction == "forward":
                    comm.send(0, _crc(got).to_bytes(8, "little"), TAG + 2)
                else:
                    comm.send(0, np.array([seconds], dtype=np.float64), TAG + 3)
    finally:
        for p in (mine, got):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
    comm.barrier()
    return rows if comm.rank == 0 else None


def execute(session, params: dict, reps: int, warmup: int):
    nbytes = parse_size(params["size"])
    if session.ranks < 2:
        raise ConfigError(f"the transfer needs at least 2 ranks, got {session.ranks}")
    k = session.dilation
    rows = session.run(transfer, nbytes, params["directory"], warmup + reps, timeout=600.0 + nbytes / 1e6)[0]
    for r in rows:
        if r["rep"] < warmup:
            continue
        yield {**r, "rep": r["rep"] - warmup, "seconds": r["seconds"] / k, "mbps": r["mbps"] * k}
