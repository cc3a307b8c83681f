//! The canonical result of every miner: itemsets in CSR form with a support count each,
//! items ascending inside an itemset, itemsets sorted by (length, items lexicographically).
//! Every algorithm returns exactly this whatever the thread count, so results compare
//! byte for byte.

use rayon::prelude::*;
use std::cmp::Ordering;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as AtOrd};

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
    /// Linear when the input is already canonical. Otherwise itemsets are bucketed by length
    /// and, within a length, sorted by a packed integer key (items replaced by their dense
    /// rank, `bits` each), which keeps the sort on contiguous keys instead of chasing
    /// offsets; only itemsets too long for a 128-bit key are compared as slices.
    pub fn canonicalize(self) -> Itemsets {
        let n = self.len();
        let sorted = (1..n).into_par_iter().all(|i| canonical_cmp(self.itemset(i - 1), self.itemset(i)) != Ordering::Greater);
        if sorted {
            return self;
        }
        let ranks = ItemRanks::of(&self.items);
        let f = ranks.len() as u32;
        let bits = (32 - f.saturating_sub(1).leading_zeros()).max(1) as usize;
        // Bucket indices by length (counting sort, stable).
        let starts = self.length_starts();
        let mut fill = starts.clone();
        let mut idx = vec![0u32; n];
        for i in 0..n {
            let l = self.itemset(i).len();
            idx[fill[l]] = i as u32;
            fill[l] += 1;
        }
        let key = |i: u32| -> u128 { self.itemset(i as usize).iter().fold(0u128, |k, &x| k << bits | ranks.get(x) as u128) };
        let mut rest: &mut [u32] = &mut idx;
        for l in 0..starts.len() - 1 {
            let (group, tail) = rest.split_at_mut(starts[l + 1] - starts[l]);
            rest = tail;
            if group.len() < 2 {
                continue;
            }
            if l * bits <= 64 {
                let mut kv: Vec<(u64, u32)> = group.par_iter().map(|&i| (key(i) as u64, i)).collect();
                kv.par_sort_unstable();
                group.iter_mut().zip(kv).for_each(|(g, (_, i))| *g = i);
            } else if l * bits <= 128 {
                let mut kv: Vec<(u128, u32)> = group.par_iter().map(|&i| (key(i), i)).collect();
                kv.par_sort_unstable();
                group.iter_mut().zip(kv).for_each(|(g, (_, i))| *g = i);
            } else {
                group.par_sort_unstable_by(|&a, &b| self.itemset(a as usize).cmp(self.itemset(b as usize)).then(a.cmp(&b)));
            }
        }
        self.gather(&idx)
    }

    /// The itemsets at `idx`, in that order (parallel copy straight into the output).
    pub fn gather(&self, idx: &[u32]) -> Itemsets {
        let mut offsets = Vec::with_capacity(idx.len() + 1);
        offsets.push(0i64);
        let mut acc = 0i64;
        for &i in idx {
            acc += self.offsets[i as usize + 1] - self.offsets[i as usize];
            offsets.push(acc);
        }
        let counts: Vec<u64> = idx.par_iter().map(|&i| self.counts[i as usize]).collect();
        let mut items = vec![0u32; acc as usize];
        // Cut the output into pieces at itemset boundaries, each filled by one task.
        const PIECE: usize = 8192;
        let mut pieces: Vec<(&[u32], &mut [u32])> = Vec::with_capacity(idx.len() / PIECE + 1);
        let mut rest: &mut [u32] = &mut items;
        for (c, ids) in idx.chunks(PIECE).enumerate() {
            let len = (offsets[c * PIECE + ids.len()] - offsets[c * PIECE]) as usize;
            let (head, tail) = rest.split_at_mut(len);
            pieces.push((ids, head));
            rest = tail;
        }
        pieces.into_par_iter().for_each(|(ids, out)| {
            let mut w = 0;
            for &i in ids {
                let s = self.itemset(i as usize);
                out[w..w + s.len()].copy_from_slice(s);
                w += s.len();
            }
        });
        Itemsets { offsets, items, counts }
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

/// Dense rank of every distinct item (rank order = id order): a table while the ids are
/// small, else binary search in the sorted distinct ids (never a table by the largest id).
pub(crate) enum ItemRanks {
    Dense(Vec<u32>, usize),
    Sorted(Vec<u32>),
}

impl ItemRanks {
    pub fn of(items: &[u32]) -> ItemRanks {
        let bound = items.par_iter().copied().max().map_or(0, |m| m as usize + 1);
        if bound <= items.len().max(1 << 16) {
            let mut rank = vec![0u32; bound];
            for &i in items {
                rank[i as usize] = 1;
            }
            let mut f = 0u32;
            for r in rank.iter_mut() {
                if *r != 0 {
                    *r = f;
                    f += 1;
                }
            }
            ItemRanks::Dense(rank, f as usize)
        } else {
            let mut v = items.to_vec();
            v.par_sort_unstable();
            v.dedup();
            ItemRanks::Sorted(v)
        }
    }

    pub fn len(&self) -> usize {
        match self {
            ItemRanks::Dense(_, n) => *n,
            ItemRanks::Sorted(v) => v.len(),
        }
    }

    #[inline]
    pub fn get(&self, id: u32) -> u32 {
        match self {
            ItemRanks::Dense(r, _) => r[id as usize],
            ItemRanks::Sorted(v) => v.binary_search(&id).unwrap_or(0) as u32,
        }
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

/// The cap on the number of itemsets one run may produce, shared by all threads of the run:
/// a pattern explosion (a long transaction at a low support gives 2^length itemsets) stops
/// every thread promptly instead of exhausting memory.
#[derive(Debug)]
pub struct Limit {
    max: u64,
    emitted: AtomicU64,
    stop: AtomicBool,
    sink: Option<Sink>,
}

/// Where a streaming run's itemsets go as they are written (see [`Limit::streaming`]).
pub struct Sink {
    send: Box<dyn Fn(Itemsets) -> bool + Send + Sync>,
    /// Output rank -> item id of the itemsets emitters write (empty: they are ids already).
    ids: std::sync::RwLock<Vec<u32>>,
    chunk: usize,
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sink(chunk {})", self.chunk)
    }
}

/// Itemsets an emitter counts locally before adding them to the shared total.
const FLUSH: u64 = 4096;

impl Limit {
    pub fn new(max: u64) -> Self {
        Limit { max, emitted: AtomicU64::new(0), stop: AtomicBool::new(false), sink: None }
    }

    /// A limit whose run hands its itemsets to `send` in chunks of about `chunk` itemsets
    /// (in item ids, in the order found) instead of returning them: the run's result is then
    /// empty. `send` returning false (the receiver is gone) stops the run.
    pub fn streaming(max: u64, chunk: usize, send: impl Fn(Itemsets) -> bool + Send + Sync + 'static) -> Self {
        let sink = Sink { send: Box::new(send), ids: std::sync::RwLock::new(Vec::new()), chunk: chunk.max(1) };
        Limit { sink: Some(sink), ..Self::new(max) }
    }

    pub fn is_streaming(&self) -> bool {
        self.sink.is_some()
    }

    /// The item id of each output rank the emitters of this run write.
    pub(crate) fn set_ids(&self, ids: &[u32]) {
        if let Some(s) = &self.sink {
            *s.ids.write().unwrap_or_else(|e| e.into_inner()) = ids.to_vec();
        }
    }

    /// Hand `s` to the sink (in ids: output ranks are mapped unless `in_ids`), in chunks.
    pub(crate) fn stream(&self, mut s: Itemsets, in_ids: bool) {
        let Some(sink) = &self.sink else { return };
        if s.is_empty() {
            return;
        }
        if !in_ids {
            let ids = sink.ids.read().unwrap_or_else(|e| e.into_inner());
            if !ids.is_empty() {
                s.items.iter_mut().for_each(|x| *x = ids[*x as usize]);
            }
        }
        let n = s.len();
        let mut lo = 0;
        while lo < n {
            let hi = (lo + sink.chunk).min(n);
            let part = if lo == 0 && hi == n { std::mem::take(&mut s) } else { s.gather(&(lo as u32..hi as u32).collect::<Vec<_>>()) };
            if !(sink.send)(part) {
                self.stop_now();
                return;
            }
            lo = hi;
        }
    }

    pub fn unlimited() -> Self {
        Self::new(u64::MAX)
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    /// Whether the limit was passed (miners check this at every node and return).
    #[inline]
    pub fn stopped(&self) -> bool {
        self.stop.load(AtOrd::Relaxed)
    }

    /// Itemsets counted so far (when stopped: those found before the one step that would
    /// have passed the limit).
    pub fn emitted(&self) -> u64 {
        self.emitted.load(AtOrd::Relaxed)
    }

    /// Stop the run now (a miner saw that the next step alone would pass the limit).
    pub(crate) fn stop_now(&self) {
        self.stop.store(true, AtOrd::Relaxed);
    }

    /// Count `n` itemsets a miner produced without an emitter (Apriori's levels).
    pub(crate) fn charge(&self, n: u64) {
        self.add(n);
    }

    /// Add `n` itemsets; false (and stop everyone, leaving them uncounted) when the total
    /// would pass the limit.
    fn add(&self, n: u64) -> bool {
        let n = n.min(u64::MAX / 4);
        let total = self.emitted.fetch_add(n, AtOrd::Relaxed) + n;
        if total > self.max {
            self.emitted.fetch_sub(n, AtOrd::Relaxed);
            self.stop.store(true, AtOrd::Relaxed);
            return false;
        }
        true
    }
}

/// Output buffer a miner writes into while it recurses: the current prefix (output ranks),
/// the perfect extensions collected on the way down (items contained in every transaction
/// that contains the prefix: any subset of them can join the prefix with the same count) and
/// the flat result arrays. Each itemset is sorted in place right after it is written, so no
/// per-itemset allocation happens.
pub(crate) struct Emitter<'a> {
    pub prefix: Vec<u32>,
    pub pe: Vec<u32>,
    pub out: Itemsets,
    pub min_len: usize,
    pub max_len: usize,
    /// Reusable per-task scratch space of the miner (FP-growth's projection memo).
    pub scratch: Vec<u32>,
    pub limit: &'a Limit,
    pending: u64,
}

impl<'a> Emitter<'a> {
    pub fn new(p: &MineParams, limit: &'a Limit) -> Self {
        Emitter { prefix: Vec::with_capacity(64), pe: Vec::new(), out: Itemsets::new(), min_len: p.min_len.max(1), max_len: p.max_len, scratch: Vec::new(), limit, pending: 0 }
    }

    /// Count `n` itemsets against the limit; false when the run must stop.
    #[inline]
    fn reserve(&mut self, n: u64) -> bool {
        self.pending = self.pending.saturating_add(n);
        if self.pending >= FLUSH {
            let n = std::mem::take(&mut self.pending);
            return self.limit.add(n);
        }
        !self.limit.stopped()
    }

    /// Report the prefix joined with every subset of the perfect extensions (within the
    /// length limits), all with `count`.
    #[inline]
    pub fn emit(&mut self, count: u64) {
        let (l, m) = (self.prefix.len(), self.pe.len());
        if m == 0 {
            if l >= self.min_len && l <= self.max_len && self.reserve(1) {
                self.write(count);
            }
            return;
        }
        let lo = self.min_len.saturating_sub(l);
        let hi = self.max_len.saturating_sub(l).min(m);
        if l + m < self.min_len || l > self.max_len {
            return;
        }
        // Number of subsets with lo..=hi items, saturating (2^m can exceed any limit).
        let mut n = 0u64;
        let mut binom = 1u64; // C(m, s)
        for s in 0..=hi {
            if s >= lo {
                n = n.saturating_add(binom);
            }
            binom = (binom as u128 * (m - s) as u128 / (s + 1) as u128).min(u64::MAX as u128) as u64;
        }
        if !self.reserve(n) {
            return;
        }
        self.combos(0, l + lo, l + hi, count);
    }

    /// Every subset of `pe[start..]` added to the prefix, written when its length is in range.
    fn combos(&mut self, start: usize, lo: usize, hi: usize, count: u64) {
        if self.prefix.len() >= lo {
            self.write(count);
        }
        if self.prefix.len() == hi {
            return;
        }
        for j in start..self.pe.len() {
            self.prefix.push(self.pe[j]);
            self.combos(j + 1, lo, hi, count);
            self.prefix.pop();
        }
    }

    #[inline]
    fn write(&mut self, count: u64) {
        let start = self.out.items.len();
        self.out.items.extend_from_slice(&self.prefix);
        self.out.items[start..].sort_unstable();
        self.out.offsets.push(self.out.items.len() as i64);
        self.out.counts.push(count);
        if let Some(sink) = &self.limit.sink {
            if self.out.len() >= sink.chunk {
                self.limit.stream(std::mem::take(&mut self.out), false);
            }
        }
    }

    /// The itemsets written (the pending count goes to the shared total); when streaming,
    /// the rest goes to the sink and the result is empty.
    pub fn finish(mut self) -> Itemsets {
        let n = std::mem::take(&mut self.pending);
        if n > 0 {
            self.limit.add(n);
        }
        let out = std::mem::take(&mut self.out);
        if self.limit.is_streaming() {
            self.limit.stream(out, false);
            return Itemsets::new();
        }
        out
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
