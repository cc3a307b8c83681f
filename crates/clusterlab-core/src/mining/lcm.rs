//! Occurrence delivery (LCM, Uno, Kiyomi & Arimura, FIMI'04), for sparse data.
//!
//! A conditional database is a plain array of transactions in local codes (ascending in each
//! transaction; code 0 the most frequent). One pass over it lists, for every code, the
//! transactions that hold it (its occurrences). For code `j` the items below `j` in those
//! transactions are counted (the scan stops at `j`, since items ascend), perfect extensions
//! are set aside, and the frequent rest is copied, recoded, into `j`'s own conditional
//! database, which is mined the same way. No tree, no tid-list intersections: every step is a
//! linear scan over short arrays, which is what sparse data with many items wants. Buffers
//! are reused from a per-depth pool, so the recursion does not allocate once warm.

use super::itemsets::{Emitter, MineParams};
use super::prep::{occurrences, project, Cond, CondBuf, Extend, ProjScratch};

/// The occurrence-delivery miner (see the module documentation).
pub(crate) struct Lcm;

impl Extend for Lcm {
    fn mine(&self, cond: Cond<'_>, em: &mut Emitter<'_>, p: &MineParams) {
        let mut pool = Vec::new();
        node(&cond, em, p, &mut pool);
    }
}

/// Scratch space of one recursion depth.
#[derive(Default)]
struct Bufs {
    occ_start: Vec<u32>,
    occ: Vec<u32>,
    proj: ProjScratch,
    child: CondBuf,
}

/// Mine every extension of the prefix in `em` by the items of `c`.
fn node(c: &Cond<'_>, em: &mut Emitter<'_>, p: &MineParams, pool: &mut Vec<Bufs>) {
    let k = c.k();
    if em.limit.stopped() {
        return;
    }
    if em.prefix.len() + 1 >= p.max_len {
        // Children would be too long: the items alone, no counting below them.
        for j in 0..k {
            em.prefix.push(c.orig[j]);
            em.emit(c.counts[j]);
            em.prefix.pop();
        }
        return;
    }
    let mut b = pool.pop().unwrap_or_default();
    occurrences(c, k, &mut b.occ_start, &mut b.occ);
    for j in 0..k {
        if em.limit.stopped() {
            break;
        }
        em.prefix.push(c.orig[j]);
        let pe_len = em.pe.len();
        let occ = &b.occ[b.occ_start[j] as usize..b.occ_start[j + 1] as usize];
        project(c, j, occ, c.counts[j], p.min_count, &mut em.pe, &mut b.child, &mut b.proj);
        em.emit(c.counts[j]);
        match b.child.counts.len() {
            0 => {}
            1 => {
                em.prefix.push(b.child.orig[0]);
                em.emit(b.child.counts[0]);
                em.prefix.pop();
            }
            _ => {
                let child = std::mem::take(&mut b.child);
                node(&child.as_cond(), em, p, pool);
                b.child = child;
            }
        }
        em.pe.truncate(pe_len);
        em.prefix.pop();
    }
    pool.push(b);
}
