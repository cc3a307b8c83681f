//! The pure model of an output-buffered ATM cell switch: no clock, no sockets. Times are the
//! caller's (ns in, ns out; picoseconds inside, so a cell time of 2831.196 ns stays exact).
//!
//! A frame offered on input `i` at time `t` is an AAL5 PDU: `cells_for(sdu)` cells of 53 bytes.
//! Its input link sends them back to back at the cell rate from `max(t, when that link is
//! free)`, so cell `j` has fully arrived at the switch at `start + (j + 1) * cell`. The fabric
//! moves cells, not frames, in slots of one cell time: a cell enters its output port's buffer at
//! the first slot boundary after it arrived, so frames that arrive together interleave cell by
//! cell. The cells that reach one port in the same slot enter in an order that rotates among
//! the inputs from slot to slot (in slot `s`, input `s mod ports` first): when the buffer has
//! room for only some of them, no input always wins (a fixed order would let one steady sender
//! take every free place and starve the others). A port holds at most `buffer_cells` cells (the one on the wire included); a
//! cell that finds it full is dropped. A cell that gets in leaves one cell time after the
//! previous one (or after its own arrival on an idle port). A frame is delivered when its last
//! cell leaves, and only if every cell got through; a frame that lost a cell is thrown away at
//! reassembly, but its surviving cells still used the link ("wasted" cells, Floyd and Romanow's
//! point). When a frame's last cell (end of message) is lost, the receiver cannot tell where it
//! ended and the next frame of the same input on that port is lost with it.
//!
//! Discard policies: `None` (plain UBR, the seeds' switches), `Ppd` (partial packet discard:
//! once a cell of a frame is lost, its remaining cells are discarded except the last, which
//! still marks the frame's end), `Epd` (early packet discard: a frame whose first cell finds
//! `threshold` cells or more queued is refused whole; one accepted and then overflowing is
//! treated as by PPD).
//!
//! Point-to-multipoint: a frame offered with several outputs is replicated by the switch; each
//! copy has its own fate at its port.
//!
//! A lossy link (`set_line_loss`): each port's link loses a cell with its own probability, in
//! either direction, drawn from a generator seeded by the caller (the same offers and seed give
//! the same losses). A cell lost on its input link never reaches the switch (it takes no buffer
//! place); one lost on its output link was sent (it used the link) and never arrives. Either way
//! its frame is thrown away at reassembly, and a lost end-of-message takes the next frame of that
//! input on that port with it, as a buffer's loss does. Line losses are counted apart
//! (`cells_line_lost`, `frames_line_lost`) from the buffer's. The draws of a replicated frame's
//! copies are independent (a flooded frame's input-link loss is drawn per copy).
//!
//! ```
//! use clusterlab_atm::cell::{cells_for, CellSwitch, Discard, Outcome, SwitchConfig};
//! // 2 ports, cells of 1 us, room for 100 cells.
//! let cfg = SwitchConfig { ports: 2, cell_ps: 1_000_000, buffer_cells: 100, discard: Discard::None };
//! let mut sw = CellSwitch::new(cfg).unwrap();
//! assert_eq!(cells_for(40 + 8), 2);        // a TCP ACK with LLC/SNAP and the AAL5 trailer: 2 cells
//! sw.offer(0, 0, &[1], 48, 7);             // input 0 -> output 1 at t = 0
//! let mut out = Vec::new();
//! sw.advance(10_000, &mut out);
//! // Cells arrive at 1 and 2 us; the last leaves one cell time later.
//! assert_eq!(out, vec![Outcome::Deliver { tag: 7, output: 1, at_ns: 3_000 }]);
//! ```

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Bytes of a cell on the wire, and of its payload.
pub const CELL_BYTES: usize = 53;
pub const CELL_PAYLOAD: usize = 48;
/// AAL5's trailer (length, CRC-32) at the end of the last cell's payload.
pub const AAL5_TRAILER: usize = 8;
/// IP over ATM's LLC/SNAP header in front of the IP packet (RFC 2684).
pub const LLC_SNAP: usize = 8;
/// Most ports a switch may have.
pub const MAX_PORTS: usize = 4096;

/// Cells of an AAL5 frame carrying `sdu` bytes (the CPCS-SDU: for IP over ATM, the IP packet
/// plus its 8-byte LLC/SNAP header), padded to whole cells.
///
/// ```
/// use clusterlab_atm::cell::cells_for;
/// assert_eq!(cells_for(40), 1);
/// assert_eq!(cells_for(48), 2);
/// assert_eq!(cells_for(9180 + 8), 192); // IP over ATM's MTU: 9196 bytes in 192 cells
/// ```
pub fn cells_for(sdu: usize) -> u32 {
    (sdu + AAL5_TRAILER).div_ceil(CELL_PAYLOAD) as u32
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Discard {
    None,
    Ppd,
    Epd { threshold: u32 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchConfig {
    pub ports: usize,
    /// Time of one 53-byte cell on a link (ps): every input and output link runs at this rate.
    pub cell_ps: u64,
    /// Cells each output port can hold, the one being sent included.
    pub buffer_cells: u32,
    pub discard: Discard,
}

impl SwitchConfig {
    /// The cell time (ps) of a cell stream of `rate_bps` bits per second.
    ///
    /// ```
    /// use clusterlab_atm::cell::SwitchConfig;
    /// assert_eq!(SwitchConfig::cell_ps_at(149.76e6), 2_831_197); // OC-3c's payload rate
    /// ```
    pub fn cell_ps_at(rate_bps: f64) -> u64 {
        (CELL_BYTES as f64 * 8.0 * 1e12 / rate_bps).round() as u64
    }

    /// Why this switch cannot be modelled, or None.
    pub fn why_not(&self) -> Option<String> {
        if !(2..=MAX_PORTS).contains(&self.ports) {
            return Some(format!("{} ports: accepted 2..{MAX_PORTS}", self.ports));
        }
        // 1 ns .. 1 s per cell: 424 Gbit/s .. 424 bit/s.
        if !(1_000..=1_000_000_000_000).contains(&self.cell_ps) {
            return Some(format!("cell time {} ps: accepted 1 ns .. 1 s", self.cell_ps));
        }
        if self.buffer_cells == 0 {
            return Some("a port buffer of 0 cells: accepted at least 1".into());
        }
        if let Discard::Epd { threshold } = self.discard {
            if threshold == 0 || threshold > self.buffer_cells {
                return Some(format!("EPD threshold {threshold} cells: accepted 1..{} (the buffer)", self.buffer_cells));
            }
        }
        None
    }
}

/// A frame's fate at one output port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every cell got through; the last one leaves the port at `at_ns`.
    Deliver { tag: u64, output: u16, at_ns: u64 },
    /// Thrown away at reassembly; `wasted_cells` of its cells used the link all the same.
    Lost { tag: u64, output: u16, wasted_cells: u32 },
}

/// What one output port did (cells and frames that headed for it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    pub frames_in: u64,
    pub cells_in: u64,
    /// Cells that got into the buffer (and so used the link).
    pub cells_out: u64,
    /// Cells lost because the buffer was full.
    pub cells_dropped: u64,
    /// Cells the discard policy threw away (PPD's rest of a frame, EPD's refused frames).
    pub cells_discarded: u64,
    pub frames_delivered: u64,
    pub frames_lost: u64,
    /// Cells of lost frames that used the link.
    pub cells_wasted: u64,
    pub max_queue_cells: u32,
    /// Cells of frames for this port lost on a link (its input's or its own), not in the buffer.
    pub cells_line_lost: u64,
    /// Frames lost at reassembly that lost no cell but on a link (included in `frames_lost`).
    pub frames_line_lost: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Whole,
    /// Lost a cell: PPD discards the rest but the last.
    Dropping,
    /// EPD refused it at its first cell.
    Refused,
}

#[derive(Clone, Debug)]
struct Active {
    tag: u64,
    input: u16,
    /// Arrival of cell `next` (ps).
    at: u64,
    next: u32,
    n: u32,
    enqueued: u32,
    lost: bool,
    /// Lost only to line losses so far (for `frames_line_lost`).
    line_only: bool,
    state: State,
    last_departure: u64,
}

#[derive(Clone, Debug, Default)]
struct Port {
    /// Frames whose cells are still arriving, sorted by (next cell's arrival, input).
    active: VecDeque<Active>,
    /// When the port's link is free again (ps): the departure of the last cell taken in.
    busy: u64,
    stats: PortStats,
}

/// The switch: `ports` output ports and as many input links.
#[derive(Clone, Debug)]
pub struct CellSwitch {
    cfg: SwitchConfig,
    ports: Vec<Port>,
    in_busy: Vec<u64>,
    /// Time (ps) up to which every port has been advanced.
    horizon: u64,
    /// Last-cell arrivals of frames not decided yet (when `advance` will have news).
    pending: BinaryHeap<Reverse<u64>>,
    /// Ports with frames arriving, and a flag per port.
    busy_ports: Vec<u16>,
    is_busy: Vec<bool>,
    /// Per (output, input): the last frame lost its end-of-message cell, so the next one dies too
    /// (`EOM_BUFFER` in the buffer, `EOM_LINE` on a link; 0: not lost).
    eom_lost: Vec<u8>,
    late_offers: u64,
    /// Per port: the probability that its link loses a cell, as a threshold of a 64-bit draw.
    line_loss: Vec<u64>,
    rng: u64,
}

const EOM_BUFFER: u8 = 1;
const EOM_LINE: u8 = 2;

/// Most a link may lose: half its cells.
pub const MAX_LINE_LOSS: f64 = 0.5;

/// splitmix64: a small, well-mixed generator; the model's only randomness.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl CellSwitch {
    pub fn new(cfg: SwitchConfig) -> Result<CellSwitch, String> {
        if let Some(why) = cfg.why_not() {
            return Err(why);
        }
        Ok(CellSwitch {
            cfg,
            ports: vec![Port::default(); cfg.ports],
            in_busy: vec![0; cfg.ports],
            horizon: 0,
            pending: BinaryHeap::new(),
            busy_ports: Vec::new(),
            is_busy: vec![false; cfg.ports],
            eom_lost: vec![0; cfg.ports * cfg.ports],
            late_offers: 0,
            line_loss: vec![0; cfg.ports],
            rng: 0,
        })
    }

    /// Make port i's link lose each cell with probability `loss[i]` (0 ..= `MAX_LINE_LOSS`), in
    /// both directions, with draws from a generator seeded by `seed`.
    ///
    /// ```
    /// use clusterlab_atm::cell::{CellSwitch, Discard, SwitchConfig};
    /// let cfg = SwitchConfig { ports: 2, cell_ps: 1_000_000, buffer_cells: 100, discard: Discard::None };
    /// let mut sw = CellSwitch::new(cfg).unwrap();
    /// assert!(sw.set_line_loss(&[0.0, 0.01], 1).is_ok());
    /// assert!(sw.set_line_loss(&[0.0, 0.9], 1).unwrap_err().contains("port 1"));
    /// ```
    pub fn set_line_loss(&mut self, loss: &[f64], seed: u64) -> Result<(), String> {
        if loss.len() != self.cfg.ports {
            return Err(format!("line loss for {} ports: the switch has {}", loss.len(), self.cfg.ports));
        }
        for (i, &p) in loss.iter().enumerate() {
            if !(0.0..=MAX_LINE_LOSS).contains(&p) {
                return Err(format!("line loss {p} on port {i}: accepted 0 ..= {MAX_LINE_LOSS} of its cells"));
            }
        }
        // p as a threshold on a uniform 64-bit draw (p = 0: never)
        self.line_loss = loss.iter().map(|&p| (p * 18_446_744_073_709_551_616.0) as u64).collect();
        self.rng = seed;
        Ok(())
    }

    /// Whether port `p`'s link loses the next cell (no draw on a lossless link).
    fn line_drops(&mut self, p: usize) -> bool {
        let t = self.line_loss[p];
        t != 0 && splitmix64(&mut self.rng) < t
    }

    pub fn config(&self) -> SwitchConfig {
        self.cfg
    }

    pub fn stats(&self, port: usize) -> PortStats {
        self.ports[port].stats
    }

    /// Frames offered before a time already advanced past (their cells start at that time).
    pub fn late_offers(&self) -> u64 {
        self.late_offers
    }

    /// When input `input`'s link is free again (ns): a frame offered earlier than this waits
    /// behind the cells of that input's previous frames.
    pub fn input_free_ns(&self, input: usize) -> u64 {
        self.in_busy[input] / 1000
    }

    /// Cells in `port`'s buffer at `now_ns` (the one on the wire included).
    pub fn queue_cells(&self, port: usize, now_ns: u64) -> u32 {
        self.occupancy(port, now_ns.saturating_mul(1000))
    }

    fn occupancy(&self, port: usize, t: u64) -> u32 {
        let busy = self.ports[port].busy;
        if busy <= t {
            0
        } else {
            (busy - t).div_ceil(self.cfg.cell_ps) as u32
        }
    }

    /// When `advance` will next decide a frame (ns, rounded up): the arrival of the earliest
    /// pending frame's last cell.
    pub fn next_decision_ns(&self) -> Option<u64> {
        self.pending.peek().map(|Reverse(ps)| ps.div_ceil(1000))
    }

    /// A frame of `sdu` bytes arriving on input `input` at `now_ns`, for `outputs` (one port, or
    /// several for a point-to-multipoint VC; the input itself is skipped). `tag` comes back in
    /// its outcomes. Returns the arrival of its last cell (ns).
    pub fn offer(&mut self, now_ns: u64, input: usize, outputs: &[u16], sdu: usize, tag: u64) -> u64 {
        let c = self.cfg.cell_ps;
        let mut t = now_ns.saturating_mul(1000);
        if t < self.horizon {
            self.late_offers += 1;
            t = self.horizon;
        }
        let n = cells_for(sdu);
        let start = t.max(self.in_busy[input]);
        self.in_busy[input] = start + n as u64 * c;
        // Cells enter the fabric at the first slot boundary after they arrived: the frame is
        // decided when its last cell does (its slot, not its arrival, or a wake-up at the
        // arrival would find it undecided and nothing would wake the switch for it again).
        let first_slot = (start + c).div_ceil(c) * c;
        let last = first_slot + (n as u64 - 1) * c;
        let mut any = false;
        for &o in outputs {
            let o = o as usize;
            if o == input || o >= self.cfg.ports {
                continue;
            }
            any = true;
            let a = Active { tag, input: input as u16, at: first_slot, next: 0, n, enqueued: 0, lost: false,
                             line_only: true, state: State::Whole, last_departure: 0 };
            let port = &mut self.ports[o];
            port.stats.frames_in += 1;
            insert_sorted(&mut port.active, a, c, self.cfg.ports);
            if !self.is_busy[o] {
                self.is_busy[o] = true;
                self.busy_ports.push(o as u16);
            }
        }
        if any {
            self.pending.push(Reverse(last));
        }
        last.div_ceil(1000)
    }

    /// Take in every cell that has arrived by `now_ns`; the frames whose last cell came are
    /// decided and appended to `out` (per port in order of departure).
    pub fn advance(&mut self, now_ns: u64, out: &mut Vec<Outcome>) {
        let now = now_ns.saturating_mul(1000);
        self.horizon = self.horizon.max(now);
        let mut i = 0;
        while i < self.busy_ports.len() {
            let o = self.busy_ports[i] as usize;
            self.advance_port(o, now, out);
            if self.ports[o].active.is_empty() {
                self.is_busy[o] = false;
                self.busy_ports.swap_remove(i);
            } else {
                i += 1;
            }
        }
        while self.pending.peek().is_some_and(|Reverse(ps)| *ps <= now) {
            self.pending.pop();
        }
    }

    fn advance_port(&mut self, o: usize, now: u64, out: &mut Vec<Outcome>) {
        let c = self.cfg.cell_ps;
        let cap = self.cfg.buffer_cells;
        let nports = self.cfg.ports;
        let discard = self.cfg.discard;
        while self.ports[o].active.front().is_some_and(|a| a.at <= now) {
            let mut a = self.ports[o].active.pop_front().unwrap();
            let t = a.at;
            let occ = self.occupancy(o, t);
            let first = a.next == 0;
            let last = a.next + 1 == a.n;
            let port = &mut self.ports[o];
            port.stats.cells_in += 1;
            let eom = if first { std::mem::take(&mut self.eom_lost[o * nports + a.input as usize]) } else { 0 };
            if eom != 0 {
                a.lost = true; // reassembled together with the frame whose end was lost
                a.line_only &= eom == EOM_LINE;
            }
            let up_lost = self.line_drops(a.input as usize);
            let port = &mut self.ports[o];
            let take = match a.state {
                State::Refused => false,
                State::Dropping => last,
                State::Whole => match discard {
                    Discard::Epd { threshold } if first && occ >= threshold => {
                        a.state = State::Refused;
                        a.lost = true;
                        false
                    }
                    _ => true,
                },
            };
            if take && up_lost {
                // lost on its input link: it never came (no buffer place); its frame dies
                port.stats.cells_line_lost += 1;
                a.lost = true;
                if last {
                    self.eom_lost[o * nports + a.input as usize] = EOM_LINE;
                }
            } else if take && occ < cap {
                let dep = t.max(port.busy) + c;
                port.busy = dep;
                a.enqueued += 1;
                a.last_departure = dep;
                port.stats.cells_out += 1;
                port.stats.max_queue_cells = port.stats.max_queue_cells.max(occ + 1);
                if self.line_loss[o] != 0 && splitmix64(&mut self.rng) < self.line_loss[o] {
                    // sent, lost on the output link
                    port.stats.cells_line_lost += 1;
                    a.lost = true;
                    if last {
                        self.eom_lost[o * nports + a.input as usize] = EOM_LINE;
                    }
                }
            } else if take {
                port.stats.cells_dropped += 1;
                a.lost = true;
                a.line_only = false;
                if discard != Discard::None {
                    a.state = State::Dropping;
                }
                if last {
                    self.eom_lost[o * nports + a.input as usize] = EOM_BUFFER;
                }
            } else {
                port.stats.cells_discarded += 1;
                a.line_only = false;
            }
            if last {
                if a.lost {
                    port.stats.frames_lost += 1;
                    if a.line_only {
                        port.stats.frames_line_lost += 1;
                    }
                    port.stats.cells_wasted += a.enqueued as u64;
                    out.push(Outcome::Lost { tag: a.tag, output: o as u16, wasted_cells: a.enqueued });
                } else {
                    port.stats.frames_delivered += 1;
                    out.push(Outcome::Deliver { tag: a.tag, output: o as u16, at_ns: a.last_departure.div_ceil(1000) });
                }
            } else {
                a.next += 1;
                a.at += c;
                insert_sorted(&mut port.active, a, c, nports);
            }
        }
    }
}

/// The order of cells at a port: by slot, then by input rotated by the slot number.
fn order(a: &Active, c: u64, ports: usize) -> (u64, usize) {
    let slot = a.at / c;
    (a.at, (a.input as usize + ports - (slot % ports as u64) as usize) % ports)
}

/// Keep `q` sorted by `order`. Frames arriving at the same rate rotate, so the place is nearly
/// always at the back.
fn insert_sorted(q: &mut VecDeque<Active>, a: Active, c: u64, ports: usize) {
    let key = order(&a, c, ports);
    let mut i = q.len();
    while i > 0 && order(&q[i - 1], c, ports) > key {
        i -= 1;
    }
    q.insert(i, a);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sw(ports: usize, buffer: u32, discard: Discard) -> CellSwitch {
        CellSwitch::new(SwitchConfig { ports, cell_ps: 1_000_000, buffer_cells: buffer, discard }).unwrap()
    }

    #[test]
    fn refuses_what_it_cannot_model() {
        let ok = SwitchConfig { ports: 4, cell_ps: 2_831_197, buffer_cells: 100, discard: Discard::None };
        assert!(ok.why_not().is_none());
        assert!(SwitchConfig { ports: 1, ..ok }.why_not().unwrap().contains("ports"));
        assert!(SwitchConfig { cell_ps: 10, ..ok }.why_not().unwrap().contains("cell time"));
        assert!(SwitchConfig { buffer_cells: 0, ..ok }.why_not().unwrap().contains("0 cells"));
        assert!(SwitchConfig { discard: Discard::Epd { threshold: 101 }, ..ok }.why_not().unwrap().contains("EPD"));
    }

    #[test]
    fn an_idle_switch_adds_one_cell_time_to_the_frame() {
        let mut s = sw(3, 1000, Discard::None);
        s.offer(5_000, 2, &[0], 9188, 1);
        let mut out = vec![];
        s.advance(1_000_000, &mut out);
        // 192 cells arrive by 5 us + 192 us; the last leaves 1 us later.
        assert_eq!(out, vec![Outcome::Deliver { tag: 1, output: 0, at_ns: 5_000 + 193_000 }]);
    }

    #[test]
    fn nothing_is_decided_before_its_last_cell_arrives() {
        let mut s = sw(3, 1000, Discard::None);
        assert_eq!(s.offer(0, 0, &[1], 9188, 1), 192_000);
        assert_eq!(s.next_decision_ns(), Some(192_000));
        let mut out = vec![];
        s.advance(191_999, &mut out);
        assert!(out.is_empty());
        s.advance(192_000, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(s.next_decision_ns(), None);
    }

    #[test]
    fn a_frame_arriving_between_slots_is_decided_when_its_last_cell_enters_its_slot() {
        let mut s = sw(3, 1000, Discard::None);
        // From 0.5 us: cells arrive at 1.5 and 2.5 us, enter in slots 2 and 3 (us).
        assert_eq!(s.offer(500, 0, &[1], 48, 1), 3_000);
        assert_eq!(s.next_decision_ns(), Some(3_000));
        let mut out = vec![];
        s.advance(2_999, &mut out);
        assert!(out.is_empty() && s.next_decision_ns() == Some(3_000));
        s.advance(3_000, &mut out);
        assert_eq!(out, vec![Outcome::Deliver { tag: 1, output: 1, at_ns: 4_000 }]);
    }

    #[test]
    fn two_inputs_interleave_cell_by_cell() {
        let mut s = sw(3, 1000, Discard::None);
        s.offer(0, 0, &[2], 4 * 48 - 8, 10); // 4 cells
        s.offer(0, 1, &[2], 4 * 48 - 8, 11);
        let mut out = vec![];
        s.advance(1_000_000, &mut out);
        // Cells arrive in pairs in slots 1..4 (in slot s, input s mod 3 first: 1, 0, 0, 1);
        // 8 cells leave at 2..9 us, input 1's last first.
        assert_eq!(out, vec![Outcome::Deliver { tag: 11, output: 2, at_ns: 8_000 },
                             Outcome::Deliver { tag: 10, output: 2, at_ns: 9_000 }]);
        assert_eq!(s.stats(2).max_queue_cells, 5); // at 4 us: cells leaving at 5..9 us
    }

    #[test]
    fn an_input_link_sends_one_frame_at_a_time() {
        let mut s = sw(3, 1000, Discard::None);
        s.offer(0, 0, &[1], 48, 1); // 2 cells: input busy to 2 us
        s.offer(0, 0, &[2], 48, 2); // starts at 2 us
        let mut out = vec![];
        s.advance(100_000, &mut out);
        assert_eq!(out, vec![Outcome::Deliver { tag: 1, output: 1, at_ns: 3_000 },
                             Outcome::Deliver { tag: 2, output: 2, at_ns: 5_000 }]);
    }

    #[test]
    fn overflow_wastes_the_link_on_cells_of_dead_frames() {
        // Three inputs, 10 cells each, into a 4-cell buffer.
        let mut s = sw(4, 4, Discard::None);
        for i in 0..3 {
            s.offer(0, i, &[3], 10 * 48 - 8, i as u64);
        }
        let mut out = vec![];
        s.advance(1_000_000, &mut out);
        let st = s.stats(3);
        assert_eq!(st.cells_in, 30);
        assert_eq!(st.cells_out + st.cells_dropped, 30);
        assert!(st.frames_lost >= 2, "{st:?}");
        assert!(st.cells_wasted > 0);
        assert_eq!(st.frames_lost + st.frames_delivered, 3);
    }

    #[test]
    fn ppd_sends_only_the_last_cell_after_a_loss_and_epd_refuses_whole_frames() {
        // Three inputs, 10 cells each at once, into a 4-cell buffer.
        let run = |discard| {
            let mut s = sw(4, 4, discard);
            for i in 0..3 {
                s.offer(0, i, &[3], 10 * 48 - 8, i as u64);
            }
            s.advance(1_000_000, &mut vec![]);
            s.stats(3)
        };
        let (none, ppd, epd) = (run(Discard::None), run(Discard::Ppd), run(Discard::Epd { threshold: 1 }));
        assert_eq!(none.cells_discarded, 0);
        // PPD: after the first lost cell only the frame's last cell is still sent.
        assert!(ppd.cells_discarded > 0 && ppd.cells_wasted <= none.cells_wasted, "{ppd:?} {none:?}");
        // EPD: the first frame takes the port; the two others are refused at their first cell.
        assert_eq!((epd.frames_delivered, epd.frames_lost, epd.cells_wasted, epd.cells_discarded), (1, 2, 0, 20), "{epd:?}");
    }

    #[test]
    fn a_lost_end_of_message_takes_the_next_frame_of_that_input_with_it() {
        // Buffer of 1 cell. Input 1 keeps the port busy with a long frame from t = 0 (a cell in
        // each of slots 1..20, each leaving as the next comes); input 0's one-cell frame arrives
        // in slot 4, where input 1 goes first (4 mod 3), finds the buffer full and is lost with
        // its end-of-message.
        let mut s = sw(3, 1, Discard::None);
        s.offer(0, 1, &[2], 20 * 48 - 8, 100);
        s.offer(3_000, 0, &[2], 40, 1);
        let mut out = vec![];
        s.advance(50_000, &mut out);
        assert!(out.contains(&Outcome::Lost { tag: 1, output: 2, wasted_cells: 0 }), "{out:?}");
        // Input 1 is gone; input 0's next frame has the port to itself but is lost at reassembly.
        s.offer(60_000, 0, &[2], 48, 2);
        s.advance(100_000, &mut out);
        assert!(matches!(out.last(), Some(Outcome::Lost { tag: 2, wasted_cells: 2, .. })), "{out:?}");
        // The one after that is fine.
        s.offer(200_000, 0, &[2], 48, 3);
        s.advance(300_000, &mut out);
        assert!(matches!(out.last(), Some(Outcome::Deliver { tag: 3, .. })), "{out:?}");
    }

    #[test]
    fn point_to_multipoint_replicates_to_every_output() {
        let mut s = sw(4, 1000, Discard::None);
        s.offer(0, 0, &[1, 2, 3, 0], 48, 9);
        let mut out = vec![];
        s.advance(100_000, &mut out);
        out.sort_by_key(|o| match o { Outcome::Deliver { output, .. } | Outcome::Lost { output, .. } => *output });
        assert_eq!(out, (1..4).map(|o| Outcome::Deliver { tag: 9, output: o, at_ns: 3_000 }).collect::<Vec<_>>());
    }

    #[test]
    fn a_late_offer_starts_at_the_horizon() {
        let mut s = sw(2, 100, Discard::None);
        let mut out = vec![];
        s.advance(50_000, &mut out);
        assert_eq!(s.offer(10_000, 0, &[1], 48, 1), 52_000);
        assert_eq!(s.late_offers(), 1);
    }

    /// 2000 frames of 10 cells from input 0 to port 1, one every 20 us (the port never queues).
    fn lossy(loss: [f64; 3], seed: u64) -> (PortStats, Vec<u64>) {
        let mut s = sw(3, 1000, Discard::None);
        s.set_line_loss(&loss, seed).unwrap();
        let mut out = vec![];
        for k in 0..2000u64 {
            s.offer(k * 20_000, 0, &[1], 10 * 48 - 8, k);
            s.advance(k * 20_000 + 19_000, &mut out);
        }
        s.advance(u64::MAX / 2000, &mut out);
        let lost = out.iter().filter_map(|o| match o { Outcome::Lost { tag, .. } => Some(*tag), _ => None }).collect();
        (s.stats(1), lost)
    }

    #[test]
    fn a_lossy_link_loses_cells_at_its_rate_the_same_ones_for_the_same_seed() {
        // 1% of cells on the output link: a 10-cell frame survives with 0.99^10 = 90.4%
        let (st, lost) = lossy([0.0, 0.01, 0.0], 7);
        assert_eq!(st.cells_dropped, 0);
        assert!((150..=260).contains(&st.cells_line_lost), "{st:?}"); // 200 expected
        assert_eq!(st.frames_lost, lost.len() as u64);
        assert_eq!(st.frames_line_lost, st.frames_lost);
        assert!((140..=250).contains(&st.frames_lost), "{st:?}"); // 191 expected (+ a few EOM losses)
        assert_eq!(st.cells_out, st.cells_in); // sent, then lost on the wire: every cell used the link
        assert_eq!(lossy([0.0, 0.01, 0.0], 7), (st, lost.clone()));
        assert_ne!(lossy([0.0, 0.01, 0.0], 8).1, lost);
        // on the input link: the lost cells never take a place in the buffer
        let (up, _) = lossy([0.01, 0.0, 0.0], 7);
        assert!((150..=260).contains(&up.cells_line_lost) && up.cells_out == up.cells_in - up.cells_line_lost, "{up:?}");
        // a lossless link draws nothing: the same as no loss set
        assert_eq!(lossy([0.0, 0.0, 0.0], 7).0, {
            let mut s = sw(3, 1000, Discard::None);
            for k in 0..2000u64 {
                s.offer(k * 20_000, 0, &[1], 10 * 48 - 8, k);
                s.advance(k * 20_000 + 19_000, &mut vec![]);
            }
            s.advance(u64::MAX / 2000, &mut vec![]);
            s.stats(1)
        });
    }

    #[test]
    fn line_loss_is_refused_outside_its_range() {
        let mut s = sw(3, 10, Discard::None);
        assert!(s.set_line_loss(&[0.0, 0.6, 0.0], 1).unwrap_err().contains("port 1"));
        assert!(s.set_line_loss(&[0.0, f64::NAN, 0.0], 1).is_err());
        assert!(s.set_line_loss(&[0.0, 0.1], 1).unwrap_err().contains("2 ports"));
    }

    #[test]
    fn two_inputs_overloading_a_port_keep_it_busy_with_cells_of_dead_frames() {
        // Two inputs each send back to back to one port: it sends a cell every cell time, but in
        // every slot one input's cell finds the buffer full, in turn, so under plain UBR nearly
        // every frame loses a cell; EPD keeps whole frames.
        let run = |discard| {
            let mut s = sw(3, 50, discard);
            let mut out = vec![];
            let mut t = 0;
            for k in 0..200u64 {
                for i in 0..2 {
                    s.offer(t, i, &[2], 10 * 48 - 8, k * 2 + i as u64);
                }
                t += 10_000;
                s.advance(t, &mut out);
            }
            s.advance(u64::MAX / 2000, &mut out);
            s.stats(2)
        };
        let ubr = run(Discard::None);
        assert_eq!(ubr.cells_out, ubr.cells_in - ubr.cells_dropped);
        assert!(ubr.cells_out >= 1990 && ubr.cells_out <= 2051, "{ubr:?}");
        assert!(ubr.frames_delivered < 20, "{ubr:?}");
        let epd = run(Discard::Epd { threshold: 25 });
        assert!(epd.frames_delivered >= 190, "{epd:?}");
    }
}
