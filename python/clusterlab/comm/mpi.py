"""``MpiCommunicator``: the Communicator over MPI (mpi4py), for clusters that already run MPI.

Same interface and results as the TCP mesh. Messages use mpi4py's buffer (upper-case) API
only, so nothing is pickled: each message is a header message carrying the same header as a
TCP frame (kind, tag, source, length, dtype, shape), with the payload inline when it is small
(<= ``INLINE`` bytes, one MPI message) or as a second message received straight into the
array that is returned (zero-copy on both sides).

Matching is done here, not by MPI tags: every message travels with one MPI tag, MPI keeps
them in order per source, and the receiver files them by (source, user tag), exactly as the
TCP backend does. This keeps the full tag range (MPICH's ``MPI_TAG_UB`` is only 2^29-1).

Sends never deadlock: a send is posted with ``Isend`` and, while it waits to complete, the
rank keeps receiving whatever arrives. Every wait is bounded by the timeout. A rank that dies
makes the MPI process manager (MPICH's hydra) end the whole job; ``abort()`` calls
``MPI_Abort``.

Run under ``mpiexec -n 4 python prog.py`` and use ``clusterlab.comm.world()``.
"""

from __future__ import annotations

import sys
import time
from collections import deque

import numpy as np

from clusterlab.comm.communicator import Communicator
from clusterlab.comm.errors import CommError, CommTimeout, PeerFailure
from clusterlab.rendezvous import frames
from clusterlab.rendezvous.frames import DATA_ARRAY, DATA_BYTES, HEADER

INLINE = 64 * 1024
_SEPARATE = 1   # header flag: the payload follows as its own message on the data communicator
_TAG = 0
_HSIZE = HEADER.size


def _host_congestion() -> str | None:
    """The congestion control MPI's TCP sockets get: MPICH sets none of its own, so the host's
    (network namespace's) default; None where the kernel does not say."""
    try:
        with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
            return f.read().strip() or None
    except OSError:
        return None


class MpiCommunicator(Communicator):
    """A rank of an MPI job (``MPI.COMM_WORLD`` unless another communicator is given)."""

    def __init__(self, comm=None, max_frame: int = frames.DEFAULT_MAX_FRAME):
        from mpi4py import MPI

        self._MPI = MPI
        base = comm if comm is not None else MPI.COMM_WORLD
        self._hdr = base.Dup()
        self._data = base.Dup()
        self.rank, self.size = base.Get_rank(), base.Get_size()
        self.max_frame = max_frame
        self._queues: dict[tuple[int, int], deque] = {}
        self._seq = 0
        self._closed = False
        self._status = MPI.Status()
        self._sent = [0] * self.size
        self._recvd = [0] * self.size
        self._nsent = [0] * self.size
        self._nrecvd = [0] * self.size

    # --- point to point ----------------------------------------------------------------------------
    def _send(self, dest: int, data, tag: int) -> None:
        self._check_open()
        kind, view, meta, ndim = frames.payload_view(data)
        n = view.nbytes
        MPI = self._MPI
        deadline = time.monotonic() + self.default_timeout
        if n <= INLINE:
            head = frames.pack_header(kind, tag, self.rank, n, meta, ndim)
            msg = bytearray(head)
            msg += view
            reqs = [self._hdr.Isend([msg, MPI.BYTE], dest, _TAG)]
        else:
            head = frames.pack_header(kind, tag, self.rank, n, meta, ndim, flags=_SEPARATE)
            reqs = [self._hdr.Isend([head, MPI.BYTE], dest, _TAG), self._data.Isend([view, MPI.BYTE], dest, _TAG)]
        self._wait(reqs, deadline, f"rank {dest} to receive {n} bytes")
        self._sent[dest] += n
        self._nsent[dest] += 1

    def _recv(self, source: int, tag: int, timeout: float):
        self._check_open()
        key = (source, tag)
        deadline = None
        spins = 0
        while True:
            q = self._queues.get(key)
            if q:
                return self._pop(key, q)
            if not self._poll_one():
                if deadline is None:
                    deadline = time.monotonic() + timeout
                spins = self._idle(spins, deadline, f"a message from rank {source} with tag {tag}")

    def _recv_any(self, tag: int, timeout: float):
        self._check_open()
        if self.size == 1:
            raise CommError(f"rank {self.rank} has no peers to receive from")
        deadline = None
        spins = 0
        while True:
            best = None
            for k, q in self._queues.items():
                if k[1] == tag and q and (best is None or q[0][0] < best[1][0][0]):
                    best = (k, q)
            if best is not None:
                return best[0][0], self._pop(*best)
            if not self._poll_one():
                if deadline is None:
                    deadline = time.monotonic() + timeout
                spins = self._idle(spins, deadline, f"a message with tag {tag} from any rank")

    def close(self) -> None:
        """Release the duplicated communicators. Idempotent. (MPI itself is finalised by
        mpi4py at exit.)"""
        if self._closed:
            return
        self._closed = True
        for c in (self._hdr, self._data):
            try:
                c.Free()
            except Exception:  # noqa: BLE001 - MPI may already be finalised at interpreter exit
                pass

    def abort(self, detail: str = "", code: int = 1) -> None:
        """End the whole MPI job (``MPI_Abort``): MPI has no way to let the others recover."""

        print(f"clusterlab: rank {self.rank} aborting the MPI job: {detail}", file=sys.stderr, flush=True)
        self._MPI.COMM_WORLD.Abort(code)

    def stats(self) -> dict:
        peers = {p: {"bytes_sent": self._sent[p], "bytes_recv": self._recvd[p], "msgs_sent": self._nsent[p],
                     "msgs_recv": self._nrecvd[p]} for p in range(self.size) if p != self.rank}
        return {"backend": "mpi", "rank": self.rank, "size": self.size, "library": self._MPI.Get_library_version().split("\n")[0],
                "bytes_sent": sum(self._sent), "bytes_recv": sum(self._recvd), "msgs_sent": sum(self._nsent),
                "msgs_recv": sum(self._nrecvd), "peers": peers,
                "transport": {"in_force": {"congestion": _host_congestion()}}}

    # --- engine ----------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise CommError(f"rank {self.rank}: communicator is closed")

    def _pop(self, key, q):
        item = q.popleft()
        if not q:
            del self._queues[key]
        return item[1]

    def _idle(self, spins: int, deadline: float, what: str) -> int:
        """Back off while nothing arrives: spin briefly (latency), then sleep up to 1 ms (so a
        waiting rank does not steal the CPU of the rank it waits for)."""
        if time.monotonic() > deadline:
            raise CommTimeout(f"rank {self.rank}: timed out waiting for {what}")
        if spins > 200:
            time.sleep(min(1e-3, 1e-6 * (spins - 200)))
        return spins + 1

    def _wait(self, reqs, deadline: float, what: str) -> None:
        MPI = self._MPI
        spins = 0
        while not MPI.Request.Testall(reqs):
            if not self._poll_one():
                try:
                    spins = self._idle(spins, deadline, what)
                except CommTimeout:
                    for r in reqs:
                        try:
                            r.Cancel()
                        except Exception:  # noqa: BLE001
                            pass
                    raise

    def _poll_one(self) -> bool:
        """Receive one incoming message (any source) into the queues, if one is there."""
        MPI = self._MPI
        st = self._status
        msg = self._hdr.Improbe(MPI.ANY_SOURCE, _TAG, st)
        if msg is None:
            return False
        src = st.Get_source()
        count = st.Get_count(MPI.BYTE)
        if count < _HSIZE or count > self.max_frame + 4096:
            buf = bytearray(max(count, 0))
            msg.Recv([buf, MPI.BYTE])
            raise PeerFailure(src, f"sent a malformed {count}-byte message")
        buf = bytearray(count)
        msg.Recv([buf, MPI.BYTE])
        h = frames.decode_fixed(memoryview(buf)[:_HSIZE], src, self.max_frame, allowed_flags=_SEPARATE)
        separate = buf[7] & _SEPARATE
        mlen = h.dtlen + 8 * h.ndim
        if h.kind not in (DATA_ARRAY, DATA_BYTES):
            raise PeerFailure(src, f"sent an unexpected frame kind {h.kind}")
        dtype = shape = None
        if h.kind == DATA_ARRAY:
            dtype, shape = frames.decode_array_meta(memoryview(buf)[_HSIZE:_HSIZE + mlen], h)
        if separate:
            if count != _HSIZE + mlen:
                raise PeerFailure(src, "sent a header of the wrong length")
            if h.kind == DATA_ARRAY:
                obj = np.empty(shape, dtype)
                dest = memoryview(obj.reshape(-1).view(np.uint8)) if obj.size else memoryview(bytearray(0))
            else:
                obj = bytearray(h.length)
                dest = memoryview(obj)
            req = self._data.Irecv([dest, MPI.BYTE], src, _TAG)
            deadline = time.monotonic() + self.default_timeout
            spins = 0
            while not req.Test():  # the sender posted it right after the header
                spins = self._idle(spins, deadline, f"the payload of a message from rank {src}")
            if isinstance(obj, bytearray):
                obj = bytes(obj)
        else:
            if count != _HSIZE + mlen + h.length:
                raise PeerFailure(src, "sent a message whose length does not match its header")
            body = memoryview(buf)[_HSIZE + mlen:]
            if h.kind == DATA_ARRAY:
                obj = np.frombuffer(buf, dtype, h.length // dtype.itemsize, _HSIZE + mlen).reshape(shape) \
                    if h.length else np.empty(shape, dtype)
            else:
                obj = bytes(body)
        self._recvd[src] += h.length
        self._nrecvd[src] += 1
        self._seq += 1
        key = (src, h.tag)
        q = self._queues.get(key)
        if q is None:
            q = self._queues[key] = deque()
        q.append((self._seq, obj))
        return True
