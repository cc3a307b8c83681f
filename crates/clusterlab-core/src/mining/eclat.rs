//! Eclat: depth-first search over equivalence classes with vertical transaction sets.
//!
//! The vertical form is chosen by measurement of the data: bitsets (AND + popcount over
//! words) when the frequent items cover at least 1/32 of the transactions on average (dense
//! data such as chess and mushroom, where a bitset is smaller than a tid-list), sorted
//! tid-lists merged otherwise (sparse data such as T10I4D100K). Items are ordered by
//! ascending frequency so classes shrink fast. The first level runs in parallel over items.
//! Weighted databases are handed to FP-growth.

use super::itemsets::{top_perfect, Emitter, Itemsets, MineParams};
use super::BasketsRef;
use rayon::prelude::*;

/// A class: items (codes, ascending), their counts and their transaction sets, one per item.
struct Class<S> {
    items: Vec<u32>,
    counts: Vec<u64>,
    sets: S,
}

/// Bitsets, `words` u64 per item.
struct Bits {
    words: usize,
    data: Vec<u64>,
}

impl Bits {
    fn get(&self, i: usize) -> &[u64] {
        &self.data[i * self.words..(i + 1) * self.words]
    }
}

/// Tid-lists in CSR form.
struct Lists {
    offsets: Vec<usize>,
    data: Vec<u32>,
}

impl Lists {
    fn get(&self, i: usize) -> &[u32] {
        &self.data[self.offsets[i]..self.offsets[i + 1]]
    }
}

/// What every level needs: item codes -> original ids, the global pair counts (codes a < b
/// at a * m + b) and the minimum count.
struct Ctx<'a> {
    orig: &'a [u32],
    pairs: Option<&'a [u32]>,
    m: usize,
    min_count: u64,
}

impl Ctx<'_> {
    /// Whether {a, b} (codes, a < b) can still extend the prefix: a candidate holding an
    /// infrequent pair is infrequent (Apriori pruning from the pair counts). `exact`: the prefix
    /// is {a} itself, so the pair count is the candidate's count: a perfect extension goes to
    /// `pe` and nothing needs intersecting.
    #[inline]
    fn settle(&self, a: u32, b: u32, exact_count: Option<u64>, pe: &mut Vec<u32>) -> bool {
        if let Some(pm) = self.pairs {
            let k = pm[a as usize * self.m + b as usize] as u64;
            if k < self.min_count {
                return true;
            }
            if exact_count == Some(k) {
                pe.push(self.orig[b as usize]);
                return true;
            }
        }
        false
    }
}

trait Vertical: Sized {
    /// Intersections of set i with every later set of the class, frequent ones only; items
    /// whose intersection keeps all of set i (perfect extensions) go to `pe` instead.
    /// `first`: the class is the first level (its prefix is empty).
    fn extend(c: &Class<Self>, i: usize, ctx: &Ctx<'_>, first: bool, pe: &mut Vec<u32>) -> Class<Self>;
}

impl Vertical for Bits {
    fn extend(c: &Class<Bits>, i: usize, ctx: &Ctx<'_>, first: bool, pe: &mut Vec<u32>) -> Class<Bits> {
        let w = c.sets.words;
        let rest = c.items.len() - i - 1;
        let mut out = Class { items: Vec::with_capacity(rest), counts: Vec::with_capacity(rest), sets: Bits { words: w, data: Vec::with_capacity(rest * w) } };
        let a = c.sets.get(i);
        let exact = first.then_some(c.counts[i]);
        for j in i + 1..c.items.len() {
            if ctx.settle(c.items[i], c.items[j], exact, pe) {
                continue;
            }
            let b = c.sets.get(j);
            let s = out.sets.data.len();
            let mut n = 0u64;
            out.sets.data.extend(a.iter().zip(b).map(|(x, y)| {
                let z = x & y;
                n += z.count_ones() as u64;
                z
            }));
            if n == c.counts[i] {
                pe.push(ctx.orig[c.items[j] as usize]);
                out.sets.data.truncate(s);
            } else if n >= ctx.min_count {
                out.items.push(c.items[j]);
                out.counts.push(n);
            } else {
                out.sets.data.truncate(s);
            }
        }
        out
    }
}

impl Vertical for Lists {
    fn extend(c: &Class<Lists>, i: usize, ctx: &Ctx<'_>, first: bool, pe: &mut Vec<u32>) -> Class<Lists> {
        let rest = c.items.len() - i - 1;
        let a = c.sets.get(i);
        let mut out = Class { items: Vec::with_capacity(rest), counts: Vec::with_capacity(rest), sets: Lists { offsets: vec![0], data: Vec::new() } };
        let exact = first.then_some(c.counts[i]);
        let need = ctx.min_count as usize;
        for j in i + 1..c.items.len() {
            if ctx.settle(c.items[i], c.items[j], exact, pe) {
                continue;
            }
            let b = c.sets.get(j);
            let s = out.sets.data.len();
            let (mut x, mut y) = (0, 0);
            while x < a.len() && y < b.len() {
                // Stop as soon as the rest cannot reach the minimum count.
                if out.sets.data.len() - s + (a.len() - x).min(b.len() - y) < need {
                    break;
                }
                let (u, v) = (a[x], b[y]);
                if u == v {
                    out.sets.data.push(u);
                }
                x += (u <= v) as usize;
                y += (v <= u) as usize;
            }
            let n = (out.sets.data.len() - s) as u64;
            if n == c.counts[i] {
                pe.push(ctx.orig[c.items[j] as usize]);
                out.sets.data.truncate(s);
            } else if n >= ctx.min_count {
                out.items.push(c.items[j]);
                out.counts.push(n);
                out.sets.offsets.push(out.sets.data.len());
            } else {
                out.sets.data.truncate(s);
            }
        }
        out
    }
}

fn branch<S: Vertical>(c: &Class<S>, i: usize, ctx: &Ctx<'_>, first: bool, p: &MineParams, em: &mut Emitter) {
    em.prefix.push(ctx.orig[c.items[i] as usize]);
    let pe_len = em.pe.len();
    let sub = (em.prefix.len() < p.max_len && i + 1 < c.items.len()).then(|| S::extend(c, i, ctx, first, &mut em.pe));
    em.emit(c.counts[i]);
    if let Some(sub) = sub {
        for k in 0..sub.items.len() {
            branch(&sub, k, ctx, false, p, em);
        }
    }
    em.pe.truncate(pe_len);
    em.prefix.pop();
}

/// Mine the first-level class (items are codes 0..m, ascending).
fn run<S: Vertical + Sync>(c: &Class<S>, orig: &[u32], p: &MineParams, top_pe: &[u32], top_out: Itemsets, pairs: Option<Vec<u32>>) -> Itemsets {
    let ctx = Ctx { orig, pairs: pairs.as_deref(), m: c.items.len(), min_count: p.min_count };
    let mut outs: Vec<Itemsets> = (0..c.items.len())
        .into_par_iter()
        .with_max_len(1)
        .map(|i| {
            let mut em = Emitter::new(p);
            em.pe = top_pe.to_vec();
            branch(c, i, &ctx, true, p, &mut em);
            em.out
        })
        .collect();
    outs.push(top_out);
    Itemsets::concat(outs).canonicalize()
}

/// Support counts of all pairs of frequent items (codes a < b at a * m + b) in one pass over
/// the transactions, when the m x m matrix is small; the first level then intersects only
/// frequent pairs (most candidate pairs of sparse data are infrequent).
fn pair_counts(db: BasketsRef<'_>, code: &[u32], m: usize) -> Option<Vec<u32>> {
    if m > 2048 || db.len() > u32::MAX as usize {
        return None;
    }
    let threads = rayon::current_num_threads();
    let chunk = db.len().div_ceil(threads * 2).max(4096);
    Some(
        (0..db.len().div_ceil(chunk))
            .into_par_iter()
            .map(|c| {
                let mut mat = vec![0u32; m * m];
                let mut s: Vec<u32> = Vec::new();
                for t in c * chunk..((c + 1) * chunk).min(db.len()) {
                    s.clear();
                    s.extend(db.transaction(t).iter().map(|&i| code[i as usize]).filter(|&x| x != u32::MAX));
                    s.sort_unstable();
                    for (k, &a) in s.iter().enumerate() {
                        let row = &mut mat[a as usize * m..a as usize * m + m];
                        for &b in &s[k + 1..] {
                            row[b as usize] += 1;
                        }
                    }
                }
                mat
            })
            .reduce(|| vec![0u32; m * m], |mut a, b| {
                for (x, y) in a.iter_mut().zip(b) {
                    *x += y;
                }
                a
            }),
    )
}

/// All frequent itemsets of `db` in canonical order.
pub fn eclat(db: BasketsRef<'_>, p: &MineParams) -> Itemsets {
    if db.weights.is_some() {
        return super::fpgrowth::fpgrowth(db, p);
    }
    if p.max_len == 0 {
        return Itemsets::new();
    }
    let counts = db.item_counts();
    let n = db.len();
    let (top_pe, top_out) = top_perfect(&counts, n as u64, p);
    let mut freq: Vec<u32> = (0..counts.len() as u32).filter(|&i| counts[i as usize] >= p.min_count && counts[i as usize] != n as u64).collect();
    freq.sort_by(|&a, &b| counts[a as usize].cmp(&counts[b as usize]).then(a.cmp(&b)));
    if freq.is_empty() {
        return top_out.canonicalize();
    }
    let mut code = vec![u32::MAX; counts.len()];
    for (k, &i) in freq.iter().enumerate() {
        code[i as usize] = k as u32;
    }
    let total: u64 = freq.iter().map(|&i| counts[i as usize]).sum();
    let fcounts: Vec<u64> = freq.iter().map(|&i| counts[i as usize]).collect();
    let pairs = pair_counts(db, &code, freq.len());
    let codes: Vec<u32> = (0..freq.len() as u32).collect();
    if total.saturating_mul(32) >= (freq.len() as u64) * (n as u64) {
        let words = n.div_ceil(64);
        let mut data = vec![0u64; freq.len() * words];
        for t in 0..n {
            for &it in db.transaction(t) {
                let c = code[it as usize];
                if c != u32::MAX {
                    data[c as usize * words + t / 64] |= 1u64 << (t % 64);
                }
            }
        }
        run(&Class { items: codes, counts: fcounts, sets: Bits { words, data } }, &freq, p, &top_pe, top_out, pairs)
    } else {
        let mut offsets = vec![0usize; freq.len() + 1];
        for (k, &c) in fcounts.iter().enumerate() {
            offsets[k + 1] = offsets[k] + c as usize;
        }
        let mut fill = offsets.clone();
        let mut data = vec![0u32; offsets[freq.len()]];
        for t in 0..n {
            for &it in db.transaction(t) {
                let c = code[it as usize];
                if c != u32::MAX {
                    data[fill[c as usize]] = t as u32;
                    fill[c as usize] += 1;
                }
            }
        }
        run(&Class { items: codes, counts: fcounts, sets: Lists { offsets, data } }, &freq, p, &top_pe, top_out, pairs)
    }
}
