//! The trace file: one line per direction and interval,
//! `T <unix seconds> <dir> <packets> <bytes> <drops> <bucket>:<packets>:<bytes> ...`
//! (`dir` 0 is site A to site B). Text on purpose: the monitor and a person both read it.
//!
//! ```
//! let mut h = clusterlab_wan::Histogram::new();
//! h.add(0, 1500);
//! h.drop_one(0);
//! assert_eq!(clusterlab_wan::trace::line(12.5, 0, &h), "T 12.500000 0 1 1500 1 23:1:1500\n");
//! ```

use crate::hist::Histogram;
use std::fmt::Write;

pub fn line(unix_seconds: f64, dir: usize, h: &Histogram) -> String {
    let (p, b) = h.totals(dir);
    let mut s = format!("T {unix_seconds:.6} {dir} {p} {b} {}", h.drops(dir));
    for (bucket, np, nb) in h.nonzero(dir) {
        let _ = write!(s, " {bucket}:{np}:{nb}");
    }
    s.push('\n');
    s
}
