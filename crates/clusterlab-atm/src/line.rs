//! A WAN line that carries cells: the byte line's questions (which frame is lost, when each
//! one arrives) answered for an ATM line. No clock, no sockets: times are the caller's (ns in
//! and out, picoseconds inside so that a cell time stays exact).
//!
//! A frame of `len` bytes (an Ethernet frame: its 14-byte header is replaced by IP over ATM's
//! 8-byte LLC/SNAP header) is segmented into [`cells_for`] AAL5 cells of 53 bytes at once, as a
//! router's ATM interface does, and they join the direction's queue, counted in cells (the cell
//! on the wire included). The line sends one cell per cell time (`53 * 8 / cell_rate_bps`): the
//! rate is that of the cell stream, every header and pad byte included. When the queue has room
//! for only some of a frame's cells, those get in and still use the line, the rest are lost and
//! the frame is thrown away at reassembly: its cells that got through are wasted (Floyd and
//! Romanow's point). The lost cells include the frame's last (end of message), so, as at a
//! switch port of [`crate::cell`], the receiver cannot tell where the frame ended and the next
//! frame of that direction dies with it (all its cells used the line). A frame that finds the
//! queue full loses every cell and leaves no trace at the receiver. `shared`: both directions
//! draw from one cell stream and one queue (each keeps its own VC, so its own reassembly).
//!
//! `arrival_rate_bps` (0: at once, as above): the frame's cells instead enter the queue one per
//! cell time of that rate (at least the line's), from when the frame was offered or its
//! direction's previous frame finished entering, as from a faster access link; the queue drains
//! meanwhile. Not with `shared` (the two directions' cells would interleave in time).
//!
//! `discard`, as at a switch port ([`crate::cell`]): `None` (plain UBR); `Ppd` (a frame that lost
//! a cell has its remaining cells discarded but the last, which closes the frame at the receiver
//! if it finds room); `Epd { threshold }` (a frame whose first cell finds `threshold` cells or
//! more queued is refused whole, none of its cells sent; one accepted and then overflowing is
//! treated as by PPD). With cells arriving at once PPD's last cell finds the queue as full as the
//! cell that was lost, so PPD only differs from UBR with `arrival_rate_bps`.
//!
//! ```
//! use clusterlab_atm::line::{CellLine, CellLineConfig};
//! use clusterlab_wan::Verdict;
//! // 53 bytes per 1 us (424 Mbit/s of cells), 100 us delay, room for 40 cells.
//! let mut l = CellLine::new(CellLineConfig::new(424e6, 100_000, 40, false)).unwrap();
//! // A 1514-byte Ethernet frame: IP 1500 + LLC/SNAP 8 + trailer 8 = 1516 bytes, 32 cells.
//! assert_eq!(l.offer(0, 1514, 0), Verdict::Deliver(32_000 + 100_000));
//! assert_eq!(l.offer(0, 1514, 0), Verdict::Drop); // 8 cells get in, 24 are lost
//! assert_eq!((l.stats(0).frames_lost, l.stats(0).cells_wasted, l.stats(0).cells_dropped), (1, 8, 24));
//! ```

use crate::cell::{cells_for, Discard, PortStats, SwitchConfig, CELL_BYTES, LLC_SNAP};
use clusterlab_wan::{LineConfig, Model, Verdict};

/// An Ethernet header (no FCS): what the testbed's frames carry in front of the IP packet.
pub const ETH_HLEN: usize = 14;

/// Cells of the AAL5 frame that carries an Ethernet frame of `len` bytes over IP over ATM.
///
/// ```
/// use clusterlab_atm::line::frame_cells;
/// assert_eq!(frame_cells(1514), 32); // IP 1500 + 16 = 1516 bytes: 32 cells (1696 bytes on the line)
/// assert_eq!(frame_cells(9014), 188); // IP 9000: 188 cells
/// assert_eq!(frame_cells(14 + 9180), 192); // IP over ATM's MTU
/// ```
pub fn frame_cells(len: usize) -> u32 {
    cells_for(len.saturating_sub(ETH_HLEN) + LLC_SNAP)
}

/// What to emulate: the cell stream's rate (bit/s of 53-byte cells), one-way delay, the queue
/// per direction in cells, whether both directions share one stream and one queue, the rate at
/// which a frame's cells enter the queue (0: at once) and the discard policy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CellLineConfig {
    pub cell_rate_bps: f64,
    pub delay_ns: u64,
    pub limit_cells: u32,
    pub shared: bool,
    pub arrival_rate_bps: f64,
    pub discard: Discard,
}

impl CellLineConfig {
    /// Plain UBR, cells entering at once.
    pub fn new(cell_rate_bps: f64, delay_ns: u64, limit_cells: u32, shared: bool) -> CellLineConfig {
        CellLineConfig { cell_rate_bps, delay_ns, limit_cells, shared, arrival_rate_bps: 0.0, discard: Discard::None }
    }

    /// Why this line cannot be emulated, or None (rate and delay as the byte line accepts them).
    pub fn why_not(&self) -> Option<String> {
        if self.limit_cells == 0 {
            return Some("queue limit of 0 cells: accepted at least 1".into());
        }
        if let Discard::Epd { threshold } = self.discard {
            if threshold == 0 || threshold > self.limit_cells {
                return Some(format!("EPD threshold {threshold} cells: accepted 1..{} (the queue)", self.limit_cells));
            }
        }
        if self.arrival_rate_bps != 0.0 {
            if self.shared {
                return Some("cells arriving at a rate on a shared line: not modelled (accepted at once, 0)".into());
            }
            if !(self.arrival_rate_bps.is_finite() && self.arrival_rate_bps >= self.cell_rate_bps) {
                return Some(format!("arrival rate {} bit/s: accepted 0 (at once) or at least the line's {} bit/s",
                                    self.arrival_rate_bps, self.cell_rate_bps));
            }
        }
        LineConfig { rate_bps: self.cell_rate_bps, delay_ns: self.delay_ns, limit_bytes: 64, shared: self.shared }
            .why_not()
    }
}

#[derive(Clone, Debug)]
pub struct CellLine {
    cfg: CellLineConfig,
    cell_ps: u128,
    /// Spacing of a frame's cells entering the queue (ps; 0: at once).
    arrival_ps: u128,
    /// When each lane's last accepted cell has left (ps); index 0 only when shared.
    busy: [u128; 2],
    /// Per direction: when the previous frame's last cell entered (ps).
    in_free: [u128; 2],
    /// Per direction: the last frame's end-of-message cell was lost (its cells wait at the
    /// receiver for one), so the next frame is lost with it.
    eom_lost: [bool; 2],
    stats: [PortStats; 2],
}

impl CellLine {
    pub fn new(cfg: CellLineConfig) -> Result<CellLine, String> {
        if let Some(why) = cfg.why_not() {
            return Err(why);
        }
        let cell_ps = SwitchConfig::cell_ps_at(cfg.cell_rate_bps) as u128;
        let arrival_ps =
            if cfg.arrival_rate_bps == 0.0 { 0 } else { SwitchConfig::cell_ps_at(cfg.arrival_rate_bps) as u128 };
        Ok(CellLine {
            cfg,
            cell_ps,
            arrival_ps,
            busy: [0; 2],
            in_free: [0; 2],
            eom_lost: [false; 2],
            stats: [PortStats::default(); 2],
        })
    }

    pub fn config(&self) -> CellLineConfig {
        self.cfg
    }

    /// One cell's time on the line (ps).
    pub fn cell_ps(&self) -> u64 {
        self.cell_ps as u64
    }

    /// What direction `dir` did: frames and cells offered, cells that used the line
    /// (`cells_out`), cells lost at a full queue, frames delivered and lost, cells of lost
    /// frames that used the line (`cells_wasted`), the deepest queue seen.
    pub fn stats(&self, dir: usize) -> PortStats {
        self.stats[dir & 1]
    }

    fn lane(&self, dir: usize) -> usize {
        if self.cfg.shared {
            0
        } else {
            dir & 1
        }
    }

    /// Cells waiting for (or on) the line of direction `dir` at `now` (ns).
    pub fn queue_cells(&self, dir: usize, now: u64) -> u32 {
        self.queue_at(self.lane(dir), now as u128 * 1000)
    }

    fn queue_at(&self, lane: usize, t_ps: u128) -> u32 {
        let b = self.busy[lane];
        if b > t_ps {
            (b - t_ps).div_ceil(self.cell_ps).min(u32::MAX as u128) as u32
        } else {
            0
        }
    }

    /// Offer an Ethernet frame of `len` bytes in direction `dir` (0 or 1) at `now` (ns).
    pub fn offer(&mut self, dir: usize, len: usize, now: u64) -> Verdict {
        let (d, lane) = (dir & 1, self.lane(dir));
        let n = frame_cells(len);
        let now_ps = now as u128 * 1000;
        let start = if self.arrival_ps == 0 { now_ps } else { now_ps.max(self.in_free[d]) };
        self.in_free[d] = start + n as u128 * self.arrival_ps;
        let limit = self.cfg.limit_cells;
        let (mut took, mut dropped, mut discarded, mut eom_sent, mut maxq) = (0u32, 0u32, 0u32, false, 0u32);
        let mut state = State::Whole;
        for j in 0..n {
            let t = start + j as u128 * self.arrival_ps;
            let q = self.queue_at(lane, t);
            let last = j + 1 == n;
            let take = match state {
                State::Refused => false,
                State::Dropping => last,
                State::Whole => match self.cfg.discard {
                    Discard::Epd { threshold } if j == 0 && q >= threshold => {
                        state = State::Refused;
                        false
                    }
                    _ => true,
                },
            };
            if !take {
                discarded += 1;
            } else if q < limit {
                self.busy[lane] = self.busy[lane].max(t) + self.cell_ps;
                took += 1;
                eom_sent |= last;
                maxq = maxq.max(q + 1);
            } else {
                dropped += 1;
                if self.cfg.discard != Discard::None {
                    state = State::Dropping;
                }
            }
        }
        let lost = took < n || self.eom_lost[d];
        if eom_sent {
            self.eom_lost[d] = false; // an end of message closes what the receiver held
        } else if took > 0 {
            self.eom_lost[d] = true;
        }
        let st = &mut self.stats[d];
        st.frames_in += 1;
        st.cells_in += n as u64;
        st.cells_out += took as u64;
        st.cells_dropped += dropped as u64;
        st.cells_discarded += discarded as u64;
        st.max_queue_cells = st.max_queue_cells.max(maxq);
        if lost {
            st.frames_lost += 1;
            st.cells_wasted += took as u64;
            Verdict::Drop
        } else {
            st.frames_delivered += 1;
            Verdict::Deliver(self.busy[lane].div_ceil(1000) as u64 + self.cfg.delay_ns)
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Whole,
    /// Lost a cell: PPD (and EPD) discard the rest but the last.
    Dropping,
    /// EPD refused it at its first cell.
    Refused,
}

impl Model for CellLine {
    fn offer(&mut self, dir: usize, len: usize, now: u64) -> Verdict {
        CellLine::offer(self, dir, len, now)
    }
    fn rate_bps(&self) -> f64 {
        self.cfg.cell_rate_bps
    }
    fn delay_ns(&self) -> u64 {
        self.cfg.delay_ns
    }
    fn queue_bytes(&self) -> u64 {
        self.cfg.limit_cells as u64 * CELL_BYTES as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clusterlab_wan::Line;

    fn cfg(rate: f64, delay: u64, limit: u32, shared: bool) -> CellLineConfig {
        CellLineConfig::new(rate, delay, limit, shared)
    }

    fn deliver(v: Verdict) -> u64 {
        match v {
            Verdict::Deliver(t) => t,
            Verdict::Drop => panic!("dropped"),
        }
    }

    #[test]
    fn refuses_what_it_cannot_emulate() {
        assert!(CellLine::new(cfg(1000.0, 0, 100, false)).unwrap_err().contains("rate"));
        assert!(CellLine::new(cfg(f64::NAN, 0, 100, false)).is_err());
        assert!(CellLine::new(cfg(135e6, 11_000_000_000, 100, false)).unwrap_err().contains("delay"));
        assert!(CellLine::new(cfg(135e6, 0, 0, false)).unwrap_err().contains("0 cells"));
    }

    #[test]
    fn an_idle_line_sends_the_frames_cells_at_the_cell_rate() {
        // Seed 004's line taken as 135 Mbit/s of cells: 3.140741 us per cell.
        let mut l = CellLine::new(cfg(135e6, 6_000_000, 10_000, false)).unwrap();
        assert_eq!(l.cell_ps(), 3_140_741);
        // IP 9000 bytes: 188 cells, 590.459 us (the byte line: 9014 bytes, 534.163 us).
        let t = deliver(l.offer(0, 9014, 1_000_000_000));
        assert_eq!(t, 1_000_000_000 + (188 * 3_140_741u64).div_ceil(1000) + 6_000_000);
        // Frames offered together leave one after the other, each n cell times after the last.
        let t2 = deliver(l.offer(0, 1514, 1_000_000_000));
        assert_eq!(t2, 1_000_000_000 + ((188 + 32) * 3_140_741u64).div_ceil(1000) + 6_000_000);
        assert_eq!(l.queue_cells(0, 1_000_000_000), 220);
        assert_eq!(l.stats(0).cells_out, 220);
    }

    #[test]
    fn a_saturated_line_carries_exactly_its_cell_rate() {
        // Offer 2x for 1 s with a deep queue: cells leave back to back at the rate; what reaches
        // the far end is the cells' payload, 1500 of every 1696 bytes at MTU 1500.
        let rate = 135e6;
        let mut l = CellLine::new(cfg(rate, 0, 1_000_000_000, false)).unwrap();
        let gap = (1514.0 * 8.0 / (2.0 * rate) * 1e9) as u64;
        let (mut last, mut sent, mut now) = (0u64, 0u64, 0u64);
        while now < 100_000_000 {
            last = deliver(l.offer(0, 1514, now));
            sent += 1;
            now += gap;
        }
        let s = l.stats(0);
        assert_eq!((s.cells_out, s.frames_delivered, s.cells_wasted), (32 * sent, sent, 0));
        let cell_bits = s.cells_out as f64 * 424.0;
        assert!((cell_bits / (last as f64 / 1e9) / rate - 1.0).abs() < 1e-6);
        let ip_mbit = sent as f64 * 1500.0 * 8.0 / (last as f64 / 1e9) / 1e6;
        assert!((ip_mbit - 135.0 * 1500.0 / 1696.0).abs() < 0.01, "{ip_mbit}"); // 119.40
    }

    #[test]
    fn one_lost_cell_loses_the_frame_and_the_next_one_and_their_cells_are_wasted() {
        // Cells of 1 us; room for 63 cells; frames of 32 cells (1514 bytes).
        let mut l = CellLine::new(cfg(424e6, 0, 63, false)).unwrap();
        assert_eq!(deliver(l.offer(0, 1514, 0)), 32_000);
        // 31 of the second frame's 32 cells get in: the one lost is its last, the frame is lost.
        assert_eq!(l.offer(0, 1514, 0), Verdict::Drop);
        let s = l.stats(0);
        assert_eq!((s.cells_out, s.cells_dropped, s.frames_lost, s.cells_wasted, s.max_queue_cells), (63, 1, 1, 31, 63));
        // Its 31 cells still used the line: a frame offered after the queue drained waits for them
        // (the line is busy to 63 us) and dies at reassembly with the second (no end of message
        // between them); every one of its cells is wasted.
        assert_eq!(l.queue_cells(0, 40_000), 23);
        assert_eq!(l.offer(0, 1514, 40_000), Verdict::Drop);
        assert_eq!(l.queue_cells(0, 40_000), 55);
        let s = l.stats(0);
        assert_eq!((s.frames_lost, s.cells_wasted, s.frames_delivered), (2, 63, 1));
        // Its end of message got through: the next frame is whole again.
        assert_eq!(deliver(l.offer(0, 1514, 200_000)), 232_000);
        // A frame that finds the queue full leaves nothing at the receiver: the one after is fine.
        let mut l = CellLine::new(cfg(424e6, 0, 32, false)).unwrap();
        deliver(l.offer(0, 1514, 0));
        assert_eq!(l.offer(0, 1514, 0), Verdict::Drop);
        assert_eq!((l.stats(0).cells_dropped, l.stats(0).cells_wasted), (32, 0));
        assert_eq!(deliver(l.offer(0, 1514, 32_000)), 64_000);
    }

    #[test]
    fn overdriven_the_line_stays_busy_with_cells_of_dead_frames() {
        // 2x the cell rate into a 100-cell queue: every cell time is used, but nearly every frame
        // finds room for only part of its cells (and takes the next one with it): goodput
        // collapses (5 frames of 625 delivered).
        let mut l = CellLine::new(cfg(424e6, 0, 100, false)).unwrap();
        let mut now = 0u64;
        while now < 10_000_000 {
            l.offer(0, 1514, now);
            now += 16_000; // a 32-cell frame every 16 cell times
        }
        let s = l.stats(0);
        assert_eq!(s.cells_in, s.cells_out + s.cells_dropped);
        assert_eq!(s.cells_out, 32 * s.frames_delivered + s.cells_wasted);
        assert!(s.cells_out as f64 >= 0.99 * 10_000.0, "{s:?}"); // 10 ms of 1 us cells: the line never idles
        assert!(s.cells_wasted > 9 * 32 * s.frames_delivered, "{s:?}");
        assert_eq!(s.frames_delivered + s.frames_lost, s.frames_in);
    }

    #[test]
    fn lightly_loaded_it_delivers_what_the_byte_line_does_later_by_the_cells_overhead() {
        // Frames far apart: neither line queues, both deliver every frame, and the cell line's
        // frame arrives later by exactly its cells' extra bits (53 * cells - len) at the rate.
        let rate = 149.76e6; // an OC-3c's cells
        let mut cells = CellLine::new(cfg(rate, 6_000_000, 4946, false)).unwrap();
        let mut bytes = Line::new(LineConfig { rate_bps: rate, delay_ns: 6_000_000, limit_bytes: 262_144, shared: false }).unwrap();
        for (i, len) in [60usize, 98, 590, 1514, 4000, 9014, 9194].into_iter().enumerate() {
            let now = i as u64 * 10_000_000;
            let (tc, tb) = (deliver(cells.offer(0, len, now)), deliver(bytes.offer(0, len, now)));
            let extra = (frame_cells(len) as f64 * 53.0 - len as f64) * 8.0 / rate * 1e9;
            assert!(((tc - tb) as f64 - extra).abs() <= 2.0, "{len}: {tc} - {tb} vs {extra}");
        }
        assert_eq!((cells.stats(0).frames_lost, cells.stats(0).frames_delivered), (0, 7));
    }

    #[test]
    fn shared_directions_draw_from_one_queue_but_reassemble_apart() {
        let mut l = CellLine::new(cfg(424e6, 0, 63, true)).unwrap();
        assert_eq!(deliver(l.offer(0, 1514, 0)), 32_000);
        assert_eq!(deliver(l.offer(1, 60, 0)), 34_000); // 2 cells behind direction 0's 32
        assert_eq!(l.offer(1, 1514, 0), Verdict::Drop); // 29 cells in: lost
        assert_eq!(deliver(l.offer(0, 1514, 100_000)), 132_000); // direction 0's VC is intact
        assert_eq!(l.offer(1, 60, 200_000), Verdict::Drop); // direction 1's next frame dies with its last
        assert_eq!((l.stats(0).frames_lost, l.stats(1).frames_lost, l.stats(1).cells_wasted), (0, 2, 31));
    }

    #[test]
    fn overdriven_from_a_faster_link_epd_keeps_the_line_useful_and_ppd_saves_cells() {
        // 1.5x the line's cells arriving at 4x its rate (a 9014-byte frame every 2/3 of its line
        // time) into 400 cells. Plain UBR: once the queue is full every frame loses cells and the
        // line carries only cells of dead frames. PPD discards the rest of each broken frame
        // (one cell lost to the full queue per frame, the rest discarded), but a steady stream
        // refills the queue with the next frame's first cells before the frame can fit, so it
        // delivers no more and the line is as busy with dead cells. EPD refuses whole frames and
        // delivers what the line can carry.
        let run = |discard| {
            let c = CellLineConfig { arrival_rate_bps: 4.0 * 424e6, discard, ..cfg(424e6, 0, 400, false) };
            let mut l = CellLine::new(c).unwrap();
            let mut now = 0u64;
            while now < 100_000_000 {
                l.offer(0, 9014, now);
                now += 188_000 * 2 / 3;
            }
            let s = l.stats(0);
            assert_eq!(s.cells_in, s.cells_out + s.cells_dropped + s.cells_discarded, "{s:?}");
            assert_eq!(s.cells_out, 188 * s.frames_delivered + s.cells_wasted, "{s:?}");
            (s.frames_delivered as f64 * 188.0 / 100_000.0, s) // share of the line's cell times
        };
        let ((none, n), (ppd, p), (epd, e)) = (run(Discard::None), run(Discard::Ppd), run(Discard::Epd { threshold: 200 }));
        assert!(none < 0.02 && ppd == none && epd > 0.95, "{none} {ppd} {epd}");
        assert!(p.cells_dropped == p.frames_lost && p.cells_discarded > 0 && n.cells_discarded == 0, "{p:?} {n:?}");
        assert_eq!((e.cells_wasted, e.cells_dropped), (0, 0), "{e:?}");
        // Cells entering at once: PPD's last cell finds the queue as full as the lost one did.
        let at_once = |discard| {
            let mut l = CellLine::new(CellLineConfig { discard, ..cfg(424e6, 0, 400, false) }).unwrap();
            (0..500u64).map(|k| l.offer(0, 9014, k * 125_000)).collect::<Vec<_>>()
        };
        assert_eq!(at_once(Discard::None), at_once(Discard::Ppd));
    }
}
