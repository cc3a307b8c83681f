//! FP-growth on a compact array-based FP-tree.
//!
//! The first level comes from [`super::prep`]: each frequent item's conditional database is
//! delivered straight from the transactions (no global tree: a 10M-transaction input would
//! make a tree of tens of millions of nodes whose projections miss the cache at every parent
//! link). Each conditional database is recoded by descending local frequency and built into
//! a tree from its transactions sorted lexicographically in one linear pass (each
//! transaction shares exactly its common prefix with the previous one: no child lookups). The conditional tree of an item is
//! projected straight from its parent tree (ancestors copied once, counts summed bottom-up,
//! infrequent items and perfect extensions relinked away); a tree that is a single path emits
//! all combinations of its items directly. The first level runs in parallel over items.
//! Transactions may carry weights (conditional or grouped databases, as PFP uses).

use super::itemsets::{Emitter, Itemsets, Limit, MineParams};
use super::prep::{self, Cond, Extend};
use super::{BasketsRef, MineError};
use rayon::prelude::*;

const ROOT: u32 = 0;

thread_local! {
    static SCRATCH: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A weighted database in local item codes (code 0 = most frequent), items ascending.
struct CodedDb {
    offsets: Vec<usize>,
    items: Vec<u32>,
    weights: Vec<u64>,
}

impl CodedDb {
    fn with_capacity(n: usize, m: usize) -> Self {
        let mut offsets = Vec::with_capacity(n + 1);
        offsets.push(0);
        CodedDb { offsets, items: Vec::with_capacity(m), weights: Vec::with_capacity(n) }
    }
    fn len(&self) -> usize {
        self.weights.len()
    }
    fn tx(&self, t: usize) -> &[u32] {
        &self.items[self.offsets[t]..self.offsets[t + 1]]
    }
    /// Close the transaction whose items were pushed since the last call (sorting them).
    fn close(&mut self, w: u64) {
        let s = *self.offsets.last().unwrap();
        if self.items.len() == s {
            return;
        }
        self.items[s..].sort_unstable();
        self.offsets.push(self.items.len());
        self.weights.push(w);
    }
}

struct Tree {
    item: Vec<u32>,
    parent: Vec<u32>,
    count: Vec<u64>,
    /// Nodes of item j: head[head_start[j]..head_start[j + 1]].
    head_start: Vec<u32>,
    head: Vec<u32>,
    /// Total count of each item.
    item_count: Vec<u64>,
}

impl Tree {
    fn build(db: &CodedDb, n_items: usize, parallel: bool) -> Tree {
        let mut order: Vec<u32> = (0..db.len() as u32).collect();
        if parallel {
            order.par_sort_unstable_by(|&a, &b| db.tx(a as usize).cmp(db.tx(b as usize)));
        } else {
            order.sort_unstable_by(|&a, &b| db.tx(a as usize).cmp(db.tx(b as usize)));
        }
        let mut item = vec![u32::MAX];
        let mut parent = vec![ROOT];
        let mut count = vec![0u64];
        let mut path: Vec<u32> = Vec::new();
        let mut prev: &[u32] = &[];
        for &t in &order {
            let tx = db.tx(t as usize);
            let w = db.weights[t as usize];
            let l = tx.iter().zip(prev).take_while(|(a, b)| a == b).count();
            path.truncate(l);
            for &x in &path {
                count[x as usize] += w;
            }
            for &it in &tx[l..] {
                let node = item.len() as u32;
                item.push(it);
                parent.push(path.last().copied().unwrap_or(ROOT));
                count.push(w);
                path.push(node);
            }
            prev = tx;
        }
        Tree::finish(item, parent, count, n_items)
    }

    /// Header table by counting sort of the nodes over items.
    fn finish(item: Vec<u32>, parent: Vec<u32>, count: Vec<u64>, n_items: usize) -> Tree {
        let mut head_start = vec![0u32; n_items + 1];
        let mut item_count = vec![0u64; n_items];
        for x in 1..item.len() {
            head_start[item[x] as usize + 1] += 1;
            item_count[item[x] as usize] += count[x];
        }
        for j in 0..n_items {
            head_start[j + 1] += head_start[j];
        }
        let mut fill = head_start.clone();
        let mut head = vec![0u32; item.len() - 1];
        for x in 1..item.len() {
            let j = item[x] as usize;
            head[fill[j] as usize] = x as u32;
            fill[j] += 1;
        }
        Tree { item, parent, count, head_start, head, item_count }
    }

    fn nodes(&self, j: usize) -> &[u32] {
        &self.head[self.head_start[j] as usize..self.head_start[j + 1] as usize]
    }

    /// True when every node has the previous node as parent (one chain from the root).
    fn single_path(&self) -> bool {
        (2..self.item.len()).all(|x| self.parent[x] == x as u32 - 1)
    }
}

/// Mine the tree whose local codes map to original ids through `orig`.
fn mine_tree(tree: &Tree, orig: &[u32], counts: Option<&[u64]>, p: &MineParams, em: &mut Emitter) {
    if counts.is_none() && tree.single_path() {
        let chain: Vec<(u32, u64)> = (1..tree.item.len()).map(|x| (orig[tree.item[x] as usize], tree.count[x])).collect();
        combos(&chain, 0, p, em);
        return;
    }
    for j in (0..orig.len()).rev() {
        if em.limit.stopped() {
            return;
        }
        mine_item(tree, j, orig, counts.map(|c| c[j]), p, em);
    }
}

/// Every non-empty combination of a single path (with the current prefix); the count of a
/// combination is the count of its deepest node.
fn combos(chain: &[(u32, u64)], start: usize, p: &MineParams, em: &mut Emitter) {
    for i in start..chain.len() {
        em.prefix.push(chain[i].0);
        em.emit(chain[i].1);
        if em.prefix.len() < p.max_len {
            combos(chain, i + 1, p, em);
        }
        em.prefix.pop();
    }
}

/// The conditional tree of item j (prefix count `count`), projected straight from the tree,
/// or None when no item is left to mine. Pass 1 copies the ancestors of j's nodes once each
/// (memo in `em.scratch`, reset before returning: the climb stops at an ancestor already
/// copied, so the cost is the number of distinct ancestors, not the sum of path lengths) and
/// sums the j-node counts bottom-up. Pass 2 drops infrequent items and perfect extensions
/// (pushed to `em.pe`) by relinking each kept node to its nearest kept ancestor. No
/// transaction list is built or sorted.
fn project(tree: &Tree, j: usize, count: u64, orig: &[u32], p: &MineParams, em: &mut Emitter) -> Option<(Tree, Vec<u32>)> {
    const NONE: u32 = u32::MAX;
    if em.scratch.len() < tree.item.len() {
        em.scratch.resize(tree.item.len(), NONE);
    }
    let memo = &mut em.scratch;
    let mut item = vec![u32::MAX];
    let mut parent = vec![ROOT];
    let mut cnt = vec![0u64];
    let mut touched: Vec<u32> = Vec::new();
    let mut climb: Vec<u32> = Vec::new();
    for &x in tree.nodes(j) {
        climb.clear();
        let mut y = tree.parent[x as usize];
        while y != ROOT && memo[y as usize] == NONE {
            climb.push(y);
            y = tree.parent[y as usize];
        }
        let mut top = if y == ROOT { ROOT } else { memo[y as usize] };
        for &z in climb.iter().rev() {
            let nn = item.len() as u32;
            item.push(tree.item[z as usize]);
            parent.push(top);
            cnt.push(0);
            top = nn;
            memo[z as usize] = nn;
            touched.push(z);
        }
        cnt[top as usize] += tree.count[x as usize];
    }
    for z in touched {
        memo[z as usize] = NONE;
    }
    // Children come after their parents: one reverse pass sums counts bottom-up.
    for v in (1..item.len()).rev() {
        let c = cnt[v];
        cnt[parent[v] as usize] += c;
    }
    let mut isup = vec![0u64; j];
    for v in 1..item.len() {
        isup[item[v] as usize] += cnt[v];
    }
    // Items in every transaction of the base are perfect extensions: set aside, not mined.
    em.pe.extend((0..j).filter(|&c| isup[c] == count).map(|c| orig[c]));
    let mut code = vec![NONE; j];
    let mut sub_orig = Vec::new();
    for c in 0..j {
        if isup[c] >= p.min_count && isup[c] != count {
            code[c] = sub_orig.len() as u32;
            sub_orig.push(orig[c]);
        }
    }
    if sub_orig.is_empty() {
        return None;
    }
    let mut map = vec![ROOT; item.len()];
    let (mut ni, mut np, mut nc) = (vec![u32::MAX], vec![ROOT], vec![0u64]);
    for v in 1..item.len() {
        let pm = map[parent[v] as usize];
        let c = code[item[v] as usize];
        if c == NONE {
            map[v] = pm;
        } else {
            map[v] = ni.len() as u32;
            ni.push(c);
            np.push(pm);
            nc.push(cnt[v]);
        }
    }
    let n_new = sub_orig.len();
    Some((Tree::finish(ni, np, nc, n_new), sub_orig))
}

/// Mine item j of the tree; `count` overrides the tree's count of j (a pair-filtered first
/// level leaves out transactions that hold j alone, so the tree undercounts j there).
fn mine_item(tree: &Tree, j: usize, orig: &[u32], count: Option<u64>, p: &MineParams, em: &mut Emitter) {
    let count = count.unwrap_or(tree.item_count[j]);
    if count < p.min_count {
        return;
    }
    em.prefix.push(orig[j]);
    let pe_len = em.pe.len();
    let sub = if em.prefix.len() < p.max_len && j > 0 { project(tree, j, count, orig, p, em) } else { None };
    em.emit(count);
    if let Some((t, o)) = sub {
        mine_tree(&t, &o, None, p, em);
    }
    em.pe.truncate(pe_len);
    em.prefix.pop();
}

/// The FP-growth miner of a first-level conditional database.
pub(crate) struct FpGrowth;

impl Extend for FpGrowth {
    fn mine(&self, c: Cond<'_>, em: &mut Emitter<'_>, p: &MineParams) {
        let k = c.k();
        // Recode by descending local count (ties by code): frequent items near the root.
        let mut order: Vec<u32> = (0..k as u32).collect();
        order.sort_by(|&a, &b| c.counts[b as usize].cmp(&c.counts[a as usize]).then(a.cmp(&b)));
        let mut code = vec![0u32; k];
        for (r, &x) in order.iter().enumerate() {
            code[x as usize] = r as u32;
        }
        let mut cdb = CodedDb::with_capacity(c.n_tx(), c.items.len());
        for t in 0..c.n_tx() {
            cdb.items.extend(c.tx(t).iter().map(|&x| code[x as usize]));
            cdb.close(c.weight(t));
        }
        let tree = Tree::build(&cdb, k, false);
        drop(cdb);
        let orig: Vec<u32> = order.iter().map(|&x| c.orig[x as usize]).collect();
        let counts: Vec<u64> = order.iter().map(|&x| c.counts[x as usize]).collect();
        // The projection memo spans the tree: keep one per thread, not per item.
        em.scratch = SCRATCH.with(|s| std::mem::take(&mut *s.borrow_mut()));
        mine_tree(&tree, &orig, Some(&counts), p, em);
        SCRATCH.with(|s| *s.borrow_mut() = std::mem::take(&mut em.scratch));
    }
}

/// All frequent itemsets of `db` (items ascending in each transaction; optional weights),
/// in canonical order, without a limit on their number (the kernel PFP runs on each group's
/// conditional database).
pub fn fpgrowth(db: BasketsRef<'_>, p: &MineParams) -> Itemsets {
    prep::mine_all(db, p, &Limit::unlimited(), &FpGrowth)
}

/// [`fpgrowth`] stopped by `limit` (an error once more itemsets than its maximum are found).
pub fn fpgrowth_limited(db: BasketsRef<'_>, p: &MineParams, limit: &Limit) -> Result<Itemsets, MineError> {
    let r = prep::mine_all(db, p, limit, &FpGrowth);
    MineError::check(limit).map(|_| r)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn weighted_equals_repeated() {
        let b = random_baskets(3, 60, 10, 7);
        let w: Vec<u64> = (0..b.len() as u64).map(|t| t % 4 + 1).collect();
        let mut rep = Vec::new();
        for (t, tx) in b.iter().enumerate() {
            for _ in 0..w[t] {
                rep.push(tx.to_vec());
            }
        }
        let rb = crate::Baskets::from_lists(rep);
        let got = fpgrowth(BasketsRef::new(&b.offsets, &b.items, Some(&w)).unwrap(), &MineParams::new(12));
        assert_eq!(got, brute_force(&rb, 12));
    }

    #[test]
    fn single_path_and_limits() {
        let b = crate::Baskets::from_lists([vec![1u32, 2, 3], vec![1, 2, 3], vec![1, 2]]);
        let got = fpgrowth(BasketsRef::from_baskets(&b), &MineParams::new(2));
        assert_eq!(got.len(), 7);
        let got = fpgrowth(BasketsRef::from_baskets(&b), &MineParams { min_count: 2, min_len: 2, max_len: 2 });
        assert_eq!(got.items, vec![1, 2, 1, 3, 2, 3]);
        assert_eq!(got.counts, vec![3, 2, 2]);
    }
}
