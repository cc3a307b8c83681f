//! Hot path of the TCP mesh (`clusterlab.comm.tcp.mesh`): poll every connection, read and
//! check frames, file complete messages by (source, tag), and send [header, payload] with one
//! `sendmsg` per attempt, all with the GIL released. Python keeps the sockets (and closes
//! them), the failure policy and the public API; this engine only moves and checks bytes.
//!
//! Wire format: see `clusterlab/comm/tcp/frames.py` (24-byte header, optional dtype + shape,
//! payload). Every check made there is made here, with the same messages.

use numpy::{PyArray1, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use std::collections::{HashMap, VecDeque};
use std::time::Instant;

const MAGIC: &[u8; 4] = b"CLB\x01";
const HSIZE: usize = 24;
const STAGE: usize = 256 * 1024;
const DIRECT_MIN: usize = 32 * 1024;
const MAX_NDIM: usize = 32;
const MAX_DTLEN: usize = 16;
const MAX_META: usize = MAX_DTLEN + 8 * MAX_NDIM;
const K_BYTES: u8 = 0;
const K_ARRAY: u8 = 1;
const K_BYE: u8 = 2;
const K_ABORT: u8 = 3;
const K_CONTROL: u8 = 4;
const MIN_TAG: i32 = -16;
/// Bytes read from one connection per poll round, so that a peer streaming without pause
/// cannot keep a waiting rank from noticing that its own message has arrived.
const ROUND_BUDGET: usize = 8 << 20;
const MAX_TAG: i32 = 1 << 30;

struct Msg {
    seq: u64,
    kind: u8,
    dtype: String,
    shape: Vec<u64>,
    data: Vec<u8>,
}

struct Hdr {
    kind: u8,
    tag: i32,
    len: usize,
    dtype: String,
    shape: Vec<u64>,
}

struct Conn {
    peer: i32,
    fd: i32,
    open: bool,
    stage: Vec<u8>,
    start: usize,
    end: usize,
    hdr: Option<Hdr>,
    direct: Option<(Vec<u8>, usize)>, // (payload so far, its final length)
    rcvtimeo_ms: i32,                 // SO_RCVTIMEO in force (bounds the one blocking recv)
    bytes_sent: u64,
    bytes_recv: u64,
    msgs_sent: u64,
    msgs_recv: u64,
}

/// Something Python must decide about: (peer, code, detail). Codes: "eof" (closed without
/// goodbye), "error" (socket error), "protocol" (bad frame), "bye", "abort" (detail = JSON).
type Event = (i32, &'static str, Vec<u8>);

enum Outcome {
    Msg(i32, Msg),
    Timeout,
    Event(Event),
    NoPeers,
    Closed(i32),
}

#[pyclass(module = "clusterlab._core")]
pub struct NetEngine {
    conns: Vec<Conn>,
    index: HashMap<i32, usize>,
    queues: HashMap<(i32, i32), VecDeque<Msg>>,
    events: VecDeque<Event>,
    seq: u64,
    max_frame: u64,
}

fn errno_str() -> (i32, String) {
    let e = std::io::Error::last_os_error();
    (e.raw_os_error().unwrap_or(0), e.to_string())
}

fn check_dtype(d: &[u8]) -> Option<usize> {
    // ^[<>|=][biufc][0-9]{1,2}$ ; returns the item size
    if d.len() < 3 || d.len() > 4 || !matches!(d[0], b'<' | b'>' | b'|' | b'=') || !matches!(d[1], b'b' | b'i' | b'u' | b'f' | b'c') {
        return None;
    }
    let mut size = 0usize;
    for &c in &d[2..] {
        if !c.is_ascii_digit() {
            return None;
        }
        size = size * 10 + (c - b'0') as usize;
    }
    if size == 0 {
        None
    } else {
        Some(size)
    }
}

impl Conn {
    fn new(peer: i32, fd: i32) -> Self {
        Conn {
            peer,
            fd,
            open: true,
            stage: vec![0u8; STAGE],
            start: 0,
            end: 0,
            hdr: None,
            direct: None,
            rcvtimeo_ms: 0,
            bytes_sent: 0,
            bytes_recv: 0,
            msgs_sent: 0,
            msgs_recv: 0,
        }
    }

    fn compact(&mut self) {
        let avail = self.end - self.start;
        self.stage.copy_within(self.start..self.end, 0);
        self.start = 0;
        self.end = avail;
    }

    /// Parse what the stage holds. Complete messages go to `out`; control frames to `ev`.
    fn parse(&mut self, max_frame: u64, out: &mut Vec<(i32, Msg)>, ev: &mut Vec<Event>) -> Result<(), String> {
        let who = self.peer;
        loop {
            let avail = self.end - self.start;
            if self.hdr.is_none() {
                if avail < HSIZE {
                    break;
                }
                let h = &self.stage[self.start..self.start + HSIZE];
                if &h[0..4] != MAGIC {
                    if &h[0..3] == b"CLB" {
                        return Err(format!("rank {who} speaks protocol version {}, this is version 1", h[3]));
                    }
                    return Err(format!("rank {who} sent a frame with bad magic {}", py_bytes_repr(&h[0..4])));
                }
                let (kind, ndim, dtlen, flags) = (h[4], h[5] as usize, h[6] as usize, h[7]);
                let tag = i32::from_le_bytes(h[8..12].try_into().unwrap());
                let source = i32::from_le_bytes(h[12..16].try_into().unwrap());
                let len = u64::from_le_bytes(h[16..24].try_into().unwrap());
                if kind > K_CONTROL {
                    return Err(format!("rank {who} sent a frame of unknown kind {kind}"));
                }
                if flags != 0 {
                    return Err(format!("rank {who} sent a frame with reserved flags {flags:#x}"));
                }
                if source != who {
                    return Err(format!("rank {who} sent a frame claiming to come from rank {source}"));
                }
                if !(MIN_TAG..MAX_TAG).contains(&tag) {
                    return Err(format!("rank {who} sent a frame with tag {tag} outside {MIN_TAG}..{}", MAX_TAG - 1));
                }
                if len > max_frame {
                    return Err(format!("rank {who} sent a {len}-byte frame; the limit is {max_frame} bytes"));
                }
                if kind == K_ARRAY {
                    if ndim > MAX_NDIM || !(3..=MAX_DTLEN).contains(&dtlen) {
                        return Err(format!("rank {who} sent an array header with ndim {ndim}, dtype length {dtlen}"));
                    }
                } else if ndim != 0 || dtlen != 0 {
                    return Err(format!("rank {who} sent a non-array frame with array meta"));
                }
                if (kind == K_ABORT || kind == K_CONTROL) && len > 1 << 20 {
                    return Err(format!("rank {who} sent a {len}-byte control frame (limit 1 MiB)"));
                }
                if kind == K_BYE && len != 0 {
                    return Err(format!("rank {who} sent a BYE frame with a payload"));
                }
                if kind == K_CONTROL {
                    return Err(format!("rank {who} sent an unexpected control frame (kind {kind})"));
                }
                let mlen = dtlen + 8 * ndim;
                if avail < HSIZE + mlen {
                    break;
                }
                let mut dtype = String::new();
                let mut shape = Vec::new();
                if kind == K_ARRAY {
                    let m = &self.stage[self.start + HSIZE..self.start + HSIZE + mlen];
                    let d = &m[..dtlen];
                    let Some(item) = check_dtype(d) else {
                        return Err(format!("rank {who} sent an array of unsupported dtype {}", py_bytes_repr(d)));
                    };
                    dtype = String::from_utf8_lossy(d).into_owned();
                    let mut total: Option<u64> = Some(item as u64);
                    for k in 0..ndim {
                        let s = u64::from_le_bytes(m[dtlen + 8 * k..dtlen + 8 * k + 8].try_into().unwrap());
                        shape.push(s);
                        total = total.and_then(|t| t.checked_mul(s));
                    }
                    if total != Some(len) {
                        let dims: Vec<String> = shape.iter().map(|s| s.to_string()).collect();
                        let tuple = if ndim == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
                        return Err(format!("rank {who} sent an array of shape {tuple} and dtype {dtype} in {len} bytes"));
                    }
                }
                self.start += HSIZE + mlen;
                self.hdr = Some(Hdr { kind, tag, len: len as usize, dtype, shape });
                continue;
            }
            let n = self.hdr.as_ref().unwrap().len;
            if avail >= n {
                let h = self.hdr.take().unwrap();
                let data = self.stage[self.start..self.start + n].to_vec();
                self.start += n;
                match h.kind {
                    K_BYE => ev.push((who, "bye", Vec::new())),
                    K_ABORT => ev.push((who, "abort", data)),
                    _ => out.push((h.tag, Msg { seq: 0, kind: h.kind, dtype: h.dtype, shape: h.shape, data })),
                }
                continue;
            }
            let kind = self.hdr.as_ref().unwrap().kind;
            if n >= DIRECT_MIN && (kind == K_BYTES || kind == K_ARRAY) {
                // big payload: receive the rest straight into its own buffer. Not zeroed
                // (zeroing megabytes costs as much as receiving them): `len` covers only what
                // has been written, and `read_conn` grows it as bytes arrive.
                let mut v: Vec<u8> = Vec::with_capacity(n);
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
        if self.hdr.is_none() && self.start + HSIZE + MAX_META > STAGE {
            self.compact();
        }
        Ok(())
    }
}

fn py_bytes_repr(b: &[u8]) -> String {
    let mut s = String::from("b'");
    for &c in b {
        match c {
            b'\\' => s.push_str("\\\\"),
            b'\'' => s.push_str("\\'"),
            0x20..=0x7e => s.push(c as char),
            _ => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s.push('\'');
    s
}

impl NetEngine {
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
        let mut out = Vec::new();
        let mut ev = Vec::new();
        loop {
            let c = &mut self.conns[i];
            if !c.open {
                break;
            }
            let (ptr, want) = if let Some((v, total)) = c.direct.as_mut() {
                (v.spare_capacity_mut().as_mut_ptr() as *mut u8, *total - v.len())
            } else {
                if c.start == c.end {
                    c.start = 0;
                    c.end = 0;
                }
                (c.stage[c.end..].as_mut_ptr(), STAGE - c.end)
            };
            // Only the first read of a blocking wait may sleep (in the kernel, on this one
            // socket); every other read takes what is there.
            let flags = if block { block = false; 0 } else { libc::MSG_DONTWAIT };
            // SAFETY: ptr/want describe the unused tail of a buffer this connection owns.
            let n = unsafe { libc::recv(c.fd, ptr as *mut libc::c_void, want, flags) };
            if n < 0 {
                let (code, text) = errno_str();
                if code == libc::EAGAIN || code == libc::EWOULDBLOCK || code == libc::EINTR {
                    break;
                }
                c.open = false;
                ev.push((c.peer, "error", format!("connection error: {text}").into_bytes()));
                break;
            }
            if n == 0 {
                c.open = false;
                ev.push((c.peer, "eof", b"connection closed without goodbye (the process died?)".to_vec()));
                break;
            }
            let n = n as usize;
            got += n;
            c.bytes_recv += n as u64;
            if let Some((v, total)) = c.direct.as_mut() {
                // SAFETY: recv() just initialised these n bytes of spare capacity (n <= want).
                unsafe { v.set_len(v.len() + n) };
                if v.len() == *total {
                    let (v, _) = c.direct.take().unwrap();
                    let h = c.hdr.take().unwrap();
                    out.push((h.tag, Msg { seq: 0, kind: h.kind, dtype: h.dtype, shape: h.shape, data: v }));
                }
            } else {
                c.end += n;
                if let Err(detail) = c.parse(max_frame, &mut out, &mut ev) {
                    c.open = false;
                    ev.push((c.peer, "protocol", detail.into_bytes()));
                    break;
                }
            }
            if n < want || got >= budget {
                break;
            }
        }
        let peer = self.conns[i].peer;
        self.conns[i].msgs_recv += out.len() as u64;
        for (tag, m) in out {
            self.deliver(peer, tag, m);
        }
        self.events.extend(ev);
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
        if q.is_empty() {
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

    fn wait(&mut self, source: i32, tag: i32, timeout: f64) -> Outcome {
        let deadline = Instant::now() + std::time::Duration::from_secs_f64(timeout.max(0.0));
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
            let ms = ((deadline - now).as_secs_f64() * 1000.0).ceil().min(500.0) as i32;
            let ms = ms.max(1);
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
        let c = &self.conns[i];
        (source < 0 || c.peer == source).then_some(i)
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
            libc::setsockopt(c.fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv as *const libc::timeval as *const libc::c_void,
                             std::mem::size_of::<libc::timeval>() as libc::socklen_t)
        };
        if r == 0 {
            c.rcvtimeo_ms = ms;
        }
    }

    /// Send head + payload on connection `i`, draining incoming data while the kernel buffer
    /// is full. Returns None when done, or what stopped it.
    fn send_all(&mut self, i: usize, head: &[u8], payload: &[u8], timeout: f64) -> Option<Outcome> {
        let deadline = Instant::now() + std::time::Duration::from_secs_f64(timeout.max(0.0));
        let total = head.len() + payload.len();
        let mut sent = 0usize;
        while sent < total {
            let c = &self.conns[i];
            if !c.open {
                // its failure was recorded as an event when it happened
                return Some(self.events.iter().position(|e| e.0 == c.peer).and_then(|p| self.events.remove(p)).map_or(
                    Outcome::Event((c.peer, "error", b"connection is closed".to_vec())),
                    Outcome::Event,
                ));
            }
            let mut iov = [
                libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 },
                libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 },
            ];
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
            // SAFETY: a zeroed msghdr is valid; iov points into live slices for the call.
            let n = unsafe {
                let mut mh: libc::msghdr = std::mem::zeroed();
                mh.msg_iov = iov.as_mut_ptr();
                mh.msg_iovlen = niov as _;
                libc::sendmsg(c.fd, &mh, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT)
            };
            if n > 0 {
                sent += n as usize;
                continue;
            }
            let (code, text) = errno_str();
            if n < 0 && code != libc::EAGAIN && code != libc::EWOULDBLOCK && code != libc::EINTR {
                let peer = c.peer;
                self.conns[i].open = false;
                return Some(Outcome::Event((peer, "error", format!("connection error while sending: {text}").into_bytes())));
            }
            // buffer full: wait for room, reading whatever arrives meanwhile
            loop {
                let now = Instant::now();
                if now >= deadline {
                    self.conns[i].bytes_sent += sent as u64;
                    return Some(Outcome::Timeout);
                }
                let ms = ((deadline - now).as_secs_f64() * 1000.0).ceil().min(500.0) as i32;
                if self.poll_once(ms.max(1), Some(i), ROUND_BUDGET) || !self.conns[i].open {
                    break;
                }
            }
        }
        let c = &mut self.conns[i];
        c.bytes_sent += total as u64;
        c.msgs_sent += 1;
        None
    }
}

fn outcome_to_py(py: Python<'_>, o: Outcome) -> PyResult<Py<PyAny>> {
    Ok(match o {
        Outcome::Msg(src, m) => {
            let payload: Py<PyAny> = if m.kind == K_ARRAY {
                PyArray1::from_vec(py, m.data).into_any().unbind()
            } else {
                PyBytes::new(py, &m.data).into_any().unbind()
            };
            let shape = PyTuple::new(py, m.shape)?;
            PyTuple::new(py, [0i32.into_pyobject(py)?.into_any(), src.into_pyobject(py)?.into_any(),
                              m.kind.into_pyobject(py)?.into_any(), m.dtype.into_pyobject(py)?.into_any(),
                              shape.into_any(), payload.into_bound(py)])?.into_any().unbind()
        }
        Outcome::Timeout => PyTuple::new(py, [1i32])?.into_any().unbind(),
        Outcome::Event((peer, code, detail)) => PyTuple::new(py, [2i32.into_pyobject(py)?.into_any(), peer.into_pyobject(py)?.into_any(),
                                                                   code.into_pyobject(py)?.into_any(), PyBytes::new(py, &detail).into_any()])?
            .into_any()
            .unbind(),
        Outcome::NoPeers => PyTuple::new(py, [3i32])?.into_any().unbind(),
        Outcome::Closed(peer) => PyTuple::new(py, [4i32, peer])?.into_any().unbind(),
    })
}

#[pymethods]
impl NetEngine {
    /// `NetEngine(peers=[(rank, fd), ...], max_frame)`: the fds stay owned by Python's sockets
    /// (non-blocking); Python closes them and must call `forget(peer)` first.
    #[new]
    fn new(peers: Vec<(i32, i32)>, max_frame: u64) -> Self {
        let mut conns = Vec::new();
        let mut index = HashMap::new();
        for (peer, fd) in peers {
            index.insert(peer, conns.len());
            conns.push(Conn::new(peer, fd));
            // Blocking mode, so that a wait on the one open connection can sleep in recv();
            // every other call passes MSG_DONTWAIT, and Python's own writes on these sockets
            // (goodbye, abort) do too.
            // SAFETY: fcntl on an fd the caller owns; only O_NONBLOCK changes.
            unsafe {
                let fl = libc::fcntl(fd, libc::F_GETFL);
                if fl >= 0 {
                    libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK);
                }
            }
        }
        NetEngine { conns, index, queues: HashMap::new(), events: VecDeque::new(), seq: 0, max_frame }
    }

    /// Next message from `source` (-1: any) with `tag`, waiting up to `timeout` seconds.
    /// Returns (0, src, kind, dtype, shape, payload) | (1,) timeout | (2, peer, code, detail) |
    /// (3,) no open connection left | (4, source) `source` is closed and nothing of it is
    /// queued. Pending events come first.
    fn recv(mut slf: PyRefMut<'_, Self>, py: Python<'_>, source: i32, tag: i32, timeout: f64) -> PyResult<Py<PyAny>> {
        let this = &mut *slf;
        let o = if !this.events.is_empty() || this.queues.contains_key(&(source, tag)) {
            this.wait(source, tag, timeout) // already here: no need to give up the GIL
        } else {
            py.detach(|| this.wait(source, tag, timeout))
        };
        outcome_to_py(py, o)
    }

    /// Send a frame (header bytes + uint8 payload) to `dest`. Returns None when it is all in
    /// the kernel, else (1,) timeout | (2, peer, code, detail) when `dest` failed.
    /// `payload` is `bytes` or a C-contiguous numpy array (its raw buffer is sent, no copy).
    #[pyo3(signature = (dest, head, payload, timeout))]
    fn send(mut slf: PyRefMut<'_, Self>, py: Python<'_>, dest: i32, head: &[u8], payload: &Bound<'_, PyAny>,
            timeout: f64) -> PyResult<Option<Py<PyAny>>> {
        let Some(&i) = slf.index.get(&dest) else {
            return Err(pyo3::exceptions::PyValueError::new_err(format!("no connection to rank {dest}")));
        };
        let body: &[u8] = if let Ok(b) = payload.cast::<PyBytes>() {
            b.as_bytes()
        } else if let Ok(a) = payload.cast::<PyUntypedArray>() {
            if !a.is_c_contiguous() {
                return Err(pyo3::exceptions::PyValueError::new_err("payload array must be C-contiguous"));
            }
            let n = a.len() * a.dtype().itemsize();
            if n == 0 {
                &[]
            } else {
                // SAFETY: a C-contiguous array's data pointer covers len * itemsize bytes, and the
                // caller keeps the array alive (and unmodified) for the duration of this call.
                unsafe { std::slice::from_raw_parts((*a.as_array_ptr()).fields.data as *const u8, n) }
            }
        } else {
            return Err(pyo3::exceptions::PyTypeError::new_err("payload must be bytes or a numpy array"));
        };
        let this = &mut *slf;
        let r = if body.len() + head.len() <= 64 * 1024 {
            this.send_all(i, head, body, timeout) // short: not worth a GIL round trip
        } else {
            py.detach(|| this.send_all(i, head, body, timeout))
        };
        match r {
            None => Ok(None),
            Some(o) => Ok(Some(outcome_to_py(py, o)?)),
        }
    }

    /// The latency path of `send`: builds the header here (no Python struct packing) for a
    /// `bytes` payload or a C-contiguous numpy array of a plain numeric dtype, then sends as
    /// `send` does. Returns None when sent, the failure tuple of `send`, or `(5,)` when the
    /// payload is anything else (too big, strided, other dtype or type): Python's general
    /// path then sends it or raises the precise error.
    #[pyo3(signature = (dest, tag, rank, payload, timeout))]
    fn send_fast(mut slf: PyRefMut<'_, Self>, py: Python<'_>, dest: i32, tag: i32, rank: i32, payload: &Bound<'_, PyAny>,
                 timeout: f64) -> PyResult<Option<Py<PyAny>>> {
        let fallback = || Ok(Some(PyTuple::new(py, [5i32])?.into_any().unbind()));
        let Some(&i) = slf.index.get(&dest) else {
            return fallback();
        };
        let mut head = [0u8; HSIZE + MAX_META];
        head[0..4].copy_from_slice(MAGIC);
        let hlen;
        let body: &[u8] = if let Ok(b) = payload.cast_exact::<PyBytes>() {
            head[4] = K_BYTES;
            hlen = HSIZE;
            b.as_bytes()
        } else if let Ok(a) = payload.cast_exact::<PyUntypedArray>() {
            let d = a.dtype();
            let (kind, item) = (d.kind(), d.itemsize());
            let ndim = a.ndim();
            if !a.is_c_contiguous() || !matches!(kind, b'b' | b'i' | b'u' | b'f' | b'c') || d.has_fields()
                || d.has_subarray() || ndim > MAX_NDIM || item == 0 || item > 99 {
                return fallback();
            }
            // numpy's dtype.str: '|' for one-byte types, '<'/'>' otherwise ('=' is native)
            let order = match d.byteorder() {
                _ if item == 1 => b'|',
                b'=' => if cfg!(target_endian = "little") { b'<' } else { b'>' },
                b'<' => b'<',
                b'>' => b'>',
                _ => return fallback(),
            };
            let mut dts = [order, kind, 0, 0];
            let dtlen = if item < 10 {
                dts[2] = b'0' + item as u8;
                3
            } else {
                dts[2] = b'0' + (item / 10) as u8;
                dts[3] = b'0' + (item % 10) as u8;
                4
            };
            head[4] = K_ARRAY;
            head[5] = ndim as u8;
            head[6] = dtlen as u8;
            head[HSIZE..HSIZE + dtlen].copy_from_slice(&dts[..dtlen]);
            let mut off = HSIZE + dtlen;
            for &s in a.shape() {
                head[off..off + 8].copy_from_slice(&(s as u64).to_le_bytes());
                off += 8;
            }
            hlen = off;
            let n = a.len() * item;
            if n == 0 {
                &[]
            } else {
                // SAFETY: as in `send`: a C-contiguous array's data covers len * itemsize bytes,
                // and the caller keeps it alive for the duration of this call.
                unsafe { std::slice::from_raw_parts((*a.as_array_ptr()).fields.data as *const u8, n) }
            }
        } else {
            return fallback();
        };
        if body.len() as u64 > slf.max_frame {
            return fallback();
        }
        head[8..12].copy_from_slice(&tag.to_le_bytes());
        head[12..16].copy_from_slice(&rank.to_le_bytes());
        head[16..24].copy_from_slice(&(body.len() as u64).to_le_bytes());
        let head = &head[..hlen];
        let this = &mut *slf;
        let r = if body.len() + head.len() <= 64 * 1024 {
            this.send_all(i, head, body, timeout)
        } else {
            py.detach(|| this.send_all(i, head, body, timeout))
        };
        match r {
            None => Ok(None),
            Some(o) => Ok(Some(outcome_to_py(py, o)?)),
        }
    }

    /// The latency path of `recv`: like `recv`, but a `bytes` message or a one-dimensional
    /// uint8 array is returned as itself (no tuple to unpack, no dtype view in Python);
    /// anything else comes as `recv`'s tuple.
    fn recv_fast(mut slf: PyRefMut<'_, Self>, py: Python<'_>, source: i32, tag: i32, timeout: f64) -> PyResult<Py<PyAny>> {
        let this = &mut *slf;
        let o = if !this.events.is_empty() || this.queues.contains_key(&(source, tag)) {
            this.wait(source, tag, timeout)
        } else {
            py.detach(|| this.wait(source, tag, timeout))
        };
        if let Outcome::Msg(_, m) = &o {
            if m.kind == K_BYTES {
                return Ok(PyBytes::new(py, &m.data).into_any().unbind());
            }
            if m.kind == K_ARRAY && m.shape.len() == 1 && m.dtype == "|u1" {
                let Outcome::Msg(_, m) = o else { unreachable!() };
                return Ok(PyArray1::from_vec(py, m.data).into_any().unbind());
            }
        }
        outcome_to_py(py, o)
    }

    /// Read what is ready on any connection without waiting, at most about `budget` bytes per
    /// connection (for the background drainer, which must hand the sockets back quickly).
    /// Returns the number of bytes now queued here.
    fn pump(mut slf: PyRefMut<'_, Self>, py: Python<'_>, budget: usize) -> usize {
        let this = &mut *slf;
        py.detach(|| {
            this.poll_once(0, None, budget);
            this.queues.values().flat_map(|q| q.iter().map(|m| m.data.len())).sum::<usize>()
        })
    }

    /// Whether any event is pending (cheap; no I/O).
    fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// Stop using `peer`'s fd (Python is about to close it).
    fn forget(&mut self, peer: i32) {
        if let Some(&i) = self.index.get(&peer) {
            self.conns[i].open = false;
        }
    }

    /// Per-peer counters: [(peer, bytes_sent, bytes_recv, msgs_sent, msgs_recv, open)].
    fn counters(&self) -> Vec<(i32, u64, u64, u64, u64, bool)> {
        self.conns.iter().map(|c| (c.peer, c.bytes_sent, c.bytes_recv, c.msgs_sent, c.msgs_recv, c.open)).collect()
    }

    /// Count a frame Python wrote itself (BYE/ABORT) in the counters.
    fn count_sent(&mut self, peer: i32, nbytes: u64) {
        if let Some(&i) = self.index.get(&peer) {
            self.conns[i].bytes_sent += nbytes;
        }
    }
}

/// Make glibc keep and reuse the memory of freed large buffers (up to `mmap_threshold` bytes
/// per buffer served from the heap, up to `trim_threshold` bytes kept when free). Every
/// received message gets a new buffer; without this each one is fresh memory from the kernel,
/// and its page faults cost as much as receiving it. Process-wide (numpy benefits too).
/// Returns whether glibc accepted both settings.
#[pyfunction]
fn net_tune_malloc(mmap_threshold: i32, trim_threshold: i32) -> bool {
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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NetEngine>()?;
    m.add_function(wrap_pyfunction!(net_tune_malloc, m)?)?;
    Ok(())
}
