//! The delay line's loop: read frames from both ports, decide with a [`Model`] (the byte [`Line`],
//! or clusterlab-atm's cell line), hold them, and
//! write each one to the other port when its time comes. One thread; it sleeps in `ppoll`
//! until the next departure (nanosecond timeout, 1 ns timer slack) and, when allowed, runs
//! SCHED_FIFO so a loaded machine does not add its scheduling delay to the line's RTT.
//!
//! Two corrections keep the added delay on target: a frame's delay counts from the kernel's
//! receive timestamp (not from when the loop got to it), and the loop wakes `early` ns before
//! a departure, `early` being the running mean of how late its timer wakeups came, so that
//! departures are centred on their due times instead of always late by the wakeup latency.

use crate::afpacket::{Port, VNET_HDR_LEN};
use crate::hist::Histogram;
use crate::line::{Line, LineConfig, Model, Verdict};
use crate::trace;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};

const ETH_HLEN: usize = 14;
const MAX_FRAME: usize = 65536 + ETH_HLEN + VNET_HDR_LEN;
/// Frames read per port before deliveries are checked again.
const READ_BATCH: usize = 512;
/// Frames due within a window after one that leaves now leave with it: one wakeup and one
/// `sendmmsg` per burst instead of one each, at most the window early. The window is three
/// 1514-byte frames' serialization at the line's rate, within these bounds (MTU 1500 at
/// 135 Mbit/s: a frame every 90 us, a 269 us window; measured at MTU 1500 under TCP, 300 us
/// against the former fixed 100 us: 2.1x fewer wakeups and sendmmsg calls, the line's CPU
/// 0.21 -> 0.135 core). An idle line's lone frame (a ping) still leaves at its due time.
pub const COALESCE_MIN_NS: u64 = 100_000;
pub const COALESCE_MAX_NS: u64 = 300_000;

/// The coalescing window of a line at `rate_bps` (see [`COALESCE_MIN_NS`]).
///
/// ```
/// use clusterlab_wan::run::coalesce_ns;
/// assert_eq!(coalesce_ns(135e6), 269_155);
/// assert_eq!(coalesce_ns(10e9), 100_000);
/// assert_eq!(coalesce_ns(10e6), 300_000);
/// ```
pub fn coalesce_ns(rate_bps: f64) -> u64 {
    ((3.0 * 1514.0 * 8e9 / rate_bps) as u64).clamp(COALESCE_MIN_NS, COALESCE_MAX_NS)
}
/// Longest stretch the line goes without reading its ports while frames wait (see `deaf`).
const MAX_DEAF_NS: u64 = 2_000_000;
/// Below this one-way delay the line always listens (a frame may be due almost at once).
const MIN_DEAF_DELAY_NS: u64 = 500_000;

#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Interface of site A and of site B (in the calling thread's namespace).
    pub ifaces: [String; 2],
    pub line: LineConfig,
    pub control: Control,
}

/// How a frame mover (this line, clusterlab-atm's switch) is run by its driver: its trace file
/// and interval, the lifeline it dies with, the descriptor it says "ready" on, real-time or not.
#[derive(Clone, Debug)]
pub struct Control {
    /// Append the mover's counts every `interval_ns` (see [`trace`]).
    pub trace_path: Option<String>,
    pub interval_ns: u64,
    /// Stop when this descriptor reaches end of file (the driver's pipe: the mover dies with
    /// its driver, also on SIGKILL). -1: never.
    pub watch_fd: i32,
    /// Written "ready\n" once the mover's sockets are open. -1: none.
    pub ready_fd: i32,
    /// Try SCHED_FIFO (priority 10); falls back to normal scheduling without the privilege.
    pub realtime: bool,
}

impl Control {
    /// The trace file opened for appending (checked: a zero interval is refused).
    pub fn open_trace(&self) -> io::Result<Option<File>> {
        if self.interval_ns == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "trace interval must be > 0"));
        }
        match &self.trace_path {
            Some(p) => Ok(Some(File::options().create(true).append(true).open(p)
                .map_err(|e| io::Error::new(e.kind(), format!("trace file {p}: {e}")))?)),
            None => Ok(None),
        }
    }

    /// Go real-time if asked (whether it did), then say "ready".
    pub fn start(&self) -> bool {
        let realtime = self.realtime && go_realtime();
        if self.ready_fd >= 0 {
            // SAFETY: writing a static buffer to a descriptor the caller gave us.
            unsafe { libc::write(self.ready_fd, b"ready\n".as_ptr() as *const libc::c_void, 6) };
        }
        realtime
    }

    /// The watched descriptor polled with events `revents`: true when the driver is gone (end
    /// of file, or an error) and the mover must stop.
    pub fn lifeline_closed(&self, revents: libc::c_short) -> bool {
        if self.watch_fd < 0 || revents == 0 {
            return false;
        }
        let mut b = [0u8; 64];
        // SAFETY: b is valid for 64 bytes.
        let n = unsafe { libc::read(self.watch_fd, b.as_mut_ptr() as *mut libc::c_void, b.len()) };
        n == 0 || (n < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EAGAIN))
            || revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 && n <= 0
    }
}

/// What the line did, per direction (0: site A to B).
#[derive(Clone, Debug, Default)]
pub struct Totals {
    pub packets: [u64; 2],
    pub bytes: [u64; 2],
    pub drops: [u64; 2],
    pub send_errors: [u64; 2],
    /// Delivered frames, and how late they left (ns after their due time, negative: early):
    /// sum, sum of squares and the latest.
    pub delivered: [u64; 2],
    pub delivered_bytes: [u64; 2],
    pub late_sum_ns: [i64; 2],
    pub late_sq_sum: [f64; 2],
    pub late_max_ns: [i64; 2],
    pub realtime: bool,
    /// Returns from ppoll and sendmmsg calls (the line's system-call rate).
    pub wakeups: u64,
    pub send_calls: u64,
}

pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_REALTIME in ns (the clock of the kernel's receive stamps).
pub fn real_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Longest early wakeup: a timer that is usually this late means a stalled machine, not latency.
const MAX_EARLY_NS: f64 = 200_000.0;

pub fn unix_seconds() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// SCHED_FIFO priority 10 and 1 ns timer slack for the calling thread; false without the privilege.
pub fn go_realtime() -> bool {
    // SAFETY: plain libc calls on the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0);
        let p = libc::sched_param { sched_priority: 10 };
        libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) == 0
    }
}

struct Held {
    due: u64,
    frame: Vec<u8>,
}

/// Run the byte line until `stop` is set or the watched descriptor closes.
pub fn run(cfg: &RunConfig, stop: &AtomicBool) -> io::Result<Totals> {
    let mut line = Line::new(cfg.line).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    run_model(&cfg.ifaces, &cfg.control, &mut line, stop)
}

/// Move frames between `ifaces` through any line `model` (the caller keeps it, and so its own
/// counters) until `stop` is set or the watched descriptor closes.
pub fn run_model<M: Model>(ifaces: &[String; 2], ctl: &Control, line: &mut M, stop: &AtomicBool) -> io::Result<Totals> {
    let mut trace_file = ctl.open_trace()?;
    // Room for what arrives while the line does not listen (up to MAX_DEAF_NS at a site's rate).
    let buffer = (4 * line.queue_bytes() as usize).clamp(4 << 20, 64 << 20);
    let ports = [Port::open(&ifaces[0], buffer)?, Port::open(&ifaces[1], buffer)?];
    let mut totals = Totals { realtime: ctl.start(), ..Default::default() };
    let mut held: [VecDeque<Held>; 2] = [VecDeque::new(), VecDeque::new()];
    let mut pool: Vec<Vec<u8>> = Vec::new();
    let mut arrived: Vec<(u64, usize, Vec<u8>)> = Vec::new();
    let mut leaving: Vec<Vec<u8>> = Vec::new();
    let mut buf = vec![0u8; MAX_FRAME];
    let mut hist = Histogram::new();
    let mut next_tick = mono_ns() + ctl.interval_ns;
    // The watched descriptor first: while deaf the line polls it alone (polling the packet
    // sockets costs a lock round trip each, even with no events asked for).
    let watch = ctl.watch_fd >= 0;
    let mut fds = [
        libc::pollfd { fd: ctl.watch_fd, events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: ports[0].as_raw_fd(), events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: ports[1].as_raw_fd(), events: libc::POLLIN, revents: 0 },
    ];
    let mut early = 0.0f64; // running mean of timer lateness (ns)
    let mut planned: Option<u64> = None; // the wakeup the last ppoll timeout aimed at
    let deaf_allowed = line.delay_ns() >= MIN_DEAF_DELAY_NS;
    let window = coalesce_ns(line.rate_bps());
    while !stop.load(Ordering::Relaxed) {
        let now = mono_ns();
        if let Some(p) = planned.take() {
            let err = now as f64 - p as f64;
            early = (0.95 * early + 0.05 * err).clamp(0.0, MAX_EARLY_NS);
        }
        // Departures: every frame due by now (plus the expected wakeup lateness); if any is,
        // also those due within the coalescing window after it, in one sendmmsg per port.
        let mut horizon = now + early as u64;
        if held.iter().any(|q| q.front().is_some_and(|h| h.due <= horizon)) {
            horizon += window;
        }
        for d in 0..2 {
            while held[d].front().is_some_and(|h| h.due <= horizon) {
                let h = held[d].pop_front().unwrap();
                let late = now as i64 - h.due as i64;
                totals.delivered[d] += 1;
                totals.delivered_bytes[d] += (h.frame.len() - VNET_HDR_LEN) as u64;
                // Counted as it leaves, like seed 004's monitor bridge, which saw what the line carried.
                hist.add(d, h.frame.len() - VNET_HDR_LEN - ETH_HLEN);
                totals.late_sum_ns[d] += late;
                totals.late_sq_sum[d] += (late as f64) * (late as f64);
                totals.late_max_ns[d] = totals.late_max_ns[d].max(late);
                leaving.push(h.frame);
            }
            if !leaving.is_empty() {
                let refs: Vec<&[u8]> = leaving.iter().map(|f| f.as_slice()).collect();
                let sent = ports[1 - d].send_many(&refs);
                totals.send_errors[d] += (leaving.len() - sent) as u64;
                totals.send_calls += 1;
                pool.append(&mut leaving);
            }
        }
        if now >= next_tick {
            if let Some(f) = trace_file.as_mut() {
                write_trace(f, &hist)?;
            }
            hist.clear();
            next_tick += ctl.interval_ns;
            if next_tick <= now {
                next_tick = now + ctl.interval_ns;
            }
        }
        let mut wake = next_tick;
        let mut departure = false;
        for q in &held {
            if let Some(h) = q.front() {
                let w = h.due.saturating_sub(early as u64);
                if w < wake {
                    wake = w;
                    departure = true;
                }
            }
        }
        // Deaf while frames wait: a frame arriving now cannot be due before now + delay, and the
        // kernel stamps its arrival, so it can be read at the next departure instead of waking
        // the line once per frame. Listen again at least every min(delay, MAX_DEAF_NS).
        let deaf = deaf_allowed && departure;
        if deaf {
            let listen_by = now + line.delay_ns().min(MAX_DEAF_NS);
            if listen_by < wake {
                wake = listen_by;
                departure = false;
            }
        }
        let (first, nfds) = match (watch, deaf) {
            (true, true) => (0, 1),
            (true, false) => (0, 3),
            (false, true) => (3, 0),
            (false, false) => (1, 2),
        };
        let wait = wake.saturating_sub(now);
        let ts = libc::timespec { tv_sec: (wait / 1_000_000_000) as libc::time_t, tv_nsec: (wait % 1_000_000_000) as libc::c_long };
        // SAFETY: fds and ts are valid for the call.
        for f in fds.iter_mut() {
            f.revents = 0;
        }
        let rc = unsafe { libc::ppoll(fds[first..].as_mut_ptr(), nfds, &ts, std::ptr::null()) };
        totals.wakeups += 1;
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(e);
        }
        if rc == 0 && departure && wait > 0 {
            planned = Some(wake);
        }
        read_arrivals(&ports, &mut buf, &mut arrived, &mut pool)?;
        for (stamp, d, frame) in arrived.drain(..) {
            let n = frame.len() - VNET_HDR_LEN; // the Ethernet frame, as the link carries it
            totals.packets[d] += 1;
            totals.bytes[d] += n as u64;
            match line.offer(d, n, stamp) {
                Verdict::Drop => {
                    totals.drops[d] += 1;
                    hist.drop_one(d);
                    pool.push(frame);
                }
                Verdict::Deliver(due) => held[d].push_back(Held { due, frame }),
            }
        }
        if watch && ctl.lifeline_closed(fds[0].revents) {
            break;
        }
    }
    if let Some(f) = trace_file.as_mut() {
        write_trace(f, &hist)?;
    }
    Ok(totals)
}

/// Everything waiting on both ports (up to READ_BATCH each), as (arrival, direction, frame)
/// in arrival order: the kernel's receive stamp (CLOCK_MONOTONIC ns), so a frame read late still
/// counts its delay from when it arrived, and the two directions (one rate when shared) are
/// offered in the order they came.
fn read_arrivals(ports: &[Port; 2], buf: &mut [u8], out: &mut Vec<(u64, usize, Vec<u8>)>,
                 pool: &mut Vec<Vec<u8>>) -> io::Result<()> {
    let offset = real_ns() as i64 - mono_ns() as i64; // kernel stamps are CLOCK_REALTIME
    for (d, port) in ports.iter().enumerate() {
        for _ in 0..READ_BATCH {
            let Some((got, stamp)) = port.recv(buf)? else { break };
            if got < VNET_HDR_LEN + ETH_HLEN {
                continue;
            }
            let mut frame = pool.pop().unwrap_or_default();
            frame.clear();
            frame.extend_from_slice(&buf[..got]);
            let now = mono_ns();
            let mut at = now;
            if stamp > 0 {
                let a = stamp as i64 - offset;
                if a > 0 && (a as u64) < now && now - (a as u64) < 1_000_000_000 {
                    at = a as u64;
                }
            }
            out.push((at, d, frame));
        }
    }
    out.sort_by_key(|a| a.0); // stable: each port's own order is kept for equal stamps
    Ok(())
}

/// The interval's lines, only for directions that saw a frame (an idle line writes nothing;
/// readers count a missing interval as zero).
fn write_trace(f: &mut File, hist: &Histogram) -> io::Result<()> {
    let t = unix_seconds();
    let mut text = String::new();
    for d in 0..2 {
        if hist.totals(d).0 > 0 || hist.drops(d) > 0 {
            text += &trace::line(t, d, hist);
        }
    }
    if !text.is_empty() {
        f.write_all(text.as_bytes())?;
    }
    Ok(())
}
