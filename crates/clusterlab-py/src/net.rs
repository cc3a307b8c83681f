//! Binding of the mesh's socket engine (`clusterlab-net`) as `clusterlab._core.NetEngine`:
//! argument and result conversion, and the interpreter lock released around every wait. The
//! engine, its statuses and the wire format live in the pure crate; Python's side of the
//! interface is `clusterlab/comm/tcp/engine.py` (statuses shared by name: `NET_STATUS`).

use clusterlab_net::engine::{Engine, EventKind, Msg, Outcome, Status};
use clusterlab_net::wire::{self, Dtype, Kind};
use numpy::{PyArray1, PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use std::collections::HashMap;
use std::time::Duration;

/// Sends up to this size are not worth giving up the interpreter lock for.
const SHORT_SEND: usize = 64 * 1024;
/// Received arrays up to this size are copied into an array numpy allocates: cheaper than
/// handing numpy the received buffer, which takes a second Python object (its owner) per
/// message; larger ones are handed over without a copy.
const SMALL_COPY: usize = 4096;

#[pyclass(module = "clusterlab._core", subclass)]
pub struct NetEngine {
    engine: Engine,
    dtypes: HashMap<Dtype, Py<PyArrayDescr>>,
}

fn seconds(timeout: f64) -> Duration {
    // NaN, negative: no wait; absurdly long: a billion seconds
    Duration::from_secs_f64(if timeout.is_nan() { 0.0 } else { timeout.clamp(0.0, 1e9) })
}

fn status(py: Python<'_>, s: Status) -> PyResult<Bound<'_, PyAny>> {
    Ok((s as u8).into_pyobject(py)?.into_any())
}

impl NetEngine {
    /// A received message as the object Python hands out: `bytes`, or an array of the frame's
    /// dtype and shape over the received buffer (no copy).
    fn payload<'py>(&mut self, py: Python<'py>, m: Msg) -> PyResult<Bound<'py, PyAny>> {
        if m.kind != Kind::Array {
            return Ok(PyBytes::new(py, &m.data).into_any());
        }
        let dtype = m.dtype.unwrap_or_default();
        let one_dim = m.shape.len() == 1;
        let raw = if m.data.len() <= SMALL_COPY {
            PyArray1::from_slice(py, &m.data).into_any()
        } else {
            PyArray1::from_vec(py, m.data).into_any()
        };
        if dtype.as_bytes() == b"|u1" && one_dim {
            return Ok(raw);
        }
        let descr = match self.dtypes.get(&dtype) {
            Some(d) => d.bind(py).clone(),
            None => {
                let d = PyArrayDescr::new(py, dtype.as_str())?;
                self.dtypes.insert(dtype, d.clone().unbind());
                d
            }
        };
        let arr = raw.call_method1("view", (descr,))?;
        if one_dim {
            Ok(arr)
        } else {
            arr.call_method1("reshape", (PyTuple::new(py, &m.shape)?,))
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

    fn send_now(&mut self, py: Python<'_>, dest: i32, head: &[u8], body: &[u8], timeout: f64) -> Result<(), Outcome> {
        let engine = &mut self.engine;
        if body.len() + head.len() <= SHORT_SEND {
            engine.send(dest, head, body, seconds(timeout))
        } else {
            py.detach(|| engine.send(dest, head, body, seconds(timeout)))
        }
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
        NetEngine { engine: Engine::new(&peers, max_frame), dtypes: HashMap::new() }
    }

    /// Start using connection `fd` to `peer` (replacing a closed one).
    fn add(&mut self, peer: i32, fd: i32) {
        self.engine.add(peer, fd);
    }

    /// The next message from `source` with `tag`, waiting up to `timeout` seconds: the payload
    /// itself; with `source` -1 (any), `(MESSAGE, src, payload)`; otherwise a status tuple:
    /// `(TIMEOUT,)`, `(EVENT, peer, kind name, detail)`, `(NO_PEERS,)`, `(CLOSED, source)`.
    fn recv(&mut self, py: Python<'_>, source: i32, tag: i32, timeout: f64) -> PyResult<Py<PyAny>> {
        let o = if self.engine.ready(source, tag) {
            self.engine.wait(source, tag, seconds(timeout)) // already here: keep the lock
        } else {
            let engine = &mut self.engine;
            py.detach(|| engine.wait(source, tag, seconds(timeout)))
        };
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

    /// Frame and send `payload` (`bytes`, or a C-contiguous numpy array of a plain numeric
    /// dtype) to `dest` as rank `source`. None when it is all in the kernel; `(UNSUPPORTED,)`
    /// for any other payload (the caller frames it and uses `send_frame`); else `(TIMEOUT,)`
    /// or an `(EVENT, ...)` tuple.
    #[pyo3(signature = (dest, tag, source, payload, timeout))]
    fn send(&mut self, py: Python<'_>, dest: i32, tag: i32, source: i32, payload: &Bound<'_, PyAny>, timeout: f64) -> PyResult<Option<Py<PyAny>>> {
        let unsupported = || Ok(Some(PyTuple::new(py, [status(py, Status::Unsupported)?])?.into_any().unbind()));
        let mut head = [0u8; wire::MAX_HEAD];
        let (hlen, body): (usize, &[u8]) = if let Ok(b) = payload.cast_exact::<PyBytes>() {
            let body = b.as_bytes();
            (wire::encode(&mut head, Kind::Bytes, tag, source, body.len() as u64, b"", &[], 0), body)
        } else if let Ok(a) = payload.cast_exact::<PyUntypedArray>() {
            let d = a.dtype();
            let dims = a.shape();
            let (Some(dtype), Some(body)) = (wire::dtype_name(d.byteorder(), d.kind(), d.itemsize()), array_bytes(a)) else {
                return unsupported();
            };
            if d.has_fields() || d.has_subarray() || dims.len() > wire::MAX_NDIM {
                return unsupported();
            }
            let mut shape = [0u64; wire::MAX_NDIM]; // on the stack: no allocation per send
            for (s, &n) in shape.iter_mut().zip(dims) {
                *s = n as u64;
            }
            let shape = &shape[..dims.len()];
            (wire::encode(&mut head, Kind::Array, tag, source, body.len() as u64, dtype.as_bytes(), shape, 0), body)
        } else {
            return unsupported();
        };
        if body.len() as u64 > self.engine.max_frame() || !self.engine.has_peer(dest) {
            return unsupported(); // the caller raises the precise error
        }
        let r = self.send_now(py, dest, &head[..hlen], body, timeout);
        Self::send_result(py, r)
    }

    /// Send a frame the caller built (`head`, from `frames.py`) with `payload` (`bytes` or a
    /// C-contiguous numpy array, sent from its own memory). Results as `send`.
    #[pyo3(signature = (dest, head, payload, timeout))]
    fn send_frame(&mut self, py: Python<'_>, dest: i32, head: &[u8], payload: &Bound<'_, PyAny>, timeout: f64) -> PyResult<Option<Py<PyAny>>> {
        let body: &[u8] = if let Ok(b) = payload.cast::<PyBytes>() {
            b.as_bytes()
        } else if let Ok(a) = payload.cast::<PyUntypedArray>() {
            array_bytes(a).ok_or_else(|| PyValueError::new_err("payload array must be C-contiguous"))?
        } else {
            return Err(PyTypeError::new_err("payload must be bytes or a numpy array"));
        };
        let r = self.send_now(py, dest, head, body, timeout);
        Self::send_result(py, r)
    }

    /// One non-blocking attempt to send `frame` to `peer`; whether all of it went.
    fn send_nowait(&mut self, peer: i32, frame: &[u8]) -> bool {
        self.engine.send_nowait(peer, frame)
    }

    /// Read what is ready without waiting (about `budget` bytes per connection); returns the
    /// payload bytes now queued.
    fn pump(&mut self, py: Python<'_>, budget: usize) -> usize {
        let engine = &mut self.engine;
        py.detach(|| engine.pump(budget))
    }

    /// Stop using `peer`'s fd (Python is about to close it).
    fn forget(&mut self, peer: i32) {
        self.engine.forget(peer);
    }

    /// Per-peer counters: [(peer, bytes_sent, bytes_recv, msgs_sent, msgs_recv, open)].
    fn counters(&self) -> Vec<(i32, u64, u64, u64, u64, bool)> {
        self.engine.counters().iter().map(|c| (c.peer, c.bytes_sent, c.bytes_recv, c.msgs_sent, c.msgs_recv, c.open)).collect()
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
