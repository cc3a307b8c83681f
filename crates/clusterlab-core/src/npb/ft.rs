//! FT: NPB's 3-D FFT PDE kernel, the per-process parts.
//!
//! Complex arrays are interleaved `f64` pairs (re, im). The FFT is NPB's: Swarztrauber's
//! variant of the Stockham radix-2 transform (`cfftz`/`fftz2`) with NPB's table of roots of
//! unity, applied to blocks of `BLOCK` lines at a time so the inner loop runs across lines;
//! direction +1 uses the roots, -1 their conjugates, no scaling. Each line is transformed by
//! the same operations whatever block or layout it is in, so results do not depend on the
//! decomposition.

use super::randlc::{mul46, pow46, MULT, R46, SEED};
use std::f64::consts::PI;

/// Lines transformed together (NPB's `fftblock`).
pub const BLOCK: usize = 16;

/// NPB's roots-of-unity table for transforms up to length `n` (a power of two): for each
/// `ln = 1, 2, 4, ...`, entry `ln + i` is `exp(i * pi * i / ln)`, i < ln.
pub fn roots(n: usize) -> Vec<[f64; 2]> {
    let mut u = vec![[0.0, 0.0]; n.max(2)];
    let mut ln = 1;
    while ln < n {
        let t = PI / ln as f64;
        for i in 0..ln {
            let ti = i as f64 * t;
            u[ln + i] = [ti.cos(), ti.sin()];
        }
        ln *= 2;
    }
    u
}

/// One Stockham pass `l` (1-based) of NPB's `fftz2` on split arrays `[n][b]`.
#[allow(clippy::too_many_arguments)]
fn fftz2(dir: i32, l: u32, m: u32, n: usize, b: usize, u: &[[f64; 2]], xr: &[f64], xi: &[f64], yr: &mut [f64], yi: &mut [f64]) {
    let n1 = n / 2;
    let lk = 1usize << (l - 1);
    let li = 1usize << (m - l);
    let lj = 2 * lk;
    for i in 0..li {
        let i11 = i * lk;
        let i12 = i11 + n1;
        let i21 = i * lj;
        let i22 = i21 + lk;
        let [ur, ui0] = u[li + i];
        let ui = if dir >= 1 { ui0 } else { -ui0 };
        for k in 0..lk {
            let (a, c) = ((i11 + k) * b, (i12 + k) * b);
            let (d, e) = ((i21 + k) * b, (i22 + k) * b);
            let (x11r, x11i) = (&xr[a..a + b], &xi[a..a + b]);
            let (x21r, x21i) = (&xr[c..c + b], &xi[c..c + b]);
            for j in 0..b {
                let (pr, pi) = (x11r[j], x11i[j]);
                let (qr, qi) = (x21r[j], x21i[j]);
                yr[d + j] = pr + qr;
                yi[d + j] = pi + qi;
                let (sr, si) = (pr - qr, pi - qi);
                yr[e + j] = ur * sr - ui * si;
                yi[e + j] = ur * si + ui * sr;
            }
        }
    }
}

/// Transforms the `b` lines held in split arrays `[n][b]` (NPB's `cfftz`); the result ends in
/// `xr`/`xi`, `yr`/`yi` are scratch of the same size.
#[allow(clippy::too_many_arguments)]
fn cfftz(dir: i32, n: usize, b: usize, u: &[[f64; 2]], xr: &mut [f64], xi: &mut [f64], yr: &mut [f64], yi: &mut [f64]) {
    let m = n.trailing_zeros();
    let mut l = 1;
    while l <= m {
        fftz2(dir, l, m, n, b, u, xr, xi, yr, yi);
        if l == m {
            xr[..n * b].copy_from_slice(&yr[..n * b]);
            xi[..n * b].copy_from_slice(&yi[..n * b]);
            return;
        }
        fftz2(dir, l + 1, m, n, b, u, yr, yi, xr, xi);
        l += 2;
    }
}

/// Scratch for transforms of length up to `n`.
pub struct FftScratch {
    xr: Vec<f64>,
    xi: Vec<f64>,
    yr: Vec<f64>,
    yi: Vec<f64>,
}

impl FftScratch {
    pub fn new(n: usize) -> Self {
        let s = n * BLOCK;
        FftScratch { xr: vec![0.0; s], xi: vec![0.0; s], yr: vec![0.0; s], yi: vec![0.0; s] }
    }
}

/// FFT of length `n` along the middle axis of a complex array of shape
/// `(outer, n, inner)` (C order): `inner == 1` means contiguous lines.
pub fn fft_axis(data: &mut [f64], outer: usize, n: usize, inner: usize, dir: i32, u: &[[f64; 2]], s: &mut FftScratch) {
    assert!(n.is_power_of_two() && data.len() == 2 * outer * n * inner && u.len() >= n);
    if n == 1 {
        return;
    }
    if inner == 1 {
        // contiguous lines: blocks of BLOCK lines
        let mut line = 0;
        while line < outer {
            let b = BLOCK.min(outer - line);
            for j in 0..b {
                let src = &data[2 * (line + j) * n..2 * (line + j + 1) * n];
                for i in 0..n {
                    s.xr[i * b + j] = src[2 * i];
                    s.xi[i * b + j] = src[2 * i + 1];
                }
            }
            cfftz(dir, n, b, u, &mut s.xr, &mut s.xi, &mut s.yr, &mut s.yi);
            for j in 0..b {
                let dst = &mut data[2 * (line + j) * n..2 * (line + j + 1) * n];
                for i in 0..n {
                    dst[2 * i] = s.xr[i * b + j];
                    dst[2 * i + 1] = s.xi[i * b + j];
                }
            }
            line += b;
        }
        return;
    }
    for o in 0..outer {
        let base = o * n * inner;
        let mut c = 0;
        while c < inner {
            let b = BLOCK.min(inner - c);
            for i in 0..n {
                let row = 2 * (base + i * inner + c);
                for j in 0..b {
                    s.xr[i * b + j] = data[row + 2 * j];
                    s.xi[i * b + j] = data[row + 2 * j + 1];
                }
            }
            cfftz(dir, n, b, u, &mut s.xr, &mut s.xi, &mut s.yr, &mut s.yi);
            for i in 0..n {
                let row = 2 * (base + i * inner + c);
                for j in 0..b {
                    data[row + 2 * j] = s.xr[i * b + j];
                    data[row + 2 * j + 1] = s.xi[i * b + j];
                }
            }
            c += b;
        }
    }
}

/// Transpose of a complex `rows x cols` matrix (C order) into `out` (`cols x rows`), blocked.
pub fn transpose(src: &[f64], rows: usize, cols: usize, out: &mut [f64]) {
    assert!(src.len() == 2 * rows * cols && out.len() == src.len());
    const T: usize = 32;
    for r0 in (0..rows).step_by(T) {
        for c0 in (0..cols).step_by(T) {
            for r in r0..(r0 + T).min(rows) {
                for c in c0..(c0 + T).min(cols) {
                    let (a, b) = (2 * (r * cols + c), 2 * (c * rows + r));
                    out[b] = src[a];
                    out[b + 1] = src[a + 1];
                }
            }
        }
    }
}

/// NPB's initial conditions for z-planes `z0 .. z0 + nzl` of an `nx x ny x nz` grid: the
/// generator's values in order, two per complex point (x fastest).
pub fn initial_conditions(nx: usize, ny: usize, z0: usize, nzl: usize) -> Vec<f64> {
    let mut out = vec![0.0; 2 * nx * ny * nzl];
    let a = MULT as u64;
    let mut s = mul46(SEED as u64, pow46(MULT, (2 * nx * ny * z0) as u64) as u64);
    for v in out.iter_mut() {
        s = mul46(s, a);
        *v = s as f64 * R46;
    }
    out
}

/// The evolution factors `exp(-4 alpha pi^2 (kx^2 + ky^2 + kz^2))` for the layout
/// (y in `y0 .. y0 + nyl`, x, z) (C order, z fastest), with NPB's wave numbers
/// `((i + n/2) mod n) - n/2`.
pub fn twiddle(nx: usize, ny: usize, nz: usize, y0: usize, nyl: usize, alpha: f64) -> Vec<f64> {
    let ap = -4.0 * alpha * PI * PI;
    let wave = |i: usize, n: usize| ((i + n / 2) % n) as i64 - (n / 2) as i64;
    let mut out = Vec::with_capacity(nx * nyl * nz);
    for j in y0..y0 + nyl {
        let jj = wave(j, ny);
        for i in 0..nx {
            let ii = wave(i, nx);
            let ij2 = jj * jj + ii * ii;
            for k in 0..nz {
                let kk = wave(k, nz);
                out.push((ap * (kk * kk + ij2) as f64).exp());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dft(x: &[[f64; 2]], dir: f64) -> Vec<[f64; 2]> {
        let n = x.len();
        (0..n)
            .map(|k| {
                let mut s = [0.0, 0.0];
                for (j, v) in x.iter().enumerate() {
                    let t = dir * 2.0 * PI * (j * k) as f64 / n as f64;
                    s[0] += v[0] * t.cos() - v[1] * t.sin();
                    s[1] += v[0] * t.sin() + v[1] * t.cos();
                }
                s
            })
            .collect()
    }

    #[test]
    fn matches_a_direct_transform_and_is_layout_independent() {
        let n = 16;
        let u = roots(64);
        let lines = 20;
        let x = initial_conditions(n, lines, 0, 1);
        let mut a = x.clone();
        let mut s = FftScratch::new(n);
        fft_axis(&mut a, lines, n, 1, 1, &u, &mut s);
        for l in 0..lines {
            let line: Vec<[f64; 2]> = (0..n).map(|i| [x[2 * (l * n + i)], x[2 * (l * n + i) + 1]]).collect();
            let want = dft(&line, 1.0);
            for i in 0..n {
                assert!((a[2 * (l * n + i)] - want[i][0]).abs() < 1e-12);
                assert!((a[2 * (l * n + i) + 1] - want[i][1]).abs() < 1e-12);
            }
        }
        // the same lines stored as columns (shape (1, n, lines)) give the same bits
        let mut t = vec![0.0; x.len()];
        transpose(&x, lines, n, &mut t);
        fft_axis(&mut t, 1, n, lines, 1, &u, &mut s);
        let mut back = vec![0.0; x.len()];
        transpose(&t, n, lines, &mut back);
        assert_eq!(back, a);
        // inverse (unscaled) gives n * x
        fft_axis(&mut a, lines, n, 1, -1, &u, &mut s);
        for (p, q) in a.iter().zip(x.iter()) {
            assert!((p / n as f64 - q).abs() < 1e-13);
        }
    }

    #[test]
    fn twiddle_wave_numbers() {
        let t = twiddle(4, 4, 4, 0, 4, 1e-6);
        assert_eq!(t[0], 1.0);
        // (y=0, x=0, z=2): kz = -2
        assert_eq!(t[2], (-4.0 * 1e-6 * PI * PI * 4.0f64).exp());
    }
}
