"""CG (conjugate gradient): NPB's inverse power method with 25 CG iterations per step.

The matrix is distributed over NPB's 2-D process grid (``nprows x npcols``, npcols = nprows
or 2 * nprows, a power of two ranks): rank ``me`` holds rows block ``me // npcols`` and
columns block ``me % npcols``; the vectors live in column blocks. Each product ``A p`` sums
the partial products across the process row by exchanges with partners at distance 1, 2,
4, ... (the last step of NPB's non-square grid exchanges halves), then sends the result to
the transpose partner, which needs it as its column block; dot products are summed the same
way. These are NPB's messages, partners and sizes (the dot-product exchanges run from
distance 1 upwards, NPB's from the widest).

Sums are leaf-ordered (``clusterlab-core``'s ``npb::cg``): columns are cut into 16 fixed
leaves, each summed in order, leaves and ranks combined as one binary tree, so zeta is
bit-identical for every rank count.
"""

from __future__ import annotations

import math

import numpy as np

from clusterlab import _core
from clusterlab.errors import ConfigError
from clusterlab.npb.common import Outcome, TracedComm, begin_timed, end_timed, is_power_of_two, rel_error

NAME = "CG"
OPTYPE = "floating point"
# na, nonzer, niter, shift, NPB's reference zeta (cg.f)
PARAMS = {"S": (1400, 7, 15, 10.0, 8.5971775078648),
          "W": (7000, 8, 15, 12.0, 10.362595087124),
          "A": (14000, 11, 15, 20.0, 17.130235054029)}
RCOND = 0.1
CGITMAX = 25
EPSILON = 1e-10
LEAVES = 16
TRAN0 = 314159265.0
AMULT = 1220703125.0


def describe(cls: str) -> tuple[str, int]:
    return str(PARAMS[cls][0]), PARAMS[cls][2]


def grid(n: int) -> tuple[int, int]:
    """NPB's process grid (nprows, npcols) for a power of two n."""
    k = n.bit_length() - 1
    return 1 << (k // 2), 1 << ((k + 1) // 2)


def check(cls: str, n: int) -> None:
    if not is_power_of_two(n):
        raise ConfigError(f"CG runs on a power of two ranks (NPB's process grid), not {n}")
    if grid(n)[1] > LEAVES:
        raise ConfigError(f"CG runs on at most {LEAVES * LEAVES // 2} ranks here ({LEAVES} column leaves), not {n}")


def mops(cls: str, seconds: float) -> float:
    na, nonzer, niter, _, _ = PARAMS[cls]
    nz = nonzer * (nonzer + 1)
    return 2.0 * niter * na * (3.0 + nz + 25.0 * (5.0 + nz) + 3.0) / seconds / 1e6


class _Layout:
    """This rank's place in NPB's grid: its rows and columns, partners, leaf bounds."""

    def __init__(self, n: int, size: int, me: int):
        self.nprows, self.npcols = grid(size)
        self.me, self.row, self.col = me, me // self.npcols, me % self.npcols
        rb = [i * n // self.nprows for i in range(self.nprows + 1)]
        cb = [i * n // self.npcols for i in range(self.npcols + 1)]
        self.r0, self.r1 = rb[self.row], rb[self.row + 1]
        self.c0, self.c1 = cb[self.col], cb[self.col + 1]
        self.square = self.nprows == self.npcols
        if self.square:
            self.mine = (0, self.r1 - self.r0)
            self.exch = (me % self.nprows) * self.nprows + me // self.nprows
        else:  # half (col mod 2) of the row block: the transpose partner's column block
            h = 2 * self.row + self.col % 2
            self.mine = (cb[h] - self.r0, cb[h + 1] - self.r0)
            self.exch = 2 * (((me // 2) % self.nprows) * self.nprows + (me // 2) // self.nprows) + me % 2
        self.partners = [self.row * self.npcols + (self.col ^ d) for d in _distances(self.npcols)]
        per = LEAVES // self.npcols
        lb = [leaf * n // LEAVES for leaf in range(LEAVES + 1)]
        self.bounds = lb[self.col * per:(self.col + 1) * per + 1]  # global columns
        self.local_bounds = [b - self.c0 for b in self.bounds]


def _distances(npcols: int) -> list[int]:
    out, d = [], 1
    while d < npcols:
        out.append(d)
        d *= 2
    return out


class _Solver:
    def __init__(self, comm: TracedComm, cls: str):
        self.comm = comm
        na, nonzer, self.niter, self.shift, self.zeta_ref = PARAMS[cls]
        self.lay = lay = _Layout(na, comm.size, comm.rank)
        _, tran = _core.npb_vranlc(1, TRAN0, AMULT)  # NPB: zeta = randlc(tran, amult)
        self.block = _core.npb_cg_makea(na, nonzer, RCOND, self.shift, tran, lay.r0, lay.r1, lay.bounds)
        self.w = np.zeros(lay.r1 - lay.r0)

    def dot(self, x, y=None) -> float:
        """x . y over all columns: local leaves, then the tree across the process row."""
        s = _core.npb_cg_dot(x, y, self.lay.local_bounds)
        for step, p in enumerate(self.lay.partners):
            self.comm.send(p, np.array([s]), tag=10 + step)
            s = s + float(self.comm.recv(p, tag=10 + step)[0])
        return s

    def dots(self, x, z) -> tuple[float, float]:
        """(x . z, z . z) in one exchange per step, as NPB's norm_temp pair."""
        b = self.lay.local_bounds
        s = np.array([_core.npb_cg_dot(x, z, b), _core.npb_cg_dot(z, None, b)])
        for step, p in enumerate(self.lay.partners):
            self.comm.send(p, s, tag=20 + step)
            s = s + self.comm.recv(p, tag=20 + step)
        return float(s[0]), float(s[1])

    def product(self, v: np.ndarray) -> np.ndarray:
        """A v, returned in this rank's column block."""
        lay, comm, w = self.lay, self.comm, self.w
        self.block.matvec(v, w)
        lo, hi = lay.mine
        for step, p in enumerate(lay.partners):
            if step == 0 and not lay.square:  # reduce-scatter step: send the partner's half
                other = w[hi:] if lo == 0 else w[:lo]
                comm.send(p, other, tag=1 + step)
            else:
                comm.send(p, w[lo:hi] if not lay.square else w, tag=1 + step)
            got = comm.recv(p, tag=1 + step)
            w[lo:hi] += got
        if lay.exch == comm.rank:
            return w[lo:hi].copy()
        comm.send(lay.exch, w[lo:hi], tag=100)
        return comm.recv(lay.exch, tag=100)

    def conj_grad(self, x: np.ndarray) -> tuple[np.ndarray, float]:
        z = np.zeros_like(x)
        r = x.copy()
        p = r.copy()
        rho = self.dot(r)
        for _ in range(CGITMAX):
            q = self.product(p)
            d = self.dot(p, q)
            alpha = rho / d
            rho0 = rho
            z += alpha * p
            r -= alpha * q
            rho = self.dot(r)
            beta = rho / rho0
            p *= beta
            p += r
        az = self.product(z)
        s = _core.npb_cg_dist2(x, az, self.lay.local_bounds)
        for step, pr in enumerate(self.lay.partners):
            self.comm.send(pr, np.array([s]), tag=30 + step)
            s = s + float(self.comm.recv(pr, tag=30 + step)[0])
        return z, math.sqrt(s)

    def power_step(self, x: np.ndarray) -> tuple[np.ndarray, float, float]:
        z, rnorm = self.conj_grad(x)
        xz, zz = self.dots(x, z)
        zeta = self.shift + 1.0 / xz
        return (1.0 / math.sqrt(zz)) * z, zeta, rnorm


def run(comm: TracedComm, cls: str) -> Outcome:
    s = _Solver(comm, cls)
    ncols = s.lay.c1 - s.lay.c0
    s.power_step(np.ones(ncols))  # NPB's untimed iteration
    x = np.ones(ncols)
    zeta = rnorm = 0.0
    t0 = begin_timed(comm)
    for _ in range(s.niter):
        x, zeta, rnorm = s.power_step(x)
    seconds = end_timed(comm, t0)
    err = rel_error(zeta, s.zeta_ref)
    values = {"zeta": {"value": zeta, "reference": s.zeta_ref, "error": err, "epsilon": EPSILON},
              "rnorm": rnorm}
    return Outcome(seconds, err <= EPSILON, values)
