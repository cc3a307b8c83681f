//! NPB kernels (EP, IS, CG, MG, FT, LU, SP): array conversion, size checks, and the GIL released
//! around every kernel so in-process ranks (threads) compute in parallel. Grids and vectors
//! are numpy arrays owned by Python and updated in place; complex arrays are passed as their
//! float64 view (re, im interleaved).

use clusterlab_core::npb::{cg, ep, ft, is, lu, mg, randlc, sp};
use std::sync::Mutex;
use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArrayDyn, PyReadwriteArrayDyn};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

fn err(msg: impl Into<String>) -> PyErr {
    PyValueError::new_err(msg.into())
}

fn check_len(what: &str, got: usize, want: usize) -> PyResult<()> {
    if got != want {
        return Err(err(format!("{what}: {got} values, expected {want}")));
    }
    Ok(())
}

fn box_len(n: [usize; 3]) -> PyResult<usize> {
    if n.iter().any(|&m| m < 3) {
        return Err(err(format!("grid box {n:?}: every extent needs a ghost layer on each side (>= 3)")));
    }
    Ok(n[0] * n[1] * n[2])
}

/// `n` values of NPB's generator from state `x` with multiplier `a`: (values, new state).
#[pyfunction]
fn npb_vranlc<'py>(py: Python<'py>, n: usize, x: f64, a: f64) -> PyResult<(Bound<'py, PyArray1<f64>>, f64)> {
    if !randlc::valid_state(x) || !randlc::valid_state(a) {
        return Err(err("generator state and multiplier must be integers in [0, 2^46)"));
    }
    let mut s = x;
    let mut y = vec![0.0; n];
    py.detach(|| randlc::vranlc(&mut s, a, &mut y));
    Ok((PyArray1::from_vec(py, y), s))
}

/// `a^n mod 2^46`.
#[pyfunction]
fn npb_pow46(a: f64, n: u64) -> PyResult<f64> {
    if !randlc::valid_state(a) {
        return Err(err("multiplier must be an integer in [0, 2^46)"));
    }
    Ok(randlc::pow46(a, n))
}

/// EP batches `first .. first + count`: (annulus counts, per-batch x sums, per-batch y sums).
#[pyfunction]
fn npb_ep_batches<'py>(py: Python<'py>, first: u64, count: u64) -> PyResult<(Bound<'py, PyArray1<u64>>, Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>)> {
    let p = py.detach(|| ep::batches(first, count));
    Ok((PyArray1::from_slice(py, &p.counts), PyArray1::from_vec(py, p.sx), PyArray1::from_vec(py, p.sy)))
}

/// IS keys `first .. first + count` below `max_key`.
#[pyfunction]
fn npb_is_keys<'py>(py: Python<'py>, first: u64, count: usize, max_key: u32) -> Bound<'py, PyArray1<i32>> {
    PyArray1::from_vec(py, py.detach(|| is::create_keys(first, count, max_key)))
}

/// Keys grouped by bucket into `out` (same length); returns the keys per bucket.
#[pyfunction]
fn npb_is_bucket_sort<'py>(py: Python<'py>, keys: PyReadonlyArrayDyn<i32>, shift: u32, nbuckets: usize, mut out: PyReadwriteArrayDyn<i32>) -> PyResult<Bound<'py, PyArray1<i64>>> {
    let (k, o) = (keys.as_slice()?, out.as_slice_mut()?);
    check_len("out", o.len(), k.len())?;
    let sizes = py.detach(|| is::bucket_sort_into(k, shift, nbuckets, o)).map_err(|bad| err(format!("key {bad} outside the {nbuckets} buckets")))?;
    Ok(PyArray1::from_vec(py, sizes))
}

/// For each key value in min..=max, the number of keys <= it.
#[pyfunction]
fn npb_is_rank_counts<'py>(py: Python<'py>, keys: PyReadonlyArrayDyn<i32>, min_key: i32, max_key: i32) -> PyResult<Bound<'py, PyArray1<i32>>> {
    let k = keys.as_slice()?;
    let c = py.detach(|| is::rank_counts(k, min_key, max_key)).map_err(|bad| err(format!("key {bad} outside this rank's range {min_key}..={max_key}")))?;
    Ok(PyArray1::from_vec(py, c))
}

/// (keys placed at their ranks, number of keys out of order).
#[pyfunction]
fn npb_is_full_sort<'py>(py: Python<'py>, keys: PyReadonlyArrayDyn<i32>, counts: PyReadonlyArrayDyn<i32>, min_key: i32) -> PyResult<(Bound<'py, PyArray1<i32>>, u64)> {
    let (k, c) = (keys.as_slice()?, counts.as_slice()?);
    let ok = k.iter().all(|&x| x >= min_key && ((x - min_key) as usize) < c.len()) && c.last().is_none_or(|&t| t as usize == k.len());
    if !ok {
        return Err(err("counts do not describe these keys"));
    }
    let (sorted, descents) = py.detach(|| is::full_sort(k, c, min_key));
    Ok((PyArray1::from_vec(py, sorted), descents))
}

/// One process's block of CG's matrix, packed for leaf-ordered products.
#[pyclass(module = "clusterlab._core", frozen, name = "NpbCgBlock")]
struct CgBlock {
    packed: cg::Packed,
}

#[pymethods]
impl CgBlock {
    /// Nonzeros in the block.
    #[getter]
    fn nnz(&self) -> usize {
        self.packed.nnz
    }

    /// out = A x (x: the process's columns, out: its rows).
    fn matvec(&self, py: Python<'_>, x: PyReadonlyArrayDyn<f64>, mut out: PyReadwriteArrayDyn<f64>) -> PyResult<()> {
        let (xs, o) = (x.as_slice()?, out.as_slice_mut()?);
        check_len("x", xs.len(), self.packed.ncols)?;
        check_len("out", o.len(), self.packed.nrows)?;
        py.detach(|| self.packed.matvec(xs, o));
        Ok(())
    }
}

/// CG's matrix block rows r0..r1 x the columns of `bounds` (the process's leaf boundaries,
/// global), generated from state `tran` as NPB's makea.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn npb_cg_makea(py: Python<'_>, n: usize, nonzer: usize, rcond: f64, shift: f64, tran: f64, r0: usize, r1: usize, bounds: Vec<usize>) -> PyResult<CgBlock> {
    let (c0, c1) = (*bounds.first().unwrap_or(&0), *bounds.last().unwrap_or(&0));
    if !(r0 <= r1 && r1 <= n && c0 <= c1 && c1 <= n) || nonzer == 0 || nonzer >= n || !randlc::valid_state(tran) {
        return Err(err(format!("bad CG block {r0}..{r1} x {c0}..{c1} of n={n}, nonzer={nonzer}")));
    }
    let packed = py.detach(|| cg::Packed::new(&cg::makea(n, nonzer, rcond, shift, tran, r0..r1, c0..c1), &bounds)).map_err(err)?;
    Ok(CgBlock { packed })
}

fn check_bounds(bounds: &[usize], len: usize) -> PyResult<()> {
    if bounds.len() < 2 || bounds.len() - 1 > cg::LEAVES || !(bounds.len() - 1).is_power_of_two() || bounds.windows(2).any(|w| w[0] > w[1]) || *bounds.last().unwrap() > len {
        return Err(err("leaf bounds must be a power-of-two number of ascending ranges inside the vector"));
    }
    Ok(())
}

/// x . y (or x . x) over the process's leaves, leaf-ordered.
#[pyfunction]
#[pyo3(signature = (x, y, bounds))]
fn npb_cg_dot(py: Python<'_>, x: PyReadonlyArrayDyn<f64>, y: Option<PyReadonlyArrayDyn<f64>>, bounds: Vec<usize>) -> PyResult<f64> {
    let xs = x.as_slice()?;
    check_bounds(&bounds, xs.len())?;
    match &y {
        Some(y) => {
            let ys = y.as_slice()?;
            check_len("y", ys.len(), xs.len())?;
            Ok(py.detach(|| cg::dot(xs, Some(ys), &bounds)))
        }
        None => Ok(py.detach(|| cg::dot(xs, None, &bounds))),
    }
}

/// sum (x - y)^2 over the process's leaves.
#[pyfunction]
fn npb_cg_dist2(py: Python<'_>, x: PyReadonlyArrayDyn<f64>, y: PyReadonlyArrayDyn<f64>, bounds: Vec<usize>) -> PyResult<f64> {
    let (xs, ys) = (x.as_slice()?, y.as_slice()?);
    check_len("y", ys.len(), xs.len())?;
    check_bounds(&bounds, xs.len())?;
    Ok(py.detach(|| cg::dist2(xs, ys, &bounds)))
}

/// r = v - A u (v None: in place on r).
#[pyfunction]
#[pyo3(signature = (u, v, r, n, a))]
fn npb_mg_resid(py: Python<'_>, u: PyReadonlyArrayDyn<f64>, v: Option<PyReadonlyArrayDyn<f64>>, mut r: PyReadwriteArrayDyn<f64>, n: [usize; 3], a: [f64; 4]) -> PyResult<()> {
    let len = box_len(n)?;
    let us = u.as_slice()?;
    let rs = r.as_slice_mut()?;
    check_len("u", us.len(), len)?;
    check_len("r", rs.len(), len)?;
    match &v {
        Some(v) => {
            let vs = v.as_slice()?;
            check_len("v", vs.len(), len)?;
            py.detach(|| mg::resid(us, Some(vs), rs, n, a));
        }
        None => py.detach(|| mg::resid(us, None, rs, n, a)),
    }
    Ok(())
}

/// u = u + C r.
#[pyfunction]
fn npb_mg_psinv(py: Python<'_>, r: PyReadonlyArrayDyn<f64>, mut u: PyReadwriteArrayDyn<f64>, n: [usize; 3], c: [f64; 4]) -> PyResult<()> {
    let len = box_len(n)?;
    let (rs, us) = (r.as_slice()?, u.as_slice_mut()?);
    check_len("r", rs.len(), len)?;
    check_len("u", us.len(), len)?;
    py.detach(|| mg::psinv(rs, us, n, c));
    Ok(())
}

/// s = P r (fine box mk to coarse box mj).
#[pyfunction]
fn npb_mg_rprj3(py: Python<'_>, r: PyReadonlyArrayDyn<f64>, mk: [usize; 3], mut s: PyReadwriteArrayDyn<f64>, mj: [usize; 3]) -> PyResult<()> {
    let (lk, lj) = (box_len(mk)?, box_len(mj)?);
    if (0..3).any(|d| 2 * mj[d] - 2 > mk[d] + 1 || mk[d] > 2 * mj[d]) {
        return Err(err(format!("rprj3: coarse box {mj:?} does not halve fine box {mk:?}")));
    }
    let (rs, ss) = (r.as_slice()?, s.as_slice_mut()?);
    check_len("r", rs.len(), lk)?;
    check_len("s", ss.len(), lj)?;
    py.detach(|| mg::rprj3(rs, mk, ss, mj));
    Ok(())
}

/// u = u + Q z (coarse box mm to fine box n).
#[pyfunction]
fn npb_mg_interp(py: Python<'_>, z: PyReadonlyArrayDyn<f64>, mm: [usize; 3], mut u: PyReadwriteArrayDyn<f64>, n: [usize; 3]) -> PyResult<()> {
    let (lz, lu) = (box_len(mm)?, box_len(n)?);
    if (0..3).any(|d| 2 * mm[d] - 2 != n[d]) {
        return Err(err(format!("interp: fine box {n:?} is not twice coarse box {mm:?}")));
    }
    let (zs, us) = (z.as_slice()?, u.as_slice_mut()?);
    check_len("z", zs.len(), lz)?;
    check_len("u", us.len(), lu)?;
    py.detach(|| mg::interp(zs, mm, us, n)).map_err(err)
}

/// Periodic ghost layers along `axis` (0 = i1 .. 2 = i3).
#[pyfunction]
fn npb_mg_periodic(mut u: PyReadwriteArrayDyn<f64>, n: [usize; 3], axis: usize) -> PyResult<()> {
    let len = box_len(n)?;
    let us = u.as_slice_mut()?;
    check_len("u", us.len(), len)?;
    if axis > 2 {
        return Err(err("axis must be 0, 1 or 2"));
    }
    mg::periodic(us, n, axis);
    Ok(())
}

/// The face of interior layer `layer` along `axis`, as sent by a halo exchange.
#[pyfunction]
fn npb_mg_get_face<'py>(py: Python<'py>, u: PyReadonlyArrayDyn<f64>, n: [usize; 3], axis: usize, layer: usize) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let len = box_len(n)?;
    let us = u.as_slice()?;
    check_len("u", us.len(), len)?;
    if axis > 2 || layer >= n[axis] {
        return Err(err("axis must be 0..2 and layer inside the box"));
    }
    Ok(PyArray1::from_vec(py, mg::get_face(us, n, axis, layer)))
}

/// Writes a received face into layer `layer` along `axis`.
#[pyfunction]
fn npb_mg_put_face(mut u: PyReadwriteArrayDyn<f64>, n: [usize; 3], axis: usize, layer: usize, face: PyReadonlyArrayDyn<f64>) -> PyResult<()> {
    let len = box_len(n)?;
    let us = u.as_slice_mut()?;
    check_len("u", us.len(), len)?;
    if axis > 2 || layer >= n[axis] {
        return Err(err("axis must be 0..2 and layer inside the box"));
    }
    mg::put_face(us, n, axis, layer, face.as_slice()?).map_err(err)
}

/// (sum of squares per global octant, max |value|) over the interior.
#[pyfunction]
fn npb_mg_norm_leaves<'py>(py: Python<'py>, r: PyReadonlyArrayDyn<f64>, n: [usize; 3], origin: [usize; 3], global: [usize; 3]) -> PyResult<(Bound<'py, PyArray1<f64>>, f64)> {
    let len = box_len(n)?;
    let rs = r.as_slice()?;
    check_len("r", rs.len(), len)?;
    let (leaves, m) = py.detach(|| mg::norm_leaves(rs, n, origin, global));
    Ok((PyArray1::from_slice(py, &leaves), m))
}

/// zran3's random values for the interior of a box (ghosts 0).
#[pyfunction]
fn npb_mg_zran3<'py>(py: Python<'py>, n: [usize; 3], origin: [usize; 3], global: [usize; 3]) -> PyResult<Bound<'py, PyArray1<f64>>> {
    box_len(n)?;
    if (0..3).any(|d| origin[d] + n[d] - 2 > global[d]) {
        return Err(err("box outside the grid"));
    }
    Ok(PyArray1::from_vec(py, py.detach(|| mg::zran3_values(n, origin, global))))
}

/// The m largest and m smallest interior values: two (m, 4) arrays of (value, gx, gy, gz).
#[pyfunction]
fn npb_mg_extremes<'py>(py: Python<'py>, z: PyReadonlyArrayDyn<f64>, n: [usize; 3], origin: [usize; 3], m: usize) -> PyResult<(Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>)> {
    let len = box_len(n)?;
    let zs = z.as_slice()?;
    check_len("z", zs.len(), len)?;
    let (hi, lo) = py.detach(|| mg::extremes(zs, n, origin, m));
    let to = |v: Vec<[f64; 4]>| PyArray1::from_vec(py, v.concat()).reshape([v.len(), 4]);
    Ok((to(hi)?, to(lo)?))
}

/// One SP process's state (NPB's common blocks for its slab of k-planes): the fields live in
/// Rust; Python calls the steps of the ADI iteration and moves planes and z lines.
#[pyclass(module = "clusterlab._core", frozen, name = "NpbSp")]
struct SpRank {
    inner: Mutex<sp::Sp>,
}

fn sp_field(name: &str) -> PyResult<sp::Field> {
    match name {
        "u" => Ok(sp::Field::U),
        "rhs" => Ok(sp::Field::Rhs),
        _ => Err(err(format!("SP field {name:?}: 'u' or 'rhs'"))),
    }
}

impl SpRank {
    fn with<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut sp::Sp) -> R + Send) -> R {
        py.detach(|| f(&mut self.inner.lock().unwrap_or_else(|e| e.into_inner())))
    }
}

#[pymethods]
impl SpRank {
    /// The process owning planes k0 .. k1 of an nx x ny x nz grid, time step dt.
    #[new]
    fn new(nx: usize, ny: usize, nz: usize, dt: f64, k0: usize, k1: usize) -> PyResult<Self> {
        Ok(SpRank { inner: Mutex::new(sp::Sp::new(nx, ny, nz, dt, k0, k1).map_err(err)?) })
    }

    /// The process's cell o0 .. o1 (per axis x, y, z) of a grid of n points per axis.
    #[staticmethod]
    fn cell(n: [usize; 3], dt: f64, o0: [usize; 3], o1: [usize; 3]) -> PyResult<Self> {
        Ok(SpRank { inner: Mutex::new(sp::Sp::new_box(n, dt, o0, o1).map_err(err)?) })
    }

    /// The stored box (s0, s1): the owned points and up to two more on each side.
    fn stored(&self) -> ([usize; 3], [usize; 3]) {
        let s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        (s.s0, s.s1)
    }

    /// The 5-vectors of field ('u' or 'rhs') on stored points lo .. hi (k, j, i order).
    fn region<'py>(&self, py: Python<'py>, field: &str, lo: [usize; 3], hi: [usize; 3]) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let f = sp_field(field)?;
        Ok(PyArray1::from_vec(py, self.with(py, |s| s.region(f, lo, hi)).map_err(err)?))
    }

    /// Writes field on stored points lo .. hi (as `region` returns it).
    fn set_region(&self, py: Python<'_>, field: &str, lo: [usize; 3], hi: [usize; 3], data: PyReadonlyArrayDyn<f64>) -> PyResult<()> {
        let f = sp_field(field)?;
        let d = data.as_slice()?;
        self.with(py, |s| s.set_region(f, lo, hi, d)).map_err(err)
    }

    /// One half of the line solves along axis (0 x, 1 y, 2 z) over the cell: forward
    /// elimination (incoming: the two last rows per line of the cell before, or empty) or back
    /// substitution (incoming: the two first solved rows per line of the cell after). Returns
    /// what goes on along the lines (empty at the grid's end).
    fn sweep<'py>(&self, py: Python<'py>, axis: usize, forward: bool, incoming: PyReadonlyArrayDyn<f64>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        if axis > 2 {
            return Err(err("axis must be 0, 1 or 2"));
        }
        let d = incoming.as_slice()?;
        let out = self.with(py, |s| if forward { s.sweep_forward(axis, d) } else { s.sweep_backward(axis, d) }).map_err(err)?;
        Ok(PyArray1::from_vec(py, out))
    }

    /// One of the steps: exact_rhs, initialize, compute_aux, compute_rhs, txinvr, x_solve
    /// (with ninvr), y_solve (with pinvr), ninvr, pinvr, tzetar_add.
    fn step(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        let f: fn(&mut sp::Sp) = match name {
            "exact_rhs" => sp::Sp::exact_rhs,
            "initialize" => sp::Sp::initialize,
            "compute_aux" => sp::Sp::compute_aux,
            "compute_rhs" => sp::Sp::compute_rhs,
            "txinvr" => sp::Sp::txinvr,
            "x_solve" => |s| s.xy_solve(0),
            "y_solve" => |s| s.xy_solve(1),
            "ninvr" => sp::Sp::ninvr,
            "pinvr" => sp::Sp::pinvr,
            "tzetar_add" => sp::Sp::tzetar_add,
            _ => return Err(err(format!("unknown SP step {name:?}"))),
        };
        self.with(py, f);
        Ok(())
    }

    /// u of stored planes ka .. kb.
    fn planes<'py>(&self, py: Python<'py>, ka: usize, kb: usize) -> PyResult<Bound<'py, PyArray1<f64>>> {
        Ok(PyArray1::from_vec(py, self.with(py, |s| s.planes(ka, kb)).map_err(err)?))
    }

    /// Writes u of stored planes ka .. kb.
    fn set_planes(&self, py: Python<'_>, ka: usize, kb: usize, data: PyReadonlyArrayDyn<f64>) -> PyResult<()> {
        let d = data.as_slice()?;
        self.with(py, |s| s.set_planes(ka, kb, d)).map_err(err)
    }

    /// The owned planes' z-line data for rows j0 .. j1 (rhs, ws, rho_i, speed per point).
    fn pack_z<'py>(&self, py: Python<'py>, j0: usize, j1: usize) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let ny = self.inner.lock().unwrap_or_else(|e| e.into_inner()).n[1];
        if j0 > j1 || j1 > ny {
            return Err(err(format!("rows {j0}..{j1} outside 0..{ny}")));
        }
        Ok(PyArray1::from_vec(py, self.with(py, |s| s.pack_z(j0, j1))))
    }

    /// Writes the solved rhs of the owned planes, rows j0 .. j1.
    fn unpack_z(&self, py: Python<'_>, j0: usize, j1: usize, data: PyReadonlyArrayDyn<f64>) -> PyResult<()> {
        let ny = self.inner.lock().unwrap_or_else(|e| e.into_inner()).n[1];
        if j0 > j1 || j1 > ny {
            return Err(err(format!("rows {j0}..{j1} outside 0..{ny}")));
        }
        let d = data.as_slice()?;
        self.with(py, |s| s.unpack_z(j0, j1, d)).map_err(err)
    }

    /// Solves whole z lines of nj rows (every k, pack_z pieces concatenated in k order):
    /// the solved rhs, 5 per point.
    fn z_solve<'py>(&self, py: Python<'py>, nj: usize, data: PyReadonlyArrayDyn<f64>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let d = data.as_slice()?;
        let out = self.with(py, |s| sp::z_solve_lines(&s.c, s.n[2], nj, s.n[0] - 2, d)).map_err(err)?;
        Ok(PyArray1::from_vec(py, out))
    }

    /// error_norm's sums continued over the owned planes from acc.
    fn error_norm_chain(&self, py: Python<'_>, acc: [f64; 5]) -> [f64; 5] {
        self.with(py, |s| s.error_norm_chain(acc))
    }

    /// rhs_norm's sums continued over the owned interior planes from acc.
    fn rhs_norm_chain(&self, py: Python<'_>, acc: [f64; 5]) -> [f64; 5] {
        self.with(py, |s| s.rhs_norm_chain(acc))
    }
}

/// One LU process's state (NPB's common blocks): its fields live in Rust; Python calls the
/// steps of the SSOR solver and moves ghost layers between processes.
#[pyclass(module = "clusterlab._core", frozen, name = "NpbLu")]
struct LuRank {
    inner: Mutex<lu::Lu>,
}

fn lu_field(name: &str) -> PyResult<lu::Field> {
    match name {
        "u" => Ok(lu::Field::U),
        "rsd" => Ok(lu::Field::Rsd),
        _ => Err(err(format!("LU field {name:?}: 'u' or 'rsd'"))),
    }
}

impl LuRank {
    fn with<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut lu::Lu) -> R + Send) -> R {
        py.detach(|| f(&mut self.inner.lock().unwrap_or_else(|e| e.into_inner())))
    }

    fn check_plane(&self, k: usize, lo: usize) -> PyResult<()> {
        let nz = self.inner.lock().unwrap_or_else(|e| e.into_inner()).g.nz;
        if k < lo || k + lo > nz + 1 {
            return Err(err(format!("k-plane {k} outside {lo} ..= {}", nz + 1 - lo)));
        }
        Ok(())
    }
}

#[pymethods]
impl LuRank {
    /// Process (row, col) (0-based, row along x) of an xdim x ydim grid for an
    /// nx0 x ny0 x nz0 problem with time step dt and relaxation omega.
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(nx0: usize, ny0: usize, nz0: usize, xdim: usize, ydim: usize, row: usize, col: usize, dt: f64, omega: f64) -> PyResult<Self> {
        Ok(LuRank { inner: Mutex::new(lu::Lu::new(nx0, ny0, nz0, xdim, ydim, row, col, dt, omega).map_err(err)?) })
    }

    /// The box: dict of nx, ny, nz, ipt, jpt, ist, iend, jst, jend, dxi, deta, dzeta.
    fn geometry<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner()).g;
        let d = pyo3::types::PyDict::new(py);
        for (k, v) in [("nx", g.nx as isize), ("ny", g.ny as isize), ("nz", g.nz as isize), ("ipt", g.ipt as isize), ("jpt", g.jpt as isize), ("ist", g.ist), ("iend", g.iend), ("jst", g.jst), ("jend", g.jend)] {
            d.set_item(k, v)?;
        }
        for (k, v) in [("dxi", g.dxi), ("deta", g.deta), ("dzeta", g.dzeta)] {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// One of the steps: setbv, setiv, erhs_init, erhs_xi, erhs_eta, erhs_zeta, rhs_init,
    /// rhs_xi, rhs_eta, rhs_zeta, scale_rsd, update_u.
    fn step(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        let f: fn(&mut lu::Lu) = match name {
            "setbv" => lu::Lu::setbv,
            "setiv" => lu::Lu::setiv,
            "erhs_init" => lu::Lu::erhs_init,
            "erhs_xi" => lu::Lu::erhs_xi,
            "erhs_eta" => lu::Lu::erhs_eta,
            "erhs_zeta" => lu::Lu::erhs_zeta,
            "rhs_init" => lu::Lu::rhs_init,
            "rhs_xi" => lu::Lu::rhs_xi,
            "rhs_eta" => lu::Lu::rhs_eta,
            "rhs_zeta" => lu::Lu::rhs_zeta,
            "scale_rsd" => lu::Lu::scale_rsd,
            "update_u" => lu::Lu::update_u,
            _ => return Err(err(format!("unknown LU step {name:?}"))),
        };
        self.with(py, f);
        Ok(())
    }

    /// jacld(k) (lower) or jacu(k) (upper), k in 2 ..= nz-1.
    fn jacobian(&self, py: Python<'_>, k: usize, upper: bool) -> PyResult<()> {
        self.check_plane(k, 2)?;
        self.with(py, |l| if upper { l.jacu(k) } else { l.jacld(k) });
        Ok(())
    }

    /// blts(k) (lower) or buts(k) (upper) without the exchanges.
    fn sweep(&self, py: Python<'_>, k: usize, upper: bool) -> PyResult<()> {
        self.check_plane(k, 2)?;
        self.with(py, |l| if upper { l.buts(k) } else { l.blts(k) });
        Ok(())
    }

    /// The 5-vectors of field ('u' or 'rsd') at layers along axis (0: i, 1: j), each k in
    /// k0..=k1 and each t in t0..=t1 along the other axis.
    #[allow(clippy::too_many_arguments)]
    fn pack<'py>(&self, py: Python<'py>, field: &str, axis: usize, layers: Vec<isize>, t0: isize, t1: isize, k0: usize, k1: usize) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let f = lu_field(field)?;
        let v = self.with(py, |l| if l.valid_points(axis, &layers, t0, t1, k0, k1) { Some(l.pack(f, axis, &layers, t0, t1, k0, k1)) } else { None });
        Ok(PyArray1::from_vec(py, v.ok_or_else(|| err("ghost exchange outside the box"))?))
    }

    /// Writes data (as `pack` returns it) into those points.
    #[allow(clippy::too_many_arguments)]
    fn unpack(&self, py: Python<'_>, field: &str, axis: usize, layers: Vec<isize>, t0: isize, t1: isize, k0: usize, k1: usize, data: PyReadonlyArrayDyn<f64>) -> PyResult<()> {
        let f = lu_field(field)?;
        let d = data.as_slice()?;
        self.with(py, |l| if l.valid_points(axis, &layers, t0, t1, k0, k1) { l.unpack(f, axis, &layers, t0, t1, k0, k1, d) } else { Err("ghost exchange outside the box".into()) })
            .map_err(err)
    }

    /// l2norm's per-column sums of squares of field over k (nx0 * ny0 * 5, zeros elsewhere).
    fn l2_columns<'py>(&self, py: Python<'py>, field: &str) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let f = lu_field(field)?;
        Ok(PyArray1::from_vec(py, self.with(py, |l| l.l2_columns(f))))
    }

    /// error's per-column sums of (exact - u)^2 over k, placed as l2_columns.
    fn error_columns<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        PyArray1::from_vec(py, self.with(py, |l| l.error_columns()))
    }

    /// pintgr's integrand on a plane (see lu::Lu::phi_plane) as a 2-D array.
    fn phi_plane<'py>(&self, py: Python<'py>, axis: usize, fixed: isize, r: (isize, isize), s: (isize, isize)) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let (v, dims) = self.with(py, |l| {
            let g = l.g;
            let dims = match axis {
                2 => [g.nx + 2, g.ny + 2],
                1 => [g.nx + 2, g.nz + 2],
                _ => [g.ny + 2, g.nz + 2],
            };
            (l.phi_plane(axis, fixed, r, s), dims)
        });
        PyArray1::from_vec(py, v.map_err(err)?).reshape(dims)
    }
}

/// NPB LU's process grid (xdim, ydim) for n processes, or None where NPB refuses n.
#[pyfunction]
fn npb_lu_proc_grid(n: usize) -> Option<(usize, usize)> {
    lu::proc_grid(n)
}

/// NPB's roots-of-unity table for lengths up to n, as an (n, 2) array.
#[pyfunction]
fn npb_ft_roots<'py>(py: Python<'py>, n: usize) -> PyResult<Bound<'py, PyArray2<f64>>> {
    if !n.is_power_of_two() {
        return Err(err(format!("FFT length {n} is not a power of two")));
    }
    let u = ft::roots(n);
    PyArray1::from_vec(py, u.concat()).reshape([u.len(), 2])
}

/// In-place FFT along the middle axis of a complex (outer, n, inner) array given as its
/// float64 view; dir +1 or -1.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn npb_ft_fft(py: Python<'_>, mut data: PyReadwriteArrayDyn<f64>, outer: usize, n: usize, inner: usize, dir: i32, roots: PyReadonlyArrayDyn<f64>) -> PyResult<()> {
    let d = data.as_slice_mut()?;
    let r = roots.as_slice()?;
    if !n.is_power_of_two() || d.len() != 2 * outer * n * inner || r.len() < 2 * n || !(dir == 1 || dir == -1) {
        return Err(err("fft: shape, roots or direction do not agree"));
    }
    let u: Vec<[f64; 2]> = r.chunks_exact(2).map(|c| [c[0], c[1]]).collect();
    py.detach(|| {
        let mut s = ft::FftScratch::new(n);
        ft::fft_axis(d, outer, n, inner, dir, &u, &mut s);
    });
    Ok(())
}

/// Transpose of a complex rows x cols matrix (float64 views) into `out`.
#[pyfunction]
fn npb_ft_transpose(py: Python<'_>, src: PyReadonlyArrayDyn<f64>, rows: usize, cols: usize, mut out: PyReadwriteArrayDyn<f64>) -> PyResult<()> {
    let (s, o) = (src.as_slice()?, out.as_slice_mut()?);
    check_len("src", s.len(), 2 * rows * cols)?;
    check_len("out", o.len(), 2 * rows * cols)?;
    py.detach(|| ft::transpose(s, rows, cols, o));
    Ok(())
}

/// FT's initial conditions for z-planes z0..z0+nzl (float64 view of the complex array).
#[pyfunction]
fn npb_ft_initial_conditions<'py>(py: Python<'py>, nx: usize, ny: usize, z0: usize, nzl: usize) -> Bound<'py, PyArray1<f64>> {
    PyArray1::from_vec(py, py.detach(|| ft::initial_conditions(nx, ny, z0, nzl)))
}

/// FT's evolution factors for y-planes y0..y0+nyl, layout (y, x, z).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn npb_ft_twiddle<'py>(py: Python<'py>, nx: usize, ny: usize, nz: usize, y0: usize, nyl: usize, alpha: f64) -> PyResult<Bound<'py, PyArray1<f64>>> {
    if y0 + nyl > ny || nx == 0 || nz == 0 {
        return Err(err("twiddle: y-planes outside the grid"));
    }
    Ok(PyArray1::from_vec(py, py.detach(|| ft::twiddle(nx, ny, nz, y0, nyl, alpha))))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(npb_vranlc, m)?)?;
    m.add_function(wrap_pyfunction!(npb_pow46, m)?)?;
    m.add_function(wrap_pyfunction!(npb_ep_batches, m)?)?;
    m.add_function(wrap_pyfunction!(npb_is_keys, m)?)?;
    m.add_function(wrap_pyfunction!(npb_is_bucket_sort, m)?)?;
    m.add_function(wrap_pyfunction!(npb_is_rank_counts, m)?)?;
    m.add_function(wrap_pyfunction!(npb_is_full_sort, m)?)?;
    m.add_class::<CgBlock>()?;
    m.add_function(wrap_pyfunction!(npb_cg_makea, m)?)?;
    m.add_function(wrap_pyfunction!(npb_cg_dot, m)?)?;
    m.add_function(wrap_pyfunction!(npb_cg_dist2, m)?)?;
    m.add_function(wrap_pyfunction!(npb_mg_resid, m)?)?;
    m.add_function(wrap_pyfunction!(npb_mg_psinv, m)?)?;
    m.add_function(wrap_pyfunction!(npb_mg_rprj3, m)?)?;
    m.add_function(wrap_pyfunction!(npb_mg_interp, m)?)?;
    m.add_function(wrap_pyfunction!(npb_mg_periodic, m)?)?;
    m.add_function(wrap_pyfunction!(npb_mg_get_face, m)?)?;
    m.add_function(wrap_pyfunction!(npb_mg_put_face, m)?)?;
    m.add_function(wrap_pyfunction!(npb_mg_norm_leaves, m)?)?;
    m.add_function(wrap_pyfunction!(npb_mg_zran3, m)?)?;
    m.add_function(wrap_pyfunction!(npb_mg_extremes, m)?)?;
    m.add_class::<LuRank>()?;
    m.add_function(wrap_pyfunction!(npb_lu_proc_grid, m)?)?;
    m.add_class::<SpRank>()?;
    m.add_function(wrap_pyfunction!(npb_ft_roots, m)?)?;
    m.add_function(wrap_pyfunction!(npb_ft_fft, m)?)?;
    m.add_function(wrap_pyfunction!(npb_ft_transpose, m)?)?;
    m.add_function(wrap_pyfunction!(npb_ft_initial_conditions, m)?)?;
    m.add_function(wrap_pyfunction!(npb_ft_twiddle, m)?)?;
    Ok(())
}
