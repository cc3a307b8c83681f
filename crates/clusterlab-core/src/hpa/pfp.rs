//! PFP (parallel FP-growth, Li et al. RecSys'08): items are split into groups; each
//! transaction (items as F-list positions, most frequent first) sends to group g its prefix up
//! to its last item of g ("group-dependent transactions"); group g builds an FP-tree of what it
//! received and mines only the itemsets whose last (least frequent) item is in g. Every
//! frequent itemset is thus mined by exactly one group, with its full count.

/// Group-dependent transactions: one `[len, items...]` u32 stream per group.
/// `items` are F-list positions, ascending within each transaction.
pub fn group_transactions(offsets: &[i64], items: &[u32], group_of: &[u32], n_groups: usize) -> Vec<Vec<u32>> {
    let mut out: Vec<Vec<u32>> = (0..n_groups).map(|_| Vec::new()).collect();
    let mut seen = vec![false; n_groups];
    let mut touched = Vec::new();
    for w in offsets.windows(2) {
        let t = &items[w[0] as usize..w[1] as usize];
        for j in (0..t.len()).rev() {
            let g = group_of[t[j] as usize] as usize;
            if !seen[g] {
                seen[g] = true;
                touched.push(g);
                out[g].push((j + 1) as u32);
                out[g].extend_from_slice(&t[..=j]);
            }
        }
        for g in touched.drain(..) {
            seen[g] = false;
        }
    }
    out
}

/// Weighted paths in one flat buffer: path `p` is `items[start..start + len]` with `count`.
#[derive(Debug, Default, Clone)]
pub struct Paths {
    pub items: Vec<u32>,
    pub spans: Vec<(u32, u32, u64)>,
}

impl Paths {
    fn path(&self, i: usize) -> &[u32] {
        let (s, l, _) = self.spans[i];
        &self.items[s as usize..(s + l) as usize]
    }
}

/// Decode `[len, items...]` streams into paths; errors name what was wrong.
pub fn decode_streams(streams: &[&[u32]], n_pos: usize) -> Result<Paths, String> {
    let mut p = Paths::default();
    for s in streams {
        let mut i = 0;
        while i < s.len() {
            let n = s[i] as usize;
            i += 1;
            if n == 0 || i + n > s.len() {
                return Err(format!("conditional transaction of length {n} overruns its block at word {i}"));
            }
            let t = &s[i..i + n];
            if t.iter().any(|&x| x as usize >= n_pos) || t.windows(2).any(|w| w[0] >= w[1]) {
                return Err(format!("conditional transaction at word {i} is not an ascending list of F-list positions"));
            }
            p.spans.push((p.items.len() as u32, n as u32, 1));
            p.items.extend_from_slice(t);
            i += n;
        }
    }
    Ok(p)
}

struct FpTree {
    item: Vec<u32>,
    count: Vec<u64>,
    parent: Vec<u32>,
    /// (item, nodes of that item) in ascending item order.
    header: Vec<(u32, Vec<u32>)>,
}

impl FpTree {
    /// Build from paths (ascending items): sorted, consecutive paths share their common prefix,
    /// so no child lookup is ever needed.
    fn build(paths: &Paths) -> FpTree {
        // Sort by a key packing the first items (item + 1, 0 past the end: a shorter path
        // sorts first, as in slice order), so most comparisons touch no path memory; equal
        // keys fall back to comparing the paths.
        let top = paths.items.iter().copied().max().unwrap_or(0) as u64 + 2;
        let bits = 64 - (top - 1).leading_zeros();
        let per = (64 / bits) as usize;
        let key: Vec<u64> = (0..paths.spans.len())
            .map(|i| {
                let p = paths.path(i);
                (0..per).fold(0u64, |k, j| (k << bits) | p.get(j).map_or(0, |&x| x as u64 + 1))
            })
            .collect();
        let mut order: Vec<u32> = (0..paths.spans.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| {
            key[a as usize].cmp(&key[b as usize]).then_with(|| {
                let (pa, pb) = (paths.path(a as usize), paths.path(b as usize));
                pa.get(per..).unwrap_or(&[]).cmp(pb.get(per..).unwrap_or(&[]))
            })
        });
        let mut t = FpTree { item: vec![u32::MAX], count: vec![0], parent: vec![0], header: Vec::new() };
        let mut stack: Vec<u32> = Vec::new();
        for &pi in &order {
            let p = paths.path(pi as usize);
            let c = paths.spans[pi as usize].2;
            let mut l = 0;
            while l < stack.len() && l < p.len() && t.item[stack[l] as usize] == p[l] {
                l += 1;
            }
            stack.truncate(l);
            for &n in &stack {
                t.count[n as usize] += c;
            }
            for &x in &p[l..] {
                let parent = stack.last().copied().unwrap_or(0);
                t.item.push(x);
                t.count.push(c);
                t.parent.push(parent);
                stack.push((t.item.len() - 1) as u32);
            }
        }
        // Header: each item's nodes in ascending node order (a counting sort by item).
        let mut per_item = vec![0u32; top as usize];
        for &x in &t.item[1..] {
            per_item[x as usize] += 1;
        }
        let mut lists: Vec<Vec<u32>> = per_item.iter().map(|&c| Vec::with_capacity(c as usize)).collect();
        for (n, &x) in t.item.iter().enumerate().skip(1) {
            lists[x as usize].push(n as u32);
        }
        t.header = lists.into_iter().enumerate().filter(|(_, l)| !l.is_empty()).map(|(x, l)| (x as u32, l)).collect();
        t
    }

    /// The conditional pattern base of one item's `nodes`: first every ancestor item's count
    /// (in `scratch`, zeroed again before returning), then each node's path of the frequent
    /// ancestors, ascending, appended to `items`; `span(start, end, count)` names each path.
    /// Both FP-growth variants below build their sub-problem from it.
    fn conditional_base(&self, nodes: &[u32], min_count: u64, scratch: &mut [u64], items: &mut Vec<u32>, mut span: impl FnMut(usize, usize, u64)) {
        let mut touched = Vec::new();
        for &n in nodes {
            let c = self.count[n as usize];
            let mut a = self.parent[n as usize];
            while a != 0 {
                let it = self.item[a as usize] as usize;
                if scratch[it] == 0 {
                    touched.push(it);
                }
                scratch[it] += c;
                a = self.parent[a as usize];
            }
        }
        if touched.iter().any(|&it| scratch[it] >= min_count) {
            for &n in nodes {
                let start = items.len();
                let mut a = self.parent[n as usize];
                while a != 0 {
                    let it = self.item[a as usize];
                    if scratch[it as usize] >= min_count {
                        items.push(it);
                    }
                    a = self.parent[a as usize];
                }
                if items.len() > start {
                    items[start..].reverse();
                    span(start, items.len(), self.count[n as usize]);
                }
            }
        }
        for it in touched {
            scratch[it] = 0;
        }
    }
}

/// Output of mining: flat itemsets (F-list positions, descending), offsets, counts.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Mined {
    pub offsets: Vec<i64>,
    pub items: Vec<u32>,
    pub counts: Vec<u64>,
}

impl Mined {
    fn push(&mut self, s: &[u32], c: u64) {
        if self.offsets.is_empty() {
            self.offsets.push(0);
        }
        self.items.extend_from_slice(s);
        self.offsets.push(self.items.len() as i64);
        self.counts.push(c);
    }
}

fn mine_tree(t: &FpTree, restrict: Option<&[bool]>, min_count: u64, max_len: usize, suffix: &mut Vec<u32>, scratch: &mut Vec<u64>, out: &mut Mined) {
    for (x, nodes) in t.header.iter().rev() {
        if let Some(r) = restrict {
            if !r.get(*x as usize).copied().unwrap_or(false) {
                continue;
            }
        }
        let cnt: u64 = nodes.iter().map(|&n| t.count[n as usize]).sum();
        if cnt < min_count {
            continue;
        }
        suffix.push(*x);
        out.push(suffix, cnt);
        if suffix.len() < max_len {
            let mut cond = Paths::default();
            let spans = &mut cond.spans;
            t.conditional_base(nodes, min_count, scratch, &mut cond.items, |s, e, c| spans.push((s as u32, (e - s) as u32, c)));
            if !cond.spans.is_empty() {
                let sub = FpTree::build(&cond);
                mine_tree(&sub, None, min_count, max_len, suffix, scratch, out);
            }
        }
        suffix.pop();
    }
}

/// Like [`mine_group`], but below the top level each group item's conditional pattern base
/// (weighted, frequent items only) is mined by the sequential engine's FP-growth
/// (`mining::fpgrowth`, with per-transaction weights), so PFP reuses the tuned kernel.
pub fn mine_group_with_engine(paths: Paths, n_pos: usize, in_group: &[bool], min_count: u64, max_len: usize) -> Mined {
    use crate::mining::{fpgrowth::fpgrowth, BasketsRef, MineParams};
    let t = FpTree::build(&paths);
    drop(paths);
    let min_count = min_count.max(1);
    let max_len = if max_len == 0 { usize::MAX } else { max_len };
    let mut out = Mined { offsets: vec![0], ..Default::default() };
    let mut scratch = vec![0u64; n_pos];
    let mut set = Vec::new();
    for (x, nodes) in t.header.iter().rev() {
        if !in_group.get(*x as usize).copied().unwrap_or(false) {
            continue;
        }
        let cnt: u64 = nodes.iter().map(|&n| t.count[n as usize]).sum();
        if cnt < min_count {
            continue;
        }
        out.push(&[*x], cnt);
        if max_len < 2 {
            continue;
        }
        let (mut offs, mut items, mut w) = (vec![0i64], Vec::new(), Vec::new());
        t.conditional_base(nodes, min_count, &mut scratch, &mut items, |_, e, c| {
            offs.push(e as i64);
            w.push(c);
        });
        if w.is_empty() {
            continue;
        }
        let p = MineParams { min_count, min_len: 1, max_len: max_len - 1 };
        let r = fpgrowth(BasketsRef { offsets: &offs, items: &items, weights: Some(&w) }, &p);
        for i in 0..r.counts.len() {
            set.clear();
            set.extend_from_slice(&r.items[r.offsets[i] as usize..r.offsets[i + 1] as usize]);
            set.push(*x);
            out.push(&set, r.counts[i]);
        }
    }
    out
}

/// FP-growth over weighted paths (ascending F-list positions < `n_pos`), keeping only itemsets
/// whose last (largest-position) item has `in_group[item]`; `max_len` 0 means unlimited.
pub fn mine_group(paths: Paths, n_pos: usize, in_group: &[bool], min_count: u64, max_len: usize) -> Mined {
    let tree = FpTree::build(&paths);
    drop(paths);
    let mut out = Mined { offsets: vec![0], ..Default::default() };
    let mut scratch = vec![0u64; n_pos];
    let max_len = if max_len == 0 { usize::MAX } else { max_len };
    mine_tree(&tree, Some(in_group), min_count.max(1), max_len, &mut Vec::new(), &mut scratch, &mut out);
    out
}

/// A group's itemsets mined vertically (Eclat's intersections), the fastest kernel on sparse
/// data: every itemset whose last (largest-position) item `x` has `in_group[x]`, from the
/// group-dependent transactions `streams` (`[len, positions...]*`, ascending positions below
/// `n_pos`). Every transaction holding such an `x` reached this group with all its items
/// before `x`, so counts are exact. Pair counts of the received transactions (a triangle)
/// decide which `(y, x)` pairs are worth intersecting, as the sequential Eclat does; the
/// classes below are extended depth first. `max_len` 0 means unlimited.
pub fn mine_group_vertical(streams: &[&[u32]], n_pos: usize, in_group: &[bool], min_count: u64, max_len: usize) -> Result<Mined, String> {
    let mut all = None;
    mine_group_vertical_chunked(streams, n_pos, in_group, min_count, max_len, usize::MAX, &mut |m| {
        all = Some(m);
        true
    })?;
    Ok(all.unwrap_or_default())
}

/// `mine_group_vertical` handing its itemsets to `sink` as it goes: whenever at least
/// `chunk` of them are held, before the next top-level item, and the rest at the end (one
/// hand-over, possibly empty, when `chunk` is `usize::MAX`). `sink` returning false stops
/// the kernel (then `Ok(false)`).
pub fn mine_group_vertical_chunked(
    streams: &[&[u32]], n_pos: usize, in_group: &[bool], min_count: u64, max_len: usize, chunk: usize, sink: &mut dyn FnMut(Mined) -> bool,
) -> Result<bool, String> {
    use super::vertical::{count_pairs, TidLists};
    let paths = decode_streams(streams, n_pos)?;
    let mut offsets = Vec::with_capacity(paths.spans.len() + 1);
    offsets.push(0i64);
    let mut n = 0i64;
    for &(_, l, _) in &paths.spans {
        n += l as i64;
        offsets.push(n);
    }
    let items = paths.items;
    let min_count = min_count.max(1);
    let max_len = if max_len == 0 { usize::MAX } else { max_len };
    let mut out = Mined { offsets: vec![0], ..Default::default() };
    let item_counts = {
        let mut c = vec![0u64; n_pos];
        for &x in &items {
            c[x as usize] += 1;
        }
        c
    };
    let pairs = if max_len >= 2 && n_pos >= 2 && n_pos * (n_pos - 1) / 2 <= super::table::DENSE_MAX { Some(count_pairs(&offsets, &items, n_pos)) } else { None };
    let keep: Vec<bool> = item_counts.iter().map(|&c| c >= min_count).collect();
    let lists = TidLists::of_items(&offsets, &items, &keep);
    drop(items);
    let mut prefix = Vec::new();
    for x in 0..n_pos {
        if !in_group[x] || item_counts[x] < min_count {
            continue;
        }
        if out.counts.len() >= chunk && !sink(std::mem::replace(&mut out, Mined { offsets: vec![0], ..Default::default() })) {
            return Ok(false);
        }
        out.push(&[x as u32], item_counts[x]);
        if max_len < 2 {
            continue;
        }
        let tx = lists.list_of(x);
        // The class of x: every more frequent item y < x with {y, x} frequent, with its list.
        let mut class: Vec<(u32, Vec<u32>)> = Vec::new();
        for y in 0..x {
            if !keep[y] {
                continue;
            }
            if let Some(p) = &pairs {
                if (p[super::table::tri(n_pos, y, x)] as u64) < min_count {
                    continue;
                }
            }
            let mut t = Vec::new();
            super::vertical::intersect(lists.list_of(y), tx, &mut t);
            if t.len() as u64 >= min_count {
                class.push((y as u32, t));
            }
        }
        prefix.clear();
        prefix.push(x as u32);
        grow(&mut prefix, &class, min_count, max_len, &mut out);
    }
    Ok(sink(out))
}

/// Depth-first: each member of the class extends the prefix, and its class is its
/// intersections with the members after it.
fn grow(prefix: &mut Vec<u32>, class: &[(u32, Vec<u32>)], min_count: u64, max_len: usize, out: &mut Mined) {
    for i in 0..class.len() {
        let (y, ty) = &class[i];
        prefix.push(*y);
        out.push(prefix, ty.len() as u64);
        if prefix.len() < max_len && i + 1 < class.len() {
            let mut next = Vec::new();
            for (z, tz) in &class[i + 1..] {
                let mut t = Vec::new();
                super::vertical::intersect(ty, tz, &mut t);
                if t.len() as u64 >= min_count {
                    next.push((*z, t));
                }
            }
            if !next.is_empty() {
                grow(prefix, &next, min_count, max_len, out);
            }
        }
        prefix.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn brute(txs: &[Vec<u32>], min: u64) -> BTreeMap<Vec<u32>, u64> {
        let mut m = BTreeMap::new();
        for t in txs {
            for mask in 1u32..(1 << t.len()) {
                let s: Vec<u32> = (0..t.len()).filter(|i| mask >> i & 1 == 1).map(|i| t[i]).collect();
                *m.entry(s).or_insert(0) += 1;
            }
        }
        m.retain(|_, c| *c >= min);
        m
    }

    #[test]
    fn groups_together_find_everything_once() {
        let txs: Vec<Vec<u32>> = (0..200u32).map(|i| (0..9u32).filter(|j| (i * 5 + j * 7 + i / 3) % 4 < 2).collect()).collect();
        let b = crate::Baskets::from_lists(&txs);
        let want = brute(&txs, 12);
        for n_groups in 1..4usize {
            let group_of: Vec<u32> = (0..9u32).map(|x| x * 7 % n_groups as u32).collect();
            let streams = group_transactions(&b.offsets, &b.items, &group_of, n_groups);
            let mut got = BTreeMap::new();
            for (g, stream) in streams.iter().enumerate() {
                let paths = decode_streams(&[stream], 9).unwrap();
                let in_group: Vec<bool> = group_of.iter().map(|&x| x as usize == g).collect();
                let m = match n_groups {
                    2 => mine_group_with_engine(paths, 9, &in_group, 12, 0),
                    3 => mine_group_vertical(&[stream], 9, &in_group, 12, 0).unwrap(),
                    _ => mine_group(paths, 9, &in_group, 12, 0),
                };
                for i in 0..m.counts.len() {
                    let mut s = m.items[m.offsets[i] as usize..m.offsets[i + 1] as usize].to_vec();
                    s.sort();
                    assert!(got.insert(s, m.counts[i]).is_none());
                }
            }
            assert_eq!(got, want, "groups={n_groups}");
        }
        assert!(decode_streams(&[&[3, 1, 2]], 9).is_err());
        assert!(decode_streams(&[&[2, 5, 1]], 9).is_err());
    }

    #[test]
    fn chunked_hand_overs_are_the_whole_result_in_order() {
        let txs: Vec<Vec<u32>> = (0..300u32).map(|i| (0..10u32).filter(|j| (i * 3 + j * 11 + i / 5) % 5 < 3).collect()).collect();
        let b = crate::Baskets::from_lists(&txs);
        let streams = group_transactions(&b.offsets, &b.items, &[0; 10], 1);
        let in_group = vec![true; 10];
        let whole = mine_group_vertical(&[&streams[0]], 10, &in_group, 20, 0).unwrap();
        for chunk in [1usize, 7, 1000] {
            let mut parts = Vec::new();
            let done = mine_group_vertical_chunked(&[&streams[0]], 10, &in_group, 20, 0, chunk, &mut |m| {
                parts.push(m);
                true
            })
            .unwrap();
            assert!(done && parts.len() > 1 || chunk == 1000);
            assert!(parts[..parts.len() - 1].iter().all(|m| m.counts.len() >= chunk));
            let (mut items, mut counts) = (Vec::new(), Vec::new());
            for m in &parts {
                items.extend_from_slice(&m.items);
                counts.extend_from_slice(&m.counts);
            }
            assert_eq!((items, counts), (whole.items.clone(), whole.counts.clone()), "chunk={chunk}");
        }
        let mut calls = 0;
        let stopped = mine_group_vertical_chunked(&[&streams[0]], 10, &in_group, 20, 0, 1, &mut |_| {
            calls += 1;
            false
        });
        assert_eq!((stopped, calls), (Ok(false), 1));
    }
}
