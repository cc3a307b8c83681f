//! Level-wise vertical mining: the pass structure of Count Distribution on one rank, for
//! large sparse inputs.
//!
//! Pass 1 counts the items; pass 2 counts every pair of frequent items in a triangle,
//! straight from the ids (the recoded input never exists whole); then the transactions are
//! read once more to build the transaction-id lists of the items of frequent pairs, only over
//! transactions holding three or more of them (the others support no longer itemset). From
//! there each level's candidates ([`super::apriori::apriori_gen`]) are counted by
//! intersecting the lists of their two generating subsets (Eclat's step, breadth first), and
//! only the lists of the frequent ones are kept. The input is read four times in all, where
//! the depth-first first level reads it once per batch of conditional databases that fits
//! the memory budget; the extra memory is the lists of two levels (at most the occurrences of
//! the paired items).

use super::itemsets::{Itemsets, Limit, MineParams};
use super::{apriori, pairs, prep, BasketsRef};
use rayon::prelude::*;

/// Itemsets of one length `k` (flat, lexicographic, in frequent ranks) and their tid lists.
struct Level {
    k: usize,
    items: Vec<u32>,
    starts: Vec<usize>,
    tids: Vec<u32>,
}

impl Level {
    fn len(&self) -> usize {
        self.starts.len() - 1
    }

    fn list(&self, i: usize) -> &[u32] {
        &self.tids[self.starts[i]..self.starts[i + 1]]
    }

    fn row(&self, i: usize) -> &[u32] {
        &self.items[i * self.k..(i + 1) * self.k]
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
        let k1 = self.k + 1;
        let n = cands.len() / k1;
        let chunk = n.div_ceil(rayon::current_num_threads() * 8).max(16);
        let parts: Vec<(Vec<usize>, Vec<u32>)> = cands
            .par_chunks(chunk * k1)
            .map(|cs| {
                let (mut lens, mut tids) = (Vec::with_capacity(cs.len() / k1), Vec::new());
                let mut key = vec![0u32; self.k];
                for c in cs.chunks_exact(k1) {
                    key[..self.k - 1].copy_from_slice(&c[..self.k - 1]);
                    key[self.k - 1] = c[self.k];
                    let a = self.find(&c[..self.k]).expect("generator of a candidate");
                    let b = self.find(&key).expect("generator of a candidate");
                    let before = tids.len();
                    intersect(self.list(a), self.list(b), &mut tids);
                    lens.push(tids.len() - before);
                }
                (lens, tids)
            })
            .collect();
        Level::joined(k1, cands, parts)
    }

    /// The lists of the k-candidates `cands` (flat, lexicographic) from the lists of single
    /// items (`self`, k = 1): the intersection of their items' lists. Level 3 is counted so,
    /// without the pairs' lists (which would be held beside the items' lists).
    fn extend_items(&self, cands: &[u32], k: usize) -> Level {
        debug_assert_eq!(self.k, 1);
        let n = cands.len() / k;
        let chunk = n.div_ceil(rayon::current_num_threads() * 8).max(16);
        let parts: Vec<(Vec<usize>, Vec<u32>)> = cands
            .par_chunks(chunk * k)
            .map(|cs| {
                let (mut lens, mut tids, mut tmp) = (Vec::with_capacity(cs.len() / k), Vec::new(), Vec::new());
                for c in cs.chunks_exact(k) {
                    let before = tids.len();
                    tmp.clear();
                    intersect(self.list(c[0] as usize), self.list(c[1] as usize), &mut tmp);
                    for &x in &c[2..] {
                        let mut next = Vec::with_capacity(tmp.len());
                        intersect(&tmp, self.list(x as usize), &mut next);
                        tmp = next;
                    }
                    tids.extend_from_slice(&tmp);
                    lens.push(tids.len() - before);
                }
                (lens, tids)
            })
            .collect();
        Level::joined(k, cands, parts)
    }

    fn joined(k: usize, cands: &[u32], parts: Vec<(Vec<usize>, Vec<u32>)>) -> Level {
        let mut starts = Vec::with_capacity(cands.len() / k + 1);
        starts.push(0);
        let mut tids = Vec::with_capacity(parts.iter().map(|p| p.1.len()).sum());
        for (lens, t) in parts {
            for l in lens {
                starts.push(starts.last().unwrap() + l);
            }
            tids.extend_from_slice(&t);
        }
        Level { k, items: cands.to_vec(), starts, tids }
    }

    /// Keep the rows `keep` marks.
    fn retain(self, keep: &[bool]) -> Level {
        let (mut items, mut starts, mut tids) = (Vec::new(), vec![0usize], Vec::new());
        for (i, _) in keep.iter().enumerate().filter(|x| *x.1) {
            items.extend_from_slice(self.row(i));
            tids.extend_from_slice(self.list(i));
            starts.push(tids.len());
        }
        Level { k: self.k, items, starts, tids }
    }
}

/// Append the ids in both ascending lists to `out`.
fn intersect(a: &[u32], b: &[u32], out: &mut Vec<u32>) {
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

/// Bytes the pair triangle may take (one per thread).
const PAIR_BYTES: usize = 32 << 20;

/// Lists of the paired items (`code` maps an id to its rank among the `m` frequent items, or
/// `NONE`) over the transactions holding three or more of them; transaction t has id t.
fn item_lists(db: BasketsRef<'_>, code: &prep::IdLookup, m: usize) -> Level {
    let chunks = prep::chunk_ranges(db.len(), 4);
    let per_chunk: Vec<Vec<usize>> = chunks
        .par_iter()
        .map_init(Vec::new, |buf, &(a, b)| {
            let mut c = vec![0usize; m];
            for t in a..b {
                buf.clear();
                code.extend_mapped(db.transaction(t), buf);
                if buf.len() >= 3 {
                    for &x in buf.iter() {
                        c[x as usize] += 1;
                    }
                }
            }
            c
        })
        .collect();
    let mut starts = vec![0usize; m + 1];
    for r in 0..m {
        starts[r + 1] = starts[r] + per_chunk.iter().map(|c| c[r]).sum::<usize>();
    }
    // Each chunk fills its own range of every list (chunks in transaction order keep every
    // list ascending): the write positions are disjoint by construction.
    let mut cursors: Vec<Vec<usize>> = Vec::with_capacity(chunks.len());
    let mut at = starts[..m].to_vec();
    for c in &per_chunk {
        cursors.push(at.clone());
        for r in 0..m {
            at[r] += c[r];
        }
    }
    let mut tids = vec![0u32; starts[m]];
    let out = SharedSlice(tids.as_mut_ptr());
    chunks.par_iter().zip(cursors).for_each_init(Vec::new, |buf, (&(a, b), mut cur)| {
        let out = &out;
        for t in a..b {
            buf.clear();
            code.extend_mapped(db.transaction(t), buf);
            if buf.len() >= 3 {
                for &x in buf.iter() {
                    // SAFETY: cur[x] stays inside this chunk's range of list x (sized by
                    // the counting pass over the same transactions), which no other chunk
                    // writes; the vector outlives the loop.
                    unsafe { *out.0.add(cur[x as usize]) = t as u32 };
                    cur[x as usize] += 1;
                }
            }
        }
    });
    Level { k: 1, items: (0..m as u32).collect(), starts, tids }
}

struct SharedSlice(*mut u32);
// SAFETY: the threads write disjoint positions (see item_lists).
unsafe impl Sync for SharedSlice {}

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
    let too_large = |l: &Level| l.tids.len() > db.items.len().max(1 << 20);
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
    let mut lists = item_lists(db, &prep::value_lookup(&pair_ids, |c| up[c]), m);
    if too_large(&lists) {
        return None;
    }
    let mut k = 3;
    loop {
        let cands = apriori::apriori_gen(&level).expect("levels are canonical");
        if cands.is_empty() {
            break;
        }
        let next = if k == 3 { lists.extend_items(&cands.items, 3) } else { lists.extend(&cands.items) };
        if too_large(&next) {
            return None;
        }
        let keep: Vec<bool> = (0..next.len()).map(|i| (next.starts[i + 1] - next.starts[i]) as u64 >= p.min_count).collect();
        let idx: Vec<u32> = (0..keep.len() as u32).filter(|&i| keep[i as usize]).collect();
        let mut found = cands.gather(&idx);
        for (j, &i) in idx.iter().enumerate() {
            found.counts[j] = (next.starts[i as usize + 1] - next.starts[i as usize]) as u64;
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
