//! Time two hot loops on generated T10I4-like baskets (Quest, 1000 items) and print one JSON
//! line: the packed-basket decoder (ns per item) and HPA's `reduce_transactions` (ms per call).
//! It uses only `packed::decode` and `hpa::reduce_transactions`, so `bench/packed_codec.py`
//! builds it against the old sources and the new ones and compares the two in one run.
//!
//!     cargo run --release --example packed_decode -p clusterlab-core -- [--transactions N]
//!         [--runs R] [--keep FRACTION] [--min-len K] [--only decode|reduce]
//!
//! `--keep`: the share of item occurrences `reduce_transactions` keeps (the most frequent
//! items first), as a pass that drops items of no large itemset does. The median of `--runs`
//! timed calls is reported, after one untimed call (page faults, caches).
//! `decode_once` and `reduce_once` are never inlined, so
//! `valgrind --tool=callgrind --toggle-collect='*decode_once*'` counts the decoder alone.

use clusterlab_core::basket::Baskets;
use clusterlab_core::gen::{Quest, QuestParams};
use clusterlab_core::hpa::reduce_transactions;
use clusterlab_core::packed;
use std::hint::black_box;
use std::time::Instant;

#[inline(never)]
fn decode_once(enc: &[u8], transactions: u64) -> Baskets {
    packed::decode(enc, Some(transactions)).expect("valid encoding")
}

#[inline(never)]
fn reduce_once(b: &Baskets, map: &[u32], min_len: usize) -> Baskets {
    reduce_transactions(&b.offsets, &b.items, map, min_len)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Seconds of each of `runs` calls of `f`, after one untimed call.
fn time_runs<T>(runs: usize, mut f: impl FnMut() -> T) -> Vec<f64> {
    black_box(f());
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            black_box(f());
            t.elapsed().as_secs_f64()
        })
        .collect()
}

/// Identity on the most frequent items holding about `keep` of all occurrences, u32::MAX
/// (dropped) on the others: the map a pass gives `reduce_transactions`.
fn keep_map(b: &Baskets, keep: f64) -> (Vec<u32>, f64) {
    let mut counts = vec![0u64; b.item_bound()];
    for &x in &b.items {
        counts[x as usize] += 1;
    }
    let mut order: Vec<usize> = (0..counts.len()).collect();
    order.sort_by_key(|&x| std::cmp::Reverse(counts[x]));
    let mut map = vec![u32::MAX; counts.len()];
    let (total, mut kept) = (b.items.len() as f64, 0u64);
    for x in order {
        if kept as f64 >= keep * total {
            break;
        }
        map[x] = x as u32;
        kept += counts[x];
    }
    (map, kept as f64 / total.max(1.0))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str| args.iter().position(|a| a == name).map(|i| args.get(i + 1).unwrap_or_else(|| panic!("{name} needs a value")).clone());
    let transactions: u64 = opt("--transactions").map_or(250_000, |s| s.parse().expect("--transactions N"));
    let runs: usize = opt("--runs").map_or(9, |s| s.parse().expect("--runs R"));
    let keep: f64 = opt("--keep").map_or(0.5, |s| s.parse().expect("--keep FRACTION"));
    let min_len: usize = opt("--min-len").map_or(3, |s| s.parse().expect("--min-len K"));
    let only = opt("--only");
    assert!(runs >= 1, "--runs must be at least 1");

    let q = Quest::new(QuestParams { transactions, avg_len: 10.0, avg_pattern_len: 4.0, seed: 1, ..QuestParams::default() }).expect("valid parameters");
    let b = q.generate(0, transactions);
    let items = b.items.len();
    let mut fields = vec![format!("\"transactions\": {transactions}"), format!("\"items\": {items}"), format!("\"runs\": {runs}")];

    if only.as_deref() != Some("reduce") {
        let enc = packed::encode(&b.offsets, &b.items).expect("sorted baskets");
        assert_eq!(decode_once(&enc, transactions), b, "the decoder gives back what was encoded");
        let secs = time_runs(runs, || decode_once(&enc, transactions));
        let ns: Vec<f64> = secs.iter().map(|s| s * 1e9 / items as f64).collect();
        fields.push(format!("\"packed_bytes\": {}", enc.len()));
        fields.push(format!("\"decode_ns_per_item\": {:.4}", median(ns.clone())));
        fields.push(format!("\"decode_ns_per_item_runs\": {ns:.4?}"));
    }
    if only.as_deref() != Some("decode") {
        let (map, kept) = keep_map(&b, keep);
        let r = reduce_once(&b, &map, min_len);
        let secs = time_runs(runs, || reduce_once(&b, &map, min_len));
        let ms: Vec<f64> = secs.iter().map(|s| s * 1e3).collect();
        fields.push(format!("\"reduce_kept_share\": {kept:.4}"));
        fields.push(format!("\"reduce_min_len\": {min_len}"));
        fields.push(format!("\"reduce_out_transactions\": {}", r.len()));
        fields.push(format!("\"reduce_out_items\": {}", r.items.len()));
        fields.push(format!("\"reduce_ms\": {:.4}", median(ms.clone())));
        fields.push(format!("\"reduce_ms_runs\": {ms:.4?}"));
    }
    println!("{{{}}}", fields.join(", "));
}
