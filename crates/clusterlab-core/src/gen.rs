//! IBM Quest synthetic basket generator (Agrawal & Srikant, VLDB'94, section 2.4.3; the
//! "lit" mode of the original `gen` program).
//!
//! The model, as in the paper:
//! - `patterns` potentially large itemsets ("patterns"). The size of each is Poisson with mean
//!   `avg_pattern_len` (drawn as 1 + Poisson(mean - 1) so none is empty). The first pattern's
//!   items are drawn at random; each later one copies a fraction of its items from the
//!   previous pattern, the fraction being exponential with mean `correlation` (capped at 1),
//!   and draws the rest at random. Random items are drawn with exponentially distributed item
//!   weights, as the original program does, which is why some of the `items` never occur.
//! - Each pattern has a weight (exponential, unit mean, normalised to sum 1) and a corruption
//!   level (normal with mean `corruption_mean` and standard deviation `corruption_sd`, clipped
//!   to [0, 1]).
//! - A transaction's target size is 1 + Poisson(`avg_len` - 1). It is filled with patterns
//!   picked by weight; each picked pattern is corrupted by dropping random items while a
//!   uniform number is below its corruption level. A pattern that would overflow a non-empty
//!   transaction is put in anyway half of the time, and kept for the next transaction the other
//!   half.
//!
//! Determinism: patterns come from ChaCha8 stream 0 of the seed; transactions are made in
//! blocks of [`BLOCK`] transactions, block `b` drawing from a xoshiro256++ generator seeded
//! from ChaCha8 stream `b + 1` of the same seed (xoshiro because the block loop draws ~20
//! numbers per transaction and it is measurably cheaper), and a kept-over pattern never
//! crosses a block boundary. So the output depends only on the
//! parameters and the seed, never on the thread count or on how a caller chunks the work.

use crate::basket::Baskets;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use std::io::Write;

/// Transactions per independently seeded block (part of the output's definition: changing it
/// changes every file generated with a given seed).
pub const BLOCK: u64 = 4096;

/// Parameters of the Quest model. See the module documentation for their meaning.
#[derive(Debug, Clone, PartialEq)]
pub struct QuestParams {
    pub transactions: u64,
    pub avg_len: f64,
    pub avg_pattern_len: f64,
    pub patterns: u32,
    pub items: u32,
    pub correlation: f64,
    pub corruption_mean: f64,
    pub corruption_sd: f64,
    pub seed: u64,
}

impl Default for QuestParams {
    fn default() -> Self {
        QuestParams {
            transactions: 100_000,
            avg_len: 10.0,
            avg_pattern_len: 4.0,
            patterns: 2000,
            items: 1000,
            correlation: 0.5,
            corruption_mean: 0.5,
            corruption_sd: 0.1,
            seed: 0,
        }
    }
}

/// Largest number of patterns or items accepted.
pub const MAX_TABLE: u32 = 10_000_000;

/// Largest mean accepted for the Poisson sizes (the CDF table grows with it).
pub const MAX_MEAN: f64 = 100_000.0;

impl QuestParams {
    /// Check every parameter; the error names the parameter and the accepted range.
    pub fn validate(&self) -> Result<(), String> {
        let finite = |name: &str, v: f64| -> Result<(), String> {
            if v.is_finite() {
                Ok(())
            } else {
                Err(format!("{name} must be a finite number, got {v}"))
            }
        };
        for (name, v) in [
            ("avg_len", self.avg_len),
            ("avg_pattern_len", self.avg_pattern_len),
            ("correlation", self.correlation),
            ("corruption_mean", self.corruption_mean),
            ("corruption_sd", self.corruption_sd),
        ] {
            finite(name, v)?;
        }
        if !(1.0..=MAX_MEAN).contains(&self.avg_len) {
            return Err(format!("avg_len (T) must be in 1..{MAX_MEAN}, got {}", self.avg_len));
        }
        if !(1.0..=MAX_MEAN).contains(&self.avg_pattern_len) {
            return Err(format!("avg_pattern_len (I) must be in 1..{MAX_MEAN}, got {}", self.avg_pattern_len));
        }
        // Upper bounds keep the pattern and item tables (tens of bytes each) within memory.
        if self.patterns == 0 || self.patterns > MAX_TABLE {
            return Err(format!("patterns (L) must be in 1..{MAX_TABLE}, got {}", self.patterns));
        }
        if self.items == 0 || self.items > MAX_TABLE {
            return Err(format!("items (N) must be in 1..{MAX_TABLE}, got {}", self.items));
        }
        if !(0.0..=1.0).contains(&self.correlation) {
            return Err(format!("correlation must be in 0..1, got {}", self.correlation));
        }
        if !(0.0..=1.0).contains(&self.corruption_mean) {
            return Err(format!("corruption_mean must be in 0..1, got {}", self.corruption_mean));
        }
        if !(0.0..=1.0).contains(&self.corruption_sd) {
            return Err(format!("corruption_sd must be in 0..1, got {}", self.corruption_sd));
        }
        Ok(())
    }
}

/// Walker's alias table: draws index `i` with probability `w[i] / sum(w)` in O(1) from one
/// uniform number (its integer part picks a column, its fraction decides column or alias).
#[derive(Debug, Clone)]
struct Alias {
    prob: Vec<f64>,
    alias: Vec<u32>,
}

impl Alias {
    fn new(weights: &[f64]) -> Self {
        let n = weights.len();
        let total: f64 = weights.iter().sum();
        let mut prob: Vec<f64> = weights.iter().map(|w| w * n as f64 / total).collect();
        let mut alias: Vec<u32> = (0..n as u32).collect();
        let (mut small, mut large): (Vec<usize>, Vec<usize>) = (0..n).partition(|&i| prob[i] < 1.0);
        while let (Some(s), Some(&l)) = (small.pop(), large.last()) {
            alias[s] = l as u32;
            prob[l] -= 1.0 - prob[s];
            if prob[l] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        // Left-overs are 1 up to rounding.
        for i in small.into_iter().chain(large) {
            prob[i] = 1.0;
        }
        Alias { prob, alias }
    }

    #[inline]
    fn sample<R: Rng>(&self, rng: &mut R) -> usize {
        let x = rng.gen::<f64>() * self.prob.len() as f64;
        let i = (x as usize).min(self.prob.len() - 1);
        if x - (i as f64) < self.prob[i] {
            i
        } else {
            self.alias[i] as usize
        }
    }
}

/// Samples 1 + Poisson(mean - 1) (an alias table over the Poisson probabilities, cut where
/// the tail falls below 1e-15).
#[derive(Debug, Clone)]
struct SizeDist {
    table: Alias,
}

impl SizeDist {
    fn new(mean: f64) -> Self {
        let lambda = mean - 1.0;
        let mut p = Vec::new();
        if lambda <= 0.0 {
            p.push(1.0);
        } else {
            // Work in logs so that large means do not underflow exp(-lambda).
            let mut log_p = -lambda;
            let mut k = 0u64;
            loop {
                p.push(log_p.exp());
                k += 1;
                log_p += lambda.ln() - (k as f64).ln();
                if k as f64 > lambda && log_p.exp() < 1e-15 {
                    break;
                }
            }
        }
        SizeDist { table: Alias::new(&p) }
    }

    #[inline]
    fn sample<R: Rng>(&self, rng: &mut R) -> usize {
        1 + self.table.sample(rng)
    }
}

fn exponential<R: Rng>(rng: &mut R, mean: f64) -> f64 {
    // 1 - u lies in (0, 1], so the log is finite.
    -mean * (1.0 - rng.gen::<f64>()).ln()
}

fn normal<R: Rng>(rng: &mut R, mean: f64, sd: f64) -> f64 {
    let u1: f64 = 1.0 - rng.gen::<f64>();
    let u2: f64 = rng.gen();
    mean + sd * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Index drawn from normalised cumulative weights.
fn pick(cum: &[f64], u: f64) -> usize {
    cum.partition_point(|&c| c <= u).min(cum.len() - 1)
}

/// The potentially large itemsets of one generator, in CSR form.
#[derive(Debug, Clone)]
pub struct Patterns {
    pub offsets: Vec<u64>,
    pub items: Vec<u32>,
    /// Pick probability of each pattern (sums to 1).
    pub weights: Vec<f64>,
    pub corruption: Vec<f64>,
    picker: Alias,
}

impl Patterns {
    pub fn len(&self) -> usize {
        self.weights.len()
    }

    pub fn is_empty(&self) -> bool {
        self.weights.is_empty()
    }

    pub fn pattern(&self, p: usize) -> &[u32] {
        &self.items[self.offsets[p] as usize..self.offsets[p + 1] as usize]
    }
}

/// xoshiro256++ (Blackman & Vigna): the per-block generator, seeded from ChaCha8.
struct Xoshiro([u64; 4]);

impl Xoshiro {
    fn from_rng<R: Rng>(r: &mut R) -> Self {
        let mut s = [0u64; 4];
        while s.iter().all(|&x| x == 0) {
            s = [r.gen(), r.gen(), r.gen(), r.gen()];
        }
        Xoshiro(s)
    }
}

impl rand::RngCore for Xoshiro {
    #[inline]
    fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let out = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        out
    }
    #[inline]
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for chunk in dest.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

fn rng_for(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(stream);
    r
}

/// Draw the patterns (sequentially, from stream 0 of the seed).
pub fn make_patterns(p: &QuestParams) -> Patterns {
    let mut rng = rng_for(p.seed, 0);
    let n = p.items as usize;
    // Item weights: exponential, as the original program's item table.
    let mut cum_items: Vec<f64> = (0..n).map(|_| exponential(&mut rng, 1.0)).collect();
    normalise_cumulative(&mut cum_items);

    let sizes = SizeDist::new(p.avg_pattern_len);
    let l = p.patterns as usize;
    let mut offsets = Vec::with_capacity(l + 1);
    offsets.push(0u64);
    let mut items: Vec<u32> = Vec::new();
    let mut weights = Vec::with_capacity(l);
    let mut corruption = Vec::with_capacity(l);
    let mut prev: Vec<u32> = Vec::new();
    let mut cur: Vec<u32> = Vec::new();
    for _ in 0..l {
        let size = sizes.sample(&mut rng).min(n);
        weights.push(exponential(&mut rng, 1.0));
        corruption.push(normal(&mut rng, p.corruption_mean, p.corruption_sd).clamp(0.0, 1.0));
        cur.clear();
        if !prev.is_empty() {
            let frac = exponential(&mut rng, p.correlation).min(1.0);
            let same = ((frac * size as f64 + 0.5) as usize).min(prev.len()).min(size);
            // A random subset of the previous pattern (partial Fisher-Yates on a copy).
            let mut pool = prev.clone();
            for k in 0..same {
                let j = rng.gen_range(k..pool.len());
                pool.swap(k, j);
                cur.push(pool[k]);
            }
        }
        // The rest at random by item weight; redraw duplicates (bounded, then take any free
        // item so that a pattern as large as the item space still terminates).
        let mut tries = 0usize;
        while cur.len() < size {
            let it = pick(&cum_items, rng.gen()) as u32;
            if !cur.contains(&it) {
                cur.push(it);
            } else {
                tries += 1;
                if tries > 64 * size + 1000 {
                    let free = (0..n as u32).find(|x| !cur.contains(x)).expect("size <= items");
                    cur.push(free);
                }
            }
        }
        cur.sort_unstable();
        items.extend_from_slice(&cur);
        offsets.push(items.len() as u64);
        std::mem::swap(&mut prev, &mut cur);
    }
    let total: f64 = weights.iter().sum();
    for w in weights.iter_mut() {
        *w /= total;
    }
    let picker = Alias::new(&weights);
    Patterns { offsets, items, weights, corruption, picker }
}

fn normalise_cumulative(v: &mut [f64]) {
    let mut acc = 0.0;
    for x in v.iter_mut() {
        acc += *x;
        *x = acc;
    }
    for x in v.iter_mut() {
        *x /= acc;
    }
    if let Some(last) = v.last_mut() {
        *last = 1.0;
    }
}

/// A generator: parameters plus the patterns drawn from them.
#[derive(Debug, Clone)]
pub struct Quest {
    pub params: QuestParams,
    pub patterns: Patterns,
    sizes: SizeDist,
    /// Distinct items over all patterns: no transaction can hold more.
    reachable: usize,
}

impl Quest {
    pub fn new(params: QuestParams) -> Result<Self, String> {
        params.validate()?;
        let patterns = make_patterns(&params);
        let sizes = SizeDist::new(params.avg_len);
        let mut seen = vec![false; params.items as usize];
        for &it in &patterns.items {
            seen[it as usize] = true;
        }
        let reachable = seen.iter().filter(|&&x| x).count();
        Ok(Quest { params, patterns, sizes, reachable })
    }

    /// Number of blocks covering all transactions.
    pub fn blocks(&self) -> u64 {
        self.params.transactions.div_ceil(BLOCK)
    }

    /// Transactions of block `b`, appended to `out` (CSR).
    pub fn block_into(&self, b: u64, out: &mut Baskets) {
        let first = b * BLOCK;
        let count = BLOCK.min(self.params.transactions.saturating_sub(first));
        let mut rng = Xoshiro::from_rng(&mut rng_for(self.params.seed, b + 1));
        let pats = &self.patterns;
        let mut carry: Option<usize> = None;
        let mut scratch: Vec<u32> = Vec::new();
        for _ in 0..count {
            // A target above the items the patterns hold could never be met.
            let target = self.sizes.sample(&mut rng).min(self.reachable);
            let start = out.items.len();
            // Guards against patterns that always corrupt to nothing (corruption level 1).
            let mut attempts = 0usize;
            while out.items.len() - start < target && attempts < 1000 + 20 * target {
                attempts += 1;
                let p = match carry.take() {
                    Some(p) => p,
                    None => pats.picker.sample(&mut rng),
                };
                scratch.clear();
                scratch.extend_from_slice(pats.pattern(p));
                let c = pats.corruption[p];
                while !scratch.is_empty() && rng.gen::<f64>() < c {
                    let j = rng.gen_range(0..scratch.len());
                    scratch.swap_remove(j);
                }
                if scratch.is_empty() {
                    continue;
                }
                let have = out.items.len() - start;
                if have > 0 && have + scratch.len() > target {
                    if rng.gen::<bool>() {
                        carry = Some(p);
                    } else {
                        push_new(&mut out.items, start, &scratch);
                    }
                    break;
                }
                push_new(&mut out.items, start, &scratch);
            }
            out.items[start..].sort_unstable();
            out.offsets.push(out.items.len() as i64);
        }
    }

    /// Transactions `[first, first + count)` as CSR, made in parallel on the current rayon
    /// pool. `first` must be a multiple of [`BLOCK`].
    pub fn generate(&self, first: u64, count: u64) -> Baskets {
        assert!(first.is_multiple_of(BLOCK), "first transaction must be block aligned");
        let end = (first + count).min(self.params.transactions);
        let blocks: Vec<Baskets> = (first / BLOCK..end.div_ceil(BLOCK))
            .into_par_iter()
            .map(|b| {
                let mut out = Baskets::new();
                self.block_into(b, &mut out);
                out
            })
            .collect();
        let mut all = Baskets::new();
        for b in &blocks {
            all.extend(b);
        }
        // The last block may run past `end` only if count cut it short.
        let keep = (end - first) as usize;
        if all.len() > keep {
            let cut = all.offsets[keep] as usize;
            all.items.truncate(cut);
            all.offsets.truncate(keep + 1);
        }
        all
    }

    /// Write transactions `[first, first + count)` as FIMI text to `out`, formatting blocks in
    /// parallel (at most `batch` blocks held at once) and writing them in order. Returns the
    /// bytes written and, for each transaction index in `marks` (sorted, within the range),
    /// the byte offset at which its line starts, relative to the start of this write.
    pub fn write_fimi<W: Write>(
        &self,
        first: u64,
        count: u64,
        marks: &[u64],
        batch: usize,
        out: &mut W,
    ) -> std::io::Result<(u64, Vec<u64>)> {
        assert!(first.is_multiple_of(BLOCK), "first transaction must be block aligned");
        let end = (first + count).min(self.params.transactions);
        let (b0, b1) = (first / BLOCK, end.div_ceil(BLOCK));
        let batch = batch.max(1) as u64;
        let mut written = 0u64;
        let mut mark_pos = Vec::with_capacity(marks.len());
        let mut next_mark = 0usize;
        let mut b = b0;
        while b < b1 {
            let hi = (b + batch).min(b1);
            let texts: Vec<(Vec<u8>, Vec<u64>)> = (b..hi)
                .into_par_iter()
                .map(|blk| {
                    let mut bs = Baskets::new();
                    bs.offsets.reserve(BLOCK as usize);
                    self.block_into(blk, &mut bs);
                    let t0 = blk * BLOCK;
                    let n = (bs.len() as u64).min(end - t0) as usize;
                    // Line starts of the marks that fall in this block.
                    let lo_m = marks.partition_point(|&m| m < t0);
                    let hi_m = marks.partition_point(|&m| m < t0 + n as u64);
                    let mut want = marks[lo_m..hi_m].iter().map(|&m| (m - t0) as usize).peekable();
                    let mut starts = Vec::new();
                    let mut text = Vec::with_capacity(bs.items.len() * 5 + n);
                    let mut fmt = itoa::Buffer::new();
                    for t in 0..n {
                        while want.peek() == Some(&t) {
                            starts.push(text.len() as u64);
                            want.next();
                        }
                        for (k, &it) in bs.transaction(t).iter().enumerate() {
                            if k > 0 {
                                text.push(b' ');
                            }
                            text.extend_from_slice(fmt.format(it).as_bytes());
                        }
                        text.push(b'\n');
                    }
                    (text, starts)
                })
                .collect();
            for (text, starts) in texts {
                for s in starts {
                    mark_pos.push(written + s);
                    next_mark += 1;
                }
                out.write_all(&text)?;
                written += text.len() as u64;
            }
            b = hi;
        }
        // Marks at the very end of the range (== end) point past the last line.
        while next_mark < marks.len() && marks[next_mark] >= end {
            mark_pos.push(written);
            next_mark += 1;
        }
        Ok((written, mark_pos))
    }
}

/// Append the items of `pat` not yet in `items[start..]` (transactions are short, so a linear
/// scan beats a hash set).
fn push_new(items: &mut Vec<u32>, start: usize, pat: &[u32]) {
    for &it in pat {
        if !items[start..].contains(&it) {
            items.push(it);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(seed: u64) -> QuestParams {
        QuestParams { transactions: 10_000, seed, ..Default::default() }
    }

    #[test]
    fn size_dist_mean() {
        let d = SizeDist::new(10.0);
        let mut rng = rng_for(1, 0);
        let n = 200_000;
        let s: usize = (0..n).map(|_| d.sample(&mut rng)).sum();
        let mean = s as f64 / n as f64;
        assert!((mean - 10.0).abs() < 0.05, "{mean}");
        assert_eq!(SizeDist::new(1.0).sample(&mut rng), 1);
    }

    #[test]
    fn alias_frequencies() {
        let a = Alias::new(&[1.0, 0.0, 3.0, 6.0]);
        let mut rng = rng_for(2, 0);
        let mut c = [0usize; 4];
        let n = 400_000;
        for _ in 0..n {
            c[a.sample(&mut rng)] += 1;
        }
        assert_eq!(c[1], 0);
        for (k, w) in [(0, 0.1), (2, 0.3), (3, 0.6)] {
            let f = c[k] as f64 / n as f64;
            assert!((f - w).abs() < 0.005, "{k}: {f}");
        }
    }

    #[test]
    fn patterns_are_valid() {
        let q = Quest::new(small(3)).unwrap();
        let p = &q.patterns;
        assert_eq!(p.len(), 2000);
        assert!((p.weights.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        assert!(p.corruption.iter().all(|&c| (0.0..=1.0).contains(&c)));
        for k in 0..p.len() {
            let t = p.pattern(k);
            assert!(!t.is_empty());
            assert!(t.windows(2).all(|w| w[0] < w[1]));
            assert!(t.iter().all(|&i| i < 1000));
        }
        let mean = p.items.len() as f64 / p.len() as f64;
        assert!((mean - 4.0).abs() < 0.2, "{mean}");
    }

    #[test]
    fn transactions_sorted_unique_and_deterministic() {
        let q = Quest::new(small(7)).unwrap();
        let a = q.generate(0, 10_000);
        assert_eq!(a.len(), 10_000);
        for t in a.iter() {
            assert!(t.windows(2).all(|w| w[0] < w[1]));
        }
        let b = Quest::new(small(7)).unwrap().generate(0, 10_000);
        assert_eq!(a, b);
        let c = Quest::new(small(8)).unwrap().generate(0, 10_000);
        assert_ne!(a, c);
        // Chunking does not change the output.
        let mut d = q.generate(0, BLOCK);
        d.extend(&q.generate(BLOCK, 10_000));
        assert_eq!(a, d);
    }

    #[test]
    fn text_matches_csr_and_marks() {
        let q = Quest::new(small(1)).unwrap();
        let b = q.generate(0, 10_000);
        let mut expect = Vec::new();
        crate::fimi::write(&b, &mut expect).unwrap();
        let mut got = Vec::new();
        let (n, marks) = q.write_fimi(0, 10_000, &[0, 5000, 9999, 10_000], 2, &mut got).unwrap();
        assert_eq!(got, expect);
        assert_eq!(n as usize, got.len());
        let line_start = |t: usize| -> u64 {
            got.split_inclusive(|&c| c == b'\n').take(t).map(|l| l.len() as u64).sum()
        };
        assert_eq!(marks, vec![0, line_start(5000), line_start(9999), got.len() as u64]);
    }

    #[test]
    fn extreme_parameters_terminate() {
        for p in [
            QuestParams { transactions: 100, items: 1, ..Default::default() },
            QuestParams { transactions: 100, items: 3, avg_len: 50.0, avg_pattern_len: 20.0, ..Default::default() },
            QuestParams { transactions: 100, corruption_mean: 1.0, corruption_sd: 0.0, ..Default::default() },
            QuestParams { transactions: 0, ..Default::default() },
            QuestParams { transactions: 2000, items: 100, avg_len: 1000.0, ..Default::default() },
        ] {
            let q = Quest::new(p.clone()).unwrap();
            let b = q.generate(0, p.transactions);
            assert_eq!(b.len() as u64, p.transactions);
            assert!(b.items.iter().all(|&i| i < p.items));
        }
    }

    #[test]
    fn validation_names_the_parameter() {
        let e = QuestParams { avg_len: 0.5, ..Default::default() }.validate().unwrap_err();
        assert!(e.contains("avg_len"));
        let e = QuestParams { items: 0, ..Default::default() }.validate().unwrap_err();
        assert!(e.contains("items"));
        let e = QuestParams { correlation: f64::NAN, ..Default::default() }.validate().unwrap_err();
        assert!(e.contains("correlation"));
    }
}
