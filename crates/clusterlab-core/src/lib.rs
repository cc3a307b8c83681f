//! clusterlab-core: the kernels behind clusterlab.
//!
//! Pure Rust, no Python and no networking, so that every kernel is tested with `cargo test`
//! and reused by the PyO3 binding crate (`clusterlab-py`). Modules:
//! - [`basket`]: the compact CSR form of a basket file (offsets + u32 item ids).
//! - [`fimi`]: FIMI `.dat` parsing (whole file, byte ranges, in parallel) and writing.
//! - [`csvbaskets`]: `transaction_id,item` CSV baskets with string items.
//! - [`stats`]: what a user checks first about a basket file.
//! - [`labels`]: item dictionaries (string labels to dense ids) and their fast hash.
//! - [`gen`]: the IBM Quest synthetic basket generator.
//! - [`mining`]: frequent itemsets (Apriori, FP-growth, Eclat) and rules.
//! - [`hpa`]: hash partitioned Apriori kernels (subset routing and owner counting).
//! - [`npb`]: NAS Parallel Benchmark kernels (EP, IS, CG, MG, FT), per-rank compute.
//! - [`packed`]: the compact binary basket encoding of a partition on a LUN (varint deltas).

pub mod basket;
pub mod csvbaskets;
pub mod error;
pub mod fimi;
pub mod gen;
pub mod hpa;
pub mod labels;
pub mod mining;
pub mod npb;
pub mod packed;
pub mod stats;

pub use basket::Baskets;
pub use error::ParseError;
