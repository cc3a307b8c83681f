//! The delay line's model: a serializer at `rate` per direction (or one shared by both
//! directions), a drop-tail queue of `limit` bytes in front of it, then `delay` of propagation.
//!
//! A frame offered at `now` waits for the frames before it (the backlog), is sent in
//! `len * 8 / rate` seconds, and arrives `delay` later. When the backlog plus the frame would
//! exceed `limit` bytes, the frame is dropped (tail drop): an ATM line driven past its rate
//! loses cells the same way. Departure times per direction never decrease, so each direction is
//! a FIFO.
//!
//! ```
//! use clusterlab_wan::{Line, LineConfig, Verdict};
//! let mut l = Line::new(LineConfig { rate_bps: 8e6, delay_ns: 6_000_000, limit_bytes: 3000, shared: false }).unwrap();
//! // 1000 bytes at 8 Mbit/s take 1 ms to send, then 6 ms to arrive.
//! assert_eq!(l.offer(0, 1000, 0), Verdict::Deliver(7_000_000));
//! assert_eq!(l.offer(0, 1000, 0), Verdict::Deliver(8_000_000));
//! assert_eq!(l.offer(0, 1500, 0), Verdict::Drop); // 2000 queued + 1500 > 3000
//! assert_eq!(l.offer(1, 1000, 0), Verdict::Deliver(7_000_000)); // the other direction is free
//! ```

/// What to emulate. `shared`: both directions draw from one `rate` and one queue (a line
/// looped back on itself, as seed 004's 67M-ATM).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LineConfig {
    pub rate_bps: f64,
    pub delay_ns: u64,
    pub limit_bytes: u64,
    pub shared: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Drop-tail: the queue had no room.
    Drop,
    /// Deliver at this time (ns, the caller's clock).
    Deliver(u64),
}

/// A line model the frame mover ([`crate::run`]) can drive: this byte line, or another that
/// decides the same questions differently (clusterlab-atm's `CellLine`, which carries cells).
pub trait Model {
    /// Offer a frame of `len` bytes (the Ethernet frame: 14-byte header, no FCS) in direction
    /// `dir` (0 or 1) at `now` (ns, the caller's clock).
    fn offer(&mut self, dir: usize, len: usize, now: u64) -> Verdict;
    /// The rate the line sends at (bit/s): sets the mover's coalescing window.
    fn rate_bps(&self) -> f64;
    /// One-way delay (ns): how long the mover may go without reading its ports.
    fn delay_ns(&self) -> u64;
    /// The queue in bytes: sets the mover's socket buffers.
    fn queue_bytes(&self) -> u64;
}

/// Longest one-way delay accepted (a geostationary hop is 0.25 s).
pub const MAX_DELAY_NS: u64 = 10_000_000_000;

#[derive(Clone, Debug)]
pub struct Line {
    cfg: LineConfig,
    ns_per_byte: f64,
    /// When each serializer is free again (ns); index 0 only when shared.
    busy_until: [f64; 2],
}

impl LineConfig {
    /// Why this configuration cannot be emulated, or None.
    pub fn why_not(&self) -> Option<String> {
        if !(self.rate_bps.is_finite() && self.rate_bps >= 8_000.0 && self.rate_bps <= 100e9) {
            return Some(format!("rate {} bit/s: accepted 8 kbit/s .. 100 Gbit/s", self.rate_bps));
        }
        if self.delay_ns > MAX_DELAY_NS {
            return Some(format!("delay {} ns: accepted 0 .. {} ns", self.delay_ns, MAX_DELAY_NS));
        }
        if self.limit_bytes < 64 {
            return Some(format!("queue limit {} bytes: accepted >= 64", self.limit_bytes));
        }
        None
    }
}

impl Line {
    pub fn new(cfg: LineConfig) -> Result<Line, String> {
        if let Some(why) = cfg.why_not() {
            return Err(why);
        }
        Ok(Line { cfg, ns_per_byte: 8e9 / cfg.rate_bps, busy_until: [0.0; 2] })
    }

    pub fn config(&self) -> LineConfig {
        self.cfg
    }

    fn lane(&self, dir: usize) -> usize {
        if self.cfg.shared {
            0
        } else {
            dir & 1
        }
    }

    /// Bytes waiting for (or in) the serializer of direction `dir` at `now`.
    pub fn backlog_bytes(&self, dir: usize, now: u64) -> f64 {
        let wait = self.busy_until[self.lane(dir)] - now as f64;
        if wait > 0.0 {
            wait / self.ns_per_byte
        } else {
            0.0
        }
    }

    /// Offer a frame of `len` bytes in direction `dir` (0 or 1) at time `now` (ns).
    pub fn offer(&mut self, dir: usize, len: usize, now: u64) -> Verdict {
        let lane = self.lane(dir);
        if self.backlog_bytes(dir, now) + len as f64 > self.cfg.limit_bytes as f64 + 1e-6 {
            return Verdict::Drop;
        }
        let start = self.busy_until[lane].max(now as f64);
        let end = start + len as f64 * self.ns_per_byte;
        self.busy_until[lane] = end;
        Verdict::Deliver(end.ceil() as u64 + self.cfg.delay_ns)
    }
}

impl Model for Line {
    fn offer(&mut self, dir: usize, len: usize, now: u64) -> Verdict {
        Line::offer(self, dir, len, now)
    }
    fn rate_bps(&self) -> f64 {
        self.cfg.rate_bps
    }
    fn delay_ns(&self) -> u64 {
        self.cfg.delay_ns
    }
    fn queue_bytes(&self) -> u64 {
        self.cfg.limit_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(rate: f64, delay: u64, limit: u64, shared: bool) -> LineConfig {
        LineConfig { rate_bps: rate, delay_ns: delay, limit_bytes: limit, shared }
    }

    #[test]
    fn refuses_what_it_cannot_emulate() {
        assert!(Line::new(cfg(1000.0, 0, 10_000, false)).unwrap_err().contains("rate"));
        assert!(Line::new(cfg(f64::NAN, 0, 10_000, false)).is_err());
        assert!(Line::new(cfg(1e6, MAX_DELAY_NS + 1, 10_000, false)).unwrap_err().contains("delay"));
        assert!(Line::new(cfg(1e6, 0, 10, false)).unwrap_err().contains("limit"));
    }

    #[test]
    fn an_idle_line_adds_serialization_and_delay() {
        let mut l = Line::new(cfg(135e6, 6_000_000, 1 << 20, false)).unwrap();
        // 9014 bytes at 135 Mbit/s: 534.163 us.
        match l.offer(0, 9014, 1_000_000_000) {
            Verdict::Deliver(t) => assert_eq!(t, 1_000_000_000 + 534_163 + 6_000_000),
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn a_saturated_direction_delivers_exactly_the_rate() {
        // Offer 2x the rate for 1 s; the accepted frames leave at exactly 135 Mbit/s.
        let rate = 135e6;
        let mut l = Line::new(cfg(rate, 6_000_000, 256_000, false)).unwrap();
        let len = 1514usize;
        let gap = (len as f64 * 8.0 / (2.0 * rate) * 1e9) as u64;
        let (mut first, mut last, mut sent) = (None, 0u64, 0u64);
        let mut now = 0u64;
        while now < 1_000_000_000 {
            if let Verdict::Deliver(t) = l.offer(0, len, now) {
                assert!(t >= last, "FIFO order");
                first.get_or_insert(t);
                last = t;
                sent += 1;
            }
            now += gap;
        }
        let bits = (sent - 1) as f64 * len as f64 * 8.0;
        let secs = (last - first.unwrap()) as f64 / 1e9;
        assert!((bits / secs / rate - 1.0).abs() < 1e-6, "{}", bits / secs);
        // About half was dropped.
        let offered = 1_000_000_000 / gap;
        assert!((sent as f64 / offered as f64 - 0.5).abs() < 0.01);
    }

    #[test]
    fn the_queue_limit_bounds_the_added_delay() {
        let mut l = Line::new(cfg(10e6, 0, 30_000, false)).unwrap();
        let mut worst = 0u64;
        for i in 0..1000u64 {
            if let Verdict::Deliver(t) = l.offer(0, 1500, i * 100) {
                worst = worst.max(t - i * 100);
            }
        }
        // At most 30 000 bytes (24 ms at 10 Mbit/s) in front of a frame, including itself.
        assert!(worst <= 24_000_000 + 1, "{worst}");
        assert!(worst >= 22_000_000, "{worst}");
    }

    #[test]
    fn shared_duplex_splits_the_rate_and_drops_when_overdriven() {
        let rate = 135e6;
        for shared in [false, true] {
            let mut l = Line::new(cfg(rate, 6_000_000, 64_000, shared)).unwrap();
            let len = 9014usize;
            // Each direction offers 100 Mbit/s: 200 in total, more than one 135 line.
            let gap = (len as f64 * 8.0 / 100e6 * 1e9) as u64;
            let mut got = [0u64; 2];
            let mut now = 0;
            while now < 2_000_000_000 {
                // The two directions' frames interleave (direction 1 half a gap later).
                for (d, g) in got.iter_mut().enumerate() {
                    if let Verdict::Deliver(_) = l.offer(d, len, now + d as u64 * gap / 2) {
                        *g += 1;
                    }
                }
                now += gap;
            }
            let mbit = |n: u64| n as f64 * len as f64 * 8.0 / 2.0 / 1e6;
            if shared {
                // Together 135 Mbit/s (about 67.5 each: the phase of the two streams decides), the rest lost.
                assert!((mbit(got[0] + got[1]) - 135.0).abs() < 1.0, "{got:?}");
                assert!((mbit(got[0]) - 67.5).abs() < 5.0 && (mbit(got[1]) - 67.5).abs() < 5.0, "{got:?}");
            } else {
                assert!((mbit(got[0]) - 100.0).abs() < 1.0 && (mbit(got[1]) - 100.0).abs() < 1.0, "{got:?}");
            }
        }
    }
}
