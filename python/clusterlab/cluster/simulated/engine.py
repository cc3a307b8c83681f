"""The simulation engine process: SimGrid's flow-level network model, run under the Python that
has Debian's ``python3-simgrid`` bound to it (``/usr/bin/python3``, not the project's venv).

This file is run as a program, never imported by clusterlab (it needs ``simgrid``, which the
venv has not): ``python3 engine.py JOB.json OUT.json``. It uses the standard library and
``simgrid`` only, reads one JSON job (the platform as SimGrid XML, the engine's network
factors, what the ranks do) and writes one JSON result; nothing is pickled either way.

Jobs (``job["kind"]``):

* ``pingpong``: host 0 and host 1 exchange ``size`` bytes back and forth, once per size (the
  simulation is deterministic, one trial is the best of any number); result: ``rows`` of
  ``bytes`` and ``seconds`` (half a round trip).
* ``alltoall_broadcast``: ``rounds`` rounds of seed 000's broadcast on hosts ``0..n-1``: a
  dissemination barrier, every rank sends ``size`` bytes to every other rank (all its sends
  started at once, as the mesh's sends return once the kernel holds the bytes), receives from
  every other rank, a second barrier; result: per round, each rank's time from leaving the
  first barrier to leaving the second (``seconds``: one list per round).
* ``replay``: a recorded parallel job's operations, one list per rank (``replay.py`` writes
  them: compute ``["c", s]`` slept, eager sends ``["s", mailbox, bytes]``, blocking receives
  ``["r", mailbox]``, pass marks ``["p", k]``/``["e"]``, the job's clock ``["t0"]``, the loss
  model's RTO wait ``["w", s, timeouts]`` slept); result: ``ranks``, per rank ``job_s`` (from
  ``t0`` to its last operation) and ``passes`` (per pass ``t_total``, ``t_wait_compute``,
  ``t_comm``, ``t_rto_wait``, ``timeouts``, ``bytes_sent``, ``messages_sent``).

Every message carries ``header`` bytes more than its payload (the mesh's frame header), and
costs its sender ``overhead`` seconds plus ``overhead_per_byte`` per byte before it leaves and
its receiver as much once it arrived (the rank's own time per message: the mesh's Python and
system calls, copies), one message after the other on each rank (with more than ``batches`` peers, 16 unless given, a rank pays it per group
of messages: its sends leave in ``batches`` groups, each after the group's overhead).
"""

import json
import os
import resource
import sys
import time

PINNED = "3.32"  # the SimGrid this engine is written for (Debian bookworm's python3-simgrid)


def _barrier(mbox, me, n, payload, header, cost):
    d = 1
    while d < n:
        cost(1, header)
        c = mbox(f"b{(me + d) % n}.{d}").put_async(payload, header)
        mbox(f"b{me}.{d}").get()
        cost(1, header)
        c.wait()
        d <<= 1


def main(argv):
    if len(argv) != 3:
        print("usage: engine.py JOB.json OUT.json", file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        job = json.load(f)
    wall0 = time.perf_counter()
    import simgrid
    from simgrid import Actor, Comm, Engine, Host, Mailbox, this_actor

    full = str(getattr(simgrid, "simgrid_version", "?"))
    version = ".".join(full.split(".")[:2])
    if version != PINNED:
        print(f"engine: SimGrid {version} found, this engine is written for {PINNED}", file=sys.stderr)
        return 3
    args = ["clusterlab-sim", "--log=root.thresh:critical", "--log=xbt_cfg.thresh:critical"]
    args += [f"--cfg={k}:{v}" for k, v in job.get("config", {}).items()]
    e = Engine(args)
    e.load_platform(job["platform_file"])
    hosts = [Host.by_name(h) for h in job["hosts"]]
    w = job["work"]
    header = int(w.get("header", 0))
    o = float(w.get("overhead", 0.0))
    g = float(w.get("overhead_per_byte", 0.0))
    out = {}

    def cost(k=1, nbytes=0):
        t = k * o + nbytes * g
        if t > 0:
            this_actor.sleep_for(t)

    def mbox(name):
        return Mailbox.by_name(name)

    if w["kind"] == "pingpong":
        rows = []

        def ping():
            for size in w["sizes"]:
                t0 = Engine.clock
                cost()
                mbox("pp1").put(size, size + header)
                mbox("pp0").get()
                cost()
                rows.append({"bytes": size, "seconds": (Engine.clock - t0) / 2})
            mbox("pp1").put(-1, header)

        def pong():
            while True:
                size = mbox("pp1").get()
                if size < 0:
                    return
                cost()
                cost()
                mbox("pp0").put(size, size + header)

        Actor.create("rank0", hosts[0], ping)
        Actor.create("rank1", hosts[1], pong)
        e.run()
        out["rows"] = rows
    elif w["kind"] == "alltoall_broadcast":
        n, size, rounds, order = len(hosts), int(w["size"]), int(w["rounds"]), w["order"]
        # a rank's per-message overhead is paid per group of messages: one at a time up to
        # ``batches`` peers' worth, then in ``batches`` equal groups (fewer engine events at scale)
        group = max(1, -(-(n - 1) // int(w.get("batches", 16))))
        times = [[0.0] * n for _ in range(rounds)]

        def rank(me):
            if order == "same":
                dests = [j for j in range(n) if j != me]
            else:
                dests = [(me + k) % n for k in range(1, n)]
            peers = [j for j in range(n) if j != me]
            inbox = {}
            for j in peers:  # one mailbox per sender (a shared one is searched message by message)
                inbox[j] = mbox(f"d{me}.{j}")
                inbox[j].set_receiver(Actor.self())  # eager: a send flows at once, as into a kernel's buffers
            for r in range(rounds):
                _barrier(mbox, me, n, me, header, cost)
                t0 = Engine.clock
                sends = []
                for i in range(0, n - 1, group):
                    batch = dests[i:i + group]
                    cost(len(batch), len(batch) * (size + header))
                    sends += [mbox(f"d{d}.{me}").put_async(me, size + header) for d in batch]
                for i in range(0, n - 1, group):
                    batch = peers[i:i + group]
                    for j in batch:
                        inbox[j].get()
                    cost(len(batch), len(batch) * (size + header))
                Comm.wait_all(sends)
                _barrier(mbox, me, n, me, header, cost)
                times[r][me] = Engine.clock - t0

        for i, h in enumerate(hosts):
            Actor.create(f"rank{i}", h, rank, i)
        e.run()
        out["seconds"] = times
    elif w["kind"] == "replay":
        result = [None] * len(hosts)

        def replay(me, spec):
            for name in spec["mailboxes"]:  # eager: a message flows once sent, as into a kernel's buffers
                mbox(name).set_receiver(Actor.self())
            passes, row, t_job = [], None, Engine.clock
            for op in spec["ops"]:
                k, t = op[0], Engine.clock
                if k == "c":
                    this_actor.sleep_for(op[1])
                    if row is not None:
                        row["t_wait_compute"] += op[1]
                elif k == "w":
                    this_actor.sleep_for(op[1])
                    if row is not None:
                        row["t_rto_wait"] += op[1]
                        row["timeouts"] += op[2]
                elif k == "s":
                    # the sender goes on at once (the mesh's send returns once the kernel holds the
                    # bytes); detached: nobody waits for it but its receiver
                    mbox(op[1]).put_init(me, op[2] + header).detach()
                    if row is not None:
                        row["bytes_sent"] += op[2] + header
                        row["messages_sent"] += 1
                elif k == "r":
                    mbox(op[1]).get()
                    if row is not None:
                        row["t_comm"] += Engine.clock - t
                elif k == "p":
                    row = {"pass": op[1], "t_wait_compute": 0.0, "t_comm": 0.0, "t_rto_wait": 0.0, "timeouts": 0.0,
                           "bytes_sent": 0, "messages_sent": 0, "_t0": t}
                elif k == "e":
                    if row is not None:
                        row["t_total"] = t - row.pop("_t0")
                        passes.append(row)
                    row = None
                elif k == "t0":
                    t_job = t
            result[me] = {"job_s": Engine.clock - t_job, "passes": passes}

        for i, h in enumerate(hosts):
            Actor.create(f"rank{i}", h, replay, i, w["ranks"][i])
        e.run()
        if any(r is None for r in result):
            print("engine: a replayed rank did not finish (a receive no send answers)", file=sys.stderr)
            return 4
        out["ranks"] = result
    else:
        print(f"engine: unknown work kind {w['kind']!r}", file=sys.stderr)
        return 2
    out["simulated_seconds"] = Engine.clock
    ru = resource.getrusage(resource.RUSAGE_SELF)
    # CPU seconds too: on a loaded machine the wall time says more about the load than the work
    out["engine"] = {"simgrid": full, "python": sys.version.split()[0], "wall_seconds": round(time.perf_counter() - wall0, 3),
                     "cpu_seconds": round(ru.ru_utime + ru.ru_stime, 3), "max_rss_mb": round(ru.ru_maxrss / 1024, 1)}
    with open(argv[2], "w") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    rc = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # the answer is written: leave without tearing SimGrid's actors and contexts down (its Python
    # binding can crash there, after the work is done)
    os._exit(rc)
