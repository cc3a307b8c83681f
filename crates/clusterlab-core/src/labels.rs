//! Item dictionaries: string labels (or sparse integer ids) mapped to dense u32 ids, and the
//! fast hash used for them.
//!
//! A dictionary first hands out provisional ids in order of first appearance (one hash
//! lookup per item, no sorting while reading); [`LabelDictionary::sorted`] then gives the
//! deterministic final order and the remap from provisional to final ids.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A multiply-rotate hash (in the spirit of rustc's FxHash): a few cycles per u32 key or per
/// 8 bytes of a string, which is what item counting and label lookup need. Not DoS-resistant:
/// the keys are the user's own data.
#[derive(Default, Clone, Copy)]
pub struct FastHasher(u64);

const K: u64 = 0xf135_7aea_2e62_a9c5;

impl FastHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.wrapping_add(word)).wrapping_mul(K);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap()));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // The table takes its bucket from the low bits: rotate the well-mixed high bits down.
        self.0.rotate_left(26)
    }
}

pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// String labels in order of first appearance, each with a provisional id.
#[derive(Debug, Default, Clone)]
pub struct LabelDictionary {
    index: FastMap<String, u32>,
    labels: Vec<String>,
}

impl LabelDictionary {
    pub fn new() -> Self {
        Self::default()
    }

    /// The provisional id of `label`, added if new.
    #[inline]
    pub fn id(&mut self, label: &str) -> u32 {
        if let Some(&k) = self.index.get(label) {
            return k;
        }
        let k = self.labels.len() as u32;
        self.index.insert(label.to_owned(), k);
        self.labels.push(label.to_owned());
        k
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// The labels in their final order and `remap[provisional] = final`. With `numeric`,
    /// labels that are all unsigned integers sort by value (CSV's rule); otherwise, and when
    /// any label is not an integer, by bytes (which for UTF-8 is code point order, as
    /// Python's `sorted`).
    pub fn sorted(self, numeric: bool) -> (Vec<String>, Vec<u32>) {
        let labels = self.labels;
        let mut order: Vec<u32> = (0..labels.len() as u32).collect();
        let values: Option<Vec<u64>> =
            if numeric { labels.iter().map(|l| l.parse::<u64>().ok()).collect() } else { None };
        match &values {
            Some(v) => order.sort_unstable_by_key(|&k| (v[k as usize], k)),
            None => order.sort_unstable_by(|&a, &b| labels[a as usize].cmp(&labels[b as usize])),
        }
        let mut remap = vec![0u32; labels.len()];
        for (new, &old) in order.iter().enumerate() {
            remap[old as usize] = new as u32;
        }
        let mut slots: Vec<Option<String>> = labels.into_iter().map(Some).collect();
        let sorted = order.iter().map(|&k| slots[k as usize].take().unwrap()).collect();
        (sorted, remap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dictionary_orders() {
        let mut d = LabelDictionary::new();
        for l in ["10", "2", "b", "2"] {
            d.id(l);
        }
        assert_eq!(d.len(), 3);
        let (labels, remap) = d.clone().sorted(false);
        assert_eq!(labels, vec!["10", "2", "b"]);
        assert_eq!(remap, vec![0, 1, 2]);
        let mut n = LabelDictionary::new();
        for l in ["10", "2", "30"] {
            n.id(l);
        }
        let (labels, remap) = n.sorted(true);
        assert_eq!(labels, vec!["2", "10", "30"]);
        assert_eq!(remap, vec![1, 0, 2]);
    }

    #[test]
    fn hash_spreads_strided_keys() {
        // Ids that are multiples of a large power of two must not share buckets.
        let mut m: FastMap<u32, u32> = FastMap::default();
        for k in 0..10_000u32 {
            m.insert(k << 16, k);
        }
        assert_eq!(m.len(), 10_000);
        assert_eq!(m[&(77 << 16)], 77);
    }
}
