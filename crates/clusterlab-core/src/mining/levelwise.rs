//! Level-wise vertical mining: the pass structure of Count Distribution on one rank, for
//! large sparse inputs.
//!
//! Pass 1 counts the items; pass 2 counts every pair of frequent items in a triangle,
//! straight from the ids (the recoded input never exists whole); then the transactions are
//! read once more to build the transaction-id lists of the items of frequent pairs, only over
//! transactions holding three or more of them (the others support no longer itemset). From
//! there each level's candidates ([`super::apriori::apriori_gen`]) are counted by
//! intersecting the lists of their two generating subsets (Eclat's step, breadth first), and
//! only the lists of the frequent ones are kept. The input is read three times in all, where
//! the depth-first first level reads it once per batch of conditional databases that fits
//! the memory budget; the extra memory is the lists of two levels (the first: the occurrences
//! of the paired items); a level whose lists outgrow the input (dense data) hands the run back
//! to the depth-first miners, which bound their memory by the budget.

use super::itemsets::{Itemsets, Limit, MineParams};
use super::{apriori, pairs, prep, BasketsRef};
use crate::hpa::vertical::intersect;
use rayon::prelude::*;

/// Itemsets of one length `k` (flat, lexicographic, in frequent ranks) and their tid lists.
struct Level {
    k: usize,
    items: Vec<u32>,
    lists: Vec<Vec<u32>>,
}

impl Level {
    fn len(&self) -> usize {
        self.lists.len()
    }

    fn row(&self, i: usize) -> &[u32] {
        &self.items[i * self.k..(i + 1) * self.k]
    }

    fn tids(&self) -> usize {
        self.lists.iter().map(Vec::len).sum()
    }

    /// Position of `set` (k items) among the rows (binary search: rows are lexicographic).
    fn find(&self, set: &[u32]) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.row(mid).cmp(set) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    /// The lists of the (k+1)-candidates `cands` (flat, lexicographic, both generators
    /// present): the intersection of the lists of `c[..k]` and of `c[..k-1] + c[k]`.
    fn extend(&self, cands: &[u32]) -> Level {
        let (k, k1) = (self.k, self.k + 1);
        let lists = cands
            .par_chunks(k1)
            .with_min_len(8)
            .map_init(|| vec![0u32; k], |key, c| {
                key[..k - 1].copy_from_slice(&c[..k - 1]);
                key[k - 1] = c[k];
                let a = self.find(&c[..k]).expect("generator of a candidate");
                let b = self.find(key).expect("generator of a candidate");
                let mut out = Vec::new();
                intersect(&self.lists[a], &self.lists[b], &mut out);
                out
            })
            .collect();
        Level { k: k1, items: cands.to_vec(), lists }
    }

    /// Keep the rows `keep` marks.
    fn retain(self, keep: &[bool]) -> Level {
        let mut items = Vec::new();
        let mut lists = Vec::new();
        for (i, l) in self.lists.into_iter().enumerate() {
            if keep[i] {
                items.extend_from_slice(&self.items[i * self.k..(i + 1) * self.k]);
                lists.push(l);
            }
        }
        Level { k: self.k, items, lists }
    }
}


/// Bytes the pair triangle may take (one per thread).
const PAIR_BYTES: usize = 32 << 20;

/// Lists of the paired items (`code` maps an id to its rank among the `m` frequent items, or
/// `NONE`) over the transactions holding three or more of them; transaction t has id t. One
/// read: each thread's share of the transactions fills its own lists, joined in order.
fn item_lists(db: BasketsRef<'_>, code: &prep::IdLookup, m: usize) -> Level {
    let parts: Vec<Vec<Vec<u32>>> = prep::chunk_ranges(db.len(), 1)
        .into_par_iter()
        .map(|(a, b)| {
            let mut lists = vec![Vec::new(); m];
            let mut buf = Vec::new();
            for t in a..b {
                buf.clear();
                code.extend_mapped(db.transaction(t), &mut buf);
                if buf.len() >= 3 {
                    for &x in &buf {
                        lists[x as usize].push(t as u32);
                    }
                }
            }
            lists
        })
        .collect();
    let mut parts = parts.into_iter();
    let mut lists = parts.next().unwrap_or_else(|| vec![Vec::new(); m]);
    for p in parts {
        for (l, x) in lists.iter_mut().zip(p) {
            l.extend_from_slice(&x);
        }
    }
    Level { k: 1, items: (0..m as u32).collect(), lists }
}

/// All frequent itemsets (canonical, in item ids), level by level (see the module docs), or
/// None when the input is weighted, its pair triangle too large, or `only_large` is set and
/// the recoded input fits the memory budget (the depth-first miners then copy it once).
pub(crate) fn levelwise(db: BasketsRef<'_>, p: &MineParams, limit: &Limit, only_large: bool) -> Option<Itemsets> {
    if db.weights.is_some() || db.len() >= u32::MAX as usize {
        return None;
    }
    let (ids, counts) = prep::count_items(db);
    let keep: Vec<usize> = (0..ids.len()).filter(|&k| counts[k] >= p.min_count).collect();
    let m = keep.len();
    let entries: u64 = keep.iter().map(|&k| counts[k]).sum();
    if pairs::tri_len(m) * 4 > PAIR_BYTES || (only_large && entries as usize * 8 + db.len() * 4 <= prep::budget_of(db)) {
        return None;
    }
    // Charged to the run's limit only once the levels are done (a fallback mines again).
    let own = Limit::new(limit.max());
    let out = mine_levels(db, p, &own, &ids, &counts, &keep)?;
    if own.stopped() {
        limit.stop_now();
    }
    limit.charge(own.emitted());
    Some(out)
}

/// The levels, or None once a level's lists would take more than the input's items (or 4 MiB; dense
/// data: the depth-first miners bound their memory by the budget instead).
fn mine_levels(db: BasketsRef<'_>, p: &MineParams, limit: &Limit, ids: &[u32], counts: &[u64], keep: &[usize]) -> Option<Itemsets> {
    let too_large = |l: &Level| l.tids() > db.items.len().max(1 << 20);
    let freq_ids: Vec<u32> = keep.iter().map(|&k| ids[k]).collect();
    let m = freq_ids.len();
    let mut out = Itemsets::new();
    let emit = |level: &Itemsets, k: usize, out: &mut Itemsets| {
        if k >= p.min_len && k <= p.max_len {
            out.append(level);
        }
        limit.charge(level.len() as u64);
    };
    let mut singles = Itemsets::new();
    for (r, &k) in keep.iter().enumerate() {
        singles.push(&[r as u32], counts[k]);
    }
    emit(&singles, 1, &mut out);
    if m < 2 || p.max_len < 2 || limit.stopped() {
        return Some(to_ids(out, &freq_ids));
    }
    let tri = pairs::count_pairs_streamed(db, &prep::rank_lookup(&freq_ids), m);
    let mut level = Itemsets::new();
    for a in 0..m {
        for b in a + 1..m {
            let c = tri[pairs::tri(m, a, b)] as u64;
            if c >= p.min_count {
                level.push(&[a as u32, b as u32], c);
            }
        }
    }
    drop(tri);
    emit(&level, 2, &mut out);
    if level.len() < 2 || p.max_len < 3 || limit.stopped() {
        return Some(to_ids(out, &freq_ids));
    }
    let mut in_pair = vec![false; m];
    for &x in &level.items {
        in_pair[x as usize] = true;
    }
    let pair_ids: Vec<u32> = (0..m).filter(|&r| in_pair[r]).map(|r| freq_ids[r]).collect();
    let up: Vec<u32> = (0..m as u32).filter(|&r| in_pair[r as usize]).collect();
    let items = item_lists(db, &prep::value_lookup(&pair_ids, |c| up[c]), m);
    if too_large(&items) {
        return None;
    }
    let mut lists = items.extend(&level.items);
    drop(items);
    let mut k = 3;
    loop {
        let cands = apriori::apriori_gen(&level).expect("levels are canonical");
        if cands.is_empty() {
            break;
        }
        let next = lists.extend(&cands.items);
        if too_large(&next) {
            return None;
        }
        let keep: Vec<bool> = next.lists.iter().map(|l| l.len() as u64 >= p.min_count).collect();
        let idx: Vec<u32> = (0..keep.len() as u32).filter(|&i| keep[i as usize]).collect();
        let mut found = cands.gather(&idx);
        for (j, &i) in idx.iter().enumerate() {
            found.counts[j] = next.lists[i as usize].len() as u64;
        }
        emit(&found, k, &mut out);
        if found.len() < 2 || k >= p.max_len || limit.stopped() {
            break;
        }
        lists = next.retain(&keep);
        level = found;
        k += 1;
    }
    Some(to_ids(out, &freq_ids))
}

fn to_ids(mut s: Itemsets, ids: &[u32]) -> Itemsets {
    s.items.par_iter_mut().with_min_len(1 << 14).for_each(|x| *x = ids[*x as usize]);
    s
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn agrees_with_brute_force_and_length_limits() {
        for seed in 0..25u64 {
            let b = random_baskets(seed, 60 + 7 * seed as usize, 9 + (seed % 6) as u32, 10);
            let db = BasketsRef::from_baskets(&b);
            for min_count in [1u64, 2, 4, 9] {
                let bf = brute_force(&b, min_count);
                let got = levelwise(db, &MineParams::new(min_count), &Limit::unlimited(), false).unwrap();
                assert_eq!(got, bf, "seed {seed} min {min_count}");
                assert!(got.is_canonical());
                let q = MineParams { min_count, min_len: 2, max_len: 3 };
                assert_eq!(levelwise(db, &q, &Limit::unlimited(), false).unwrap(), bf.clone().filter_len(2, 3));
            }
        }
    }
}
