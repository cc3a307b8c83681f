//! Frequent itemset mining (Apriori, FP-growth, Eclat), closed/maximal filtering and
//! association rules.
//!
//! Every miner returns an [`Itemsets`] in canonical form (CSR, items ascending inside an
//! itemset, itemsets sorted by (length, items)), identical whatever the thread count.
//! Reusable kernels for the parallel miners: [`apriori::apriori_gen`],
//! [`apriori::count_candidates`], [`fpgrowth::fpgrowth`] (accepts per-transaction weights)
//! and [`crate::stats::item_counts`].

// Index loops over parallel CSR arrays read more plainly than zipped iterators here.
#![allow(clippy::needless_range_loop)]

pub mod apriori;
pub mod closed;
pub mod eclat;
pub mod fpgrowth;
pub mod itemsets;
pub mod lcm;
pub(crate) mod levelwise;
pub mod pairs;
pub(crate) mod prep;
pub mod rules;

pub use itemsets::{Itemsets, Limit, MineParams};

use rayon::prelude::*;

/// Borrowed CSR baskets with optional per-transaction weights (a weight `w` counts the
/// transaction `w` times; used for conditional/grouped databases).
#[derive(Debug, Clone, Copy)]
pub struct BasketsRef<'a> {
    pub offsets: &'a [i64],
    pub items: &'a [u32],
    pub weights: Option<&'a [u64]>,
}

impl<'a> BasketsRef<'a> {
    /// Checks the CSR invariants that the kernels rely on (not item order: see
    /// [`BasketsRef::check_sorted`]).
    pub fn new(offsets: &'a [i64], items: &'a [u32], weights: Option<&'a [u64]>) -> Result<Self, String> {
        if offsets.is_empty() || offsets[0] != 0 || *offsets.last().unwrap() as usize != items.len() || offsets.windows(2).any(|w| w[0] > w[1]) {
            return Err("offsets do not describe the items array (must start at 0, be non-decreasing and end at len(items))".into());
        }
        if let Some(w) = weights {
            if w.len() + 1 != offsets.len() {
                return Err(format!("{} weights for {} transactions", w.len(), offsets.len() - 1));
            }
        }
        Ok(BasketsRef { offsets, items, weights })
    }

    pub fn from_baskets(b: &'a crate::Baskets) -> Self {
        BasketsRef { offsets: &b.offsets, items: &b.items, weights: None }
    }

    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    pub fn transaction(&self, t: usize) -> &'a [u32] {
        &self.items[self.offsets[t] as usize..self.offsets[t + 1] as usize]
    }

    #[inline]
    pub fn weight(&self, t: usize) -> u64 {
        self.weights.map_or(1, |w| w[t])
    }

    /// Total weight (the number of transactions when unweighted).
    pub fn total_weight(&self) -> u64 {
        self.weights.map_or(self.len() as u64, |w| w.iter().sum())
    }

    /// Error naming the first transaction whose items are not strictly ascending.
    pub fn check_sorted(&self) -> Result<(), String> {
        match (0..self.len()).into_par_iter().find_first(|&t| self.transaction(t).windows(2).any(|w| w[0] >= w[1])) {
            Some(t) => Err(format!("transaction {t} is not sorted ascending without duplicates")),
            None => Ok(()),
        }
    }

    /// Weighted support count of every item id below the largest id + 1.
    pub fn item_counts(&self) -> Vec<u64> {
        if self.weights.is_none() {
            return crate::stats::item_counts_of(self.items);
        }
        let bound = self.items.par_iter().copied().max().map_or(0, |m| m as usize + 1);
        (0..self.len())
            .into_par_iter()
            .with_min_len(4096)
            .fold(|| vec![0u64; bound], |mut acc, t| {
                let w = self.weight(t);
                for &i in self.transaction(t) {
                    acc[i as usize] += w;
                }
                acc
            })
            .reduce(|| vec![0u64; bound], |mut a, c| {
                for (x, y) in a.iter_mut().zip(c) {
                    *x += y;
                }
                a
            })
    }
}

/// Which itemsets to report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    All,
    Closed,
    Maximal,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    Apriori,
    FpGrowth,
    Eclat,
    /// Occurrence delivery (LCM-style), see [`lcm`].
    Lcm,
}

/// Why a run stopped without a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MineError {
    /// More itemsets than the limit allows (a pattern explosion).
    TooMany { reached: u64, limit: u64 },
}

impl MineError {
    /// The error when `limit` was passed during the run.
    pub fn check(limit: &Limit) -> Result<(), MineError> {
        if limit.stopped() {
            Err(MineError::TooMany { reached: limit.emitted(), limit: limit.max() })
        } else {
            Ok(())
        }
    }
}

impl std::fmt::Display for MineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MineError::TooMany { reached, limit } => write!(
                f,
                "too many itemsets: stopped after {reached} itemsets, more would pass the limit of {limit}"
            ),
        }
    }
}

/// Mine `target` itemsets with `algo`, stopping (with [`MineError::TooMany`]) once `limit`
/// is passed. Closed and maximal sets are decided against all frequent itemsets (an itemset
/// of length `max_len` is closed only if no frequent superset of length `max_len + 1` has its
/// count), so they do not depend on `max_len` other than by the length cut.
pub fn mine(db: BasketsRef<'_>, algo: Algorithm, target: Target, p: MineParams, limit: &Limit) -> Result<Itemsets, MineError> {
    let run = |q: MineParams| -> Result<Itemsets, MineError> {
        // Level by level over tid-lists when the input is larger than the memory budget: the
        // pass structure of Count Distribution on one rank (three reads of the input).
        let large = || levelwise::levelwise(db, &q, limit, true);
        let r: Itemsets = match algo {
            Algorithm::Apriori => large().unwrap_or_else(|| apriori::apriori(db, &q, limit)),
            Algorithm::FpGrowth => prep::mine_all(db, &q, limit, &fpgrowth::FpGrowth),
            Algorithm::Eclat => large().unwrap_or_else(|| prep::mine_all(db, &q, limit, &eclat::Eclat)),
            Algorithm::Lcm => prep::mine_all(db, &q, limit, &lcm::Lcm),
        };
        // Miners that return their result (Apriori, the level-wise path) hand it over whole.
        let r = if limit.is_streaming() {
            limit.stream(r, true);
            Itemsets::new()
        } else {
            r
        };
        MineError::check(limit).map(|_| r)
    };
    match target {
        Target::All => run(p),
        Target::Closed | Target::Maximal => {
            // Supersets one item longer decide closedness; lengths below min_len are needed
            // only as the sets being judged, so mine from 1 and cut afterwards.
            let q = MineParams { min_count: p.min_count, min_len: p.min_len.max(1), max_len: p.max_len.saturating_add(1) };
            let all = run(q)?;
            let keep = closed::filter(&all, target == Target::Maximal);
            Ok(all.gather(&keep).filter_len(p.min_len, p.max_len))
        }
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// All frequent itemsets by enumerating every subset of every transaction (small data only).
    pub fn brute_force(b: &crate::Baskets, min_count: u64) -> Itemsets {
        let mut m: std::collections::BTreeMap<Vec<u32>, u64> = Default::default();
        for t in b.iter() {
            assert!(t.len() <= 16);
            for mask in 1u32..(1 << t.len()) {
                let s: Vec<u32> = (0..t.len()).filter(|&i| mask >> i & 1 == 1).map(|i| t[i]).collect();
                *m.entry(s).or_default() += 1;
            }
        }
        let mut out = Itemsets::new();
        for (s, c) in m {
            if c >= min_count {
                out.push(&s, c);
            }
        }
        out.canonicalize()
    }

    pub fn random_baskets(seed: u64, n: usize, items: u32, maxlen: usize) -> crate::Baskets {
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        crate::Baskets::from_lists((0..n).map(|_| {
            let l = r.gen_range(0..=maxlen);
            (0..l).map(|_| r.gen_range(0..items)).collect::<Vec<u32>>()
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;

    #[test]
    fn all_algorithms_and_targets_agree_with_brute_force() {
        for seed in 0..30u64 {
            let b = random_baskets(seed, 40 + seed as usize, 8 + (seed % 5) as u32, 9);
            let db = BasketsRef::from_baskets(&b);
            for min_count in [1u64, 2, 5] {
                let bf = brute_force(&b, min_count);
                let bf_closed = bf.gather(&closed::filter(&bf, false));
                let bf_max = bf.gather(&closed::filter(&bf, true));
                for algo in [Algorithm::Apriori, Algorithm::FpGrowth, Algorithm::Eclat, Algorithm::Lcm] {
                    let p = MineParams::new(min_count);
                    assert_eq!(mine(db, algo, Target::All, p, &Limit::unlimited()).unwrap(), bf, "{algo:?} seed {seed} min {min_count}");
                    assert_eq!(mine(db, algo, Target::Closed, p, &Limit::unlimited()).unwrap(), bf_closed, "{algo:?} closed seed {seed}");
                    assert_eq!(mine(db, algo, Target::Maximal, p, &Limit::unlimited()).unwrap(), bf_max, "{algo:?} maximal seed {seed}");
                    let q = MineParams { min_count, min_len: 2, max_len: 3 };
                    assert_eq!(mine(db, algo, Target::All, q, &Limit::unlimited()).unwrap(), bf.clone().filter_len(2, 3), "{algo:?} len seed {seed}");
                    let bfc = bf_closed.clone().filter_len(2, 3);
                    assert_eq!(mine(db, algo, Target::Closed, q, &Limit::unlimited()).unwrap(), bfc, "{algo:?} closed len seed {seed}");
                }
            }
        }
    }

    #[test]
    fn sparse_data_uses_tid_lists_and_agrees() {
        // Skewed item frequencies over 300 items: tid-lists of very different lengths
        // (galloping intersections) and a sparse pair matrix.
        let mut b = random_baskets(11, 4000, 300, 6);
        let extra = random_baskets(12, 4000, 12, 5);
        b = crate::Baskets::from_lists(b.iter().zip(extra.iter()).map(|(x, y)| [x, y].concat()));
        let db = BasketsRef::from_baskets(&b);
        for min_count in [3u64, 8, 40] {
            let p = MineParams::new(min_count);
            let e = mine(db, Algorithm::Eclat, Target::All, p, &Limit::unlimited()).unwrap();
            assert_eq!(e, mine(db, Algorithm::FpGrowth, Target::All, p, &Limit::unlimited()).unwrap());
            assert_eq!(e, mine(db, Algorithm::Apriori, Target::All, p, &Limit::unlimited()).unwrap());
            assert!(e.iter().any(|(s, _)| s.len() >= 3));
        }
    }

    #[test]
    fn first_level_paths_for_large_inputs_agree_with_brute_force() {
        // A budget of a few bytes up to a few KB takes the paths of inputs far larger than
        // memory allows to copy: pair counts first, then the copy of the paired codes or
        // delivery in batches (down to one database per batch).
        let mut b = random_baskets(21, 3000, 14, 9);
        let extra = random_baskets(22, 3000, 40, 3);
        b = crate::Baskets::from_lists(b.iter().zip(extra.iter()).map(|(x, y)| [x.to_vec(), y.iter().map(|i| i + 100).collect()].concat()));
        let db = BasketsRef::from_baskets(&b);
        let taken = || prep::PATHS_FOR_TESTS.iter().map(|x| x.load(std::sync::atomic::Ordering::Relaxed)).collect::<Vec<_>>();
        let before = taken();
        for budget in [1usize, 2_000, 20_000, 60_000, 400_000] {
            prep::BUDGET_FOR_TESTS.store(budget, std::sync::atomic::Ordering::Relaxed);
            for min_count in [2u64, 60, 400] {
                let bf = brute_force(&b, min_count);
                for algo in [Algorithm::Apriori, Algorithm::FpGrowth, Algorithm::Eclat, Algorithm::Lcm] {
                    let got = mine(db, algo, Target::All, MineParams::new(min_count), &Limit::unlimited()).unwrap();
                    assert_eq!(got, bf, "{algo:?} budget {budget} min {min_count}");
                    let q = MineParams { min_count, min_len: 1, max_len: 2 };
                    assert_eq!(mine(db, algo, Target::All, q, &Limit::unlimited()).unwrap(), bf.clone().filter_len(1, 2));
                }
            }
        }
        // Every delivery of the first level ran: all at once, from the paired copy, in batches.
        assert!(taken().iter().zip(&before).all(|(a, b)| a > b), "paths {:?} -> {:?}", before, taken());
        // Many items in short transactions: too few pairs for a triangle, delivery unfiltered.
        let wide = random_baskets(23, 2000, 400, 4);
        let db = BasketsRef::from_baskets(&wide);
        prep::BUDGET_FOR_TESTS.store(500, std::sync::atomic::Ordering::Relaxed);
        for algo in [Algorithm::FpGrowth, Algorithm::Eclat, Algorithm::Lcm] {
            assert_eq!(mine(db, algo, Target::All, MineParams::new(2), &Limit::unlimited()).unwrap(), brute_force(&wide, 2), "{algo:?} wide");
        }
        prep::BUDGET_FOR_TESTS.store(0, std::sync::atomic::Ordering::Relaxed);
    }

    #[test]
    fn thread_count_does_not_change_results() {
        let b = random_baskets(7, 3000, 40, 14);
        let db = BasketsRef::from_baskets(&b);
        let p = MineParams::new(30);
        for algo in [Algorithm::Apriori, Algorithm::FpGrowth, Algorithm::Eclat, Algorithm::Lcm] {
            let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap().install(|| mine(db, algo, Target::All, p, &Limit::unlimited()).unwrap());
            let four = rayon::ThreadPoolBuilder::new().num_threads(4).build().unwrap().install(|| mine(db, algo, Target::All, p, &Limit::unlimited()).unwrap());
            assert_eq!(one, four);
            assert!(one.is_canonical());
            assert!(one.len() > 100);
        }
    }
}
