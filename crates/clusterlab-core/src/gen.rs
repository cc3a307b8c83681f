//! IBM Quest synthetic basket generator (Agrawal & Srikant, VLDB'94). Filled in by the
//! generator work; see issue "Foundation".
