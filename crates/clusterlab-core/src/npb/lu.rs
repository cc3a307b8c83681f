//! LU: the SSOR solver of NPB's LU benchmark (NPB 3.x) on one process's part of the grid.
//!
//! The grid is split in x and y (NPB's 2-D process grid, `xdim x ydim`); every process holds
//! all of z. A field (`u`, `rsd`, `frct`, `flux`) is a flat array of 5-vectors, `m` fastest,
//! then `i` (`-1 ..= nx + 2`: two ghost layers each side), then `j` (`-1 ..= ny + 2`), then
//! `k` (`1 ..= nz`); indices below are NPB's 1-based local ones. The caller (Python) moves the
//! ghost layers between processes as NPB's `exchange_1` (the pipelined wavefront of the
//! triangular solves) and `exchange_3` (two layers for `rhs` and `erhs`) do.
//!
//! Every formula and the order of its additions are NPB's MPI code's (`rhs`, `erhs`,
//! `jacld`, `jacu`, `blts`, `buts`, `exact`, `setbv`, `setiv`), so each point's value depends
//! only on its neighbours' values, never on the decomposition. The sums NPB reduces across
//! processes (`l2norm`, `error`, `pintgr`) are returned here as per-column or per-cell parts
//! placed in an array over the global grid, which the caller reduces (each entry has one
//! owner, so the sum adds only zeros) and adds in a fixed global order: the same bits for
//! every rank count.

/// NPB's c1 .. c5.
const C1: f64 = 1.40;
const C2: f64 = 0.40;
const C3: f64 = 1.00e-01;
const C4: f64 = 1.00;
const C5: f64 = 1.40;

/// Coefficients of the exact solution (NPB's `ce(m, 1..13)`).
const CE: [[f64; 13]; 5] = [
    [2.0, 0.0, 0.0, 4.0, 5.0, 3.0, 5.0e-01, 2.0e-02, 1.0e-02, 3.0e-02, 5.0e-01, 4.0e-01, 3.0e-01],
    [1.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 1.0e-02, 3.0e-02, 2.0e-02, 4.0e-01, 3.0e-01, 5.0e-01],
    [2.0, 2.0, 0.0, 0.0, 0.0, 2.0, 3.0, 4.0e-02, 3.0e-02, 5.0e-02, 3.0e-01, 5.0e-01, 4.0e-01],
    [2.0, 2.0, 0.0, 0.0, 0.0, 2.0, 3.0, 3.0e-02, 5.0e-02, 4.0e-02, 2.0e-01, 1.0e-01, 3.0e-01],
    [5.0, 4.0, 3.0, 2.0, 1.0e-01, 4.0e-01, 3.0e-01, 5.0e-02, 4.0e-02, 3.0e-02, 1.0e-01, 3.0e-01, 2.0e-01],
];

#[inline(always)]
fn sq(x: f64) -> f64 {
    x * x
}

/// Which field a ghost-layer exchange reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    U,
    Rsd,
}

/// One process's box and NPB's coefficients (`setcoeff`), all `Copy`.
#[derive(Clone, Copy, Debug)]
pub struct Geom {
    pub nx0: usize,
    pub ny0: usize,
    pub nz0: usize,
    pub nx: usize,
    pub ny: usize,
    pub nz: usize,
    /// Global offsets: local i is global `ipt + i`.
    pub ipt: usize,
    pub jpt: usize,
    pub north: bool,
    pub south: bool,
    pub west: bool,
    pub east: bool,
    pub ist: isize,
    pub iend: isize,
    pub jst: isize,
    pub jend: isize,
    pub dt: f64,
    pub omega: f64,
    pub dxi: f64,
    pub deta: f64,
    pub dzeta: f64,
    tx1: f64,
    tx2: f64,
    tx3: f64,
    ty1: f64,
    ty2: f64,
    ty3: f64,
    tz1: f64,
    tz2: f64,
    tz3: f64,
    dx: [f64; 5],
    dy: [f64; 5],
    dz: [f64; 5],
    dssp: f64,
}

impl Geom {
    /// Base index of the 5-vector at local (i, j, k).
    #[inline(always)]
    pub fn at(&self, i: isize, j: isize, k: usize) -> usize {
        (((k - 1) * (self.ny + 4) + (j + 1) as usize) * (self.nx + 4) + (i + 1) as usize) * 5
    }

    /// Values in one field array.
    pub fn field_len(&self) -> usize {
        (self.nx + 4) * (self.ny + 4) * self.nz * 5
    }

    /// NPB's exact solution at global (i, j, k), 1-based.
    pub fn exact(&self, i: usize, j: usize, k: usize) -> [f64; 5] {
        let xi = (i - 1) as f64 / (self.nx0 - 1) as f64;
        let eta = (j - 1) as f64 / (self.ny0 - 1) as f64;
        let zeta = (k - 1) as f64 / (self.nz - 1) as f64;
        let mut out = [0.0; 5];
        for (m, o) in out.iter_mut().enumerate() {
            let ce = &CE[m];
            *o = ce[0] + ce[1] * xi + ce[2] * eta + ce[3] * zeta + ce[4] * xi * xi + ce[5] * eta * eta + ce[6] * zeta * zeta + ce[7] * xi * xi * xi + ce[8] * eta * eta * eta + ce[9] * zeta * zeta * zeta + ce[10] * xi * xi * xi * xi + ce[11] * eta * eta * eta * eta + ce[12] * zeta * zeta * zeta * zeta;
        }
        out
    }
}

/// NPB's process grid for `n` processes (`proc_grid`, `setparams`' isqrt2): (xdim, ydim),
/// or None when NPB refuses the count.
pub fn proc_grid(n: usize) -> Option<(usize, usize)> {
    if n == 0 {
        return None;
    }
    let mut ydim = ((n as f64).sqrt() + 0.001) as usize;
    let mut xdim = n / ydim;
    while ydim >= 1 && xdim * ydim != n {
        ydim -= 1;
        xdim = n / ydim;
    }
    // NPB's compile-time rule (isqrt2) also asks 2 ydim >= xdim
    if xdim * ydim == n && 2 * ydim >= xdim {
        Some((xdim, ydim))
    } else {
        None
    }
}

/// The extent and offset of part `p` (0-based) of `n0` points split in `parts` (NPB's
/// `subdomain`: the first `n0 % parts` parts one point longer).
pub fn split(n0: usize, parts: usize, p: usize) -> (usize, usize) {
    let mm = n0 % parts;
    if p < mm {
        let n = n0 / parts + 1;
        (n, p * n)
    } else {
        let n = n0 / parts;
        (n, p * n + mm)
    }
}

/// One process's state: the fields, the Jacobian blocks of the current k-plane, and its box.
pub struct Lu {
    pub g: Geom,
    pub u: Vec<f64>,
    pub rsd: Vec<f64>,
    pub frct: Vec<f64>,
    flux: Vec<f64>,
    /// Jacobian blocks of one k-plane, row-major 5x5, at (j - 1) * nx + (i - 1).
    a: Vec<[f64; 25]>,
    b: Vec<[f64; 25]>,
    c: Vec<[f64; 25]>,
    d: Vec<[f64; 25]>,
    tv: Vec<[f64; 5]>,
}

impl Lu {
    /// The process at (row, col) (0-based; row along x) of an xdim x ydim grid, for an
    /// nx0 x ny0 x nz0 problem. Err when a part would have fewer than 3 points per axis
    /// (NPB's limit).
    #[allow(clippy::too_many_arguments)]
    pub fn new(nx0: usize, ny0: usize, nz0: usize, xdim: usize, ydim: usize, row: usize, col: usize, dt: f64, omega: f64) -> Result<Lu, String> {
        if xdim == 0 || ydim == 0 || row >= xdim || col >= ydim {
            return Err(format!("process ({row}, {col}) outside a {xdim} x {ydim} grid"));
        }
        if nx0 < 5 || ny0 < 5 || nz0 < 5 {
            return Err(format!("LU grid {nx0} x {ny0} x {nz0}: every extent must be at least 5"));
        }
        let (nx, ipt) = split(nx0, xdim, row);
        let (ny, jpt) = split(ny0, ydim, col);
        let nz = nz0;
        if nx < 3 || ny < 3 {
            return Err(format!("LU part {nx} x {ny} x {nz}: at least 3 points per axis per process (NPB's limit)"));
        }
        let (north, south, west, east) = (row > 0, row + 1 < xdim, col > 0, col + 1 < ydim);
        let dxi = 1.0 / (nx0 - 1) as f64;
        let deta = 1.0 / (ny0 - 1) as f64;
        let dzeta = 1.0 / (nz0 - 1) as f64;
        let g = Geom {
            nx0,
            ny0,
            nz0,
            nx,
            ny,
            nz,
            ipt,
            jpt,
            north,
            south,
            west,
            east,
            ist: if north { 1 } else { 2 },
            iend: if south { nx as isize } else { nx as isize - 1 },
            jst: if west { 1 } else { 2 },
            jend: if east { ny as isize } else { ny as isize - 1 },
            dt,
            omega,
            dxi,
            deta,
            dzeta,
            tx1: 1.0 / (dxi * dxi),
            tx2: 1.0 / (2.0 * dxi),
            tx3: 1.0 / dxi,
            ty1: 1.0 / (deta * deta),
            ty2: 1.0 / (2.0 * deta),
            ty3: 1.0 / deta,
            tz1: 1.0 / (dzeta * dzeta),
            tz2: 1.0 / (2.0 * dzeta),
            tz3: 1.0 / dzeta,
            dx: [0.75; 5],
            dy: [0.75; 5],
            dz: [1.00; 5],
            dssp: 0.75f64.max(0.75).max(1.00) / 4.0,
        };
        let len = g.field_len();
        let plane = nx * ny;
        Ok(Lu {
            g,
            u: vec![0.0; len],
            rsd: vec![0.0; len],
            frct: vec![0.0; len],
            flux: vec![0.0; len],
            a: vec![[0.0; 25]; plane],
            b: vec![[0.0; 25]; plane],
            c: vec![[0.0; 25]; plane],
            d: vec![[0.0; 25]; plane],
            tv: vec![[0.0; 5]; plane],
        })
    }

    fn field(&self, f: Field) -> &[f64] {
        match f {
            Field::U => &self.u,
            Field::Rsd => &self.rsd,
        }
    }

    fn field_mut(&mut self, f: Field) -> &mut [f64] {
        match f {
            Field::U => &mut self.u,
            Field::Rsd => &mut self.rsd,
        }
    }

    /// NPB's `setbv`: the exact solution on the faces of the global box this process holds.
    pub fn setbv(&mut self) {
        let g = self.g;
        let (nx, ny, nz) = (g.nx as isize, g.ny as isize, g.nz);
        let put = |u: &mut Vec<f64>, i: isize, j: isize, k: usize, v: [f64; 5]| {
            let p = g.at(i, j, k);
            u[p..p + 5].copy_from_slice(&v);
        };
        for j in 1..=ny {
            let jg = g.jpt + j as usize;
            for i in 1..=nx {
                let ig = g.ipt + i as usize;
                put(&mut self.u, i, j, 1, g.exact(ig, jg, 1));
                put(&mut self.u, i, j, nz, g.exact(ig, jg, nz));
            }
        }
        if !g.west {
            for k in 1..=nz {
                for i in 1..=nx {
                    put(&mut self.u, i, 1, k, g.exact(g.ipt + i as usize, 1, k));
                }
            }
        }
        if !g.east {
            for k in 1..=nz {
                for i in 1..=nx {
                    put(&mut self.u, i, ny, k, g.exact(g.ipt + i as usize, g.ny0, k));
                }
            }
        }
        if !g.north {
            for k in 1..=nz {
                for j in 1..=ny {
                    put(&mut self.u, 1, j, k, g.exact(1, g.jpt + j as usize, k));
                }
            }
        }
        if !g.south {
            for k in 1..=nz {
                for j in 1..=ny {
                    put(&mut self.u, nx, j, k, g.exact(g.nx0, g.jpt + j as usize, k));
                }
            }
        }
    }

    /// NPB's `setiv`: the interior by trilinear interpolation of the boundary values.
    pub fn setiv(&mut self) {
        let g = self.g;
        let nz = g.nz;
        for k in 2..nz {
            let zeta = (k - 1) as f64 / (nz - 1) as f64;
            for j in 1..=g.ny {
                let jg = g.jpt + j;
                if jg == 1 || jg == g.ny0 {
                    continue;
                }
                let eta = (jg - 1) as f64 / (g.ny0 - 1) as f64;
                for i in 1..=g.nx {
                    let ig = g.ipt + i;
                    if ig == 1 || ig == g.nx0 {
                        continue;
                    }
                    let xi = (ig - 1) as f64 / (g.nx0 - 1) as f64;
                    let ue_1jk = g.exact(1, jg, k);
                    let ue_nx0jk = g.exact(g.nx0, jg, k);
                    let ue_i1k = g.exact(ig, 1, k);
                    let ue_iny0k = g.exact(ig, g.ny0, k);
                    let ue_ij1 = g.exact(ig, jg, 1);
                    let ue_ijnz = g.exact(ig, jg, nz);
                    let p = g.at(i as isize, j as isize, k);
                    for m in 0..5 {
                        let pxi = (1.0 - xi) * ue_1jk[m] + xi * ue_nx0jk[m];
                        let peta = (1.0 - eta) * ue_i1k[m] + eta * ue_iny0k[m];
                        let pzeta = (1.0 - zeta) * ue_ij1[m] + zeta * ue_ijnz[m];
                        self.u[p + m] = pxi + peta + pzeta - pxi * peta - peta * pzeta - pzeta * pxi + pxi * peta * pzeta;
                    }
                }
            }
        }
    }

    /// First step of NPB's `erhs`: frct = 0, rsd = the exact solution on the whole local box
    /// (then the caller exchanges rsd's ghosts along x and calls `erhs_xi`, along y and
    /// `erhs_eta`, then `erhs_zeta`).
    pub fn erhs_init(&mut self) {
        let g = self.g;
        self.frct.iter_mut().for_each(|x| *x = 0.0);
        for k in 1..=g.nz {
            for j in 1..=g.ny {
                for i in 1..=g.nx {
                    let p = g.at(i as isize, j as isize, k);
                    let v = g.exact(g.ipt + i, g.jpt + j, k);
                    self.rsd[p..p + 5].copy_from_slice(&v);
                }
            }
        }
    }

    pub fn erhs_xi(&mut self) {
        xi_terms(&self.g, &self.rsd, &mut self.frct, &mut self.flux);
    }

    pub fn erhs_eta(&mut self) {
        eta_terms(&self.g, &self.rsd, &mut self.frct, &mut self.flux);
    }

    pub fn erhs_zeta(&mut self) {
        zeta_terms(&self.g, &self.rsd, &mut self.frct, &mut self.flux, true);
    }

    /// First step of NPB's `rhs`: rsd = -frct (then the caller exchanges u's ghosts along x,
    /// calls `rhs_xi`, exchanges along y, calls `rhs_eta` and `rhs_zeta`).
    pub fn rhs_init(&mut self) {
        let g = self.g;
        for k in 1..=g.nz {
            for j in 1..=g.ny as isize {
                let p = g.at(1, j, k);
                let q = g.at(g.nx as isize, j, k) + 5;
                for x in p..q {
                    self.rsd[x] = -self.frct[x];
                }
            }
        }
    }

    pub fn rhs_xi(&mut self) {
        xi_terms(&self.g, &self.u, &mut self.rsd, &mut self.flux);
    }

    pub fn rhs_eta(&mut self) {
        eta_terms(&self.g, &self.u, &mut self.rsd, &mut self.flux);
    }

    pub fn rhs_zeta(&mut self) {
        zeta_terms(&self.g, &self.u, &mut self.rsd, &mut self.flux, false);
    }

    /// SSOR's first step: rsd = dt rsd on the interior.
    pub fn scale_rsd(&mut self) {
        let g = self.g;
        for k in 2..g.nz {
            for j in g.jst..=g.jend {
                for i in g.ist..=g.iend {
                    let p = g.at(i, j, k);
                    for m in 0..5 {
                        self.rsd[p + m] *= g.dt;
                    }
                }
            }
        }
    }

    /// SSOR's update: u = u + tmp rsd on the interior, tmp = 1 / (omega (2 - omega)).
    pub fn update_u(&mut self) {
        let g = self.g;
        let tmp = 1.0 / (g.omega * (2.0 - g.omega));
        for k in 2..g.nz {
            for j in g.jst..=g.jend {
                for i in g.ist..=g.iend {
                    let p = g.at(i, j, k);
                    for m in 0..5 {
                        self.u[p + m] += tmp * self.rsd[p + m];
                    }
                }
            }
        }
    }

    /// The 5-vectors of `field` at the points `(layer, t)` (axis 0: layer along i, t along
    /// j) or `(t, layer)` (axis 1), for each layer, each k in k0..=k1 and each t in t0..=t1,
    /// in that nesting: what NPB's exchanges send.
    #[allow(clippy::too_many_arguments)]
    pub fn pack(&self, field: Field, axis: usize, layers: &[isize], t0: isize, t1: isize, k0: usize, k1: usize) -> Vec<f64> {
        let g = &self.g;
        let f = self.field(field);
        let mut out = Vec::with_capacity(layers.len() * (k1 + 1 - k0) * (t1 + 1 - t0).max(0) as usize * 5);
        for &l in layers {
            for k in k0..=k1 {
                for t in t0..=t1 {
                    let p = if axis == 0 { g.at(l, t, k) } else { g.at(t, l, k) };
                    out.extend_from_slice(&f[p..p + 5]);
                }
            }
        }
        out
    }

    /// The inverse of `pack`: writes `data` into those points.
    #[allow(clippy::too_many_arguments)]
    pub fn unpack(&mut self, field: Field, axis: usize, layers: &[isize], t0: isize, t1: isize, k0: usize, k1: usize, data: &[f64]) -> Result<(), String> {
        let want = layers.len() * (k1 + 1 - k0) * (t1 + 1 - t0).max(0) as usize * 5;
        if data.len() != want {
            return Err(format!("ghost data: {} values, expected {want}", data.len()));
        }
        let g = self.g;
        let f = self.field_mut(field);
        let mut q = 0;
        for &l in layers {
            for k in k0..=k1 {
                for t in t0..=t1 {
                    let p = if axis == 0 { g.at(l, t, k) } else { g.at(t, l, k) };
                    f[p..p + 5].copy_from_slice(&data[q..q + 5]);
                    q += 5;
                }
            }
        }
        Ok(())
    }

    /// Whether a ghost exchange's points lie in the arrays.
    pub fn valid_points(&self, axis: usize, layers: &[isize], t0: isize, t1: isize, k0: usize, k1: usize) -> bool {
        let g = &self.g;
        let (nl, nt) = if axis == 0 { (g.nx as isize, g.ny as isize) } else { (g.ny as isize, g.nx as isize) };
        axis < 2 && layers.iter().all(|&l| (-1..=nl + 2).contains(&l)) && t0 >= -1 && t1 <= nt + 2 && k0 >= 1 && k0 <= k1 && k1 <= g.nz
    }

    /// NPB's `jacld(k)`: the lower-triangular blocks (a: k-1, b: j-1, c: i-1) and the
    /// diagonal d of plane k.
    pub fn jacld(&mut self, k: usize) {
        let g = self.g;
        for j in g.jst..=g.jend {
            for i in g.ist..=g.iend {
                let at = |i: isize, j: isize, k: usize| -> [f64; 5] {
                    let p = g.at(i, j, k);
                    self.u[p..p + 5].try_into().unwrap()
                };
                let (p, z, y, x) = (at(i, j, k), at(i, j, k - 1), at(i, j - 1, k), at(i - 1, j, k));
                let q = (j - 1) as usize * g.nx + (i - 1) as usize;
                jac_lower(&g, &p, &z, &y, &x, &mut self.d[q], &mut self.a[q], &mut self.b[q], &mut self.c[q]);
            }
        }
    }

    /// NPB's `jacu(k)`: the upper-triangular blocks (a: i+1, b: j+1, c: k+1) and d.
    pub fn jacu(&mut self, k: usize) {
        let g = self.g;
        for j in g.jst..=g.jend {
            for i in g.ist..=g.iend {
                let at = |i: isize, j: isize, k: usize| -> [f64; 5] {
                    let p = g.at(i, j, k);
                    self.u[p..p + 5].try_into().unwrap()
                };
                let (p, x, y, z) = (at(i, j, k), at(i + 1, j, k), at(i, j + 1, k), at(i, j, k + 1));
                let q = (j - 1) as usize * g.nx + (i - 1) as usize;
                jac_upper(&g, &p, &x, &y, &z, &mut self.d[q], &mut self.a[q], &mut self.b[q], &mut self.c[q]);
            }
        }
    }

    /// NPB's `blts(k)` without its exchanges: rsd <- L^-1 rsd on plane k, given plane k-1
    /// and the north (i = 0) and west (j = 0) ghosts of plane k.
    pub fn blts(&mut self, k: usize) {
        let g = self.g;
        let om = g.omega;
        let v = &mut self.rsd;
        for j in g.jst..=g.jend {
            for i in g.ist..=g.iend {
                let q = (j - 1) as usize * g.nx + (i - 1) as usize;
                let (p, pz) = (g.at(i, j, k), g.at(i, j, k - 1));
                let ldz = &self.a[q];
                for m in 0..5 {
                    let r = &ldz[m * 5..m * 5 + 5];
                    v[p + m] -= om * (r[0] * v[pz] + r[1] * v[pz + 1] + r[2] * v[pz + 2] + r[3] * v[pz + 3] + r[4] * v[pz + 4]);
                }
            }
        }
        for j in g.jst..=g.jend {
            for i in g.ist..=g.iend {
                let q = (j - 1) as usize * g.nx + (i - 1) as usize;
                let (p, py, px) = (g.at(i, j, k), g.at(i, j - 1, k), g.at(i - 1, j, k));
                let (ldy, ldx) = (&self.b[q], &self.c[q]);
                for m in 0..5 {
                    let (ry, rx) = (&ldy[m * 5..m * 5 + 5], &ldx[m * 5..m * 5 + 5]);
                    v[p + m] -= om * (ry[0] * v[py] + rx[0] * v[px] + ry[1] * v[py + 1] + rx[1] * v[px + 1] + ry[2] * v[py + 2] + rx[2] * v[px + 2] + ry[3] * v[py + 3] + rx[3] * v[px + 3] + ry[4] * v[py + 4] + rx[4] * v[px + 4]);
                }
                let mut w: [f64; 5] = v[p..p + 5].try_into().unwrap();
                solve5(&self.d[q], &mut w);
                v[p..p + 5].copy_from_slice(&w);
            }
        }
    }

    /// NPB's `buts(k)` without its exchanges: rsd <- rsd - U^-1 (...) on plane k, given plane
    /// k+1 and the south (i = nx+1) and east (j = ny+1) ghosts of plane k.
    pub fn buts(&mut self, k: usize) {
        let g = self.g;
        let om = g.omega;
        let v = &mut self.rsd;
        for j in (g.jst..=g.jend).rev() {
            for i in (g.ist..=g.iend).rev() {
                let q = (j - 1) as usize * g.nx + (i - 1) as usize;
                let pz = g.at(i, j, k + 1);
                let udz = &self.c[q];
                for m in 0..5 {
                    let r = &udz[m * 5..m * 5 + 5];
                    self.tv[q][m] = om * (r[0] * v[pz] + r[1] * v[pz + 1] + r[2] * v[pz + 2] + r[3] * v[pz + 3] + r[4] * v[pz + 4]);
                }
            }
        }
        for j in (g.jst..=g.jend).rev() {
            for i in (g.ist..=g.iend).rev() {
                let q = (j - 1) as usize * g.nx + (i - 1) as usize;
                let (p, py, px) = (g.at(i, j, k), g.at(i, j + 1, k), g.at(i + 1, j, k));
                let (udx, udy) = (&self.a[q], &self.b[q]);
                let mut t = self.tv[q];
                for m in 0..5 {
                    let (ry, rx) = (&udy[m * 5..m * 5 + 5], &udx[m * 5..m * 5 + 5]);
                    t[m] += om * (ry[0] * v[py] + rx[0] * v[px] + ry[1] * v[py + 1] + rx[1] * v[px + 1] + ry[2] * v[py + 2] + rx[2] * v[px + 2] + ry[3] * v[py + 3] + rx[3] * v[px + 3] + ry[4] * v[py + 4] + rx[4] * v[px + 4]);
                }
                solve5(&self.d[q], &mut t);
                for m in 0..5 {
                    v[p + m] -= t[m];
                }
                self.tv[q] = t;
            }
        }
    }

    /// NPB's `l2norm` before its reduction: for each interior column (i, j) of this process,
    /// sum over k = 2 ..= nz-1 of field^2 (per component), placed at global column
    /// ((jg - 1) nx0 + ig - 1) of an nx0 * ny0 * 5 array of zeros.
    pub fn l2_columns(&self, field: Field) -> Vec<f64> {
        let g = self.g;
        let v = self.field(field);
        let mut out = vec![0.0; g.nx0 * g.ny0 * 5];
        for j in g.jst..=g.jend {
            for i in g.ist..=g.iend {
                let col = ((g.jpt + j as usize - 1) * g.nx0 + g.ipt + i as usize - 1) * 5;
                let mut s = [0.0; 5];
                for k in 2..g.nz {
                    let p = g.at(i, j, k);
                    for m in 0..5 {
                        s[m] += v[p + m] * v[p + m];
                    }
                }
                out[col..col + 5].copy_from_slice(&s);
            }
        }
        out
    }

    /// NPB's `error` before its reduction: per interior column, the sum over k of
    /// (exact - u)^2, placed as in `l2_columns`.
    pub fn error_columns(&self) -> Vec<f64> {
        let g = self.g;
        let mut out = vec![0.0; g.nx0 * g.ny0 * 5];
        for j in g.jst..=g.jend {
            let jg = g.jpt + j as usize;
            for i in g.ist..=g.iend {
                let ig = g.ipt + i as usize;
                let col = ((jg - 1) * g.nx0 + ig - 1) * 5;
                let mut s = [0.0; 5];
                for k in 2..g.nz {
                    let e = g.exact(ig, jg, k);
                    let p = g.at(i, j, k);
                    for m in 0..5 {
                        let tmp = e[m] - self.u[p + m];
                        s[m] += sq(tmp);
                    }
                }
                out[col..col + 5].copy_from_slice(&s);
            }
        }
        out
    }

    /// pintgr's integrand c2 (u5 - 0.5 (u2^2 + u3^2 + u4^2) / u1) at local (i, j, k).
    pub fn phi(&self, i: isize, j: isize, k: usize) -> f64 {
        let p = self.g.at(i, j, k);
        let u = &self.u[p..p + 5];
        C2 * (u[4] - 0.50 * (sq(u[1]) + sq(u[2]) + sq(u[3])) / u[0])
    }
}

/// Solves d w' = w in place for one 5x5 block (row-major) as NPB's blts/buts do: forward
/// elimination without pivoting, then back substitution, in NPB's order of operations.
#[inline(always)]
fn solve5(d: &[f64; 25], w: &mut [f64; 5]) {
    let mut t = *d;
    for p in 0..4 {
        let tmp1 = 1.0 / t[p * 5 + p];
        for r in p + 1..5 {
            let tmp = tmp1 * t[r * 5 + p];
            for c in p + 1..5 {
                t[r * 5 + c] -= tmp * t[p * 5 + c];
            }
            w[r] -= w[p] * tmp;
        }
    }
    for r in (0..5).rev() {
        let mut s = w[r];
        for c in r + 1..5 {
            s -= t[r * 5 + c] * w[c];
        }
        w[r] = s / t[r * 5 + r];
    }
}

/// The block diagonal of jacld/jacu at point values `p` (NPB's formulas).
#[inline(always)]
fn jac_diag(g: &Geom, p: &[f64; 5], d: &mut [f64; 25]) {
    let (dt, tx1, ty1, tz1) = (g.dt, g.tx1, g.ty1, g.tz1);
    let [dx1, dx2, dx3, dx4, dx5] = g.dx;
    let [dy1, dy2, dy3, dy4, dy5] = g.dy;
    let [dz1, dz2, dz3, dz4, dz5] = g.dz;
    let r43 = 4.0 / 3.0;
    let c1345 = C1 * C3 * C4 * C5;
    let c34 = C3 * C4;
        let tmp1 = 1.0 / p[0];
        let tmp2 = tmp1 * tmp1;
        let tmp3 = tmp1 * tmp2;
        d[0] = 1.0 + dt * 2.0 * ( tx1 * dx1 + ty1 * dy1 + tz1 * dz1 );
        d[1] = 0.0;
        d[2] = 0.0;
        d[3] = 0.0;
        d[4] = 0.0;
        d[5] = dt * 2.0 * ( tx1 * ( - r43 * c34 * tmp2 * p[1] ) + ty1 * ( - c34 * tmp2 * p[1] ) + tz1 * ( - c34 * tmp2 * p[1] ) );
        d[6] = 1.0 + dt * 2.0 * ( tx1 * r43 * c34 * tmp1 + ty1 * c34 * tmp1 + tz1 * c34 * tmp1 ) + dt * 2.0 * ( tx1 * dx2 + ty1 * dy2 + tz1 * dz2 );
        d[7] = 0.0;
        d[8] = 0.0;
        d[9] = 0.0;
        d[10] = dt * 2.0 * ( tx1 * ( - c34 * tmp2 * p[2] ) + ty1 * ( - r43 * c34 * tmp2 * p[2] ) + tz1 * ( - c34 * tmp2 * p[2] ) );
        d[11] = 0.0;
        d[12] = 1.0 + dt * 2.0 * ( tx1 * c34 * tmp1 + ty1 * r43 * c34 * tmp1 + tz1 * c34 * tmp1 ) + dt * 2.0 * ( tx1 * dx3 + ty1 * dy3 + tz1 * dz3 );
        d[13] = 0.0;
        d[14] = 0.0;
        d[15] = dt * 2.0 * ( tx1 * ( - c34 * tmp2 * p[3] ) + ty1 * ( - c34 * tmp2 * p[3] ) + tz1 * ( - r43 * c34 * tmp2 * p[3] ) );
        d[16] = 0.0;
        d[17] = 0.0;
        d[18] = 1.0 + dt * 2.0 * ( tx1 * c34 * tmp1 + ty1 * c34 * tmp1 + tz1 * r43 * c34 * tmp1 ) + dt * 2.0 * ( tx1 * dx4 + ty1 * dy4 + tz1 * dz4 );
        d[19] = 0.0;
        d[20] = dt * 2.0 * ( tx1 * ( - ( r43*c34 - c1345 ) * tmp3 * ( sq(p[1]) ) - ( c34 - c1345 ) * tmp3 * ( sq(p[2]) ) - ( c34 - c1345 ) * tmp3 * ( sq(p[3]) ) - ( c1345 ) * tmp2 * p[4] ) + ty1 * ( - ( c34 - c1345 ) * tmp3 * ( sq(p[1]) ) - ( r43*c34 - c1345 ) * tmp3 * ( sq(p[2]) ) - ( c34 - c1345 ) * tmp3 * ( sq(p[3]) ) - ( c1345 ) * tmp2 * p[4] ) + tz1 * ( - ( c34 - c1345 ) * tmp3 * ( sq(p[1]) ) - ( c34 - c1345 ) * tmp3 * ( sq(p[2]) ) - ( r43*c34 - c1345 ) * tmp3 * ( sq(p[3]) ) - ( c1345 ) * tmp2 * p[4] ) );
        d[21] = dt * 2.0 * ( tx1 * ( r43*c34 - c1345 ) * tmp2 * p[1] + ty1 * ( c34 - c1345 ) * tmp2 * p[1] + tz1 * ( c34 - c1345 ) * tmp2 * p[1] );
        d[22] = dt * 2.0 * ( tx1 * ( c34 - c1345 ) * tmp2 * p[2] + ty1 * ( r43*c34 -c1345 ) * tmp2 * p[2] + tz1 * ( c34 - c1345 ) * tmp2 * p[2] );
        d[23] = dt * 2.0 * ( tx1 * ( c34 - c1345 ) * tmp2 * p[3] + ty1 * ( c34 - c1345 ) * tmp2 * p[3] + tz1 * ( r43*c34 - c1345 ) * tmp2 * p[3] );
        d[24] = 1.0 + dt * 2.0 * ( tx1 * c1345 * tmp1 + ty1 * c1345 * tmp1 + tz1 * c1345 * tmp1 ) + dt * 2.0 * ( tx1 * dx5 + ty1 * dy5 + tz1 * dz5 );
}

/// jacld's sub-diagonal blocks from the values at k-1 (z), j-1 (y) and i-1 (x).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn jac_lower(g: &Geom, p: &[f64; 5], z: &[f64; 5], y: &[f64; 5], x: &[f64; 5], d: &mut [f64; 25], a: &mut [f64; 25], b: &mut [f64; 25], c: &mut [f64; 25]) {
    jac_diag(g, p, d);
    let (dt, tx1, tx2, ty1, ty2, tz1, tz2) = (g.dt, g.tx1, g.tx2, g.ty1, g.ty2, g.tz1, g.tz2);
    let [dx1, dx2, dx3, dx4, dx5] = g.dx;
    let [dy1, dy2, dy3, dy4, dy5] = g.dy;
    let [dz1, dz2, dz3, dz4, dz5] = g.dz;
    let (c1, c2) = (C1, C2);
    let r43 = 4.0 / 3.0;
    let c1345 = C1 * C3 * C4 * C5;
    let c34 = C3 * C4;
    let tmp1 = 1.0 / z[0];
    let tmp2 = tmp1 * tmp1;
    let tmp3 = tmp1 * tmp2;
    a[0] = - dt * tz1 * dz1;
    a[1] = 0.0;
    a[2] = 0.0;
    a[3] = - dt * tz2;
    a[4] = 0.0;
    a[5] = - dt * tz2 * ( - ( z[1]*z[3] ) * tmp2 ) - dt * tz1 * ( - c34 * tmp2 * z[1] );
    a[6] = - dt * tz2 * ( z[3] * tmp1 ) - dt * tz1 * c34 * tmp1 - dt * tz1 * dz2;
    a[7] = 0.0;
    a[8] = - dt * tz2 * ( z[1] * tmp1 );
    a[9] = 0.0;
    a[10] = - dt * tz2 * ( - ( z[2]*z[3] ) * tmp2 ) - dt * tz1 * ( - c34 * tmp2 * z[2] );
    a[11] = 0.0;
    a[12] = - dt * tz2 * ( z[3] * tmp1 ) - dt * tz1 * ( c34 * tmp1 ) - dt * tz1 * dz3;
    a[13] = - dt * tz2 * ( z[2] * tmp1 );
    a[14] = 0.0;
    a[15] = - dt * tz2 * ( - sq(z[3] * tmp1) + 0.50 * c2 * ( ( z[1] * z[1] + z[2] * z[2] + z[3] * z[3] ) * tmp2 ) ) - dt * tz1 * ( - r43 * c34 * tmp2 * z[3] );
    a[16] = - dt * tz2 * ( - c2 * ( z[1] * tmp1 ) );
    a[17] = - dt * tz2 * ( - c2 * ( z[2] * tmp1 ) );
    a[18] = - dt * tz2 * ( 2.0 - c2 ) * ( z[3] * tmp1 ) - dt * tz1 * ( r43 * c34 * tmp1 ) - dt * tz1 * dz4;
    a[19] = - dt * tz2 * c2;
    a[20] = - dt * tz2 * ( ( c2 * ( z[1] * z[1] + z[2] * z[2] + z[3] * z[3] ) * tmp2 - c1 * ( z[4] * tmp1 ) ) * ( z[3] * tmp1 ) ) - dt * tz1 * ( - ( c34 - c1345 ) * tmp3 * (sq(z[1])) - ( c34 - c1345 ) * tmp3 * (sq(z[2])) - ( r43*c34 - c1345 )* tmp3 * (sq(z[3])) - c1345 * tmp2 * z[4] );
    a[21] = - dt * tz2 * ( - c2 * ( z[1]*z[3] ) * tmp2 ) - dt * tz1 * ( c34 - c1345 ) * tmp2 * z[1];
    a[22] = - dt * tz2 * ( - c2 * ( z[2]*z[3] ) * tmp2 ) - dt * tz1 * ( c34 - c1345 ) * tmp2 * z[2];
    a[23] = - dt * tz2 * ( c1 * ( z[4] * tmp1 ) - 0.50 * c2 * ( ( z[1]*z[1] + z[2]*z[2] + 3.0*z[3]*z[3] ) * tmp2 ) ) - dt * tz1 * ( r43*c34 - c1345 ) * tmp2 * z[3];
    a[24] = - dt * tz2 * ( c1 * ( z[3] * tmp1 ) ) - dt * tz1 * c1345 * tmp1 - dt * tz1 * dz5;
    let tmp1 = 1.0 / y[0];
    let tmp2 = tmp1 * tmp1;
    let tmp3 = tmp1 * tmp2;
    b[0] = - dt * ty1 * dy1;
    b[1] = 0.0;
    b[2] = - dt * ty2;
    b[3] = 0.0;
    b[4] = 0.0;
    b[5] = - dt * ty2 * ( - ( y[1]*y[2] ) * tmp2 ) - dt * ty1 * ( - c34 * tmp2 * y[1] );
    b[6] = - dt * ty2 * ( y[2] * tmp1 ) - dt * ty1 * ( c34 * tmp1 ) - dt * ty1 * dy2;
    b[7] = - dt * ty2 * ( y[1] * tmp1 );
    b[8] = 0.0;
    b[9] = 0.0;
    b[10] = - dt * ty2 * ( - sq(y[2] * tmp1) + 0.50 * c2 * ( ( y[1] * y[1] + y[2] * y[2] + y[3] * y[3] ) * tmp2 ) ) - dt * ty1 * ( - r43 * c34 * tmp2 * y[2] );
    b[11] = - dt * ty2 * ( - c2 * ( y[1] * tmp1 ) );
    b[12] = - dt * ty2 * ( ( 2.0 - c2 ) * ( y[2] * tmp1 ) ) - dt * ty1 * ( r43 * c34 * tmp1 ) - dt * ty1 * dy3;
    b[13] = - dt * ty2 * ( - c2 * ( y[3] * tmp1 ) );
    b[14] = - dt * ty2 * c2;
    b[15] = - dt * ty2 * ( - ( y[2]*y[3] ) * tmp2 ) - dt * ty1 * ( - c34 * tmp2 * y[3] );
    b[16] = 0.0;
    b[17] = - dt * ty2 * ( y[3] * tmp1 );
    b[18] = - dt * ty2 * ( y[2] * tmp1 ) - dt * ty1 * ( c34 * tmp1 ) - dt * ty1 * dy4;
    b[19] = 0.0;
    b[20] = - dt * ty2 * ( ( c2 * ( y[1] * y[1] + y[2] * y[2] + y[3] * y[3] ) * tmp2 - c1 * ( y[4] * tmp1 ) ) * ( y[2] * tmp1 ) ) - dt * ty1 * ( - ( c34 - c1345 )*tmp3*(sq(y[1])) - ( r43*c34 - c1345 )*tmp3*(sq(y[2])) - ( c34 - c1345 )*tmp3*(sq(y[3])) - c1345*tmp2*y[4] );
    b[21] = - dt * ty2 * ( - c2 * ( y[1]*y[2] ) * tmp2 ) - dt * ty1 * ( c34 - c1345 ) * tmp2 * y[1];
    b[22] = - dt * ty2 * ( c1 * ( y[4] * tmp1 ) - 0.50 * c2 * ( ( y[1]*y[1] + 3.0 * y[2]*y[2] + y[3]*y[3] ) * tmp2 ) ) - dt * ty1 * ( r43*c34 - c1345 ) * tmp2 * y[2];
    b[23] = - dt * ty2 * ( - c2 * ( y[2]*y[3] ) * tmp2 ) - dt * ty1 * ( c34 - c1345 ) * tmp2 * y[3];
    b[24] = - dt * ty2 * ( c1 * ( y[2] * tmp1 ) ) - dt * ty1 * c1345 * tmp1 - dt * ty1 * dy5;
    let tmp1 = 1.0 / x[0];
    let tmp2 = tmp1 * tmp1;
    let tmp3 = tmp1 * tmp2;
    c[0] = - dt * tx1 * dx1;
    c[1] = - dt * tx2;
    c[2] = 0.0;
    c[3] = 0.0;
    c[4] = 0.0;
    c[5] = - dt * tx2 * ( - sq(x[1] * tmp1) + c2 * 0.50 * ( x[1] * x[1] + x[2] * x[2] + x[3] * x[3] ) * tmp2 ) - dt * tx1 * ( - r43 * c34 * tmp2 * x[1] );
    c[6] = - dt * tx2 * ( ( 2.0 - c2 ) * ( x[1] * tmp1 ) ) - dt * tx1 * ( r43 * c34 * tmp1 ) - dt * tx1 * dx2;
    c[7] = - dt * tx2 * ( - c2 * ( x[2] * tmp1 ) );
    c[8] = - dt * tx2 * ( - c2 * ( x[3] * tmp1 ) );
    c[9] = - dt * tx2 * c2;
    c[10] = - dt * tx2 * ( - ( x[1] * x[2] ) * tmp2 ) - dt * tx1 * ( - c34 * tmp2 * x[2] );
    c[11] = - dt * tx2 * ( x[2] * tmp1 );
    c[12] = - dt * tx2 * ( x[1] * tmp1 ) - dt * tx1 * ( c34 * tmp1 ) - dt * tx1 * dx3;
    c[13] = 0.0;
    c[14] = 0.0;
    c[15] = - dt * tx2 * ( - ( x[1]*x[3] ) * tmp2 ) - dt * tx1 * ( - c34 * tmp2 * x[3] );
    c[16] = - dt * tx2 * ( x[3] * tmp1 );
    c[17] = 0.0;
    c[18] = - dt * tx2 * ( x[1] * tmp1 ) - dt * tx1 * ( c34 * tmp1 ) - dt * tx1 * dx4;
    c[19] = 0.0;
    c[20] = - dt * tx2 * ( ( c2 * ( x[1] * x[1] + x[2] * x[2] + x[3] * x[3] ) * tmp2 - c1 * ( x[4] * tmp1 ) ) * ( x[1] * tmp1 ) ) - dt * tx1 * ( - ( r43*c34 - c1345 ) * tmp3 * ( sq(x[1]) ) - ( c34 - c1345 ) * tmp3 * ( sq(x[2]) ) - ( c34 - c1345 ) * tmp3 * ( sq(x[3]) ) - c1345 * tmp2 * x[4] );
    c[21] = - dt * tx2 * ( c1 * ( x[4] * tmp1 ) - 0.50 * c2 * ( ( 3.0*x[1]*x[1] + x[2]*x[2] + x[3]*x[3] ) * tmp2 ) ) - dt * tx1 * ( r43*c34 - c1345 ) * tmp2 * x[1];
    c[22] = - dt * tx2 * ( - c2 * ( x[2]*x[1] ) * tmp2 ) - dt * tx1 * ( c34 - c1345 ) * tmp2 * x[2];
    c[23] = - dt * tx2 * ( - c2 * ( x[3]*x[1] ) * tmp2 ) - dt * tx1 * ( c34 - c1345 ) * tmp2 * x[3];
    c[24] = - dt * tx2 * ( c1 * ( x[1] * tmp1 ) ) - dt * tx1 * c1345 * tmp1 - dt * tx1 * dx5;
}

/// jacu's super-diagonal blocks from the values at i+1 (x), j+1 (y) and k+1 (z).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn jac_upper(g: &Geom, p: &[f64; 5], x: &[f64; 5], y: &[f64; 5], z: &[f64; 5], d: &mut [f64; 25], a: &mut [f64; 25], b: &mut [f64; 25], c: &mut [f64; 25]) {
    jac_diag(g, p, d);
    let (dt, tx1, tx2, ty1, ty2, tz1, tz2) = (g.dt, g.tx1, g.tx2, g.ty1, g.ty2, g.tz1, g.tz2);
    let [dx1, dx2, dx3, dx4, dx5] = g.dx;
    let [dy1, dy2, dy3, dy4, dy5] = g.dy;
    let [dz1, dz2, dz3, dz4, dz5] = g.dz;
    let (c1, c2) = (C1, C2);
    let r43 = 4.0 / 3.0;
    let c1345 = C1 * C3 * C4 * C5;
    let c34 = C3 * C4;
    let tmp1 = 1.0 / x[0];
    let tmp2 = tmp1 * tmp1;
    let tmp3 = tmp1 * tmp2;
    a[0] = - dt * tx1 * dx1;
    a[1] = dt * tx2;
    a[2] = 0.0;
    a[3] = 0.0;
    a[4] = 0.0;
    a[5] = dt * tx2 * ( - sq(x[1] * tmp1) + c2 * 0.50 * ( x[1] * x[1] + x[2] * x[2] + x[3] * x[3] ) * tmp2 ) - dt * tx1 * ( - r43 * c34 * tmp2 * x[1] );
    a[6] = dt * tx2 * ( ( 2.0 - c2 ) * ( x[1] * tmp1 ) ) - dt * tx1 * ( r43 * c34 * tmp1 ) - dt * tx1 * dx2;
    a[7] = dt * tx2 * ( - c2 * ( x[2] * tmp1 ) );
    a[8] = dt * tx2 * ( - c2 * ( x[3] * tmp1 ) );
    a[9] = dt * tx2 * c2;
    a[10] = dt * tx2 * ( - ( x[1] * x[2] ) * tmp2 ) - dt * tx1 * ( - c34 * tmp2 * x[2] );
    a[11] = dt * tx2 * ( x[2] * tmp1 );
    a[12] = dt * tx2 * ( x[1] * tmp1 ) - dt * tx1 * ( c34 * tmp1 ) - dt * tx1 * dx3;
    a[13] = 0.0;
    a[14] = 0.0;
    a[15] = dt * tx2 * ( - ( x[1]*x[3] ) * tmp2 ) - dt * tx1 * ( - c34 * tmp2 * x[3] );
    a[16] = dt * tx2 * ( x[3] * tmp1 );
    a[17] = 0.0;
    a[18] = dt * tx2 * ( x[1] * tmp1 ) - dt * tx1 * ( c34 * tmp1 ) - dt * tx1 * dx4;
    a[19] = 0.0;
    a[20] = dt * tx2 * ( ( c2 * ( x[1] * x[1] + x[2] * x[2] + x[3] * x[3] ) * tmp2 - c1 * ( x[4] * tmp1 ) ) * ( x[1] * tmp1 ) ) - dt * tx1 * ( - ( r43*c34 - c1345 ) * tmp3 * ( sq(x[1]) ) - ( c34 - c1345 ) * tmp3 * ( sq(x[2]) ) - ( c34 - c1345 ) * tmp3 * ( sq(x[3]) ) - c1345 * tmp2 * x[4] );
    a[21] = dt * tx2 * ( c1 * ( x[4] * tmp1 ) - 0.50 * c2 * ( ( 3.0*x[1]*x[1] + x[2]*x[2] + x[3]*x[3] ) * tmp2 ) ) - dt * tx1 * ( r43*c34 - c1345 ) * tmp2 * x[1];
    a[22] = dt * tx2 * ( - c2 * ( x[2]*x[1] ) * tmp2 ) - dt * tx1 * ( c34 - c1345 ) * tmp2 * x[2];
    a[23] = dt * tx2 * ( - c2 * ( x[3]*x[1] ) * tmp2 ) - dt * tx1 * ( c34 - c1345 ) * tmp2 * x[3];
    a[24] = dt * tx2 * ( c1 * ( x[1] * tmp1 ) ) - dt * tx1 * c1345 * tmp1 - dt * tx1 * dx5;
    let tmp1 = 1.0 / y[0];
    let tmp2 = tmp1 * tmp1;
    let tmp3 = tmp1 * tmp2;
    b[0] = - dt * ty1 * dy1;
    b[1] = 0.0;
    b[2] = dt * ty2;
    b[3] = 0.0;
    b[4] = 0.0;
    b[5] = dt * ty2 * ( - ( y[1]*y[2] ) * tmp2 ) - dt * ty1 * ( - c34 * tmp2 * y[1] );
    b[6] = dt * ty2 * ( y[2] * tmp1 ) - dt * ty1 * ( c34 * tmp1 ) - dt * ty1 * dy2;
    b[7] = dt * ty2 * ( y[1] * tmp1 );
    b[8] = 0.0;
    b[9] = 0.0;
    b[10] = dt * ty2 * ( - sq(y[2] * tmp1) + 0.50 * c2 * ( ( y[1] * y[1] + y[2] * y[2] + y[3] * y[3] ) * tmp2 ) ) - dt * ty1 * ( - r43 * c34 * tmp2 * y[2] );
    b[11] = dt * ty2 * ( - c2 * ( y[1] * tmp1 ) );
    b[12] = dt * ty2 * ( ( 2.0 - c2 ) * ( y[2] * tmp1 ) ) - dt * ty1 * ( r43 * c34 * tmp1 ) - dt * ty1 * dy3;
    b[13] = dt * ty2 * ( - c2 * ( y[3] * tmp1 ) );
    b[14] = dt * ty2 * c2;
    b[15] = dt * ty2 * ( - ( y[2]*y[3] ) * tmp2 ) - dt * ty1 * ( - c34 * tmp2 * y[3] );
    b[16] = 0.0;
    b[17] = dt * ty2 * ( y[3] * tmp1 );
    b[18] = dt * ty2 * ( y[2] * tmp1 ) - dt * ty1 * ( c34 * tmp1 ) - dt * ty1 * dy4;
    b[19] = 0.0;
    b[20] = dt * ty2 * ( ( c2 * ( y[1] * y[1] + y[2] * y[2] + y[3] * y[3] ) * tmp2 - c1 * ( y[4] * tmp1 ) ) * ( y[2] * tmp1 ) ) - dt * ty1 * ( - ( c34 - c1345 )*tmp3*(sq(y[1])) - ( r43*c34 - c1345 )*tmp3*(sq(y[2])) - ( c34 - c1345 )*tmp3*(sq(y[3])) - c1345*tmp2*y[4] );
    b[21] = dt * ty2 * ( - c2 * ( y[1]*y[2] ) * tmp2 ) - dt * ty1 * ( c34 - c1345 ) * tmp2 * y[1];
    b[22] = dt * ty2 * ( c1 * ( y[4] * tmp1 ) - 0.50 * c2 * ( ( y[1]*y[1] + 3.0 * y[2]*y[2] + y[3]*y[3] ) * tmp2 ) ) - dt * ty1 * ( r43*c34 - c1345 ) * tmp2 * y[2];
    b[23] = dt * ty2 * ( - c2 * ( y[2]*y[3] ) * tmp2 ) - dt * ty1 * ( c34 - c1345 ) * tmp2 * y[3];
    b[24] = dt * ty2 * ( c1 * ( y[2] * tmp1 ) ) - dt * ty1 * c1345 * tmp1 - dt * ty1 * dy5;
    let tmp1 = 1.0 / z[0];
    let tmp2 = tmp1 * tmp1;
    let tmp3 = tmp1 * tmp2;
    c[0] = - dt * tz1 * dz1;
    c[1] = 0.0;
    c[2] = 0.0;
    c[3] = dt * tz2;
    c[4] = 0.0;
    c[5] = dt * tz2 * ( - ( z[1]*z[3] ) * tmp2 ) - dt * tz1 * ( - c34 * tmp2 * z[1] );
    c[6] = dt * tz2 * ( z[3] * tmp1 ) - dt * tz1 * c34 * tmp1 - dt * tz1 * dz2;
    c[7] = 0.0;
    c[8] = dt * tz2 * ( z[1] * tmp1 );
    c[9] = 0.0;
    c[10] = dt * tz2 * ( - ( z[2]*z[3] ) * tmp2 ) - dt * tz1 * ( - c34 * tmp2 * z[2] );
    c[11] = 0.0;
    c[12] = dt * tz2 * ( z[3] * tmp1 ) - dt * tz1 * ( c34 * tmp1 ) - dt * tz1 * dz3;
    c[13] = dt * tz2 * ( z[2] * tmp1 );
    c[14] = 0.0;
    c[15] = dt * tz2 * ( - sq(z[3] * tmp1) + 0.50 * c2 * ( ( z[1] * z[1] + z[2] * z[2] + z[3] * z[3] ) * tmp2 ) ) - dt * tz1 * ( - r43 * c34 * tmp2 * z[3] );
    c[16] = dt * tz2 * ( - c2 * ( z[1] * tmp1 ) );
    c[17] = dt * tz2 * ( - c2 * ( z[2] * tmp1 ) );
    c[18] = dt * tz2 * ( 2.0 - c2 ) * ( z[3] * tmp1 ) - dt * tz1 * ( r43 * c34 * tmp1 ) - dt * tz1 * dz4;
    c[19] = dt * tz2 * c2;
    c[20] = dt * tz2 * ( ( c2 * ( z[1] * z[1] + z[2] * z[2] + z[3] * z[3] ) * tmp2 - c1 * ( z[4] * tmp1 ) ) * ( z[3] * tmp1 ) ) - dt * tz1 * ( - ( c34 - c1345 ) * tmp3 * (sq(z[1])) - ( c34 - c1345 ) * tmp3 * (sq(z[2])) - ( r43*c34 - c1345 )* tmp3 * (sq(z[3])) - c1345 * tmp2 * z[4] );
    c[21] = dt * tz2 * ( - c2 * ( z[1]*z[3] ) * tmp2 ) - dt * tz1 * ( c34 - c1345 ) * tmp2 * z[1];
    c[22] = dt * tz2 * ( - c2 * ( z[2]*z[3] ) * tmp2 ) - dt * tz1 * ( c34 - c1345 ) * tmp2 * z[2];
    c[23] = dt * tz2 * ( c1 * ( z[4] * tmp1 ) - 0.50 * c2 * ( ( z[1]*z[1] + z[2]*z[2] + 3.0*z[3]*z[3] ) * tmp2 ) ) - dt * tz1 * ( r43*c34 - c1345 ) * tmp2 * z[3];
    c[24] = dt * tz2 * ( c1 * ( z[3] * tmp1 ) ) - dt * tz1 * c1345 * tmp1 - dt * tz1 * dz5;
}

/// The convective flux of `s` along direction `n` (1: x, 2: y, 3: z), NPB's formulas.
#[inline(always)]
fn conv_flux(s: &[f64], n: usize) -> [f64; 5] {
    let un = s[n] / s[0];
    let q = 0.50 * (s[1] * s[1] + s[2] * s[2] + s[3] * s[3]) / s[0];
    let mut f = [s[n], s[1] * un, s[2] * un, s[3] * un, (C1 * s[4] - C2 * q) * un];
    f[n] = s[n] * un + C2 * (s[4] - q);
    f
}

/// The viscous flux between `s` and its lower neighbour `sm` along direction `n` with
/// coefficient t3 (NPB's formulas; the 4/3 and the (1/6) term on component n).
#[inline(always)]
fn visc_flux(s: &[f64], sm: &[f64], n: usize, t3: f64) -> [f64; 4] {
    let tmp = 1.0 / s[0];
    let (u2, u3, u4, u5) = (tmp * s[1], tmp * s[2], tmp * s[3], tmp * s[4]);
    let tmp = 1.0 / sm[0];
    let (u2m, u3m, u4m, u5m) = (tmp * sm[1], tmp * sm[2], tmp * sm[3], tmp * sm[4]);
    let mut f = [t3 * (u2 - u2m), t3 * (u3 - u3m), t3 * (u4 - u4m), 0.0];
    let (un, unm) = match n {
        1 => (u2, u2m),
        2 => (u3, u3m),
        _ => (u4, u4m),
    };
    f[n - 1] = (4.0 / 3.0) * t3 * (un - unm);
    f[3] = 0.50 * (1.0 - C1 * C5) * t3 * ((sq(u2) + sq(u3) + sq(u4)) - (sq(u2m) + sq(u3m) + sq(u4m))) + (1.0 / 6.0) * t3 * (sq(un) - sq(unm)) + C1 * C5 * t3 * (u5 - u5m);
    f
}

/// dst -= dssp (NPB's fourth-difference dissipation) for the line of points `p(t)`,
/// t = 1 ..= n along one axis, at the interior points this process holds (`lo ..= hi`);
/// `first`/`last`: whether the line starts/ends at the global boundary here.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn dissipation(src: &[f64], dst: &mut [f64], dssp: f64, p: impl Fn(isize) -> usize, n: isize, first: bool, last: bool) {
    let u = |t: isize, m: usize| src[p(t) + m];
    if first {
        for m in 0..5 {
            dst[p(2) + m] -= dssp * (5.0 * u(2, m) - 4.0 * u(3, m) + u(4, m));
            dst[p(3) + m] -= dssp * (-4.0 * u(2, m) + 6.0 * u(3, m) - 4.0 * u(4, m) + u(5, m));
        }
    }
    let t1 = if first { 4 } else { 1 };
    let t2 = if last { n - 3 } else { n };
    for t in t1..=t2 {
        for m in 0..5 {
            dst[p(t) + m] -= dssp * (u(t - 2, m) - 4.0 * u(t - 1, m) + 6.0 * u(t, m) - 4.0 * u(t + 1, m) + u(t + 2, m));
        }
    }
    if last {
        for m in 0..5 {
            dst[p(n - 2) + m] -= dssp * (u(n - 4, m) - 4.0 * u(n - 3, m) + 6.0 * u(n - 2, m) - 4.0 * u(n - 1, m));
            dst[p(n - 1) + m] -= dssp * (u(n - 3, m) - 4.0 * u(n - 2, m) + 5.0 * u(n - 1, m));
        }
    }
}

/// The second-difference terms of one point: dst(1) += d1 t1 (...), dst(m) += t3 c3 c4
/// (flux(m, +1) - flux(m)) + dm t1 (...), in NPB's order of additions. `rev`: erhs's z
/// direction, which writes the second difference from the upper neighbour.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn second_diff(src: &[f64], dst: &mut [f64], flux: &[f64], pm: usize, p: usize, pp: usize, t1: f64, t3: f64, dc: &[f64; 5], rev: bool) {
    let sd = |m: usize| if rev { src[pp + m] - 2.0 * src[p + m] + src[pm + m] } else { src[pm + m] - 2.0 * src[p + m] + src[pp + m] };
    dst[p] += dc[0] * t1 * sd(0);
    for m in 1..5 {
        dst[p + m] = dst[p + m] + t3 * C3 * C4 * (flux[pp + m] - flux[p + m]) + dc[m] * t1 * sd(m);
    }
}

/// The xi-direction terms of NPB's rhs (src u, dst rsd) and erhs (src rsd, dst frct),
/// given src's ghosts along x.
fn xi_terms(g: &Geom, src: &[f64], dst: &mut [f64], flux: &mut [f64]) {
    let nx = g.nx as isize;
    let l1 = if g.north { 0 } else { 1 };
    let l2 = if g.south { nx + 1 } else { nx };
    for k in 2..g.nz {
        for j in g.jst..=g.jend {
            for i in l1..=l2 {
                let p = g.at(i, j, k);
                flux[p..p + 5].copy_from_slice(&conv_flux(&src[p..p + 5], 1));
            }
            for i in g.ist..=g.iend {
                let (p, pm, pp) = (g.at(i, j, k), g.at(i - 1, j, k), g.at(i + 1, j, k));
                for m in 0..5 {
                    dst[p + m] -= g.tx2 * (flux[pp + m] - flux[pm + m]);
                }
            }
            for i in g.ist..=l2 {
                let (p, pm) = (g.at(i, j, k), g.at(i - 1, j, k));
                let f = visc_flux(&src[p..p + 5], &src[pm..pm + 5], 1, g.tx3);
                flux[p + 1..p + 5].copy_from_slice(&f);
            }
            for i in g.ist..=g.iend {
                second_diff(src, dst, flux, g.at(i - 1, j, k), g.at(i, j, k), g.at(i + 1, j, k), g.tx1, g.tx3, &g.dx, false);
            }
            dissipation(src, dst, g.dssp, |i| g.at(i, j, k), nx, !g.north, !g.south);
        }
    }
}

/// The eta-direction terms, given src's ghosts along y.
fn eta_terms(g: &Geom, src: &[f64], dst: &mut [f64], flux: &mut [f64]) {
    let ny = g.ny as isize;
    let l1 = if g.west { 0 } else { 1 };
    let l2 = if g.east { ny + 1 } else { ny };
    for k in 2..g.nz {
        for j in l1..=l2 {
            for i in g.ist..=g.iend {
                let p = g.at(i, j, k);
                flux[p..p + 5].copy_from_slice(&conv_flux(&src[p..p + 5], 2));
            }
        }
        for j in g.jst..=g.jend {
            for i in g.ist..=g.iend {
                let (p, pm, pp) = (g.at(i, j, k), g.at(i, j - 1, k), g.at(i, j + 1, k));
                for m in 0..5 {
                    dst[p + m] -= g.ty2 * (flux[pp + m] - flux[pm + m]);
                }
            }
        }
        for j in g.jst..=l2 {
            for i in g.ist..=g.iend {
                let (p, pm) = (g.at(i, j, k), g.at(i, j - 1, k));
                let f = visc_flux(&src[p..p + 5], &src[pm..pm + 5], 2, g.ty3);
                flux[p + 1..p + 5].copy_from_slice(&f);
            }
        }
        for j in g.jst..=g.jend {
            for i in g.ist..=g.iend {
                second_diff(src, dst, flux, g.at(i, j - 1, k), g.at(i, j, k), g.at(i, j + 1, k), g.ty1, g.ty3, &g.dy, false);
            }
        }
        for i in g.ist..=g.iend {
            dissipation(src, dst, g.dssp, |j| g.at(i, j, k), ny, !g.west, !g.east);
        }
    }
}

/// The zeta-direction terms (z is never split); `rev` for erhs's second difference.
fn zeta_terms(g: &Geom, src: &[f64], dst: &mut [f64], flux: &mut [f64], rev: bool) {
    let nz = g.nz;
    for k in 1..=nz {
        for j in g.jst..=g.jend {
            for i in g.ist..=g.iend {
                let p = g.at(i, j, k);
                flux[p..p + 5].copy_from_slice(&conv_flux(&src[p..p + 5], 3));
            }
        }
    }
    for k in 2..nz {
        for j in g.jst..=g.jend {
            for i in g.ist..=g.iend {
                let (p, pm, pp) = (g.at(i, j, k), g.at(i, j, k - 1), g.at(i, j, k + 1));
                for m in 0..5 {
                    dst[p + m] -= g.tz2 * (flux[pp + m] - flux[pm + m]);
                }
            }
        }
    }
    for k in 2..=nz {
        for j in g.jst..=g.jend {
            for i in g.ist..=g.iend {
                let (p, pm) = (g.at(i, j, k), g.at(i, j, k - 1));
                let f = visc_flux(&src[p..p + 5], &src[pm..pm + 5], 3, g.tz3);
                flux[p + 1..p + 5].copy_from_slice(&f);
            }
        }
    }
    for k in 2..nz {
        for j in g.jst..=g.jend {
            for i in g.ist..=g.iend {
                second_diff(src, dst, flux, g.at(i, j, k - 1), g.at(i, j, k), g.at(i, j, k + 1), g.tz1, g.tz3, &g.dz, rev);
            }
        }
    }
    for j in g.jst..=g.jend {
        for i in g.ist..=g.iend {
            dissipation(src, dst, g.dssp, |k| g.at(i, j, k as usize), nz as isize, true, true);
        }
    }
}

impl Lu {
    /// pintgr's integrand on one plane, zero outside the given ranges, as a row-major 2-D
    /// array. `axis` 2: plane k = `fixed`, points (i, j) for i in 0 ..= nx+1, j in
    /// 0 ..= ny+1; axis 1: plane j = `fixed`, points (i, k), i in 0 ..= nx+1, k in
    /// 0 ..= nz+1; axis 0: plane i = `fixed`, points (j, k). Values at (r0 ..= r1, s0 ..= s1).
    pub fn phi_plane(&self, axis: usize, fixed: isize, r: (isize, isize), s: (isize, isize)) -> Result<Vec<f64>, String> {
        let g = &self.g;
        let (nx, ny, nz) = (g.nx as isize, g.ny as isize, g.nz as isize);
        let (nr, ns) = match axis {
            2 => (nx + 2, ny + 2),
            1 => (nx + 2, nz + 2),
            0 => (ny + 2, nz + 2),
            _ => return Err("axis must be 0, 1 or 2".into()),
        };
        let fixed_ok = match axis {
            2 => (1..=nz).contains(&fixed),
            1 => (-1..=ny + 2).contains(&fixed),
            _ => (-1..=nx + 2).contains(&fixed),
        };
        let ranges_ok = |lo: isize, hi: isize, n: isize, kk: bool| lo > hi || (lo >= if kk { 1 } else { -1 } && hi <= if kk { n - 2 } else { n - 1 } && lo >= 0);
        if !fixed_ok || !ranges_ok(r.0, r.1, nr, false) || !ranges_ok(s.0, s.1, ns, axis != 2) {
            return Err(format!("pintgr plane {axis}={fixed}, ranges {r:?} x {s:?} outside the box"));
        }
        let mut out = vec![0.0; (nr * ns) as usize];
        for a in r.0..=r.1 {
            for b in s.0..=s.1 {
                let v = match axis {
                    2 => self.phi(a, b, fixed as usize),
                    1 => self.phi(a, fixed, b as usize),
                    _ => self.phi(fixed, a, b as usize),
                };
                out[(a * ns + b) as usize] = v;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// setparams' isqrt2, as NPB writes it.
    fn isqrt2(i: usize) -> Option<usize> {
        let (mut sq, mut x) = (0, 1);
        while sq <= i {
            sq = x * x;
            if sq == i {
                return Some(x);
            }
            x += 1;
        }
        x -= 1;
        let mut y = i / x;
        while x * y != i && 2 * y >= x {
            x += 1;
            y = i / x;
        }
        (x * y == i && 2 * y >= x).then_some(x)
    }

    #[test]
    fn process_grid_is_npbs() {
        for n in 1..=64 {
            assert_eq!(proc_grid(n).map(|g| g.0), isqrt2(n), "n = {n}");
        }
        assert_eq!(proc_grid(8), Some((4, 2)));
        assert_eq!(proc_grid(2), Some((2, 1)));
        assert_eq!(split(33, 4, 0), (9, 0));
        assert_eq!(split(33, 4, 1), (8, 9));
        assert_eq!(split(33, 4, 3), (8, 25));
    }

    #[test]
    fn block_solve_inverts() {
        let mut d = [0.0; 25];
        for r in 0..5 {
            for c in 0..5 {
                d[r * 5 + c] = if r == c { 4.0 + r as f64 } else { 0.3 * (r as f64 - c as f64) };
            }
        }
        let x = [1.0, -2.0, 0.5, 3.0, -1.5];
        let mut w = [0.0; 5];
        for r in 0..5 {
            w[r] = (0..5).map(|c| d[r * 5 + c] * x[c]).sum();
        }
        solve5(&d, &mut w);
        for r in 0..5 {
            assert!((w[r] - x[r]).abs() < 1e-12);
        }
    }

    /// NPB's serial driver on one process (no ghosts to exchange): class S must verify.
    #[test]
    #[allow(clippy::excessive_precision)] // NPB's reference values as verify.f writes them
    fn class_s_verifies_on_one_process() {
        let mut lu = Lu::new(12, 12, 12, 1, 1, 0, 0, 0.5, 1.2).unwrap();
        lu.setbv();
        lu.setiv();
        lu.erhs_init();
        lu.erhs_xi();
        lu.erhs_eta();
        lu.erhs_zeta();
        let norm = |cols: Vec<f64>, g: &Geom| -> [f64; 5] {
            let mut s = [0.0; 5];
            for c in cols.chunks(5) {
                for m in 0..5 {
                    s[m] += c[m];
                }
            }
            s.map(|x| (x / ((g.nx0 - 2) * (g.ny0 - 2) * (g.nz0 - 2)) as f64).sqrt())
        };
        let rhs = |lu: &mut Lu| {
            lu.rhs_init();
            lu.rhs_xi();
            lu.rhs_eta();
            lu.rhs_zeta();
        };
        for niter in [1, 50] {
            if niter > 1 {
                lu.setbv();
                lu.setiv();
            }
            rhs(&mut lu);
            for _ in 0..niter {
                lu.scale_rsd();
                for k in 2..lu.g.nz {
                    lu.jacld(k);
                    lu.blts(k);
                }
                for k in (2..lu.g.nz).rev() {
                    lu.jacu(k);
                    lu.buts(k);
                }
                lu.update_u();
                rhs(&mut lu);
            }
        }
        let g = lu.g;
        let xcr = norm(lu.l2_columns(Field::Rsd), &g);
        let xce = norm(lu.error_columns(), &g);
        let xcr_ref = [1.6196343210976702e-02, 2.1976745164821318e-03, 1.5179927653399185e-03, 1.5029584435994323e-03, 3.4264073155896461e-02];
        let xce_ref = [6.4223319957960924e-04, 8.4144342047347926e-05, 5.8588269616485186e-05, 5.8474222595157350e-05, 1.3103347914111294e-03];
        for m in 0..5 {
            assert!(((xcr[m] - xcr_ref[m]) / xcr_ref[m]).abs() <= 1e-8, "xcr[{m}] = {:e}", xcr[m]);
            assert!(((xce[m] - xce_ref[m]) / xce_ref[m]).abs() <= 1e-8, "xce[{m}] = {:e}", xce[m]);
        }
    }
}
