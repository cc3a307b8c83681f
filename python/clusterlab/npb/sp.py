"""SP: NPB's scalar pentadiagonal ADI solver of the 3-D compressible Navier-Stokes equations
(NPB 3.x: per time step ``compute_rhs``, ``txinvr``, the x, y and z line solves with
``ninvr``, ``pinvr`` and ``tzetar``, ``add``).

On a square number of ranks p * p (1, 4, 9, 16, ...) it runs NPB's MPI decomposition, the
diagonal multi-partition (``make_set``): the grid is cut into p^3 cells, each rank holds p of
them, one in every slice along each axis. Per time step, as NPB's MPI code:

- before ``compute_rhs`` the two-point faces of u come from the ranks owning the neighbouring
  cells (``copy_faces``; here one message per neighbouring rank with all its faces, NPB one per
  direction);
- each line solve is a pipeline over the p cells a line crosses: the forward elimination runs
  cell after cell and passes each line's last two rows (their normalized lhs(4), lhs(5) of
  the three systems and rhs) to the next cell's rank; the back substitution returns each
  line's first two solved rows the other way (NPB's x/y/z_solve with lhsx/y/z).

On other rank counts (2, 3, 5, ...; not NPB's) each rank owns a slab of whole k-planes: the
x and y lines lie in the slab; two planes of u come from the neighbouring slabs before
``compute_rhs``; the z lines go by an all-to-all transpose (each rank solves whole z lines
for its share of the rows) and back.

Every point's arithmetic is NPB's serial code's in its order of operations
(``clusterlab._core.NpbSp``, Rust), and the elimination split at cell boundaries is the
serial elimination, so no value depends on the decomposition. The verification sums
(``error_norm``, ``rhs_norm``) are NPB's serial left-to-right sums: slabs pass them on from
rank to rank in k order; cells gather u and the final rhs at rank 0 once, after the timed
region. So the verified norms are the same bits on every rank count and equal to NPB's
serial code's (NPB's MPI code sums per process and differs in the last bits).

>>> check("S", 11)
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: SP class S runs on a square number of ranks up to 16 (NPB's multi-partition) or on 1 to 10 ranks (slabs of k-planes) here, not 11
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
# message tags: the halo planes or faces, the norm chain, the line solves' forward and backward
# messages per axis (the slabs' transposes are all-to-alls)
TAG_HALO, TAG_NORM, TAG_FORWARD, TAG_BACKWARD = 60, 61, 62, 65


def describe(cls: str) -> tuple[str, int]:
    n = PARAMS[cls][0]
    return f"{n}x{n}x{n}", PARAMS[cls][1]


def max_ranks(cls: str) -> int:
    """The most ranks of the slab decomposition (one interior plane each)."""
    return PARAMS[cls][0] - 2


def max_cells(cls: str) -> int:
    """The largest p for NPB's multi-partition on p * p ranks (cells of at least 3 points)."""
    return PARAMS[cls][0] // 3


def decomposition(cls: str, n: int) -> str | None:
    """``"cells"`` (NPB's multi-partition) for a square n, ``"slabs"`` for other n up to
    ``max_ranks``, None where SP does not run here.

    >>> [decomposition("S", n) for n in (1, 2, 4, 9, 10, 11, 16, 25)]
    ['cells', 'slabs', 'cells', 'cells', 'slabs', None, 'cells', None]
    """
    p = square_root(n) if n >= 1 else None
    if p is not None and p <= max_cells(cls):
        return "cells"
    if 1 <= n <= max_ranks(cls):
        return "slabs"
    return None


def check(cls: str, n: int) -> None:
    if decomposition(cls, n) is None:
        p = max_cells(cls)
        raise ConfigError(f"SP class {cls} runs on a square number of ranks up to {p * p} (NPB's multi-partition) "
                          f"or on 1 to {max_ranks(cls)} ranks (slabs of k-planes) here, not {n}")


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


class _Slabs:
    """One rank's SP process on a slab of k-planes: the Rust state, its slab, its rows of z
    lines."""

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

    def init(self, step: str) -> None:
        self.sp.step(step)

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


def square_root(n: int) -> int | None:
    """p when n = p * p, else None."""
    p = math.isqrt(n)
    return p if p * p == n else None


def cell_range(n: int, p: int, x: int) -> tuple[int, int]:
    """NPB's points low .. high (exclusive) of the cell at coordinate x of p along an axis of
    n points (make_set: the first n mod p cells one point larger).

    >>> [cell_range(12, 4, x) for x in range(4)], [cell_range(14, 4, x) for x in range(4)]
    ([(0, 3), (3, 6), (6, 9), (9, 12)], [(0, 4), (4, 8), (8, 11), (11, 14)])
    """
    size, excess = divmod(n, p)
    if x < excess:
        return x * (size + 1), (x + 1) * (size + 1)
    low = excess * (size + 1) + (x - excess) * size
    return low, low + size


def cell_coords(rank: int, p: int) -> list[tuple[int, int, int]]:
    """NPB's make_set: the (x, y, z) cell coordinates of ``rank``'s p cells, one in every
    slice along each axis (the diagonal multi-partition).

    >>> cell_coords(0, 2), cell_coords(3, 2)
    ([(0, 0, 0), (1, 1, 1)], [(1, 1, 0), (0, 0, 1)])
    """
    i, j = rank % p, rank // p
    return [((i + c) % p, (j - c) % p, c) for c in range(p)]


class _Cells:
    """One rank's SP process on NPB's multi-partition (p * p ranks, p cells each): the Rust
    state of each cell, the face exchanges and the pipelined line solves."""

    def __init__(self, comm: TracedComm, cls: str):
        self.comm = comm
        self.n, self.niter, self.dt = PARAMS[cls]
        n = self.n
        self.p = p = square_root(comm.size)
        self.owner: dict[tuple[int, int, int], tuple[int, int]] = {}
        for r in range(comm.size):
            for c, xyz in enumerate(cell_coords(r, p)):
                self.owner[xyz] = (r, c)
        self.coords = cell_coords(comm.rank, p)
        self.boxes = [self.box(xyz) for xyz in self.coords]
        self.cells = [_core.NpbSp.cell([n] * 3, self.dt, lo, hi) for lo, hi in self.boxes]
        # the face exchange plan (NPB's copy_faces): every cell's two-point faces from the
        # cells next to it, in one global order that every rank computes the same way
        self.plan = []
        for xyz, (dst, dc) in sorted(self.owner.items(), key=lambda t: t[1]):
            lo, hi = self.box(xyz)
            for axis in range(3):
                for d in (-1, 1):
                    nb = list(xyz)
                    nb[axis] += d
                    if not 0 <= nb[axis] < p:
                        continue
                    flo, fhi = list(lo), list(hi)
                    if d > 0:
                        flo[axis], fhi[axis] = hi[axis], min(hi[axis] + 2, n)
                    else:
                        flo[axis], fhi[axis] = max(lo[axis] - 2, 0), lo[axis]
                    src, sc = self.owner[tuple(nb)]
                    self.plan.append((dst, dc, src, sc, flo, fhi))

    def box(self, xyz) -> tuple[list[int], list[int]]:
        r = [cell_range(self.n, self.p, x) for x in xyz]
        return [a for a, _ in r], [b for _, b in r]

    def copy_faces(self) -> None:
        c, me = self.comm, self.comm.rank
        out: dict[int, list] = {}
        for dst, _, src, sc, lo, hi in self.plan:
            if src == me:
                out.setdefault(dst, []).append(self.cells[sc].region("u", lo, hi))
        for dst, parts in out.items():
            c.send(dst, np.concatenate(parts), tag=TAG_HALO)
        got: dict[int, list] = {}
        for dst, dc, src, _, lo, hi in self.plan:
            if dst == me:
                # cells next to each other never share a rank (a rank's cells differ in every
                # coordinate), so every face comes from another rank
                got.setdefault(src, []).append((dc, lo, hi))
        for src, entries in got.items():
            data = np.asarray(c.recv(src, tag=TAG_HALO), dtype=np.float64)
            off = 0
            for dc, lo, hi in entries:
                size = 5 * (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2])
                self.cells[dc].set_region("u", lo, hi, data[off:off + size])
                off += size

    def sweep(self, axis: int) -> None:
        """NPB's pipelined line solves along axis: the forward elimination cell by cell in the
        axis's order, each cell's last two rows per line to the next cell's owner, then the
        back substitution the other way."""
        c, p = self.comm, self.p
        stage = {xyz[axis]: i for i, xyz in enumerate(self.coords)}
        empty = np.empty(0)

        def neighbour(i: int, d: int) -> int:
            nb = list(self.coords[i])
            nb[axis] += d
            return self.owner[tuple(nb)][0]

        for s in range(p):
            i = stage[s]
            incoming = np.asarray(c.recv(neighbour(i, -1), tag=TAG_FORWARD + axis), dtype=np.float64) if s > 0 else empty
            out = self.cells[i].sweep(axis, True, incoming)
            if s < p - 1:
                c.send(neighbour(i, 1), out, tag=TAG_FORWARD + axis)
        for s in range(p - 1, -1, -1):
            i = stage[s]
            incoming = np.asarray(c.recv(neighbour(i, 1), tag=TAG_BACKWARD + axis), dtype=np.float64) if s < p - 1 else empty
            out = self.cells[i].sweep(axis, False, incoming)
            if s > 0:
                c.send(neighbour(i, -1), out, tag=TAG_BACKWARD + axis)

    def each(self, step: str) -> None:
        for cell in self.cells:
            cell.step(step)

    def rhs(self) -> None:
        self.copy_faces()
        self.each("compute_aux")
        self.each("compute_rhs")

    def adi(self) -> None:
        self.rhs()
        self.each("txinvr")
        self.sweep(0)
        self.each("ninvr")
        self.sweep(1)
        self.each("pinvr")
        self.sweep(2)
        self.each("tzetar_add")

    def init(self, step: str) -> None:
        self.each(step)

    def norms(self) -> tuple[list[float], list[float]]:
        """NPB's verify with NPB's serial sums: u and the final rhs of every cell gathered at
        rank 0, summed there in NPB's order, the norms broadcast."""
        c, n = self.comm, self.n
        self.rhs()
        mine = np.concatenate([cell.region(f, lo, hi) for cell, (lo, hi) in zip(self.cells, self.boxes, strict=True)
                               for f in ("u", "rhs")])
        parts = c.gather(mine, root=0) if c.size > 1 else [mine]
        acc = None
        if c.rank == 0:
            whole = _core.NpbSp(n, n, n, self.dt, 0, n)
            for r, part in enumerate(parts):
                part = np.asarray(part, dtype=np.float64)
                off = 0
                for xyz in cell_coords(r, self.p):
                    lo, hi = self.box(xyz)
                    size = 5 * (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2])
                    for f in ("u", "rhs"):
                        whole.set_region(f, lo, hi, part[off:off + size])
                        off += size
            acc = np.array(list(whole.error_norm_chain([0.0] * 5)) + list(whole.rhs_norm_chain([0.0] * 5)))
        if c.size > 1:
            acc = c.bcast(acc, root=0)
        acc = [float(x) for x in acc]
        return [_rms(v, n) / self.dt for v in acc[5:]], [_rms(v, n) for v in acc[:5]]


def _rms(v: float, n: int) -> float:
    for _ in range(3):
        v = v / float(n - 2)
    return math.sqrt(v)


def run(comm: TracedComm, cls: str) -> Outcome:
    r = _Cells(comm, cls) if decomposition(cls, comm.size) == "cells" else _Slabs(comm, cls)
    r.init("exact_rhs")
    r.init("initialize")
    r.adi()  # NPB's untimed warm-up: one time step, then the initial state again
    r.init("initialize")
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
