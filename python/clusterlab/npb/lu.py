"""LU: NPB's SSOR solver of the 3-D compressible Navier-Stokes equations (lower-upper
symmetric Gauss-Seidel), on NPB's 2-D decomposition: x split ``xdim`` ways, y ``ydim`` ways
(NPB's rule: 2 ranks 2x1, 4 ranks 2x2, 8 ranks 4x2), z whole on every rank.

Communication is NPB's MPI code's:

- the triangular sweeps are a pipelined wavefront over the k-planes: before ``blts`` on plane
  k a rank receives the plane's boundary from its north (i-1) and west (j-1) neighbours and
  after it sends its own south and east (``exchange_1``); ``buts`` runs k downwards and the
  other way round (from south and east, to north and west);
- ``rhs`` (and ``erhs`` once) refreshes two ghost layers of the whole box, north/south before
  the xi terms and east/west before the eta terms (``exchange_3``);
- ``pintgr`` passes the integrand's edge to the north and west neighbours (``exchange_4``,
  ``exchange_5``, ``exchange_6``).

Every point's arithmetic is NPB's (``clusterlab._core.NpbLu``, Rust), so it never depends
on the decomposition. The sums NPB reduces across processes (the residual and error norms,
the surface integral) are reduced here as per-column (norms) or per-cell (integral) parts
over the global grid, each part owned by one rank, and added in a fixed global order: the
verified values are bit-identical for every rank count and backend (NPB's differ in the
last bits between rank counts). The integral's cells on the j and i faces add the two faces'
four-point sums, which may belong to different ranks, as two partial sums (NPB: one chain);
so on one rank the values differ from NPB's serial code in the last bits, far inside NPB's
tolerance of 1e-8.

Rank counts: NPB's (a grid xdim x ydim with xdim <= 2 ydim: 1, 2, 4, 6, 8, 9, 12, ...) with
at least 3 points per axis on every rank.
"""

from __future__ import annotations

import math

import numpy as np

from clusterlab import _core
from clusterlab.errors import ConfigError
from clusterlab.npb.common import Outcome, TracedComm, begin_timed, end_timed, exact_sum, rel_error

NAME = "LU"
OPTYPE = "floating point"
# grid points per axis, iterations, time step (NPB 3.3 setparams)
PARAMS = {"S": (12, 50, 0.5), "W": (33, 300, 1.5e-3), "A": (64, 250, 2.0)}
OMEGA = 1.2
TOLRSD = 1.0e-8
EPSILON = 1.0e-8
# NPB's verify.f: residual norms xcr, error norms xce, surface integral xci, reference dt
REFERENCE = {
    "S": ([1.6196343210976702e-02, 2.1976745164821318e-03, 1.5179927653399185e-03,
           1.5029584435994323e-03, 3.4264073155896461e-02],
          [6.4223319957960924e-04, 8.4144342047347926e-05, 5.8588269616485186e-05,
           5.8474222595157350e-05, 1.3103347914111294e-03],
          7.8418928865937083e+00, 5.0e-1),
    "W": ([0.1236511638192e+02, 0.1317228477799e+01, 0.2550120713095e+01,
           0.2326187750252e+01, 0.2826799444189e+02],
          [0.4867877144216e+00, 0.5064652880982e-01, 0.9281818101960e-01,
           0.8570126542733e-01, 0.1084277417792e+01],
          0.1161399311023e+02, 1.5e-3),
    "A": ([7.7902107606689367e+02, 6.3402765259692870e+01, 1.9499249727292479e+02,
           1.7845301160418537e+02, 1.8384760349464247e+03],
          [2.9964085685471943e+01, 2.8194576365003349e+00, 7.3473412698774742e+00,
           6.7139225687777051e+00, 7.0715315688392578e+01],
          2.6030925604886277e+01, 2.0e+0),
}
# NPB's message tags (from_s, from_n, from_e, from_w), offset per exchange
FROM_S, FROM_N, FROM_E, FROM_W = 1, 2, 3, 4
EX1, EX3, EX4, EX5, EX6 = 0, 10, 20, 30, 40


def describe(cls: str) -> tuple[str, int]:
    n = PARAMS[cls][0]
    return f"{n}x{n}x{n}", PARAMS[cls][1]


def process_grid(n: int) -> tuple[int, int] | None:
    """NPB's (xdim, ydim) for n ranks, None where NPB refuses n."""
    g = _core.npb_lu_proc_grid(n)
    return None if g is None else (int(g[0]), int(g[1]))


def check(cls: str, n: int) -> None:
    grid = process_grid(n)
    if grid is None:
        raise ConfigError(f"LU runs on rank counts NPB arranges as an xdim x ydim grid with xdim <= 2 ydim "
                          f"(1, 2, 4, 6, 8, 9, 12, ...), not {n}")
    n0 = PARAMS[cls][0]
    if n0 // grid[0] < 3 or n0 // grid[1] < 3:
        raise ConfigError(f"LU class {cls} on {n} ranks ({grid[0]}x{grid[1]}) leaves fewer than 3 points per axis "
                          f"on a rank (NPB's limit)")


def mops(cls: str, seconds: float) -> float:
    n, itmax, _ = PARAMS[cls]
    f = float(n)
    return itmax * (1984.77 * f * f * f - 10923.3 * f * f + 27770.9 * f - 144010.0) / (seconds * 1e6)


class _Rank:
    """One rank's LU process: the Rust state, its neighbours and NPB's exchanges."""

    def __init__(self, comm: TracedComm, cls: str):
        self.comm = comm
        self.n0, self.itmax, self.dt = PARAMS[cls]
        xdim, ydim = process_grid(comm.size)
        me = comm.rank
        row, col = me % xdim, me // xdim
        self.north = me - 1 if row > 0 else None
        self.south = me + 1 if row < xdim - 1 else None
        self.west = me - xdim if col > 0 else None
        self.east = me + xdim if col < ydim - 1 else None
        self.lu = _core.NpbLu(self.n0, self.n0, self.n0, xdim, ydim, row, col, self.dt, OMEGA)
        geo = self.lu.geometry()
        self.nx, self.ny, self.nz = geo["nx"], geo["ny"], geo["nz"]
        self.ipt, self.jpt = geo["ipt"], geo["jpt"]
        self.ist, self.iend, self.jst, self.jend = geo["ist"], geo["iend"], geo["jst"], geo["jend"]
        self.dxi, self.deta, self.dzeta = geo["dxi"], geo["deta"], geo["dzeta"]

    # --- exchange_1: the wavefront of the triangular sweeps ----------------------------------
    def _recv_edges(self, k: int, upper: bool) -> None:
        """Plane k's boundary from north and west (lower sweep) or south and east (upper)."""
        lu, c = self.lu, self.comm
        src_i, src_j = (self.south, self.east) if upper else (self.north, self.west)
        gi, gj = (self.nx + 1, self.ny + 1) if upper else (0, 0)
        ti, tj = (FROM_S, FROM_E) if upper else (FROM_N, FROM_W)
        if src_i is not None:
            lu.unpack("rsd", 0, [gi], self.jst, self.jend, k, k, c.recv(src_i, tag=EX1 + ti))
        if src_j is not None:
            lu.unpack("rsd", 1, [gj], self.ist, self.iend, k, k, c.recv(src_j, tag=EX1 + tj))

    def _send_edges(self, k: int, upper: bool) -> None:
        """Plane k's last rows to south and east (lower sweep) or first to north and west."""
        lu, c = self.lu, self.comm
        dst_i, dst_j = (self.north, self.west) if upper else (self.south, self.east)
        li, lj = (1, 1) if upper else (self.nx, self.ny)
        ti, tj = (FROM_S, FROM_E) if upper else (FROM_N, FROM_W)
        if dst_i is not None:
            c.send(dst_i, lu.pack("rsd", 0, [li], self.jst, self.jend, k, k), tag=EX1 + ti)
        if dst_j is not None:
            c.send(dst_j, lu.pack("rsd", 1, [lj], self.ist, self.iend, k, k), tag=EX1 + tj)

    # --- exchange_3: two ghost layers of the whole box ----------------------------------------
    def _exchange3(self, field: str, axis: int) -> None:
        lu, c = self.lu, self.comm
        n, t1 = (self.nx, self.ny) if axis == 0 else (self.ny, self.nx)
        lo, hi = (self.north, self.south) if axis == 0 else (self.west, self.east)
        from_lo, from_hi = (FROM_N, FROM_S) if axis == 0 else (FROM_W, FROM_E)
        if hi is not None:
            c.send(hi, lu.pack(field, axis, [n - 1, n], 1, t1, 1, self.nz), tag=EX3 + from_lo)
        if lo is not None:
            lu.unpack(field, axis, [-1, 0], 1, t1, 1, self.nz, c.recv(lo, tag=EX3 + from_lo))
        if lo is not None:
            c.send(lo, lu.pack(field, axis, [2, 1], 1, t1, 1, self.nz), tag=EX3 + from_hi)
        if hi is not None:
            lu.unpack(field, axis, [n + 2, n + 1], 1, t1, 1, self.nz, c.recv(hi, tag=EX3 + from_hi))

    # --- NPB's subroutines ------------------------------------------------------------------
    def _flux_terms(self, step: str, field: str) -> None:
        """erhs or rhs: each direction's terms after the ghost layers of ``field`` it reads
        (x's east/west, then y's north/south; z is not split)."""
        self.lu.step(f"{step}_init")
        self._exchange3(field, 0)
        self.lu.step(f"{step}_xi")
        self._exchange3(field, 1)
        self.lu.step(f"{step}_eta")
        self.lu.step(f"{step}_zeta")

    def erhs(self) -> None:
        self._flux_terms("erhs", "rsd")

    def rhs(self) -> None:
        self._flux_terms("rhs", "u")

    def _norm(self, columns: np.ndarray) -> list[float]:
        """sqrt(sum / interior points) per component; the columns summed in global order."""
        if self.comm.size > 1:
            columns = self.comm.allreduce(columns, "sum")
        cols = np.asarray(columns).reshape(-1, 5)
        points = float((self.n0 - 2) ** 3)
        return [math.sqrt(exact_sum(cols[:, m]) / points) for m in range(5)]

    def l2norm(self) -> list[float]:
        return self._norm(self.lu.l2_columns("rsd"))

    def error(self) -> list[float]:
        return self._norm(self.lu.error_columns())

    def ssor(self, niter: int, timed: bool) -> tuple[list[float], float]:
        """NPB's ssor: pseudo-time steps until niter or the residual tolerance; the time is
        the timed region's (after the first rhs and norm, as NPB)."""
        lu, nz, itmax = self.lu, self.nz, self.itmax
        self.rhs()
        rsdnm = self.l2norm()
        t0 = begin_timed(self.comm) if timed else 0.0
        for istep in range(1, niter + 1):
            lu.step("scale_rsd")
            for k in range(2, nz):
                lu.jacobian(k, False)
                self._recv_edges(k, upper=False)
                lu.sweep(k, False)
                self._send_edges(k, upper=False)
            for k in range(nz - 1, 1, -1):
                lu.jacobian(k, True)
                self._recv_edges(k, upper=True)
                lu.sweep(k, True)
                self._send_edges(k, upper=True)
            lu.step("update_u")
            if istep % itmax == 0:  # NPB's norm of the correction (inorm = itmax), not reported
                self.l2norm()
            self.rhs()
            if istep % itmax == 0 or istep == itmax:
                rsdnm = self.l2norm()
            if all(r < TOLRSD for r in rsdnm):
                break
        seconds = end_timed(self.comm, t0) if timed else 0.0
        return rsdnm, seconds

    # --- pintgr -----------------------------------------------------------------------------
    def _range(self, pt: int, n: int, lo: int, hi: int) -> tuple[int, int, int]:
        """NPB's (beg, fin, fin1) of this rank's part of global lo..hi along one axis."""
        beg, fin = n + 1, 0
        g1, g2 = pt + 1, pt + n
        if g1 >= lo and g2 < hi + n:
            beg = 1
        if g1 > lo - n and g2 <= hi:
            fin = n
        if g1 <= lo <= g2:
            beg = lo - pt
        if g1 <= hi <= g2:
            fin = hi - pt
        fin1 = fin - 1 if pt + fin == hi else fin
        return beg, fin, fin1

    def _exchange4(self, p1: np.ndarray, p2: np.ndarray, ibeg: int, ifin1: int, jbeg: int, jfin1: int) -> None:
        """NPB's exchange_4 for the two k-planes' integrands (arrays [i, j]): row j = 1 to the
        west neighbour (its j = ny+1), then row i = 1 with its ghost corners to the north."""
        c, nx, ny = self.comm, self.nx, self.ny
        if jfin1 == ny and self.east is not None:
            d = c.recv(self.east, tag=EX4 + FROM_E)
            p1[1:nx + 1, ny + 1], p2[1:nx + 1, ny + 1] = d[:nx], d[nx:]
        if jbeg == 1 and self.west is not None:
            c.send(self.west, np.concatenate([p1[1:nx + 1, 1], p2[1:nx + 1, 1]]), tag=EX4 + FROM_E)
        if ifin1 == nx and self.south is not None:
            d = c.recv(self.south, tag=EX4 + FROM_S)
            p1[nx + 1, :], p2[nx + 1, :] = d[:ny + 2], d[ny + 2:]
        if ibeg == 1 and self.north is not None:
            c.send(self.north, np.concatenate([p1[1, :], p2[1, :]]), tag=EX4 + FROM_S)

    def _exchange56(self, phi: np.ndarray, direction: int, beg: int, fin1: int) -> None:
        """NPB's exchange_5 (direction 0: a j-face's integrand [i, k], row i = 1 to the north
        neighbour's i = nx+1) or exchange_6 (direction 1: an i-face's [j, k], to the west)."""
        c, nz = self.comm, self.nz
        n = self.nx if direction == 0 else self.ny
        lo, hi = (self.north, self.south) if direction == 0 else (self.west, self.east)
        tag = EX5 + FROM_S if direction == 0 else EX6 + FROM_E
        if fin1 == n and hi is not None:
            phi[n + 1, 1:nz + 1] = c.recv(hi, tag=tag)
        if beg == 1 and lo is not None:
            c.send(lo, np.ascontiguousarray(phi[1, 1:nz + 1]), tag=tag)

    def pintgr(self) -> float:
        lu, c = self.lu, self.comm
        nx0 = ny0 = nz0 = self.n0
        ii1, ii2, ji1, ji2, ki1, ki2 = 2, nx0 - 1, 2, ny0 - 2, 3, nz0 - 1
        nx, ny = self.nx, self.ny
        ibeg, ifin, ifin1 = self._range(self.ipt, nx, ii1, ii2)
        jbeg, jfin, jfin1 = self._range(self.jpt, ny, ji1, ji2)

        def cells(p: np.ndarray, a0: int, a1: int, b0: int, b1: int) -> np.ndarray:
            """The four-corner sums of cells (a0..a1) x (b0..b1), NPB's order."""
            a, a_ = slice(a0, a1 + 1), slice(a0 + 1, a1 + 2)
            b, b_ = slice(b0, b1 + 1), slice(b0 + 1, b1 + 2)
            return p[a, b] + p[a_, b] + p[a, b_] + p[a_, b_]

        def total(parts: np.ndarray) -> float:
            if c.size > 1:
                parts = c.allreduce(parts, "sum")
            return exact_sum(np.asarray(parts).ravel())

        # frc1: the k = ki1 and k = ki2 planes (both on every rank: one chain of 8 per cell)
        p1 = lu.phi_plane(2, ki1, (ibeg, ifin), (jbeg, jfin))
        p2 = lu.phi_plane(2, ki2, (ibeg, ifin), (jbeg, jfin))
        self._exchange4(p1, p2, ibeg, ifin1, jbeg, jfin1)
        g1 = np.zeros((ny0, nx0))
        if ifin1 >= ibeg and jfin1 >= jbeg:
            i, j = slice(ibeg, ifin1 + 1), slice(jbeg, jfin1 + 1)
            i_, j_ = slice(ibeg + 1, ifin1 + 2), slice(jbeg + 1, jfin1 + 2)
            cell = (p1[i, j] + p1[i_, j] + p1[i, j_] + p1[i_, j_]
                    + p2[i, j] + p2[i_, j] + p2[i, j_] + p2[i_, j_])
            g1[self.jpt + jbeg - 1:self.jpt + jfin1, self.ipt + ibeg - 1:self.ipt + ifin1] = cell.T
        frc1 = self.dxi * self.deta * total(g1)

        # frc2: the j = ji1 and j = ji2 faces, cells (i, k); frc3: i = ii1, ii2, cells (j, k)
        def faces(axis: int, beg: int, fin: int, fin1: int, pt: int, lo: int, hi: int,
                  obeg: int, ofin: int, opt: int, n0: int) -> np.ndarray:
            parts = np.zeros((2, nz0, n0))
            for f, (at, want) in enumerate(((beg, lo), (fin, hi))):
                if pt + at != want:
                    continue
                phi = lu.phi_plane(1 - axis, at, (obeg, ofin), (ki1, ki2))
                self._exchange56(phi, axis, obeg, fin1)
                if fin1 >= obeg:
                    part = cells(phi, obeg, fin1, ki1, ki2 - 1)
                    parts[f, ki1 - 1:ki2 - 1, opt + obeg - 1:opt + fin1] = part.T
            return parts

        # j faces: the integrand along i (exchanged north/south, exchange_5)
        f2 = faces(0, jbeg, jfin, ifin1, self.jpt, ji1, ji2, ibeg, ifin, self.ipt, nx0)
        f2 = np.asarray(c.allreduce(f2.ravel(), "sum") if c.size > 1 else f2.ravel()).reshape(2, -1)
        frc2 = self.dxi * self.dzeta * exact_sum(f2[0] + f2[1])
        # i faces: the integrand along j (exchanged east/west, exchange_6)
        f3 = faces(1, ibeg, ifin, jfin1, self.ipt, ii1, ii2, jbeg, jfin, self.jpt, ny0)
        f3 = np.asarray(c.allreduce(f3.ravel(), "sum") if c.size > 1 else f3.ravel()).reshape(2, -1)
        frc3 = self.deta * self.dzeta * exact_sum(f3[0] + f3[1])
        return 0.25 * (frc1 + frc2 + frc3)


def run(comm: TracedComm, cls: str) -> Outcome:
    r = _Rank(comm, cls)
    lu = r.lu
    lu.step("setbv")
    lu.step("setiv")
    r.erhs()
    r.ssor(1, timed=False)  # NPB's untimed warm-up: one SSOR iteration
    lu.step("setbv")
    lu.step("setiv")
    xcr, seconds = r.ssor(r.itmax, timed=True)
    xce = r.error()
    xci = r.pintgr()
    ref_r, ref_e, ref_i, dtref = REFERENCE[cls]
    err_r = [rel_error(v, w) for v, w in zip(xcr, ref_r, strict=True)]
    err_e = [rel_error(v, w) for v, w in zip(xce, ref_e, strict=True)]
    err_i = rel_error(xci, ref_i)
    verified = abs(r.dt - dtref) <= EPSILON and max(err_r + err_e + [err_i]) <= EPSILON
    values = {
        "xcr": {"value": xcr, "reference": ref_r, "error": max(err_r), "errors": err_r, "epsilon": EPSILON},
        "xce": {"value": xce, "reference": ref_e, "error": max(err_e), "errors": err_e, "epsilon": EPSILON},
        "xci": {"value": xci, "reference": ref_i, "error": err_i, "epsilon": EPSILON},
    }
    return Outcome(seconds, verified, values)
