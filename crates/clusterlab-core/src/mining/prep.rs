//! The first steps every miner shares: count and recode the items, then build the first
//! level's conditional databases.
//!
//! **Recoding.** Items are counted with memory proportional to the number of *distinct* items
//! (a dense table only while the largest id is small, a hash table otherwise), and the
//! frequent ones get codes 0..m by descending count (ties by id). Miners work on codes; the
//! output uses *ranks* (the position of the id among all reported ids, so ascending rank is
//! ascending id) and ids are restored only at the very end. Nothing is allocated by the
//! largest id, so an item 4294967295 costs what item 7 costs.
//!
//! **First level.** The conditional database of code `i` holds, for every transaction that
//! contains `i`, its items with a smaller code (the more frequent ones), in local codes. When
//! the frequent items are few compared with the work (`m(m-1)/2` pair counters are cheap next
//! to the pairs the transactions hold), all pair counts are taken in one pass first; then a
//! conditional database keeps only items that form a frequent pair with `i`, and only
//! transactions with two or more of them (a single one only adds to a pair count, which is
//! already known). The databases are delivered from the transactions (occurrence delivery,
//! LCM-style): all of them in one pass into growing buffers when they fit the size of the
//! input's item array (Count Distribution's rank holds as much: its shrunk transactions);
//! else from a copy of the input holding only the paired codes, or from the input itself, in
//! batches of exactly sized buffers that fit a budget (an eighth of the input's size), so a
//! 10M-transaction input is never copied whole.

use super::itemsets::{Emitter, Itemsets, Limit, MineParams};
use super::BasketsRef;
use rayon::prelude::*;

pub(crate) const NONE: u32 = u32::MAX;

/// Largest item id + 1 for which counting and lookup use dense tables (a few MB per thread);
/// above it items are hashed, so memory follows the number of distinct items.
const DENSE_IDS: usize = 1 << 21;

/// Item id -> value (a code), `NONE` when absent.
pub(crate) enum IdLookup {
    Dense(Vec<u32>),
    Hashed(IdMap),
}

impl IdLookup {
    #[inline]
    pub fn get(&self, id: u32) -> u32 {
        match self {
            IdLookup::Dense(t) => t.get(id as usize).copied().unwrap_or(NONE),
            IdLookup::Hashed(h) => h.get(id),
        }
    }

    /// Append the values of `ids` that are not `NONE` to `out` (one dispatch per call).
    #[inline]
    pub fn extend_mapped(&self, ids: &[u32], out: &mut Vec<u32>) {
        match self {
            IdLookup::Dense(t) => {
                // Branch-free: every value is written, the end advances past kept ones only
                // (a branch on "kept" mispredicts on the mix of kept and dropped items).
                let start = out.len();
                out.resize(start + ids.len(), NONE);
                let buf = &mut out[start..];
                let mut n = 0;
                for &i in ids {
                    let c = t.get(i as usize).copied().unwrap_or(NONE);
                    buf[n] = c;
                    n += (c != NONE) as usize;
                }
                out.truncate(start + n);
            }
            IdLookup::Hashed(h) => out.extend(ids.iter().map(|&i| h.get(i)).filter(|&c| c != NONE)),
        }
    }
}

/// Open-addressing map from u32 keys to u32 values (`NONE` is not a storable value).
pub(crate) struct IdMap {
    keys: Vec<u32>,
    vals: Vec<u32>,
    shift: u32,
}

#[inline]
fn slot(key: u32, shift: u32) -> usize {
    (key.wrapping_mul(0x9E37_79B1) >> shift) as usize
}

impl IdMap {
    pub fn new(n: usize) -> Self {
        let cap = (2 * n.max(1)).next_power_of_two().max(16);
        IdMap { keys: vec![0; cap], vals: vec![NONE; cap], shift: 32 - cap.trailing_zeros() }
    }

    pub fn insert(&mut self, key: u32, val: u32) {
        let mask = self.keys.len() - 1;
        let mut h = slot(key, self.shift);
        while self.vals[h] != NONE && self.keys[h] != key {
            h = (h + 1) & mask;
        }
        self.keys[h] = key;
        self.vals[h] = val;
    }

    #[inline]
    pub fn get(&self, key: u32) -> u32 {
        let mask = self.keys.len() - 1;
        let mut h = slot(key, self.shift);
        loop {
            let v = self.vals[h];
            if v == NONE || self.keys[h] == key {
                return v;
            }
            h = (h + 1) & mask;
        }
    }
}

/// Weighted count of every distinct item: (ids ascending, counts).
pub(crate) fn count_items(db: BasketsRef<'_>) -> (Vec<u32>, Vec<u64>) {
    let bound = db.items.par_iter().copied().max().map_or(0, |m| m as usize + 1);
    let chunks = chunk_ranges(db.len(), 4);
    if bound <= DENSE_IDS {
        let dense = chunks
            .into_par_iter()
            .fold(|| vec![0u64; bound], |mut acc, (a, b)| {
                match db.weights {
                    None => {
                        let (s, e) = (db.offsets[a] as usize, db.offsets[b] as usize);
                        for &i in &db.items[s..e] {
                            acc[i as usize] += 1;
                        }
                    }
                    Some(w) => {
                        for t in a..b {
                            for &i in db.transaction(t) {
                                acc[i as usize] += w[t];
                            }
                        }
                    }
                }
                acc
            })
            .reduce(|| vec![0u64; bound], add_into);
        let ids: Vec<u32> = (0..bound as u32).filter(|&i| dense[i as usize] > 0).collect();
        let counts = ids.iter().map(|&i| dense[i as usize]).collect();
        return (ids, counts);
    }
    // Sparse ids: per-chunk sorted (id, weight) runs, merged.
    let mut pairs: Vec<(u32, u64)> = chunks
        .into_par_iter()
        .flat_map_iter(|(a, b)| {
            let mut v: Vec<(u32, u64)> = (a..b).flat_map(|t| db.transaction(t).iter().map(move |&i| (i, db.weight(t)))).collect();
            v.sort_unstable_by_key(|x| x.0);
            merge_runs(v)
        })
        .collect();
    pairs.par_sort_unstable_by_key(|x| x.0);
    let pairs = merge_runs(pairs);
    (pairs.iter().map(|x| x.0).collect(), pairs.iter().map(|x| x.1).collect())
}

fn merge_runs(v: Vec<(u32, u64)>) -> Vec<(u32, u64)> {
    let mut out: Vec<(u32, u64)> = Vec::with_capacity(v.len().min(1 << 16));
    for (i, c) in v {
        match out.last_mut() {
            Some(l) if l.0 == i => l.1 += c,
            _ => out.push((i, c)),
        }
    }
    out
}

pub(crate) fn add_into<T: std::ops::AddAssign + Copy>(mut a: Vec<T>, b: Vec<T>) -> Vec<T> {
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
    a
}

/// `[a, b)` transaction ranges, about `per_thread` per thread (at least 1024 transactions each).
pub(crate) fn chunk_ranges(n: usize, per_thread: usize) -> Vec<(usize, usize)> {
    let chunk = n.div_ceil(rayon::current_num_threads() * per_thread).max(1024);
    (0..n.div_ceil(chunk)).map(|c| (c * chunk, ((c + 1) * chunk).min(n))).collect()
}

/// Id -> rank lookup for ascending distinct `ids` (dense while the ids are small).
pub(crate) fn rank_lookup(ids: &[u32]) -> IdLookup {
    value_lookup(ids, |r| r as u32)
}

/// Id -> `value(position)` for ascending distinct `ids` (dense while the ids are small).
pub(crate) fn value_lookup(ids: &[u32], value: impl Fn(usize) -> u32) -> IdLookup {
    let bound = ids.last().map_or(0, |&m| m as usize + 1);
    if bound <= DENSE_IDS {
        let mut t = vec![NONE; bound];
        for (r, &i) in ids.iter().enumerate() {
            t[i as usize] = value(r);
        }
        IdLookup::Dense(t)
    } else {
        let mut h = IdMap::new(ids.len());
        for (r, &i) in ids.iter().enumerate() {
            h.insert(i, value(r));
        }
        IdLookup::Hashed(h)
    }
}

/// The recoded items of one database at one minimum count.
pub(crate) struct Prep {
    /// Total weight (the number of transactions when unweighted).
    pub total: u64,
    /// Output rank -> item id (ascending): the frequent items, including those in every
    /// transaction.
    pub out_ids: Vec<u32>,
    /// Output ranks of the items in every transaction (perfect extensions of the empty set).
    pub top_pe: Vec<u32>,
    /// Code -> output rank, and code -> count (descending counts: code 0 is the most frequent).
    pub rank: Vec<u32>,
    pub counts: Vec<u64>,
    /// Item id -> code (`NONE` for infrequent items and items in every transaction).
    pub lookup: IdLookup,
}

impl Prep {
    pub fn new(db: BasketsRef<'_>, min_count: u64) -> Prep {
        let (ids, counts) = count_items(db);
        let total = db.total_weight();
        let keep: Vec<usize> = (0..ids.len()).filter(|&k| counts[k] >= min_count).collect();
        let out_ids: Vec<u32> = keep.iter().map(|&k| ids[k]).collect();
        let top_pe: Vec<u32> = (0..keep.len() as u32).filter(|&r| counts[keep[r as usize]] == total).collect();
        let mut order: Vec<u32> = (0..keep.len() as u32).filter(|&r| counts[keep[r as usize]] != total).collect();
        order.sort_by(|&a, &b| counts[keep[b as usize]].cmp(&counts[keep[a as usize]]).then(a.cmp(&b)));
        let rank_counts: Vec<u64> = order.iter().map(|&r| counts[keep[r as usize]]).collect();
        let bound = ids.last().map_or(0, |&m| m as usize + 1);
        let lookup = if bound <= DENSE_IDS {
            let mut t = vec![NONE; bound];
            for (c, &r) in order.iter().enumerate() {
                t[out_ids[r as usize] as usize] = c as u32;
            }
            IdLookup::Dense(t)
        } else {
            let mut h = IdMap::new(order.len());
            for (c, &r) in order.iter().enumerate() {
                h.insert(out_ids[r as usize], c as u32);
            }
            IdLookup::Hashed(h)
        };
        Prep { total, out_ids, top_pe, rank: order, counts: rank_counts, lookup }
    }

    /// Item id -> `value(code)` for the coded items (`NONE` values and other ids: `NONE`).
    pub fn lookup_by_code(&self, value: impl Fn(u32) -> u32) -> IdLookup {
        let bound = self.out_ids.last().map_or(0, |&m| m as usize + 1);
        let entries = self.rank.iter().enumerate().map(|(c, &r)| (self.out_ids[r as usize], value(c as u32))).filter(|e| e.1 != NONE);
        if bound <= DENSE_IDS {
            let mut t = vec![NONE; bound];
            for (id, v) in entries {
                t[id as usize] = v;
            }
            IdLookup::Dense(t)
        } else {
            let mut h = IdMap::new(self.m());
            for (id, v) in entries {
                h.insert(id, v);
            }
            IdLookup::Hashed(h)
        }
    }

    /// Number of frequent codes.
    pub fn m(&self) -> usize {
        self.counts.len()
    }

    /// The codes of transaction `t`'s frequent items, ascending, into `out`.
    #[inline]
    pub fn code_tx(&self, t: &[u32], out: &mut Vec<u32>) {
        out.clear();
        self.lookup.extend_mapped(t, out);
        sort_small(out);
    }

    /// Itemsets in output ranks (canonical order) -> item ids.
    pub fn to_ids(&self, mut s: Itemsets) -> Itemsets {
        let ids = &self.out_ids;
        s.items.par_iter_mut().with_min_len(1 << 14).for_each(|x| *x = ids[*x as usize]);
        s
    }

    /// The itemsets made only of items in every transaction (output ranks).
    pub fn top_itemsets(&self, p: &MineParams, limit: &Limit) -> Itemsets {
        let mut em = Emitter::new(p, limit);
        em.pe.clone_from(&self.top_pe);
        if self.total >= p.min_count {
            em.emit(self.total);
        }
        em.finish()
    }
}

/// Insertion sort for the short arrays transactions are; pdqsort above 32 items.
#[inline]
pub(crate) fn sort_small(v: &mut [u32]) {
    if v.len() > 32 {
        v.sort_unstable();
        return;
    }
    for i in 1..v.len() {
        let x = v[i];
        let mut j = i;
        while j > 0 && v[j - 1] > x {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = x;
    }
}

/// A conditional database in local codes `0..k` (items ascending in each transaction) with
/// the weighted count of each code and the output rank it stands for.
pub(crate) struct Cond<'a> {
    pub items: &'a [u32],
    /// Transaction `t` is `items[offs[t]..offs[t + 1]]`.
    pub offs: &'a [u32],
    /// Per-transaction weights (None: every transaction counts once).
    pub weights: Option<&'a [u64]>,
    pub counts: &'a [u64],
    pub orig: &'a [u32],
}

impl Cond<'_> {
    pub fn k(&self) -> usize {
        self.counts.len()
    }
    pub fn n_tx(&self) -> usize {
        self.offs.len() - 1
    }
    #[inline]
    pub fn weight(&self, t: usize) -> u64 {
        self.weights.map_or(1, |w| w[t])
    }
    #[inline]
    pub fn tx(&self, t: usize) -> &[u32] {
        &self.items[self.offs[t] as usize..self.offs[t + 1] as usize]
    }
}

/// Owned buffers of a conditional database (reused across the recursion).
#[derive(Default)]
pub(crate) struct CondBuf {
    pub items: Vec<u32>,
    pub offs: Vec<u32>,
    pub weights: Vec<u64>,
    pub counts: Vec<u64>,
    pub orig: Vec<u32>,
    pub weighted: bool,
}

impl CondBuf {
    pub fn as_cond(&self) -> Cond<'_> {
        Cond { items: &self.items, offs: &self.offs, weights: self.weighted.then_some(&self.weights[..]), counts: &self.counts, orig: &self.orig }
    }
}

/// Occurrence lists of a database with `k` codes: `occ[start[j]..start[j + 1]]` are the
/// transactions holding `j`, ascending.
pub(crate) fn occurrences(c: &Cond<'_>, k: usize, start: &mut Vec<u32>, occ: &mut Vec<u32>) {
    start.clear();
    start.resize(k + 2, 0);
    for &x in c.items {
        start[x as usize + 2] += 1;
    }
    for j in 0..k {
        start[j + 2] += start[j + 1];
    }
    occ.clear();
    occ.resize(c.items.len(), 0);
    // start[j + 1] serves as j's fill cursor and ends at j's end, which is start[j + 1] of
    // the final layout.
    for t in 0..c.n_tx() {
        for &x in c.tx(t) {
            let cur = &mut start[x as usize + 1];
            occ[*cur as usize] = t as u32;
            *cur += 1;
        }
    }
    start.truncate(k + 1);
}

/// Counters for [`project`], kept zero / `NONE` between calls.
#[derive(Default)]
pub(crate) struct ProjScratch {
    cc: Vec<u64>,
    lc: Vec<u32>,
    touched: Vec<u32>,
    keep: Vec<u32>,
}

/// The conditional database of code `j` of `c` (whose occurrences are `occ`, count `count`):
/// counts the codes below `j` in those transactions (the scan stops at `j`, items ascend),
/// pushes the output ranks of perfect extensions to `pe`, and builds the frequent rest,
/// recoded to local codes (ascending), into `out`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn project(c: &Cond<'_>, j: usize, occ: &[u32], count: u64, min_count: u64, pe: &mut Vec<u32>, out: &mut CondBuf, s: &mut ProjScratch) {
    if s.cc.len() < c.k() {
        s.cc.resize(c.k(), 0);
        s.lc.resize(c.k(), NONE);
    }
    out.items.clear();
    out.offs.clear();
    out.offs.push(0);
    out.weights.clear();
    out.counts.clear();
    out.orig.clear();
    out.weighted = c.weights.is_some();
    if j == 0 {
        return;
    }
    s.touched.clear();
    for &t in occ {
        let w = c.weight(t as usize);
        for &x in c.tx(t as usize) {
            if x as usize >= j {
                break;
            }
            let e = &mut s.cc[x as usize];
            if *e == 0 {
                s.touched.push(x);
            }
            *e += w;
        }
    }
    // Local codes ascend with the codes (so projected transactions stay sorted): sort only
    // the frequent codes, usually far fewer than the touched ones.
    s.keep.clear();
    for &x in &s.touched {
        let e = s.cc[x as usize];
        if e == count {
            pe.push(c.orig[x as usize]);
        } else if e >= min_count {
            s.keep.push(x);
        }
    }
    sort_touched(&mut s.keep, j);
    for &x in &s.keep {
        s.lc[x as usize] = out.counts.len() as u32;
        out.counts.push(s.cc[x as usize]);
        out.orig.push(c.orig[x as usize]);
    }
    if out.counts.len() > 1 {
        for &t in occ {
            let start = out.items.len();
            for &x in c.tx(t as usize) {
                if x as usize >= j {
                    break;
                }
                let l = s.lc[x as usize];
                if l != NONE {
                    out.items.push(l);
                }
            }
            if out.items.len() > start {
                out.offs.push(out.items.len() as u32);
                if out.weighted {
                    out.weights.push(c.weight(t as usize));
                }
            }
        }
    } else if out.counts.len() == 1 {
        // One item: its database is one transaction of it, weighted by its count.
        out.items.push(0);
        out.offs.push(1);
        out.weights.push(out.counts[0]);
        out.weighted = true;
    }
    for &x in &s.touched {
        s.cc[x as usize] = 0;
    }
    for &x in &s.keep {
        s.lc[x as usize] = NONE;
    }
}

/// What a miner does with one first-level item: mine the conditional database `cond` of the
/// prefix already in `em` (its count and perfect extensions are emitted by the caller).
pub(crate) trait Extend: Sync {
    fn mine(&self, cond: Cond<'_>, em: &mut Emitter<'_>, p: &MineParams);
}

/// Pair counts of the frequent codes in a [`super::pairs`] triangle over `n` positions:
/// code `c` is at position `pos[c]` (its output rank when counted from the ids, so that
/// transactions need no sort), or at `c` itself when `pos` is empty.
struct Pairs {
    counts: Vec<u32>,
    n: usize,
    pos: Vec<u32>,
}

impl Pairs {
    #[inline]
    fn get(&self, i: u32, j: u32) -> u32 {
        let (a, b) = if self.pos.is_empty() { (i, j) } else { (self.pos[i as usize], self.pos[j as usize]) };
        self.counts[super::pairs::tri(self.n, a.min(b) as usize, a.max(b) as usize)]
    }
}

/// Per-thread bytes the pair triangle may take.
const PAIR_BYTES: usize = 32 << 20;

/// Mine every frequent itemset: each first-level code's conditional database is built and
/// handed to `miner`, in parallel over codes; the result is canonical, in item ids.
/// `budget` caps the bytes the conditional databases of one batch may take.
pub(crate) fn mine_all<M: Extend>(db: BasketsRef<'_>, p: &MineParams, limit: &Limit, miner: &M) -> Itemsets {
    if p.max_len == 0 {
        return Itemsets::new();
    }
    let prep = Prep::new(db, p.min_count);
    limit.set_ids(&prep.out_ids);
    let mut outs = first_level(db, &prep, p, limit, miner);
    outs.push(prep.top_itemsets(p, limit));
    prep.to_ids(Itemsets::concat(outs).canonicalize())
}

/// Bytes of extra working memory the first level may use: an eighth of the input's CSR
/// size, at least 32 MiB.
pub(crate) fn budget_of(db: BasketsRef<'_>) -> usize {
    #[cfg(test)]
    {
        let b = BUDGET_FOR_TESTS.load(std::sync::atomic::Ordering::Relaxed);
        if b > 0 {
            return b;
        }
    }
    let input = db.items.len() * 4 + db.offsets.len() * 8 + db.weights.map_or(0, |w| w.len() * 8);
    (input / 8).max(32 << 20)
}

/// Bytes the copy of the input reduced to the codes of frequent pairs may take: as much as
/// the input's item array, the bound the level-wise path puts on its transaction-id lists
/// (`levelwise.rs`). On seed000 (10M transactions) the copy holds 37.5M of the 150M input
/// items, and the first level's databases (~42M entries, five batches at [`budget_of`])
/// are then delivered from it in one batch instead of one pass over the input per batch.
pub(crate) fn paired_budget_of(db: BasketsRef<'_>) -> usize {
    #[cfg(test)]
    {
        let b = BUDGET_FOR_TESTS.load(std::sync::atomic::Ordering::Relaxed);
        if b > 0 {
            return b;
        }
    }
    budget_of(db).max(db.items.len() * 4)
}

/// Which first-level delivery ran, counted for tests: all databases in one pass, from the
/// paired copy, from the input in batches.
#[cfg(test)]
pub(crate) static PATHS_FOR_TESTS: [std::sync::atomic::AtomicUsize; 3] = [const { std::sync::atomic::AtomicUsize::new(0) }; 3];

#[cfg(test)]
fn path_taken(i: usize) {
    PATHS_FOR_TESTS[i].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// Tests set a small budget to take the paths that large inputs take (0: the real budget).
#[cfg(test)]
pub(crate) static BUDGET_FOR_TESTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn first_level<M: Extend>(db: BasketsRef<'_>, prep: &Prep, p: &MineParams, limit: &Limit, miner: &M) -> Vec<Itemsets> {
    let m = prep.m();
    let weighted = db.weights.is_some();
    let chunks = chunk_ranges(db.len(), 4);
    let emit_single = |i: usize, pe: &[u32]| -> Emitter<'_> {
        let mut em = Emitter::new(p, limit);
        em.pe.extend_from_slice(&prep.top_pe);
        em.pe.extend_from_slice(pe);
        em.prefix.push(prep.rank[i]);
        em.emit(prep.counts[i]);
        em
    };
    if m == 0 {
        return Vec::new();
    }
    if p.max_len < 2 || m == 1 {
        return (0..m).map(|i| emit_single(i, &[]).finish()).collect();
    }
    if let Some(outs) = root_in_memory(db, prep, p, limit, miner) {
        return outs;
    }
    // Pair counts first when the triangle is small next to the pairs the transactions hold.
    let tri = super::pairs::tri_len(prep.out_ids.len());
    let pair_volume: u64 = (0..db.len()).into_par_iter().with_min_len(4096).map(|t| {
        let l = (db.offsets[t + 1] - db.offsets[t]) as u64;
        l * l.saturating_sub(1) / 2
    }).sum();
    let use_pairs = tri * 4 <= PAIR_BYTES && (tri as u64) * 4 <= pair_volume && prep.total <= u32::MAX as u64;
    let pairs = use_pairs.then(|| pair_counts(db, prep, &chunks));
    // keep[i]: the codes j < i that may join i (frequent pair, not a perfect extension), as a
    // bit matrix; pe[i]: the perfect extensions of {i} (output ranks).
    let (keep_bits, pe_of): (Vec<u64>, Vec<Vec<u32>>) = match &pairs {
        Some(pc) => {
            let words = m.div_ceil(64);
            let mut bits = vec![0u64; m * words];
            let mut pe = vec![Vec::new(); m];
            for i in 1..m {
                for j in 0..i {
                    let c = pc.get(i as u32, j as u32) as u64;
                    if c == prep.counts[i] {
                        pe[i].push(prep.rank[j]);
                    } else if c >= p.min_count {
                        bits[i * words + j / 64] |= 1 << (j % 64);
                    }
                }
            }
            (bits, pe)
        }
        None => (Vec::new(), vec![Vec::new(); m]),
    };
    let words = m.div_ceil(64);
    let kept = |i: u32, j: u32| -> bool { pairs.is_none() || keep_bits[i as usize * words + j as usize / 64] >> (j % 64) & 1 == 1 };
    // The kept codes of `code[..q]` for `code[q]`, into `out`.
    let kept_before = |code: &[u32], q: usize, out: &mut Vec<u32>| {
        out.clear();
        if pairs.is_none() {
            out.extend_from_slice(&code[..q]);
            return;
        }
        let i = code[q] as usize;
        let row = &keep_bits[i * words..(i + 1) * words];
        out.extend(code[..q].iter().copied().filter(|&j| row[j as usize / 64] >> (j % 64) & 1 == 1));
    };
    let min_tx_len = if pairs.is_some() { 2 } else { 1 };
    if let (2, Some(pc)) = (p.max_len, &pairs) {
        // Only pairs are wanted and all their counts are known.
        return (0..m).into_par_iter().map(|i| {
            let mut em = emit_single(i, &pe_of[i]);
            for j in 0..i as u32 {
                if kept(i as u32, j) {
                    em.prefix.push(prep.rank[j as usize]);
                    em.emit(pc.get(i as u32, j) as u64);
                    em.prefix.pop();
                }
            }
            em.finish()
        }).collect();
    }
    // With pair counts, only codes that join some other code reach a conditional database:
    // look up only those (usually a small part of each transaction) and sort them.
    let paired: Option<IdLookup> = pairs.as_ref().map(|_| {
        let mut has = vec![false; m];
        for i in 1..m {
            for (j, &r) in prep.rank[..i].iter().enumerate() {
                if kept(i as u32, j as u32) || pe_of[i].contains(&r) {
                    has[i] = true;
                    has[j] = true;
                }
            }
        }
        prep.lookup_by_code(|c| if has[c as usize] { c } else { NONE })
    });
    // Mine the delivered databases of codes lo.. (in parallel over codes).
    let mine_batch = |lo: usize, batch: Vec<Delivered>| -> Vec<Itemsets> {
        batch
            .into_par_iter()
            .with_max_len(1)
            .enumerate()
            .map(|(k, mut d)| {
                let i = lo + k;
                SCRATCH.with(|cell| {
                    let scratch = &mut *cell.borrow_mut();
                    let mut pe = pe_of[i].clone();
                    match &pairs {
                        None => reduce(&mut d, weighted, prep, i, p.min_count, &mut pe, scratch),
                        Some(pc) => localize(&mut d, prep, i, pc, &keep_bits[i * words..(i + 1) * words], scratch),
                    }
                    let mut em = emit_single(i, &pe);
                    if !scratch.counts.is_empty() && em.prefix.len() < p.max_len && !limit.stopped() {
                        let cond = Cond { items: &d.items, offs: &d.offs, weights: weighted.then_some(&d.weights[..]), counts: &scratch.counts, orig: &scratch.orig };
                        miner.mine(cond, &mut em, p);
                    }
                    em.finish()
                })
            })
            .collect()
    };
    // With pair counts, all the databases at once in one pass over the input when they fit the
    // budget of a copy of the paired codes (below): no sizing pass, no copy (seed000 at 0.7%:
    // 39.5M entries against 150M input items).
    if let Some(l) = &paired {
        let code_paired = |t: &[u32], out: &mut Vec<u32>| {
            out.clear();
            l.extend_mapped(t, out);
            sort_small(out);
        };
        if let Some(all) = deliver_all(db, &code_paired, m, &kept_before, min_tx_len, paired_budget_of(db)) {
            #[cfg(test)]
            path_taken(0);
            return mine_batch(0, all);
        }
    }
    // Else the databases are delivered from a copy of the input that holds only
    // the paired codes of the transactions with three or more of them (the others add to no
    // count the pairs do not give), when it fits its budget: each delivery batch then reads
    // the copy, not the whole input (Count Distribution's rank shrinks its transactions the
    // same way). The copy holds at most the occurrences of the paired codes.
    // The copy's pass also takes the databases' sizes (entries and transactions, per chunk).
    let add_sizes = |code: &[u32], sz: &mut [(u32, u32)], with: &mut Vec<u32>| {
        for q in 1..code.len() {
            kept_before(code, q, with);
            let l = with.len() as u32;
            if l >= min_tx_len {
                let e = &mut sz[code[q] as usize];
                e.0 += l;
                e.1 += 1;
            }
        }
    };
    let mut budget = budget_of(db);
    let copy = paired.as_ref().and_then(|l| {
        let paired_entries: u64 = (0..m).filter(|&c| l.get(prep.out_ids[prep.rank[c] as usize]) != NONE).map(|c| prep.counts[c]).sum();
        let copy_budget = paired_budget_of(db);
        let copy = (paired_entries as usize * 4 <= copy_budget).then(|| paired_copy(db, l, copy_budget, m, &add_sizes)).flatten()?;
        budget = budget.max(copy_budget.saturating_sub(copy.0.bytes()));
        Some(copy)
    });
    let (copy, sizes, chunks) = match copy {
        Some((c, sizes, ranges)) => (Some(c), Some(sizes), ranges),
        None => (None, None, chunks),
    };
    let src = copy.as_ref().map_or(db, |c| c.as_ref());
    #[cfg(test)]
    path_taken(if copy.is_some() { 1 } else { 2 });
    let code_of = |t: &[u32], out: &mut Vec<u32>| match (&copy, &paired) {
        (Some(_), _) => {
            out.clear();
            out.extend_from_slice(t);
        }
        (None, Some(l)) => {
            out.clear();
            l.extend_mapped(t, out);
            sort_small(out);
        }
        (None, None) => prep.code_tx(t, out),
    };
    // Sizes of every conditional database, per chunk (entries and transactions).
    let sizes: Vec<Vec<(u32, u32)>> = sizes.unwrap_or_else(|| {
        chunks
            .par_iter()
            .map_init(|| (Vec::new(), Vec::new()), |(code, with), &(a, b)| {
                let mut sz = vec![(0u32, 0u32); m];
                for t in a..b {
                    code_of(src.transaction(t), code);
                    add_sizes(code, &mut sz, with);
                }
                sz
            })
            .collect()
    });
    let bytes_of = |i: usize| -> usize {
        let (e, t) = sizes.iter().fold((0usize, 0usize), |acc, s| (acc.0 + s[i].0 as usize, acc.1 + s[i].1 as usize));
        e * 4 + (t + 1) * (4 + if weighted { 8 } else { 0 })
    };
    let mut outs: Vec<Itemsets> = Vec::with_capacity(m);
    let mut lo = 0;
    while lo < m {
        let mut hi = lo;
        let mut bytes = 0;
        while hi < m && (hi == lo || bytes + bytes_of(hi) <= budget) {
            bytes += bytes_of(hi);
            hi += 1;
        }
        let batch = deliver(src, &code_of, &chunks, &sizes, lo, hi, &kept_before, min_tx_len);
        outs.append(&mut mine_batch(lo, batch));
        lo = hi;
    }
    outs
}

/// Occurrence delivery of every code's database in one pass over `db` into growing buffers
/// (each chunk of transactions fills its own, joined per code in transaction order): no pass
/// to size them first. None once they would take more than `budget` bytes.
#[allow(clippy::too_many_arguments)]
fn deliver_all(
    db: BasketsRef<'_>, code_of: &(dyn Fn(&[u32], &mut Vec<u32>) + Sync), m: usize, kept_before: &KeptBefore<'_>,
    min_tx_len: u32, budget: usize,
) -> Option<Vec<Delivered>> {
    let weighted = db.weights.is_some();
    let per_tx = 4 + if weighted { 8 } else { 0 };
    let used = std::sync::atomic::AtomicUsize::new(0);
    let over = || used.load(std::sync::atomic::Ordering::Relaxed) > budget;
    let parts: Vec<Vec<Delivered>> = chunk_ranges(db.len(), 4)
        .into_par_iter()
        .map_init(|| (Vec::new(), Vec::new()), |(code, with), (a, b)| {
            let mut dbs: Vec<Delivered> = (0..m).map(|_| Delivered { items: Vec::new(), offs: Vec::new(), weights: Vec::new() }).collect();
            let (mut bytes, mut counted) = (0usize, 0usize);
            for t in a..b {
                code_of(db.transaction(t), code);
                for q in 1..code.len() {
                    kept_before(code, q, with);
                    if (with.len() as u32) < min_tx_len {
                        continue;
                    }
                    let d = &mut dbs[code[q] as usize];
                    d.items.extend_from_slice(with);
                    d.offs.push(d.items.len() as u32);
                    if weighted {
                        d.weights.push(db.weight(t));
                    }
                    bytes += with.len() * 4 + per_tx;
                }
                if t % 4096 == 0 {
                    used.fetch_add(bytes - counted, std::sync::atomic::Ordering::Relaxed);
                    counted = bytes;
                    if over() {
                        break;
                    }
                }
            }
            used.fetch_add(bytes - counted, std::sync::atomic::Ordering::Relaxed);
            dbs
        })
        .collect();
    if over() {
        return None;
    }
    let mut parts: Vec<std::vec::IntoIter<Delivered>> = parts.into_iter().map(Vec::into_iter).collect();
    Some(
        (0..m)
            .map(|_| {
                let pieces: Vec<Delivered> = parts.iter_mut().map(|p| p.next().expect("one database per code")).collect();
                let (e, t) = pieces.iter().fold((0, 0), |acc, d| (acc.0 + d.items.len(), acc.1 + d.offs.len()));
                let mut out = Delivered { items: Vec::with_capacity(e), offs: Vec::with_capacity(t + 1), weights: Vec::with_capacity(if weighted { t } else { 0 }) };
                out.offs.push(0);
                for d in pieces {
                    let base = out.items.len() as u32;
                    out.items.extend_from_slice(&d.items);
                    out.offs.extend(d.offs.iter().map(|&o| base + o));
                    out.weights.extend_from_slice(&d.weights);
                }
                out
            })
            .collect(),
    )
}

/// The input reduced to the codes of frequent pairs (ascending in each transaction), only
/// transactions with three or more of them, with their weights.
pub(crate) struct PairedCopy {
    offsets: Vec<i64>,
    items: Vec<u32>,
    weights: Option<Vec<u64>>,
}

impl PairedCopy {
    fn as_ref(&self) -> BasketsRef<'_> {
        BasketsRef { offsets: &self.offsets, items: &self.items, weights: self.weights.as_deref() }
    }

    fn bytes(&self) -> usize {
        self.items.len() * 4 + self.offsets.len() * 8 + self.weights.as_ref().map_or(0, |w| w.len() * 8)
    }
}

/// Per chunk of transactions, the entries and transactions each of `m` codes' conditional
/// database takes.
type Sizes = Vec<Vec<(u32, u32)>>;

/// The [`PairedCopy`] of `db` (`paired` maps an id to its code, `NONE` for the others), the
/// sizes `add_sizes` takes of each of its transactions per chunk, and the chunks (ranges of
/// the copy's transactions); None once the copy would take more than `budget` bytes (each
/// thread's share stops there).
#[allow(clippy::type_complexity)]
fn paired_copy(
    db: BasketsRef<'_>, paired: &IdLookup, budget: usize, m: usize, add_sizes: &(dyn Fn(&[u32], &mut [(u32, u32)], &mut Vec<u32>) + Sync),
) -> Option<(PairedCopy, Sizes, Vec<(usize, usize)>)> {
    let weighted = db.weights.is_some();
    let per_tx = 8 + if weighted { 8 } else { 0 };
    let used = std::sync::atomic::AtomicUsize::new(0);
    let over = || used.load(std::sync::atomic::Ordering::Relaxed) > budget;
    let parts: Vec<(Vec<u32>, Vec<u32>, Vec<u64>, Vec<(u32, u32)>)> = chunk_ranges(db.len(), 4)
        .into_par_iter()
        .map_init(|| (Vec::new(), Vec::new()), |(code, with), (a, b)| {
            let (mut items, mut ends, mut w) = (Vec::new(), Vec::new(), Vec::new());
            let mut sz = vec![(0u32, 0u32); m];
            let mut counted = 0;
            for t in a..b {
                code.clear();
                paired.extend_mapped(db.transaction(t), code);
                if code.len() >= 3 {
                    sort_small(code);
                    add_sizes(code, &mut sz, with);
                    items.extend_from_slice(code);
                    ends.push(items.len() as u32);
                    if weighted {
                        w.push(db.weight(t));
                    }
                }
                if t % 4096 == 0 {
                    let bytes = items.len() * 4 + ends.len() * per_tx;
                    used.fetch_add(bytes - counted, std::sync::atomic::Ordering::Relaxed);
                    counted = bytes;
                    if over() {
                        break;
                    }
                }
            }
            used.fetch_add(items.len() * 4 + ends.len() * per_tx - counted, std::sync::atomic::Ordering::Relaxed);
            (items, ends, w, sz)
        })
        .collect();
    if over() {
        return None;
    }
    let n_items = parts.iter().map(|p| p.0.len()).sum();
    let n_tx = parts.iter().map(|p| p.1.len()).sum::<usize>();
    let mut c = PairedCopy { offsets: Vec::with_capacity(n_tx + 1), items: Vec::with_capacity(n_items), weights: weighted.then(|| Vec::with_capacity(n_tx)) };
    c.offsets.push(0);
    let (mut sizes, mut ranges) = (Vec::with_capacity(parts.len()), Vec::with_capacity(parts.len()));
    for (items, ends, w, sz) in parts {
        let first = c.offsets.len() - 1;
        ranges.push((first, first + ends.len()));
        sizes.push(sz);
        let base = c.items.len() as i64;
        c.items.extend_from_slice(&items);
        c.offsets.extend(ends.iter().map(|&e| base + e as i64));
        if let Some(cw) = c.weights.as_mut() {
            cw.extend_from_slice(&w);
        }
    }
    Some((c, sizes, ranges))
}

/// The first level when the recoded input fits the budget: recode once (frequent codes only,
/// transactions with two or more), list every code's occurrences, and project each code's
/// conditional database from them (in parallel over codes). None when it does not fit.
fn root_in_memory<M: Extend>(db: BasketsRef<'_>, prep: &Prep, p: &MineParams, limit: &Limit, miner: &M) -> Option<Vec<Itemsets>> {
    let weighted = db.weights.is_some();
    let budget = budget_of(db);
    let per_tx = 4 + if weighted { 8 } else { 0 };
    // Frequent entries, exactly when unweighted; the input size bounds them otherwise.
    let entries = if weighted { db.items.len() as u64 } else { prep.counts.iter().sum::<u64>() };
    if entries as usize * 8 + db.len() * per_tx > budget {
        return None;
    }
    // Bytes of the copy and its occurrence lists so far; past the budget every chunk stops.
    let used = std::sync::atomic::AtomicUsize::new(0);
    let over = || used.load(std::sync::atomic::Ordering::Relaxed) > budget;
    let parts: Vec<CondBuf> = chunk_ranges(db.len(), 4)
        .into_par_iter()
        .map_init(Vec::new, |code, (a, b)| {
            let mut d = CondBuf { offs: vec![0], weighted, ..Default::default() };
            let mut counted = 0;
            for t in a..b {
                prep.code_tx(db.transaction(t), code);
                if code.len() >= 2 {
                    d.items.extend_from_slice(code);
                    d.offs.push(d.items.len() as u32);
                    if weighted {
                        d.weights.push(db.weight(t));
                    }
                }
                if t % 4096 == 0 {
                    let bytes = d.items.len() * 8 + d.offs.len() * per_tx;
                    used.fetch_add(bytes - counted, std::sync::atomic::Ordering::Relaxed);
                    counted = bytes;
                    if over() {
                        break;
                    }
                }
            }
            used.fetch_add(d.items.len() * 8 + d.offs.len() * per_tx - counted, std::sync::atomic::Ordering::Relaxed);
            d
        })
        .collect();
    if over() {
        return None;
    }
    let mut root = CondBuf { offs: vec![0], weighted, ..Default::default() };
    for d in parts {
        let base = root.items.len() as u32;
        root.items.extend_from_slice(&d.items);
        root.offs.extend(d.offs[1..].iter().map(|o| o + base));
        root.weights.extend_from_slice(&d.weights);
    }
    root.counts.clone_from(&prep.counts);
    root.orig.clone_from(&prep.rank);
    let rc = root.as_cond();
    let (mut start, mut occ) = (Vec::new(), Vec::new());
    occurrences(&rc, prep.m(), &mut start, &mut occ);
    Some(
        (0..prep.m())
            .into_par_iter()
            .with_max_len(1)
            .map(|i| {
                ROOT_SCRATCH.with(|cell| {
                    let (proj, child) = &mut *cell.borrow_mut();
                    let mut em = Emitter::new(p, limit);
                    em.pe.extend_from_slice(&prep.top_pe);
                    em.prefix.push(prep.rank[i]);
                    if em.prefix.len() < p.max_len {
                        project(&rc, i, &occ[start[i] as usize..start[i + 1] as usize], prep.counts[i], p.min_count, &mut em.pe, child, proj);
                    } else {
                        child.counts.clear();
                    }
                    em.emit(prep.counts[i]);
                    if !child.counts.is_empty() && !limit.stopped() {
                        miner.mine(child.as_cond(), &mut em, p);
                    }
                    em.finish()
                })
            })
            .collect(),
    )
}

thread_local! {
    static ROOT_SCRATCH: std::cell::RefCell<(ProjScratch, CondBuf)> = std::cell::RefCell::new(Default::default());
}

/// The codes of `code[..q]` that may join `code[q]`, into the vector.
type KeptBefore<'a> = dyn Fn(&[u32], usize, &mut Vec<u32>) + Sync + 'a;

/// One first-level conditional database as delivered (codes before reduction).
pub(crate) struct Delivered {
    pub items: Vec<u32>,
    pub offs: Vec<u32>,
    pub weights: Vec<u64>,
}

/// Occurrence delivery of codes `lo..hi`: one pass over the transactions, every chunk writing
/// its share of each conditional database into its exactly sized place (transaction order kept).
#[allow(clippy::too_many_arguments)]
fn deliver(
    db: BasketsRef<'_>, code_of: &(dyn Fn(&[u32], &mut Vec<u32>) + Sync), chunks: &[(usize, usize)], sizes: &[Vec<(u32, u32)>], lo: usize, hi: usize,
    kept_before: &KeptBefore<'_>, min_tx_len: u32,
) -> Vec<Delivered> {
    let weighted = db.weights.is_some();
    let mut out: Vec<Delivered> = (lo..hi)
        .map(|i| {
            let (e, t) = sizes.iter().fold((0usize, 0usize), |acc, s| (acc.0 + s[i].0 as usize, acc.1 + s[i].1 as usize));
            Delivered { items: vec![0; e], offs: vec![0; t + 1], weights: if weighted { vec![0; t] } else { Vec::new() } }
        })
        .collect();
    // Cut every database into one disjoint piece per chunk.
    type Piece<'a> = (&'a mut [u32], &'a mut [u32], &'a mut [u64], u32);
    let mut per_chunk: Vec<Vec<Piece<'_>>> = (0..chunks.len()).map(|_| Vec::with_capacity(hi - lo)).collect();
    for (k, d) in out.iter_mut().enumerate() {
        let i = lo + k;
        let (mut items, offs) = (&mut d.items[..], &mut d.offs[1..]);
        let mut offs = offs;
        let mut w = &mut d.weights[..];
        let mut base = 0u32;
        for (c, s) in sizes.iter().enumerate() {
            let (e, t) = (s[i].0 as usize, s[i].1 as usize);
            let (a, rest) = std::mem::take(&mut items).split_at_mut(e);
            items = rest;
            let (b, rest) = std::mem::take(&mut offs).split_at_mut(t);
            offs = rest;
            let (x, rest) = std::mem::take(&mut w).split_at_mut(if weighted { t } else { 0 });
            w = rest;
            per_chunk[c].push((a, b, x, base));
            base += e as u32;
        }
    }
    per_chunk.into_par_iter().zip(chunks.par_iter()).for_each_init(|| (Vec::new(), Vec::new()), |(code, with), (mut pieces, &(a, b))| {
        let mut cur = vec![(0usize, 0usize); hi - lo];
        for t in a..b {
            code_of(db.transaction(t), code);
            for q in 1..code.len() {
                let i = code[q] as usize;
                if i < lo || i >= hi {
                    continue;
                }
                let k = i - lo;
                let (items, offs, w, base) = &mut pieces[k];
                let (ref mut e, ref mut n) = cur[k];
                kept_before(code, q, with);
                if (with.len() as u32) < min_tx_len {
                    continue;
                }
                items[*e..*e + with.len()].copy_from_slice(with);
                *e += with.len();
                offs[*n] = *base + *e as u32;
                if let Some(wt) = db.weights {
                    w[*n] = wt[t];
                }
                *n += 1;
            }
        }
        pieces.clear();
    });
    out
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

/// Per-thread scratch of the first level: counters and local codes by global code (zero /
/// `NONE` between uses: only touched entries are reset), and the reduced database's counts
/// and output ranks.
#[derive(Default)]
pub(crate) struct Scratch {
    cnt: Vec<u64>,
    lc: Vec<u32>,
    touched: Vec<u32>,
    pub counts: Vec<u64>,
    pub orig: Vec<u32>,
}

impl Scratch {
    fn ready(&mut self, m: usize) {
        if self.cnt.len() < m {
            self.cnt.resize(m, 0);
            self.lc.resize(m, NONE);
        }
        self.counts.clear();
        self.orig.clear();
    }
}

/// Unfiltered database of code `i` (global codes < i): count, set perfect extensions aside
/// (into `pe`), keep the frequent codes (recoded to local codes, ascending), compact in
/// place and drop transactions left empty. Counts and output ranks go to `s`.
fn reduce(d: &mut Delivered, weighted: bool, prep: &Prep, i: usize, min_count: u64, pe: &mut Vec<u32>, s: &mut Scratch) {
    s.ready(prep.m());
    let n = d.offs.len() - 1;
    s.touched.clear();
    for t in 0..n {
        let w = if weighted { d.weights[t] } else { 1 };
        for &j in &d.items[d.offs[t] as usize..d.offs[t + 1] as usize] {
            let c = &mut s.cnt[j as usize];
            if *c == 0 {
                s.touched.push(j);
            }
            *c += w;
        }
    }
    sort_touched(&mut s.touched, i);
    for &j in &s.touched {
        let c = s.cnt[j as usize];
        if c == prep.counts[i] {
            pe.push(prep.rank[j as usize]);
        } else if c >= min_count {
            s.lc[j as usize] = s.counts.len() as u32;
            s.counts.push(c);
            s.orig.push(prep.rank[j as usize]);
        }
    }
    let (mut e, mut nt) = (0usize, 0usize);
    let mut from = 0usize; // original start of transaction t (offs is overwritten behind us)
    for t in 0..n {
        let start = e;
        let to = d.offs[t + 1] as usize;
        for x in std::mem::replace(&mut from, to)..to {
            let c = s.lc[d.items[x] as usize];
            if c != NONE {
                d.items[e] = c;
                e += 1;
            }
        }
        if e > start {
            if weighted {
                d.weights[nt] = d.weights[t];
            }
            nt += 1;
            d.offs[nt] = e as u32;
        }
    }
    d.items.truncate(e);
    d.offs.truncate(nt + 1);
    if weighted {
        d.weights.truncate(nt);
    }
    for &j in &s.touched {
        s.cnt[j as usize] = 0;
        s.lc[j as usize] = NONE;
    }
}

/// Sort codes known to be distinct and below `bound`: a scan of a bitmap when they are many
/// next to the bound, a comparison sort otherwise.
pub(crate) fn sort_touched(v: &mut Vec<u32>, bound: usize) {
    if v.len() < 64 || v.len() * 16 < bound {
        v.sort_unstable();
        return;
    }
    let mut bits = vec![0u64; bound.div_ceil(64)];
    for &x in v.iter() {
        bits[x as usize / 64] |= 1 << (x % 64);
    }
    v.clear();
    for (w, &b) in bits.iter().enumerate() {
        let mut b = b;
        while b != 0 {
            v.push((w * 64) as u32 + b.trailing_zeros());
            b &= b - 1;
        }
    }
}

/// Pair-filtered database of code `i` (only kept codes, `row` its bits): local codes are the
/// ranks of the kept codes, counts are the pair counts.
fn localize(d: &mut Delivered, prep: &Prep, i: usize, pc: &Pairs, row: &[u64], s: &mut Scratch) {
    s.ready(prep.m());
    s.touched.clear();
    for (w, &bits) in row.iter().enumerate() {
        let mut b = bits;
        while b != 0 {
            let j = w * 64 + b.trailing_zeros() as usize;
            b &= b - 1;
            s.lc[j] = s.counts.len() as u32;
            s.counts.push(pc.get(i as u32, j as u32) as u64);
            s.orig.push(prep.rank[j]);
            s.touched.push(j as u32);
        }
    }
    for x in d.items.iter_mut() {
        *x = s.lc[*x as usize];
    }
    for &j in &s.touched {
        s.lc[j as usize] = NONE;
    }
}

/// All pair counts of frequent codes in one pass: unweighted, by the shared triangle kernel
/// on ids recoded to output ranks (which keep the ids' order: no sort per transaction);
/// weighted, per-thread triangles over codes.
fn pair_counts(db: BasketsRef<'_>, prep: &Prep, chunks: &[(usize, usize)]) -> Pairs {
    if db.weights.is_none() {
        let n = prep.out_ids.len();
        let rank_of = prep.lookup_by_code(|c| prep.rank[c as usize]);
        return Pairs { counts: super::pairs::count_pairs_streamed(db, &rank_of, n), n, pos: prep.rank.clone() };
    }
    let m = prep.m();
    let tri = super::pairs::tri_len(m);
    let counts = chunks
        .par_iter()
        .fold(
            || (vec![0u32; tri], Vec::new()),
            |(mut acc, mut code), &(a, b)| {
                for t in a..b {
                    prep.code_tx(db.transaction(t), &mut code);
                    let w = db.weight(t) as u32;
                    for q in 1..code.len() {
                        let i = code[q] as usize;
                        for &j in &code[..q] {
                            acc[super::pairs::tri(m, j as usize, i)] += w;
                        }
                    }
                }
                (acc, code)
            },
        )
        .map(|x| x.0)
        .reduce(|| vec![0u32; tri], add_into);
    Pairs { counts, n: m, pos: Vec::new() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idmap_and_sparse_counts() {
        let mut h = IdMap::new(3);
        for (k, v) in [(u32::MAX, 1), (0, 2), (7, 3)] {
            h.insert(k, v);
        }
        assert_eq!((h.get(u32::MAX), h.get(0), h.get(7), h.get(8)), (1, 2, 3, NONE));
        let b = crate::Baskets::from_lists([vec![1u32, 4_294_967_295], vec![4_294_967_295], vec![3_000_000_000]]);
        let (ids, counts) = count_items(BasketsRef::from_baskets(&b));
        assert_eq!(ids, vec![1, 3_000_000_000, 4_294_967_295]);
        assert_eq!(counts, vec![1, 1, 2]);
        let prep = Prep::new(BasketsRef::from_baskets(&b), 1);
        assert_eq!(prep.lookup.get(4_294_967_295), 0);
        assert_eq!(prep.out_ids, ids);
    }
}
