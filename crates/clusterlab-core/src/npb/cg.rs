//! CG: NPB's random sparse symmetric matrix and the products of the conjugate gradient.
//!
//! [`makea`] reproduces NPB's `makea`/`sprnvc`/`vecset`/`sparse`: the same random stream
//! (its first value is consumed by the caller's `zeta = randlc(tran, amult)`, as in NPB), the
//! same outer products, duplicates summed in generation order, zero sums dropped. It keeps
//! only the block `rows x cols` of one process of NPB's 2-D grid; each row's entries are then
//! sorted by column.
//!
//! Sums are taken in a fixed order that does not depend on the process grid: the columns are
//! cut into `LEAVES` leaf blocks (boundaries `floor(l * n / LEAVES)`); each row of a product
//! (and each dot product) sums each leaf in column order, then combines the leaves as a binary
//! tree over adjacent leaves. A process owning an aligned run of leaves computes a subtree,
//! and the exchanges with partners at distance 1, 2, 4, ... combine subtrees the same way.

use super::randlc::{randlc, MULT};
use super::tree_sum;
use std::ops::Range;

/// Column leaf blocks; process column counts up to this (powers of two) are supported.
pub const LEAVES: usize = 16;

/// Leaf boundaries `floor(l * n / LEAVES)`, l = 0..=LEAVES.
pub fn leaf_bounds(n: usize) -> Vec<usize> {
    (0..=LEAVES).map(|l| l * n / LEAVES).collect()
}

/// One process's block in CSR form: local rows, global column indices sorted within rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub rowptr: Vec<i64>,
    pub colidx: Vec<i32>,
    pub vals: Vec<f64>,
}

/// NPB's `sprnvc`: `nz` distinct random positions in 1..=n with random values.
fn sprnvc(n: usize, nz: usize, nn1: usize, tran: &mut f64, v: &mut Vec<f64>, iv: &mut Vec<usize>, mark: &mut [bool]) {
    v.clear();
    iv.clear();
    while iv.len() < nz {
        let vecelt = randlc(tran, MULT);
        let vecloc = randlc(tran, MULT);
        let i = (nn1 as f64 * vecloc) as usize + 1;
        if i > n || mark[i] {
            continue;
        }
        mark[i] = true;
        v.push(vecelt);
        iv.push(i);
    }
    for &i in iv.iter() {
        mark[i] = false;
    }
}

/// The block of NPB's matrix for `rows` x `cols` (0-based ranges). `tran` is the generator
/// state after the caller's first draw (NPB: `tran = 314159265; zeta = randlc(tran, amult)`).
pub fn makea(n: usize, nonzer: usize, rcond: f64, shift: f64, mut tran: f64, rows: Range<usize>, cols: Range<usize>) -> Block {
    let mut nn1 = 1usize;
    while nn1 < n {
        nn1 *= 2;
    }
    let ratio = rcond.powf(1.0 / n as f64);
    let mut size = 1.0f64;
    let mut mark = vec![false; n + 1];
    let (mut v, mut iv) = (Vec::with_capacity(nonzer + 1), Vec::with_capacity(nonzer + 1));
    // triples (local row, global col, value) in generation order
    let mut trip: Vec<(u32, u32, f64)> = Vec::new();
    for iouter in 1..=n {
        sprnvc(n, nonzer, nn1, &mut tran, &mut v, &mut iv, &mut mark);
        // vecset(iouter, 0.5)
        match iv.iter().position(|&i| i == iouter) {
            Some(k) => v[k] = 0.5,
            None => {
                v.push(0.5);
                iv.push(iouter);
            }
        }
        for (ivelt, &jcol1) in iv.iter().enumerate() {
            let jcol = jcol1 - 1;
            if !cols.contains(&jcol) {
                continue;
            }
            let scale = size * v[ivelt];
            for (ivelt1, &irow1) in iv.iter().enumerate() {
                let irow = irow1 - 1;
                if rows.contains(&irow) {
                    trip.push(((irow - rows.start) as u32, jcol as u32, v[ivelt1] * scale));
                }
            }
        }
        size *= ratio;
    }
    for i in rows.clone() {
        if cols.contains(&i) {
            trip.push(((i - rows.start) as u32, i as u32, rcond - shift));
        }
    }
    // sparse(): stable bucket sort by row, then sum duplicates in order, drop zero sums
    let nrows = rows.len();
    let mut count = vec![0usize; nrows + 1];
    for t in &trip {
        count[t.0 as usize + 1] += 1;
    }
    for r in 0..nrows {
        count[r + 1] += count[r];
    }
    let mut order = vec![0usize; trip.len()];
    let mut fill = count.clone();
    for (k, t) in trip.iter().enumerate() {
        order[fill[t.0 as usize]] = k;
        fill[t.0 as usize] += 1;
    }
    let mut x = vec![0.0f64; n];
    let mut touched = vec![false; n];
    let mut nzloc: Vec<u32> = Vec::new();
    let mut rowptr = vec![0i64; nrows + 1];
    let (mut colidx, mut vals) = (Vec::new(), Vec::new());
    for r in 0..nrows {
        nzloc.clear();
        for &k in &order[count[r]..count[r + 1]] {
            let (_, c, a) = trip[k];
            x[c as usize] += a;
            if !touched[c as usize] {
                touched[c as usize] = true;
                nzloc.push(c);
            }
        }
        nzloc.sort_unstable();
        for &c in &nzloc {
            let xi = x[c as usize];
            x[c as usize] = 0.0;
            touched[c as usize] = false;
            if xi != 0.0 {
                colidx.push(c as i32);
                vals.push(xi);
            }
        }
        rowptr[r + 1] = colidx.len() as i64;
    }
    Block { rowptr, colidx, vals }
}

/// Rows handled together by [`Packed::matvec`] (independent sums, so the CPU overlaps them).
pub const LANES: usize = 4;

/// A block prepared for products: for each chunk of `LANES` rows and each of the process's
/// leaves, the rows' entries in that leaf interleaved lane by lane and padded with zeros to
/// the longest (SELL-C storage). Each (row, leaf) sum still adds its entries in column order,
/// and padding adds +0.0, so the values are those of the plain leaf-ordered sum.
#[derive(Debug, Clone)]
pub struct Packed {
    pub nrows: usize,
    pub ncols: usize,
    pub lp: usize,
    pub nnz: usize,
    ptr: Vec<usize>,
    vals: Vec<f64>,
    cols: Vec<u32>,
}

impl Packed {
    /// `bounds`: the process's `lp + 1` leaf boundaries in global columns; `col0` its first
    /// column (`bounds[0]`). Errors when an entry lies outside the process's columns.
    pub fn new(b: &Block, bounds: &[usize]) -> Result<Packed, String> {
        let lp = bounds.len() - 1;
        if lp == 0 || lp > LEAVES || !lp.is_power_of_two() || bounds.windows(2).any(|w| w[0] > w[1]) {
            return Err("leaf bounds must be a power-of-two number (<= 16) of ascending ranges".into());
        }
        let (col0, col1) = (bounds[0], bounds[lp]);
        if b.colidx.iter().any(|&c| (c as usize) < col0 || c as usize >= col1) {
            return Err("an entry lies outside the process's columns".into());
        }
        let nrows = b.rowptr.len() - 1;
        let nchunks = nrows.div_ceil(LANES);
        let mut ptr = Vec::with_capacity(nchunks * lp + 1);
        let (mut vals, mut cols) = (Vec::new(), Vec::new());
        // the entries of row r in leaf s
        let seg = |r: usize, s: usize| {
            let (lo, hi) = (b.rowptr[r] as usize, b.rowptr[r + 1] as usize);
            let row = &b.colidx[lo..hi];
            let a = lo + row.partition_point(|&c| (c as usize) < bounds[s]);
            let z = lo + row.partition_point(|&c| (c as usize) < bounds[s + 1]);
            a..z
        };
        for ch in 0..nchunks {
            for s in 0..lp {
                ptr.push(vals.len());
                let rows: Vec<_> = (0..LANES).map(|i| ch * LANES + i).map(|r| if r < nrows { seg(r, s) } else { 0..0 }).collect();
                let longest = rows.iter().map(|g| g.len()).max().unwrap_or(0);
                for j in 0..longest {
                    for g in &rows {
                        if j < g.len() {
                            vals.push(b.vals[g.start + j]);
                            cols.push(b.colidx[g.start + j] as u32 - col0 as u32);
                        } else {
                            vals.push(0.0);
                            cols.push(0);
                        }
                    }
                }
            }
        }
        ptr.push(vals.len());
        Ok(Packed { nrows, ncols: col1 - col0, lp, nnz: b.vals.len(), ptr, vals, cols })
    }

    /// `out[r] = sum_j a[r, j] x[j]` (x: the process's columns), leaf-ordered as described in
    /// the module documentation. Panics unless `x.len() == ncols` and `out.len() == nrows`.
    #[allow(clippy::needless_range_loop)] // lane loops read clearer with the lane index
    pub fn matvec(&self, x: &[f64], out: &mut [f64]) {
        assert!(x.len() == self.ncols && out.len() == self.nrows);
        if self.ncols == 0 {
            out.fill(0.0);
            return;
        }
        let lp = self.lp;
        let mut leaf = [[0.0f64; LANES]; LEAVES];
        for (ch, rows) in out.chunks_mut(LANES).enumerate() {
            for (s, l) in leaf[..lp].iter_mut().enumerate() {
                let (a, z) = (self.ptr[ch * lp + s], self.ptr[ch * lp + s + 1]);
                let mut acc = [0.0f64; LANES];
                for (v, c) in self.vals[a..z].chunks_exact(LANES).zip(self.cols[a..z].chunks_exact(LANES)) {
                    for i in 0..LANES {
                        // SAFETY: every column was checked against ncols in `new`
                        acc[i] += v[i] * unsafe { x.get_unchecked(c[i] as usize) };
                    }
                }
                *l = acc;
            }
            let mut w = lp;
            while w > 1 {
                for s in 0..w / 2 {
                    for i in 0..LANES {
                        leaf[s][i] = leaf[2 * s][i] + leaf[2 * s + 1][i];
                    }
                }
                w /= 2;
            }
            rows.copy_from_slice(&leaf[0][..rows.len()]);
        }
    }
}

/// Dot products over the process's leaves (`bounds` relative to the local vectors): each
/// leaf summed in order, leaves combined as a tree. `y = None` means `x . x`.
pub fn dot(x: &[f64], y: Option<&[f64]>, bounds: &[usize]) -> f64 {
    let lp = bounds.len() - 1;
    let mut leaf = [0.0f64; LEAVES];
    for s in 0..lp {
        let (lo, hi) = (bounds[s], bounds[s + 1]);
        let mut sum = 0.0f64;
        match y {
            Some(y) => {
                for j in lo..hi {
                    sum += x[j] * y[j];
                }
            }
            None => {
                for &v in &x[lo..hi] {
                    sum += v * v;
                }
            }
        }
        leaf[s] = sum;
    }
    tree_sum(&mut leaf[..lp])
}

/// `sum (x - y)^2` over the leaves, as [`dot`] (CG's residual norm).
pub fn dist2(x: &[f64], y: &[f64], bounds: &[usize]) -> f64 {
    let lp = bounds.len() - 1;
    let mut leaf = [0.0f64; LEAVES];
    for s in 0..lp {
        let mut sum = 0.0f64;
        for j in bounds[s]..bounds[s + 1] {
            let d = x[j] - y[j];
            sum += d * d;
        }
        leaf[s] = sum;
    }
    tree_sum(&mut leaf[..lp])
}

#[cfg(test)]
mod tests {
    use super::super::randlc::SEED;
    use super::*;

    fn tran0() -> f64 {
        let mut t = SEED;
        randlc(&mut t, MULT);
        t
    }

    #[test]
    fn blocks_tile_the_whole_matrix() {
        let n = 200;
        let whole = makea(n, 5, 0.1, 10.0, tran0(), 0..n, 0..n);
        // symmetric up to the order duplicates were summed in, diagonal present
        let get = |b: &Block, r: usize, c: usize| {
            let (lo, hi) = (b.rowptr[r] as usize, b.rowptr[r + 1] as usize);
            b.colidx[lo..hi].iter().position(|&x| x as usize == c).map(|k| b.vals[lo + k])
        };
        for r in 0..n {
            assert!(get(&whole, r, r).is_some());
            let (lo, hi) = (whole.rowptr[r] as usize, whole.rowptr[r + 1] as usize);
            assert!(whole.colidx[lo..hi].windows(2).all(|w| w[0] < w[1]));
            for k in lo..hi {
                let c = whole.colidx[k] as usize;
                let t = get(&whole, c, r).unwrap();
                assert!((t - whole.vals[k]).abs() <= 1e-14 * t.abs().max(1.0));
            }
        }
        let part = makea(n, 5, 0.1, 10.0, tran0(), 50..100, 100..150);
        for r in 0..50 {
            for c in 100..150 {
                assert_eq!(get(&part, r, c).map(f64::to_bits), get(&whole, r + 50, c).map(f64::to_bits));
            }
        }
    }

    #[test]
    #[allow(clippy::needless_range_loop)]
    fn products_do_not_depend_on_the_column_split() {
        let n = 160;
        let lb = leaf_bounds(n);
        let whole = makea(n, 6, 0.1, 12.0, tran0(), 0..n, 0..n);
        let x: Vec<f64> = (0..n).map(|i| 1.0 / (i as f64 + 1.5)).collect();
        let mut full = vec![0.0; n];
        Packed::new(&whole, &lb).unwrap().matvec(&x, &mut full);
        // the plain leaf-ordered sum
        for r in 0..n {
            let mut leaves = [0.0f64; LEAVES];
            for k in whole.rowptr[r] as usize..whole.rowptr[r + 1] as usize {
                let c = whole.colidx[k] as usize;
                let l = (0..LEAVES).find(|&l| c < lb[l + 1]).unwrap();
                leaves[l] += whole.vals[k] * x[c];
            }
            assert_eq!(tree_sum(&mut leaves).to_bits(), full[r].to_bits());
        }
        // two column halves, combined as the exchange at distance 1 does
        let mut halves = Vec::new();
        for h in 0..2 {
            let cols = lb[h * 8]..lb[h * 8 + 8];
            let b = makea(n, 6, 0.1, 12.0, tran0(), 0..n, cols.clone());
            let mut w = vec![0.0; n];
            Packed::new(&b, &lb[h * 8..=h * 8 + 8]).unwrap().matvec(&x[cols.clone()], &mut w);
            halves.push(w);
        }
        for r in 0..n {
            assert_eq!((halves[0][r] + halves[1][r]).to_bits(), full[r].to_bits());
        }
        let d = dot(&x, Some(&full), &lb);
        let rel: Vec<usize> = (0..=8).map(|s| lb[8 + s] - lb[8]).collect();
        let d2 = dot(&x[..lb[8]], Some(&full[..lb[8]]), &lb[..=8]) + dot(&x[lb[8]..], Some(&full[lb[8]..]), &rel);
        assert_eq!(d.to_bits(), d2.to_bits());
    }
}
