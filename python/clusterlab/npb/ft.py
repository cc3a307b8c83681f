"""FT (3-D FFT PDE): NPB's spectral solution of a diffusion equation, checksum per step.

NPB's 1-D ("slab") layout: the grid starts in z-slabs (x, y whole on every rank); the forward
transform does x and y locally, transposes by an all-to-all (each rank sends every other one
the block of its slab that falls in the other's y-slab) and transforms z; the inverse runs
backwards. The rank count must be a power of two dividing ny and nz. Each line is transformed
by the same code wherever it lives, so the data are bit-identical for every rank count; the
checksum's 1024 terms are gathered at rank 0 (instead of NPB's reduction of partial sums)
and added in NPB's order, so the verified checksums are too.
"""

from __future__ import annotations

import math

import numpy as np

from clusterlab import _core
from clusterlab.errors import ConfigError
from clusterlab.npb.common import Outcome, TracedComm, begin_timed, end_timed, exact_sum, is_power_of_two

NAME = "FT"
OPTYPE = "floating point"
PARAMS = {"S": (64, 64, 64, 6), "W": (128, 128, 32, 6), "A": (256, 256, 128, 6)}
REFERENCE = {
    "S": [(5.546087004964e2, 4.845363331978e2), (5.546385409189e2, 4.865304269511e2),
          (5.546148406171e2, 4.883910722336e2), (5.545423607415e2, 4.901273169046e2),
          (5.544255039624e2, 4.917475857993e2), (5.542683411902e2, 4.932597244941e2)],
    "W": [(5.673612178944e2, 5.293246849175e2), (5.631436885271e2, 5.282149986629e2),
          (5.594024089970e2, 5.270996558037e2), (5.560698047020e2, 5.260027904925e2),
          (5.530898991250e2, 5.249400845633e2), (5.504159734538e2, 5.239212247086e2)],
    "A": [(5.046735008193e2, 5.114047905510e2), (5.059412319734e2, 5.098809666433e2),
          (5.069376896287e2, 5.098144042213e2), (5.077892868474e2, 5.101336130759e2),
          (5.085233095391e2, 5.104914655194e2), (5.091487099959e2, 5.107917842803e2)]}
EPSILON = 1e-12
ALPHA = 1e-6


def describe(cls: str) -> tuple[str, int]:
    nx, ny, nz, niter = PARAMS[cls]
    return f"{nx}x{ny}x{nz}", niter


def check(cls: str, n: int) -> None:
    _, ny, nz, _ = PARAMS[cls]
    if not is_power_of_two(n) or n > min(ny, nz):
        raise ConfigError(f"FT class {cls} runs on a power of two ranks up to {min(ny, nz)} (slabs of ny and nz), not {n}")


def mops(cls: str, seconds: float) -> float:
    nx, ny, nz, niter = PARAMS[cls]
    nt = float(nx * ny * nz)
    return 1e-6 * nt * (14.8157 + 7.19641 * math.log(nt) + (5.23518 + 7.21113 * math.log(nt)) * niter) / seconds


def _f64(a: np.ndarray) -> np.ndarray:
    return a.reshape(-1).view(np.float64)


class _Fft:
    def __init__(self, comm: TracedComm, cls: str):
        self.comm = comm
        self.nx, self.ny, self.nz, self.niter = PARAMS[cls]
        p = comm.size
        self.nzl, self.nyl = self.nz // p, self.ny // p
        self.z0, self.y0 = comm.rank * self.nzl, comm.rank * self.nyl
        # NPB's arrays are static; fresh 100 MB arrays per step would cost page faults
        local = self.nx * self.ny * self.nzl
        self.scratch = np.empty(local, dtype=np.complex128)
        self.u0, self.u1, self.u2 = (np.empty(local, dtype=np.complex128) for _ in range(3))

    def setup(self):
        """Twiddles (layout y, x, z), initial conditions (layout z, y, x), roots."""
        self.roots = _core.npb_ft_roots(max(self.nx, self.ny, self.nz))
        tw = _core.npb_ft_twiddle(self.nx, self.ny, self.nz, self.y0, self.nyl, ALPHA)
        u1 = _core.npb_ft_initial_conditions(self.nx, self.ny, self.z0, self.nzl).view(np.complex128)
        return tw, u1

    def _fft(self, a: np.ndarray, outer: int, n: int, inner: int, direction: int) -> None:
        _core.npb_ft_fft(_f64(a), outer, n, inner, direction, self.roots)

    def _transpose_exchange(self, src: np.ndarray, rows: int, cols: int, dest: np.ndarray) -> None:
        """Local transpose of ``src`` (rows x cols) into row blocks, one per rank, sent by
        all-to-all; the blocks received (each ``rows_per_rank x cols``) become column blocks
        of ``dest`` (NPB's transpose local / global / finish)."""
        n = self.comm.size
        if n == 1:
            _core.npb_ft_transpose(_f64(src), rows, cols, _f64(dest))
            return
        t = self.scratch
        _core.npb_ft_transpose(_f64(src), rows, cols, _f64(t))
        t = t.reshape(cols, rows)
        per = cols // n
        got = self.comm.alltoall([t[q * per:(q + 1) * per] for q in range(n)])
        d = dest.reshape(per, n * rows)
        for q, g in enumerate(got):
            d[:, q * rows:(q + 1) * rows] = g.reshape(per, rows)

    def forward(self, u: np.ndarray, dest: np.ndarray) -> None:
        """Layout (z, y, x) in ``u`` (overwritten) -> transformed, layout (y, x, z) in ``dest``."""
        nx, ny, nz, nzl, nyl = self.nx, self.ny, self.nz, self.nzl, self.nyl
        self._fft(u, nzl * ny, nx, 1, 1)
        self._fft(u, nzl, ny, nx, 1)
        self._transpose_exchange(u, nzl, nx * ny, dest)
        self._fft(dest, nyl * nx, nz, 1, 1)

    def backward(self, u: np.ndarray, dest: np.ndarray) -> None:
        """Layout (y, x, z) in ``u`` (overwritten) -> inverse transformed, layout (z, y, x) in
        ``dest``."""
        nx, ny, nz, nzl, nyl = self.nx, self.ny, self.nz, self.nzl, self.nyl
        self._fft(u, nyl * nx, nz, 1, -1)
        self._transpose_exchange(u, nx * nyl, nz, dest)
        self._fft(dest, nzl, ny, nx, -1)
        self._fft(dest, nzl * ny, nx, 1, -1)

    def checksum_terms(self, u: np.ndarray) -> np.ndarray:
        """This rank's terms of NPB's checksum (the j = 1..1024 whose point it holds)."""
        j = np.arange(1, 1025)
        q, r, s = j % self.nx, (3 * j) % self.ny, (5 * j) % self.nz
        mine = (s >= self.z0) & (s < self.z0 + self.nzl)
        grid = u.reshape(self.nzl, self.ny, self.nx)
        return grid[s[mine] - self.z0, r[mine], q[mine]]

    def checksum(self, u: np.ndarray) -> complex | None:
        """NPB's checksum at rank 0 (None elsewhere): the terms in j order, / ntotal."""
        parts = self.comm.gather(self.checksum_terms(u), root=0) if self.comm.size > 1 else [self.checksum_terms(u)]
        if parts is None:
            return None
        j = np.arange(1, 1025)
        owner = ((5 * j) % self.nz) // self.nzl
        terms = np.empty(1024, dtype=np.complex128)
        for p, part in enumerate(parts):
            terms[owner == p] = part
        ntotal = float(self.nx * self.ny * self.nz)
        return complex(exact_sum(terms.real) / ntotal, exact_sum(terms.imag) / ntotal)


def run(comm: TracedComm, cls: str) -> Outcome:
    f = _Fft(comm, cls)
    _, u1 = f.setup()  # NPB's untimed pass over everything once
    f.forward(u1, f.u0)
    t0 = begin_timed(comm)
    tw, u1 = f.setup()
    f.forward(u1, f.u0)
    sums = []
    for _ in range(f.niter):
        f.u0 *= tw
        np.copyto(f.u1, f.u0)
        f.backward(f.u1, f.u2)
        sums.append(f.checksum(f.u2))
    seconds = end_timed(comm, t0)
    if comm.rank != 0:
        return Outcome(seconds)
    refs = [complex(a, b) for a, b in REFERENCE[cls]]
    errors = [abs((s - ref) / ref) for s, ref in zip(sums, refs, strict=True)]
    values = {"checksums": [[s.real, s.imag] for s in sums], "references": [[c.real, c.imag] for c in refs],
              "max_error": max(errors), "epsilon": EPSILON}
    return Outcome(seconds, all(e <= EPSILON for e in errors), values)
