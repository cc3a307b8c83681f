//! Open-addressing table from itemsets of one length `k` to their index in a flat list.
//! This is the owner's candidate partition (HPA's hash table) and the replicated ELD set.

use super::hash::{itemset_hash, slot_mix};

const EMPTY: u32 = u32::MAX;

/// Itemsets of length `k`, stored flat (`items[i*k..(i+1)*k]`), looked up by content.
#[derive(Debug, Clone, Default)]
pub struct ItemsetIndex {
    pub k: usize,
    pub items: Vec<u32>,
    // (full hash, index) per slot; the hash is compared before the items so a probe touches
    // the item array only on a (near certain) match.
    slots: Vec<(u64, u32)>,
    mask: usize,
    // Pairs (k = 2) over items < n: a dense triangular array pair -> index (EMPTY: absent).
    // Pass 2 probes this once per transaction pair, so a cache-friendly array beats hashing.
    dense: Option<(usize, Vec<u32>)>,
}

/// Largest triangular array (entries) the dense pair index may use (64 MB of u32).
pub const DENSE_MAX: usize = 1 << 24;

#[inline]
pub(crate) fn tri(n: usize, a: usize, b: usize) -> usize {
    a * n - a * (a + 1) / 2 + (b - a - 1)
}

impl ItemsetIndex {
    /// Build from a flat array of `items.len() / k` itemsets (duplicates keep the first index).
    pub fn new(k: usize, items: Vec<u32>) -> Self {
        assert!(k > 0 && items.len().is_multiple_of(k), "flat itemsets must be a multiple of k");
        let n = items.len() / k;
        let cap = (n * 2).next_power_of_two().max(16);
        let mut t = ItemsetIndex { k, items, slots: vec![(0, EMPTY); cap], mask: cap - 1, dense: None };
        for i in 0..n {
            let h = itemset_hash(&t.items[i * k..(i + 1) * k]);
            let mut s = slot_mix(h) as usize & t.mask;
            loop {
                let (sh, si) = t.slots[s];
                if si == EMPTY {
                    t.slots[s] = (h, i as u32);
                    break;
                }
                if sh == h && t.items[si as usize * k..(si as usize + 1) * k] == t.items[i * k..(i + 1) * k] {
                    break;
                }
                s = (s + 1) & t.mask;
            }
        }
        t
    }

    /// Add the dense pair index for k = 2 when every item is below `n_items` and the
    /// triangle has at most [`DENSE_MAX`] entries; otherwise keep hashing.
    pub fn with_dense_pairs(mut self, n_items: usize) -> Self {
        if self.k != 2 || n_items < 2 || n_items * (n_items - 1) / 2 > DENSE_MAX || self.items.iter().any(|&x| x as usize >= n_items) {
            return self;
        }
        let mut d = vec![EMPTY; n_items * (n_items - 1) / 2];
        for (i, p) in self.items.chunks_exact(2).enumerate() {
            if p[0] < p[1] {
                let slot = &mut d[tri(n_items, p[0] as usize, p[1] as usize)];
                if *slot == EMPTY {
                    *slot = i as u32;
                }
            }
        }
        self.dense = Some((n_items, d));
        self
    }

    /// Number of items of the dense pair index, if there is one.
    pub fn dense_items(&self) -> Option<usize> {
        self.dense.as_ref().map(|d| d.0)
    }

    /// Index of `s` without hashing when the dense pair index applies.
    #[inline]
    pub fn get_fast(&self, s: &[u32]) -> Option<usize> {
        if let Some((n, d)) = &self.dense {
            let (a, b) = (s[0] as usize, s[1] as usize);
            if a < b && b < *n {
                let v = d[tri(*n, a, b)];
                return if v == EMPTY { None } else { Some(v as usize) };
            }
            return None;
        }
        self.get(s)
    }

    pub fn len(&self) -> usize {
        self.items.len().checked_div(self.k).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Index of `s` (whose hash is `h`), if present.
    #[inline]
    pub fn get_hashed(&self, s: &[u32], h: u64) -> Option<usize> {
        if self.dense.is_some() {
            return self.get_fast(s);
        }
        let k = self.k;
        let mut p = slot_mix(h) as usize & self.mask;
        loop {
            let (sh, si) = self.slots[p];
            if si == EMPTY {
                return None;
            }
            if sh == h {
                let i = si as usize;
                if &self.items[i * k..(i + 1) * k] == s {
                    return Some(i);
                }
            }
            p = (p + 1) & self.mask;
        }
    }

    #[inline]
    pub fn get(&self, s: &[u32]) -> Option<usize> {
        if s.len() != self.k || self.items.is_empty() {
            return None;
        }
        self.get_hashed(s, itemset_hash(s))
    }

    /// Pairs counted into a triangular array (dense index only): one memory access per pair.
    /// Returns how many were not candidates. Fold into candidate order with [`Self::fold_tri`].
    pub fn count_pairs_tri(&self, flat: &[u32], tri_counts: &mut [u32]) -> u64 {
        let Some((n, d)) = &self.dense else { return (flat.len() / 2) as u64 };
        let mut misses = 0;
        for p in flat.chunks_exact(2) {
            let (a, b) = (p[0] as usize, p[1] as usize);
            if a < b && b < *n {
                let slot = tri(*n, a, b);
                if d[slot] != EMPTY {
                    tri_counts[slot] += 1;
                    continue;
                }
            }
            misses += 1;
        }
        misses
    }

    /// Add a triangular pair count array to `counts` (candidate order).
    pub fn fold_tri(&self, tri_counts: &[u32], counts: &mut [u64]) {
        if let Some((n, _)) = &self.dense {
            for (i, p) in self.items.chunks_exact(2).enumerate() {
                let (a, b) = (p[0] as usize, p[1] as usize);
                if a < b && b < *n {
                    counts[i] += tri_counts[tri(*n, a, b)] as u64;
                }
            }
        }
    }

    /// Count every itemset of a flat block into `counts`; returns how many were not present.
    pub fn count_flat(&self, flat: &[u32], counts: &mut [u64]) -> u64 {
        let mut misses = 0;
        if self.items.is_empty() {
            return (flat.len() / self.k.max(1)) as u64;
        }
        for s in flat.chunks_exact(self.k) {
            let found = if self.dense.is_some() { self.get_fast(s) } else { self.get_hashed(s, itemset_hash(s)) };
            match found {
                Some(i) => counts[i] += 1,
                None => misses += 1,
            }
        }
        misses
    }
}

/// An owner's candidate partition with its counters: what an HPA owner counts received
/// message blocks into. Pairs with a dense index are counted in a triangle (one memory
/// access per pair) and folded into candidate order by [`OwnerTable::counts`].
#[derive(Debug)]
pub struct OwnerTable {
    pub index: std::sync::Arc<ItemsetIndex>,
    counts: Vec<u64>,
    tri: Option<Vec<u32>>,
    /// Received itemsets that were not candidates (a sender bug or a stray block).
    pub misses: u64,
    pub blocks: u64,
}

impl OwnerTable {
    /// Candidates `flat` (k-itemsets of item ranks); `n_items > 0` (every rank below it) lets
    /// pairs use the dense index.
    pub fn new(k: usize, flat: Vec<u32>, n_items: usize) -> Self {
        let ix = ItemsetIndex::new(k, flat);
        let ix = if n_items > 0 { ix.with_dense_pairs(n_items) } else { ix };
        let tri = ix.dense_items().map(|d| vec![0u32; d * (d - 1) / 2]);
        OwnerTable { counts: vec![0; ix.len()], index: std::sync::Arc::new(ix), tri, misses: 0, blocks: 0 }
    }

    /// Count every k-itemset of a received block (see [`super::block`]); returns how many
    /// were not candidates.
    pub fn count_block(&mut self, data: &[u8], width: usize) -> Result<u64, String> {
        let flat = super::block::decode(data, width, self.index.k)?;
        let m = match &mut self.tri {
            Some(t) => self.index.count_pairs_tri(&flat, t),
            None => self.index.count_flat(&flat, &mut self.counts),
        };
        self.misses += m;
        self.blocks += 1;
        Ok(m)
    }

    /// Counts in candidate order.
    pub fn counts(&mut self) -> Vec<u64> {
        if let Some(t) = self.tri.take() {
            self.index.fold_tri(&t, &mut self.counts);
        }
        self.counts.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_and_count() {
        let t = ItemsetIndex::new(2, vec![1, 2, 1, 3, 2, 3]);
        assert_eq!(t.len(), 3);
        assert_eq!(t.get(&[1, 3]), Some(1));
        assert_eq!(t.get(&[3, 1]), None);
        assert_eq!(t.get(&[1]), None);
        let mut c = vec![0; 3];
        assert_eq!(t.count_flat(&[2, 3, 2, 3, 7, 8], &mut c), 1);
        assert_eq!(c, vec![0, 0, 2]);
        let d = ItemsetIndex::new(2, vec![1, 2, 1, 3, 2, 3]).with_dense_pairs(4);
        assert!(d.dense.is_some());
        assert_eq!((d.get(&[1, 3]), d.get_fast(&[2, 3]), d.get_fast(&[0, 3]), d.get_fast(&[3, 9])), (Some(1), Some(2), None, None));
        let mut c = vec![0; 3];
        assert_eq!(d.count_flat(&[2, 3, 2, 3, 0, 1, 3, 2], &mut c), 2);
        assert_eq!(c, vec![0, 0, 2]);
        let mut o = OwnerTable::new(2, vec![1, 2, 1, 3, 2, 3], 4);
        let blk = super::super::block::encode(&[2, 3, 0, 1, 2, 3], 2);
        assert_eq!(o.count_block(&blk, 2), Ok(1));
        assert!(o.count_block(&blk[..3], 2).is_err());
        assert_eq!((o.counts(), o.blocks, o.misses), (vec![0, 0, 2], 1, 1));
        let e = ItemsetIndex::new(3, vec![]);
        assert_eq!(e.get(&[1, 2, 3]), None);
        let big: Vec<u32> = (0..5000u32).flat_map(|i| [i, i + 1, i + 7]).collect();
        let t = ItemsetIndex::new(3, big);
        for i in 0..5000u32 {
            assert_eq!(t.get(&[i, i + 1, i + 7]), Some(i as usize));
        }
    }
}
