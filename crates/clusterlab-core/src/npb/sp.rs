//! SP: the scalar pentadiagonal ADI solver of NPB (3-D compressible Navier-Stokes), the
//! compute of one process that owns a slab of whole k-planes.
//!
//! A process owns planes `k0 .. k1` of the global `nx x ny x nz` grid and stores two more
//! planes on each side (as far as the grid goes) for the stencils of `compute_rhs`; the
//! caller fills them from the neighbours (`planes` / `set_planes`). x and y lines lie inside
//! a slab, so `x_solve` and `y_solve` run here as NPB's serial code does; z lines are cut by
//! the slabs, so the caller moves them (`pack_z`), solves whole lines (`z_solve_lines`) and
//! moves the result back (`unpack_z`). Every point's arithmetic is NPB's serial code's, in
//! its order of operations, so the result never depends on the decomposition; the norms are
//! NPB's left-to-right sums, continued from one slab to the next (`error_norm_chain`,
//! `rhs_norm_chain`), so they are NPB's serial sums bit for bit.
//!
//! Layout: point `(i, j, k)` of the stored planes `lo .. hi` is `((k - lo) * ny + j) * nx + i`;
//! the five components of `u`, `rhs` and `forcing` are adjacent (`5 * point + m`).

// NPB's updates are kept in NPB's form (`x = x - a * b`, loops over the index NPB uses), so
// each line can be checked against the reference code.
#![allow(clippy::assign_op_pattern, clippy::needless_range_loop)]

/// NPB's constants (`set_constants`) for a grid and time step.
#[derive(Clone, Debug)]
pub struct Consts {
    pub ce: [[f64; 13]; 5],
    pub dt: f64,
    pub c1: f64,
    pub c2: f64,
    pub bt: f64,
    pub dnxm1: f64,
    pub dnym1: f64,
    pub dnzm1: f64,
    pub c1c2: f64,
    pub c1c5: f64,
    pub c3c4: f64,
    pub tx2: f64,
    pub ty2: f64,
    pub tz2: f64,
    pub d: [[f64; 5]; 3],
    pub dmax: [f64; 3],
    pub dssp: f64,
    pub dtt1: [f64; 3],
    pub dtt2: [f64; 3],
    pub c2dtt1: [f64; 3],
    pub comz1: f64,
    pub comz4: f64,
    pub comz5: f64,
    pub comz6: f64,
    pub dtx1: [[f64; 5]; 3],
    pub con43: f64,
    pub c2iv: f64,
    pub xcon: [[f64; 5]; 3],
}

impl Consts {
    pub fn new(n: [usize; 3], dt: f64) -> Consts {
        let ce = [
            [2.0, 0.0, 0.0, 4.0, 5.0, 3.0, 0.5, 0.02, 0.01, 0.03, 0.5, 0.4, 0.3],
            [1.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 0.01, 0.03, 0.02, 0.4, 0.3, 0.5],
            [2.0, 2.0, 0.0, 0.0, 0.0, 2.0, 3.0, 0.04, 0.03, 0.05, 0.3, 0.5, 0.4],
            [2.0, 2.0, 0.0, 0.0, 0.0, 2.0, 3.0, 0.03, 0.05, 0.04, 0.2, 0.1, 0.3],
            [5.0, 4.0, 3.0, 2.0, 0.1, 0.4, 0.3, 0.05, 0.04, 0.03, 0.1, 0.3, 0.2],
        ];
        let (c1, c2, c3, c4, c5): (f64, f64, f64, f64, f64) = (1.4, 0.4, 0.1, 1.0, 1.4);
        let bt = 0.5f64.sqrt();
        let dn: Vec<f64> = n.iter().map(|&g| 1.0 / (g as f64 - 1.0)).collect();
        let c1c2 = c1 * c2;
        let c1c5 = c1 * c5;
        let c3c4 = c3 * c4;
        let conz1 = 1.0 - c1c5;
        let t1: Vec<f64> = dn.iter().map(|&d| 1.0 / (d * d)).collect();
        let t2: Vec<f64> = dn.iter().map(|&d| 1.0 / (2.0 * d)).collect();
        let t3: Vec<f64> = dn.iter().map(|&d| 1.0 / d).collect();
        let d: [[f64; 5]; 3] = [[0.75; 5], [0.75; 5], [1.0; 5]];
        // dxmax = max(dx3, dx4), dymax = max(dy2, dy4), dzmax = max(dz2, dz3)
        let dmax = [d[0][2].max(d[0][3]), d[1][1].max(d[1][3]), d[2][1].max(d[2][2])];
        let dssp = 0.25 * d[0][0].max(d[1][0].max(d[2][0]));
        let dtt1 = [dt * t1[0], dt * t1[1], dt * t1[2]];
        let dtt2 = [dt * t2[0], dt * t2[1], dt * t2[2]];
        let c2dtt1 = [2.0 * dtt1[0], 2.0 * dtt1[1], 2.0 * dtt1[2]];
        let dtdssp = dt * dssp;
        let mut dtx1 = [[0.0; 5]; 3];
        let mut xcon = [[0.0; 5]; 3];
        let con43 = 4.0 / 3.0;
        let con16 = 1.0 / 6.0;
        for a in 0..3 {
            for m in 0..5 {
                dtx1[a][m] = d[a][m] * t1[a];
            }
            let c3c4t3 = c3c4 * t3[a];
            xcon[a] = [c3c4t3 * con43 * t3[a], c3c4t3 * t3[a], c3c4t3 * conz1 * t3[a], c3c4t3 * con16 * t3[a], c3c4t3 * c1c5 * t3[a]];
        }
        Consts {
            ce,
            dt,
            c1,
            c2,
            bt,
            dnxm1: dn[0],
            dnym1: dn[1],
            dnzm1: dn[2],
            c1c2,
            c1c5,
            c3c4,
            tx2: t2[0],
            ty2: t2[1],
            tz2: t2[2],
            d,
            dmax,
            dssp,
            dtt1,
            dtt2,
            c2dtt1,
            comz1: dtdssp,
            comz4: 4.0 * dtdssp,
            comz5: 5.0 * dtdssp,
            comz6: 6.0 * dtdssp,
            dtx1,
            con43,
            c2iv: 2.5,
            xcon,
        }
    }

    /// NPB's `exact_solution` at (xi, eta, zeta).
    #[inline]
    pub fn exact(&self, xi: f64, eta: f64, zeta: f64) -> [f64; 5] {
        let mut t = [0.0; 5];
        for (m, c) in self.ce.iter().enumerate() {
            t[m] = c[0] + xi * (c[1] + xi * (c[4] + xi * (c[7] + xi * c[10]))) + eta * (c[2] + eta * (c[5] + eta * (c[8] + eta * c[11]))) + zeta * (c[3] + zeta * (c[6] + zeta * (c[9] + zeta * c[12])));
        }
        t
    }
}

/// The fourth-order dissipation bracket of NPB at position `i` of a line with interior
/// `1 ..= n2` (`v(i)` the value at i), in NPB's order of operations for each case.
#[inline(always)]
fn diss<F: Fn(usize) -> f64>(i: usize, n2: usize, v: F) -> f64 {
    if i == 1 {
        5.0 * v(i) - 4.0 * v(i + 1) + v(i + 2)
    } else if i == 2 {
        -4.0 * v(i - 1) + 6.0 * v(i) - 4.0 * v(i + 1) + v(i + 2)
    } else if i == n2 - 1 {
        v(i - 2) - 4.0 * v(i - 1) + 6.0 * v(i) - 4.0 * v(i + 1)
    } else if i == n2 {
        v(i - 2) - 4.0 * v(i - 1) + 5.0 * v(i)
    } else {
        v(i - 2) - 4.0 * v(i - 1) + 6.0 * v(i) - 4.0 * v(i + 1) + v(i + 2)
    }
}

/// One line's pentadiagonal systems (NPB's x/y/z_solve for a single line of `n` points):
/// `cv` the velocity along the line, `rho` rho_i, `speed`; `r[m * n + p]` the five right-hand
/// sides, solved in place. `a` is the axis (0: x, 1: y, 2: z) for NPB's per-axis constants.
pub struct LineSolver {
    n: usize,
    rh: Vec<f64>,
    l: [Vec<f64>; 5],
    lp: [Vec<f64>; 5],
    lm: [Vec<f64>; 5],
}

impl LineSolver {
    pub fn new(n: usize) -> LineSolver {
        let z = || [vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0.0; n]];
        LineSolver { n, rh: vec![0.0; n], l: z(), lp: z(), lm: z() }
    }

    pub fn solve(&mut self, c: &Consts, a: usize, cv: &[f64], rho: &[f64], speed: &[f64], r: &mut [f64]) {
        let n = self.n;
        let n2 = n - 2;
        // the first of NPB's max terms: dx2 (x), dy3 (y), dz4 (z)
        let dfirst = c.d[a][a + 1];
        for p in 0..n {
            let ru1 = c.c3c4 * rho[p];
            self.rh[p] = (dfirst + c.con43 * ru1).max(c.d[a][4] + c.c1c5 * ru1).max(c.dmax[a] + ru1).max(c.d[a][0]);
        }
        let (dtt1, dtt2, c2dtt1) = (c.dtt1[a], c.dtt2[a], c.c2dtt1[a]);
        let l = &mut self.l;
        for q in [0, n - 1] {
            for v in l.iter_mut() {
                v[q] = 0.0;
            }
            l[2][q] = 1.0;
        }
        for p in 1..=n2 {
            l[0][p] = 0.0;
            l[1][p] = -dtt2 * cv[p - 1] - dtt1 * self.rh[p - 1];
            l[2][p] = 1.0 + c2dtt1 * self.rh[p];
            l[3][p] = dtt2 * cv[p + 1] - dtt1 * self.rh[p + 1];
            l[4][p] = 0.0;
        }
        let (z1, z4, z5, z6) = (c.comz1, c.comz4, c.comz5, c.comz6);
        let p = 1;
        l[2][p] += z5;
        l[3][p] -= z4;
        l[4][p] += z1;
        l[1][p + 1] -= z4;
        l[2][p + 1] += z6;
        l[3][p + 1] -= z4;
        l[4][p + 1] += z1;
        for p in 3..=n - 4 {
            l[0][p] += z1;
            l[1][p] -= z4;
            l[2][p] += z6;
            l[3][p] -= z4;
            l[4][p] += z1;
        }
        let p = n - 3;
        l[0][p] += z1;
        l[1][p] -= z4;
        l[2][p] += z6;
        l[3][p] -= z4;
        l[0][p + 1] += z1;
        l[1][p + 1] -= z4;
        l[2][p + 1] += z5;
        for m in 0..5 {
            self.lp[m].copy_from_slice(&l[m]);
            self.lm[m].copy_from_slice(&l[m]);
        }
        for p in 1..=n2 {
            self.lp[1][p] = l[1][p] - dtt2 * speed[p - 1];
            self.lp[3][p] = l[3][p] + dtt2 * speed[p + 1];
            self.lm[1][p] = l[1][p] + dtt2 * speed[p - 1];
            self.lm[3][p] = l[3][p] - dtt2 * speed[p + 1];
        }
        // forward elimination, components 1-3 with lhs
        for p in 0..n - 2 {
            let (p1, p2) = (p + 1, p + 2);
            let fac1 = 1.0 / l[2][p];
            l[3][p] = fac1 * l[3][p];
            l[4][p] = fac1 * l[4][p];
            for m in 0..3 {
                r[m * n + p] = fac1 * r[m * n + p];
            }
            l[2][p1] = l[2][p1] - l[1][p1] * l[3][p];
            l[3][p1] = l[3][p1] - l[1][p1] * l[4][p];
            for m in 0..3 {
                r[m * n + p1] = r[m * n + p1] - l[1][p1] * r[m * n + p];
            }
            l[1][p2] = l[1][p2] - l[0][p2] * l[3][p];
            l[2][p2] = l[2][p2] - l[0][p2] * l[4][p];
            for m in 0..3 {
                r[m * n + p2] = r[m * n + p2] - l[0][p2] * r[m * n + p];
            }
        }
        let (p, p1) = (n - 2, n - 1);
        let fac1 = 1.0 / l[2][p];
        l[3][p] = fac1 * l[3][p];
        l[4][p] = fac1 * l[4][p];
        for m in 0..3 {
            r[m * n + p] = fac1 * r[m * n + p];
        }
        l[2][p1] = l[2][p1] - l[1][p1] * l[3][p];
        l[3][p1] = l[3][p1] - l[1][p1] * l[4][p];
        for m in 0..3 {
            r[m * n + p1] = r[m * n + p1] - l[1][p1] * r[m * n + p];
        }
        let fac2 = 1.0 / l[2][p1];
        for m in 0..3 {
            r[m * n + p1] = fac2 * r[m * n + p1];
        }
        // components 4 and 5 with lhsp and lhsm
        for (m, lx) in [(3usize, &mut self.lp), (4usize, &mut self.lm)] {
            for p in 0..n - 2 {
                let (p1, p2) = (p + 1, p + 2);
                let fac1 = 1.0 / lx[2][p];
                lx[3][p] = fac1 * lx[3][p];
                lx[4][p] = fac1 * lx[4][p];
                r[m * n + p] = fac1 * r[m * n + p];
                lx[2][p1] = lx[2][p1] - lx[1][p1] * lx[3][p];
                lx[3][p1] = lx[3][p1] - lx[1][p1] * lx[4][p];
                r[m * n + p1] = r[m * n + p1] - lx[1][p1] * r[m * n + p];
                lx[1][p2] = lx[1][p2] - lx[0][p2] * lx[3][p];
                lx[2][p2] = lx[2][p2] - lx[0][p2] * lx[4][p];
                r[m * n + p2] = r[m * n + p2] - lx[0][p2] * r[m * n + p];
            }
            let (p, p1) = (n - 2, n - 1);
            let fac1 = 1.0 / lx[2][p];
            lx[3][p] = fac1 * lx[3][p];
            lx[4][p] = fac1 * lx[4][p];
            r[m * n + p] = fac1 * r[m * n + p];
            lx[2][p1] = lx[2][p1] - lx[1][p1] * lx[3][p];
            lx[3][p1] = lx[3][p1] - lx[1][p1] * lx[4][p];
            r[m * n + p1] = r[m * n + p1] - lx[1][p1] * r[m * n + p];
        }
        r[3 * n + n - 1] /= self.lp[2][n - 1];
        r[4 * n + n - 1] /= self.lm[2][n - 1];
        // back substitution
        let (p, p1) = (n - 2, n - 1);
        for m in 0..3 {
            r[m * n + p] = r[m * n + p] - l[3][p] * r[m * n + p1];
        }
        r[3 * n + p] = r[3 * n + p] - self.lp[3][p] * r[3 * n + p1];
        r[4 * n + p] = r[4 * n + p] - self.lm[3][p] * r[4 * n + p1];
        for p in (0..n - 2).rev() {
            let (p1, p2) = (p + 1, p + 2);
            for m in 0..3 {
                r[m * n + p] = r[m * n + p] - l[3][p] * r[m * n + p1] - l[4][p] * r[m * n + p2];
            }
            r[3 * n + p] = r[3 * n + p] - self.lp[3][p] * r[3 * n + p1] - self.lp[4][p] * r[3 * n + p2];
            r[4 * n + p] = r[4 * n + p] - self.lm[3][p] * r[4 * n + p1] - self.lm[4][p] * r[4 * n + p2];
        }
    }
}

/// One process's part of SP (one of its cells): the box `o0 .. o1` (per axis x, y, z) owned,
/// `s0 .. s1` stored (two more points on each side as far as the grid goes). A slab of
/// k-planes is the box with whole x and y.
pub struct Sp {
    pub c: Consts,
    pub n: [usize; 3],
    pub o0: [usize; 3],
    pub o1: [usize; 3],
    pub s0: [usize; 3],
    pub s1: [usize; 3],
    sd: [usize; 3],
    stride: [usize; 3],
    pub u: Vec<f64>,
    pub rhs: Vec<f64>,
    pub forcing: Vec<f64>,
    us: Vec<f64>,
    vs: Vec<f64>,
    ws: Vec<f64>,
    qs: Vec<f64>,
    rho_i: Vec<f64>,
    speed: Vec<f64>,
    square: Vec<f64>,
    /// the line solves' normalized lhs(4), lhs(5) of lhs, lhsp, lhsm per owned point (kept
    /// from the forward sweep for the backward one)
    lhs45: Vec<f64>,
}

/// The points a process needs beyond its own on each side (the stencils' reach).
pub const HALO: usize = 2;

/// A field of `Sp` that moves between processes.
#[derive(Clone, Copy, Debug)]
pub enum Field {
    U,
    Rhs,
}

impl Sp {
    /// The slab of planes `k0 .. k1` of an nx x ny x nz grid.
    pub fn new(nx: usize, ny: usize, nz: usize, dt: f64, k0: usize, k1: usize) -> Result<Sp, String> {
        Sp::new_box([nx, ny, nz], dt, [0, 0, k0], [nx, ny, k1])
    }

    /// The box `o0 .. o1` of a grid of `n` points per axis.
    pub fn new_box(n: [usize; 3], dt: f64, o0: [usize; 3], o1: [usize; 3]) -> Result<Sp, String> {
        if n.iter().any(|&m| m < 6) {
            return Err(format!("SP grid {n:?}: at least 6 points per axis"));
        }
        if (0..3).any(|a| o0[a] >= o1[a] || o1[a] > n[a]) {
            return Err(format!("SP box {o0:?}..{o1:?} outside the grid {n:?}"));
        }
        let s0 = [0, 1, 2].map(|a| o0[a].saturating_sub(HALO));
        let s1 = [0, 1, 2].map(|a| (o1[a] + HALO).min(n[a]));
        let sd = [0, 1, 2].map(|a| s1[a] - s0[a]);
        let pts = sd[0] * sd[1] * sd[2];
        let owned = (0..3).map(|a| o1[a] - o0[a]).product::<usize>();
        Ok(Sp {
            c: Consts::new(n, dt),
            n,
            o0,
            o1,
            s0,
            s1,
            sd,
            stride: [1, sd[0], sd[0] * sd[1]],
            u: vec![0.0; 5 * pts],
            rhs: vec![0.0; 5 * pts],
            forcing: vec![0.0; 5 * pts],
            us: vec![0.0; pts],
            vs: vec![0.0; pts],
            ws: vec![0.0; pts],
            qs: vec![0.0; pts],
            rho_i: vec![0.0; pts],
            speed: vec![0.0; pts],
            square: vec![0.0; pts],
            lhs45: vec![0.0; 6 * owned],
        })
    }

    #[inline(always)]
    fn pt(&self, i: usize, j: usize, k: usize) -> usize {
        ((k - self.s0[2]) * self.sd[1] + (j - self.s0[1])) * self.sd[0] + (i - self.s0[0])
    }

    /// Owned points along axis a that are interior points of the grid.
    fn interior(&self, a: usize) -> std::ops::Range<usize> {
        self.o0[a].max(1)..self.o1[a].min(self.n[a] - 1)
    }

    /// NPB's `initialize` on every stored point: the transfinite interpolation of the exact
    /// solution on the faces inside, the exact solution on the boundary (faces in NPB's order,
    /// so the last face a point lies on gives its value, with that face's coordinate exact).
    pub fn initialize(&mut self) {
        let c = self.c.clone();
        let [nx, ny, nz] = self.n;
        for k in self.s0[2]..self.s1[2] {
            let zeta = k as f64 * c.dnzm1;
            for j in self.s0[1]..self.s1[1] {
                let eta = j as f64 * c.dnym1;
                for i in self.s0[0]..self.s1[0] {
                    let xi = i as f64 * c.dnxm1;
                    let v = if k == 0 || k == nz - 1 {
                        c.exact(xi, eta, if k == 0 { 0.0 } else { 1.0 })
                    } else if j == 0 || j == ny - 1 {
                        c.exact(xi, if j == 0 { 0.0 } else { 1.0 }, zeta)
                    } else if i == 0 || i == nx - 1 {
                        c.exact(if i == 0 { 0.0 } else { 1.0 }, eta, zeta)
                    } else {
                        let fx = [c.exact(0.0, eta, zeta), c.exact(1.0, eta, zeta)];
                        let fy = [c.exact(xi, 0.0, zeta), c.exact(xi, 1.0, zeta)];
                        let fz = [c.exact(xi, eta, 0.0), c.exact(xi, eta, 1.0)];
                        let mut v = [0.0; 5];
                        for m in 0..5 {
                            let pxi = xi * fx[1][m] + (1.0 - xi) * fx[0][m];
                            let peta = eta * fy[1][m] + (1.0 - eta) * fy[0][m];
                            let pzeta = zeta * fz[1][m] + (1.0 - zeta) * fz[0][m];
                            v[m] = pxi + peta + pzeta - pxi * peta - pxi * pzeta - peta * pzeta + pxi * peta * pzeta;
                        }
                        v
                    };
                    let p = self.pt(i, j, k);
                    self.u[5 * p..5 * p + 5].copy_from_slice(&v);
                }
            }
        }
    }

    /// NPB's `exact_rhs` on the owned points (the forcing term; each line's exact values are
    /// computed over the whole grid line, as NPB does).
    pub fn exact_rhs(&mut self) {
        let c = self.c.clone();
        let [nx, ny, nz] = self.n;
        self.forcing.iter_mut().for_each(|v| *v = 0.0);
        let nmax = nx.max(ny).max(nz);
        let mut ue = vec![[0.0f64; 5]; nmax];
        let mut buf = vec![[0.0f64; 5]; nmax];
        let mut cuf = vec![0.0f64; nmax];
        let mut q = vec![0.0f64; nmax];
        // the line's exact values, their velocities (buf 2..5), kinetic terms; `a` the axis
        let line = |a: usize, n: usize, at: &dyn Fn(usize) -> (f64, f64, f64), ue: &mut [[f64; 5]], buf: &mut [[f64; 5]], cuf: &mut [f64], q: &mut [f64]| {
            for p in 0..n {
                let (x, y, z) = at(p);
                let d = c.exact(x, y, z);
                ue[p] = d;
                let dtpp = 1.0 / d[0];
                for m in 1..5 {
                    buf[p][m] = dtpp * d[m];
                }
                // cuf: the square of the velocity along the line; buf(1) adds the other two
                let (o1, o2) = match a {
                    0 => (2, 3),
                    1 => (1, 3),
                    _ => (1, 2),
                };
                cuf[p] = buf[p][a + 1] * buf[p][a + 1];
                buf[p][0] = cuf[p] + buf[p][o1] * buf[p][o1] + buf[p][o2] * buf[p][o2];
                q[p] = 0.5 * (buf[p][1] * ue[p][1] + buf[p][2] * ue[p][2] + buf[p][3] * ue[p][3]);
            }
        };
        let (is, js, ks) = (self.interior(0), self.interior(1), self.interior(2));
        // xi direction
        for k in ks.clone() {
            let zeta = k as f64 * c.dnzm1;
            for j in js.clone() {
                let eta = j as f64 * c.dnym1;
                line(0, nx, &|i| (i as f64 * c.dnxm1, eta, zeta), &mut ue, &mut buf, &mut cuf, &mut q);
                for i in is.clone() {
                    let p = self.pt(i, j, k);
                    let f = &mut self.forcing[5 * p..5 * p + 5];
                    flux(&c, 0, f, i, &ue, &buf, &cuf, &q);
                    for m in 0..5 {
                        f[m] = f[m] - c.dssp * diss(i, nx - 2, |s| ue[s][m]);
                    }
                }
            }
        }
        // eta direction
        for k in ks.clone() {
            let zeta = k as f64 * c.dnzm1;
            for i in is.clone() {
                let xi = i as f64 * c.dnxm1;
                line(1, ny, &|j| (xi, j as f64 * c.dnym1, zeta), &mut ue, &mut buf, &mut cuf, &mut q);
                for j in js.clone() {
                    let p = self.pt(i, j, k);
                    let f = &mut self.forcing[5 * p..5 * p + 5];
                    flux(&c, 1, f, j, &ue, &buf, &cuf, &q);
                    for m in 0..5 {
                        f[m] = f[m] - c.dssp * diss(j, ny - 2, |s| ue[s][m]);
                    }
                }
            }
        }
        // zeta direction
        if !ks.is_empty() {
            for j in js.clone() {
                let eta = j as f64 * c.dnym1;
                for i in is.clone() {
                    let xi = i as f64 * c.dnxm1;
                    line(2, nz, &|k| (xi, eta, k as f64 * c.dnzm1), &mut ue, &mut buf, &mut cuf, &mut q);
                    for k in ks.clone() {
                        let p = self.pt(i, j, k);
                        let f = &mut self.forcing[5 * p..5 * p + 5];
                        flux(&c, 2, f, k, &ue, &buf, &cuf, &q);
                        for m in 0..5 {
                            f[m] = f[m] - c.dssp * diss(k, nz - 2, |s| ue[s][m]);
                        }
                    }
                }
            }
        }
        for p in self.interior_points() {
            for m in 0..5 {
                self.forcing[5 * p + m] = -self.forcing[5 * p + m]; // NPB: -1.d0 * forcing
            }
        }
    }

    /// rho_i, us, vs, ws, square, qs, speed on every stored point (the start of NPB's
    /// `compute_rhs`; the caller has filled the points it does not own).
    pub fn compute_aux(&mut self) {
        let c1c2 = self.c.c1c2;
        for p in 0..self.us.len() {
            let u = &self.u[5 * p..5 * p + 5];
            let rho_inv = 1.0 / u[0];
            self.rho_i[p] = rho_inv;
            self.us[p] = u[1] * rho_inv;
            self.vs[p] = u[2] * rho_inv;
            self.ws[p] = u[3] * rho_inv;
            let sq = 0.5 * (u[1] * u[1] + u[2] * u[2] + u[3] * u[3]) * rho_inv;
            self.square[p] = sq;
            self.qs[p] = sq * rho_inv;
            let aux = c1c2 * rho_inv * (u[4] - sq);
            self.speed[p] = aux.sqrt();
        }
    }

    /// The dissipation term of `compute_rhs` along axis a at point p (global index g).
    #[inline(always)]
    fn rhs_diss(&mut self, p: usize, g: usize, a: usize) {
        let st = self.stride[a] as isize;
        let n2 = self.n[a] - 2;
        let dssp = self.c.dssp;
        let u = &self.u;
        for m in 0..5 {
            let d = diss(g, n2, |s| u[5 * (p as isize + (s as isize - g as isize) * st) as usize + m]);
            self.rhs[5 * p + m] = self.rhs[5 * p + m] - dssp * d;
        }
    }

    /// NPB's `compute_rhs` on the owned points (after `compute_aux`).
    pub fn compute_rhs(&mut self) {
        let c = self.c.clone();
        for k in self.o0[2]..self.o1[2] {
            for j in self.o0[1]..self.o1[1] {
                let a = self.pt(self.o0[0], j, k);
                let b = a + self.o1[0] - self.o0[0];
                self.rhs[5 * a..5 * b].copy_from_slice(&self.forcing[5 * a..5 * b]);
            }
        }
        let (is, js, ks) = (self.interior(0), self.interior(1), self.interior(2));
        for k in ks.clone() {
            for j in js.clone() {
                for i in is.clone() {
                    let p = self.pt(i, j, k);
                    self.rhs_terms(&c, p, self.stride[0], 0);
                    self.rhs_diss(p, i, 0);
                }
            }
            for j in js.clone() {
                for i in is.clone() {
                    let p = self.pt(i, j, k);
                    self.rhs_terms(&c, p, self.stride[1], 1);
                    self.rhs_diss(p, j, 1);
                }
            }
        }
        for k in ks.clone() {
            for j in js.clone() {
                for i in is.clone() {
                    let p = self.pt(i, j, k);
                    self.rhs_terms(&c, p, self.stride[2], 2);
                }
            }
        }
        for k in ks {
            for j in js.clone() {
                for i in is.clone() {
                    let p = self.pt(i, j, k);
                    self.rhs_diss(p, k, 2);
                }
            }
        }
        for p in self.interior_points() {
            for m in 0..5 {
                self.rhs[5 * p + m] = self.rhs[5 * p + m] * c.dt;
            }
        }
    }

    /// The flux and viscous terms of `compute_rhs` along axis `a` (stride `s` between
    /// neighbours) at point p, NPB's expressions.
    #[inline(always)]
    fn rhs_terms(&mut self, c: &Consts, p: usize, s: usize, a: usize) {
        let (pm, pp) = (p - s, p + s);
        let u = &self.u;
        let uu = |q: usize, m: usize| u[5 * q + m];
        // the velocity along the axis and the two others
        let vel: [&Vec<f64>; 3] = [&self.us, &self.vs, &self.ws];
        let w = vel[a];
        let (wijk, wp1, wm1) = (w[p], w[pp], w[pm]);
        let t2 = [c.tx2, c.ty2, c.tz2][a];
        let d1 = c.dtx1[a];
        let xc = c.xcon[a];
        let sq = &self.square;
        let qs = &self.qs;
        let ri = &self.rho_i;
        let r = &mut self.rhs[5 * p..5 * p + 5];
        // component a+1 carries the momentum along the axis (pressure term, con43 factor)
        r[0] = r[0] + d1[0] * (uu(pp, 0) - 2.0 * uu(p, 0) + uu(pm, 0)) - t2 * (uu(pp, a + 1) - uu(pm, a + 1));
        for m in 1..4 {
            let t = d1[m] * (uu(pp, m) - 2.0 * uu(p, m) + uu(pm, m));
            if m == a + 1 {
                r[m] = r[m] + t + xc[1] * c.con43 * (wp1 - 2.0 * wijk + wm1) - t2 * (uu(pp, m) * wp1 - uu(pm, m) * wm1 + (uu(pp, 4) - sq[pp] - uu(pm, 4) + sq[pm]) * c.c2);
            } else {
                let o = vel[m - 1];
                r[m] = r[m] + t + xc[1] * (o[pp] - 2.0 * o[p] + o[pm]) - t2 * (uu(pp, m) * wp1 - uu(pm, m) * wm1);
            }
        }
        r[4] = r[4] + d1[4] * (uu(pp, 4) - 2.0 * uu(p, 4) + uu(pm, 4)) + xc[2] * (qs[pp] - 2.0 * qs[p] + qs[pm]) + xc[3] * (wp1 * wp1 - 2.0 * wijk * wijk + wm1 * wm1) + xc[4] * (uu(pp, 4) * ri[pp] - 2.0 * uu(p, 4) * ri[p] + uu(pm, 4) * ri[pm])
            - t2 * ((c.c1 * uu(pp, 4) - c.c2 * sq[pp]) * wp1 - (c.c1 * uu(pm, 4) - c.c2 * sq[pm]) * wm1);
    }

    fn interior_points(&self) -> Vec<usize> {
        let mut v = Vec::new();
        for k in self.interior(2) {
            for j in self.interior(1) {
                for i in self.interior(0) {
                    v.push(self.pt(i, j, k));
                }
            }
        }
        v
    }

    /// NPB's `txinvr`.
    pub fn txinvr(&mut self) {
        let (c2, bt) = (self.c.c2, self.c.bt);
        for p in self.interior_points() {
            let ru1 = self.rho_i[p];
            let (uu, vv, ww, ac) = (self.us[p], self.vs[p], self.ws[p], self.speed[p]);
            let ac2inv = ac * ac;
            let r = &mut self.rhs[5 * p..5 * p + 5];
            let (r1, r2, r3, r4, r5) = (r[0], r[1], r[2], r[3], r[4]);
            let t1 = c2 / ac2inv * (self.qs[p] * r1 - uu * r2 - vv * r3 - ww * r4 + r5);
            let t2 = bt * ru1 * (uu * r1 - r2);
            let t3 = (bt * ru1 * ac) * t1;
            r[0] = r1 - t1;
            r[1] = -ru1 * (ww * r1 - r4);
            r[2] = ru1 * (vv * r1 - r3);
            r[3] = -t2 + t3;
            r[4] = t2 + t3;
        }
    }

    /// NPB's `ninvr` (x) or `pinvr` (y).
    fn inv(&mut self, y: bool) {
        let bt = self.c.bt;
        for p in self.interior_points() {
            let r = &mut self.rhs[5 * p..5 * p + 5];
            let (r1, r2, r3, r4, r5) = (r[0], r[1], r[2], r[3], r[4]);
            let t2 = 0.5 * (r4 + r5);
            if y {
                let t1 = bt * r1;
                r[0] = bt * (r4 - r5);
                r[1] = -r3;
                r[2] = r2;
                r[3] = -t1 + t2;
                r[4] = t1 + t2;
            } else {
                let t1 = bt * r3;
                r[0] = -r2;
                r[1] = r1;
                r[2] = bt * (r4 - r5);
                r[3] = -t1 + t2;
                r[4] = t1 + t2;
            }
        }
    }

    /// NPB's `ninvr` (after the x lines).
    pub fn ninvr(&mut self) {
        self.inv(false)
    }

    /// NPB's `pinvr` (after the y lines).
    pub fn pinvr(&mut self) {
        self.inv(true)
    }

    /// Solves the lines along x (a = 0) or y (a = 1) of a box that holds them whole, then
    /// `ninvr` or `pinvr`.
    pub fn xy_solve(&mut self, a: usize) {
        self.sweep_forward(a, &[]).expect("whole lines");
        self.sweep_backward(a, &[]).expect("whole lines");
        self.inv(a == 1);
    }

    /// The other two axes of axis a (outer, inner loop of the lines) and the lines' count.
    fn line_axes(&self, a: usize) -> (usize, usize, usize) {
        let (b, c) = match a {
            0 => (1, 2),
            1 => (0, 2),
            _ => (0, 1),
        };
        (c, b, self.interior(b).len() * self.interior(c).len())
    }

    /// The forward elimination of NPB's line solves along axis a over the owned part of each
    /// line (the interior lines crossing the box). `incoming`: for each line, what the process
    /// before along the axis sends (empty when the box starts the lines): its last two rows'
    /// normalized lhs(4), lhs(5) of lhs, lhsp, lhsm and rhs, which NPB's elimination applies
    /// to this box's first two rows. Returns the same for this box's last two rows (empty when
    /// the box ends the lines).
    pub fn sweep_forward(&mut self, a: usize, incoming: &[f64]) -> Result<Vec<f64>, String> {
        const PER_ROW: usize = 11;
        let (g0, g1, n) = (self.o0[a], self.o1[a], self.n[a]);
        let len = g1 - g0;
        let (oc, ob, nlines) = self.line_axes(a);
        if g0 > 0 && incoming.len() != nlines * 2 * PER_ROW {
            return Err(format!("line solve: {} values from before, expected {}", incoming.len(), nlines * 2 * PER_ROW));
        }
        if g1 < n && len < 2 {
            return Err("line solve: a box that does not end the lines needs two rows".into());
        }
        let c = self.c.clone();
        let (dtt1, dtt2, c2dtt1) = (c.dtt1[a], c.dtt2[a], c.c2dtt1[a]);
        let (z1, z4, z5, z6) = (c.comz1, c.comz4, c.comz5, c.comz6);
        let dfirst = c.d[a][a + 1];
        let st = self.stride[a];
        let mut out = Vec::with_capacity(if g1 < n { nlines * 2 * PER_ROW } else { 0 });
        // l[s][comp][q]: lhs (s = 0), lhsp (1), lhsm (2) of row g0 + q; r[m][q] the rhs
        let mut l = vec![[vec![0.0; len], vec![0.0; len], vec![0.0; len], vec![0.0; len], vec![0.0; len]]; 3];
        let mut r = [vec![0.0; len], vec![0.0; len], vec![0.0; len], vec![0.0; len], vec![0.0; len]];
        let cv = match a {
            0 => &self.us,
            1 => &self.vs,
            _ => &self.ws,
        };
        let rhon = |q: usize| {
            let ru1 = c.c3c4 * self.rho_i[q];
            (dfirst + c.con43 * ru1).max(c.d[a][4] + c.c1c5 * ru1).max(c.dmax[a] + ru1).max(c.d[a][0])
        };
        let mut line = 0;
        let mut store = Vec::with_capacity(nlines * len * 6);
        let mut rhs_out = Vec::with_capacity(nlines * len * 5);
        for tc in self.interior(oc) {
            for tb in self.interior(ob) {
                let mut at = [0usize; 3];
                at[oc] = tc;
                at[ob] = tb;
                at[a] = g0;
                let base = self.pt(at[0], at[1], at[2]);
                // the rows' lhs (NPB's lhsinit for the boundary rows) and rhs
                for q in 0..len {
                    let g = g0 + q;
                    let p = base + q * st;
                    for m in 0..5 {
                        r[m][q] = self.rhs[5 * p + m];
                    }
                    if g == 0 || g == n - 1 {
                        for ls in l.iter_mut() {
                            for comp in ls.iter_mut() {
                                comp[q] = 0.0;
                            }
                            ls[2][q] = 1.0;
                        }
                        continue;
                    }
                    let mut v = [0.0, -dtt2 * cv[p - st] - dtt1 * rhon(p - st), 1.0 + c2dtt1 * rhon(p), dtt2 * cv[p + st] - dtt1 * rhon(p + st), 0.0];
                    if g == 1 {
                        v[2] += z5;
                        v[3] -= z4;
                        v[4] += z1;
                    } else if g == 2 {
                        v[1] -= z4;
                        v[2] += z6;
                        v[3] -= z4;
                        v[4] += z1;
                    } else if g == n - 3 {
                        v[0] += z1;
                        v[1] -= z4;
                        v[2] += z6;
                        v[3] -= z4;
                    } else if g == n - 2 {
                        v[0] += z1;
                        v[1] -= z4;
                        v[2] += z5;
                    } else {
                        v[0] += z1;
                        v[1] -= z4;
                        v[2] += z6;
                        v[3] -= z4;
                        v[4] += z1;
                    }
                    let (sm, sp) = (self.speed[p - st], self.speed[p + st]);
                    for comp in 0..5 {
                        l[0][comp][q] = v[comp];
                        l[1][comp][q] = v[comp];
                        l[2][comp][q] = v[comp];
                    }
                    l[1][1][q] = v[1] - dtt2 * sm;
                    l[1][3][q] = v[3] + dtt2 * sp;
                    l[2][1][q] = v[1] + dtt2 * sm;
                    l[2][3][q] = v[3] - dtt2 * sp;
                }
                // the system of rhs component m: lhs for 1-3, lhsp for 4, lhsm for 5
                const SYS: [usize; 5] = [0, 0, 0, 1, 2];
                if g0 > 0 {
                    // rows g0-2 (A) and g0-1 (B) of the process before: A's elimination step
                    // reaches row g0 (as its i2), B's rows g0 (i1) and g0+1 (i2)
                    let d = &incoming[line * 2 * PER_ROW..(line + 1) * 2 * PER_ROW];
                    let (ra, rb) = (&d[..PER_ROW], &d[PER_ROW..]);
                    for s in 0..3 {
                        let (a4, a5, b4, b5) = (ra[2 * s], ra[2 * s + 1], rb[2 * s], rb[2 * s + 1]);
                        let ls = &mut l[s];
                        ls[1][0] = ls[1][0] - ls[0][0] * a4;
                        ls[2][0] = ls[2][0] - ls[0][0] * a5;
                        for m in (0..5).filter(|&m| SYS[m] == s) {
                            r[m][0] = r[m][0] - ls[0][0] * ra[6 + m];
                        }
                        ls[2][0] = ls[2][0] - ls[1][0] * b4;
                        ls[3][0] = ls[3][0] - ls[1][0] * b5;
                        for m in (0..5).filter(|&m| SYS[m] == s) {
                            r[m][0] = r[m][0] - ls[1][0] * rb[6 + m];
                        }
                        if len > 1 {
                            ls[1][1] = ls[1][1] - ls[0][1] * b4;
                            ls[2][1] = ls[2][1] - ls[0][1] * b5;
                            for m in (0..5).filter(|&m| SYS[m] == s) {
                                r[m][1] = r[m][1] - ls[0][1] * rb[6 + m];
                            }
                        }
                    }
                }
                for q in 0..len {
                    let g = g0 + q;
                    if g + 1 >= n {
                        break;
                    }
                    for s in 0..3 {
                        let ls = &mut l[s];
                        let fac1 = 1.0 / ls[2][q];
                        ls[3][q] = fac1 * ls[3][q];
                        ls[4][q] = fac1 * ls[4][q];
                        for m in (0..5).filter(|&m| SYS[m] == s) {
                            r[m][q] = fac1 * r[m][q];
                        }
                        if q + 1 < len {
                            let q1 = q + 1;
                            ls[2][q1] = ls[2][q1] - ls[1][q1] * ls[3][q];
                            ls[3][q1] = ls[3][q1] - ls[1][q1] * ls[4][q];
                            for m in (0..5).filter(|&m| SYS[m] == s) {
                                r[m][q1] = r[m][q1] - ls[1][q1] * r[m][q];
                            }
                        }
                        if g + 2 < n && q + 2 < len {
                            let q2 = q + 2;
                            ls[1][q2] = ls[1][q2] - ls[0][q2] * ls[3][q];
                            ls[2][q2] = ls[2][q2] - ls[0][q2] * ls[4][q];
                            for m in (0..5).filter(|&m| SYS[m] == s) {
                                r[m][q2] = r[m][q2] - ls[0][q2] * r[m][q];
                            }
                        }
                    }
                    if g == n - 2 {
                        // the last row (in this box: a box ending the lines holds both)
                        let q1 = q + 1;
                        let fac2 = 1.0 / l[0][2][q1];
                        for m in 0..3 {
                            r[m][q1] = fac2 * r[m][q1];
                        }
                        r[3][q1] = r[3][q1] / l[1][2][q1];
                        r[4][q1] = r[4][q1] / l[2][2][q1];
                    }
                }
                for q in 0..len {
                    for s in 0..3 {
                        store.push(l[s][3][q]);
                        store.push(l[s][4][q]);
                    }
                    for m in 0..5 {
                        rhs_out.push(r[m][q]);
                    }
                }
                if g1 < n {
                    for q in [len - 2, len - 1] {
                        for s in 0..3 {
                            out.push(l[s][3][q]);
                            out.push(l[s][4][q]);
                        }
                        for m in 0..5 {
                            out.push(r[m][q]);
                        }
                    }
                }
                line += 1;
            }
        }
        self.lhs45[..store.len()].copy_from_slice(&store);
        self.write_lines(a, &rhs_out);
        Ok(out)
    }

    /// Writes per-line rhs (lines in `line_axes` order, rows along a, 5 per point).
    fn write_lines(&mut self, a: usize, data: &[f64]) {
        let (oc, ob, _) = self.line_axes(a);
        let (g0, g1) = (self.o0[a], self.o1[a]);
        let st = self.stride[a];
        let mut it = data.chunks_exact(5);
        for tc in self.interior(oc) {
            for tb in self.interior(ob) {
                let mut at = [0usize; 3];
                at[oc] = tc;
                at[ob] = tb;
                at[a] = g0;
                let base = self.pt(at[0], at[1], at[2]);
                for q in 0..g1 - g0 {
                    let p = base + q * st;
                    self.rhs[5 * p..5 * p + 5].copy_from_slice(it.next().unwrap());
                }
            }
        }
    }

    /// The back substitution after `sweep_forward` along axis a. `incoming`: per line, the
    /// solved rhs of the two rows after this box (empty when the box ends the lines). Returns
    /// this box's first two rows' solved rhs per line (empty when it starts the lines).
    pub fn sweep_backward(&mut self, a: usize, incoming: &[f64]) -> Result<Vec<f64>, String> {
        let (g0, g1, n) = (self.o0[a], self.o1[a], self.n[a]);
        let len = g1 - g0;
        let (oc, ob, nlines) = self.line_axes(a);
        if g1 < n && incoming.len() != nlines * 10 {
            return Err(format!("line solve: {} values from after, expected {}", incoming.len(), nlines * 10));
        }
        if g0 > 0 && len < 2 {
            return Err("line solve: a box that does not start the lines needs two rows".into());
        }
        let st = self.stride[a];
        let mut out = Vec::with_capacity(if g0 > 0 { nlines * 10 } else { 0 });
        const SYS: [usize; 5] = [0, 0, 0, 1, 2];
        let mut r = vec![[0.0f64; 5]; len + 2];
        let mut line = 0;
        for tc in self.interior(oc) {
            for tb in self.interior(ob) {
                let mut at = [0usize; 3];
                at[oc] = tc;
                at[ob] = tb;
                at[a] = g0;
                let base = self.pt(at[0], at[1], at[2]);
                for q in 0..len {
                    let p = base + q * st;
                    r[q].copy_from_slice(&self.rhs[5 * p..5 * p + 5]);
                }
                if g1 < n {
                    let d = &incoming[line * 10..(line + 1) * 10];
                    r[len].copy_from_slice(&d[..5]);
                    r[len + 1].copy_from_slice(&d[5..]);
                }
                let lhs = |q: usize, s: usize, comp: usize| self.lhs45[((line * len + q) * 3 + s) * 2 + comp];
                let top = if g1 == n {
                    let q = len - 2;
                    for m in 0..5 {
                        r[q][m] = r[q][m] - lhs(q, SYS[m], 0) * r[q + 1][m];
                    }
                    len - 2
                } else {
                    len
                };
                for q in (0..top).rev() {
                    for m in 0..5 {
                        r[q][m] = r[q][m] - lhs(q, SYS[m], 0) * r[q + 1][m] - lhs(q, SYS[m], 1) * r[q + 2][m];
                    }
                }
                for q in 0..len {
                    let p = base + q * st;
                    self.rhs[5 * p..5 * p + 5].copy_from_slice(&r[q]);
                }
                if g0 > 0 {
                    out.extend_from_slice(&r[0]);
                    out.extend_from_slice(&r[1]);
                }
                line += 1;
            }
        }
        Ok(out)
    }

    /// The z lines' data of the owned planes for rows `j0 .. j1`, interior i: per point
    /// (k, j, i order) rhs 1-5, ws, rho_i, speed. (Slabs: the box holds whole x and y.)
    pub fn pack_z(&self, j0: usize, j1: usize) -> Vec<f64> {
        let nx = self.n[0];
        let mut v = Vec::with_capacity((self.o1[2] - self.o0[2]) * (j1 - j0) * (nx - 2) * 8);
        for k in self.o0[2]..self.o1[2] {
            for j in j0..j1 {
                for i in 1..nx - 1 {
                    let p = self.pt(i, j, k);
                    v.extend_from_slice(&self.rhs[5 * p..5 * p + 5]);
                    v.extend_from_slice(&[self.ws[p], self.rho_i[p], self.speed[p]]);
                }
            }
        }
        v
    }

    /// Writes back solved rhs (k, j, i order, 5 per point) of owned planes, rows `j0 .. j1`.
    pub fn unpack_z(&mut self, j0: usize, j1: usize, data: &[f64]) -> Result<(), String> {
        let nx = self.n[0];
        let want = (self.o1[2] - self.o0[2]) * (j1 - j0) * (nx - 2) * 5;
        if data.len() != want {
            return Err(format!("z lines: {} values, expected {want}", data.len()));
        }
        let mut it = data.chunks_exact(5);
        for k in self.o0[2]..self.o1[2] {
            for j in j0..j1 {
                for i in 1..nx - 1 {
                    let p = self.pt(i, j, k);
                    self.rhs[5 * p..5 * p + 5].copy_from_slice(it.next().unwrap());
                }
            }
        }
        Ok(())
    }

    /// NPB's `tzetar` and `add` on the owned interior.
    pub fn tzetar_add(&mut self) {
        let (bt, c2iv) = (self.c.bt, self.c.c2iv);
        for p in self.interior_points() {
            let (xvel, yvel, zvel, ac) = (self.us[p], self.vs[p], self.ws[p], self.speed[p]);
            let ac2u = ac * ac;
            let uzik1 = self.u[5 * p];
            let qs = self.qs[p];
            let r = &mut self.rhs[5 * p..5 * p + 5];
            let (r1, r2, r3, r4, r5) = (r[0], r[1], r[2], r[3], r[4]);
            let btuz = bt * uzik1;
            let t1 = btuz / ac * (r4 + r5);
            let t2 = r3 + t1;
            let t3 = btuz * (r4 - r5);
            r[0] = t2;
            r[1] = -uzik1 * r2 + xvel * t2;
            r[2] = uzik1 * r1 + yvel * t2;
            r[3] = zvel * t2 + t3;
            r[4] = uzik1 * (-xvel * r2 + yvel * r1) + qs * t2 + c2iv * ac2u * t1 + zvel * t3;
        }
        for p in self.interior_points() {
            for m in 0..5 {
                self.u[5 * p + m] = self.u[5 * p + m] + self.rhs[5 * p + m];
            }
        }
    }

    fn check_region(&self, lo: [usize; 3], hi: [usize; 3]) -> Result<(), String> {
        if (0..3).any(|a| lo[a] < self.s0[a] || hi[a] > self.s1[a] || lo[a] > hi[a]) {
            return Err(format!("region {lo:?}..{hi:?} not stored ({:?}..{:?})", self.s0, self.s1));
        }
        Ok(())
    }

    /// The 5-vectors of a field on the stored points `lo .. hi` (k, j, i order).
    pub fn region(&self, f: Field, lo: [usize; 3], hi: [usize; 3]) -> Result<Vec<f64>, String> {
        self.check_region(lo, hi)?;
        let src = match f {
            Field::U => &self.u,
            Field::Rhs => &self.rhs,
        };
        let mut v = Vec::with_capacity(5 * (0..3).map(|a| hi[a] - lo[a]).product::<usize>());
        for k in lo[2]..hi[2] {
            for j in lo[1]..hi[1] {
                if hi[0] > lo[0] {
                    let p = self.pt(lo[0], j, k);
                    v.extend_from_slice(&src[5 * p..5 * (p + hi[0] - lo[0])]);
                }
            }
        }
        Ok(v)
    }

    /// Writes a field on the stored points `lo .. hi` (as `region` returns it).
    pub fn set_region(&mut self, f: Field, lo: [usize; 3], hi: [usize; 3], data: &[f64]) -> Result<(), String> {
        self.check_region(lo, hi)?;
        let want = 5 * (0..3).map(|a| hi[a] - lo[a]).product::<usize>();
        if data.len() != want {
            return Err(format!("region {lo:?}..{hi:?}: {} values, expected {want}", data.len()));
        }
        let w = 5 * (hi[0] - lo[0]);
        let mut off = 0;
        for k in lo[2]..hi[2] {
            for j in lo[1]..hi[1] {
                if w > 0 {
                    let p = self.pt(lo[0], j, k);
                    let dst = match f {
                        Field::U => &mut self.u,
                        Field::Rhs => &mut self.rhs,
                    };
                    dst[5 * p..5 * p + w].copy_from_slice(&data[off..off + w]);
                    off += w;
                }
            }
        }
        Ok(())
    }

    /// u of whole planes `ka .. kb` (a slab's stored planes).
    pub fn planes(&self, ka: usize, kb: usize) -> Result<Vec<f64>, String> {
        self.region(Field::U, [self.s0[0], self.s0[1], ka], [self.s1[0], self.s1[1], kb])
    }

    /// Writes u of whole planes `ka .. kb`.
    pub fn set_planes(&mut self, ka: usize, kb: usize, data: &[f64]) -> Result<(), String> {
        self.set_region(Field::U, [self.s0[0], self.s0[1], ka], [self.s1[0], self.s1[1], kb], data)
    }

    /// NPB's `error_norm` sums continued over the owned points from `acc` (the sums of the
    /// points before them in NPB's k, j, i order): (u - exact)^2 per component.
    pub fn error_norm_chain(&self, mut acc: [f64; 5]) -> [f64; 5] {
        let c = &self.c;
        for k in self.o0[2]..self.o1[2] {
            let zeta = k as f64 * c.dnzm1;
            for j in self.o0[1]..self.o1[1] {
                let eta = j as f64 * c.dnym1;
                for i in self.o0[0]..self.o1[0] {
                    let e = c.exact(i as f64 * c.dnxm1, eta, zeta);
                    let p = self.pt(i, j, k);
                    for m in 0..5 {
                        let add = self.u[5 * p + m] - e[m];
                        acc[m] += add * add;
                    }
                }
            }
        }
        acc
    }

    /// NPB's `rhs_norm` sums continued over the owned interior points from `acc`.
    pub fn rhs_norm_chain(&self, mut acc: [f64; 5]) -> [f64; 5] {
        for p in self.interior_points() {
            for m in 0..5 {
                let add = self.rhs[5 * p + m];
                acc[m] += add * add;
            }
        }
        acc
    }
}

/// Solves whole z lines: `data` holds, for every k of the grid, rows `nj` and interior i
/// (`ni` = nx - 2), per point rhs 1-5, ws, rho_i, speed (k, j, i order, as `Sp::pack_z`
/// pieces concatenated in k). Returns the solved rhs, 5 per point, same order.
pub fn z_solve_lines(c: &Consts, nz: usize, nj: usize, ni: usize, data: &[f64]) -> Result<Vec<f64>, String> {
    if data.len() != nz * nj * ni * 8 {
        return Err(format!("z lines: {} values, expected {}", data.len(), nz * nj * ni * 8));
    }
    let mut out = vec![0.0; nz * nj * ni * 5];
    let mut ls = LineSolver::new(nz);
    let (mut cv, mut rho, mut sp, mut r) = (vec![0.0; nz], vec![0.0; nz], vec![0.0; nz], vec![0.0; 5 * nz]);
    let plane = nj * ni;
    for j in 0..nj {
        for i in 0..ni {
            for k in 0..nz {
                let q = k * plane + j * ni + i;
                let d = &data[8 * q..8 * q + 8];
                for m in 0..5 {
                    r[m * nz + k] = d[m];
                }
                cv[k] = d[5];
                rho[k] = d[6];
                sp[k] = d[7];
            }
            ls.solve(c, 2, &cv, &rho, &sp, &mut r);
            for k in 0..nz {
                let q = k * plane + j * ni + i;
                for m in 0..5 {
                    out[5 * q + m] = r[m * nz + k];
                }
            }
        }
    }
    Ok(out)
}

/// The flux and viscous terms of `exact_rhs` along axis `a` at line position `i`, NPB's
/// expressions (`f` the point's forcing, updated).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn flux(c: &Consts, a: usize, f: &mut [f64], i: usize, ue: &[[f64; 5]], buf: &[[f64; 5]], cuf: &[f64], q: &[f64]) {
    let (im1, ip1) = (i - 1, i + 1);
    let t2 = [c.tx2, c.ty2, c.tz2][a];
    let d1 = c.dtx1[a];
    let xc = c.xcon[a];
    let v = a + 1; // the component of the momentum along the line
    f[0] = f[0] - t2 * (ue[ip1][v] - ue[im1][v]) + d1[0] * (ue[ip1][0] - 2.0 * ue[i][0] + ue[im1][0]);
    for m in 1..4 {
        if m == v {
            f[m] = f[m] - t2 * ((ue[ip1][m] * buf[ip1][v] + c.c2 * (ue[ip1][4] - q[ip1])) - (ue[im1][m] * buf[im1][v] + c.c2 * (ue[im1][4] - q[im1]))) + xc[0] * (buf[ip1][m] - 2.0 * buf[i][m] + buf[im1][m]) + d1[m] * (ue[ip1][m] - 2.0 * ue[i][m] + ue[im1][m]);
        } else {
            f[m] = f[m] - t2 * (ue[ip1][m] * buf[ip1][v] - ue[im1][m] * buf[im1][v]) + xc[1] * (buf[ip1][m] - 2.0 * buf[i][m] + buf[im1][m]) + d1[m] * (ue[ip1][m] - 2.0 * ue[i][m] + ue[im1][m]);
        }
    }
    f[4] = f[4] - t2 * (buf[ip1][v] * (c.c1 * ue[ip1][4] - c.c2 * q[ip1]) - buf[im1][v] * (c.c1 * ue[im1][4] - c.c2 * q[im1])) + 0.5 * xc[2] * (buf[ip1][0] - 2.0 * buf[i][0] + buf[im1][0]) + xc[3] * (cuf[ip1] - 2.0 * cuf[i] + cuf[im1]) + xc[4] * (buf[ip1][4] - 2.0 * buf[i][4] + buf[im1][4]) + d1[4] * (ue[ip1][4] - 2.0 * ue[i][4] + ue[im1][4]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole serial benchmark on one slab (class S: 12^3, 100 steps, dt 0.015) and NPB's
    /// verification values.
    #[test]
    #[allow(clippy::excessive_precision)] // NPB's reference digits
    fn class_s_verifies_serially() {
        let n = 12;
        let mut sp = Sp::new(n, n, n, 0.015, 0, n).unwrap();
        sp.exact_rhs();
        sp.initialize();
        let step = |sp: &mut Sp| {
            sp.compute_aux();
            sp.compute_rhs();
            sp.txinvr();
            sp.xy_solve(0);
            sp.xy_solve(1);
            let d = sp.pack_z(1, n - 1);
            let out = z_solve_lines(&sp.c, n, n - 2, n - 2, &d).unwrap();
            sp.unpack_z(1, n - 1, &out).unwrap();
            sp.tzetar_add();
        };
        step(&mut sp);
        sp.initialize();
        for _ in 0..100 {
            step(&mut sp);
        }
        let scale = |mut v: [f64; 5]| {
            for x in v.iter_mut() {
                for _ in 0..3 {
                    *x /= (n - 2) as f64;
                }
                *x = x.sqrt();
            }
            v
        };
        let xce = scale(sp.error_norm_chain([0.0; 5]));
        sp.compute_aux();
        sp.compute_rhs();
        let mut xcr = scale(sp.rhs_norm_chain([0.0; 5]));
        for x in xcr.iter_mut() {
            *x /= 0.015;
        }
        let xcrref = [2.7470315451339479e-02, 1.0360746705285417e-02, 1.6235745065095532e-02, 1.5840557224455615e-02, 3.4849040609362460e-02];
        let xceref = [2.7289258557377227e-05, 1.0364446640837285e-05, 1.6154798287166471e-05, 1.5750704994480102e-05, 3.4177666183390531e-05];
        for m in 0..5 {
            assert!(((xcr[m] - xcrref[m]) / xcrref[m]).abs() <= 1e-8, "xcr {m}: {} vs {}", xcr[m], xcrref[m]);
            assert!(((xce[m] - xceref[m]) / xceref[m]).abs() <= 1e-8, "xce {m}: {} vs {}", xce[m], xceref[m]);
        }
    }

    /// Class S on two cells split along x (as NPB's multi-partition cuts each line): faces
    /// copied between the cells, the x lines solved in two pieces passing the boundary rows
    /// on; u after 5 steps equal bit for bit to the whole grid's.
    #[test]
    fn cells_split_along_x_give_the_whole_grids_bits() {
        let n = 12;
        let dt = 0.015;
        let mut whole = Sp::new_box([n; 3], dt, [0; 3], [n; 3]).unwrap();
        let mut cells = [Sp::new_box([n; 3], dt, [0, 0, 0], [5, n, n]).unwrap(), Sp::new_box([n; 3], dt, [5, 0, 0], [n, n, n]).unwrap()];
        for s in std::iter::once(&mut whole).chain(cells.iter_mut()) {
            s.exact_rhs();
            s.initialize();
        }
        for _ in 0..5 {
            let faces = [cells[0].region(Field::U, [3, 0, 0], [5, n, n]).unwrap(), cells[1].region(Field::U, [5, 0, 0], [7, n, n]).unwrap()];
            cells[1].set_region(Field::U, [3, 0, 0], [5, n, n], &faces[0]).unwrap();
            cells[0].set_region(Field::U, [5, 0, 0], [7, n, n], &faces[1]).unwrap();
            for s in std::iter::once(&mut whole).chain(cells.iter_mut()) {
                s.compute_aux();
                s.compute_rhs();
                s.txinvr();
            }
            whole.xy_solve(0);
            let fwd = cells[0].sweep_forward(0, &[]).unwrap();
            assert!(cells[1].sweep_forward(0, &fwd).unwrap().is_empty());
            let bwd = cells[1].sweep_backward(0, &[]).unwrap();
            assert!(cells[0].sweep_backward(0, &bwd).unwrap().is_empty());
            for s in cells.iter_mut() {
                s.ninvr(); // whole.xy_solve(0) includes it
            }
            for a in 1..3 {
                for s in std::iter::once(&mut whole).chain(cells.iter_mut()) {
                    s.sweep_forward(a, &[]).unwrap();
                    s.sweep_backward(a, &[]).unwrap();
                    if a == 1 {
                        s.pinvr();
                    }
                }
            }
            for s in std::iter::once(&mut whole).chain(cells.iter_mut()) {
                s.tzetar_add();
            }
        }
        for (cell, (lo, hi)) in cells.iter().zip([([0, 0, 0], [5, n, n]), ([5, 0, 0], [n, n, n])]) {
            let a = cell.region(Field::U, lo, hi).unwrap();
            let b = whole.region(Field::U, lo, hi).unwrap();
            assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
        }
    }
}
