//! Summary statistics of a basket set: what a user checks first.
//!
//! Item ids are u32 and may be sparse (a file holding items 7 and 4294967295 has two distinct
//! items), so memory follows the number of distinct items, never the largest id: supports are
//! counted in dense per-thread arrays only while the id range is small, and in hash maps
//! above that ([`ItemCounts`]).

use crate::basket::Baskets;
use crate::labels::FastMap;
use rayon::prelude::*;

/// Dense counting is used while the largest id + 1 is at most this, or at most an eighth of
/// the number of items (then a count array costs at most a quarter of the item array's bytes).
pub const DENSE_MIN_BOUND: usize = 1 << 18;

/// Whether ids below `bound` are counted in dense arrays for `n_items` items.
pub fn dense_ok(bound: usize, n_items: usize) -> bool {
    bound <= DENSE_MIN_BOUND.max(n_items / 8)
}

/// Support counts of the items that occur: `ids` ascending, `counts[k]` is the count of
/// `ids[k]` (always > 0).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ItemCounts {
    pub ids: Vec<u32>,
    pub counts: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    pub transactions: u64,
    pub distinct_items: u64,
    pub total_items: u64,
    pub max_length: u64,
    pub empty_transactions: u64,
    /// Support count of every item that occurs.
    pub items: ItemCounts,
}

impl Stats {
    pub fn average_length(&self) -> f64 {
        if self.transactions == 0 { 0.0 } else { self.total_items as f64 / self.transactions as f64 }
    }

    /// Fraction of the transaction x item matrix that is filled.
    pub fn density(&self) -> f64 {
        if self.distinct_items == 0 { 0.0 } else { self.average_length() / self.distinct_items as f64 }
    }
}

/// Count item supports in parallel (items inside a transaction are distinct, so the count of
/// an item is its support count).
pub fn item_counts(b: &Baskets) -> Vec<u64> {
    item_counts_of(&b.items)
}

/// Largest item id + 1 (0 for no items).
pub fn item_bound(items: &[u32]) -> usize {
    items.par_iter().copied().max().map_or(0, |m| m as usize + 1)
}

const CHUNK: usize = 1 << 18;

/// Item support counts of a flat CSR item array, indexed by item id (length: largest id + 1).
///
/// Dense by contract, so its memory grows with the largest id: callers that may see sparse
/// ids use [`item_counts_sparse`] or compact the ids first ([`crate::basket::compact`]).
pub fn item_counts_of(items: &[u32]) -> Vec<u64> {
    dense_counts(items, item_bound(items))
}

fn dense_counts(items: &[u32], bound: usize) -> Vec<u64> {
    items
        .par_chunks(CHUNK)
        .fold(|| vec![0u64; bound], |mut acc, c| {
            for &i in c {
                acc[i as usize] += 1;
            }
            acc
        })
        .reduce(|| vec![0u64; bound], |mut a, c| {
            for (x, y) in a.iter_mut().zip(c) {
                *x += y;
            }
            a
        })
}

/// Support counts of the items that occur, in memory proportional to the distinct items.
pub fn item_counts_sparse(items: &[u32]) -> ItemCounts {
    let bound = item_bound(items);
    if dense_ok(bound, items.len()) {
        let dense = dense_counts(items, bound);
        let ids: Vec<u32> = (0..bound as u32).filter(|&i| dense[i as usize] > 0).collect();
        let counts = ids.iter().map(|&i| dense[i as usize]).collect();
        return ItemCounts { ids, counts };
    }
    let map = items
        .par_chunks(CHUNK)
        .fold(FastMap::<u32, u64>::default, |mut acc, c| {
            for &i in c {
                *acc.entry(i).or_insert(0) += 1;
            }
            acc
        })
        .reduce(FastMap::<u32, u64>::default, |a, b| {
            let (mut big, small) = if a.len() >= b.len() { (a, b) } else { (b, a) };
            for (k, v) in small {
                *big.entry(k).or_insert(0) += v;
            }
            big
        });
    let mut pairs: Vec<(u32, u64)> = map.into_iter().collect();
    pairs.par_sort_unstable_by_key(|p| p.0);
    let (ids, counts) = pairs.into_iter().unzip();
    ItemCounts { ids, counts }
}

pub fn stats(b: &Baskets) -> Stats {
    stats_csr(&b.offsets, &b.items)
}

/// Statistics of CSR arrays held elsewhere (e.g. numpy), without copying them.
pub fn stats_csr(offsets: &[i64], items: &[u32]) -> Stats {
    let counts = item_counts_sparse(items);
    let (max_length, empty) = offsets
        .par_windows(2)
        .map(|w| ((w[1] - w[0]) as u64, (w[1] == w[0]) as u64))
        .reduce(|| (0, 0), |a, c| (a.0.max(c.0), a.1 + c.1));
    Stats {
        transactions: offsets.len().saturating_sub(1) as u64,
        distinct_items: counts.ids.len() as u64,
        total_items: items.len() as u64,
        max_length,
        empty_transactions: empty,
        items: counts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small() {
        let b = Baskets::from_lists([vec![1u32, 2], vec![], vec![2, 5, 7]]);
        let s = stats(&b);
        assert_eq!((s.transactions, s.distinct_items, s.max_length, s.empty_transactions), (3, 4, 3, 1));
        assert_eq!(s.items.ids, vec![1, 2, 5, 7]);
        assert_eq!(s.items.counts, vec![1, 2, 1, 1]);
        assert_eq!(item_counts(&b)[2], 2);
        assert!((s.average_length() - 5.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn sparse_ids_count_in_small_memory() {
        // A dense count array for these would take 32 GiB.
        let b = Baskets::from_lists([vec![0u32, u32::MAX], vec![500_000_000, u32::MAX]]);
        let s = stats(&b);
        assert_eq!(s.items.ids, vec![0, 500_000_000, u32::MAX]);
        assert_eq!(s.items.counts, vec![1, 1, 2]);
        assert_eq!(s.distinct_items, 3);
    }

    #[test]
    fn sparse_equals_dense() {
        let items: Vec<u32> = (0..2_000_000u32).map(|k| (k.wrapping_mul(2_654_435_761) >> 12) % 200_000).collect();
        let dense = item_counts_of(&items);
        let want: Vec<(u32, u64)> =
            dense.iter().enumerate().filter(|p| *p.1 > 0).map(|(i, &c)| (i as u32, c)).collect();
        for scale in [1u32, 4096] {
            // Ids below 200,000 are counted densely; scaled by 4096 they take the hashed path.
            let scaled: Vec<u32> = items.iter().map(|&i| i * scale).collect();
            let s = item_counts_sparse(&scaled);
            let got: Vec<(u32, u64)> = s.ids.iter().map(|&i| i / scale).zip(s.counts.iter().copied()).collect();
            assert_eq!(got, want, "scale {scale}");
        }
    }
}
