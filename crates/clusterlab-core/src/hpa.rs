//! Hash partitioned Apriori (HPA, Shintani & Kitsuregawa, PDIS'96) and the other parallel
//! miners' kernels: candidate generation for one owner's partition, routing of transaction
//! k-subsets to their owner rank in fixed-size message blocks, owner-side counting, and the
//! PFP (parallel FP-growth) group shuffle and restricted local FP-growth.
//!
//! Items here are *ranks*: the index of an item in the sorted list of frequent items, so
//! rank order is item-id order and itemsets stay lexicographic after mapping back.
//!
//! - [`items`]: pass 1 for sparse ids: distinct item counts, reduction through sorted keys.
//! - [`hash`]: the fixed, documented itemset hash and owner function.
//! - [`table`]: an open-addressing itemset -> index table, and the owner's counters over it.
//! - [`block`]: the wire form of message blocks (2- or 4-byte little-endian words).
//! - [`candidates`]: Apriori join + prune, keeping only the candidates a filter accepts.
//! - [`route`]: the sender side: enumerate a transaction's k-subsets that can be candidates
//!   (walk of the large (k-1)-itemset prefix trie), hash, and pack per-owner blocks.
//! - [`pfp`]: PFP's group-dependent transactions and a group-restricted FP-growth.
//! - [`vertical`]: local counting for passes counted everywhere and all-reduced: pass 2's
//!   pairs in a triangle, later passes by tid-list intersection.

pub mod block;
pub mod candidates;
pub mod hash;
pub mod items;
pub mod pfp;
pub mod route;
pub mod table;
pub mod vertical;

pub use candidates::{apriori_gen_filtered, eld_split};
pub use hash::{itemset_hash, owner_of};
pub use route::{reduce_transactions, Router, RouterStats, Trie, WalkScratch};
pub use table::{ItemsetIndex, OwnerTable};
