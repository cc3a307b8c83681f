"""SP: NPB's scalar pentadiagonal ADI solver of the 3-D compressible Navier-Stokes equations
(NPB 3.x: per time step ``compute_rhs``, ``txinvr``, the x, y and z line solves with
``ninvr``, ``pinvr`` and ``tzetar``, ``add``).

Decomposition (not NPB's MPI multi-partition; see docs/npb.md): each rank owns a slab of
whole k-planes (the grid's interior planes split as evenly as possible; rank 0 also holds
plane 0, the last rank plane nz-1), so the x and y lines lie inside a slab and are solved
where they are. Per time step:

- before ``compute_rhs`` each rank receives the two planes of ``u`` on each side of its slab
  from the ranks that own them (its stencils reach two planes; with one-plane slabs that is
  two ranks on a side);
- for the z lines, an all-to-all transpose: every rank sends each rank the z-line data of its
  planes (rhs, w, 1/rho, the speed of sound) for that rank's share of the interior rows, each
  rank solves its whole z lines, and a second all-to-all sends the solved rhs back.

Every point's arithmetic is NPB's serial code's (``clusterlab._core.NpbSp``, Rust), so no value
depends on the decomposition; the verification sums (``error_norm``, ``rhs_norm``) are NPB's
left-to-right sums in NPB's order, passed from slab to slab (rank 0 to the last) and then
broadcast. So the verified norms are NPB's serial ones bit for bit on every rank count
(NPB's own MPI code differs from its serial code in the last bits).

Rank counts: 1 to nz - 2 (each rank at least one interior plane): 10 in class S, 34 in W, 62 in A.

>>> check("S", 11)
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: SP class S runs on 1 to 10 ranks here (a slab of at least one interior k-plane each), not 11
"""

from __future__ import annotations

import math

import numpy as np

from clusterlab import _core
from clusterlab.errors import ConfigError
from clusterlab.npb.common import Outcome, TracedComm, begin_timed, end_timed, rel_error

NAME = "SP"
OPTYPE = "floating point"
# grid points per axis, time steps, dt (NPB 3.3 setparams)
PARAMS = {"S": (12, 100, 0.015), "W": (36, 400, 0.0015), "A": (64, 400, 0.0015)}
EPSILON = 1.0e-8
# NPB's verify.f: residual norms xcrref, error norms xceref, reference dt
REFERENCE = {
    "S": ([2.7470315451339479e-02, 1.0360746705285417e-02, 1.6235745065095532e-02,
           1.5840557224455615e-02, 3.4849040609362460e-02],
          [2.7289258557377227e-05, 1.0364446640837285e-05, 1.6154798287166471e-05,
           1.5750704994480102e-05, 3.4177666183390531e-05], 1.5e-2),
    "W": ([0.1893253733584e-02, 0.1717075447775e-03, 0.2778153350936e-03,
           0.2887475409984e-03, 0.3143611161242e-02],
          [0.7542088599534e-04, 0.6512852253086e-05, 0.1049092285688e-04,
           0.1128838671535e-04, 0.1212845639773e-03], 1.5e-3),
    "A": ([2.4799822399300195e+00, 1.1276337964368832e+00, 1.5028977888770491e+00,
           1.4217816211695179e+00, 2.1292113035138280e+00],
          [1.0900140297820550e-04, 3.7343951769282091e-05, 5.0092785406541633e-05,
           4.7671093939528255e-05, 1.3621613399213001e-04], 1.5e-3),
}
# message tags: the halo planes, the norm chain (the transposes are all-to-alls)
TAG_HALO, TAG_NORM = 60, 61


def describe(cls: str) -> tuple[str, int]:
    n = PARAMS[cls][0]
    return f"{n}x{n}x{n}", PARAMS[cls][1]


def max_ranks(cls: str) -> int:
    return PARAMS[cls][0] - 2


def check(cls: str, n: int) -> None:
    if not 1 <= n <= max_ranks(cls):
        raise ConfigError(f"SP class {cls} runs on 1 to {max_ranks(cls)} ranks here (a slab of at least one "
                          f"interior k-plane each), not {n}")


def mops(cls: str, seconds: float) -> float:
    n, niter, _ = PARAMS[cls]
    t = float(n)
    return (881.174 * t ** 3 - 4683.91 * t * t + 11484.5 * t - 19272.4) * niter / (seconds * 1e6)


def split(n: int, parts: int) -> list[tuple[int, int]]:
    """The interior indices 1 .. n-2 cut into ``parts`` contiguous ranges as evenly as possible.

    >>> split(12, 4)
    [(1, 3), (3, 6), (6, 8), (8, 11)]
    """
    m = n - 2
    return [(1 + r * m // parts, 1 + (r + 1) * m // parts) for r in range(parts)]


def slabs(n: int, parts: int) -> list[tuple[int, int]]:
    """Each rank's planes k0 .. k1: its interior planes, plus plane 0 (first) and n-1 (last)."""
    s = split(n, parts)
    s[0] = (0, s[0][1])
    s[-1] = (s[-1][0], n)
    return s


class _Rank:
    """One rank's SP process: the Rust state, its slab, its rows of z lines."""

    def __init__(self, comm: TracedComm, cls: str):
        self.comm = comm
        self.n, self.niter, self.dt = PARAMS[cls]
        p = comm.size
        self.slabs = slabs(self.n, p)
        self.rows = split(self.n, p)
        self.k0, self.k1 = self.slabs[comm.rank]
        self.sp = _core.NpbSp(self.n, self.n, self.n, self.dt, self.k0, self.k1)
        self.stored = [(max(a - 2, 0), min(b + 2, self.n)) for a, b in self.slabs]
        # halo: the planes each rank needs from each other rank (at most one range per pair)
        self.need_from, self.give_to = {}, {}
        me = comm.rank
        for other in range(p):
            if other == me:
                continue
            got = self._overlap(me, other)
            if got:
                self.need_from[other] = got
            give = self._overlap(other, me)
            if give:
                self.give_to[other] = give

    def _overlap(self, who: int, owner: int) -> tuple[int, int] | None:
        """The planes ``who`` stores but does not own that ``owner`` owns."""
        lo, hi = self.stored[who]
        k0, k1 = self.slabs[who]
        a, b = self.slabs[owner]
        for x, y in ((lo, k0), (k1, hi)):
            s, e = max(x, a), min(y, b)
            if s < e:
                return s, e
        return None

    def halo(self) -> None:
        """Refresh the planes of u around the slab from their owners."""
        c, sp = self.comm, self.sp
        for other, (a, b) in self.give_to.items():
            c.send(other, sp.planes(a, b), tag=TAG_HALO)
        for other, (a, b) in self.need_from.items():
            sp.set_planes(a, b, c.recv(other, tag=TAG_HALO))

    def z_solve(self) -> None:
        """The z lines by transpose: each rank solves whole lines for its rows, then the
        solved rhs goes back to the planes' owners."""
        c, sp, p = self.comm, self.sp, self.comm.size
        ja, jb = self.rows[c.rank]
        if p == 1:
            sp.unpack_z(ja, jb, sp.z_solve(jb - ja, sp.pack_z(ja, jb)))
            return
        got = c.alltoall([sp.pack_z(a, b) for a, b in self.rows])
        nj = jb - ja
        out = sp.z_solve(nj, np.concatenate([np.asarray(g, dtype=np.float64) for g in got]))
        per_plane = nj * (self.n - 2) * 5
        back = c.alltoall([out[a * per_plane:b * per_plane] for a, b in self.slabs])
        for (a, b), piece in zip(self.rows, back, strict=True):
            sp.unpack_z(a, b, np.asarray(piece, dtype=np.float64))

    def rhs(self) -> None:
        self.halo()
        self.sp.step("compute_aux")
        self.sp.step("compute_rhs")

    def adi(self) -> None:
        sp = self.sp
        self.rhs()
        sp.step("txinvr")
        sp.step("x_solve")
        sp.step("y_solve")
        self.z_solve()
        sp.step("tzetar_add")

    def norms(self) -> tuple[list[float], list[float]]:
        """NPB's verify: error_norm of u, then compute_rhs and rhs_norm (divided by dt); the
        sums are continued from rank to rank in k order, so they are NPB's serial sums."""
        c, sp = self.comm, self.sp
        self.rhs()
        if c.rank == 0:
            acc = [0.0] * 10
        else:
            acc = [float(x) for x in c.recv(c.rank - 1, tag=TAG_NORM)]
        acc = list(sp.error_norm_chain(acc[:5])) + list(sp.rhs_norm_chain(acc[5:]))
        if c.rank < c.size - 1:
            c.send(c.rank + 1, np.array(acc), tag=TAG_NORM)
        if c.size > 1:
            acc = [float(x) for x in c.bcast(np.array(acc) if c.rank == c.size - 1 else None, root=c.size - 1)]

        def rms(v: float) -> float:
            for _ in range(3):
                v = v / float(self.n - 2)
            return math.sqrt(v)

        xce = [rms(v) for v in acc[:5]]
        xcr = [rms(v) / self.dt for v in acc[5:]]
        return xcr, xce


def run(comm: TracedComm, cls: str) -> Outcome:
    r = _Rank(comm, cls)
    sp = r.sp
    sp.step("exact_rhs")
    sp.step("initialize")
    r.adi()  # NPB's untimed warm-up: one time step, then the initial state again
    sp.step("initialize")
    t0 = begin_timed(comm)
    for _ in range(r.niter):
        r.adi()
    seconds = end_timed(comm, t0)
    xcr, xce = r.norms()
    ref_r, ref_e, dtref = REFERENCE[cls]
    err_r = [rel_error(v, w) for v, w in zip(xcr, ref_r, strict=True)]
    err_e = [rel_error(v, w) for v, w in zip(xce, ref_e, strict=True)]
    verified = abs(r.dt - dtref) <= EPSILON and max(err_r + err_e) <= EPSILON
    values = {
        "xcr": {"value": xcr, "reference": ref_r, "error": max(err_r), "errors": err_r, "epsilon": EPSILON},
        "xce": {"value": xce, "reference": ref_e, "error": max(err_e), "errors": err_e, "epsilon": EPSILON},
    }
    return Outcome(seconds, verified, values)
