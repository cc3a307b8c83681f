//! HPA's sender side. For each transaction, enumerate the k-subsets that can be candidates,
//! hash each to its owner rank and append it to that owner's message block; a block is ready
//! when it reaches the configured byte size (8 KB by default, as in seed 000). Subsets owned by
//! this rank are counted at once, and ELD itemsets (replicated everywhere) are counted locally.
//!
//! "Can be a candidate": a candidate is the join of two large (k-1)-itemsets sharing their
//! first k-2 items, so the subset's first k-2 items must be a path in the prefix trie of the
//! large (k-1)-itemsets and its last two items two children of that path's node. With
//! `prune` the other k-2 subsets are checked too (full Apriori prune), which sends less.

use super::hash::{itemset_hash, owner_of};
use super::table::ItemsetIndex;
use crate::basket::{normalize_slice, Baskets};
use std::sync::Arc;

const NONE: u32 = u32::MAX;

/// Prefix trie of the large (k-1)-itemsets, down to the nodes whose children are last items.
#[derive(Debug, Clone)]
pub struct Trie {
    km1: usize,
    nodes: Vec<(u32, u32)>,
    child_item: Vec<u32>,
    child_node: Vec<u32>,
    // The root's child slot of each item (NONE: not a first item): the root has hundreds of
    // children, so a transaction's items are looked up here instead of searched for.
    root_slot: Vec<u32>,
}

impl Trie {
    /// From flat, lexicographically sorted (k-1)-itemsets.
    pub fn new(prev: &[u32], km1: usize) -> Self {
        assert!(km1 > 0 && prev.len().is_multiple_of(km1));
        let n = prev.len() / km1;
        let row = |i: usize| &prev[i * km1..(i + 1) * km1];
        let mut t = Trie { km1, nodes: vec![(0, 0)], child_item: Vec::new(), child_node: Vec::new(), root_slot: Vec::new() };
        let mut stack = vec![(0usize, 0usize, n, 0usize)];
        while let Some((id, lo, hi, d)) = stack.pop() {
            let start = t.child_item.len() as u32;
            let mut i = lo;
            while i < hi {
                let v = row(i)[d];
                let mut j = i + 1;
                while j < hi && row(j)[d] == v {
                    j += 1;
                }
                t.child_item.push(v);
                if d + 1 < km1 {
                    let nid = t.nodes.len();
                    t.nodes.push((0, 0));
                    t.child_node.push(nid as u32);
                    stack.push((nid, i, j, d + 1));
                } else {
                    t.child_node.push(NONE);
                }
                i = j;
            }
            t.nodes[id] = (start, t.child_item.len() as u32);
        }
        let (rs, re) = t.nodes[0];
        let roots = &t.child_item[rs as usize..re as usize];
        t.root_slot = vec![NONE; roots.last().map_or(0, |&x| x as usize + 1)];
        for (slot, &x) in roots.iter().enumerate() {
            t.root_slot[x as usize] = slot as u32;
        }
        t
    }

    /// Call `emit` with every k-subset of `t` (ascending) that joins two trie itemsets.
    pub fn for_each_joinable(&self, t: &[u32], scratch: &mut WalkScratch, emit: &mut impl FnMut(&[u32])) {
        self.for_each_joinable_from(t, None, scratch, emit)
    }

    /// As `for_each_joinable`, keeping only the subsets whose first item `x` has
    /// `first[x] == first_me` when `first` is `Some((first, first_me))`.
    pub fn for_each_joinable_from(&self, t: &[u32], first: Option<(&[u32], u32)>, scratch: &mut WalkScratch, emit: &mut impl FnMut(&[u32])) {
        if t.len() <= self.km1 {
            return;
        }
        // Stamp the transaction's items with their positions, so a node with few children
        // checks each child in O(1) instead of searching the transaction.
        scratch.stamp = scratch.stamp.wrapping_add(1);
        if scratch.stamp == 0 {
            scratch.seen.iter_mut().for_each(|x| *x = 0);
            scratch.stamp = 1;
        }
        let top = t[t.len() - 1] as usize;
        if scratch.seen.len() <= top {
            scratch.seen.resize(top + 1, 0);
            scratch.pos.resize(top + 1, 0);
        }
        for (p, &x) in t.iter().enumerate() {
            scratch.seen[x as usize] = scratch.stamp;
            scratch.pos[x as usize] = p as u32;
        }
        let mut prefix = std::mem::take(&mut scratch.prefix);
        let mut matches = std::mem::take(&mut scratch.matches);
        prefix.clear();
        self.walk(0, 0, t, 0, first, scratch, &mut matches, &mut prefix, emit);
        scratch.prefix = prefix;
        scratch.matches = matches;
    }

    /// Positions in `t[start..]` of the node's children, ascending.
    #[inline]
    fn children_in(&self, children: &[u32], t: &[u32], start: usize, sc: &WalkScratch, out: &mut Vec<u32>) {
        out.clear();
        let rest = t.len() - start;
        if children.len() <= rest * 4 {
            for &c in children {
                let c = c as usize;
                if c < sc.seen.len() && sc.seen[c] == sc.stamp && sc.pos[c] as usize >= start {
                    out.push(sc.pos[c]);
                }
            }
        } else {
            for (p, x) in t.iter().enumerate().skip(start) {
                if children.binary_search(x).is_ok() {
                    out.push(p as u32);
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn walk(&self, node: usize, depth: usize, t: &[u32], start: usize, first: Option<(&[u32], u32)>, sc: &WalkScratch, matches: &mut Vec<u32>, prefix: &mut Vec<u32>, emit: &mut impl FnMut(&[u32])) {
        let (cs, ce) = self.nodes[node];
        let children = &self.child_item[cs as usize..ce as usize];
        let k = self.km1 + 1;
        if depth + 1 == self.km1 {
            self.children_in(children, t, start, sc, matches);
            let base = prefix.len();
            for a in 0..matches.len() {
                if let (0, Some((f, me))) = (depth, first) {
                    if f.get(t[matches[a] as usize] as usize) != Some(&me) {
                        continue;
                    }
                }
                for b in a + 1..matches.len() {
                    prefix.truncate(base);
                    prefix.push(t[matches[a] as usize]);
                    prefix.push(t[matches[b] as usize]);
                    emit(prefix);
                }
            }
            prefix.truncate(base);
            return;
        }
        // Leave room for the k - depth - 1 items still to come.
        let last = t.len().saturating_sub(k - depth - 1);
        if depth == 0 {
            for p in start..last {
                let Some(&slot) = self.root_slot.get(t[p] as usize) else { continue };
                if slot == NONE {
                    continue;
                }
                if let Some((f, me)) = first {
                    if f.get(t[p] as usize) != Some(&me) {
                        continue;
                    }
                }
                prefix.push(t[p]);
                self.walk(self.child_node[cs as usize + slot as usize] as usize, 1, t, p + 1, None, sc, matches, prefix, emit);
                prefix.pop();
            }
            return;
        }
        let mut here = Vec::new();
        self.children_in(children, t, start, sc, &mut here);
        for p in here {
            let p = p as usize;
            if p >= last {
                break;
            }
            if depth == 0 {
                if let Some((f, me)) = first {
                    if f.get(t[p] as usize) != Some(&me) {
                        continue;
                    }
                }
            }
            let ci = children.binary_search(&t[p]).expect("a matched child");
            prefix.push(t[p]);
            self.walk(self.child_node[cs as usize + ci] as usize, depth + 1, t, p + 1, None, sc, matches, prefix, emit);
            prefix.pop();
        }
    }
}

/// Reusable buffers of the trie walk.
#[derive(Debug, Default)]
pub struct WalkScratch {
    seen: Vec<u32>,
    pos: Vec<u32>,
    stamp: u32,
    prefix: Vec<u32>,
    matches: Vec<u32>,
}

/// Counters of one rank's routing in one pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouterStats {
    pub transactions: u64,
    /// k-subsets that join two large (k-1)-itemsets.
    pub enumerated: u64,
    /// Dropped at the sender by the full prune.
    pub pruned: u64,
    /// Counted locally as ELD (replicated) itemsets.
    pub eld: u64,
    /// Owned here and counted at once.
    pub local: u64,
    /// Owned here but not a candidate.
    pub local_misses: u64,
    /// Itemsets packed for other ranks, and the number of blocks they made.
    pub sent_itemsets: u64,
    pub blocks: u64,
}

/// The sender side of one HPA pass on one rank.
pub struct Router {
    pub k: usize,
    parts: u32,
    me: u32,
    trie: Arc<Trie>,
    prune: Option<Arc<ItemsetIndex>>,
    local: Arc<ItemsetIndex>,
    local_counts: Vec<u64>,
    // Pass 2 with a dense pair index: local pairs are counted straight into a triangular
    // array (one memory access per pair) and folded into `local_counts` at the end.
    tri_counts: Option<(usize, Vec<u32>)>,
    eld: Option<Arc<ItemsetIndex>>,
    pub eld_counts: Vec<u64>,
    block_u32: usize,
    bufs: Vec<Vec<u32>>,
    pub ready: Vec<(u32, Vec<u32>)>,
    pub stats: RouterStats,
    // Prefix partitioning: owner of each first item (candidates are owned by their first item).
    first_owner: Option<Vec<u32>>,
    scratch: WalkScratch,
}

impl Router {
    /// `prev`: the large (k-1)-itemsets (flat, sorted); `local`: this rank's candidates;
    /// `eld`: the replicated itemsets (may be empty); `block_bytes`: message block size.
    #[allow(clippy::too_many_arguments)]
    pub fn new(k: usize, parts: u32, me: u32, prev: &[u32], local: Arc<ItemsetIndex>, eld: Option<Arc<ItemsetIndex>>, block_bytes: usize, prune: bool) -> Self {
        assert!(k >= 2 && parts >= 1 && me < parts);
        let km1 = k - 1;
        let trie = Arc::new(Trie::new(prev, km1));
        // With one owner the local lookup already rejects non-candidates: pruning only saves traffic.
        let prune = if prune && k >= 3 && parts > 1 { Some(Arc::new(ItemsetIndex::new(km1, prev.to_vec()))) } else { None };
        let eld = eld.filter(|e| !e.is_empty());
        let eld_counts = vec![0; eld.as_ref().map_or(0, |e| e.len())];
        let block_u32 = (block_bytes / (4 * k)).max(1) * k;
        Router {
            k,
            parts,
            me,
            trie,
            prune,
            local_counts: vec![0; local.len()],
            tri_counts: if k == 2 { local.dense_items().map(|n| (n, vec![0u32; n * (n - 1) / 2])) } else { None },
            local,
            eld,
            eld_counts,
            block_u32,
            bufs: (0..parts).map(|_| Vec::new()).collect(),
            ready: Vec::new(),
            stats: RouterStats::default(),
            first_owner: None,
            scratch: WalkScratch::default(),
        }
    }

    /// Switch to prefix partitioning: a candidate belongs to `owners[its first item]`, and a
    /// transaction travels to each other owner once, as one record `[n, items...]` holding its
    /// items from the first one that owner owns (the owner enumerates its subsets itself).
    /// Without ELD only (ELD itemsets would need every subset enumerated at the sender).
    pub fn with_prefix_owners(mut self, owners: Vec<u32>) -> Self {
        assert!(self.eld.is_none() && owners.iter().all(|&o| o < self.parts));
        self.first_owner = Some(owners);
        self
    }

    /// Count the pair {a, b} (a before b) this rank owns: in the dense triangle when both items
    /// fall in it, else in the local candidate table; false when it is no candidate (a miss).
    #[inline]
    fn count_local_pair(&mut self, a: u32, b: u32) -> bool {
        if let Some((n, tc)) = &mut self.tri_counts {
            let (x, y) = (a as usize, b as usize);
            if x < y && y < *n {
                tc[super::table::tri(*n, x, y)] += 1;
                return true;
            }
        }
        match self.local.get_fast(&[a, b]) {
            Some(i) => {
                self.local_counts[i] += 1;
                true
            }
            None => false,
        }
    }

    /// Count the k-subsets of `tx` whose first item this rank owns (prefix partitioning).
    fn count_owned(&mut self, owners: &[u32], tx: &[u32]) {
        let k = self.k;
        let me = self.me;
        if k == 2 {
            let (mut n_local, mut misses, mut n_sub) = (0u64, 0u64, 0u64);
            for (ai, &a) in tx.iter().enumerate() {
                if owners.get(a as usize) != Some(&me) {
                    continue;
                }
                n_sub += (tx.len() - ai - 1) as u64;
                for &b in &tx[ai + 1..] {
                    if self.count_local_pair(a, b) {
                        n_local += 1;
                    } else {
                        misses += 1;
                    }
                }
            }
            self.stats.enumerated += n_sub;
            self.stats.local += n_local;
            self.stats.local_misses += misses;
            return;
        }
        let Router { trie, local, local_counts, stats, scratch, .. } = self;
        trie.for_each_joinable_from(tx, Some((owners, me)), scratch, &mut |s| {
            stats.enumerated += 1;
            match local.get_fast(s) {
                Some(i) => {
                    local_counts[i] += 1;
                    stats.local += 1;
                }
                None => stats.local_misses += 1,
            }
        });
    }

    /// Prefix partitioning's sender side (see `with_prefix_owners`).
    fn route_prefix(&mut self, offsets: &[i64], items: &[u32], lo: usize, hi: usize) {
        let (k, parts, me, block_u32) = (self.k, self.parts as usize, self.me as usize, self.block_u32);
        let owners = self.first_owner.take().expect("prefix partitioning");
        let mut start = vec![usize::MAX; parts];
        for t in lo..hi {
            let tx = &items[offsets[t] as usize..offsets[t + 1] as usize];
            if tx.len() < k {
                continue;
            }
            // The first position each owner owns, among those that can start a k-subset.
            start.iter_mut().for_each(|s| *s = usize::MAX);
            let mut left = parts;
            for (p, &x) in tx[..tx.len() + 1 - k].iter().enumerate() {
                let o = owners[x as usize] as usize;
                if start[o] == usize::MAX {
                    start[o] = p;
                    left -= 1;
                    if left == 0 {
                        break;
                    }
                }
            }
            for (o, &p) in start.iter().enumerate() {
                if p == usize::MAX || o == me {
                    continue;
                }
                let b = &mut self.bufs[o];
                b.push((tx.len() - p) as u32);
                b.extend_from_slice(&tx[p..]);
                self.stats.sent_itemsets += 1;
                if b.len() >= block_u32 {
                    self.stats.blocks += 1;
                    self.ready.push((o as u32, std::mem::replace(b, Vec::with_capacity(block_u32))));
                }
            }
            if start[me] != usize::MAX {
                self.count_owned(&owners, &tx[start[me]..]);
            }
        }
        self.first_owner = Some(owners);
        self.stats.transactions += (hi - lo) as u64;
    }

    /// Count a received block of prefix records `[n, items...]` (items ascending, below the
    /// number of frequent items). Errors name what is malformed.
    pub fn count_records(&mut self, flat: &[u32]) -> Result<(), String> {
        let owners = self.first_owner.take().ok_or("not in prefix partitioning")?;
        let r = self.count_records_with(&owners, flat);
        self.first_owner = Some(owners);
        r
    }

    fn count_records_with(&mut self, owners: &[u32], flat: &[u32]) -> Result<(), String> {
        let n_items = owners.len();
        let mut i = 0;
        while i < flat.len() {
            let n = flat[i] as usize;
            let rec = flat.get(i + 1..i + 1 + n).ok_or_else(|| format!("record of {n} items overruns the block at word {i}"))?;
            if n == 0 || rec.windows(2).any(|w| w[0] >= w[1]) || rec[n - 1] as usize >= n_items {
                return Err(format!("record at word {i} is not {n} ascending item ranks below {n_items}"));
            }
            self.count_owned(owners, rec);
            i += 1 + n;
        }
        Ok(())
    }

    /// Route transactions `lo..hi` of a CSR batch (items are ranks, ascending).
    pub fn route(&mut self, offsets: &[i64], items: &[u32], lo: usize, hi: usize) {
        if self.first_owner.is_some() {
            self.route_prefix(offsets, items, lo, hi);
            return;
        }
        if self.k == 2 {
            self.route_pairs(offsets, items, lo, hi);
            return;
        }
        let trie = self.trie.clone();
        let mut scratch = WalkScratch::default();
        let mut sub = vec![0u32; self.k.saturating_sub(1)];
        let km1 = self.k - 1;
        let Router { parts, me, prune, local, local_counts, eld, eld_counts, block_u32, bufs, ready, stats, .. } = self;
        let mut emit = |s: &[u32]| {
            stats.enumerated += 1;
            if *parts == 1 && eld.is_none() {
                // Count Distribution / one rank: everything is local, no hash needed.
                match local.get_fast(s) {
                    Some(i) => {
                        local_counts[i] += 1;
                        stats.local += 1;
                    }
                    None => stats.local_misses += 1,
                }
                return;
            }
            let h = itemset_hash(s);
            if let Some(e) = eld {
                if let Some(i) = e.get_hashed(s, h) {
                    eld_counts[i] += 1;
                    stats.eld += 1;
                    return;
                }
            }
            let o = owner_of(h, *parts);
            if o == *me {
                match local.get_hashed(s, h) {
                    Some(i) => {
                        local_counts[i] += 1;
                        stats.local += 1;
                    }
                    None => stats.local_misses += 1,
                }
            } else {
                // The full prune only where it saves traffic: a subset owned here is looked up
                // in this rank's candidates anyway (a non-candidate is a miss, not a send).
                if let Some(ix) = prune {
                    let ok = (0..km1 - 1).all(|d| {
                        sub[..d].copy_from_slice(&s[..d]);
                        sub[d..].copy_from_slice(&s[d + 1..]);
                        ix.get(&sub).is_some()
                    });
                    if !ok {
                        stats.pruned += 1;
                        return;
                    }
                }
                let b = &mut bufs[o as usize];
                b.extend_from_slice(s);
                stats.sent_itemsets += 1;
                if b.len() >= *block_u32 {
                    stats.blocks += 1;
                    ready.push((o, std::mem::replace(b, Vec::with_capacity(*block_u32))));
                }
            }
        };
        for t in lo..hi {
            let tx = &items[offsets[t] as usize..offsets[t + 1] as usize];
            trie.for_each_joinable(tx, &mut scratch, &mut emit);
        }
        self.stats.transactions += (hi - lo) as u64;
    }

    /// Pass 2 fast path. The transactions hold only frequent items (pass 1 reduced them), so
    /// every pair is a candidate: no trie walk, and local pairs go to the dense index.
    fn route_pairs(&mut self, offsets: &[i64], items: &[u32], lo: usize, hi: usize) {
        let (parts, me, block_u32) = (self.parts, self.me, self.block_u32);
        let eld = self.eld.clone();
        let mut n_local = 0u64;
        let mut misses = 0u64;
        let mut sent = 0u64;
        let mut n_sub = 0u64;
        for t in lo..hi {
            let tx = &items[offsets[t] as usize..offsets[t + 1] as usize];
            let n = tx.len() as u64;
            n_sub += n * n.saturating_sub(1) / 2;
            for (ai, &a) in tx.iter().enumerate() {
                for &b in &tx[ai + 1..] {
                    let s = [a, b];
                    if let Some(e) = &eld {
                        if let Some(i) = e.get_fast(&s) {
                            self.eld_counts[i] += 1;
                            self.stats.eld += 1;
                            continue;
                        }
                    }
                    let o = if parts == 1 { me } else { owner_of(itemset_hash(&s), parts) };
                    if o == me {
                        if self.count_local_pair(a, b) {
                            n_local += 1;
                        } else {
                            misses += 1;
                        }
                    } else {
                        let buf = &mut self.bufs[o as usize];
                        buf.extend_from_slice(&s);
                        sent += 1;
                        if buf.len() >= block_u32 {
                            self.stats.blocks += 1;
                            self.ready.push((o, std::mem::replace(buf, Vec::with_capacity(block_u32))));
                        }
                    }
                }
            }
        }
        let st = &mut self.stats;
        st.transactions += (hi - lo) as u64;
        st.enumerated += n_sub;
        st.local += n_local;
        st.local_misses += misses;
        st.sent_itemsets += sent;
    }

    /// This rank's counts of its own candidates (in candidate order).
    pub fn local_counts(&mut self) -> Vec<u64> {
        if let Some((n, tc)) = self.tri_counts.take() {
            for (i, p) in self.local.items.chunks_exact(2).enumerate() {
                let (a, b) = (p[0] as usize, p[1] as usize);
                if a < b && b < n {
                    self.local_counts[i] += tc[super::table::tri(n, a, b)] as u64;
                }
            }
        }
        self.local_counts.clone()
    }

    /// Count a received block of prefix records in its wire form (see [`super::block`]).
    pub fn count_record_block(&mut self, data: &[u8], width: usize) -> Result<(), String> {
        let flat = super::block::decode(data, width, 1)?;
        self.count_records(&flat)
    }

    /// The ready blocks in their wire form (`width`-byte words), emptying `ready`.
    pub fn take_ready_encoded(&mut self, width: usize) -> Vec<(u32, Vec<u8>)> {
        self.ready.drain(..).map(|(o, b)| (o, super::block::encode(&b, width))).collect()
    }

    /// Move the partly filled blocks to `ready` (end of the scan).
    pub fn flush(&mut self) {
        for (o, b) in self.bufs.iter_mut().enumerate() {
            if !b.is_empty() {
                self.stats.blocks += 1;
                self.ready.push((o as u32, std::mem::take(b)));
            }
        }
    }
}

/// Keep the items that `map` sends somewhere (`map[item] != u32::MAX`; ids past its end are
/// dropped), replace them by `map[item]`, sort each transaction and drop those shorter than
/// `min_len`.
pub fn reduce_transactions(offsets: &[i64], items: &[u32], map: &[u32], min_len: usize) -> Baskets {
    // Branch-free filter: every mapped item is written at `len`, which advances only past kept
    // ones. A branch on "kept" mispredicts on a pass's mix of kept and dropped items (about
    // half each); `out` is sized for all items, so the write never needs a capacity check.
    let mut out = vec![0u32; items.len()];
    let mut offs = vec![0i64];
    let mut len = 0usize;
    for w in offsets.windows(2) {
        let start = len;
        for &x in &items[w[0] as usize..w[1] as usize] {
            let m = map.get(x as usize).copied().unwrap_or(NONE);
            out[len] = m;
            len += (m != NONE) as usize;
        }
        if len - start < min_len {
            len = start;
            continue;
        }
        len = start + normalize_slice(&mut out[start..len]);
        offs.push(len as i64);
    }
    out.truncate(len);
    Baskets { offsets: offs, items: out }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hpa::candidates::apriori_gen_filtered;

    fn subsets(t: &[u32], k: usize) -> Vec<Vec<u32>> {
        if k == 0 {
            return vec![vec![]];
        }
        let mut out = Vec::new();
        for i in 0..t.len() {
            for mut r in subsets(&t[i + 1..], k - 1) {
                r.insert(0, t[i]);
                out.push(r);
            }
        }
        out
    }

    #[test]
    fn joinable_subsets_are_the_candidates_in_the_transaction() {
        let prev: Vec<u32> = vec![1, 2, 1, 3, 1, 4, 2, 3, 2, 4, 3, 5];
        let trie = Trie::new(&prev, 2);
        let t = [1u32, 2, 3, 4, 5];
        let mut got = Vec::new();
        let mut sc = WalkScratch::default();
        trie.for_each_joinable(&t, &mut sc, &mut |s| got.push(s.to_vec()));
        // Joins: 12+13, 12+14, 13+14, 23+24 (35 joins nothing).
        assert_eq!(got, vec![vec![1, 2, 3], vec![1, 2, 4], vec![1, 3, 4], vec![2, 3, 4]]);
        let cands = apriori_gen_filtered(&prev, 2, |_| true);
        for c in cands.chunks(3) {
            assert!(got.contains(&c.to_vec()));
        }
    }

    #[test]
    fn routing_counts_equal_brute_force() {
        let txs: Vec<Vec<u32>> = (0..300u32).map(|i| (0..12u32).filter(|j| (i * 7 + j * 3) % 5 < 3).collect()).collect();
        let b = Baskets::from_lists(&txs);
        let prev: Vec<u32> = subsets(&(0..12).collect::<Vec<_>>(), 2).concat();
        let cands = apriori_gen_filtered(&prev, 2, |_| true);
        for parts in 1..4u32 {
            let mut total = vec![0u64; cands.len() / 3];
            let mut received: Vec<Vec<u32>> = vec![Vec::new(); parts as usize];
            let mut tables = Vec::new();
            for me in 0..parts {
                let mine: Vec<u32> = cands.chunks(3).filter(|c| owner_of(itemset_hash(c), parts) == me).flatten().copied().collect();
                let ix = Arc::new(ItemsetIndex::new(3, mine));
                let mut r = Router::new(3, parts, me, &prev, ix.clone(), None, 64, true);
                // Each rank scans a third of the transactions.
                let n = b.len();
                let (lo, hi) = (n * me as usize / parts as usize, n * (me as usize + 1) / parts as usize);
                r.route(&b.offsets, &b.items, lo, hi);
                r.flush();
                for (o, blk) in r.ready.drain(..) {
                    assert!(blk.len() <= 64 / 4 / 3 * 3);
                    received[o as usize].extend(blk);
                }
                tables.push((ix, r.local_counts()));
            }
            for (me, (ix, mut counts)) in tables.into_iter().enumerate() {
                assert_eq!(ix.count_flat(&received[me], &mut counts), 0);
                for (i, c) in ix.items.chunks(3).enumerate() {
                    let g = cands.chunks(3).position(|x| x == c).unwrap();
                    total[g] += counts[i];
                }
            }
            for (g, c) in cands.chunks(3).enumerate() {
                let brute = txs.iter().filter(|t| c.iter().all(|x| t.contains(x))).count() as u64;
                assert_eq!(total[g], brute, "parts={parts} cand={c:?}");
            }
        }
    }

    #[test]
    fn prefix_routing_counts_equal_brute_force() {
        let txs: Vec<Vec<u32>> = (0..300u32).map(|i| (0..12u32).filter(|j| (i * 7 + j * 3) % 5 < 3).collect()).collect();
        let b = Baskets::from_lists(&txs);
        for k in 2..4usize {
            let prev: Vec<u32> = subsets(&(0..12).collect::<Vec<_>>(), k - 1).concat();
            let cands = apriori_gen_filtered(&prev, k - 1, |_| true);
            for parts in 1..4u32 {
                let owners: Vec<u32> = (0..12u32).map(|x| (x * 5 + 1) % parts).collect();
                let mut received: Vec<Vec<u32>> = vec![Vec::new(); parts as usize];
                let mut routers = Vec::new();
                for me in 0..parts {
                    let mine: Vec<u32> = cands.chunks(k).filter(|c| owners[c[0] as usize] == me).flatten().copied().collect();
                    let mut ix = ItemsetIndex::new(k, mine);
                    if k == 2 {
                        ix = ix.with_dense_pairs(12);
                    }
                    let ix = Arc::new(ix);
                    let mut r = Router::new(k, parts, me, &prev, ix.clone(), None, 64, true).with_prefix_owners(owners.clone());
                    let n = b.len();
                    let (lo, hi) = (n * me as usize / parts as usize, n * (me as usize + 1) / parts as usize);
                    r.route(&b.offsets, &b.items, lo, hi);
                    r.flush();
                    for (o, blk) in r.ready.drain(..) {
                        received[o as usize].extend(blk);
                    }
                    routers.push((ix, r));
                }
                let mut total = vec![0u64; cands.len() / k];
                for (me, (ix, r)) in routers.iter_mut().enumerate() {
                    r.count_records(&received[me]).unwrap();
                    for (i, c) in ix.items.chunks(k).enumerate() {
                        total[cands.chunks(k).position(|x| x == c).unwrap()] += r.local_counts()[i];
                    }
                }
                for (g, c) in cands.chunks(k).enumerate() {
                    let brute = txs.iter().filter(|t| c.iter().all(|x| t.contains(x))).count() as u64;
                    assert_eq!(total[g], brute, "k={k} parts={parts} cand={c:?}");
                }
            }
        }
        let mut r = Router::new(2, 2, 0, &[0, 1, 2], Arc::new(ItemsetIndex::new(2, vec![0, 1])), None, 64, true).with_prefix_owners(vec![0, 1, 0]);
        assert!(r.count_records(&[3, 0, 1]).is_err());
        assert!(r.count_records(&[2, 1, 0]).is_err());
        assert!(r.count_records(&[2, 0, 7]).is_err());
        assert!(r.count_records(&[2, 0, 2]).is_ok());
    }

    #[test]
    fn reduce_maps_sorts_and_drops_short() {
        let b = Baskets::from_lists([vec![0u32, 1, 2, 9], vec![1], vec![2, 3]]);
        let map = [5, NONE, 1, 0];
        let r = reduce_transactions(&b.offsets, &b.items, &map, 2);
        assert_eq!(r.iter().collect::<Vec<_>>(), vec![&[1, 5][..], &[0, 1][..]]);
    }

    #[test]
    fn reduce_equals_a_plain_reference_on_random_input() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        for _ in 0..500 {
            // Offsets may start past 0; ids may lie past the map's end; the map may send two ids
            // to one value and break the order (so sorting and deduplication are exercised).
            let first = rng.gen_range(0..3usize);
            let mut items: Vec<u32> = (0..first).map(|_| rng.gen_range(0..60)).collect();
            let mut offsets = vec![first as i64];
            for _ in 0..rng.gen_range(0..40) {
                for _ in 0..rng.gen_range(0..30) {
                    items.push(rng.gen_range(0..60));
                }
                offsets.push(items.len() as i64);
            }
            let keep = rng.gen_range(0.0..1.0);
            let map: Vec<u32> = (0..rng.gen_range(0..50)).map(|_| if rng.gen_bool(keep) { rng.gen_range(0..20) } else { NONE }).collect();
            let min_len = rng.gen_range(0..5);
            let mut want = Baskets::new();
            for w in offsets.windows(2) {
                let mut t: Vec<u32> = items[w[0] as usize..w[1] as usize].iter().filter_map(|&x| map.get(x as usize).copied().filter(|&m| m != NONE)).collect();
                if t.len() < min_len {
                    continue;
                }
                t.sort_unstable();
                t.dedup();
                want.items.extend(&t);
                want.offsets.push(want.items.len() as i64);
            }
            assert_eq!(reduce_transactions(&offsets, &items, &map, min_len), want);
        }
    }
}
