//! Local counting kernels for the passes whose candidates are few (or dense) enough to be
//! counted on every rank and all-reduced instead of being shipped item by item:
//!
//! - [`count_pairs`]: pass 2, every pair of a reduced transaction in a triangular array (all
//!   pairs of frequent items are candidates; one memory access per pair, lexicographic order).
//! - [`TidLists`]: passes 3 and up of Count Distribution over vertical data: each large
//!   itemset keeps the (local) transaction ids that contain it, and a candidate's count is the
//!   size of the intersection of its two generating (k-1)-subsets' lists (Eclat's step, level
//!   by level so the counts can be all-reduced between levels).

use super::table::{tri, ItemsetIndex};

/// Pair counts of transactions whose items are ranks below `n`, ascending: entry
/// `tri(a, b)` (a < b, row-major, so lexicographic) counts the transactions holding both.
/// The one kernel the sequential engine uses too.
pub use crate::mining::pairs::count_pairs;

/// The pairs `(a, b)` (flat, lexicographic) whose triangular count is at least `min`, and
/// their counts.
pub fn frequent_pairs(counts: &[u64], n: usize, min: u64) -> (Vec<u32>, Vec<u64>) {
    let (mut flat, mut out) = (Vec::new(), Vec::new());
    for a in 0..n {
        for b in a + 1..n {
            let c = counts[tri(n, a, b)];
            if c >= min {
                flat.extend_from_slice(&[a as u32, b as u32]);
                out.push(c);
            }
        }
    }
    (flat, out)
}

/// Itemsets of one length with their local transaction-id lists.
#[derive(Debug, Clone)]
pub struct TidLists {
    pub k: usize,
    index: ItemsetIndex,
    starts: Vec<usize>,
    tids: Vec<u32>,
}

/// Append the ids in both sorted lists to `out`.
pub(crate) fn intersect(a: &[u32], b: &[u32], out: &mut Vec<u32>) {
    let (mut x, mut y) = (0, 0);
    while x < a.len() && y < b.len() {
        let (u, v) = (a[x], b[y]);
        if u == v {
            out.push(u);
        }
        x += (u <= v) as usize;
        y += (v <= u) as usize;
    }
}

impl TidLists {
    /// The lists of the items `keep` marks (ranks below `keep.len()`) over transactions
    /// `offsets`/`items` (transaction t has id t).
    pub fn of_items(offsets: &[i64], items: &[u32], keep: &[bool]) -> Self {
        let n = keep.len();
        let mut len = vec![0usize; n + 1];
        for &x in items {
            if keep[x as usize] {
                len[x as usize + 1] += 1;
            }
        }
        for i in 0..n {
            len[i + 1] += len[i];
        }
        let starts = len.clone();
        let mut fill = len;
        let mut tids = vec![0u32; starts[n]];
        for (t, w) in offsets.windows(2).enumerate() {
            for &x in &items[w[0] as usize..w[1] as usize] {
                let x = x as usize;
                if keep[x] {
                    tids[fill[x]] = t as u32;
                    fill[x] += 1;
                }
            }
        }
        // Every item of 0..n is present (empty lists for the others), so index = item.
        TidLists { k: 1, index: ItemsetIndex::new(1, (0..n as u32).collect()), starts, tids }
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    fn list(&self, i: usize) -> &[u32] {
        &self.tids[self.starts[i]..self.starts[i + 1]]
    }

    /// The list of itemset `i` (for items: of item `i`).
    pub fn list_of(&self, i: usize) -> &[u32] {
        self.list(i)
    }

    /// The lists of candidate (k+1)-itemsets `cands` (flat, every k-subset used below present
    /// here): each is the intersection of the lists of its first k items and of its first k-1
    /// items plus its last. Errors name a candidate whose generators are missing.
    pub fn extend(&self, cands: &[u32]) -> Result<TidLists, String> {
        let k1 = self.k + 1;
        if !cands.len().is_multiple_of(k1) {
            return Err(format!("{} candidate items is not a multiple of {k1}", cands.len()));
        }
        let mut starts = vec![0usize];
        let mut tids = Vec::new();
        let mut b_key = vec![0u32; self.k];
        for c in cands.chunks_exact(k1) {
            b_key[..self.k - 1].copy_from_slice(&c[..self.k - 1]);
            b_key[self.k - 1] = c[self.k];
            let (Some(a), Some(b)) = (self.index.get(&c[..self.k]), self.index.get(&b_key)) else {
                return Err(format!("candidate {c:?}: a generating {}-itemset has no list", self.k));
            };
            intersect(self.list(a), self.list(b), &mut tids);
            starts.push(tids.len());
        }
        Ok(TidLists { k: k1, index: ItemsetIndex::new(k1, cands.to_vec()), starts, tids })
    }

    /// The local count (list length) of each itemset, in order.
    pub fn counts(&self) -> Vec<u64> {
        self.starts.windows(2).map(|w| (w[1] - w[0]) as u64).collect()
    }

    /// Keep the itemsets `keep` marks (in order), dropping the other lists.
    pub fn retain(&self, keep: &[bool]) -> TidLists {
        let k = self.k;
        let (mut items, mut starts, mut tids) = (Vec::new(), vec![0usize], Vec::new());
        for (i, &kp) in keep.iter().enumerate().take(self.len()) {
            if kp {
                items.extend_from_slice(&self.index.items[i * k..(i + 1) * k]);
                tids.extend_from_slice(self.list(i));
                starts.push(tids.len());
            }
        }
        TidLists { k, index: ItemsetIndex::new(k, items), starts, tids }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Baskets;

    #[test]
    fn pairs_and_lists_count_as_brute_force() {
        let txs = vec![vec![0u32, 1, 2], vec![0, 1], vec![1, 2, 3], vec![0, 1, 2, 3]];
        let b = Baskets::from_lists(&txs);
        let c = count_pairs(&b.offsets, &b.items, 4);
        assert_eq!(c, vec![3, 2, 1, 3, 2, 2]); // 01 02 03 12 13 23
        let wide: Vec<u64> = c.iter().map(|&x| x as u64).collect();
        assert_eq!(frequent_pairs(&wide, 4, 3), (vec![0, 1, 1, 2], vec![3, 3]));
        let items = TidLists::of_items(&b.offsets, &b.items, &[true, true, true, true]);
        assert_eq!(items.counts(), vec![3, 4, 3, 2]);
        let pairs = items.extend(&[0, 1, 0, 2, 1, 2]).unwrap();
        assert_eq!(pairs.counts(), vec![3, 2, 3]);
        let triples = pairs.extend(&[0, 1, 2]).unwrap();
        assert_eq!(triples.counts(), vec![2]);
        let kept = pairs.retain(&[true, false, true]);
        assert_eq!(kept.counts(), vec![3, 3]);
        assert!(kept.extend(&[0, 1, 2]).is_err()); // {0, 2} was dropped
        assert!(items.extend(&[0, 1, 2]).is_err());
    }
}
