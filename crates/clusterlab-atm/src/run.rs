//! The switch's loop: read the frames that arrived on any port, find each one's output port(s)
//! by its destination MAC, offer it to the [`CellSwitch`] model at the kernel's arrival time,
//! and write every frame the model delivers to its port when its last cell leaves. Frames the
//! model loses are counted and freed. One thread: it sleeps in `ppoll` until the next decision
//! or departure (nanosecond timeout, 1 ns timer slack) and, when allowed, runs SCHED_FIFO so a
//! loaded machine does not add its scheduling delay to the switch's.
//!
//! The model decides a frame when its last cell has arrived, which is never after that cell
//! leaves, so the decision costs no delay; departures due within a short window after one that
//! leaves now go with it (one `sendmmsg`), at most that window early.

use crate::cell::{CellSwitch, Outcome, PortStats, SwitchConfig, LLC_SNAP};
use crate::sock::{AllPorts, Received, BATCH, VNET_HDR_LEN};
use clusterlab_wan::run::{mono_ns, real_ns, unix_seconds, Control};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};

const ETH_HLEN: usize = 14;
const MAX_FRAME: usize = 65536 + ETH_HLEN + VNET_HDR_LEN;
/// Frames read before the model is advanced again (bounded so departures are not starved).
const READ_LIMIT: usize = 4096;
/// Longest early wakeup taken from the running mean of timer lateness.
const MAX_EARLY_NS: f64 = 100_000.0;

/// The coalescing window of a switch whose cells take `cell_ns`: 16 cell times, 20..200 us.
///
/// ```
/// use clusterlab_atm::run::coalesce_ns;
/// assert_eq!(coalesce_ns(2831), 45_296);
/// assert_eq!(coalesce_ns(28_312), 200_000);
/// ```
pub fn coalesce_ns(cell_ns: u64) -> u64 {
    (16 * cell_ns).clamp(20_000, 200_000)
}

#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Interface of each port (in the calling thread's namespace), and its site (a switch per
    /// site, joined by WAN ports).
    pub ports: Vec<String>,
    pub sites: Vec<u8>,
    /// Static forwarding entries: (site, MAC, port). Unknown and group destinations are
    /// flooded to the ingress port's site.
    pub fdb: Vec<(u8, [u8; 6], u16)>,
    pub model: SwitchConfig,
    /// Per port: the probability that its link loses a cell (empty: none), and the draws' seed.
    pub line_loss: Vec<f64>,
    pub loss_seed: u64,
    pub control: Control,
}

/// What the switch did.
#[derive(Clone, Debug, Default)]
pub struct Totals {
    /// The model's counts, per output port.
    pub ports: Vec<PortStats>,
    /// Frames read per input port.
    pub frames_read: Vec<u64>,
    /// Frames read on interfaces that are not ports (the switch's own address), ignored.
    pub foreign_frames: u64,
    pub flooded: u64,
    pub send_errors: u64,
    /// Frames offered after the model had moved past their arrival.
    pub late_offers: u64,
    /// Frames the kernel dropped before the switch read them (its socket buffer was full).
    pub kernel_drops: u64,
    /// How long frames waited between the kernel's receive stamp and the switch reading them
    /// (sum and maximum, ns): a frame read late may be due already.
    pub read_wait_sum_ns: u64,
    pub read_wait_max_ns: u64,
    /// How long frames waited for their input link (the cells of that input's earlier frames
    /// still arriving in the model; ns, sum and maximum): the host sent faster than the link.
    pub input_wait_sum_ns: u64,
    pub input_wait_max_ns: u64,
    /// How long after a frame's due time the model decided it (ns, sum and maximum): the
    /// switch woke late for the decision.
    pub decide_lag_sum_ns: u64,
    pub decide_lag_max_ns: u64,
    /// Delivered frames and how late they left (ns after due; negative: early).
    pub delivered: u64,
    pub late_sum_ns: i64,
    pub late_sq_sum: f64,
    pub late_max_ns: i64,
    pub realtime: bool,
    pub wakeups: u64,
    pub send_calls: u64,
    /// Time spent writing frames (ns, sum and longest call): the receiving hosts' network
    /// stacks run in it (a veth delivers in the writer's context).
    pub send_ns_sum: u64,
    pub send_ns_max: u64,
}

/// Frames held between arrival and departure: a buffer and how many ports still have to send it.
struct Slab {
    bufs: Vec<Vec<u8>>,
    refs: Vec<u16>,
    free: Vec<u32>,
}

impl Slab {
    fn put(&mut self, frame: &[u8], refs: u16) -> u32 {
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.bufs.push(Vec::new());
                self.refs.push(0);
                (self.bufs.len() - 1) as u32
            }
        };
        let b = &mut self.bufs[i as usize];
        b.clear();
        b.extend_from_slice(frame);
        self.refs[i as usize] = refs;
        i
    }

    fn release(&mut self, i: u32) {
        let r = &mut self.refs[i as usize];
        *r -= 1;
        if *r == 0 {
            self.free.push(i);
        }
    }
}

/// Where a frame from `port` to `dst` goes: its port, or every other port of the site.
struct Forwarding {
    table: Vec<HashMap<[u8; 6], u16>>,
    site_ports: Vec<Vec<u16>>,
    sites: Vec<u8>,
}

impl Forwarding {
    fn new(sites: &[u8], fdb: &[(u8, [u8; 6], u16)]) -> Forwarding {
        let n_sites = sites.iter().copied().max().unwrap_or(0) as usize + 1;
        let mut table = vec![HashMap::new(); n_sites];
        for &(s, mac, p) in fdb {
            if (s as usize) < n_sites {
                table[s as usize].insert(mac, p);
            }
        }
        let site_ports = (0..n_sites).map(|s| (0..sites.len() as u16).filter(|&p| sites[p as usize] as usize == s).collect()).collect();
        Forwarding { table, site_ports, sites: sites.to_vec() }
    }

    /// Output ports into `out`; true when flooded.
    fn outputs(&self, ingress: u16, dst: &[u8], out: &mut Vec<u16>) -> bool {
        out.clear();
        let site = self.sites[ingress as usize] as usize;
        let group = dst[0] & 1 == 1;
        if !group {
            let mac: [u8; 6] = dst[..6].try_into().unwrap();
            if let Some(&p) = self.table[site].get(&mac) {
                if p != ingress {
                    out.push(p);
                }
                return false;
            }
        }
        out.extend(self.site_ports[site].iter().copied().filter(|&p| p != ingress));
        true
    }
}

/// Run until `stop` is set or the watched descriptor closes.
pub fn run(cfg: &RunConfig, stop: &AtomicBool) -> io::Result<Totals> {
    let n = cfg.ports.len();
    if cfg.sites.len() != n || cfg.model.ports != n {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "ports, sites and the model's port count differ"));
    }
    let ctl = &cfg.control;
    let mut trace_file = ctl.open_trace()?;
    let mut model = CellSwitch::new(cfg.model).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    if !cfg.line_loss.is_empty() {
        model.set_line_loss(&cfg.line_loss, cfg.loss_seed).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    }
    let mut port_of: HashMap<i32, u16> = HashMap::new();
    let mut ifindex = Vec::with_capacity(n);
    for (p, name) in cfg.ports.iter().enumerate() {
        let i = crate::sock::ifindex(name)?;
        port_of.insert(i, p as u16);
        ifindex.push(i);
    }
    let fwd = Forwarding::new(&cfg.sites, &cfg.fdb);
    let mut sock = AllPorts::open((8usize << 20).max(n * (1 << 20)).min(256 << 20))?;
    let mut totals = Totals { realtime: ctl.start(), frames_read: vec![0; n], ..Default::default() };
    let mut bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| vec![0u8; MAX_FRAME]).collect();
    let mut got = vec![Received::default(); BATCH];
    let mut slab = Slab { bufs: Vec::new(), refs: Vec::new(), free: Vec::new() };
    let mut arrived: Vec<(u64, u16, u32, usize)> = Vec::new(); // (arrival, port, slot, sdu)
    let mut outs: Vec<u16> = Vec::new();
    let mut outcomes: Vec<Outcome> = Vec::new();
    // Departures: (due, sequence, port, slot); the sequence keeps each port's order on equal times.
    let mut held: BinaryHeap<Reverse<(u64, u64, u16, u32)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut leaving: Vec<(i32, u32)> = Vec::new();
    let mut last_stats: Vec<PortStats> = vec![PortStats::default(); n];
    let mut next_tick = mono_ns() + ctl.interval_ns;
    let watch = ctl.watch_fd >= 0;
    let mut fds = [
        libc::pollfd { fd: ctl.watch_fd, events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: sock.as_raw_fd(), events: libc::POLLIN, revents: 0 },
    ];
    let mut early = 0.0f64;
    let mut planned: Option<u64> = None;
    let window = coalesce_ns(cfg.model.cell_ps / 1000);
    let mut last_read = mono_ns();
    while !stop.load(Ordering::Relaxed) {
        // Arrivals: everything waiting, offered in the order the kernel stamped it.
        let t_read = mono_ns();
        let offset = real_ns() as i64 - t_read as i64;
        let mut read = 0;
        while read < READ_LIMIT {
            let k = sock.recv_batch(&mut bufs, &mut got)?;
            if k == 0 {
                break;
            }
            read += k;
            for (r, b) in got[..k].iter().zip(&bufs) {
                let Some(&p) = port_of.get(&r.ifindex) else {
                    totals.foreign_frames += 1;
                    continue;
                };
                if r.len < VNET_HDR_LEN + ETH_HLEN {
                    continue;
                }
                // The kernel's stamp, but never before the previous read: this batch arrived after
                // it (the socket was drained). A TCP segment keeps the time its stack sent it (its
                // departure-time stamp survives the host's queue and the veth), which can be
                // hundreds of milliseconds before the host's link let it go.
                let mut at = t_read;
                if r.stamp > 0 {
                    let a = r.stamp as i64 - offset;
                    if a > 0 && (a as u64) <= t_read {
                        at = (a as u64).max(last_read);
                    }
                }
                totals.frames_read[p as usize] += 1;
                totals.read_wait_sum_ns += t_read - at;
                totals.read_wait_max_ns = totals.read_wait_max_ns.max(t_read - at);
                let slot = slab.put(&b[..r.len], 0);
                arrived.push((at, p, slot, r.len - VNET_HDR_LEN - ETH_HLEN + LLC_SNAP));
            }
        }
        if read < READ_LIMIT {
            last_read = t_read; // drained: whatever comes next arrived after this
        }
        arrived.sort_by_key(|a| a.0);
        for &(at, p, slot, sdu) in &arrived {
            let f = &slab.bufs[slot as usize];
            if fwd.outputs(p, &f[VNET_HDR_LEN..VNET_HDR_LEN + 6], &mut outs) {
                totals.flooded += 1;
            }
            if outs.is_empty() {
                slab.refs[slot as usize] = 1;
                slab.release(slot);
                continue;
            }
            slab.refs[slot as usize] = outs.len() as u16;
            let wait = model.input_free_ns(p as usize).saturating_sub(at);
            totals.input_wait_sum_ns += wait;
            totals.input_wait_max_ns = totals.input_wait_max_ns.max(wait);
            model.offer(at, p as usize, &outs, sdu, slot as u64);
        }
        arrived.clear();
        model.advance(t_read, &mut outcomes);
        for o in outcomes.drain(..) {
            match o {
                Outcome::Deliver { tag, output, at_ns } => {
                    let lag = t_read.saturating_sub(at_ns);
                    totals.decide_lag_sum_ns += lag;
                    totals.decide_lag_max_ns = totals.decide_lag_max_ns.max(lag);
                    seq += 1;
                    held.push(Reverse((at_ns, seq, output, tag as u32)));
                }
                Outcome::Lost { tag, .. } => slab.release(tag as u32),
            }
        }

        // Departures due by now (plus the expected wakeup lateness, plus the window if any is).
        let now = mono_ns();
        if let Some(p) = planned.take() {
            early = (0.95 * early + 0.05 * (now as f64 - p as f64)).clamp(0.0, MAX_EARLY_NS);
        }
        let mut horizon = now + early as u64;
        if held.peek().is_some_and(|Reverse(h)| h.0 <= horizon) {
            horizon += window;
        }
        while held.peek().is_some_and(|Reverse(h)| h.0 <= horizon) {
            let Reverse((due, _, port, slot)) = held.pop().unwrap();
            let late = now as i64 - due as i64;
            totals.delivered += 1;
            totals.late_sum_ns += late;
            totals.late_sq_sum += (late as f64) * (late as f64);
            totals.late_max_ns = totals.late_max_ns.max(late);
            leaving.push((ifindex[port as usize], slot));
        }
        if !leaving.is_empty() {
            let frames: Vec<(i32, &[u8])> = leaving.iter().map(|&(i, s)| (i, slab.bufs[s as usize].as_slice())).collect();
            let s0 = mono_ns();
            let sent = sock.send_batch(&frames);
            let took = mono_ns() - s0;
            totals.send_ns_sum += took;
            totals.send_ns_max = totals.send_ns_max.max(took);
            totals.send_errors += (frames.len() - sent) as u64;
            totals.send_calls += 1;
            for &(_, s) in &leaving {
                slab.release(s);
            }
            leaving.clear();
        }
        if now >= next_tick {
            totals.kernel_drops += sock.kernel_drops();
            if let Some(f) = trace_file.as_mut() {
                write_trace(f, &model, &mut last_stats)?;
            }
            next_tick += ctl.interval_ns;
            if next_tick <= now {
                next_tick = now + ctl.interval_ns;
            }
        }

        // Sleep until the next departure, the next decision or the next trace tick.
        let mut wake = next_tick;
        let mut departure = false;
        if let Some(Reverse(h)) = held.peek() {
            let w = h.0.saturating_sub(early as u64);
            if w < wake {
                wake = w;
                departure = true;
            }
        }
        if let Some(d) = model.next_decision_ns() {
            if d < wake {
                wake = d;
                departure = false;
            }
        }
        let now = mono_ns();
        let wait = wake.saturating_sub(now);
        if wait == 0 {
            continue;
        }
        let ts = libc::timespec { tv_sec: (wait / 1_000_000_000) as libc::time_t, tv_nsec: (wait % 1_000_000_000) as libc::c_long };
        for f in fds.iter_mut() {
            f.revents = 0;
        }
        let (first, nfds) = if watch { (0, 2) } else { (1, 1) };
        // SAFETY: fds and ts are valid for the call.
        let rc = unsafe { libc::ppoll(fds[first..].as_mut_ptr(), nfds, &ts, std::ptr::null()) };
        totals.wakeups += 1;
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(e);
        }
        if rc == 0 && departure {
            planned = Some(wake);
        }
        if watch && ctl.lifeline_closed(fds[0].revents) {
            break;
        }
    }
    if let Some(f) = trace_file.as_mut() {
        write_trace(f, &model, &mut last_stats)?;
    }
    totals.kernel_drops += sock.kernel_drops();
    totals.late_offers = model.late_offers();
    totals.ports = (0..n).map(|p| model.stats(p)).collect();
    Ok(totals)
}

/// One line per port that saw cells in the interval:
/// `P <unix time> <port> <cells in> <cells out> <cells dropped> <cells discarded> <frames delivered> <frames lost> <cells wasted> <max queue> <cells line lost> <frames line lost>`
/// (counts of the interval; the max queue since the start). An idle port writes nothing.
fn write_trace(f: &mut File, model: &CellSwitch, last: &mut [PortStats]) -> io::Result<()> {
    let t = unix_seconds();
    let mut text = String::new();
    for (p, prev) in last.iter_mut().enumerate() {
        let s = model.stats(p);
        if s.cells_in != prev.cells_in || s.frames_lost != prev.frames_lost {
            text += &format!("P {t:.6} {p} {} {} {} {} {} {} {} {} {} {}\n", s.cells_in - prev.cells_in,
                             s.cells_out - prev.cells_out, s.cells_dropped - prev.cells_dropped,
                             s.cells_discarded - prev.cells_discarded, s.frames_delivered - prev.frames_delivered,
                             s.frames_lost - prev.frames_lost, s.cells_wasted - prev.cells_wasted, s.max_queue_cells,
                             s.cells_line_lost - prev.cells_line_lost, s.frames_line_lost - prev.frames_line_lost);
            *prev = s;
        }
    }
    if !text.is_empty() {
        f.write_all(text.as_bytes())?;
    }
    Ok(())
}
