"""Seed 003's self-optimization of TCP buffers and window scaling, as the paper gives it.

For each test variable t (``tcp_window_scaling``, ``tcp_rmem``, ``tcp_wmem``, in the config's
order), for each value from start to end (window scaling by one, buffers doubling):
set the value on every node, run NetPIPE on all nodes at once (``netpipe.ring_pingpong``),
sum the nodes' bandwidths per message size (S). Then per message size keep the value with the
highest sum (B; the first value wins a tie, the paper's strict ``x < s``), take the value that
is best for the most sizes (``get_max_count``; a tie goes to the value with the larger
bandwidth summed over all sizes), and set it on every node before the next variable is
tested (the paper's line 31), so later variables are swept on top of earlier choices.

Every rank sets the sysctls of its own node: on the testbed a rank runs inside its host's
network namespace, where ``tcp_rmem``, ``tcp_wmem`` and ``tcp_window_scaling`` are that
namespace's own (Linux >= 4.15); on a real cluster it needs root and sets the host's values,
then puts the values it found back when the sweep ends (the chosen ones go to a sysctl.d
fragment the administrator installs), and refuses to run on a host the config does not list.

>>> values = [4096, 8192, 16384]
>>> sums = {4096: {1: 10.0, 1024: 50.0}, 8192: {1: 10.0, 1024: 80.0}, 16384: {1: 9.0, 1024: 70.0}}
>>> best_per_size(values, sums)
{1: 4096, 1024: 8192}
>>> most_frequent_best(values, best_per_size(values, sums), sums)
8192
"""

from __future__ import annotations

import json
import platform
import socket
from collections import Counter
from pathlib import Path

from clusterlab.errors import ConfigError
from clusterlab.tune.config import TuneConfig
from clusterlab.tune.netpipe import listen_address, netpipe_sizes, ring_pingpong

SYSCTL_DIR = "/proc/sys/net/ipv4"
# The kernel release from which these three sysctls belong to each network namespace.
PER_NETNS_SINCE = (4, 15)


def sysctl_value(variable: str, value: int, form: str, current: str) -> str:
    """The text written to ``/proc/sys/net/ipv4/<variable>`` for ``value``.

    >>> sysctl_value("tcp_rmem", 16384, "fixed", "4096 131072 6291456")
    '16384 16384 16384'
    >>> sysctl_value("tcp_wmem", 16384, "default", "4096 16384 4194304")
    '4096 16384 4194304'
    >>> sysctl_value("tcp_window_scaling", 0, "fixed", "1")
    '0'
    """
    if variable == "tcp_window_scaling":
        return str(int(value))
    if form == "fixed":
        return f"{value} {value} {value}"
    parts = current.split()
    parts[("min", "default", "max").index(form)] = str(value)
    return " ".join(parts)


def best_per_size(values: list[int], sums: dict[int, dict[int, float]]) -> dict[int, int]:
    """Per message size, the value with the highest summed bandwidth (the paper's lines 20-29:
    values in sweep order, a later value must be strictly better)."""
    out: dict[int, int] = {}
    for nb in sums[values[0]]:
        best, x = values[0], float("-inf")
        for v in values:
            if x < sums[v][nb]:
                x, best = sums[v][nb], v
        out[nb] = best
    return out


def most_frequent_best(values: list[int], best: dict[int, int], sums: dict[int, dict[int, float]]) -> int:
    """The value best for the most message sizes (``get_max_count``); a tie goes to the value
    with the larger bandwidth summed over all sizes, then to the earlier value."""
    counts = Counter(best.values())
    top = max(counts.values())
    tied = [v for v in values if counts.get(v, 0) == top]
    return max(tied, key=lambda v: (sum(sums[v].values()), -values.index(v)))


def near_best_counts(values: list[int], sums: dict[int, dict[int, float]], within: float = 0.05) -> dict[int, int]:
    """For each value, the number of message sizes where its sum is within ``within`` of that
    size's best: values that tie within the measurement's noise (beyond the paper; it shows
    how decisive the most frequent best is).

    >>> near_best_counts([1, 2], {1: {8: 100.0, 9: 50.0}, 2: {8: 97.0, 9: 80.0}})
    {1: 1, 2: 2}
    """
    out = dict.fromkeys(values, 0)
    for nb in sums[values[0]]:
        top = max(sums[v][nb] for v in values)
        for v in values:
            out[v] += sums[v][nb] >= (1 - within) * top
    return out


def kernel_supports_per_namespace() -> bool:
    rel = platform.release().split("-")[0].split(".")
    try:
        return (int(rel[0]), int(rel[1])) >= PER_NETNS_SINCE
    except (ValueError, IndexError):
        return False


def _read(variable: str) -> str:
    return " ".join(Path(SYSCTL_DIR, variable).read_text().split())


def _write(variable: str, text: str) -> None:
    """Set one sysctl of this node; refuse with the kernel's reason, never clamp."""
    try:
        Path(SYSCTL_DIR, variable).write_text(text)
    except PermissionError:
        raise ConfigError(f"{socket.gethostname()}: cannot set net.ipv4.{variable} = {text!r}: permission "
                          "denied (tune buffers needs root on every node)") from None
    except OSError as e:
        raise ConfigError(f"{socket.gethostname()}: the kernel refused net.ipv4.{variable} = {text!r}: "
                          f"{e.strerror}") from None
    got = _read(variable)
    if got != text:
        raise ConfigError(f"{socket.gethostname()}: net.ipv4.{variable} = {text!r} reads back as {got!r}: "
                          "the kernel changed it, so the value cannot be tested")


def _check_host(plan: dict, addr: str) -> None:
    """On a real cluster, a rank only touches a host the config lists."""
    if plan["place"] != "cluster":
        return
    names = {socket.gethostname(), socket.getfqdn(), addr}
    if not names & set(plan["hosts"]):
        raise ConfigError(f"host {socket.gethostname()} ({addr}) is not in the config's hosts "
                          f"({', '.join(plan['hosts'])}): refusing to change its sysctls")


def sweep_rank(comm, plan: dict) -> dict | None:
    """Every rank calls this (one rank per node); rank 0 returns the results, others None.

    ``plan``: ``{"place", "hosts", "tests": [{"variable", "start", "end", "form"}],
    "sizes": [...], "trial_time", "trials"}``."""
    from clusterlab.tune.config import Test

    addr = listen_address()
    _check_host(plan, addr)
    where = [json.loads(b) for b in comm.allgather(json.dumps([socket.gethostname(), addr]).encode())]
    ids = [a for _, a in where] if plan["place"] == "testbed" else [h for h, _ in where]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"tune buffers needs one rank per node, got {len(ids)} ranks on {len(set(ids))} nodes")
    tests = [Test(**t) for t in plan["tests"]]
    original = {t.variable: _read(t.variable) for t in tests}
    results = []
    try:
        for t in tests:
            values, per_value = t.values(), {}
            for v in values:
                text = sysctl_value(t.variable, v, t.form, _read(t.variable))
                _write(t.variable, text)
                comm.barrier()  # set on every node before anyone tests
                rows = ring_pingpong(comm, plan["sizes"], plan["trial_time"], plan["trials"], addr)
                gathered = comm.gather(json.dumps(rows).encode(), root=0)
                if comm.rank == 0:
                    per_value[v] = {"sysctl": text, "nodes": [json.loads(g) for g in gathered]}
            chosen = None
            if comm.rank == 0:
                sums = {v: _sum_by_size(per_value[v]["nodes"]) for v in values}
                best = best_per_size(values, sums)
                chosen = most_frequent_best(values, best, sums)
                results.append({"variable": t.variable, "form": t.form, "values": values,
                                "runs": {str(v): per_value[v] for v in values},
                                "sums": {str(v): {str(nb): s for nb, s in sums[v].items()} for v in values},
                                "best_per_size": {str(nb): b for nb, b in best.items()},
                                "chosen": chosen,
                                "counts": {str(v): list(best.values()).count(v) for v in values},
                                "near_best_counts": {str(v): c for v, c in near_best_counts(values, sums).items()}})
            chosen = json.loads(comm.bcast(json.dumps(chosen).encode() if comm.rank == 0 else None, root=0))
            text = sysctl_value(t.variable, chosen, t.form, _read(t.variable))
            _write(t.variable, text)  # line 31: the best value on every node
            if comm.rank == 0:
                results[-1]["applied"] = text
            comm.barrier()
    finally:
        if plan["place"] == "cluster":  # the admin installs the fragment; leave hosts as found
            for var, text in original.items():
                if _read(var) != text:
                    _write(var, text)
    if comm.rank != 0:
        return None
    return {"nodes": [{"host": h, "address": a} for h, a in where], "original": original, "tests": results}


def _sum_by_size(nodes: list[list[dict]]) -> dict[int, float]:
    """S: per message size, the sum of every node's bandwidth (Mbit/s)."""
    out: dict[int, float] = {}
    for rows in nodes:
        for r in rows:
            out[r["bytes"]] = out.get(r["bytes"], 0.0) + r["mbps"]
    return out


def plan_of(config: TuneConfig) -> dict:
    return {"place": config.place, "hosts": config.hosts if config.place == "cluster" else [],
            "tests": [{"variable": t.variable, "start": t.start, "end": t.end, "form": t.form}
                      for t in config.tests],
            "sizes": netpipe_sizes(config.size_lo, config.size_hi, config.perturbation),
            "trial_time": config.trial_time, "trials": config.trials}


def tune_buffers(config: TuneConfig, timeout: float = 1800.0) -> dict:
    """Run the sweep where ``config`` says and return the results (``write_results`` saves them).

    On the testbed: a fresh one (removed afterwards) unless ``config.testbed`` names an
    existing one, which keeps the chosen values applied. On a real cluster: this process must be
    one rank of a job on the listed hosts (``mpiexec -f hosts ... clusterlab tune buffers``)."""
    import time

    from clusterlab.bench.spmd import spmd
    from clusterlab.cluster import Launched, started_as_rank

    plan = plan_of(config)
    t0 = time.perf_counter()
    if config.place == "cluster":
        if not started_as_rank():
            raise ConfigError(f"{config.source}: place = \"cluster\" runs as a job on the listed hosts: start it "
                              "with mpiexec (one rank per host), e.g. mpiexec -f hostfile -n "
                              f"{len(config.hosts)} clusterlab tune buffers --config {config.source}")
        res = spmd(sweep_rank, len(config.hosts), plan, cluster=Launched())[0]
        if res is None:
            return {}
        where = {"place": "cluster", "hosts": config.hosts}
    else:
        from clusterlab.cluster.testbed import StarTopo, TestbedNetwork

        if not kernel_supports_per_namespace():
            raise ConfigError(f"kernel {platform.release()} keeps tcp_rmem/tcp_wmem/tcp_window_scaling machine-wide "
                              "(per network namespace since 4.15): the testbed cannot set them per host")
        if config.testbed:
            tb = TestbedNetwork.attach(config.testbed)
            if not tb.is_up:
                raise ConfigError(f"testbed {config.testbed} is not up (clusterlab testbed up ...)")
            res = tb.run(sweep_rank, None, plan, timeout=timeout)[0]
            where = {"place": "testbed", "testbed": tb.name, "topo": tb.topo.to_dict()}
        else:
            topo = StarTopo(hosts=config.hosts, rate=config.rate, buffer=config.buffer, mtu=config.mtu)
            with TestbedNetwork(topo) as tb:
                res = tb.run(sweep_rank, None, plan, timeout=timeout)[0]
            where = {"place": "testbed", "testbed": None, "topo": topo.to_dict()}
    res.update({"config": config.to_dict(), "where": where, "seconds": time.perf_counter() - t0,
                "loadavg": _loadavg(), "kernel": platform.release()})
    return res


def _loadavg() -> list[float]:
    try:
        return [float(x) for x in open("/proc/loadavg").read().split()[:3]]
    except OSError:
        return []


def sysctl_fragment(results: dict) -> str:
    """A sysctl.d fragment with the chosen values (for ``/etc/sysctl.d/``)."""
    lines = ["# Written by clusterlab tune buffers (seed 003's algorithm): the value best for the most",
             "# message sizes, summed over all nodes. Install on every node: /etc/sysctl.d/, then sysctl --system."]
    for t in results["tests"]:
        lines.append(f"net.ipv4.{t['variable']} = {t['applied']}")
    return "\n".join(lines) + "\n"


def chosen(results: dict) -> dict[str, int]:
    return {t["variable"]: t["chosen"] for t in results["tests"]}


def summary(results: dict) -> str:
    parts = [f"{t['variable']} = {t['applied']} (best for {t['counts'][str(t['chosen'])]} of "
             f"{len(t['best_per_size'])} sizes; within 5% of the best: "
             + ", ".join(f"{v} {c}" for v, c in t.get("near_best_counts", {}).items()) + ")"
             for t in results["tests"]]
    return "; ".join(parts) + f"; {results['seconds']:.0f} s, load {' '.join(map(str, results['loadavg']))}"

