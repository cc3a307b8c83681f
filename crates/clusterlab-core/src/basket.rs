//! Baskets in compressed sparse row form: transaction `t` holds
//! `items[offsets[t] as usize..offsets[t + 1] as usize]`, sorted ascending, no duplicates.
//! Also: order-preserving compaction of sparse item ids ([`compact`]) and normalisation of
//! CSR arrays that came from elsewhere ([`normalize_csr`]).

use crate::labels::FastMap;
use crate::stats::{dense_ok, item_counts_sparse, ItemCounts};
use rayon::prelude::*;

/// A set of transactions in CSR form. Offsets are i64 so they map onto Arrow's LargeList
/// and numpy's int64 without conversion.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Baskets {
    pub offsets: Vec<i64>,
    pub items: Vec<u32>,
}

impl Baskets {
    pub fn new() -> Self {
        Baskets { offsets: vec![0], items: Vec::new() }
    }

    /// Build from item lists; each transaction is sorted and deduplicated (set semantics).
    pub fn from_lists<I, T>(lists: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: AsRef<[u32]>,
    {
        let mut b = Baskets::new();
        for t in lists {
            let start = b.items.len();
            b.items.extend_from_slice(t.as_ref());
            normalize_tail(&mut b.items, start);
            b.offsets.push(b.items.len() as i64);
        }
        b
    }

    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn transaction(&self, t: usize) -> &[u32] {
        &self.items[self.offsets[t] as usize..self.offsets[t + 1] as usize]
    }

    pub fn iter(&self) -> impl Iterator<Item = &[u32]> + '_ {
        self.offsets.windows(2).map(move |w| &self.items[w[0] as usize..w[1] as usize])
    }

    /// Largest item id + 1 (0 when there are no items).
    pub fn item_bound(&self) -> usize {
        self.items.iter().copied().max().map_or(0, |m| m as usize + 1)
    }

    /// Append all transactions of `other` (used to join per-chunk parses in order).
    pub fn extend(&mut self, other: &Baskets) {
        let base = *self.offsets.last().unwrap_or(&0);
        self.items.extend_from_slice(&other.items);
        self.offsets.extend(other.offsets.iter().skip(1).map(|o| o + base));
    }
}

/// Sort and deduplicate `items[start..]` in place; returns how many duplicates were dropped.
pub fn normalize_tail(items: &mut Vec<u32>, start: usize) -> usize {
    let kept = normalize_slice(&mut items[start..]);
    let dropped = items.len() - start - kept;
    items.truncate(start + kept);
    dropped
}

/// Sort and deduplicate `tail` in place; returns how many distinct items now lead it.
/// Fast path: basket files are usually already sorted, so check before sorting.
pub fn normalize_slice(tail: &mut [u32]) -> usize {
    if tail.windows(2).all(|w| w[0] < w[1]) {
        return tail.len();
    }
    tail.sort_unstable();
    let mut w = 0;
    for r in 0..tail.len() {
        if r == 0 || tail[r] != tail[w - 1] {
            tail[w] = tail[r];
            w += 1;
        }
    }
    w
}

/// The first transaction whose items are not strictly ascending, if any (checked in parallel).
pub fn first_unsorted(offsets: &[i64], items: &[u32]) -> Option<usize> {
    offsets
        .par_windows(2)
        .with_min_len(4096)
        .position_first(|w| items[w[0] as usize..w[1] as usize].windows(2).any(|p| p[0] >= p[1]))
}

/// CSR arrays with every transaction sorted and deduplicated, and the number of duplicates
/// dropped; `None` when they already are (so callers can keep their arrays without a copy).
/// `offsets` must describe `items` (start at 0, non-decreasing, end at `items.len()`).
pub fn normalize_csr(offsets: &[i64], items: &[u32]) -> Option<(Vec<i64>, Vec<u32>, u64)> {
    first_unsorted(offsets, items)?;
    let mut out = Vec::with_capacity(items.len());
    let mut offs = Vec::with_capacity(offsets.len());
    offs.push(0i64);
    let mut dropped = 0u64;
    for w in offsets.windows(2) {
        let start = out.len();
        out.extend_from_slice(&items[w[0] as usize..w[1] as usize]);
        dropped += normalize_tail(&mut out, start) as u64;
        offs.push(out.len() as i64);
    }
    Some((offs, out, dropped))
}

/// `items` renumbered to their position in `ids` (ascending distinct ids that hold every
/// item, e.g. the union of all ranks' ids), or `Err(item)` for the first item not in `ids`.
/// Used when several ranks must agree on one compact numbering.
pub fn renumber(items: &[u32], ids: &[u32]) -> Result<Vec<u32>, u32> {
    let bound = ids.last().map_or(0, |&m| m as usize + 1);
    if dense_ok(bound, items.len().max(ids.len())) {
        let mut table = vec![u32::MAX; bound];
        for (rank, &id) in ids.iter().enumerate() {
            table[id as usize] = rank as u32;
        }
        let out: Vec<u32> = items.par_iter().map(|&i| table.get(i as usize).copied().unwrap_or(u32::MAX)).collect();
        // u32::MAX marks "not in ids" (a real rank that large would need 2^32 distinct ids).
        match out.par_iter().position_first(|&r| r == u32::MAX) {
            Some(k) => Err(items[k]),
            None => Ok(out),
        }
    } else {
        let map: FastMap<u32, u32> = ids.iter().enumerate().map(|(r, &id)| (id, r as u32)).collect();
        items.par_iter().map(|i| map.get(i).copied().ok_or(*i)).collect()
    }
}

/// Order-preserving compaction of item ids: the distinct ids ascending with their support
/// counts, and `items` renumbered to their rank among them (`None` when the ids already are
/// `0..d`). Sorted transactions stay sorted, so results mined on the compact ids map back
/// through `ids` in the same order. Memory follows the number of distinct items.
pub fn compact(items: &[u32]) -> (Option<Vec<u32>>, ItemCounts) {
    let counts = item_counts_sparse(items);
    let bound = counts.ids.last().map_or(0, |&m| m as usize + 1);
    if counts.ids.len() == bound {
        return (None, counts);
    }
    let dense = if dense_ok(bound, items.len()) {
        let mut table = vec![0u32; bound];
        for (rank, &id) in counts.ids.iter().enumerate() {
            table[id as usize] = rank as u32;
        }
        items.par_iter().map(|&i| table[i as usize]).collect()
    } else {
        let map: FastMap<u32, u32> = counts.ids.iter().enumerate().map(|(r, &id)| (id, r as u32)).collect();
        items.par_iter().map(|i| map[i]).collect()
    };
    (Some(dense), counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_keeps_order() {
        let b = Baskets::from_lists([vec![7u32, u32::MAX], vec![3, 7], vec![]]);
        let (dense, c) = compact(&b.items);
        assert_eq!(c.ids, vec![3, 7, u32::MAX]);
        assert_eq!(c.counts, vec![1, 2, 1]);
        assert_eq!(dense.unwrap(), vec![1, 2, 0, 1]);
        let (dense, c) = compact(&[0, 2, 1, 2]);
        assert!(dense.is_none());
        assert_eq!(c.ids, vec![0, 1, 2]);
        // A moderately sparse range takes the lookup-table path.
        let (dense, c) = compact(&[10, 20, 10]);
        assert_eq!((dense.unwrap(), c.ids), (vec![0, 1, 0], vec![10, 20]));
    }

    #[test]
    fn renumber_against_a_union() {
        assert_eq!(renumber(&[7, 3, 7], &[1, 3, 7]), Ok(vec![2, 1, 2]));
        assert_eq!(renumber(&[7, 4], &[1, 3, 7]), Err(4));
        assert_eq!(renumber(&[u32::MAX, 5], &[5, u32::MAX]), Ok(vec![1, 0]));
        assert_eq!(renumber(&[u32::MAX, 6], &[5, u32::MAX]), Err(6));
    }

    #[test]
    fn normalize_only_when_needed() {
        assert!(normalize_csr(&[0, 2, 3], &[1, 2, 0]).is_none());
        let (o, i, d) = normalize_csr(&[0, 3, 4], &[5, 1, 5, 0]).unwrap();
        assert_eq!((o, i, d), (vec![0, 2, 3], vec![1, 5, 0], 1));
        assert_eq!(first_unsorted(&[0, 1, 3], &[4, 2, 2]), Some(1));
    }

    #[test]
    fn from_lists_sorts_and_dedups() {
        let b = Baskets::from_lists([vec![3, 1, 3, 2], vec![], vec![5]]);
        assert_eq!(b.offsets, vec![0, 3, 3, 4]);
        assert_eq!(b.items, vec![1, 2, 3, 5]);
        assert_eq!(b.len(), 3);
        assert_eq!(b.transaction(1), &[] as &[u32]);
        assert_eq!(b.item_bound(), 6);
    }

    #[test]
    fn extend_shifts_offsets() {
        let mut a = Baskets::from_lists([vec![1u32, 2]]);
        a.extend(&Baskets::from_lists([vec![3u32], vec![4, 5]]));
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![&[1, 2][..], &[3][..], &[4, 5][..]]);
    }
}
