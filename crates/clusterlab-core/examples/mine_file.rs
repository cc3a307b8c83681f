//! Mine one FIMI file with one algorithm and print the itemset count: a target for
//! `valgrind --tool=callgrind` when comparing kernel versions by instruction counts
//! (load-independent, unlike timings on a shared machine).
//!
//!     cargo build --release --example mine_file -p clusterlab-core
//!     valgrind --tool=callgrind target/release/examples/mine_file FILE MIN_COUNT [ALGO] [THREADS]

use clusterlab_core::mining::{mine, Algorithm, BasketsRef, Limit, MineParams, Target};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: mine_file FILE MIN_COUNT [apriori|fpgrowth|eclat|lcm] [THREADS]");
        std::process::exit(2);
    }
    let (b, _) = clusterlab_core::fimi::read_file(std::path::Path::new(&args[1]), None).expect("readable FIMI file");
    let min_count: u64 = args[2].parse().expect("MIN_COUNT is an integer");
    let algo = match args.get(3).map_or("lcm", |s| s.as_str()) {
        "apriori" => Algorithm::Apriori,
        "fpgrowth" => Algorithm::FpGrowth,
        "eclat" => Algorithm::Eclat,
        _ => Algorithm::Lcm,
    };
    let threads: usize = args.get(4).map_or(1, |s| s.parse().expect("THREADS is an integer"));
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("thread pool");
    let db = BasketsRef::from_baskets(&b);
    let r = pool.install(|| mine(db, algo, Target::All, MineParams::new(min_count), &Limit::unlimited())).expect("within the limit");
    println!("{}", r.len());
}
