//! Baskets in compressed sparse row form: transaction `t` holds
//! `items[offsets[t] as usize..offsets[t + 1] as usize]`, sorted ascending, no duplicates.

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
/// Fast path: basket files are usually already sorted, so check before sorting.
pub fn normalize_tail(items: &mut Vec<u32>, start: usize) -> usize {
    let tail = &mut items[start..];
    if tail.windows(2).all(|w| w[0] < w[1]) {
        return 0;
    }
    tail.sort_unstable();
    let mut w = 0;
    for r in 0..tail.len() {
        if r == 0 || tail[r] != tail[w - 1] {
            tail[w] = tail[r];
            w += 1;
        }
    }
    let dropped = tail.len() - w;
    items.truncate(start + w);
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;

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
