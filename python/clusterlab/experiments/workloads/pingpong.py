"""NetPIPE-style ping-pong between rank 0 and rank 1 as a study workload, over
``clusterlab.bench.pingpong``. Each repetition is one sweep over the sizes; a row per size:
``bytes``, ``seconds`` (half a round trip, best of the trials, undilated) and ``mbps``.

>>> pingpong(sizes="1:64").params
{'sizes': '1:64', 'trial_time': 0.05}
"""

from __future__ import annotations

from clusterlab.errors import ConfigError
from clusterlab.experiments.spec import Workload
from clusterlab.units import parse_float, parse_size


def size_list(text: str) -> list[int]:
    """``LO:HI`` (NetPIPE's sizes in between) or ``a,b,c``.

    >>> size_list("1:8"), size_list("8,64")
    ([1, 2, 4, 5, 7, 8], [8, 64])
    """
    from clusterlab.bench.pingpong import sizes

    if ":" in text:
        lo, hi = text.split(":", 1)
        return sizes(parse_size(lo), parse_size(hi))
    out = [parse_size(x) for x in text.split(",") if x.strip()]
    if not out or min(out) < 1:
        raise ConfigError(f"sizes must be LO:HI or a list of positive sizes, got {text!r}")
    return out


def pingpong(sizes: str = "1:1M", trial_time: float = 0.05) -> Workload:
    size_list(sizes)
    if not parse_float(trial_time, "trial_time", lo=0, hi=3600) > 0:
        raise ConfigError(f"trial_time must be positive, got {trial_time}")
    return Workload("pingpong", {"sizes": sizes, "trial_time": float(trial_time)},
                    check=lambda p: pingpong(**p) and None)


def execute(session, params: dict, reps: int, warmup: int):
    from clusterlab.bench.pingpong import pingpong as rank_fn

    if session.ranks < 2:
        raise ConfigError(f"ping-pong needs at least 2 ranks, got {session.ranks}")
    sizes = size_list(params["sizes"])
    k = session.dilation
    for i in range(warmup + reps):
        rows = session.run(rank_fn, sizes, params["trial_time"] * k)[0]
        if i < warmup:
            continue
        for r in rows:
            yield {"rep": i - warmup, "bytes": r["bytes"], "seconds": r["usec"] * 1e-6 / k, "mbps": r["mbps"] * k,
                   "inner_reps": r["reps"]}
