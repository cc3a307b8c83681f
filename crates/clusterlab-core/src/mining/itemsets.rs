//! The canonical result of every miner: itemsets in CSR form with a support count each,
//! items ascending inside an itemset, itemsets sorted by (length, items lexicographically).
//! Every algorithm returns exactly this whatever the thread count, so results compare
//! byte for byte.

use rayon::prelude::*;
use std::cmp::Ordering;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Itemsets {
    pub offsets: Vec<i64>,
    pub items: Vec<u32>,
    pub counts: Vec<u64>,
}

impl Default for Itemsets {
    fn default() -> Self {
        Self::new()
    }
}

impl Itemsets {
    pub fn new() -> Self {
        Itemsets { offsets: vec![0], items: Vec::new(), counts: Vec::new() }
    }

    pub fn len(&self) -> usize {
        self.counts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    pub fn itemset(&self, i: usize) -> &[u32] {
        &self.items[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u32], u64)> + '_ {
        self.offsets.windows(2).zip(&self.counts).map(move |(w, &c)| (&self.items[w[0] as usize..w[1] as usize], c))
    }

    /// Append one itemset; `items` must already be ascending.
    pub fn push(&mut self, items: &[u32], count: u64) {
        self.items.extend_from_slice(items);
        self.offsets.push(self.items.len() as i64);
        self.counts.push(count);
    }

    /// Append all itemsets of `other` (order kept).
    pub fn append(&mut self, other: &Itemsets) {
        let base = self.items.len() as i64;
        self.items.extend_from_slice(&other.items);
        self.offsets.extend(other.offsets[1..].iter().map(|o| o + base));
        self.counts.extend_from_slice(&other.counts);
    }

    /// Concatenate many buffers (e.g. one per thread) in order.
    pub fn concat(parts: Vec<Itemsets>) -> Itemsets {
        let n: usize = parts.iter().map(|p| p.len()).sum();
        let m: usize = parts.iter().map(|p| p.items.len()).sum();
        let mut out = Itemsets {
            offsets: Vec::with_capacity(n + 1),
            items: Vec::with_capacity(m),
            counts: Vec::with_capacity(n),
        };
        out.offsets.push(0);
        for p in &parts {
            out.append(p);
        }
        out
    }

    /// Whether the itemsets are in canonical order (ascending items, sorted by (length, lex),
    /// no duplicates).
    pub fn is_canonical(&self) -> bool {
        (0..self.len()).all(|i| self.itemset(i).windows(2).all(|w| w[0] < w[1]))
            && (1..self.len()).all(|i| canonical_cmp(self.itemset(i - 1), self.itemset(i)) == Ordering::Less)
    }

    /// Sort into canonical order. Items inside each itemset must already be ascending.
    /// Linear when the input is already canonical; otherwise a parallel sort of indices.
    pub fn canonicalize(self) -> Itemsets {
        let n = self.len();
        let sorted = (1..n).into_par_iter().all(|i| canonical_cmp(self.itemset(i - 1), self.itemset(i)) != Ordering::Greater);
        if sorted {
            return self;
        }
        let mut idx: Vec<u32> = (0..n as u32).collect();
        idx.par_sort_unstable_by(|&a, &b| canonical_cmp(self.itemset(a as usize), self.itemset(b as usize)).then(a.cmp(&b)));
        self.gather(&idx)
    }

    /// The itemsets at `idx`, in that order.
    pub fn gather(&self, idx: &[u32]) -> Itemsets {
        let mut out = Itemsets {
            offsets: Vec::with_capacity(idx.len() + 1),
            items: Vec::with_capacity(idx.iter().map(|&i| self.itemset(i as usize).len()).sum()),
            counts: Vec::with_capacity(idx.len()),
        };
        out.offsets.push(0);
        for &i in idx {
            out.push(self.itemset(i as usize), self.counts[i as usize]);
        }
        out
    }

    /// Keep the itemsets whose length lies in `min_len..=max_len`.
    pub fn filter_len(self, min_len: usize, max_len: usize) -> Itemsets {
        if (0..self.len()).all(|i| (min_len..=max_len).contains(&self.itemset(i).len())) {
            return self;
        }
        let idx: Vec<u32> = (0..self.len() as u32).filter(|&i| (min_len..=max_len).contains(&self.itemset(i as usize).len())).collect();
        self.gather(&idx)
    }

    /// Index range of the itemsets of each length: `starts[l]..starts[l + 1]` holds length `l`.
    /// Requires canonical order.
    pub fn length_starts(&self) -> Vec<usize> {
        let maxl = (0..self.len()).map(|i| self.itemset(i).len()).max().unwrap_or(0);
        let mut starts = vec![0usize; maxl + 2];
        for i in 0..self.len() {
            starts[self.itemset(i).len() + 1] += 1;
        }
        for l in 1..starts.len() {
            starts[l] += starts[l - 1];
        }
        starts
    }

    /// Index of `set` (ascending items) within a canonical Itemsets, by binary search in its
    /// length segment (`starts` from [`Itemsets::length_starts`]).
    pub fn find(&self, starts: &[usize], set: &[u32]) -> Option<usize> {
        let l = set.len();
        if l + 1 >= starts.len() {
            return None;
        }
        let (mut lo, mut hi) = (starts[l], starts[l + 1]);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.itemset(mid).cmp(set) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Some(mid),
            }
        }
        None
    }
}

/// The canonical order: shorter itemsets first, then lexicographic.
pub fn canonical_cmp(a: &[u32], b: &[u32]) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

/// Mining parameters shared by all miners.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MineParams {
    /// Minimum support count (absolute, >= 1).
    pub min_count: u64,
    pub min_len: usize,
    /// Largest itemset length to report (`usize::MAX` for no limit).
    pub max_len: usize,
}

impl MineParams {
    pub fn new(min_count: u64) -> Self {
        MineParams { min_count: min_count.max(1), min_len: 1, max_len: usize::MAX }
    }
}

/// Output buffer a miner writes into while it recurses: the current prefix (original item
/// ids) plus the flat result arrays. Each itemset is sorted in place right after it is written,
/// so no per-itemset allocation happens.
pub(crate) struct Emitter {
    pub prefix: Vec<u32>,
    pub out: Itemsets,
    pub min_len: usize,
}

impl Emitter {
    pub fn new(min_len: usize) -> Self {
        Emitter { prefix: Vec::with_capacity(64), out: Itemsets::new(), min_len }
    }

    #[inline]
    pub fn emit(&mut self, count: u64) {
        if self.prefix.len() < self.min_len {
            return;
        }
        let start = self.out.items.len();
        self.out.items.extend_from_slice(&self.prefix);
        self.out.items[start..].sort_unstable();
        self.out.offsets.push(self.out.items.len() as i64);
        self.out.counts.push(count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonicalize_sorts_by_length_then_lex() {
        let mut s = Itemsets::new();
        s.push(&[2, 3], 1);
        s.push(&[5], 2);
        s.push(&[1, 4], 3);
        s.push(&[1], 4);
        let c = s.canonicalize();
        assert_eq!(c.iter().map(|(i, _)| i.to_vec()).collect::<Vec<_>>(), vec![vec![1], vec![5], vec![1, 4], vec![2, 3]]);
        assert_eq!(c.counts, vec![4, 2, 3, 1]);
        assert!(c.is_canonical());
        let st = c.length_starts();
        assert_eq!(c.find(&st, &[2, 3]), Some(3));
        assert_eq!(c.find(&st, &[2, 4]), None);
        assert_eq!(c.find(&st, &[1, 2, 3]), None);
    }
}
