//! Eclat: depth-first search over equivalence classes with vertical transaction sets.
//!
//! Each first-level item's conditional database (see [`super::prep`]) is turned vertical:
//! bitsets (AND + popcount over words) when its items cover at least 1/32 of its
//! transactions on average (dense data such as chess and mushroom, where a bitset is smaller
//! than a tid-list), sorted tid-lists merged otherwise. Items are ordered by ascending
//! frequency so classes shrink fast. Weighted databases are mined by occurrence delivery.

use super::itemsets::{Emitter, MineParams};
use super::prep::{Cond, Extend};

/// A class: items (local codes), their counts and their transaction sets, one per item.
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

/// Local code -> output rank, and the minimum count.
struct Ctx<'a> {
    orig: &'a [u32],
    min_count: u64,
}

trait Vertical: Sized {
    /// Intersections of set i with every later set of the class, frequent ones only; items
    /// whose intersection keeps all of set i (perfect extensions) go to `pe` instead.
    fn extend(c: &Class<Self>, i: usize, ctx: &Ctx<'_>, pe: &mut Vec<u32>) -> Class<Self>;
}

impl Vertical for Bits {
    fn extend(c: &Class<Bits>, i: usize, ctx: &Ctx<'_>, pe: &mut Vec<u32>) -> Class<Bits> {
        let w = c.sets.words;
        let rest = c.items.len() - i - 1;
        let mut out = Class { items: Vec::with_capacity(rest), counts: Vec::with_capacity(rest), sets: Bits { words: w, data: Vec::with_capacity(rest * w) } };
        let a = c.sets.get(i);
        for j in i + 1..c.items.len() {
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
    fn extend(c: &Class<Lists>, i: usize, ctx: &Ctx<'_>, pe: &mut Vec<u32>) -> Class<Lists> {
        let rest = c.items.len() - i - 1;
        let a = c.sets.get(i);
        let mut out = Class { items: Vec::with_capacity(rest), counts: Vec::with_capacity(rest), sets: Lists { offsets: vec![0], data: Vec::new() } };
        let need = ctx.min_count as usize;
        for j in i + 1..c.items.len() {
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

fn branch<S: Vertical>(c: &Class<S>, i: usize, ctx: &Ctx<'_>, p: &MineParams, em: &mut Emitter<'_>) {
    if em.limit.stopped() {
        return;
    }
    em.prefix.push(ctx.orig[c.items[i] as usize]);
    let pe_len = em.pe.len();
    let sub = (em.prefix.len() < p.max_len && i + 1 < c.items.len()).then(|| S::extend(c, i, ctx, &mut em.pe));
    em.emit(c.counts[i]);
    if let Some(sub) = sub {
        for k in 0..sub.items.len() {
            branch(&sub, k, ctx, p, em);
        }
    }
    em.pe.truncate(pe_len);
    em.prefix.pop();
}

/// The Eclat miner of a first-level conditional database.
pub(crate) struct Eclat;

impl Extend for Eclat {
    fn mine(&self, c: Cond<'_>, em: &mut Emitter<'_>, p: &MineParams) {
        if c.weights.is_some() {
            return super::lcm::Lcm.mine(c, em, p);
        }
        let (k, n) = (c.k(), c.n_tx());
        // Class order: ascending count. Local codes descend in frequency, so ties go by code
        // descending.
        let mut items: Vec<u32> = (0..k as u32).collect();
        items.sort_by(|&a, &b| c.counts[a as usize].cmp(&c.counts[b as usize]).then(b.cmp(&a)));
        let mut pos = vec![0u32; k];
        for (r, &x) in items.iter().enumerate() {
            pos[x as usize] = r as u32;
        }
        let counts: Vec<u64> = items.iter().map(|&x| c.counts[x as usize]).collect();
        let ctx = Ctx { orig: c.orig, min_count: p.min_count };
        let entries = c.items.len();
        if (entries as u64).saturating_mul(32) >= (k as u64) * (n as u64) {
            let words = n.div_ceil(64);
            let mut data = vec![0u64; k * words];
            for t in 0..n {
                for &x in c.tx(t) {
                    data[pos[x as usize] as usize * words + t / 64] |= 1u64 << (t % 64);
                }
            }
            let class = Class { items, counts, sets: Bits { words, data } };
            for i in 0..k {
                branch(&class, i, &ctx, p, em);
            }
        } else {
            // Tid-list lengths can fall short of the counts (pair-filtered databases leave
            // out transactions with a single item): size them from the data.
            let mut offsets = vec![0usize; k + 1];
            for &x in c.items {
                offsets[pos[x as usize] as usize + 1] += 1;
            }
            for r in 0..k {
                offsets[r + 1] += offsets[r];
            }
            let mut fill = offsets.clone();
            let mut data = vec![0u32; entries];
            for t in 0..n {
                for &x in c.tx(t) {
                    let r = pos[x as usize] as usize;
                    data[fill[r]] = t as u32;
                    fill[r] += 1;
                }
            }
            let class = Class { items, counts, sets: Lists { offsets, data } };
            for i in 0..k {
                branch(&class, i, &ctx, p, em);
            }
        }
    }
}
