//! Binding of the mesh's socket engine (`clusterlab-net`) as `clusterlab._core.NetEngine`:
//! argument and result conversion, the interpreter lock released around every wait, the
//! exclusion between the program's calls and the background reader (`CallLock`), and the
//! latency path: `comm_send` / `comm_recv`, which `TcpCommunicator` installs as its own `send`
//! and `recv`, so a small message goes from the caller to the socket without a Python frame.
//! The engine, its statuses and the wire format live in the pure crate; Python's side of the
//! interface is `clusterlab/comm/tcp/engine.py` (statuses shared by name: `NET_STATUS`).
//!
//! Everything the fast calls cannot finish themselves goes to the communicator's Python
//! methods, which keep the policy: arguments out of range (`_send_py` / `_recv_py`, which raise
//! the precise errors), payloads the engine does not frame (`_send`), a failed send
//! (`_send_failed`), a wait that ends in anything but a message (`_wait_locked`), a busy
//! engine, and every call once the communicator has failed or closed (`stop_fast`).

use clusterlab_net::engine::{Engine, EventKind, Msg, Outcome, Status};
use clusterlab_net::lock::CallLock;
use clusterlab_net::pool::Buf;
use clusterlab_net::wire::{self, Dtype, Kind};
use numpy::ndarray::ArrayView1;
use numpy::{PyArray1, PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyRuntimeError, PyTimeoutError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple, PyWeakrefMethods, PyWeakrefReference};
use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Sends up to this size are not worth giving up the interpreter lock for.
const SHORT_SEND: usize = 64 * 1024;
/// Received arrays up to this size are copied into an array numpy allocates: cheaper than
/// handing numpy the received buffer, which takes a second Python object (its owner) per
/// message; larger ones are handed over without a copy.
const SMALL_COPY: usize = 4096;
/// Tags: users' are 0..MAX_USER_TAG, the collectives' is COLLECTIVE_TAG (`comm/payload.py`).
const MAX_USER_TAG: i64 = 1 << 30;
const COLLECTIVE_TAG: i64 = -1;

/// The owner of a received array's memory (the array's base): gives the buffer back to the
/// engine's pool, or to the kernel, when the array goes.
#[pyclass(module = "clusterlab._core", frozen)]
struct RecvBuffer {
    _buf: Buf,
}

/// What the engine's holder may touch.
struct State {
    engine: Engine,
    dtypes: HashMap<Dtype, Py<PyArrayDescr>>,
}

/// What the fast calls know of their communicator (`bind`, once).
struct Fast {
    comm: Py<PyWeakrefReference>, // weak: the communicator holds us, not the reverse
    rank: i64,
    size: i64,
}

#[pyclass(module = "clusterlab._core", subclass, frozen)]
pub struct NetEngine {
    /// the call/drainer exclusion: whoever holds it may touch `state`
    lock: CallLock,
    /// the holder's thread token (0: none), so a thread that holds it can call back in
    owner: AtomicUsize,
    /// communication calls started by the program: the drainer's sign of a program at work
    calls: AtomicU64,
    /// the communicator's default timeout (f64 bits, and as nanoseconds)
    timeout_s: AtomicU64,
    timeout_ns: AtomicU64,
    /// the communicator failed or closed: every fast call goes to Python, which raises
    stopped: AtomicBool,
    fast: OnceLock<Fast>,
    state: UnsafeCell<State>,
}

// SAFETY: `state` is touched only by the thread holding `lock` (`Held`, `owner`); the other
// fields are atomics or set once.
unsafe impl Sync for NetEngine {}

thread_local! {
    static TOKEN: u8 = const { 0 };
}

/// A number that identifies the calling thread (the address of a thread-local).
fn me() -> usize {
    TOKEN.with(|t| t as *const u8 as usize)
}

/// The engine held for the duration of a call (given back on drop if this call took it).
struct Held<'a> {
    e: &'a NetEngine,
    owned: bool,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if self.owned {
            self.e.give_back();
        }
    }
}

fn seconds(timeout: f64) -> Duration {
    // NaN, negative: no wait; absurdly long: a billion seconds
    Duration::from_secs_f64(if timeout.is_nan() { 0.0 } else { timeout.clamp(0.0, 1e9) })
}

/// `time.monotonic()`'s value at `deadline` (the same clock as `Instant`: CLOCK_MONOTONIC).
fn monotonic_at(deadline: Instant) -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9 + deadline.saturating_duration_since(Instant::now()).as_secs_f64()
}

fn status(py: Python<'_>, s: Status) -> PyResult<Bound<'_, PyAny>> {
    Ok((s as u8).into_pyobject(py)?.into_any())
}

fn small_int(x: &Bound<'_, PyAny>) -> Option<i64> {
    x.extract::<i64>().ok()
}

impl NetEngine {
    /// SAFETY: the caller holds `lock` (a live `Held`) and keeps no other reference into
    /// `state` alive meanwhile (in particular none across a call into Python).
    #[allow(clippy::mut_from_ref)]
    unsafe fn st(&self) -> &mut State {
        &mut *self.state.get()
    }

    fn give_back(&self) {
        self.owner.store(0, Relaxed);
        self.lock.unlock();
    }

    /// A call's `timeout` argument as a wait: None or absent is the communicator's default;
    /// None returned when it is not a number (the general path then reports it).
    fn wait_of(&self, timeout: Option<&Bound<'_, PyAny>>) -> Option<Duration> {
        match timeout {
            None => Some(self.default_timeout()),
            Some(x) if x.is_none() => Some(self.default_timeout()),
            Some(x) => x.extract::<f64>().ok().map(seconds),
        }
    }

    fn default_timeout(&self) -> Duration {
        Duration::from_nanos(self.timeout_ns.load(Relaxed))
    }

    /// Take the engine now if it is free.
    fn take_now(&self) -> Option<Held<'_>> {
        if !self.lock.try_lock() {
            return None;
        }
        self.owner.store(me(), Relaxed);
        Some(Held { e: self, owned: true })
    }

    /// The engine for one call of an engine method: this thread may already hold it (the
    /// communicator's policy runs under it); otherwise wait for it, up to the default timeout.
    fn enter(&self, py: Python<'_>) -> PyResult<Held<'_>> {
        if self.owner.load(Relaxed) == me() {
            return Ok(Held { e: self, owned: false });
        }
        if let Some(h) = self.take_now() {
            return Ok(h);
        }
        let t = self.default_timeout();
        if !py.detach(|| self.lock.lock_for(t)) {
            return Err(PyTimeoutError::new_err(format!("the mesh engine stayed busy for {} s (another thread's call)", t.as_secs_f64())));
        }
        self.owner.store(me(), Relaxed);
        Ok(Held { e: self, owned: true })
    }

    /// Wait for (`source`, `tag`) until `deadline`, the interpreter lock released unless the
    /// answer is already here. The caller holds the engine.
    fn wait(&self, py: Python<'_>, source: i32, tag: i32, deadline: Instant) -> Outcome {
        // SAFETY: the caller holds the engine; this reference ends with the wait.
        let engine = unsafe { &mut self.st().engine };
        if engine.ready(source, tag) {
            engine.wait_until(source, tag, deadline) // already here: keep the interpreter lock
        } else {
            py.detach(|| engine.wait_until(source, tag, deadline))
        }
    }

    /// A received message as the object Python hands out: `bytes`, or an array of the frame's
    /// dtype and shape (small ones copied into numpy's own memory, large ones handed over).
    /// The caller holds the engine.
    fn payload<'py>(&self, py: Python<'py>, m: Msg) -> PyResult<Bound<'py, PyAny>> {
        if m.kind != Kind::Array {
            return Ok(PyBytes::new(py, &m.data).into_any());
        }
        let dtype = m.dtype.unwrap_or_default();
        let one_dim = m.shape.len() == 1;
        let raw = if m.data.len() <= SMALL_COPY {
            PyArray1::from_slice(py, &m.data).into_any()
        } else {
            let (ptr, len) = (m.data.as_ptr(), m.data.len());
            let owner = Bound::new(py, RecvBuffer { _buf: m.data })?;
            // SAFETY: the view covers the owner's initialised bytes, which stay where they are
            // (a Buf never reallocates) until the owner, the array's base, is dropped.
            unsafe { PyArray1::borrow_from_array(&ArrayView1::from_shape_ptr(len, ptr), owner.into_any()) }.into_any()
        };
        if dtype.as_bytes() == b"|u1" && one_dim {
            return Ok(raw);
        }
        // SAFETY: the caller holds the engine; each reference into the cache ends at once.
        let cached = unsafe { self.st().dtypes.get(&dtype).map(|d| d.bind(py).clone()) };
        let descr = match cached {
            Some(d) => d,
            None => {
                let d = PyArrayDescr::new(py, dtype.as_str())?;
                unsafe { self.st().dtypes.insert(dtype, d.clone().unbind()) };
                d
            }
        };
        let arr = raw.call_method1(intern!(py, "view"), (descr,))?;
        if one_dim {
            Ok(arr)
        } else {
            arr.call_method1(intern!(py, "reshape"), (PyTuple::new(py, &m.shape)?,))
        }
    }

    /// An engine result as Python sees it: the payload for a message from `source` (or
    /// `(MESSAGE, src, payload)` for source -1), else the status tuple.
    fn outcome(&self, py: Python<'_>, source: i32, o: Outcome) -> PyResult<Py<PyAny>> {
        match o {
            Outcome::Msg(src, m) => {
                let p = self.payload(py, m)?;
                if source >= 0 {
                    Ok(p.unbind())
                } else {
                    Ok(PyTuple::new(py, [status(py, Status::Message)?, src.into_pyobject(py)?.into_any(), p])?.into_any().unbind())
                }
            }
            o => Self::status_tuple(py, o),
        }
    }

    /// An outcome other than a message as Python's status tuple.
    fn status_tuple(py: Python<'_>, o: Outcome) -> PyResult<Py<PyAny>> {
        let t = match o {
            Outcome::Msg(..) => unreachable!("messages are converted by the caller"),
            Outcome::Timeout | Outcome::NoPeers => PyTuple::new(py, [status(py, o.status())?])?,
            Outcome::Closed(peer) => PyTuple::new(py, [status(py, Status::Closed)?, peer.into_pyobject(py)?.into_any()])?,
            Outcome::Event(e) => PyTuple::new(
                py,
                [
                    status(py, Status::Event)?,
                    e.peer.into_pyobject(py)?.into_any(),
                    e.kind.name().into_pyobject(py)?.into_any(),
                    PyBytes::new(py, &e.detail).into_any(),
                ],
            )?,
        };
        Ok(t.into_any().unbind())
    }

    fn send_result(py: Python<'_>, r: Result<(), Outcome>) -> PyResult<Option<Py<PyAny>>> {
        match r {
            Ok(()) => Ok(None),
            Err(Outcome::Closed(dest)) => Err(PyValueError::new_err(format!("no connection to rank {dest}"))),
            Err(o) => Ok(Some(Self::status_tuple(py, o)?)),
        }
    }

    /// Frame `payload` (bytes, or a C-contiguous plain numeric array) and send it; `None` for
    /// payloads the caller must frame itself. The caller holds the engine.
    fn frame_and_send(&self, py: Python<'_>, dest: i32, tag: i32, source: i32, payload: &Bound<'_, PyAny>, timeout: Duration)
                      -> Option<Result<(), Outcome>> {
        let mut head = [0u8; wire::MAX_HEAD];
        let (hlen, body): (usize, &[u8]) = if let Ok(b) = payload.cast_exact::<PyBytes>() {
            let body = b.as_bytes();
            (wire::encode(&mut head, Kind::Bytes, tag, source, body.len() as u64, b"", &[], 0), body)
        } else if let Ok(a) = payload.cast_exact::<PyUntypedArray>() {
            let d = a.dtype();
            let dims = a.shape();
            let (Some(dtype), Some(body)) = (wire::dtype_name(d.byteorder(), d.kind(), d.itemsize()), array_bytes(a)) else {
                return None;
            };
            if d.has_fields() || d.has_subarray() || dims.len() > wire::MAX_NDIM {
                return None;
            }
            let mut shape = [0u64; wire::MAX_NDIM]; // on the stack: no allocation per send
            for (s, &n) in shape.iter_mut().zip(dims) {
                *s = n as u64;
            }
            let shape = &shape[..dims.len()];
            (wire::encode(&mut head, Kind::Array, tag, source, body.len() as u64, dtype.as_bytes(), shape, 0), body)
        } else {
            return None;
        };
        // SAFETY: the caller holds the engine; the reference ends with the send.
        let engine = unsafe { &mut self.st().engine };
        if body.len() as u64 > engine.max_frame() || !engine.has_peer(dest) {
            return None; // the caller raises the precise error
        }
        let head = &head[..hlen];
        Some(if body.len() + hlen <= SHORT_SEND {
            engine.send(dest, head, body, timeout)
        } else {
            py.detach(|| engine.send(dest, head, body, timeout))
        })
    }

    /// The communicator the fast calls belong to.
    fn comm<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.fast
            .get()
            .and_then(|f| f.comm.bind(py).upgrade())
            .ok_or_else(|| PyRuntimeError::new_err("the communicator of this engine is gone"))
    }
}

/// The raw bytes of a C-contiguous numpy array (None if it is not one).
fn array_bytes<'a>(a: &'a Bound<'_, PyUntypedArray>) -> Option<&'a [u8]> {
    if !a.is_c_contiguous() {
        return None;
    }
    let n = a.len() * a.dtype().itemsize();
    if n == 0 {
        return Some(&[]);
    }
    // SAFETY: a C-contiguous array's data covers len * itemsize bytes, and the caller keeps the
    // array alive (and unmodified) for the duration of the call that uses the slice.
    Some(unsafe { std::slice::from_raw_parts((*a.as_array_ptr()).fields.data as *const u8, n) })
}

#[pymethods]
impl NetEngine {
    /// `NetEngine(peers=[(rank, fd), ...], max_frame)`. The fds stay owned by Python's sockets
    /// (and are switched to blocking mode); Python closes them, after `forget(peer)`.
    #[new]
    fn new(peers: Vec<(i32, i32)>, max_frame: u64) -> Self {
        let t = 60.0f64;
        NetEngine {
            lock: CallLock::new(),
            owner: AtomicUsize::new(0),
            calls: AtomicU64::new(0),
            timeout_s: AtomicU64::new(t.to_bits()),
            timeout_ns: AtomicU64::new(seconds(t).as_nanos() as u64),
            stopped: AtomicBool::new(false),
            fast: OnceLock::new(),
            state: UnsafeCell::new(State { engine: Engine::new(&peers, max_frame), dtypes: HashMap::new() }),
        }
    }

    // --- the call/drainer exclusion -----------------------------------------------------------

    /// Hold the engine for a call of the program (counted, see `calls`), waiting up to
    /// `timeout` seconds with the interpreter lock released; whether it was taken. Every
    /// engine method called meanwhile from this thread runs under it.
    fn acquire(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        self.calls.store(self.calls.load(Relaxed).wrapping_add(1), Relaxed);
        if self.owner.load(Relaxed) == me() {
            return Err(PyRuntimeError::new_err("this thread already holds the mesh engine"));
        }
        if !self.lock.try_lock() {
            let t = seconds(timeout);
            if t.is_zero() || !py.detach(|| self.lock.lock_for(t)) {
                return Ok(false);
            }
        }
        self.owner.store(me(), Relaxed);
        Ok(true)
    }

    /// The background reader's: hold the engine only if it is free and the program has started
    /// no call since it saw `seen` calls (not counted as a call).
    fn try_acquire_idle(&self, seen: u64) -> bool {
        if self.calls.load(Relaxed) != seen || !self.lock.try_lock() {
            return false;
        }
        if self.calls.load(Relaxed) != seen {
            self.lock.unlock();
            return false;
        }
        self.owner.store(me(), Relaxed);
        true
    }

    /// Give the engine back (this thread holds it).
    fn release(&self) -> PyResult<()> {
        if self.owner.load(Relaxed) != me() {
            return Err(PyRuntimeError::new_err("release of a mesh engine this thread does not hold"));
        }
        self.give_back();
        Ok(())
    }

    /// Whether some thread holds the engine (a call is under way).
    fn locked(&self) -> bool {
        self.lock.is_locked()
    }

    /// Communication calls the program has started so far.
    fn calls(&self) -> u64 {
        self.calls.load(Relaxed)
    }

    // --- the latency path ---------------------------------------------------------------------

    /// Make `comm_send` / `comm_recv` the calls of `comm` (rank `rank` of `size`).
    fn bind(&self, comm: &Bound<'_, PyAny>, rank: i64, size: i64) -> PyResult<()> {
        let f = Fast { comm: PyWeakrefReference::new(comm)?.unbind(), rank, size };
        self.fast.set(f).map_err(|_| PyRuntimeError::new_err("engine is already bound to a communicator"))
    }

    /// The default timeout of the bound communicator's calls, in seconds.
    fn set_timeout(&self, timeout: f64) {
        self.timeout_s.store(timeout.to_bits(), Relaxed);
        self.timeout_ns.store(seconds(timeout).as_nanos().min(u64::MAX as u128) as u64, Relaxed);
    }

    /// From now on every fast call goes to the communicator's Python methods (it failed or
    /// closed: they raise).
    fn stop_fast(&self) {
        self.stopped.store(true, Relaxed);
    }

    /// `TcpCommunicator.send(dest, data, tag=0)` without a Python frame: checks, one framed
    /// `sendmsg`, done; everything else goes to the communicator's Python methods.
    #[pyo3(signature = (dest, data, tag=None))]
    fn comm_send(&self, py: Python<'_>, dest: &Bound<'_, PyAny>, data: &Bound<'_, PyAny>, tag: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let general = || -> PyResult<()> {
            let tag = match tag {
                Some(t) => t.clone(),
                None => 0i32.into_pyobject(py)?.into_any(),
            };
            self.comm(py)?.call_method1(intern!(py, "_send_py"), (dest, data, tag))?;
            Ok(())
        };
        let (Some(f), Some(d), Some(t)) = (self.fast.get(), small_int(dest), tag.map_or(Some(0), small_int)) else {
            return general();
        };
        if d == f.rank || !(0..f.size).contains(&d) || !((0..MAX_USER_TAG).contains(&t) || t == COLLECTIVE_TAG) {
            return general(); // raises the precise error
        }
        self.calls.store(self.calls.load(Relaxed).wrapping_add(1), Relaxed);
        if self.stopped.load(Relaxed) {
            return general();
        }
        let Some(held) = self.take_now() else {
            return general(); // busy (the drainer, another thread): wait there, bounded
        };
        let (d, t) = (d as i32, t as i32);
        match self.frame_and_send(py, d, t, f.rank as i32, data, self.default_timeout()) {
            Some(Ok(())) => Ok(()),
            None => {
                drop(held);
                self.comm(py)?.call_method1(intern!(py, "_send"), (d, data, t))?;
                Ok(())
            }
            Some(Err(Outcome::Closed(dest))) => Err(PyValueError::new_err(format!("no connection to rank {dest}"))),
            Some(Err(o)) => {
                let r = Self::status_tuple(py, o)?;
                self.comm(py)?.call_method1(intern!(py, "_send_failed"), (d, r))?; // raises
                Ok(())
            }
        }
    }

    /// `TcpCommunicator.send_many(blocks, tag)`: `comm_send(dest, data, tag)` for each
    /// `(dest, data)` of the list `blocks`, in order, in one call (HPA's message blocks: one
    /// call per read block instead of one per 8 KB block). When every block is `bytes` to a
    /// peer and the engine is free, the whole list goes out with the interpreter lock released
    /// (the rank's counter and drainer threads run meanwhile); otherwise each block takes
    /// `comm_send`'s path, falling back to the communicator's Python methods where that does.
    /// The first error stops the loop and is raised. Returns the number of blocks sent.
    fn comm_send_many(&self, py: Python<'_>, blocks: &Bound<'_, PyList>, tag: &Bound<'_, PyAny>) -> PyResult<usize> {
        let bad = || PyTypeError::new_err("send_many takes a list of (dest, data) tuples");
        let mut pairs = Vec::with_capacity(blocks.len());
        for item in blocks.iter() {
            let pair = item.cast::<PyTuple>().map_err(|_| bad())?;
            if pair.len() != 2 {
                return Err(bad());
            }
            pairs.push((pair.get_item(0)?, pair.get_item(1)?));
        }
        let each = |pairs: &[(Bound<'_, PyAny>, Bound<'_, PyAny>)]| -> PyResult<()> {
            for (d, data) in pairs {
                self.comm_send(py, d, data, Some(tag))?;
            }
            Ok(())
        };
        let n = pairs.len();
        let (Some(f), Some(t)) = (self.fast.get(), small_int(tag)) else {
            each(&pairs)?;
            return Ok(n);
        };
        let mut bodies: Vec<(i32, PyBackedBytes)> = Vec::with_capacity(n);
        for (d, data) in &pairs {
            let (Some(d), Ok(b)) = (small_int(d), data.cast_exact::<PyBytes>()) else { break };
            if d == f.rank || !(0..f.size).contains(&d) {
                break;
            }
            bodies.push((d as i32, PyBackedBytes::from(b.clone())));
        }
        if bodies.len() < n || !((0..MAX_USER_TAG).contains(&t) || t == COLLECTIVE_TAG) || self.stopped.load(Relaxed) {
            each(&pairs)?;
            return Ok(n);
        }
        let Some(held) = self.take_now() else {
            each(&pairs)?;
            return Ok(n);
        };
        // SAFETY: held; the reference ends with the sends.
        let engine = unsafe { &mut self.st().engine };
        if bodies.iter().any(|(d, b)| b.len() as u64 > engine.max_frame() || !engine.has_peer(*d)) {
            drop(held);
            each(&pairs)?;
            return Ok(n);
        }
        self.calls.store(self.calls.load(Relaxed).wrapping_add(1), Relaxed);
        let (t, source, timeout) = (t as i32, f.rank as i32, self.default_timeout());
        let sent = py.detach(|| {
            let mut head = [0u8; wire::MAX_HEAD];
            for (d, b) in &bodies {
                let hlen = wire::encode(&mut head, Kind::Bytes, t, source, b.len() as u64, b"", &[], 0);
                engine.send(*d, &head[..hlen], b, timeout).map_err(|o| (*d, o))?;
            }
            Ok(())
        });
        match sent {
            Ok(()) => Ok(n),
            Err((dest, Outcome::Closed(_))) => Err(PyValueError::new_err(format!("no connection to rank {dest}"))),
            Err((dest, o)) => {
                let r = Self::status_tuple(py, o)?;
                self.comm(py)?.call_method1(intern!(py, "_send_failed"), (dest, r))?; // raises
                Ok(n)
            }
        }
    }

    /// `TcpCommunicator.recv(source, tag=0, timeout=None)` without a Python frame: the message
    /// as the final object; waits that end otherwise go to the communicator's `_wait_locked`.
    #[pyo3(signature = (source, tag=None, timeout=None))]
    fn comm_recv(&self, py: Python<'_>, source: &Bound<'_, PyAny>, tag: Option<&Bound<'_, PyAny>>, timeout: Option<&Bound<'_, PyAny>>)
                 -> PyResult<Py<PyAny>> {
        let general = || -> PyResult<Py<PyAny>> {
            let tag = match tag {
                Some(t) => t.clone(),
                None => 0i32.into_pyobject(py)?.into_any(),
            };
            Ok(self.comm(py)?.call_method1(intern!(py, "_recv_py"), (source, tag, timeout))?.unbind())
        };
        let (Some(f), Some(s), Some(t)) = (self.fast.get(), small_int(source), tag.map_or(Some(0), small_int)) else {
            return general();
        };
        if s == f.rank || !(0..f.size).contains(&s) || !((0..MAX_USER_TAG).contains(&t) || t == COLLECTIVE_TAG) {
            return general();
        }
        let Some(wait) = self.wait_of(timeout) else {
            return general();
        };
        self.calls.store(self.calls.load(Relaxed).wrapping_add(1), Relaxed);
        if self.stopped.load(Relaxed) {
            return general();
        }
        let Some(_held) = self.take_now() else {
            return general();
        };
        let (s, t) = (s as i32, t as i32);
        let deadline = Instant::now() + wait;
        match self.wait(py, s, t, deadline) {
            Outcome::Msg(_, m) => Ok(self.payload(py, m)?.unbind()),
            o => {
                // the failure policy, under the engine as before
                let r = Self::status_tuple(py, o)?;
                let got = self.comm(py)?.call_method1(intern!(py, "_wait_locked"), (s, t, monotonic_at(deadline), r))?;
                Ok(got.get_item(1)?.unbind())
            }
        }
    }

    /// `TcpCommunicator.recv_many(tag, timeout, max)`: `recv_any(tag, timeout)`'s message,
    /// then every further message with `tag` already received (up to `max` in all, no more
    /// waiting, stopping at a pending event), as a list of `(source, payload)` in arrival order.
    /// A first wait that ends otherwise than in a message goes to the communicator's
    /// `_wait_locked` (which raises `CommTimeout` on a timeout), as in `comm_recv`.
    #[pyo3(signature = (tag, timeout=None, max=1024))]
    fn comm_recv_many<'py>(&self, py: Python<'py>, tag: &Bound<'py, PyAny>, timeout: Option<&Bound<'py, PyAny>>, max: usize)
                           -> PyResult<Bound<'py, PyList>> {
        let general = || -> PyResult<Bound<'py, PyList>> {
            let got = self.comm(py)?.call_method1(intern!(py, "recv_any"), (tag, timeout))?;
            PyList::new(py, [got])
        };
        let (Some(_f), Some(t)) = (self.fast.get(), small_int(tag)) else {
            return general();
        };
        if !((0..MAX_USER_TAG).contains(&t) || t == COLLECTIVE_TAG) {
            return general();
        }
        let Some(wait) = self.wait_of(timeout) else {
            return general();
        };
        self.calls.store(self.calls.load(Relaxed).wrapping_add(1), Relaxed);
        if self.stopped.load(Relaxed) {
            return general();
        }
        let Some(_held) = self.take_now() else {
            return general();
        };
        let t = t as i32;
        let deadline = Instant::now() + wait;
        let out = PyList::empty(py);
        match self.wait(py, -1, t, deadline) {
            Outcome::Msg(src, m) => out.append((src, self.payload(py, m)?))?,
            o => {
                let r = Self::status_tuple(py, o)?;
                let got = self.comm(py)?.call_method1(intern!(py, "_wait_locked"), (-1, t, monotonic_at(deadline), r))?;
                out.append(got)?;
            }
        }
        while out.len() < max.max(1) {
            // SAFETY: held; the reference ends with the call.
            let next = unsafe { self.st().engine.take_queued(-1, t) };
            let Some((src, m)) = next else { break };
            out.append((src, self.payload(py, m)?))?;
        }
        Ok(out)
    }

    // --- the engine (the communicator calls these under `acquire`) ----------------------------

    /// Start using connection `fd` to `peer` (replacing a closed one).
    fn add(&self, py: Python<'_>, peer: i32, fd: i32) -> PyResult<()> {
        let _h = self.enter(py)?;
        // SAFETY: held.
        unsafe { self.st().engine.add(peer, fd) };
        Ok(())
    }

    /// The next message from `source` with `tag`, waiting up to `timeout` seconds: the payload
    /// itself; with `source` -1 (any), `(MESSAGE, src, payload)`; otherwise a status tuple:
    /// `(TIMEOUT,)`, `(EVENT, peer, kind name, detail)`, `(NO_PEERS,)`, `(CLOSED, source)`.
    fn recv(&self, py: Python<'_>, source: i32, tag: i32, timeout: f64) -> PyResult<Py<PyAny>> {
        let _h = self.enter(py)?;
        let o = self.wait(py, source, tag, Instant::now() + seconds(timeout));
        self.outcome(py, source, o)
    }

    /// Frame and send `payload` (`bytes`, or a C-contiguous numpy array of a plain numeric
    /// dtype) to `dest` as rank `source`. None when it is all in the kernel; `(UNSUPPORTED,)`
    /// for any other payload (the caller frames it and uses `send_frame`); else `(TIMEOUT,)`
    /// or an `(EVENT, ...)` tuple.
    #[pyo3(signature = (dest, tag, source, payload, timeout))]
    fn send(&self, py: Python<'_>, dest: i32, tag: i32, source: i32, payload: &Bound<'_, PyAny>, timeout: f64) -> PyResult<Option<Py<PyAny>>> {
        let _h = self.enter(py)?;
        match self.frame_and_send(py, dest, tag, source, payload, seconds(timeout)) {
            Some(r) => Self::send_result(py, r),
            None => Ok(Some(PyTuple::new(py, [status(py, Status::Unsupported)?])?.into_any().unbind())),
        }
    }

    /// Send a frame the caller built (`head`, from `frames.py`) with `payload` (`bytes` or a
    /// C-contiguous numpy array, sent from its own memory). Results as `send`.
    #[pyo3(signature = (dest, head, payload, timeout))]
    fn send_frame(&self, py: Python<'_>, dest: i32, head: &[u8], payload: &Bound<'_, PyAny>, timeout: f64) -> PyResult<Option<Py<PyAny>>> {
        let body: &[u8] = if let Ok(b) = payload.cast::<PyBytes>() {
            b.as_bytes()
        } else if let Ok(a) = payload.cast::<PyUntypedArray>() {
            array_bytes(a).ok_or_else(|| PyValueError::new_err("payload array must be C-contiguous"))?
        } else {
            return Err(PyTypeError::new_err("payload must be bytes or a numpy array"));
        };
        let _h = self.enter(py)?;
        // SAFETY: held; the reference ends with the send.
        let engine = unsafe { &mut self.st().engine };
        let timeout = seconds(timeout);
        let r = if body.len() + head.len() <= SHORT_SEND {
            engine.send(dest, head, body, timeout)
        } else {
            py.detach(|| engine.send(dest, head, body, timeout))
        };
        Self::send_result(py, r)
    }

    /// One non-blocking attempt to send `frame` to `peer`; whether all of it went.
    fn send_nowait(&self, py: Python<'_>, peer: i32, frame: &[u8]) -> PyResult<bool> {
        let _h = self.enter(py)?;
        // SAFETY: held.
        Ok(unsafe { self.st().engine.send_nowait(peer, frame) })
    }

    /// Read what is ready without waiting (about `budget` bytes per connection); returns the
    /// payload bytes now queued.
    fn pump(&self, py: Python<'_>, budget: usize) -> PyResult<usize> {
        let _h = self.enter(py)?;
        // SAFETY: held; the reference ends with the pump.
        let engine = unsafe { &mut self.st().engine };
        Ok(py.detach(|| engine.pump(budget)))
    }

    /// Stop using `peer`'s fd (Python is about to close it).
    fn forget(&self, py: Python<'_>, peer: i32) -> PyResult<()> {
        let _h = self.enter(py)?;
        // SAFETY: held.
        unsafe { self.st().engine.forget(peer) };
        Ok(())
    }

    /// Per-peer counters: [(peer, bytes_sent, bytes_recv, msgs_sent, msgs_recv, open)].
    fn counters(&self, py: Python<'_>) -> PyResult<Vec<(i32, u64, u64, u64, u64, bool)>> {
        let _h = self.enter(py)?;
        // SAFETY: held.
        let c = unsafe { self.st().engine.counters() };
        Ok(c.iter().map(|c| (c.peer, c.bytes_sent, c.bytes_recv, c.msgs_sent, c.msgs_recv, c.open)).collect())
    }

    /// The pool of receive buffers: {bound, owned, idle, trimmed, limit (bytes), overflow, taken (buffers)}.
    fn pool_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let _h = self.enter(py)?;
        // SAFETY: held.
        let (p, limit) = unsafe { (self.st().engine.pool_stats(), self.st().engine.pool_limit()) };
        let d = PyDict::new(py);
        for (k, v) in [("bound", p.bound as u64), ("owned", p.owned as u64), ("idle", p.idle as u64), ("overflow", p.overflow),
                       ("trimmed", p.trimmed), ("taken", p.taken), ("limit", limit as u64)] {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// Keep at most `limit` bytes of receive buffers (0: no pool; see `clusterlab_net::pool`).
    fn set_pool_limit(&self, py: Python<'_>, limit: usize) -> PyResult<()> {
        let _h = self.enter(py)?;
        // SAFETY: held.
        unsafe { self.st().engine.set_pool_limit(limit) };
        Ok(())
    }
}

/// glibc: reuse freed large buffers (see `clusterlab_net::tune_malloc`).
#[pyfunction]
fn net_tune_malloc(mmap_threshold: i32, trim_threshold: i32) -> bool {
    clusterlab_net::tune_malloc(mmap_threshold, trim_threshold)
}

/// The Rust wire format's encoder (for the cross-language agreement test): a header plus
/// array description.
#[pyfunction]
#[pyo3(signature = (kind, tag, source, length, dtype, shape, flags=0))]
#[allow(clippy::too_many_arguments)]
fn wire_encode<'py>(py: Python<'py>, kind: u8, tag: i32, source: i32, length: u64, dtype: &[u8], shape: Vec<u64>,
                    flags: u8) -> PyResult<Bound<'py, PyBytes>> {
    let kind = Kind::from_u8(kind).ok_or_else(|| PyValueError::new_err(format!("unknown kind {kind}")))?;
    if dtype.len() > wire::MAX_DTYPE_LEN || shape.len() > wire::MAX_NDIM {
        return Err(PyValueError::new_err("dtype or shape too long"));
    }
    let mut out = [0u8; wire::MAX_HEAD];
    let n = wire::encode(&mut out, kind, tag, source, length, dtype, &shape, flags);
    Ok(PyBytes::new(py, &out[..n]))
}

/// The Rust wire format's decoder (for the agreement test): `buf` = header [+ array
/// description]. Returns (kind, ndim, dtlen, flags, tag, source, length, dtype, shape) with
/// dtype/shape None for other kinds; a rejected frame raises ValueError with the same text as
/// Python's ProtocolError.
#[pyfunction]
#[pyo3(signature = (buf, expect_source, max_frame, allowed_flags=0))]
#[allow(clippy::type_complexity)]
fn wire_decode(buf: &[u8], expect_source: i32, max_frame: u64, allowed_flags: u8)
               -> PyResult<(u8, u8, u8, u8, i32, i32, u64, Option<String>, Option<Vec<u64>>)> {
    if buf.len() < wire::HEADER_LEN {
        return Err(PyValueError::new_err("short header"));
    }
    let h = wire::decode_fixed(buf, expect_source, max_frame, allowed_flags).map_err(|e| PyValueError::new_err(e.0))?;
    let (mut dtype, mut shape) = (None, None);
    if h.kind == Kind::Array {
        if buf.len() < wire::HEADER_LEN + h.meta_len() {
            return Err(PyValueError::new_err("short array description"));
        }
        let (d, s) = wire::decode_array_meta(&buf[wire::HEADER_LEN..], &h).map_err(|e| PyValueError::new_err(e.0))?;
        (dtype, shape) = (Some(d.as_str().to_string()), Some(s));
    }
    Ok((h.kind as u8, h.ndim, h.dtlen, h.flags, h.tag, h.source, h.length, dtype, shape))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<NetEngine>()?;
    m.add_function(wrap_pyfunction!(net_tune_malloc, m)?)?;
    m.add_function(wrap_pyfunction!(wire_encode, m)?)?;
    m.add_function(wrap_pyfunction!(wire_decode, m)?)?;
    // names shared with Python's enums (engine.Status, engine.EventKind, frames.Kind)
    let statuses = PyDict::new(py);
    for s in Status::ALL {
        statuses.set_item(s.name(), s as u8)?;
    }
    m.add("NET_STATUS", statuses)?;
    m.add("NET_EVENTS", EventKind::ALL.iter().map(|k| k.name()).collect::<Vec<_>>())?;
    let kinds = PyDict::new(py);
    for k in Kind::ALL {
        kinds.set_item(k.name(), k as u8)?;
    }
    m.add("WIRE_KINDS", kinds)?;
    let consts = PyDict::new(py);
    for (name, v) in [("HEADER_LEN", wire::HEADER_LEN as u64), ("MAX_NDIM", wire::MAX_NDIM as u64),
                      ("MAX_DTYPE_LEN", wire::MAX_DTYPE_LEN as u64), ("CONTROL_LIMIT", wire::CONTROL_LIMIT),
                      ("DEFAULT_MAX_FRAME", wire::DEFAULT_MAX_FRAME), ("MAX_TAG", wire::MAX_TAG as u64)] {
        consts.set_item(name, v)?;
    }
    consts.set_item("MIN_TAG", wire::MIN_TAG)?;
    consts.set_item("MAGIC", PyBytes::new(py, &wire::MAGIC))?;
    m.add("WIRE_CONSTANTS", consts)?;
    Ok(())
}
