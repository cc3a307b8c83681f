#!/usr/bin/env python3
"""Soak: does any process of a long all-to-all job grow? Not a test: a measurement.

Runs seed 000's all-to-all broadcast (``clusterlab.bench.alltoall_broadcast``: barrier, every
rank sends ``--size`` bytes to every other, barrier) for ``--rounds`` rounds as one job of
``--ranks`` ranks: on loopback (``Local()``) by default, or with ``--testbed`` one rank per host
of a namespace star testbed (root; ``--rate``, 64 KB port buffers, each rank reading its host's
counters and rank 0 the switch's drops, as ``bench/testbed.py`` runs it). While it runs, a
thread of this process (the launcher) follows the rounds through the workload's progress file
(rank 0 appends a line per finished round) and every ``--every`` rounds reads the resident
memory of the launcher and of every rank (``/proc/PID/status``: ``VmRSS`` and its anonymous
part ``RssAnon``) into arrays allocated before the job, so the sampler itself does not grow.

Reports, per process, the growth in KB per 100 rounds after ``--warmup`` rounds: the
least-squares slope of the samples (not last minus first, which one noisy sample can swing), and
a verdict: ``flat``, under ``--limit-kb`` (50 KB per 100 rounds: issue 25's bound); ``steps``,
over it only because of at most three rises between two samples (without them, under):
high-water marks, each reached once and kept, such as more of a round's blocks waiting in a rank
at the same time than ever before (before the mesh's receive pool, received blocks came from
glibc's heap, which kept the most a rank ever held: a round in which all 15 blocks of 50 KB
arrived before rank 0 asked for them raised it by 732 KB, once; now the pool is filled to its
bound in the first round and gives back what is above it: see ``docs/notes/soak.md``);
``grows``, over it even without them. Writes ``bench/results/soak.json`` atomically, a section per cluster
(``loopback``, ``testbed``; a cluster not run keeps the record's), each with the settings (the
ranks' ``CLUSTERLAB_MALLOC_TUNE`` among them), the samples and the bench harness's provenance of
the run that measured it (``clusterlab.bench.harness``: commit, date, machine, load before/after,
spare CPU, autogroup); the record's own ``provenance`` is the last run's. Exit status 1 when a
process grows.

Usage: ``.venv/bin/python bench/soak.py [--ranks 16] [--rounds 300] [--every 10] [--testbed [--name bsoak]]``
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import numpy as np

from clusterlab._atomic import atomic_open
from clusterlab.bench import harness
from clusterlab.bench.alltoall_broadcast import alltoall_broadcast
from clusterlab.errors import ConfigError
from clusterlab.net.netns import TestbedError
from clusterlab.rendezvous import contract

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "soak.json")


def memory_kb(pid: int) -> tuple[int, int]:
    """(VmRSS, RssAnon) of ``pid`` in kB; (-1, -1) once it is gone."""
    rss = anon = -1
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("RssAnon:"):
                    anon = int(line.split()[1])
    except OSError:
        pass
    return rss, anon


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        kids.setdefault(ppid, []).append(int(d))
    return kids


def rank_pids(launcher: int) -> dict[int, int]:
    """{rank: pid} of the ranks this launcher started: its descendants whose environment names
    their rank and this launcher (through ``ip netns exec`` on a testbed)."""
    kids, out, todo = _children(), {}, list(_children().get(launcher, []))
    while todo:
        pid = todo.pop()
        todo += kids.get(pid, [])
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        except OSError:
            continue
        if env.get(contract.ENV_LAUNCHER_PID.encode()) == str(launcher).encode() and \
                contract.ENV_RANK.encode() in env:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"clusterlab.cluster.rank" in f.read():
                    out[int(env[contract.ENV_RANK.encode()])] = pid
    return out


class Sampler(threading.Thread):
    """Samples the launcher's and every rank's memory each ``every`` finished rounds, counted
    from the lines of ``progress``, until the last round (then the job sends its results and
    ends). Everything it keeps is allocated up front."""

    def __init__(self, progress: str, ranks: int, rounds: int, every: int):
        super().__init__(daemon=True)
        self.progress, self.ranks, self.rounds, self.every = progress, ranks, rounds, every
        n = rounds // every + 2
        self.round = np.full(n, -1, dtype=np.int64)
        self.rss = np.full((n, ranks + 1), -1, dtype=np.int64)  # column 0: launcher, 1 + r: rank r
        self.anon = np.full((n, ranks + 1), -1, dtype=np.int64)
        self.pids = np.zeros(ranks + 1, dtype=np.int64)
        self.pids[0] = os.getpid()
        self.taken = 0
        self.stop = threading.Event()
        self._f, self._buf, self._lines = None, bytearray(1 << 16), 0

    def _rounds_done(self) -> int:
        """Lines of the progress file so far, reading only what was added since the last call
        (reading the whole file each time grew this process by 0.24 MB per 100 rounds)."""
        if self._f is None:
            try:
                self._f = open(self.progress, "rb")
            except FileNotFoundError:
                return 0
        while n := self._f.readinto(self._buf):
            self._lines += self._buf.count(b"\n", 0, n)
        return self._lines

    def _sample(self, done: int) -> None:
        i = self.taken
        if i >= len(self.round):
            return
        self.round[i] = done
        for c, pid in enumerate(self.pids):
            self.rss[i, c], self.anon[i, c] = memory_kb(int(pid))
        self.taken += 1

    def run(self) -> None:
        while not self.stop.is_set() and not self.pids[1:].all():
            found = rank_pids(int(self.pids[0]))
            if len(found) == self.ranks:
                for r, pid in found.items():
                    self.pids[1 + r] = pid
            else:
                time.sleep(0.05)
        nxt = 0
        while not self.stop.is_set():
            done = self._rounds_done()
            if done >= self.rounds:  # the job is ending: results sent, ranks exiting; not the soak
                break
            if done >= nxt:
                self._sample(done)
                nxt = (done // self.every + 1) * self.every
            time.sleep(0.005)


def slope_kb_per_100(rounds: np.ndarray, kb: np.ndarray) -> float:
    """Least-squares growth of ``kb`` against ``rounds``, in kB per 100 rounds.

    >>> slope_kb_per_100(np.array([0, 100, 200]), np.array([1000, 1010, 1020]))
    10.0
    """
    return round(float(np.polyfit(rounds.astype(float), kb.astype(float), 1)[0]) * 100, 1)


MAX_STEPS = 3  # rises a process may take out of its growth and still count as bounded


def verdict(rounds: np.ndarray, kb: np.ndarray, limit_kb: float) -> dict:
    """One process's growth: the least-squares slope (kB per 100 rounds), its largest rises
    between two samples and the slope without them. ``flat``: the slope is under ``limit_kb``;
    ``steps``: it is under once at most ``MAX_STEPS`` rises are taken out (high-water marks,
    each reached once and kept: bounded); ``grows``: neither (a leak rises in most intervals,
    so taking out three of them leaves most of it).

    >>> r = np.arange(0, 250, 10)
    >>> verdict(r, 1000 + (r >= 120) * 150 + (r >= 200) * 100, 50.0)["verdict"], verdict(r, 1000 + r, 50.0)["verdict"]
    ('steps', 'grows')
    """
    slope = slope_kb_per_100(rounds, kb)
    rise = np.diff(kb)
    out = {"rss_kb_per_100_rounds": slope, "steps": [], "without_steps_kb_per_100_rounds": slope, "verdict": "flat"}
    if slope < limit_kb:
        return out
    without = kb.copy()
    for j in np.argsort(rise)[::-1][:MAX_STEPS]:
        if rise[j] <= 0:
            break
        without[j + 1:] -= rise[j]
        out["steps"].append({"kb": int(rise[j]), "at_round": int(rounds[j + 1])})
        out["without_steps_kb_per_100_rounds"] = slope_kb_per_100(rounds, without)
        if out["without_steps_kb_per_100_rounds"] < limit_kb:
            out["verdict"] = "steps"
            return out
    out["verdict"] = "grows"
    return out


def summarize(rounds: np.ndarray, rss: np.ndarray, anon: np.ndarray, warmup: int, limit_kb: float) -> dict:
    """Per process (column 0: the launcher, 1 + r: rank r) the growth after ``warmup`` rounds."""
    sel = (rounds >= warmup) & (rss > 0).all(axis=1)
    if sel.sum() < 3:
        raise SystemExit(f"bench/soak.py: only {int(sel.sum())} samples after the warm-up; "
                         f"run more --rounds or sample more often (--every)")
    rnd = rounds[sel]
    procs = []
    for c in range(rss.shape[1]):
        kb = rss[sel, c]
        procs.append({"process": "launcher" if c == 0 else f"rank {c - 1}",
                      "rss_kb_first": int(kb[0]), "rss_kb_last": int(kb[-1]),
                      **verdict(rnd, kb, limit_kb),
                      "anon_kb_per_100_rounds": slope_kb_per_100(rnd, anon[sel, c])})
    return {"processes": procs, "all_flat": all(p["verdict"] == "flat" for p in procs),
            "none_grows": all(p["verdict"] != "grows" for p in procs),
            "max_rss_kb_per_100_rounds": max(p["rss_kb_per_100_rounds"] for p in procs),
            "samples": {"round": rounds.tolist(), "rss_kb": rss.tolist(), "anon_kb": anon.tolist()}}


def soak(ranks: int, rounds: int, size: int, every: int, warmup: int, limit_kb: float, topo=None,
         name: str = "bsoak") -> dict:
    """The soak on loopback, or with ``topo`` (a ``StarTopo``) on a namespace testbed named ``name``."""
    import tempfile

    settings = {"ranks": ranks, "rounds": rounds, "size": size, "every": every, "warmup_rounds": warmup,
                "limit_kb_per_100_rounds": limit_kb, "workload": "alltoall_broadcast, order same",
                "cluster": "loopback" if topo is None else "testbed",
                # 0: the ranks leave glibc's thresholds alone, so freed receive buffers go back
                "CLUSTERLAB_MALLOC_TUNE": os.environ.get("CLUSTERLAB_MALLOC_TUNE", "1")}
    with tempfile.TemporaryDirectory(prefix="clusterlab-soak-") as tmp:
        progress = os.path.join(tmp, "progress.jsonl")
        os.chmod(tmp, 0o755)  # ranks in namespaces run as this user too; the file is rank 0's
        sampler = Sampler(progress, ranks, rounds, every)
        timeout = max(600.0, 2.0 * rounds)
        t0 = time.monotonic()
        sampler.start()
        try:
            if topo is not None:
                from clusterlab.cluster.testbed import TestbedNetwork

                settings.update(topo=topo.to_dict())
                with TestbedNetwork(topo, name=name) as tb:
                    out = tb.run(alltoall_broadcast, ranks, size, rounds, "same", 1, True, tb.switch.ns, timeout,
                                 progress, timeout=timeout, setup_timeout=max(60.0, 3.0 * ranks))[0]
            else:
                from clusterlab.cluster import Local

                out = Local().run(alltoall_broadcast, ranks, size, rounds, "same", 1, False, None, timeout,
                                  progress, timeout=timeout)[0]
        finally:
            sampler.stop.set()
            sampler.join()
            if sampler._f is not None:
                sampler._f.close()
        wall = time.monotonic() - t0
    if not isinstance(out, list) or len(out) != rounds:
        got = f"{len(out)} rounds" if isinstance(out, list) else "no result from rank 0"
        raise SystemExit(f"bench/soak.py: the job returned {got} (of {rounds} rounds)")
    settings.update(wall_s=round(wall, 1),
                    median_round_s=float(np.median([r["seconds"] for r in out])))
    n = sampler.taken
    return {"settings": settings,
            **summarize(sampler.round[:n], sampler.rss[:n], sampler.anon[:n], warmup, limit_kb)}


def refit(path: str) -> int:
    """``--refit``: the record's verdicts again from its samples (after the fit changed)."""
    try:
        with open(path) as f:
            rec = json.load(f)
        for key, sec in rec.items():
            if key == "provenance":  # the record's: the run that measured it, kept
                continue
            st, smp = sec["settings"], sec["samples"]
            sec.update(summarize(np.array(smp["round"]), np.array(smp["rss_kb"]), np.array(smp["anon_kb"]),
                                 st["warmup_rounds"], st["limit_kb_per_100_rounds"]))
            sec["refitted"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        print(f"bench/soak.py: --refit {path}: not a soak record ({type(e).__name__}: {e})", file=sys.stderr)
        return 2
    with atomic_open(path) as f:
        json.dump(rec, f, indent=1)
    for key, sec in rec.items():
        if key == "provenance":
            continue
        odd = ", ".join(f"{p['process']} {p['verdict']}" for p in sec["processes"] if p["verdict"] != "flat")
        print(f"{path} {key}: {odd or 'every process flat'}")
    return 0


def main(argv=None) -> int:
    ap = harness.parser(__doc__, OUT, output_help="the record to update (default bench/results/soak.json)")
    ap.add_argument("--ranks", type=int, default=16, help="ranks (testbed: hosts), default 16")
    ap.add_argument("--rounds", type=int, default=300, help="all-to-all rounds, default 300")
    ap.add_argument("--size", type=int, default=50_000, help="bytes each rank sends each other rank per "
                    "round (default 50000, seed 000's block)")
    ap.add_argument("--every", type=int, default=10, help="sample every this many rounds (default 10)")
    ap.add_argument("--warmup", type=int, default=50, help="rounds before the slope is fitted (default 50)")
    ap.add_argument("--limit-kb", type=float, default=50.0, help="growth per 100 rounds counted as flat "
                    "(default 50)")
    ap.add_argument("--testbed", action="store_true", help="one rank per host of a namespace testbed (root)")
    ap.add_argument("--rate", default="155Mbit", help="--testbed: link rate (default 155Mbit)")
    ap.add_argument("--dilation", type=float, default=1.0, help="--testbed: dilation (default 1)")
    ap.add_argument("--name", default="bsoak", help="--testbed: the testbed's name (1-8 lowercase letters or "
                    "digits; default bsoak)")
    ap.add_argument("--refit", action="store_true", help="run nothing: fit the record's samples again (each "
                    "section with its own warm-up and limit) and rewrite its verdicts")
    a = ap.parse_args(argv)
    if a.refit:
        return refit(a.output)
    if not 2 <= a.ranks <= 100 or not 1 <= a.every <= a.rounds or not 0 <= a.warmup <= a.rounds - 3 * a.every \
            or not 0 <= a.size <= 1 << 26 or not 0 < a.limit_kb < 1e9 or not 1 <= a.dilation <= 100:
        print("bench/soak.py: need --ranks 2..100, --every 1..rounds, --warmup 0..rounds - 3*every "
              "(three samples to fit), --size 0..64 MiB, --limit-kb > 0, --dilation 1..100", file=sys.stderr)
        return 2
    run = harness.start(ap, args=a)  # the output is refused now, not after the soak
    if a.testbed and os.geteuid() != 0:
        print("bench/soak.py: --testbed needs root (network namespaces)", file=sys.stderr)
        return 2
    try:
        topo = None
        if a.testbed:
            from clusterlab.cluster.testbed import StarTopo
            from clusterlab.cluster.testbed.topo import check_name

            check_name(a.name)
            topo = StarTopo(hosts=a.ranks, rate=a.rate, buffer="64KB", dilation=a.dilation)
    except ConfigError as e:
        print(f"bench/soak.py: {e}", file=sys.stderr)
        return 2
    try:
        res = soak(a.ranks, a.rounds, a.size, a.every, a.warmup, a.limit_kb, topo, a.name)
    except (ConfigError, TestbedError) as e:  # e.g. a testbed of this name is up already
        print(f"bench/soak.py: {e}", file=sys.stderr)
        return 2
    key = "testbed" if a.testbed else "loopback"
    try:
        with open(a.output) as f:
            rec = json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        rec = {}
    rec[key] = {"provenance": run.provenance(), **res}
    s = res["settings"]
    run.say(f"{key}: {a.ranks} ranks, {a.rounds} rounds of {a.size} B, {s['wall_s']} s; growth after round "
            f"{a.warmup}, KB per 100 rounds:")
    for p in res["processes"]:
        steps = ", ".join(f"{x['kb']} kB at round {x['at_round']}" for x in p["steps"])
        if steps:
            steps = f"  steps {steps}, without them {p['without_steps_kb_per_100_rounds']:.1f}"
        run.say(f"  {p['process']:>9}: rss {p['rss_kb_per_100_rounds']:7.1f}  anon {p['anon_kb_per_100_rounds']:7.1f}"
                f"  ({p['rss_kb_first']} -> {p['rss_kb_last']} kB){steps}  {p['verdict']}")
    run.write(rec)
    return 0 if res["none_grows"] else 1


if __name__ == "__main__":
    sys.exit(main())
