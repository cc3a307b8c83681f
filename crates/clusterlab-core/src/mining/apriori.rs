//! Apriori: level-wise candidate generation ([`apriori_gen`]) and support counting
//! ([`count_candidates`], a prefix trie walked by every transaction, parallel over chunks of
//! transactions). Pairs are counted in a dense triangular matrix when it fits.

use super::itemsets::{ItemRanks, Itemsets, Limit, MineParams};
use super::{pairs, prep, BasketsRef};
use rayon::prelude::*;
use std::cmp::Ordering;

const NONE: u32 = u32::MAX;

/// Candidate k-itemsets from the frequent (k-1)-itemsets `prev` (all of one length k-1 >= 1,
/// items ascending inside each): join pairs sharing their first k-2 items, then prune every
/// candidate that has an infrequent (k-1)-subset. `prev` need not be sorted; the candidates
/// come out in lexicographic order (canonical).
pub fn apriori_gen(prev: &Itemsets) -> Result<Itemsets, String> {
    if prev.is_empty() {
        return Ok(Itemsets::new());
    }
    let km1 = prev.itemset(0).len();
    if km1 == 0 || (0..prev.len()).any(|i| prev.itemset(i).len() != km1) {
        return Err("apriori_gen needs non-empty itemsets all of one length".into());
    }
    if (0..prev.len()).any(|i| prev.itemset(i).windows(2).any(|w| w[0] >= w[1])) {
        return Err("apriori_gen needs the items inside each itemset strictly ascending".into());
    }
    let sorted;
    let prev = if prev.is_canonical() {
        prev
    } else {
        let mut c = prev.clone().canonicalize();
        // Drop duplicates so that the join does not emit a candidate twice.
        let keep: Vec<u32> = (0..c.len()).filter(|&i| i == 0 || c.itemset(i) != c.itemset(i - 1)).map(|i| i as u32).collect();
        c = c.gather(&keep);
        sorted = c;
        &sorted
    };
    let n = prev.len();
    // Groups of itemsets sharing the first k-2 items are contiguous in lexicographic order.
    let mut groups = Vec::new();
    let mut s = 0;
    for i in 1..=n {
        if i == n || prev.itemset(i)[..km1 - 1] != prev.itemset(s)[..km1 - 1] {
            groups.push((s, i));
            s = i;
        }
    }
    let parts: Vec<Itemsets> = groups
        .par_iter()
        .with_min_len(16)
        .fold(Itemsets::new, |mut out, &(a, b)| {
            let mut cand = vec![0u32; km1 + 1];
            for i in a..b {
                let x = prev.itemset(i);
                cand[..km1].copy_from_slice(x);
                for j in i + 1..b {
                    cand[km1] = prev.itemset(j)[km1 - 1];
                    // The subsets without position km1 and km1-1 are x and prev[j]; check the rest.
                    if (0..km1 - 1).all(|skip| find_skipping(prev, &cand, skip)) {
                        out.push(&cand, 0);
                    }
                }
            }
            out
        })
        .collect();
    Ok(Itemsets::concat(parts))
}

/// Whether `cand` without position `skip` is among the (sorted, one-length) itemsets of `prev`.
fn find_skipping(prev: &Itemsets, cand: &[u32], skip: usize) -> bool {
    let cmp = |s: &[u32]| -> Ordering {
        let mut k = 0;
        for (p, &c) in cand.iter().enumerate() {
            if p == skip {
                continue;
            }
            match s[k].cmp(&c) {
                Ordering::Equal => k += 1,
                o => return o,
            }
        }
        Ordering::Equal
    };
    let (mut lo, mut hi) = (0, prev.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        match cmp(prev.itemset(mid)) {
            Ordering::Less => lo = mid + 1,
            Ordering::Greater => hi = mid,
            Ordering::Equal => return true,
        }
    }
    false
}

/// Prefix trie of candidates that all have length k.
struct Trie {
    k: usize,
    /// First level: item id -> node index (or NONE), never a table by the largest id.
    root: prep::IdLookup,
    /// Items of the nodes of each level.
    level_items: Vec<Vec<u32>>,
    /// Children of node x at level d are level d+1 nodes child_start[d][x]..child_start[d][x+1].
    child_start: Vec<Vec<u32>>,
}

impl Trie {
    /// From unique candidates in lexicographic order; leaf j is candidate j.
    fn build(c: &Itemsets, k: usize) -> Trie {
        let mut level_items = vec![Vec::new(); k];
        let mut child_start = vec![Vec::new(); k.saturating_sub(1)];
        for i in 0..c.len() {
            let s = c.itemset(i);
            let first_diff = if i == 0 { 0 } else { s.iter().zip(c.itemset(i - 1)).position(|(a, b)| a != b).unwrap_or(k) };
            for d in first_diff..k {
                if d + 1 < k {
                    child_start[d].push(level_items[d + 1].len() as u32);
                }
                level_items[d].push(s[d]);
            }
        }
        for d in 0..k.saturating_sub(1) {
            child_start[d].push(level_items[d + 1].len() as u32);
        }
        // First-level items are distinct and ascending: node x is rank x.
        let root = prep::rank_lookup(&level_items[0]);
        Trie { k, root, level_items, child_start }
    }

    /// Add `w` to the count of every candidate contained in transaction `t`.
    #[inline]
    fn count(&self, t: &[u32], w: u64, counts: &mut [u64]) {
        let k = self.k;
        if t.len() < k {
            return;
        }
        for p in 0..=t.len() - k {
            let x = self.root.get(t[p]);
            if x == NONE {
                continue;
            }
            if k == 1 {
                counts[x as usize] += w;
            } else {
                let cs = &self.child_start[0];
                self.walk(1, cs[x as usize] as usize, cs[x as usize + 1] as usize, t, p + 1, w, counts);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn walk(&self, d: usize, mut a: usize, b: usize, t: &[u32], p: usize, w: u64, counts: &mut [u64]) {
        let need = self.k - d;
        if t.len() < p + need || a >= b {
            return;
        }
        let last = t.len() - need; // last usable position for this level's item
        let items = &self.level_items[d];
        let leaf = d + 1 == self.k;
        let hit = |x: usize, i: usize, counts: &mut [u64]| {
            if leaf {
                counts[x] += w;
            } else {
                let cs = &self.child_start[d];
                self.walk(d + 1, cs[x] as usize, cs[x + 1] as usize, t, i + 1, w, counts);
            }
        };
        if b - a > 8 * (last + 1 - p) {
            // Many children, few transaction items: binary search each item.
            for i in p..=last {
                match items[a..b].binary_search(&t[i]) {
                    Ok(off) => {
                        hit(a + off, i, counts);
                        a += off + 1;
                    }
                    Err(off) => a += off,
                }
                if a >= b {
                    break;
                }
            }
        } else {
            let mut i = p;
            while a < b && i <= last {
                match items[a].cmp(&t[i]) {
                    Ordering::Less => a += 1,
                    Ordering::Greater => i += 1,
                    Ordering::Equal => {
                        hit(a, i, counts);
                        a += 1;
                        i += 1;
                    }
                }
            }
        }
    }
}

/// Weighted support count of each candidate (all of one length k >= 1, items ascending
/// inside each, any order, duplicates allowed) in the transactions of `db` (items ascending).
/// Counts are returned in the candidates' order. Parallel over chunks of transactions.
pub fn count_candidates(db: BasketsRef<'_>, cands: &Itemsets) -> Result<Vec<u64>, String> {
    if cands.is_empty() {
        return Ok(Vec::new());
    }
    let k = cands.itemset(0).len();
    if k == 0 || (0..cands.len()).any(|i| cands.itemset(i).len() != k) {
        return Err("count_candidates needs non-empty candidates all of one length".into());
    }
    if (0..cands.len()).any(|i| cands.itemset(i).windows(2).any(|w| w[0] >= w[1])) {
        return Err("count_candidates needs the items inside each candidate strictly ascending".into());
    }
    // Sort (stable index order) and merge duplicates: leaf j <- unique candidate j.
    let (uniq, map) = if cands.is_canonical() {
        (None, None)
    } else {
        let mut idx: Vec<u32> = (0..cands.len() as u32).collect();
        idx.par_sort_by(|&a, &b| cands.itemset(a as usize).cmp(cands.itemset(b as usize)));
        let mut u = Itemsets::new();
        let mut map = vec![0u32; cands.len()];
        for (r, &i) in idx.iter().enumerate() {
            if r == 0 || cands.itemset(i as usize) != cands.itemset(idx[r - 1] as usize) {
                u.push(cands.itemset(i as usize), 0);
            }
            map[i as usize] = (u.len() - 1) as u32;
        }
        (Some(u), Some(map))
    };
    let c = uniq.as_ref().unwrap_or(cands);
    let leaf_counts = if k == 2 { count_pairs(db, c) } else { None };
    let leaf_counts = leaf_counts.unwrap_or_else(|| {
        let trie = Trie::build(c, k);
        chunked_sum(db, c.len(), |t, w, acc, _| trie.count(t, w, acc))
    });
    Ok(match map {
        None => leaf_counts,
        Some(m) => m.iter().map(|&j| leaf_counts[j as usize]).collect(),
    })
}

/// Sum per-transaction contributions into a count vector, in parallel over transaction chunks.
fn chunked_sum<F>(db: BasketsRef<'_>, n: usize, f: F) -> Vec<u64>
where
    F: Fn(&[u32], u64, &mut [u64], &mut Vec<u32>) + Sync,
{
    let threads = rayon::current_num_threads();
    let chunk = db.len().div_ceil(threads * 4).max(1024);
    (0..db.len().div_ceil(chunk))
        .into_par_iter()
        .fold(|| (vec![0u64; n], Vec::new()), |(mut acc, mut scratch), c| {
            for t in c * chunk..((c + 1) * chunk).min(db.len()) {
                f(db.transaction(t), db.weight(t), &mut acc, &mut scratch);
            }
            (acc, scratch)
        })
        .map(|(acc, _)| acc)
        .reduce(|| vec![0u64; n], |mut a, b| {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
            a
        })
}

/// Candidate pairs counted in a dense upper-triangular matrix over the items that occur in
/// them, when that matrix is small; None when it would be too large.
fn count_pairs(db: BasketsRef<'_>, c: &Itemsets) -> Option<Vec<u64>> {
    let ranks = ItemRanks::of(&c.items);
    let m = ranks.len();
    if m * m > 1 << 21 {
        return None;
    }
    let mut distinct = vec![0u32; m];
    for &it in &c.items {
        distinct[ranks.get(it) as usize] = it;
    }
    let code = prep::rank_lookup(&distinct);
    let mat = chunked_sum(db, m * m, |t, w, acc, s| {
        s.clear();
        s.extend(t.iter().map(|&it| code.get(it)).filter(|&x| x != NONE));
        for (i, &x) in s.iter().enumerate() {
            let row = &mut acc[x as usize * m..x as usize * m + m];
            for &y in &s[i + 1..] {
                row[y as usize] += w;
            }
        }
    });
    Some((0..c.len()).map(|i| {
        let s = c.itemset(i);
        mat[code.get(s[0]) as usize * m + code.get(s[1]) as usize]
    }).collect())
}

/// All frequent itemsets, level by level, until `limit` is passed.
///
/// Items are recoded to their rank among the frequent ids (no table sized by the largest id;
/// ids come back at the end). Pass 1 counts items, pass 2 counts every pair of frequent items
/// in a triangular array (in bands of rows when the whole triangle would be too large), and
/// each later pass counts the candidates of [`apriori_gen`] with a prefix trie. The later
/// passes read a copy holding only the items of frequent pairs when that copy fits the
/// memory budget (an eighth of the input), and otherwise recode the input on the fly, so a
/// 10M-transaction input is never copied whole.
pub fn apriori(db: BasketsRef<'_>, p: &MineParams, limit: &Limit) -> Itemsets {
    let (ids, counts) = prep::count_items(db);
    let keep: Vec<usize> = (0..ids.len()).filter(|&k| counts[k] >= p.min_count).collect();
    let freq_ids: Vec<u32> = keep.iter().map(|&k| ids[k]).collect();
    let mut out = Itemsets::new();
    if p.max_len == 0 {
        return out;
    }
    let mut level = Itemsets::new();
    for (r, &k) in keep.iter().enumerate() {
        level.push(&[r as u32], counts[k]);
    }
    if p.min_len <= 1 {
        out.append(&level);
    }
    limit.charge(level.len() as u64);
    if level.len() < 2 || p.max_len < 2 || limit.stopped() {
        return to_ids(out, &freq_ids);
    }
    let lookup = prep::rank_lookup(&freq_ids);
    let m = freq_ids.len();
    let pairs = if db.weights.is_none() && pairs::tri_len(m) * 4 <= PAIR_BAND_BYTES && db.len() <= u32::MAX as usize {
        // The shared pass-2 kernel (u32 counters, ranks keep the ids' order).
        let tri = pairs::count_pairs_streamed(db, &lookup, m);
        let mut out = Itemsets::new();
        for a in 0..m {
            for b in a + 1..m {
                let c = tri[pairs::tri(m, a, b)] as u64;
                if c >= p.min_count {
                    out.push(&[a as u32, b as u32], c);
                }
            }
        }
        out
    } else {
        frequent_pairs(db, &lookup, m, p.min_count)
    };
    if p.min_len <= 2 {
        out.append(&pairs);
    }
    limit.charge(pairs.len() as u64);
    if pairs.len() < 2 || p.max_len < 3 || limit.stopped() {
        return to_ids(out, &freq_ids);
    }
    // Later passes see only the items of frequent pairs, in transactions with 3 or more.
    let mut in_pair = vec![false; freq_ids.len()];
    for &x in &pairs.items {
        in_pair[x as usize] = true;
    }
    let pair_ids: Vec<u32> = (0..freq_ids.len()).filter(|&r| in_pair[r]).map(|r| freq_ids[r]).collect();
    // Id -> frequent rank (the candidates use frequent ranks) for the items of frequent pairs.
    let up: Vec<u32> = (0..freq_ids.len() as u32).filter(|&r| in_pair[r as usize]).collect();
    let pair_lookup = prep::value_lookup(&pair_ids, |c| up[c]);
    let code = |t: &[u32], buf: &mut Vec<u32>| {
        buf.clear();
        pair_lookup.extend_mapped(t, buf);
    };
    let copy_bytes: usize = (0..db.len())
        .into_par_iter()
        .with_min_len(4096)
        .map_init(Vec::new, |buf, t| {
            code(db.transaction(t), buf);
            if buf.len() >= 3 { buf.len() * 4 + 8 + if db.weights.is_some() { 8 } else { 0 } } else { 0 }
        })
        .sum();
    let mut copy: Option<(Vec<i64>, Vec<u32>, Vec<u64>)> = None;
    if copy_bytes <= prep::budget_of(db) {
        let (mut o, mut it, mut w) = (vec![0i64], Vec::new(), Vec::new());
        let mut buf = Vec::new();
        for t in 0..db.len() {
            code(db.transaction(t), &mut buf);
            if buf.len() >= 3 {
                it.extend_from_slice(&buf);
                o.push(it.len() as i64);
                w.push(db.weight(t));
            }
        }
        copy = Some((o, it, w));
    }
    level = pairs;
    let mut k = 3;
    loop {
        // The join makes up to g(g-1)/2 candidates per group of itemsets sharing all but the
        // last item; more than the itemset limit would not even fit in memory: stop there.
        let mut bound = 0u64;
        let mut g = 1u64;
        for i in 1..=level.len() {
            if i < level.len() && level.itemset(i)[..k - 2] == level.itemset(i - 1)[..k - 2] {
                g += 1;
            } else {
                bound = bound.saturating_add(g * (g - 1) / 2);
                g = 1;
            }
        }
        if bound > limit.max() {
            limit.stop_now();
            break;
        }
        let cands = apriori_gen(&level).expect("levels are canonical");
        if cands.is_empty() {
            break;
        }
        let trie = Trie::build(&cands, k);
        let cc = match &copy {
            Some((o, it, w)) => {
                let fdb = BasketsRef { offsets: o, items: it, weights: Some(w) };
                chunked_sum(fdb, cands.len(), |t, w, acc, _| trie.count(t, w, acc))
            }
            None => chunked_sum(db, cands.len(), |t, w, acc, buf| {
                code(t, buf);
                trie.count(buf, w, acc)
            }),
        };
        let keep: Vec<u32> = (0..cands.len() as u32).filter(|&i| cc[i as usize] >= p.min_count).collect();
        let mut next = cands.gather(&keep);
        for (j, &i) in keep.iter().enumerate() {
            next.counts[j] = cc[i as usize];
        }
        if k >= p.min_len {
            out.append(&next);
        }
        limit.charge(next.len() as u64);
        if next.len() < 2 || k >= p.max_len || limit.stopped() {
            break;
        }
        // Transactions shorter than k+1 cannot hold a candidate of the next level.
        if let Some((o, it, w)) = &mut copy {
            let (mut o2, mut i2, mut w2) = (vec![0i64], Vec::with_capacity(it.len()), Vec::new());
            for t in 0..o.len() - 1 {
                let tr = &it[o[t] as usize..o[t + 1] as usize];
                if tr.len() > k {
                    i2.extend_from_slice(tr);
                    o2.push(i2.len() as i64);
                    w2.push(w[t]);
                }
            }
            (*o, *it, *w) = (o2, i2, w2);
        }
        level = next;
        k += 1;
    }
    to_ids(out, &freq_ids)
}

/// Frequent pairs (in ranks, canonical) from triangular counters over the `m` frequent
/// ranks: one pass over the input per band of rows that fits [`PAIR_BAND_BYTES`] per thread.
fn frequent_pairs(db: BasketsRef<'_>, lookup: &prep::IdLookup, m: usize, min_count: u64) -> Itemsets {
    // Row i holds the pairs (j, i) with j < i, at i(i-1)/2 + j.
    let row = |i: usize| i * i.saturating_sub(1) / 2;
    let mut bands = Vec::new();
    let mut lo = 1;
    while lo < m {
        let mut hi = lo + 1;
        while hi < m && (row(hi + 1) - row(lo)) * 8 <= PAIR_BAND_BYTES {
            hi += 1;
        }
        bands.push((lo, hi));
        lo = hi;
    }
    let mut found: Vec<(u32, u32, u64)> = Vec::new();
    for (lo, hi) in bands {
        let base = row(lo);
        let size = row(hi) - base;
        let counts = chunked_sum(db, size, |t, w, acc, buf| {
            buf.clear();
            buf.extend(t.iter().map(|&i| lookup.get(i)).filter(|&c| c != prep::NONE));
            for q in 1..buf.len() {
                let i = buf[q] as usize;
                if i < lo || i >= hi {
                    continue;
                }
                let r = row(i) - base;
                for &j in &buf[..q] {
                    acc[r + j as usize] += w;
                }
            }
        });
        for i in lo..hi {
            for j in 0..i {
                let c = counts[row(i) - base + j];
                if c >= min_count {
                    found.push((j as u32, i as u32, c));
                }
            }
        }
    }
    found.par_sort_unstable();
    let mut out = Itemsets::new();
    for (j, i, c) in found {
        out.push(&[j, i], c);
    }
    out
}

/// Per-thread bytes of one band of pair counters.
const PAIR_BAND_BYTES: usize = 64 << 20;

/// Ranks back to item ids (rank order is id order, so the canonical order holds).
fn to_ids(mut s: Itemsets, ids: &[u32]) -> Itemsets {
    for x in s.items.iter_mut() {
        *x = ids[*x as usize];
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    fn sets(v: &[&[u32]]) -> Itemsets {
        let mut s = Itemsets::new();
        for x in v {
            s.push(x, 0);
        }
        s
    }

    #[test]
    fn gen_joins_and_prunes() {
        let prev = sets(&[&[1, 2], &[1, 3], &[1, 4], &[2, 3]]);
        let c = apriori_gen(&prev).unwrap();
        // {1,2,3} survives; {1,2,4} and {1,3,4} lack {2,4} / {3,4}.
        assert_eq!(c.iter().map(|(s, _)| s.to_vec()).collect::<Vec<_>>(), vec![vec![1, 2, 3]]);
        let singles = sets(&[&[3], &[1], &[2]]);
        let c = apriori_gen(&singles).unwrap();
        assert_eq!(c.items, vec![1, 2, 1, 3, 2, 3]);
        assert!(apriori_gen(&sets(&[&[1], &[1, 2]])).is_err());
    }

    #[test]
    fn count_matches_brute_force_any_order() {
        for seed in 0..10 {
            let b = random_baskets(seed, 200, 12, 10);
            let db = BasketsRef::from_baskets(&b);
            let bf = brute_force(&b, 1);
            for k in 1..=4 {
                // All k-subsets of items 0..12 in reverse order, plus a duplicate.
                let mut c = Itemsets::new();
                let st = bf.length_starts();
                if k + 1 >= st.len() {
                    continue;
                }
                for i in (st[k]..st[k + 1]).rev() {
                    c.push(bf.itemset(i), 0);
                }
                c.push(bf.itemset(st[k]), 0);
                c.push(&(100..100 + k as u32).collect::<Vec<_>>(), 0);
                let counts = count_candidates(db, &c).unwrap();
                for (i, (s, _)) in c.iter().enumerate() {
                    let want = b.iter().filter(|t| s.iter().all(|x| t.contains(x))).count() as u64;
                    assert_eq!(counts[i], want, "seed {seed} k {k} {s:?}");
                }
            }
        }
    }

    #[test]
    fn weights_multiply() {
        let b = crate::Baskets::from_lists([vec![1u32, 2, 3], vec![1, 2], vec![2, 3]]);
        let w = [3u64, 1, 5];
        let db = BasketsRef::new(&b.offsets, &b.items, Some(&w)).unwrap();
        let c = sets(&[&[1, 2], &[2, 3], &[1, 3]]);
        assert_eq!(count_candidates(db, &c).unwrap(), vec![4, 8, 3]);
        let c3 = sets(&[&[1, 2, 3]]);
        assert_eq!(count_candidates(db, &c3).unwrap(), vec![3]);
    }
}
