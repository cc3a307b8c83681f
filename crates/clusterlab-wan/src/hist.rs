//! Packets and bytes per 64-byte length bucket and direction, over one interval (seed 004's
//! traffic figures: the monitor on the line counted IP packets by length every 0.1 s). The line
//! counts a packet when it leaves (what the line carried) and a drop when it refuses one.
//!
//! ```
//! let mut h = clusterlab_wan::Histogram::new();
//! h.add(0, 40);
//! h.add(0, 1500);
//! h.add(1, 63);
//! assert_eq!(h.nonzero(0), vec![(0, 1, 40), (23, 1, 1500)]);
//! assert_eq!(h.totals(1), (1, 63));
//! ```

/// Bucket width in bytes of IP packet length.
pub const BUCKET: usize = 64;
/// Buckets cover 0 .. 65535 bytes.
pub const BUCKETS: usize = 65536 / BUCKET;

#[derive(Clone, Debug)]
pub struct Histogram {
    packets: Vec<u64>,
    bytes: Vec<u64>,
    drops: [u64; 2],
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram { packets: vec![0; 2 * BUCKETS], bytes: vec![0; 2 * BUCKETS], drops: [0; 2] }
    }

    /// Count one IP packet of `len` bytes in direction `dir`.
    pub fn add(&mut self, dir: usize, len: usize) {
        let b = (dir & 1) * BUCKETS + (len / BUCKET).min(BUCKETS - 1);
        self.packets[b] += 1;
        self.bytes[b] += len as u64;
    }

    pub fn drop_one(&mut self, dir: usize) {
        self.drops[dir & 1] += 1;
    }

    pub fn drops(&self, dir: usize) -> u64 {
        self.drops[dir & 1]
    }

    /// `(bucket, packets, bytes)` of every bucket that saw a packet, in bucket order.
    pub fn nonzero(&self, dir: usize) -> Vec<(usize, u64, u64)> {
        let base = (dir & 1) * BUCKETS;
        (0..BUCKETS).filter(|&b| self.packets[base + b] > 0).map(|b| (b, self.packets[base + b], self.bytes[base + b])).collect()
    }

    pub fn totals(&self, dir: usize) -> (u64, u64) {
        let r = (dir & 1) * BUCKETS..(dir & 1) * BUCKETS + BUCKETS;
        (self.packets[r.clone()].iter().sum(), self.bytes[r].iter().sum())
    }

    pub fn clear(&mut self) {
        self.packets.iter_mut().for_each(|v| *v = 0);
        self.bytes.iter_mut().for_each(|v| *v = 0);
        self.drops = [0; 2];
    }
}
