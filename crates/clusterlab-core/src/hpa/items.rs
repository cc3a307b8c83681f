//! Pass 1 of the parallel miners for item ids that may be sparse (any u32): support counts of
//! the distinct items, and transactions reduced to frequent-item ranks through a sorted key
//! list. Memory is O(distinct items) beyond the data itself, never O(largest id): a file whose
//! only items are 7 and 4294967295 needs two counters, not 32 GiB.

use super::route::reduce_transactions;
use crate::basket::Baskets;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Ids below this bound (or below the number of occurrences) are counted in a dense array,
/// which then costs no more memory than the items themselves.
const DENSE_MIN: usize = 1 << 20;

fn dense_ok(max_id: u32, occurrences: usize) -> bool {
    (max_id as usize) < DENSE_MIN.max(occurrences)
}

/// Multiplicative hashing of u32 keys (ids are not adversarial here; a std SipHash would
/// cost most of the count).
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, x: u32) {
        self.0 = (x as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (x as u64) << 17;
    }
}

/// The distinct items and their support counts: `(ids ascending, counts)`.
pub fn distinct_counts(items: &[u32]) -> (Vec<u32>, Vec<u64>) {
    let Some(&max) = items.iter().max() else { return (Vec::new(), Vec::new()) };
    if dense_ok(max, items.len()) {
        let mut c = vec![0u64; max as usize + 1];
        for &x in items {
            c[x as usize] += 1;
        }
        let ids: Vec<u32> = (0..=max).filter(|&i| c[i as usize] > 0).collect();
        let counts = ids.iter().map(|&i| c[i as usize]).collect();
        return (ids, counts);
    }
    let mut m: HashMap<u32, u64, BuildHasherDefault<IdHasher>> = HashMap::default();
    for &x in items {
        *m.entry(x).or_insert(0) += 1;
    }
    let mut pairs: Vec<(u32, u64)> = m.into_iter().collect();
    pairs.sort_unstable();
    pairs.into_iter().unzip()
}

/// Merge sorted `(ids, counts)` lists (one per rank) into one sorted list with summed counts.
pub fn merge_counts(parts: &[(&[u32], &[u64])]) -> (Vec<u32>, Vec<u64>) {
    let mut all: Vec<(u32, u64)> = parts.iter().flat_map(|(i, c)| i.iter().copied().zip(c.iter().copied())).collect();
    all.sort_unstable_by_key(|p| p.0);
    let mut ids: Vec<u32> = Vec::with_capacity(all.len());
    let mut counts: Vec<u64> = Vec::with_capacity(all.len());
    for (i, c) in all {
        if ids.last() == Some(&i) {
            *counts.last_mut().unwrap() += c;
        } else {
            ids.push(i);
            counts.push(c);
        }
    }
    (ids, counts)
}

/// Keep the items listed in `keys` (sorted ascending, distinct), replaced by `values[position]`;
/// sort each transaction and drop those shorter than `min_len` (as
/// [`reduce_transactions`], whose dense map is used when the keys are small enough).
pub fn reduce_by_keys(offsets: &[i64], items: &[u32], keys: &[u32], values: &[u32], min_len: usize) -> Baskets {
    assert_eq!(keys.len(), values.len());
    let Some(&max) = keys.last() else {
        return reduce_transactions(offsets, items, &[], min_len);
    };
    if dense_ok(max, items.len()) {
        let mut map = vec![u32::MAX; max as usize + 1];
        for (&k, &v) in keys.iter().zip(values) {
            map[k as usize] = v;
        }
        return reduce_transactions(offsets, items, &map, min_len);
    }
    let mut out = Baskets::new();
    for w in offsets.windows(2) {
        let start = out.items.len();
        for &x in &items[w[0] as usize..w[1] as usize] {
            if let Ok(p) = keys.binary_search(&x) {
                out.items.push(values[p]);
            }
        }
        if out.items.len() - start < min_len {
            out.items.truncate(start);
            continue;
        }
        crate::basket::normalize_tail(&mut out.items, start);
        out.offsets.push(out.items.len() as i64);
    }
    out
}

/// [`reduce_by_keys`] over the CSR arrays themselves: the kept transactions are written to
/// the front of `offsets` and `items` (a transaction never grows, so the write position never
/// passes the read position). Returns `(transactions, items)` kept: the caller truncates.
/// A rank's pass 1 then needs no second copy of its transactions.
pub fn reduce_by_keys_in_place(offsets: &mut [i64], items: &mut [u32], keys: &[u32], values: &[u32], min_len: usize) -> (usize, usize) {
    assert_eq!(keys.len(), values.len());
    match keys.last() {
        Some(&max) if dense_ok(max, items.len()) => {
            let mut map = vec![u32::MAX; max as usize + 1];
            for (&k, &v) in keys.iter().zip(values) {
                map[k as usize] = v;
            }
            reduce_in_place(offsets, items, min_len, |x| map.get(x as usize).copied().filter(|&m| m != u32::MAX))
        }
        _ => reduce_in_place(offsets, items, min_len, |x| keys.binary_search(&x).ok().map(|p| values[p])),
    }
}

/// Keep the items `f` maps to `Some(rank)`, renamed, sorted and deduplicated per transaction;
/// drop transactions left shorter than `min_len`; all in place (see
/// [`reduce_by_keys_in_place`]). Returns `(transactions, items)` kept.
pub fn reduce_in_place(offsets: &mut [i64], items: &mut [u32], min_len: usize, f: impl Fn(u32) -> Option<u32>) -> (usize, usize) {
    let n = offsets.len().saturating_sub(1);
    let (mut w, mut t) = (0usize, 0usize);
    let mut s = offsets.first().copied().unwrap_or(0) as usize;
    for i in 0..n {
        // Read this transaction's end before the write of offsets[t + 1] (t <= i) can reach it.
        let e = offsets[i + 1] as usize;
        let start = w;
        for j in s..e {
            if let Some(m) = f(items[j]) {
                items[w] = m;
                w += 1;
            }
        }
        s = e;
        if w - start < min_len {
            w = start;
            continue;
        }
        // as `normalize_tail`: the length was checked before deduplication
        w = start + crate::basket::normalize_slice(&mut items[start..w]);
        t += 1;
        offsets[t] = w as i64;
    }
    if let Some(o) = offsets.first_mut() {
        *o = 0;
    }
    (t, w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_and_sparse_agree() {
        let items = [5u32, 3, 5, 9, 3, 5];
        assert_eq!(distinct_counts(&items), (vec![3, 5, 9], vec![2, 3, 1]));
        let sparse = [u32::MAX, 7, u32::MAX, 3_000_000_000];
        assert_eq!(distinct_counts(&sparse), (vec![7, 3_000_000_000, u32::MAX], vec![1, 1, 2]));
        assert_eq!(distinct_counts(&[]), (vec![], vec![]));
        let (i, c) = merge_counts(&[(&[1, 9], &[2, 3]), (&[], &[]), (&[4, 9], &[1, 1])]);
        assert_eq!((i, c), (vec![1, 4, 9], vec![2, 1, 4]));
    }

    #[test]
    fn in_place_matches_the_copying_reduction() {
        let lists = [vec![9u32, 1, 7], vec![7], vec![3, 5, 1, 9], vec![], vec![5, 3], vec![1, 9, 7, 3]];
        let b = Baskets::from_lists(lists.iter().cloned());
        for (keys, values, min_len) in [(vec![1u32, 3, 7, 9], vec![3u32, 2, 1, 0], 2), (vec![7, 9], vec![0, 1], 1),
                                        (vec![3_000_000_000], vec![0], 1), (vec![1, 5], vec![0, 0], 1)] {
            let want = reduce_by_keys(&b.offsets, &b.items, &keys, &values, min_len);
            let (mut o, mut i) = (b.offsets.clone(), b.items.clone());
            let (t, n) = reduce_by_keys_in_place(&mut o, &mut i, &keys, &values, min_len);
            assert_eq!((&o[..t + 1], &i[..n]), (&want.offsets[..], &want.items[..]), "keys {keys:?}");
        }
    }

    #[test]
    fn reduce_by_sparse_keys() {
        let b = Baskets::from_lists([vec![u32::MAX, 1, 7], vec![7], vec![3_000_000_000, u32::MAX]]);
        let r = reduce_by_keys(&b.offsets, &b.items, &[7, 3_000_000_000, u32::MAX], &[0, 1, 2], 2);
        assert_eq!(r.iter().collect::<Vec<_>>(), vec![&[0, 2][..], &[1, 2][..]]);
        let d = reduce_by_keys(&b.offsets, &b.items, &[1, 7], &[1, 0], 1);
        assert_eq!(d.iter().collect::<Vec<_>>(), vec![&[0, 1][..], &[0][..]]);
    }
}
