//! NPB's pseudorandom generator: `x_{k+1} = a * x_k mod 2^46`, values `x_k * 2^-46`.
//!
//! NPB computes this in double precision with a 23-bit split so that every step is exact;
//! the state is therefore always an integer below 2^46 held in an `f64`. Here the same
//! integers are computed with 64-bit wrapping multiplication (2^46 divides 2^64, so
//! `(a * x mod 2^64) mod 2^46 = a * x mod 2^46`), which gives the identical sequence bit for
//! bit (tested against the double-precision formula) and is several times faster.

/// NPB's default seed and multiplier (EP, IS, CG, FT).
pub const SEED: f64 = 314_159_265.0;
pub const MULT: f64 = 1_220_703_125.0;

const MASK: u64 = (1u64 << 46) - 1;
/// 2^-46, exact.
pub const R46: f64 = 1.0 / 70_368_744_177_664.0;

/// True when `x` is a state the generator accepts: an integer in [0, 2^46).
pub fn valid_state(x: f64) -> bool {
    (0.0..70_368_744_177_664.0).contains(&x) && x.fract() == 0.0
}

#[inline(always)]
pub fn mul46(x: u64, a: u64) -> u64 {
    x.wrapping_mul(a) & MASK
}

/// One step: advances `x` and returns the new value scaled to (0, 1) (NPB's `randlc`).
#[inline]
pub fn randlc(x: &mut f64, a: f64) -> f64 {
    let v = mul46(*x as u64, a as u64);
    *x = v as f64;
    v as f64 * R46
}

/// `y.len()` steps, the values into `y` (NPB's `vranlc`).
pub fn vranlc(x: &mut f64, a: f64, y: &mut [f64]) {
    let a = a as u64;
    let mut s = *x as u64;
    for v in y.iter_mut() {
        s = mul46(s, a);
        *v = s as f64 * R46;
    }
    *x = s as f64;
}

/// `a^n mod 2^46` (NPB's `power`/`ipow46`; exact, so any evaluation order agrees).
pub fn pow46(a: f64, mut n: u64) -> f64 {
    let mut base = a as u64 & MASK;
    let mut r = 1u64;
    while n > 0 {
        if n & 1 == 1 {
            r = mul46(r, base);
        }
        base = mul46(base, base);
        n >>= 1;
    }
    r as f64
}

/// The state after `n` steps from `x` with multiplier `a`: `x * a^n mod 2^46`.
pub fn skip(x: f64, a: f64, n: u64) -> f64 {
    mul46(x as u64, pow46(a, n) as u64) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NPB's double-precision randlc, transcribed from the specification (D. H. Bailey).
    fn randlc_dp(x: &mut f64, a: f64) -> f64 {
        let r23 = 0.5f64.powi(23);
        let r46 = r23 * r23;
        let t23 = 2f64.powi(23);
        let t46 = t23 * t23;
        let t1 = r23 * a;
        let a1 = t1.trunc();
        let a2 = a - t23 * a1;
        let t1 = r23 * *x;
        let x1 = t1.trunc();
        let x2 = *x - t23 * x1;
        let t1 = a1 * x2 + a2 * x1;
        let t2 = (r23 * t1).trunc();
        let z = t1 - t23 * t2;
        let t3 = t23 * z + a2 * x2;
        let t4 = (r46 * t3).trunc();
        *x = t3 - t46 * t4;
        r46 * *x
    }

    #[test]
    fn matches_double_precision_formula_bit_for_bit() {
        for (seed, a) in [(SEED, MULT), (271_828_183.0, MULT), (314_159_265.0, 5f64.powi(13)), (1.0, 3.0)] {
            let (mut x, mut y) = (seed, seed);
            for _ in 0..200_000 {
                let u = randlc(&mut x, a);
                let v = randlc_dp(&mut y, a);
                assert_eq!(u.to_bits(), v.to_bits());
                assert_eq!(x.to_bits(), y.to_bits());
            }
        }
        // multiplier squared as NPB does (randlc(t, t)), large operands
        let (mut p, mut q) = (MULT, MULT);
        for _ in 0..40 {
            let pa = p;
            randlc(&mut p, pa);
            let qa = q;
            randlc_dp(&mut q, qa);
            assert_eq!(p, q);
        }
    }

    #[test]
    fn vranlc_pow_and_skip_agree_with_stepping() {
        let mut x = SEED;
        let mut y = vec![0.0; 1000];
        vranlc(&mut x, MULT, &mut y);
        let mut s = SEED;
        for (i, v) in y.iter().enumerate() {
            assert_eq!(*v, randlc(&mut s, MULT), "step {i}");
        }
        assert_eq!(s, x);
        assert_eq!(skip(SEED, MULT, 1000), x);
        assert_eq!(pow46(MULT, 0), 1.0);
        assert_eq!(pow46(MULT, 1), MULT);
        // the first value of the sequence (used by CG before makea)
        let mut t = SEED;
        let v = randlc(&mut t, MULT);
        assert_eq!(t, (314_159_265u128 * 1_220_703_125u128 % (1u128 << 46)) as f64);
        assert!(v > 0.0 && v < 1.0);
        assert!(valid_state(SEED) && !valid_state(0.5) && !valid_state(2f64.powi(46)));
    }
}
