//! Hash partitioned Apriori kernels: route candidate k-subsets to their owner rank and count
//! them there. Filled in by the parallel mining work.
