//! Pass 2 of every level-wise or first-level miner: the support of every pair of frequent
//! items in one triangular array (one memory access per pair held by a transaction, no
//! candidate lookup). The same kernel serves the sequential miners and Count Distribution's
//! rank (which counts its share and all-reduces the triangle).
//!
//! Layout: items are ranks `0..n` ascending inside a transaction; the pair `(a, b)`, `a < b`,
//! is at [`tri`]`(n, a, b)` (row-major, so the array is in lexicographic pair order).

use super::prep::{chunk_ranges, IdLookup};
use super::BasketsRef;
use rayon::prelude::*;

/// Index of the pair `(a, b)`, `a < b < n`, in the row-major upper triangle.
#[inline]
pub fn tri(n: usize, a: usize, b: usize) -> usize {
    a * n - a * (a + 1) / 2 + (b - a - 1)
}

/// Entries of the triangle over `n` ranks.
pub fn tri_len(n: usize) -> usize {
    n * n.saturating_sub(1) / 2
}

/// Add every pair of each transaction (`offsets`/`items`, ranks below `n` ascending) to
/// `counts` (length [`tri_len`]`(n)`).
pub fn count_pairs_into(offsets: &[i64], items: &[u32], n: usize, counts: &mut [u32]) {
    assert_eq!(counts.len(), tri_len(n), "pair counters for {n} ranks");
    for w in offsets.windows(2) {
        let t = &items[w[0] as usize..w[1] as usize];
        for (i, &a) in t.iter().enumerate() {
            let a1 = a as usize + 1;
            // Row a starts at tri(n, a, a + 1) (at most the array's length: a < n).
            let row = &mut counts[tri(n, a as usize, a1)..];
            for &b in &t[i + 1..] {
                row[b as usize - a1] += 1;
            }
        }
    }
}

/// Pair counts of transactions whose items are ranks below `n`, ascending.
pub fn count_pairs(offsets: &[i64], items: &[u32], n: usize) -> Vec<u32> {
    let mut c = vec![0u32; tri_len(n)];
    count_pairs_into(offsets, items, n, &mut c);
    c
}

/// Transactions recoded per block before counting: small enough to stay in cache.
const BLOCK_ITEMS: usize = 1 << 16;

/// Pair counts of an unweighted input straight from its item ids: each block of
/// transactions is recoded by `rank_of` (an id -> rank map that keeps id order; `NONE`
/// drops the item) into a small buffer and counted by [`count_pairs_into`], so the recoded
/// input never exists whole. One triangle per thread, summed.
pub(crate) fn count_pairs_streamed(db: BasketsRef<'_>, rank_of: &IdLookup, n: usize) -> Vec<u32> {
    assert!(db.weights.is_none(), "streamed pair counts are unweighted");
    let len = tri_len(n);
    chunk_ranges(db.len(), 4)
        .into_par_iter()
        .fold(
            || (vec![0u32; len], vec![0i64], Vec::<u32>::new()),
            |(mut acc, mut offs, mut buf), (a, b)| {
                let mut t = a;
                while t < b {
                    offs.truncate(1);
                    buf.clear();
                    while t < b && buf.len() < BLOCK_ITEMS {
                        let start = buf.len();
                        rank_of.extend_mapped(db.transaction(t), &mut buf);
                        if buf.len() - start < 2 {
                            buf.truncate(start);
                        } else {
                            offs.push(buf.len() as i64);
                        }
                        t += 1;
                    }
                    count_pairs_into(&offs, &buf, n, &mut acc);
                }
                (acc, offs, buf)
            },
        )
        .map(|x| x.0)
        .reduce(|| vec![0u32; len], super::prep::add_into)
}

#[cfg(test)]
mod tests {
    use super::super::prep::NONE;
    use super::*;

    #[test]
    fn triangle_counts_as_brute_force() {
        let b = crate::mining::testutil::random_baskets(3, 500, 30, 9);
        let c = count_pairs(&b.offsets, &b.items, 30);
        for a in 0..30u32 {
            for x in a + 1..30u32 {
                let bf = b.iter().filter(|t| t.contains(&a) && t.contains(&x)).count() as u32;
                assert_eq!(c[tri(30, a as usize, x as usize)], bf);
            }
        }
        // Streamed from ids (id 2r+7 is rank r; odd-ranked ids and id 0 dropped).
        let ids = crate::Baskets::from_lists(b.iter().map(|t| t.iter().map(|&r| 2 * r + 7).chain([0]).collect::<Vec<u32>>()));
        let mut table = vec![NONE; 80];
        for r in 0..30u32 {
            table[(2 * r + 7) as usize] = r;
        }
        let streamed = count_pairs_streamed(BasketsRef::from_baskets(&ids), &IdLookup::Dense(table), 30);
        assert_eq!(streamed, c);
    }
}
