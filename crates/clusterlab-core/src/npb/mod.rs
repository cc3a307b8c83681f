//! Compute kernels of the NAS Parallel Benchmarks (NPB 3.x): EP, IS, CG, MG, FT, LU and SP.
//!
//! Only the per-rank computation lives here; the parallel algorithms (who sends what to whom)
//! are written in Python against clusterlab's `Communicator` (`clusterlab.npb`). Every kernel
//! is single-threaded on purpose: one rank is one NPB process, so per-rank compute times are
//! comparable with the official serial build.
//!
//! Floating-point sums that NPB reduces across processes are computed here in a fixed order
//! that does not depend on how the data is split (per batch, per leaf block, in a fixed tree),
//! so that verification values are bit-identical for every rank count and backend.
//! - [`randlc`]: NPB's 46-bit linear congruential generator (bit-exact, integer arithmetic).
//! - [`ep`]: Gaussian pairs by acceptance-rejection, per batch of 2^16 pairs.
//! - [`is`]: key generation, bucket sort, ranking and the full sort of IS.
//! - [`cg`]: the sparse matrix of CG (`makea`) and its leaf-ordered products.
//! - [`mg`]: the V-cycle stencils of MG (resid, psinv, rprj3, interp), norms, zran3.
//! - [`ft`]: initial conditions, the Stockham FFT on blocks of lines, twiddles, transposes.
//! - [`lu`]: LU's SSOR solver: rhs, erhs, the Jacobians and the triangular sweeps per
//!   k-plane, the boundary and initial values, and the per-column parts of its norms.
//! - [`sp`]: SP's ADI solver on a slab of k-planes: compute_rhs, txinvr, the pentadiagonal
//!   line solves, ninvr/pinvr/tzetar, add, the exact solution and forcing, the norms.

pub mod cg;
pub mod ep;
pub mod ft;
pub mod is;
pub mod lu;
pub mod mg;
pub mod randlc;
pub mod sp;

/// Combine `v` (length a power of two) pairwise as a binary tree over adjacent entries:
/// `((v0 + v1) + (v2 + v3)) + ...`. Every rank that owns an aligned run of leaves computes
/// the same subtree, so combining subtrees pairwise across ranks gives the same bits.
pub fn tree_sum(v: &mut [f64]) -> f64 {
    let mut w = v.len();
    debug_assert!(w.is_power_of_two());
    while w > 1 {
        for i in 0..w / 2 {
            v[i] = v[2 * i] + v[2 * i + 1];
        }
        w /= 2;
    }
    v.first().copied().unwrap_or(0.0)
}
