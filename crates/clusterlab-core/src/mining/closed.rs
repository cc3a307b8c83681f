//! Closed and maximal itemsets from all frequent itemsets.
//!
//! An itemset is closed when no superset has the same count, maximal when no superset is
//! frequent. By anti-monotonicity of support it suffices to look at supersets with one more
//! item: each itemset marks its immediate subsets (found by binary search in the canonical
//! order, no hash table), in parallel with atomic flags, so the result does not depend on
//! the thread count.

use super::itemsets::Itemsets;
use rayon::prelude::*;
use std::cmp::Ordering;
use std::sync::atomic::{AtomicU8, Ordering as AtOrd};

const HAS_SUPERSET: u8 = 1;
const SAME_COUNT_SUPERSET: u8 = 2;

/// Indices (ascending) of the closed (or, with `maximal`, maximal) itemsets of `all`, which
/// must be canonical and hold every frequent itemset of the lengths concerned.
pub fn filter(all: &Itemsets, maximal: bool) -> Vec<u32> {
    let starts = all.length_starts();
    let flags: Vec<AtomicU8> = (0..all.len()).map(|_| AtomicU8::new(0)).collect();
    (0..all.len()).into_par_iter().with_min_len(1024).for_each(|i| {
        let s = all.itemset(i);
        if s.len() < 2 {
            return;
        }
        let l = s.len() - 1;
        for skip in 0..s.len() {
            if let Some(j) = find_skipping(all, starts[l], starts[l + 1], s, skip) {
                let f = if all.counts[j] == all.counts[i] { HAS_SUPERSET | SAME_COUNT_SUPERSET } else { HAS_SUPERSET };
                flags[j].fetch_or(f, AtOrd::Relaxed);
            }
        }
    });
    let bad = if maximal { HAS_SUPERSET } else { SAME_COUNT_SUPERSET };
    (0..all.len() as u32).filter(|&i| flags[i as usize].load(AtOrd::Relaxed) & bad == 0).collect()
}

/// Index in `all[lo..hi]` (sorted lexicographically) of `s` without position `skip`.
fn find_skipping(all: &Itemsets, mut lo: usize, mut hi: usize, s: &[u32], skip: usize) -> Option<usize> {
    let cmp = |t: &[u32]| -> Ordering {
        let mut k = 0;
        for (p, &c) in s.iter().enumerate() {
            if p == skip {
                continue;
            }
            match t[k].cmp(&c) {
                Ordering::Equal => k += 1,
                o => return o,
            }
        }
        Ordering::Equal
    };
    while lo < hi {
        let mid = (lo + hi) / 2;
        match cmp(all.itemset(mid)) {
            Ordering::Less => lo = mid + 1,
            Ordering::Greater => hi = mid,
            Ordering::Equal => return Some(mid),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_and_maximal() {
        // Baskets {1,2},{1,2},{1}: all = {1}:3 {2}:2 {1,2}:2
        let mut all = Itemsets::new();
        all.push(&[1], 3);
        all.push(&[2], 2);
        all.push(&[1, 2], 2);
        assert_eq!(filter(&all, false), vec![0, 2]);
        assert_eq!(filter(&all, true), vec![2]);
    }
}
