"""A loss/timeout model for the simulated cluster: the retransmission-timeout (RTO) wait that a
flow model cannot produce, as a function of a broadcast round's shape. Pure: no clock, no
network, no engine; ``bench/sim_loss_fit.py`` fits its few parameters from testbed rounds the
project records and writes ``bench/results/sim_loss_model.json``; ``FITTED`` holds that fit
(tests/simulated/test_loss.py checks the two agree).

The model is a **fit**, not a simulation of buffers or of TCP's timers. What it stands for: a
testbed round's time beyond what its links alone take (at the lossy points it was fitted on,
the RTO waits of the round's critical path, including ranks waiting on another rank's timeout).
Its form:

* ``overflow``: how much of a round's incast burst a port buffer cannot hold:
  ``max(0, 1 - buffer / ((hosts - 1) * (size + header)))`` (every sender starts with the same
  receiver; 0 when the burst fits, towards 1 as it outgrows the buffer);
* ``m``: expected consecutive RTOs on the round's critical path (the slowest rank):
  ``a[stack, switch] * overflow * ((hosts - 1) / 15) ** beta``;
* each timeout waits the effective RTO, ``rto_min + floor`` (Linux's RTO is the smoothed RTT
  plus at least ``rto_min``; ``floor`` is the fitted RTT part), doubling after each, capped at
  ``rto_max``; a fractional ``m`` interpolates between whole numbers of backoffs;
* timeouts per round (all hosts): ``t[stack, switch] * hosts * overflow * ((hosts - 1) / 15) ** gamma``.

>>> p = LossModel()
>>> round(p.overflow(hosts=8, size=2_000, buffer=64_000), 3)   # the burst fits: no loss
0.0
>>> w = p.rto_wait(hosts=16, size=50_000, buffer=64_000, rto_min=0.2, rto_max=120.0, stack="linux", switch="bridge")
>>> 0.2 < w < 0.6
True
>>> backoff_sum(2.5, 1.0, 100.0)    # 1 + 2 + half of 4
5.0
>>> backoff_sum(3, 1.0, 2.0)        # capped at MAX: 1 + 2 + 2
5.0
"""

from __future__ import annotations

import dataclasses
import math

from clusterlab.errors import ConfigError
from clusterlab.net.transport_config import KERNEL_RTO_MAX, KERNEL_RTO_MIN

STACKS = ("linux", "seed-era")
SWITCHES = ("bridge", "atm")
HEADER = 40  # the mesh's frame header per message (cluster.MESSAGE_HEADER)

# bench/results/sim_loss_model.json's fit (bench/sim_loss_fit.py); see the module's docstring.
FITTED = {
    "a": {"linux/bridge": 1.1723, "linux/atm": 2.4859, "seed-era/bridge": 1.7749, "seed-era/atm": 3.495},
    "beta": 0.3463, "floor": 0.0412,
    "t": {"linux/bridge": 1.44, "linux/atm": 9.4414, "seed-era/bridge": 9.8666, "seed-era/atm": 20.8006},
    "gamma": 0.6171,
}


def backoff_sum(m: float, rto: float, rto_max: float) -> float:
    """Time ``m`` consecutive timeouts wait: rto, 2 rto, 4 rto... each capped at ``rto_max``;
    a fractional ``m`` adds that fraction of the next wait."""
    if m <= 0:
        return 0.0
    whole = int(math.floor(m))
    total = sum(min(rto * 2.0 ** i, rto_max) for i in range(min(whole, 64)))
    if whole < 64:
        total += (m - whole) * min(rto * 2.0 ** whole, rto_max)
    return total


@dataclasses.dataclass(frozen=True)
class LossModel:
    """The fitted parameters (default: ``FITTED``)."""

    a: dict = dataclasses.field(default_factory=lambda: dict(FITTED["a"]))
    beta: float = FITTED["beta"]
    floor: float = FITTED["floor"]
    t: dict = dataclasses.field(default_factory=lambda: dict(FITTED["t"]))
    gamma: float = FITTED["gamma"]

    @staticmethod
    def _key(stack: str, switch: str) -> str:
        if stack not in STACKS:
            raise ConfigError(f"the loss model knows stacks {', '.join(STACKS)}, not {stack!r}")
        if switch not in SWITCHES:
            raise ConfigError(f"the loss model knows switches {', '.join(SWITCHES)}, not {switch!r}")
        return f"{stack}/{switch}"

    @staticmethod
    def overflow(*, hosts: int, size: int, buffer: int) -> float:
        """The share of a round's incast burst (hosts - 1 blocks into one port) over the buffer."""
        if hosts < 2 or buffer <= 0:
            return 0.0
        burst = (hosts - 1) * (size + HEADER)
        return max(0.0, 1.0 - buffer / burst)

    def timeouts_on_path(self, *, hosts, size, buffer, stack="linux", switch="bridge") -> float:
        """Expected consecutive RTOs on the critical path of one round."""
        a = self.a[self._key(stack, switch)]
        return a * self.overflow(hosts=hosts, size=size, buffer=buffer) * ((hosts - 1) / 15) ** self.beta

    def rto_wait(self, *, hosts: int, size: int, buffer: int, rto_min: float = KERNEL_RTO_MIN, rto_max: float = KERNEL_RTO_MAX,
                 stack: str = "linux", switch: str = "bridge") -> float:
        """Expected RTO wait (seconds) on the critical path of one all-to-all broadcast round."""
        if not 0 < rto_min <= rto_max:
            raise ConfigError(f"need 0 < rto_min <= rto_max, got {rto_min!r}, {rto_max!r}")
        m = self.timeouts_on_path(hosts=hosts, size=size, buffer=buffer, stack=stack, switch=switch)
        return backoff_sum(m, min(rto_min + self.floor, rto_max), rto_max)

    def timeouts(self, *, hosts: int, size: int, buffer: int, stack: str = "linux", switch: str = "bridge") -> float:
        """Expected timeouts per round, all hosts together."""
        t = self.t[self._key(stack, switch)]
        return t * hosts * self.overflow(hosts=hosts, size=size, buffer=buffer) * ((hosts - 1) / 15) ** self.gamma

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def fit(points: list[dict]) -> LossModel:
    """Fit the parameters to testbed points: each a dict with ``hosts``, ``size``, ``buffer``
    (bytes), ``rto_min``, ``rto_max`` (seconds), ``stack``, ``switch``, and the observed
    medians ``rto_wait`` (the slowest rank's, seconds) and ``timeouts`` (per round). Least
    squares on log(wait + 10 ms) (waits span 0.1 s to seconds); timeouts by log-linear regression."""
    import numpy as np
    from scipy.optimize import least_squares

    keys = sorted({LossModel._key(p["stack"], p["switch"]) for p in points})

    def model(x):
        return LossModel(a={**FITTED["a"], **{k: float(np.exp(v)) for k, v in zip(keys, x[:len(keys)], strict=True)}},
                         beta=float(x[len(keys)]), floor=float(np.exp(x[len(keys) + 1])))

    def resid(x):
        m = model(x)
        return [math.log(m.rto_wait(**_shape(p)) + 0.01) - math.log(p["rto_wait"] + 0.01) for p in points]

    x0 = [0.0] * len(keys) + [0.5, math.log(0.02)]
    x = least_squares(resid, x0, bounds=([-5] * len(keys) + [-2, math.log(1e-4)],
                                         [5] * len(keys) + [3, math.log(1.0)])).x
    m = model(x)
    # timeouts: log(timeouts / (hosts * overflow)) = log t[key] + gamma * log((hosts - 1) / 15)
    rows = [p for p in points if p["timeouts"] > 0 and LossModel.overflow(hosts=p["hosts"], size=p["size"],
                                                                          buffer=p["buffer"]) > 0]
    if rows:
        A = np.zeros((len(rows), len(keys) + 1))
        y = np.zeros(len(rows))
        for i, p in enumerate(rows):
            A[i, keys.index(LossModel._key(p["stack"], p["switch"]))] = 1.0
            A[i, -1] = math.log((p["hosts"] - 1) / 15)
            y[i] = math.log(p["timeouts"] / (p["hosts"] * LossModel.overflow(hosts=p["hosts"], size=p["size"],
                                                                              buffer=p["buffer"])))
        if len({p["hosts"] for p in rows}) < 2:
            A = A[:, :-1]
        sol = np.linalg.lstsq(A, y, rcond=None)[0]
        t = {**FITTED["t"], **{k: float(np.exp(sol[i])) for i, k in enumerate(keys)}}
        gamma = float(sol[-1]) if A.shape[1] > len(keys) else 0.0
        m = dataclasses.replace(m, t=t, gamma=gamma)
    return m


def _shape(p: dict) -> dict:
    return {k: p[k] for k in ("hosts", "size", "buffer", "rto_min", "rto_max", "stack", "switch")}
