//! EP: Gaussian deviates by the Marsaglia polar method, tallied in square annuli.
//!
//! The 2^(m+1) uniform numbers are cut into batches of 2^(MK+1) (2^16 pairs), as in NPB;
//! batch `k` starts from `271828183 * a^(2^(MK+1) * k)`. Sums are kept per batch (each summed in
//! order), so the caller can add the batches in global order and get the same bits for any
//! split of batches among ranks.

use super::randlc::{mul46, pow46, MULT, R46};

/// log2 of the pairs per batch (NPB's `mk`).
pub const MK: u32 = 16;
/// EP's own seed (NPB's `s`).
pub const SEED: f64 = 271_828_183.0;
/// Number of annuli counted (NPB's `nq`).
pub const NQ: usize = 10;

/// What one rank's batches produced.
#[derive(Debug, Clone, PartialEq)]
pub struct EpPartial {
    /// Pairs whose larger |deviate| falls in [l, l + 1), l = 0..NQ.
    pub counts: [u64; NQ],
    /// Sum of the x and y deviates of each batch, in batch order.
    pub sx: Vec<f64>,
    pub sy: Vec<f64>,
}

/// Batches `first .. first + count` (global batch numbers).
pub fn batches(first: u64, count: u64) -> EpPartial {
    let nk = 1u64 << MK;
    let an = pow46(MULT, 2 * nk) as u64;
    let a = MULT as u64;
    let mut counts = [0u64; NQ];
    let mut sx = Vec::with_capacity(count as usize);
    let mut sy = Vec::with_capacity(count as usize);
    for kk in first..first + count {
        let mut s = mul46(SEED as u64, pow46(an as f64, kk) as u64);
        let (mut bx, mut by) = (0.0f64, 0.0f64);
        for _ in 0..nk {
            s = mul46(s, a);
            let x1 = 2.0 * (s as f64 * R46) - 1.0;
            s = mul46(s, a);
            let x2 = 2.0 * (s as f64 * R46) - 1.0;
            let t1 = x1 * x1 + x2 * x2;
            if t1 <= 1.0 {
                let t2 = (-2.0 * t1.ln() / t1).sqrt();
                let t3 = x1 * t2;
                let t4 = x2 * t2;
                let l = t3.abs().max(t4.abs()) as usize;
                counts[l] += 1;
                bx += t3;
                by += t4;
            }
        }
        sx.push(bx);
        sy.push(by);
    }
    EpPartial { counts, sx, sy }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_batches_equal_whole() {
        let whole = batches(0, 6);
        let a = batches(0, 2);
        let b = batches(2, 4);
        assert_eq!([a.sx.clone(), b.sx.clone()].concat(), whole.sx);
        assert_eq!([a.sy, b.sy].concat(), whole.sy);
        let c: Vec<u64> = a.counts.iter().zip(b.counts.iter()).map(|(x, y)| x + y).collect();
        assert_eq!(c, whole.counts.to_vec());
        // about pi/4 of the 2^16 pairs per batch fall in the unit disc
        let n: u64 = whole.counts.iter().sum();
        let frac = n as f64 / (6.0 * 65536.0);
        assert!((frac - std::f64::consts::FRAC_PI_4).abs() < 0.01, "{frac}");
    }
}
