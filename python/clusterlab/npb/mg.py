"""MG (multigrid): NPB's V-cycle on a periodic 3-D grid, decomposed in 3-D as NPB does
(``log2 n`` split x first, then y, then z: 2 ranks 1x1x2, 4 ranks 1x2x2, 8 ranks 2x2x2).

After each operator the ghost layers are refreshed as NPB's ``comm3``: axis by axis, each
rank sends its first and last interior layer to its two neighbours along that axis and
receives their layers into its ghosts (a periodic copy along axes that are not split). The
stencils are NPB's, so every point's value is independent of the decomposition; the norm
sums each octant of the global grid in order and combines the eight in a fixed tree (one
allreduce of eight values instead of NPB's one), so the verified L2 norm is bit-identical
for every rank count.

Up to 8 ranks (two per axis): with more, the coarsest grids leave ranks without points,
which NPB handles by dropping them from the coarse levels; that is not implemented here.
"""

from __future__ import annotations

import math

import numpy as np

from clusterlab import _core
from clusterlab.errors import ConfigError
from clusterlab.npb.common import Outcome, TracedComm, begin_timed, end_timed, rel_error

NAME = "MG"
OPTYPE = "floating point"
# grid points per axis, iterations, NPB's reference L2 norm (mg.f)
PARAMS = {"S": (32, 4, 0.5307707005734e-04), "W": (128, 4, 0.6467329375339e-05), "A": (256, 4, 0.2433365309069e-05)}
EPSILON = 1e-8
A = [-8.0 / 3.0, 0.0, 1.0 / 6.0, 1.0 / 12.0]
C = [-3.0 / 8.0, 1.0 / 32.0, -1.0 / 64.0, 0.0]  # the S(a) smoother of classes S, W, A
SUPPORTED = (1, 2, 4, 8)


def describe(cls: str) -> tuple[str, int]:
    n = PARAMS[cls][0]
    return f"{n}x{n}x{n}", PARAMS[cls][1]


def check(cls: str, n: int) -> None:
    if n not in SUPPORTED:
        raise ConfigError(f"MG runs on 1, 2, 4 or 8 ranks here (at most two per axis), not {n}")


def mops(cls: str, seconds: float) -> float:
    n, nit, _ = PARAMS[cls]
    return 58.0 * nit * float(n) ** 3 / seconds / 1e6


def process_grid(size: int) -> tuple[int, int, int]:
    """NPB's split of 2^k ranks over (x, y, z)."""
    log_p = size.bit_length() - 1
    dx = log_p // 3
    dy = (log_p - dx) // 2
    return 1 << dx, 1 << dy, size >> (dx + dy)


class _Grid:
    def __init__(self, comm: TracedComm, nglobal: int):
        self.comm = comm
        self.pi = process_grid(comm.size)
        me = comm.rank
        self.idi = (me % self.pi[0], (me // self.pi[0]) % self.pi[1], me // (self.pi[0] * self.pi[1]))
        self.lt = int(math.log2(nglobal))
        self.boxes, self.origins, self.globals = {}, {}, {}
        for k in range(1, self.lt + 1):
            ng = nglobal >> (self.lt - k)
            lo = [self.idi[a] * ng // self.pi[a] for a in range(3)]
            hi = [(self.idi[a] + 1) * ng // self.pi[a] for a in range(3)]
            self.boxes[k] = [hi[a] - lo[a] + 2 for a in range(3)]
            self.origins[k] = lo
            self.globals[k] = [ng] * 3
        self.nbr = {}
        for a in range(3):
            for d in (-1, 1):
                idn = list(self.idi)
                idn[a] = (idn[a] + d) % self.pi[a]
                self.nbr[a, d] = idn[0] + self.pi[0] * (idn[1] + self.pi[1] * idn[2])

    def zeros(self, k: int) -> np.ndarray:
        return np.zeros(int(np.prod(self.boxes[k])))

    def comm3(self, u: np.ndarray, k: int) -> None:
        """Refresh the ghost layers of level k (NPB's comm3)."""
        n = self.boxes[k]
        for axis in range(3):
            if self.pi[axis] == 1:
                _core.npb_mg_periodic(u, n, axis)
                continue
            left, right = self.nbr[axis, -1], self.nbr[axis, 1]
            self.comm.send(left, _core.npb_mg_get_face(u, n, axis, 1), tag=2 * axis)
            self.comm.send(right, _core.npb_mg_get_face(u, n, axis, n[axis] - 2), tag=2 * axis + 1)
            _core.npb_mg_put_face(u, n, axis, n[axis] - 1, self.comm.recv(right, tag=2 * axis))
            _core.npb_mg_put_face(u, n, axis, 0, self.comm.recv(left, tag=2 * axis + 1))

    def norm2u3(self, r: np.ndarray) -> tuple[float, float]:
        k = self.lt
        leaves, umax = _core.npb_mg_norm_leaves(r, self.boxes[k], self.origins[k], self.globals[k])
        leaves = self.comm.allreduce(leaves, "sum")
        umax = float(self.comm.allreduce(np.array([umax]), "max")[0])
        s = ((leaves[0] + leaves[1]) + (leaves[2] + leaves[3])) + ((leaves[4] + leaves[5]) + (leaves[6] + leaves[7]))
        return math.sqrt(float(s) / float(np.prod(self.globals[k]))), umax

    def zran3(self) -> np.ndarray:
        """NPB's right-hand side: +1 at the ten largest, -1 at the ten smallest random values."""
        k = self.lt
        n, org, g = self.boxes[k], self.origins[k], self.globals[k]
        z = _core.npb_mg_zran3(n, org, g)
        hi, lo = _core.npb_mg_extremes(z, n, org, 10)
        hi_all = np.concatenate(self.comm.allgather(hi))
        lo_all = np.concatenate(self.comm.allgather(lo))
        # ties broken by position so every rank picks the same points
        top = hi_all[np.lexsort((hi_all[:, 1], hi_all[:, 2], hi_all[:, 3], -hi_all[:, 0]))][:10]
        bottom = lo_all[np.lexsort((lo_all[:, 1], lo_all[:, 2], lo_all[:, 3], lo_all[:, 0]))][:10]
        z[:] = 0.0
        for rows, val in ((bottom, -1.0), (top, 1.0)):
            for _, gx, gy, gz in rows:
                loc = [int(c) - org[a] + 1 for a, c in enumerate((gx, gy, gz))]
                if all(1 <= loc[a] <= n[a] - 2 for a in range(3)):
                    z[loc[0] + n[0] * (loc[1] + n[1] * loc[2])] = val
        self.comm3(z, k)
        return z


def _mg3p(g: _Grid, u: dict, v: np.ndarray, r: dict) -> None:
    """One V-cycle (NPB's mg3P)."""
    lt, b = g.lt, g.boxes
    for k in range(lt, 1, -1):
        _core.npb_mg_rprj3(r[k], b[k], r[k - 1], b[k - 1])
        g.comm3(r[k - 1], k - 1)
    u[1][:] = 0.0
    _core.npb_mg_psinv(r[1], u[1], b[1], C)
    g.comm3(u[1], 1)
    for k in range(2, lt):
        u[k][:] = 0.0
        _core.npb_mg_interp(u[k - 1], b[k - 1], u[k], b[k])
        _core.npb_mg_resid(u[k], None, r[k], b[k], A)
        g.comm3(r[k], k)
        _core.npb_mg_psinv(r[k], u[k], b[k], C)
        g.comm3(u[k], k)
    _core.npb_mg_interp(u[lt - 1], b[lt - 1], u[lt], b[lt])
    _resid(g, u[lt], v, r[lt])
    _core.npb_mg_psinv(r[lt], u[lt], b[lt], C)
    g.comm3(u[lt], lt)


def _resid(g: _Grid, u: np.ndarray, v: np.ndarray, r: np.ndarray) -> None:
    _core.npb_mg_resid(u, v, r, g.boxes[g.lt], A)
    g.comm3(r, g.lt)


def run(comm: TracedComm, cls: str) -> Outcome:
    nglobal, nit, ref = PARAMS[cls]
    g = _Grid(comm, nglobal)
    u = {k: g.zeros(k) for k in g.boxes}
    r = {k: g.zeros(k) for k in g.boxes}
    v = g.zran3()
    _resid(g, u[g.lt], v, r[g.lt])  # NPB's untimed warm-up: one V-cycle
    _mg3p(g, u, v, r)
    _resid(g, u[g.lt], v, r[g.lt])
    u[g.lt][:] = 0.0
    t0 = begin_timed(comm)
    _resid(g, u[g.lt], v, r[g.lt])
    g.norm2u3(r[g.lt])
    for _ in range(nit):
        _mg3p(g, u, v, r)
        _resid(g, u[g.lt], v, r[g.lt])
    rnm2, rnmu = g.norm2u3(r[g.lt])
    seconds = end_timed(comm, t0)
    err = rel_error(rnm2, ref)
    values = {"l2_norm": {"value": rnm2, "reference": ref, "error": err, "epsilon": EPSILON}, "max_norm": rnmu}
    return Outcome(seconds, err <= EPSILON, values)
