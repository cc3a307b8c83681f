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
}

impl ItemsetIndex {
    /// Build from a flat array of `items.len() / k` itemsets (duplicates keep the first index).
    pub fn new(k: usize, items: Vec<u32>) -> Self {
        assert!(k > 0 && items.len() % k == 0, "flat itemsets must be a multiple of k");
        let n = items.len() / k;
        let cap = (n * 2).next_power_of_two().max(16);
        let mut t = ItemsetIndex { k, items, slots: vec![(0, EMPTY); cap], mask: cap - 1 };
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

    pub fn len(&self) -> usize {
        self.items.len().checked_div(self.k).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Index of `s` (whose hash is `h`), if present.
    #[inline]
    pub fn get_hashed(&self, s: &[u32], h: u64) -> Option<usize> {
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

    /// Count every itemset of a flat block into `counts`; returns how many were not present.
    pub fn count_flat(&self, flat: &[u32], counts: &mut [u64]) -> u64 {
        let mut misses = 0;
        if self.items.is_empty() {
            return (flat.len() / self.k.max(1)) as u64;
        }
        for s in flat.chunks_exact(self.k) {
            match self.get_hashed(s, itemset_hash(s)) {
                Some(i) => counts[i] += 1,
                None => misses += 1,
            }
        }
        misses
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
        let e = ItemsetIndex::new(3, vec![]);
        assert_eq!(e.get(&[1, 2, 3]), None);
        let big: Vec<u32> = (0..5000u32).flat_map(|i| [i, i + 1, i + 7]).collect();
        let t = ItemsetIndex::new(3, big);
        for i in 0..5000u32 {
            assert_eq!(t.get(&[i, i + 1, i + 7]), Some(i as usize));
        }
    }
}
