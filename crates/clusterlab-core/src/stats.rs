//! Summary statistics of a basket set: what a user checks first.

use crate::basket::Baskets;
use rayon::prelude::*;

#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    pub transactions: u64,
    pub distinct_items: u64,
    pub total_items: u64,
    pub max_length: u64,
    pub empty_transactions: u64,
    /// Support count of every item id below `item_bound` (0 for absent ids).
    pub item_counts: Vec<u64>,
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

/// Item support counts of a flat CSR item array.
pub fn item_counts_of(items: &[u32]) -> Vec<u64> {
    let bound = items.par_iter().copied().max().map_or(0, |m| m as usize + 1);
    const CHUNK: usize = 1 << 18;
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

pub fn stats(b: &Baskets) -> Stats {
    stats_csr(&b.offsets, &b.items)
}

/// Statistics of CSR arrays held elsewhere (e.g. numpy), without copying them.
pub fn stats_csr(offsets: &[i64], items: &[u32]) -> Stats {
    let counts = item_counts_of(items);
    let (max_length, empty) = offsets
        .par_windows(2)
        .map(|w| ((w[1] - w[0]) as u64, (w[1] == w[0]) as u64))
        .reduce(|| (0, 0), |a, c| (a.0.max(c.0), a.1 + c.1));
    Stats {
        transactions: offsets.len().saturating_sub(1) as u64,
        distinct_items: counts.iter().filter(|&&c| c > 0).count() as u64,
        total_items: items.len() as u64,
        max_length,
        empty_transactions: empty,
        item_counts: counts,
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
        assert_eq!(s.item_counts[2], 2);
        assert!((s.average_length() - 5.0 / 3.0).abs() < 1e-12);
    }
}
