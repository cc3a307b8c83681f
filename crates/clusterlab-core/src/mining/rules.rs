//! Association rules X -> Y from all frequent itemsets (X ∪ Y frequent, X ∩ Y = ∅, both
//! non-empty). Confidence = count(X ∪ Y) / count(X). Consequents grow level-wise from the
//! single items, keeping only consequents whose rule reached the minimum confidence
//! (confidence can only drop when an item moves from the antecedent to the consequent), so
//! multi-item consequents cost little more than single ones. Antecedent and consequent
//! counts are found by binary search in the canonical itemsets.

use super::itemsets::Itemsets;
use rayon::prelude::*;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    pub antecedents: Itemsets,
    /// `consequents.counts` holds the count of the consequent alone.
    pub consequents: Itemsets,
    /// Count of antecedent ∪ consequent.
    pub counts: Vec<u64>,
}

impl Rules {
    pub fn len(&self) -> usize {
        self.counts.len()
    }
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}

/// Rules with confidence >= `min_confidence`; single-item consequents unless `multi`.
/// `all` must be canonical and contain every subset of its itemsets (target "all",
/// no minimum length), else an error names the missing subset.
pub fn rules(all: &Itemsets, min_confidence: f64, multi: bool) -> Result<Rules, String> {
    let starts = all.length_starts();
    let chunk = 4096;
    let parts: Vec<Result<Rules, String>> = (0..all.len().div_ceil(chunk))
        .into_par_iter()
        .map(|c| {
            let mut r = Rules { antecedents: Itemsets::new(), consequents: Itemsets::new(), counts: Vec::new() };
            let (mut abuf, mut cbuf) = (Vec::new(), Vec::new());
            for i in c * chunk..((c + 1) * chunk).min(all.len()) {
                let s = all.itemset(i);
                let k = s.len();
                if k < 2 {
                    continue;
                }
                if k > 64 {
                    return Err(format!("itemset of length {k} is too long for rule generation (at most 64 items)"));
                }
                let n = all.counts[i];
                let mut level: Vec<u64> = (0..k).map(|b| 1u64 << b).collect();
                let mut size = 1;
                while !level.is_empty() && size < k {
                    let mut pass = Vec::new();
                    for &m in &level {
                        abuf.clear();
                        cbuf.clear();
                        for (b, &it) in s.iter().enumerate() {
                            if m >> b & 1 == 1 { cbuf.push(it) } else { abuf.push(it) }
                        }
                        let lookup = |x: &[u32]| {
                            all.find(&starts, x).map(|j| all.counts[j]).ok_or_else(|| {
                                format!("itemset {x:?} (a subset of frequent itemset {s:?}) is missing: rules need all frequent itemsets (target \"all\", min_len 1)")
                            })
                        };
                        let ac = lookup(&abuf)?;
                        if n as f64 / ac as f64 >= min_confidence {
                            let cc = lookup(&cbuf)?;
                            r.antecedents.push(&abuf, ac);
                            r.consequents.push(&cbuf, cc);
                            r.counts.push(n);
                            pass.push(m);
                        }
                    }
                    if !multi {
                        break;
                    }
                    size += 1;
                    let mut next = Vec::new();
                    for a in 0..pass.len() {
                        for b in a + 1..pass.len() {
                            let u = pass[a] | pass[b];
                            if u.count_ones() as usize == size {
                                next.push(u);
                            }
                        }
                    }
                    next.sort_unstable();
                    next.dedup();
                    level = next;
                }
            }
            Ok(r)
        })
        .collect();
    let mut out = Rules { antecedents: Itemsets::new(), consequents: Itemsets::new(), counts: Vec::new() };
    for p in parts {
        let p = p?;
        out.antecedents.append(&p.antecedents);
        out.consequents.append(&p.consequents);
        out.counts.extend_from_slice(&p.counts);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn rules_match_brute_force() {
        for seed in 0..10 {
            let b = random_baskets(seed, 60, 7, 6);
            let all = brute_force(&b, 3);
            let st = all.length_starts();
            for multi in [false, true] {
                let r = rules(&all, 0.5, multi).unwrap();
                // Brute force: every split of every itemset.
                let mut want = Vec::new();
                for (s, n) in all.iter() {
                    for m in 1u64..(1 << s.len()) - 1 {
                        if !multi && m.count_ones() != 1 {
                            continue;
                        }
                        let a: Vec<u32> = (0..s.len()).filter(|&x| m >> x & 1 == 0).map(|x| s[x]).collect();
                        let c: Vec<u32> = (0..s.len()).filter(|&x| m >> x & 1 == 1).map(|x| s[x]).collect();
                        let ac = all.counts[all.find(&st, &a).unwrap()];
                        if n as f64 / ac as f64 >= 0.5 {
                            want.push((a, c, n));
                        }
                    }
                }
                let mut got: Vec<_> = (0..r.len()).map(|i| (r.antecedents.itemset(i).to_vec(), r.consequents.itemset(i).to_vec(), r.counts[i])).collect();
                got.sort();
                want.sort();
                assert_eq!(got, want, "seed {seed} multi {multi}");
            }
        }
    }

    #[test]
    fn missing_subset_is_an_error() {
        let mut s = Itemsets::new();
        s.push(&[1], 3);
        s.push(&[1, 2], 2);
        assert!(rules(&s, 0.1, false).unwrap_err().contains("[2]"));
    }
}
