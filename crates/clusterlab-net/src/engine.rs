//! The socket engine of the TCP mesh: poll every connection, read and check frames (`wire`),
//! file complete messages by (source, tag), and send [header, payload] with one `sendmsg` per
//! attempt, reading whatever arrives while the kernel buffer is full (so two ranks sending
//! large messages to each other never deadlock).
//!
//! The engine does not own its file descriptors: the caller opened them (and authenticated
//! them) and closes them, after `forget`. It never decides policy either: a peer that closes,
//! breaks the protocol or aborts becomes an `Event` the caller acts on.
//!
//! Python's reference engine (`clusterlab/comm/tcp/engine_python.py`) behaves the same way
//! and reports the same `Status` and `EventKind` names.

use crate::pool::{Buf, Pool, PoolStats};
use crate::wire::{self, Dtype, Header, Kind};
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Small frames are assembled in this per-connection staging buffer (one `recv` may carry many).
pub const STAGE: usize = 256 * 1024;
/// Payloads at least this big are received straight into their own buffer.
pub const DIRECT_MIN: usize = 32 * 1024;
/// Bytes read from one connection per poll round, so that a peer streaming without pause
/// cannot keep a waiting rank from noticing that its own message has arrived.
pub const ROUND_BUDGET: usize = 8 << 20;
/// Frames up to this size (header and payload) are sent from one buffer.
const JOIN_MAX: usize = 512;
/// Longest single sleep in the kernel; the deadline and failure checks run between sleeps.
const MAX_SLEEP_MS: f64 = 500.0;

/// What an engine call returns. The numbers cross into Python; the names are shared with
/// Python's `engine.Status`.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// a message (from the awaited source, or any with source -1)
    Message = 0,
    /// the deadline passed
    Timeout = 1,
    /// something the caller must decide about (see `EventKind`)
    Event = 2,
    /// no connection is open any more
    NoPeers = 3,
    /// the awaited source has closed and nothing of it is queued
    Closed = 4,
    /// (send) a payload the caller must frame itself
    Unsupported = 5,
}

impl Status {
    pub const ALL: [Status; 6] =
        [Status::Message, Status::Timeout, Status::Event, Status::NoPeers, Status::Closed, Status::Unsupported];

    pub fn name(self) -> &'static str {
        match self {
            Status::Message => "MESSAGE",
            Status::Timeout => "TIMEOUT",
            Status::Event => "EVENT",
            Status::NoPeers => "NO_PEERS",
            Status::Closed => "CLOSED",
            Status::Unsupported => "UNSUPPORTED",
        }
    }
}

/// Why a connection needs the caller's attention. Names shared with Python's `engine.EventKind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// closed without a goodbye frame (the process died?)
    Eof,
    /// a socket error
    Error,
    /// a frame that breaks the protocol (detail: the `WireError` text)
    Protocol,
    /// a goodbye: the peer is done
    Bye,
    /// the peer fails the job (detail: the ABORT frame's JSON)
    Abort,
}

impl EventKind {
    pub const ALL: [EventKind; 5] = [EventKind::Eof, EventKind::Error, EventKind::Protocol, EventKind::Bye, EventKind::Abort];

    pub fn name(self) -> &'static str {
        match self {
            EventKind::Eof => "eof",
            EventKind::Error => "error",
            EventKind::Protocol => "protocol",
            EventKind::Bye => "bye",
            EventKind::Abort => "abort",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub peer: i32,
    pub kind: EventKind,
    pub detail: Vec<u8>,
}

/// A received message. `dtype` and `shape` are set for arrays.
#[derive(Debug)]
pub struct Msg {
    pub seq: u64,
    pub kind: Kind,
    pub dtype: Option<Dtype>,
    pub shape: Vec<u64>,
    /// the payload; big ones in a buffer of the engine's pool (`pool`), given back when dropped
    pub data: Buf,
}

#[derive(Debug)]
pub enum Outcome {
    Msg(i32, Msg),
    Timeout,
    Event(Event),
    NoPeers,
    Closed(i32),
}

impl Outcome {
    pub fn status(&self) -> Status {
        match self {
            Outcome::Msg(..) => Status::Message,
            Outcome::Timeout => Status::Timeout,
            Outcome::Event(_) => Status::Event,
            Outcome::NoPeers => Status::NoPeers,
            Outcome::Closed(_) => Status::Closed,
        }
    }
}

/// Per-connection traffic counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub peer: i32,
    pub bytes_sent: u64,
    pub bytes_recv: u64,
    pub msgs_sent: u64,
    pub msgs_recv: u64,
    pub open: bool,
}

struct Pending {
    header: Header,
    dtype: Option<Dtype>,
    shape: Vec<u64>,
}

struct Conn {
    fd: RawFd,
    open: bool,
    stage: Vec<u8>,
    start: usize,
    end: usize,
    pending: Option<Pending>,
    direct: Option<(Buf, usize)>,     // (payload so far, its final length)
    rcvtimeo_ms: i32,                 // SO_RCVTIMEO in force (bounds the one blocking recv)
    bye: bool,                        // the peer said goodbye: its close is no failure
    counters: Counters,
}

fn last_errno() -> (i32, String) {
    let e = std::io::Error::last_os_error();
    (e.raw_os_error().unwrap_or(0), e.to_string())
}

/// Milliseconds of one sleep in the kernel toward a deadline `left` away (1..=MAX_SLEEP_MS).
fn sleep_ms(left: Duration) -> i32 {
    (left.as_secs_f64() * 1000.0).ceil().clamp(1.0, MAX_SLEEP_MS) as i32
}

fn would_block(code: i32) -> bool {
    code == libc::EAGAIN || code == libc::EWOULDBLOCK || code == libc::EINTR
}

impl Conn {
    fn new(peer: i32, fd: RawFd) -> Self {
        Conn {
            fd,
            open: true,
            stage: vec![0u8; STAGE],
            start: 0,
            end: 0,
            pending: None,
            direct: None,
            rcvtimeo_ms: 0,
            bye: false,
            counters: Counters { peer, open: true, ..Counters::default() },
        }
    }

    fn peer(&self) -> i32 {
        self.counters.peer
    }

    fn compact(&mut self) {
        let avail = self.end - self.start;
        self.stage.copy_within(self.start..self.end, 0);
        self.start = 0;
        self.end = avail;
    }

    /// Parse what the stage holds: complete messages go to `out` as (tag, message), goodbyes
    /// and aborts to `ev`.
    /// Big payloads (`DIRECT_MIN` and up) get a buffer of `pool`, sized for one per peer of `peers`.
    fn parse(&mut self, max_frame: u64, pool: &Arc<Pool>, peers: usize, out: &mut Vec<(i32, Msg)>, ev: &mut Vec<Event>) -> Result<(), wire::WireError> {
        let who = self.peer();
        loop {
            let avail = self.end - self.start;
            if self.pending.is_none() {
                if avail < wire::HEADER_LEN {
                    break;
                }
                let h = wire::decode_fixed(&self.stage[self.start..self.start + wire::HEADER_LEN], who, max_frame, 0)?;
                if h.kind == Kind::Control {
                    return Err(wire::WireError(format!("rank {who} sent an unexpected control frame (kind {})", Kind::Control as u8)));
                }
                let mlen = h.meta_len();
                if avail < wire::HEADER_LEN + mlen {
                    break;
                }
                let (dtype, shape) = if h.kind == Kind::Array {
                    let m = &self.stage[self.start + wire::HEADER_LEN..self.start + wire::HEADER_LEN + mlen];
                    let (d, s) = wire::decode_array_meta(m, &h)?;
                    (Some(d), s)
                } else {
                    (None, Vec::new())
                };
                self.start += wire::HEADER_LEN + mlen;
                self.pending = Some(Pending { header: h, dtype, shape });
                continue;
            }
            let n = self.pending.as_ref().map_or(0, |p| p.header.length as usize);
            if avail >= n {
                let p = self.pending.take().expect("pending frame");
                let body = &self.stage[self.start..self.start + n];
                let data = if n >= DIRECT_MIN && matches!(p.header.kind, Kind::Bytes | Kind::Array) {
                    let mut b = pool.take(n, peers);
                    b.extend_from_slice(body);
                    b
                } else {
                    Buf::from_vec(body.to_vec())
                };
                self.start += n;
                match p.header.kind {
                    Kind::Bye => {
                        self.bye = true;
                        ev.push(Event { peer: who, kind: EventKind::Bye, detail: Vec::new() })
                    }
                    Kind::Abort => ev.push(Event { peer: who, kind: EventKind::Abort, detail: data.to_vec() }),
                    kind => out.push((p.header.tag, Msg { seq: 0, kind, dtype: p.dtype, shape: p.shape, data })),
                }
                continue;
            }
            let kind = self.pending.as_ref().map(|p| p.header.kind);
            if n >= DIRECT_MIN && matches!(kind, Some(Kind::Bytes | Kind::Array)) {
                // big payload: receive the rest straight into its own buffer. Not zeroed
                // (zeroing megabytes costs as much as receiving them): `len` covers only what
                // has been written, and `read_conn` grows it as bytes arrive.
                let mut v = pool.take(n, peers);
                v.extend_from_slice(&self.stage[self.start..self.end]);
                self.start = 0;
                self.end = 0;
                self.direct = Some((v, n));
                return Ok(());
            }
            if self.start + n > STAGE {
                self.compact();
            }
            break;
        }
        if self.pending.is_none() && self.start + wire::MAX_HEAD > STAGE {
            self.compact();
        }
        Ok(())
    }
}

/// The hash of the engine's maps (ranks, (source, tag) pairs): rustc's "Fx" multiply-rotate,
/// a few instructions per key instead of SipHash's ~100 on every message. Keys come only from
/// authenticated peers, so collision flooding is not a concern here.
#[derive(Default, Clone, Copy)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64);
    }
    fn write_i32(&mut self, n: i32) {
        self.write_u64(n as u32 as u64);
    }
    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// Queues (source, tag) kept when emptied, at most (see `take`).
const KEEP_EMPTY: usize = 64;

/// The engine: one per rank, over the connections to its peers.
pub struct Engine {
    conns: Vec<Conn>,
    index: FastMap<i32, usize>,
    queues: FastMap<(i32, i32), VecDeque<Msg>>,
    events: VecDeque<Event>,
    seq: u64,
    max_frame: u64,
    // what one read_conn parsed, kept between calls so that a read allocates no list
    scratch_out: Vec<(i32, Msg)>,
    scratch_ev: Vec<Event>,
    /// the receive buffers of big payloads (bounded; see `pool`)
    pool: Arc<Pool>,
}

impl Engine {
    /// An engine over `peers` (rank, fd). The fds are switched to blocking mode, so that a wait
    /// on the one open connection can sleep in `recv()`; every other call passes `MSG_DONTWAIT`.
    pub fn new(peers: &[(i32, RawFd)], max_frame: u64) -> Self {
        let mut e = Engine { conns: Vec::new(), index: FastMap::default(), queues: FastMap::default(), events: VecDeque::new(), seq: 0, max_frame,
                            scratch_out: Vec::new(), scratch_ev: Vec::new(), pool: Pool::new(crate::pool::POOL_LIMIT) };
        for &(peer, fd) in peers {
            e.add(peer, fd);
        }
        e
    }

    /// Start using connection `fd` to `peer` (replacing a closed one to the same peer).
    pub fn add(&mut self, peer: i32, fd: RawFd) {
        // SAFETY: fcntl on an fd the caller owns; only O_NONBLOCK changes.
        unsafe {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            if fl >= 0 {
                libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK);
            }
        }
        let c = Conn::new(peer, fd);
        match self.index.get(&peer) {
            Some(&i) => {
                let old = std::mem::replace(&mut self.conns[i], c);
                let k = &mut self.conns[i].counters;
                (k.bytes_sent, k.bytes_recv, k.msgs_sent, k.msgs_recv) =
                    (old.counters.bytes_sent, old.counters.bytes_recv, old.counters.msgs_sent, old.counters.msgs_recv);
            }
            None => {
                self.index.insert(peer, self.conns.len());
                self.conns.push(c);
            }
        }
    }

    /// Replace the pool of receive buffers by one keeping at most `limit` bytes (0: none, big
    /// payloads get heap buffers). Buffers lent out by the old pool go back to it.
    pub fn set_pool_limit(&mut self, limit: usize) {
        self.pool = Pool::new(limit);
    }

    pub fn pool_limit(&self) -> usize {
        self.pool.limit()
    }

    /// What the pool of receive buffers holds.
    pub fn pool_stats(&self) -> PoolStats {
        self.pool.stats()
    }

    pub fn max_frame(&self) -> u64 {
        self.max_frame
    }

    pub fn has_peer(&self, peer: i32) -> bool {
        self.index.contains_key(&peer)
    }

    /// Whether a wait for (`source`, `tag`) would return at once (no I/O): an event is pending
    /// or the message is queued. Lets a binding skip releasing its interpreter lock.
    pub fn ready(&self, source: i32, tag: i32) -> bool {
        !self.events.is_empty() || self.queues.get(&(source, tag)).is_some_and(|q| !q.is_empty())
    }

    /// The next message from `source` (-1: any) with `tag` if one is already queued and no
    /// event is pending (what `wait` would return first), without I/O; else None.
    pub fn take_queued(&mut self, source: i32, tag: i32) -> Option<(i32, Msg)> {
        if !self.events.is_empty() {
            return None;
        }
        self.take(source, tag)
    }

    fn deliver(&mut self, peer: i32, tag: i32, mut m: Msg) {
        self.seq += 1;
        m.seq = self.seq;
        self.queues.entry((peer, tag)).or_default().push_back(m);
    }

    /// Read what is available on connection `i` (non-blocking), at most about `budget` bytes.
    /// With `block`, the first read sleeps until data, EOF or the socket's receive timeout.
    fn read_conn(&mut self, i: usize, budget: usize, mut block: bool) {
        let mut got = 0usize;
        let max_frame = self.max_frame;
        let (pool, peers) = (self.pool.clone(), self.conns.len());
        let mut out = std::mem::take(&mut self.scratch_out);
        let mut ev = std::mem::take(&mut self.scratch_ev);
        loop {
            let c = &mut self.conns[i];
            if !c.open {
                break;
            }
            let (ptr, want) = if let Some((v, total)) = c.direct.as_mut() {
                (v.spare().0, *total - v.len())
            } else {
                if c.start == c.end {
                    c.start = 0;
                    c.end = 0;
                }
                (c.stage[c.end..].as_mut_ptr(), STAGE - c.end)
            };
            // Only the first read of a blocking wait may sleep (in the kernel, on this one
            // socket); every other read takes what is there.
            let flags = if block {
                block = false;
                0
            } else {
                libc::MSG_DONTWAIT
            };
            // SAFETY: ptr/want describe the unused tail of a buffer this connection owns.
            let n = unsafe { libc::recv(c.fd, ptr as *mut libc::c_void, want, flags) };
            if n < 0 {
                let (code, text) = last_errno();
                if would_block(code) {
                    break;
                }
                c.open = false;
                ev.push(Event { peer: c.peer(), kind: EventKind::Error, detail: format!("connection error: {text}").into_bytes() });
                break;
            }
            if n == 0 {
                c.open = false;
                ev.push(Event {
                    peer: c.peer(),
                    kind: EventKind::Eof,
                    detail: b"connection closed without goodbye (the process died?)".to_vec(),
                });
                break;
            }
            let n = n as usize;
            got += n;
            c.counters.bytes_recv += n as u64;
            if let Some((v, total)) = c.direct.as_mut() {
                // SAFETY: recv() just initialised these n bytes of spare capacity (n <= want).
                unsafe { v.advance(n) };
                if v.len() == *total {
                    let (v, _) = c.direct.take().expect("direct buffer");
                    let p = c.pending.take().expect("pending frame");
                    out.push((p.header.tag, Msg { seq: 0, kind: p.header.kind, dtype: p.dtype, shape: p.shape, data: v }));
                }
            } else {
                c.end += n;
                if let Err(detail) = c.parse(max_frame, &pool, peers, &mut out, &mut ev) {
                    c.open = false;
                    ev.push(Event { peer: c.peer(), kind: EventKind::Protocol, detail: detail.0.into_bytes() });
                    break;
                }
            }
            if n < want || got >= budget {
                break;
            }
        }
        let peer = self.conns[i].peer();
        self.conns[i].counters.msgs_recv += out.len() as u64;
        for (tag, m) in out.drain(..) {
            self.deliver(peer, tag, m);
        }
        self.events.extend(ev.drain(..));
        (self.scratch_out, self.scratch_ev) = (out, ev);
    }

    fn take(&mut self, source: i32, tag: i32) -> Option<(i32, Msg)> {
        let key = if source >= 0 {
            (source, tag)
        } else {
            let mut best: Option<((i32, i32), u64)> = None;
            for (k, q) in self.queues.iter() {
                if k.1 == tag {
                    if let Some(m) = q.front() {
                        if best.is_none_or(|b| m.seq < b.1) {
                            best = Some((*k, m.seq));
                        }
                    }
                }
            }
            best?.0
        };
        let q = self.queues.get_mut(&key)?;
        let m = q.pop_front()?;
        // keep a few emptied queues (and their memory) for the next message on the same
        // (source, tag), as in a ping-pong: no allocation per message; past KEEP_EMPTY keys,
        // emptied ones go (a program using ever new tags must not accumulate them)
        if q.is_empty() && self.queues.len() > KEEP_EMPTY {
            self.queues.remove(&key);
        }
        Some((key.0, m))
    }

    /// One poll over every open connection (plus POLLOUT on `out`); reads what is ready.
    /// Returns whether `out` is writable.
    fn poll_once(&mut self, timeout_ms: i32, out: Option<usize>, budget: usize) -> bool {
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(self.conns.len());
        let mut which: Vec<usize> = Vec::with_capacity(self.conns.len());
        for (i, c) in self.conns.iter().enumerate() {
            if c.open {
                let mut events = libc::POLLIN;
                if Some(i) == out {
                    events |= libc::POLLOUT;
                }
                fds.push(libc::pollfd { fd: c.fd, events, revents: 0 });
                which.push(i);
            }
        }
        if fds.is_empty() {
            return false;
        }
        // SAFETY: fds is a valid array of fds.len() pollfd structs.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        if r <= 0 {
            return false;
        }
        let mut writable = false;
        for (k, p) in fds.iter().enumerate() {
            if p.revents == 0 {
                continue;
            }
            if Some(which[k]) == out && p.revents & libc::POLLOUT != 0 {
                writable = true;
            }
            if p.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                self.read_conn(which[k], budget, false);
            }
        }
        writable
    }

    /// The next message from `source` (-1: any) with `tag`, waiting up to `timeout`. Pending
    /// events come first.
    pub fn wait(&mut self, source: i32, tag: i32, timeout: Duration) -> Outcome {
        self.wait_until(source, tag, Instant::now() + timeout)
    }

    /// `wait` with the deadline itself (a caller that needs it later reads the clock once).
    pub fn wait_until(&mut self, source: i32, tag: i32, deadline: Instant) -> Outcome {
        loop {
            if let Some(e) = self.events.pop_front() {
                return Outcome::Event(e);
            }
            if let Some((src, m)) = self.take(source, tag) {
                return Outcome::Msg(src, m);
            }
            if source >= 0 && self.index.get(&source).is_none_or(|&i| !self.conns[i].open) {
                return Outcome::Closed(source);
            }
            if !self.conns.iter().any(|c| c.open) {
                return Outcome::NoPeers;
            }
            let now = Instant::now();
            if now >= deadline {
                return Outcome::Timeout;
            }
            let ms = sleep_ms(deadline - now);
            if let Some(i) = self.single_open(source) {
                // one connection left to watch: sleep in recv() on it, as NPtcp does, instead
                // of poll() then recv() (a second wake-up on the latency path)
                self.set_rcvtimeo(i, ms);
                self.read_conn(i, ROUND_BUDGET, true);
            } else {
                self.poll_once(ms, None, ROUND_BUDGET);
            }
        }
    }

    /// The only open connection, when it is the one awaited (`source` is it, or -1). With
    /// more than one, a wait must watch them all (to drain senders and see deaths): poll.
    fn single_open(&self, source: i32) -> Option<usize> {
        let mut found = None;
        for (i, c) in self.conns.iter().enumerate() {
            if c.open {
                if found.is_some() {
                    return None;
                }
                found = Some(i);
            }
        }
        let i = found?;
        (source < 0 || self.conns[i].peer() == source).then_some(i)
    }

    /// Bound a blocking recv() on connection `i` to `ms` (a syscall only when it changes).
    fn set_rcvtimeo(&mut self, i: usize, ms: i32) {
        let c = &mut self.conns[i];
        if c.rcvtimeo_ms == ms {
            return;
        }
        let tv = libc::timeval { tv_sec: (ms / 1000) as libc::time_t, tv_usec: ((ms % 1000) * 1000) as libc::suseconds_t };
        // SAFETY: tv is a valid timeval for the duration of the call.
        let r = unsafe {
            libc::setsockopt(
                c.fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                &tv as *const libc::timeval as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if r == 0 {
            c.rcvtimeo_ms = ms;
        }
    }

    /// Whether `e` fails the job: anything but a goodbye and the close or error after one.
    fn is_failure(&self, e: &Event) -> bool {
        match e.kind {
            EventKind::Bye => false,
            EventKind::Eof | EventKind::Error => !self.index.get(&e.peer).is_some_and(|&i| self.conns[i].bye),
            EventKind::Protocol | EventKind::Abort => true,
        }
    }

    /// The event that closed connection `i`, or a generic one.
    fn closed_event(&mut self, i: usize) -> Outcome {
        let peer = self.conns[i].peer();
        // the first event of this peer: a goodbye before the close makes the close expected
        match self.events.iter().position(|e| e.peer == peer) {
            Some(p) => Outcome::Event(self.events.remove(p).expect("event")),
            None => Outcome::Event(Event { peer, kind: EventKind::Error, detail: b"connection is closed".to_vec() }),
        }
    }

    /// Send `head` + `payload` to `dest`, reading whatever arrives while the kernel buffer is
    /// full. `Ok` when all of it is in the kernel; otherwise what stopped it: a timeout, the
    /// connection's failure, or another peer's failure seen while waiting (the frame may then
    /// be half written: the caller must not use this connection again).
    pub fn send(&mut self, dest: i32, head: &[u8], payload: &[u8], timeout: Duration) -> Result<(), Outcome> {
        let Some(&i) = self.index.get(&dest) else {
            return Err(Outcome::Closed(dest));
        };
        let mut deadline = None; // read the clock only if the kernel buffer is full
        let total = head.len() + payload.len();
        // a small frame goes out as one buffer with send(), the kernel's lighter path (no
        // iovec array to import), as a C ping-pong would write it
        let mut joined = [0u8; JOIN_MAX];
        let (head, payload) = if total <= JOIN_MAX && !payload.is_empty() {
            joined[..head.len()].copy_from_slice(head);
            joined[head.len()..total].copy_from_slice(payload);
            (&joined[..total], &[][..])
        } else {
            (head, payload)
        };
        let mut sent = 0usize;
        while sent < total {
            if !self.conns[i].open {
                return Err(self.closed_event(i));
            }
            let mut iov = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; 2];
            let mut niov = 0;
            if sent < head.len() {
                iov[0] = libc::iovec { iov_base: head[sent..].as_ptr() as *mut libc::c_void, iov_len: head.len() - sent };
                niov = 1;
                if !payload.is_empty() {
                    iov[1] = libc::iovec { iov_base: payload.as_ptr() as *mut libc::c_void, iov_len: payload.len() };
                    niov = 2;
                }
            } else {
                let off = sent - head.len();
                iov[0] = libc::iovec { iov_base: payload[off..].as_ptr() as *mut libc::c_void, iov_len: payload.len() - off };
                niov = niov.max(1);
            }
            // SAFETY: a zeroed msghdr is valid; iov points into live slices (or `joined`) for the call.
            let n = unsafe {
                if niov == 1 {
                    libc::send(self.conns[i].fd, iov[0].iov_base, iov[0].iov_len, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT)
                } else {
                    let mut mh: libc::msghdr = std::mem::zeroed();
                    mh.msg_iov = iov.as_mut_ptr();
                    mh.msg_iovlen = niov as _;
                    libc::sendmsg(self.conns[i].fd, &mh, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT)
                }
            };
            if n > 0 {
                sent += n as usize;
                continue;
            }
            let (code, text) = last_errno();
            if n < 0 && !would_block(code) {
                let c = &mut self.conns[i];
                c.open = false;
                c.counters.bytes_sent += sent as u64;
                return Err(Outcome::Event(Event {
                    peer: dest,
                    kind: EventKind::Error,
                    detail: format!("connection error while sending: {text}").into_bytes(),
                }));
            }
            // buffer full: wait for room, reading whatever arrives meanwhile
            let deadline = *deadline.get_or_insert_with(|| Instant::now() + timeout);
            loop {
                let now = Instant::now();
                if now >= deadline {
                    self.conns[i].counters.bytes_sent += sent as u64;
                    return Err(Outcome::Timeout);
                }
                let ms = sleep_ms(deadline - now);
                let writable = self.poll_once(ms, Some(i), ROUND_BUDGET);
                if let Some(p) = self.events.iter().position(|e| e.peer != dest && self.is_failure(e)) {
                    // another peer failed while we wait: the job is failing, say so now
                    self.conns[i].counters.bytes_sent += sent as u64;
                    return Err(Outcome::Event(self.events.remove(p).expect("event")));
                }
                if writable || !self.conns[i].open {
                    break;
                }
            }
        }
        let c = &mut self.conns[i].counters;
        c.bytes_sent += total as u64;
        c.msgs_sent += 1;
        Ok(())
    }

    /// One non-blocking attempt to send `frame` to `peer` (best effort: for the news of a
    /// failure, which must never wait). Returns whether all of it went.
    pub fn send_nowait(&mut self, peer: i32, frame: &[u8]) -> bool {
        let Some(&i) = self.index.get(&peer) else {
            return false;
        };
        let c = &mut self.conns[i];
        if !c.open {
            return false;
        }
        // SAFETY: frame is a live slice for the duration of the call.
        let n = unsafe { libc::send(c.fd, frame.as_ptr() as *const libc::c_void, frame.len(), libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
        if n > 0 {
            c.counters.bytes_sent += n as u64;
        }
        n == frame.len() as isize
    }

    /// Read what is ready on any connection without waiting, at most about `budget` bytes per
    /// connection (for a background reader, which must hand the sockets back quickly).
    /// Returns the number of payload bytes now queued.
    pub fn pump(&mut self, budget: usize) -> usize {
        self.poll_once(0, None, budget);
        self.queues.values().flat_map(|q| q.iter().map(|m| m.data.len())).sum()
    }

    /// Stop using `peer`'s connection (the caller is about to close it).
    pub fn forget(&mut self, peer: i32) {
        if let Some(&i) = self.index.get(&peer) {
            self.conns[i].open = false;
        }
    }

    /// Per-peer counters, in the order the peers were added.
    pub fn counters(&self) -> Vec<Counters> {
        self.conns.iter().map(|c| Counters { open: c.open, ..c.counters }).collect()
    }
}

/// Make glibc keep and reuse the memory of freed large buffers (up to `mmap_threshold` bytes
/// per buffer served from the heap, up to `trim_threshold` bytes kept when free). Every
/// received message gets a new buffer; without reuse each one is fresh memory from the kernel,
/// and its page faults cost as much as receiving it. Big payloads come from the engine's own
/// bounded `pool`; this serves the rest. Process-wide. Returns whether glibc accepted both
/// settings (false elsewhere).
pub fn tune_malloc(mmap_threshold: i32, trim_threshold: i32) -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes allocator tunables.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, mmap_threshold) == 1 && libc::mallopt(libc::M_TRIM_THRESHOLD, trim_threshold) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = (mmap_threshold, trim_threshold);
        false
    }
}
