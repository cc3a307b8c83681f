//! MG: the V-cycle operators of NPB's multigrid kernel on one process's box.
//!
//! A grid is a flat array of `n1 * n2 * n3` values, `i1` fastest, with one ghost layer on
//! every side (interior `1 ..= n - 2`). The formulas (and the order of their additions) are
//! NPB's, so each point's value depends only on its neighbours, never on the decomposition;
//! the caller fills the ghost layers (periodic copy or halo exchange) after each operator,
//! as NPB's `comm3` does.

use super::randlc::{mul46, pow46, R46};

#[inline(always)]
fn ix(n1: usize, n2: usize, i1: usize, i2: usize, i3: usize) -> usize {
    i1 + n1 * (i2 + n2 * i3)
}

/// For line (i2, i3): `s1[i1]` = the 4 edge neighbours of (i1, i2, i3) in the (i2, i3) plane,
/// `s2[i1]` = the 4 corner neighbours, each summed in NPB's order (resid's u1/u2, psinv's r1/r2).
fn plane_sums(u: &[f64], n1: usize, n2: usize, i2: usize, i3: usize, s1: &mut [f64], s2: &mut [f64]) {
    for i1 in 0..n1 {
        s1[i1] = u[ix(n1, n2, i1, i2 - 1, i3)] + u[ix(n1, n2, i1, i2 + 1, i3)] + u[ix(n1, n2, i1, i2, i3 - 1)] + u[ix(n1, n2, i1, i2, i3 + 1)];
        s2[i1] = u[ix(n1, n2, i1, i2 - 1, i3 - 1)] + u[ix(n1, n2, i1, i2 + 1, i3 - 1)] + u[ix(n1, n2, i1, i2 - 1, i3 + 1)] + u[ix(n1, n2, i1, i2 + 1, i3 + 1)];
    }
}

/// `r = v - A u` on the interior (`v = None`: `r` holds v and is overwritten, as NPB's
/// in-place call `resid(u, r, r)`). `a` = NPB's a(0..3); a(1) is assumed 0, as in NPB.
pub fn resid(u: &[f64], v: Option<&[f64]>, r: &mut [f64], n: [usize; 3], a: [f64; 4]) {
    let [n1, n2, n3] = n;
    let mut u1 = vec![0.0; n1];
    let mut u2 = vec![0.0; n1];
    for i3 in 1..n3 - 1 {
        for i2 in 1..n2 - 1 {
            plane_sums(u, n1, n2, i2, i3, &mut u1, &mut u2);
            let base = ix(n1, n2, 0, i2, i3);
            for i1 in 1..n1 - 1 {
                let vv = match v {
                    Some(v) => v[base + i1],
                    None => r[base + i1],
                };
                r[base + i1] = vv - a[0] * u[base + i1] - a[2] * (u2[i1] + u1[i1 - 1] + u1[i1 + 1]) - a[3] * (u2[i1 - 1] + u2[i1 + 1]);
            }
        }
    }
}

/// Smoother `u = u + C r` on the interior; `c` = NPB's c(0..3), c(3) assumed 0.
pub fn psinv(r: &[f64], u: &mut [f64], n: [usize; 3], c: [f64; 4]) {
    let [n1, n2, n3] = n;
    let mut r1 = vec![0.0; n1];
    let mut r2 = vec![0.0; n1];
    for i3 in 1..n3 - 1 {
        for i2 in 1..n2 - 1 {
            plane_sums(r, n1, n2, i2, i3, &mut r1, &mut r2);
            let base = ix(n1, n2, 0, i2, i3);
            for i1 in 1..n1 - 1 {
                u[base + i1] = u[base + i1] + c[0] * r[base + i1] + c[1] * (r[base + i1 - 1] + r[base + i1 + 1] + r1[i1]) + c[2] * (r2[i1] + r1[i1 - 1] + r1[i1 + 1]);
            }
        }
    }
}

/// Restriction `s = P r` from a fine box `m_k` to the coarse box `m_j` (interior only).
pub fn rprj3(r: &[f64], mk: [usize; 3], s: &mut [f64], mj: [usize; 3]) {
    let [m1k, m2k, _] = mk;
    let [m1j, m2j, m3j] = mj;
    // NPB's d = 2 when the fine box has a single interior point on that axis
    let d: Vec<usize> = mk.iter().map(|&m| if m == 3 { 2 } else { 1 }).collect();
    let rr = |i1: usize, i2: usize, i3: usize| r[ix(m1k, m2k, i1 - 1, i2 - 1, i3 - 1)]; // 1-based
    let mut x1 = vec![0.0; m1k + 1];
    let mut y1 = vec![0.0; m1k + 1];
    for j3 in 2..m3j {
        let i3 = 2 * j3 - d[2];
        for j2 in 2..m2j {
            let i2 = 2 * j2 - d[1];
            for j1 in 2..=m1j {
                let i1 = 2 * j1 - d[0];
                x1[i1 - 1] = rr(i1 - 1, i2 - 1, i3) + rr(i1 - 1, i2 + 1, i3) + rr(i1 - 1, i2, i3 - 1) + rr(i1 - 1, i2, i3 + 1);
                y1[i1 - 1] = rr(i1 - 1, i2 - 1, i3 - 1) + rr(i1 - 1, i2 - 1, i3 + 1) + rr(i1 - 1, i2 + 1, i3 - 1) + rr(i1 - 1, i2 + 1, i3 + 1);
            }
            for j1 in 2..m1j {
                let i1 = 2 * j1 - d[0];
                let y2 = rr(i1, i2 - 1, i3 - 1) + rr(i1, i2 - 1, i3 + 1) + rr(i1, i2 + 1, i3 - 1) + rr(i1, i2 + 1, i3 + 1);
                let x2 = rr(i1, i2 - 1, i3) + rr(i1, i2 + 1, i3) + rr(i1, i2, i3 - 1) + rr(i1, i2, i3 + 1);
                s[ix(m1j, m2j, j1 - 1, j2 - 1, j3 - 1)] = 0.5 * rr(i1, i2, i3)
                    + 0.25 * (rr(i1 - 1, i2, i3) + rr(i1 + 1, i2, i3) + x2)
                    + 0.125 * (x1[i1 - 1] + x1[i1 + 1] + y2)
                    + 0.0625 * (y1[i1 - 1] + y1[i1 + 1]);
            }
        }
    }
}

/// Prolongation `u = u + Q z` from the coarse box `mm` to the fine box `n` (every point of
/// the fine box including ghosts, from the coarse box including its ghosts), NPB's general
/// case. Errors when a fine axis has a single interior point (NPB's special case, which only
/// arises with more than two processes along an axis).
pub fn interp(z: &[f64], mm: [usize; 3], u: &mut [f64], n: [usize; 3]) -> Result<(), String> {
    let [mm1, mm2, mm3] = mm;
    let [n1, n2, _] = n;
    if n.contains(&3) {
        return Err("interp: a fine box with one interior point on an axis is not supported".into());
    }
    let zz = |i1: usize, i2: usize, i3: usize| z[ix(mm1, mm2, i1 - 1, i2 - 1, i3 - 1)];
    let mut z1 = vec![0.0; mm1 + 1];
    let mut z2 = vec![0.0; mm1 + 1];
    let mut z3 = vec![0.0; mm1 + 1];
    for i3 in 1..mm3 {
        for i2 in 1..mm2 {
            for i1 in 1..=mm1 {
                z1[i1] = zz(i1, i2 + 1, i3) + zz(i1, i2, i3);
                z2[i1] = zz(i1, i2, i3 + 1) + zz(i1, i2, i3);
                z3[i1] = zz(i1, i2 + 1, i3 + 1) + zz(i1, i2, i3 + 1) + z1[i1];
            }
            let p = |a: usize, b: usize, c: usize| ix(n1, n2, a - 1, b - 1, c - 1);
            for i1 in 1..mm1 {
                let k = p(2 * i1 - 1, 2 * i2 - 1, 2 * i3 - 1);
                u[k] += zz(i1, i2, i3);
                let k = p(2 * i1, 2 * i2 - 1, 2 * i3 - 1);
                u[k] += 0.5 * (zz(i1 + 1, i2, i3) + zz(i1, i2, i3));
            }
            for i1 in 1..mm1 {
                let k = p(2 * i1 - 1, 2 * i2, 2 * i3 - 1);
                u[k] += 0.5 * z1[i1];
                let k = p(2 * i1, 2 * i2, 2 * i3 - 1);
                u[k] += 0.25 * (z1[i1] + z1[i1 + 1]);
            }
            for i1 in 1..mm1 {
                let k = p(2 * i1 - 1, 2 * i2 - 1, 2 * i3);
                u[k] += 0.5 * z2[i1];
                let k = p(2 * i1, 2 * i2 - 1, 2 * i3);
                u[k] += 0.25 * (z2[i1] + z2[i1 + 1]);
            }
            for i1 in 1..mm1 {
                let k = p(2 * i1 - 1, 2 * i2, 2 * i3);
                u[k] += 0.25 * z3[i1];
                let k = p(2 * i1, 2 * i2, 2 * i3);
                u[k] += 0.125 * (z3[i1] + z3[i1 + 1]);
            }
        }
    }
    Ok(())
}

/// Periodic ghost layers of a box that holds the whole extent of `axis` (NPB's `comm1p`
/// for one process): ghost 0 <- interior n-2, ghost n-1 <- interior 1. Axis 0 copies only
/// interior (i2, i3), axis 1 all i1 and interior i3, axis 2 everything, as in NPB.
pub fn periodic(u: &mut [f64], n: [usize; 3], axis: usize) {
    let [n1, n2, n3] = n;
    match axis {
        0 => {
            for i3 in 1..n3 - 1 {
                for i2 in 1..n2 - 1 {
                    let b = ix(n1, n2, 0, i2, i3);
                    u[b] = u[b + n1 - 2];
                    u[b + n1 - 1] = u[b + 1];
                }
            }
        }
        1 => {
            for i3 in 1..n3 - 1 {
                for i1 in 0..n1 {
                    u[ix(n1, n2, i1, 0, i3)] = u[ix(n1, n2, i1, n2 - 2, i3)];
                    u[ix(n1, n2, i1, n2 - 1, i3)] = u[ix(n1, n2, i1, 1, i3)];
                }
            }
        }
        _ => {
            let plane = n1 * n2;
            u.copy_within((n3 - 2) * plane..(n3 - 1) * plane, 0);
            u.copy_within(plane..2 * plane, (n3 - 1) * plane);
        }
    }
}

/// The face a halo exchange sends along `axis`: interior layer `layer` (1 or n-2), over the
/// same ranges as [`periodic`]; [`put_face`] writes one into ghost layer 0 or n-1.
pub fn get_face(u: &[f64], n: [usize; 3], axis: usize, layer: usize) -> Vec<f64> {
    let [n1, n2, n3] = n;
    let mut out = Vec::new();
    match axis {
        0 => {
            for i3 in 1..n3 - 1 {
                for i2 in 1..n2 - 1 {
                    out.push(u[ix(n1, n2, layer, i2, i3)]);
                }
            }
        }
        1 => {
            for i3 in 1..n3 - 1 {
                out.extend_from_slice(&u[ix(n1, n2, 0, layer, i3)..ix(n1, n2, 0, layer, i3) + n1]);
            }
        }
        _ => out.extend_from_slice(&u[layer * n1 * n2..(layer + 1) * n1 * n2]),
    }
    out
}

/// Writes a face from [`get_face`] into layer `layer`; errors when its length is wrong.
pub fn put_face(u: &mut [f64], n: [usize; 3], axis: usize, layer: usize, face: &[f64]) -> Result<(), String> {
    let [n1, n2, n3] = n;
    let want = match axis {
        0 => (n2 - 2) * (n3 - 2),
        1 => n1 * (n3 - 2),
        _ => n1 * n2,
    };
    if face.len() != want {
        return Err(format!("halo face along axis {axis} has {} values, expected {want}", face.len()));
    }
    let mut k = 0;
    match axis {
        0 => {
            for i3 in 1..n3 - 1 {
                for i2 in 1..n2 - 1 {
                    u[ix(n1, n2, layer, i2, i3)] = face[k];
                    k += 1;
                }
            }
        }
        1 => {
            for i3 in 1..n3 - 1 {
                let b = ix(n1, n2, 0, layer, i3);
                u[b..b + n1].copy_from_slice(&face[k..k + n1]);
                k += n1;
            }
        }
        _ => u[layer * n1 * n2..(layer + 1) * n1 * n2].copy_from_slice(face),
    }
    Ok(())
}

/// Sums of squares per octant of the global grid (leaf = 4*(z half) + 2*(y half) + (x half)),
/// each in (i3, i2, i1) order, and the largest |value|, over the interior of a box whose
/// first interior point has global coordinates `origin`, in a grid of `global` points.
pub fn norm_leaves(r: &[f64], n: [usize; 3], origin: [usize; 3], global: [usize; 3]) -> ([f64; 8], f64) {
    let [n1, n2, n3] = n;
    // global coordinate origin + i - 1 is in the upper half when origin + i > g / 2
    let mut leaves = [0.0f64; 8];
    let mut umax = 0.0f64;
    for i3 in 1..n3 - 1 {
        let lz = usize::from(origin[2] + i3 > global[2] / 2) * 4;
        for i2 in 1..n2 - 1 {
            let ly = lz + usize::from(origin[1] + i2 > global[1] / 2) * 2;
            let b = ix(n1, n2, 0, i2, i3);
            for i1 in 1..n1 - 1 {
                let l = ly + usize::from(origin[0] + i1 > global[0] / 2);
                let x = r[b + i1];
                leaves[l] += x * x;
                let a = x.abs();
                if a > umax {
                    umax = a;
                }
            }
        }
    }
    (leaves, umax)
}

/// NPB's `zran3` values for the interior of a box: point (gx, gy, gz) (global, 0-based) gets
/// the value number `gx + nx * (gy + ny * gz) + 1` of the generator from `x = 314159265` with
/// `a = 5^13`. Returns the box (ghosts 0).
pub fn zran3_values(n: [usize; 3], origin: [usize; 3], global: [usize; 3]) -> Vec<f64> {
    let [n1, n2, n3] = n;
    let a = 5f64.powi(13);
    let mut z = vec![0.0; n1 * n2 * n3];
    let am = a as u64;
    for i3 in 1..n3 - 1 {
        for i2 in 1..n2 - 1 {
            let off = (origin[0] + global[0] * ((origin[1] + i2 - 1) + global[1] * (origin[2] + i3 - 1))) as u64;
            let mut s = mul46(314_159_265, pow46(a, off) as u64);
            let b = ix(n1, n2, 0, i2, i3);
            for i1 in 1..n1 - 1 {
                s = mul46(s, am);
                z[b + i1] = s as f64 * R46;
            }
        }
    }
    z
}

/// The `m` largest and `m` smallest interior values with their global coordinates, scanning
/// in (i3, i2, i1) order (ties keep the first found): `(value, gx, gy, gz)` rows, largest
/// first, then smallest first.
pub fn extremes(z: &[f64], n: [usize; 3], origin: [usize; 3], m: usize) -> (Vec<[f64; 4]>, Vec<[f64; 4]>) {
    let [n1, n2, n3] = n;
    let mut pts: Vec<(f64, usize)> = Vec::with_capacity((n1 - 2) * (n2 - 2) * (n3 - 2));
    for i3 in 1..n3 - 1 {
        for i2 in 1..n2 - 1 {
            for i1 in 1..n1 - 1 {
                pts.push((z[ix(n1, n2, i1, i2, i3)], ix(n1, n2, i1, i2, i3)));
            }
        }
    }
    let coords = |k: usize| {
        let (i1, rest) = (k % n1, k / n1);
        let (i2, i3) = (rest % n2, rest / n2);
        [(origin[0] + i1 - 1) as f64, (origin[1] + i2 - 1) as f64, (origin[2] + i3 - 1) as f64]
    };
    let row = |(v, k): (f64, usize)| {
        let c = coords(k);
        [v, c[0], c[1], c[2]]
    };
    let mut hi = pts.clone();
    hi.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut lo = pts;
    lo.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    (hi.into_iter().take(m).map(row).collect(), lo.into_iter().take(m).map(row).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill_periodic(u: &mut [f64], n: [usize; 3]) {
        for axis in 0..3 {
            periodic(u, n, axis);
        }
    }

    #[test]
    fn halves_with_exchanged_faces_equal_the_whole() {
        // a 8x8x8 grid vs its two z-halves whose ghost planes come from the other half
        let g = [8, 8, 8];
        let n = [10, 10, 10];
        let mut v = zran3_values(n, [0, 0, 0], g);
        fill_periodic(&mut v, n);
        let u: Vec<f64> = v.iter().map(|x| x * 0.5 + 0.1).collect();
        let a = [-8.0 / 3.0, 0.0, 1.0 / 6.0, 1.0 / 12.0];
        let mut r = vec![0.0; v.len()];
        resid(&u, Some(&v), &mut r, n, a);
        let nh = [10, 10, 6];
        for h in 0..2 {
            let mut vh = zran3_values(nh, [0, 0, 4 * h], g);
            let mut uh = vec![0.0; vh.len()];
            for axis in 0..2 {
                periodic(&mut vh, nh, axis);
            }
            // z ghosts from the whole grid's neighbours
            let plane = 100;
            for (dst, src) in [(0usize, 4 * h), (5, (4 * h + 5) % 8)] {
                let src = if src == 0 { 8 } else { src };
                vh[dst * plane..(dst + 1) * plane].copy_from_slice(&v[src * plane..(src + 1) * plane]);
            }
            for (k, x) in vh.iter().enumerate() {
                uh[k] = x * 0.5 + 0.1;
            }
            let mut rh = vec![0.0; vh.len()];
            resid(&uh, Some(&vh), &mut rh, nh, a);
            for k3 in 1..5 {
                for k in 0..plane {
                    assert_eq!(rh[k3 * plane + k].to_bits(), r[(4 * h + k3) * plane + k].to_bits());
                }
            }
        }
    }

    #[test]
    fn faces_roundtrip_and_norms() {
        let n = [6, 5, 4];
        let mut u: Vec<f64> = (0..120).map(|i| i as f64).collect();
        for axis in 0..3 {
            let f = get_face(&u, n, axis, 1);
            let mut w = u.clone();
            put_face(&mut w, n, axis, n[axis] - 1, &f).unwrap();
            periodic(&mut u, n, axis);
            let g = get_face(&u, n, axis, n[axis] - 1);
            assert_eq!(f, g);
        }
        assert!(put_face(&mut u, n, 0, 0, &[1.0]).is_err());
        let (leaves, m) = norm_leaves(&u, n, [0, 0, 0], [4, 3, 2]);
        assert!(m > 0.0 && leaves.iter().all(|&x| x >= 0.0));
    }
}
