//! IS: integer sort of keys with a bucket sort and a counting rank.
//!
//! Keys are NPB's: key i is `(max_key / 4) * (r(4i+1) + r(4i+2) + r(4i+3) + r(4i+4))`
//! truncated, with r the generator from `SEED`. A rank generates its contiguous slice of the
//! global sequence, so the keys do not depend on the number of ranks.

use super::randlc::{mul46, skip, MULT, R46, SEED};

/// Keys `first .. first + count` of the global sequence for keys below `max_key`.
pub fn create_keys(first: u64, count: usize, max_key: u32) -> Vec<i32> {
    let k = f64::from(max_key / 4);
    let a = MULT as u64;
    let mut s = skip(SEED, MULT, 4 * first) as u64;
    let mut keys = Vec::with_capacity(count);
    for _ in 0..count {
        let mut x = 0.0f64;
        for j in 0..4 {
            s = mul46(s, a);
            let r = s as f64 * R46;
            x = if j == 0 { r } else { x + r };
        }
        keys.push((k * x) as i32);
    }
    keys
}

/// Keys in one bucket share their top bits: bucket = key >> shift.
/// Returns the keys per bucket and the keys grouped by bucket (stable), or the first key
/// outside `[0, nbuckets << shift)`.
pub fn bucket_sort(keys: &[i32], shift: u32, nbuckets: usize) -> Result<(Vec<i64>, Vec<i32>), i32> {
    let mut out = vec![0i32; keys.len()];
    let sizes = bucket_sort_into(keys, shift, nbuckets, &mut out)?;
    Ok((sizes, out))
}

/// [`bucket_sort`] into a caller's buffer of `keys.len()` (NPB's static `key_buff1`).
pub fn bucket_sort_into(keys: &[i32], shift: u32, nbuckets: usize, out: &mut [i32]) -> Result<Vec<i64>, i32> {
    assert_eq!(out.len(), keys.len());
    let mut sizes = vec![0i64; nbuckets];
    for &k in keys {
        let b = (k as u32 >> shift) as usize;
        if k < 0 || b >= nbuckets {
            return Err(k);
        }
        sizes[b] += 1;
    }
    let mut ptr = vec![0usize; nbuckets];
    let mut acc = 0usize;
    for (p, &s) in ptr.iter_mut().zip(sizes.iter()) {
        *p = acc;
        acc += s as usize;
    }
    for &k in keys {
        let b = (k as u32 >> shift) as usize;
        out[ptr[b]] = k;
        ptr[b] += 1;
    }
    Ok(sizes)
}

/// Ranking: for every key value v in `min_key ..= max_key`, the number of `keys` <= v
/// (NPB's `key_buff1` after the prefix sum). Errors with the first key outside the range.
pub fn rank_counts(keys: &[i32], min_key: i32, max_key: i32) -> Result<Vec<i32>, i32> {
    if max_key < min_key {
        return if let Some(&k) = keys.first() { Err(k) } else { Ok(Vec::new()) };
    }
    let mut cnt = vec![0i32; (max_key - min_key + 1) as usize];
    for &k in keys {
        if k < min_key || k > max_key {
            return Err(k);
        }
        cnt[(k - min_key) as usize] += 1;
    }
    for i in 1..cnt.len() {
        cnt[i] += cnt[i - 1];
    }
    Ok(cnt)
}

/// NPB's full verification: place every key at its rank (`counts` from [`rank_counts`]) and
/// count the keys out of order. Returns (sorted keys, number of descents).
pub fn full_sort(keys: &[i32], counts: &[i32], min_key: i32) -> (Vec<i32>, u64) {
    let mut c = counts.to_vec();
    let mut out = vec![0i32; keys.len()];
    for &k in keys {
        let slot = &mut c[(k - min_key) as usize];
        *slot -= 1;
        out[*slot as usize] = k;
    }
    let descents = out.windows(2).filter(|w| w[0] > w[1]).count() as u64;
    (out, descents)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_do_not_depend_on_the_split() {
        let whole = create_keys(0, 1000, 1 << 11);
        let tail = create_keys(600, 400, 1 << 11);
        assert_eq!(&whole[600..], &tail[..]);
        assert!(whole.iter().all(|&k| (0..1 << 11).contains(&k)));
    }

    #[test]
    fn bucket_rank_and_sort() {
        let keys = create_keys(0, 5000, 1 << 11);
        let (sizes, grouped) = bucket_sort(&keys, 2, 512).unwrap();
        assert_eq!(sizes.iter().sum::<i64>(), 5000);
        assert!(grouped.windows(2).all(|w| (w[0] >> 2) <= (w[1] >> 2)));
        let counts = rank_counts(&grouped, 0, (1 << 11) - 1).unwrap();
        assert_eq!(*counts.last().unwrap(), 5000);
        let (sorted, descents) = full_sort(&grouped, &counts, 0);
        assert_eq!(descents, 0);
        let mut want = keys.clone();
        want.sort();
        assert_eq!(sorted, want);
        assert_eq!(bucket_sort(&[1 << 11], 2, 512), Err(1 << 11));
        assert_eq!(rank_counts(&[5], 6, 9), Err(5));
    }
}
