//! Apriori candidate generation (join + prune) that keeps only the candidates a filter accepts,
//! so each HPA rank pays the (expensive) prune only for its own partition.

use super::table::ItemsetIndex;

/// Candidate k-itemsets from the large (k-1)-itemsets `prev` (flat, lexicographically sorted,
/// `km1` items each). A candidate is the join of two itemsets sharing their first `km1 - 1`
/// items; it is kept when `keep(candidate)` holds and every (k-1)-subset is in `prev`.
/// Output is flat and lexicographic.
pub fn apriori_gen_filtered(prev: &[u32], km1: usize, mut keep: impl FnMut(&[u32]) -> bool) -> Vec<u32> {
    assert!(km1 > 0 && prev.len().is_multiple_of(km1));
    let n = prev.len() / km1;
    let k = km1 + 1;
    let index = if km1 >= 2 { Some(ItemsetIndex::new(km1, prev.to_vec())) } else { None };
    let row = |i: usize| &prev[i * km1..(i + 1) * km1];
    let mut out = Vec::new();
    let mut c = vec![0u32; k];
    let mut sub = vec![0u32; km1];
    let mut g = 0;
    while g < n {
        // The group of rows sharing the first km1-1 items.
        let mut e = g + 1;
        while e < n && row(e)[..km1 - 1] == row(g)[..km1 - 1] {
            e += 1;
        }
        for i in g..e {
            c[..km1].copy_from_slice(row(i));
            for j in i + 1..e {
                c[km1] = row(j)[km1 - 1];
                if !keep(&c) {
                    continue;
                }
                // Prune: the subsets without c[d] for d < km1-1 (the two others are rows i, j).
                let ok = match &index {
                    None => true,
                    Some(ix) => (0..km1 - 1).all(|d| {
                        sub[..d].copy_from_slice(&c[..d]);
                        sub[d..].copy_from_slice(&c[d + 1..]);
                        ix.get(&sub).is_some()
                    }),
                };
                if ok {
                    out.extend_from_slice(&c);
                }
            }
        }
        g = e;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_and_prune() {
        // L2 = {12, 13, 14, 23, 24} -> C3 = {123, 124} (134 pruned: 34 missing).
        let c = apriori_gen_filtered(&[1, 2, 1, 3, 1, 4, 2, 3, 2, 4], 2, |_| true);
        assert_eq!(c, vec![1, 2, 3, 1, 2, 4]);
        let c = apriori_gen_filtered(&[0, 5, 9], 1, |_| true);
        assert_eq!(c, vec![0, 5, 0, 9, 5, 9]);
        let c = apriori_gen_filtered(&[0, 5, 9], 1, |s| s[0] == 5);
        assert_eq!(c, vec![5, 9]);
        assert!(apriori_gen_filtered(&[], 3, |_| true).is_empty());
    }
}

/// HPA-ELD split of the candidates: every candidate (join + prune), then the replicated set E
/// = the candidates whose items are all among the `h` most frequent, with `h` the largest
/// value that keeps `|E| <= eld_max`. `freq_pos[item]` is the item's position in descending
/// frequency order. Returns (E, this rank's partition of the rest).
pub fn eld_split(prev: &[u32], km1: usize, freq_pos: &[u32], eld_max: usize, mut mine: impl FnMut(&[u32]) -> bool) -> (Vec<u32>, Vec<u32>) {
    let all = apriori_gen_filtered(prev, km1, |_| true);
    let k = km1 + 1;
    let maxpos: Vec<u32> = all.chunks_exact(k).map(|c| c.iter().map(|&x| freq_pos[x as usize]).max().unwrap_or(0)).collect();
    let mut sorted = maxpos.clone();
    sorted.sort_unstable();
    // h = the largest cut with at most eld_max candidates strictly below it.
    let h = if sorted.len() <= eld_max {
        u32::MAX
    } else {
        // Candidates with maxpos < sorted[eld_max] number at most eld_max.
        sorted[eld_max]
    };
    let (mut eld, mut own) = (Vec::new(), Vec::new());
    for (c, &m) in all.chunks_exact(k).zip(&maxpos) {
        if m < h {
            eld.extend_from_slice(c);
        } else if mine(c) {
            own.extend_from_slice(c);
        }
    }
    (eld, own)
}

#[cfg(test)]
mod eld_tests {
    use super::*;

    #[test]
    fn eld_takes_the_most_frequent_items_within_budget() {
        // Items 0..5, frequency order 4,3,2,1,0; C2 = all 10 pairs.
        let freq_pos = [4, 3, 2, 1, 0];
        let (e, own) = eld_split(&[0, 1, 2, 3, 4], 1, &freq_pos, 3, |_| true);
        // Pairs within the top 3 items {4,3,2}: 23, 24, 34.
        assert_eq!(e, vec![2, 3, 2, 4, 3, 4]);
        assert_eq!(own.len() / 2, 7);
        let (e, own) = eld_split(&[0, 1, 2, 3, 4], 1, &freq_pos, 100, |_| true);
        assert_eq!((e.len() / 2, own.len()), (10, 0));
        let (e, _) = eld_split(&[0, 1, 2, 3, 4], 1, &freq_pos, 0, |_| true);
        assert!(e.is_empty());
    }
}
