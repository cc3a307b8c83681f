#!/usr/bin/env python3
"""User-space instructions per 1-byte round trip of the TCP mesh, load-independent (callgrind).

Not a test and not a timing: two processes (fork) ping-pong a 1-byte uint8 array over one
loopback connection through ``TcpCommunicator`` (built directly, no launcher: valgrind follows
the fork but not the launcher's ``pidfd_open``). Run it under callgrind for two numbers of
round trips; the difference of the per-function counts divided by the difference of round trips
is the cost of one round trip (one send + one recv per rank), start-up excluded:

    W=$PWD; for n in 1000 11000; do mkdir -p /tmp/cg$n; (cd /tmp/cg$n && nice -n 19 valgrind \\
        --tool=callgrind --callgrind-out-file=cg.%p $W/.venv/bin/python $W/bench/comm_latency_callgrind.py $n); done
    # then callgrind_annotate --inclusive=yes on each rank's file; divide differences by 10,000

A difference of 10,000 round trips keeps the run-to-run noise of start-up (imports, OpenBLAS's
idle thread, which valgrind's serialised threads make spin) to a few hundred instructions per round
trip in the main thread; 2,000 left up to ~2,000. Compare the main thread (``main`` inclusive), not the
process total. The two ranks cost the same; pid order is rank order only until pids wrap.

Without valgrind it prints the half round trip and rank 0's CPU per round trip (noisy).
Usage: ``python bench/comm_latency_callgrind.py ROUND_TRIPS [CPU (-1: unpinned)] [array|bytes]``
"""

from __future__ import annotations

import os
import socket
import sys
import time

import numpy as np

from clusterlab.comm.tcp.communicator import TcpCommunicator


def main(n: int, cpu: int = -1, kind: str = "array") -> None:
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    a = socket.create_connection(ls.getsockname())
    b, _ = ls.accept()
    ls.close()
    pid = os.fork()
    rank = 0 if pid else 1
    sock, other = (a, b) if rank == 0 else (b, a)
    other.close()
    if cpu >= 0:
        os.sched_setaffinity(0, {cpu})
    comm = TcpCommunicator(rank, 2, {1 - rank: sock}, default_timeout=60.0)
    buf = np.zeros(1, np.uint8) if kind == "array" else b"x"
    peer = 1 - rank

    def loop(k: int) -> None:
        if rank == 0:
            for _ in range(k):
                comm.send(peer, buf, 7)
                comm.recv(peer, 7)
        else:
            for _ in range(k):
                comm.send(peer, comm.recv(peer, 7), 7)

    loop(200)  # warm-up
    t0, c0 = time.perf_counter(), time.process_time()
    loop(n)
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    comm.close()
    if rank == 0:
        os.waitpid(pid, 0)
        print(f"{kind}: {n} round trips, half round trip {dt / n / 2 * 1e6:.2f} us, "
              f"rank 0 CPU per round trip {dc / n * 1e6:.2f} us")
    else:
        os._exit(0)


if __name__ == "__main__":
    main(int(sys.argv[1]), *(int(sys.argv[2]),) if len(sys.argv) > 2 else (), *sys.argv[3:4])
