//! Basket I/O: FIMI and CSV parsing (files, byte ranges, streams), FIMI writing, statistics,
//! id compaction, and Python transactions to CSR arrays.

use clusterlab_core::{basket, csvbaskets, fimi, stats, Baskets, ParseError};
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::create_exception;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::io::Read;
use std::path::PathBuf;

mod lists;

create_exception!(_core, BasketParseError, PyValueError, "A basket file is malformed: args are (message, line, column).");

fn parse_err(e: ParseError) -> PyErr {
    BasketParseError::new_err((e.message, e.line, e.column))
}

fn read_err(what: &str, e: fimi::ReadError) -> PyErr {
    match e {
        fimi::ReadError::Io(io) => PyOSError::new_err(format!("{what}: {io}")),
        fimi::ReadError::Parse(p) => parse_err(p),
    }
}

type Arr<'py, T> = Bound<'py, PyArray1<T>>;
type Csr<'py> = (Arr<'py, i64>, Arr<'py, u32>);

fn to_numpy(py: Python<'_>, b: Baskets) -> Csr<'_> {
    (PyArray1::from_vec(py, b.offsets), PyArray1::from_vec(py, b.items))
}

/// Read a FIMI file (or the lines starting in byte range [start, end)).
/// Returns (offsets, items, duplicates_dropped).
#[pyfunction]
#[pyo3(signature = (path, start=None, end=None))]
fn read_fimi(py: Python<'_>, path: PathBuf, start: Option<u64>, end: Option<u64>) -> PyResult<(Arr<'_, i64>, Arr<'_, u32>, u64)> {
    let range = match (start, end) {
        (None, None) => None,
        (s, e) => Some((s.unwrap_or(0), e.unwrap_or(u64::MAX))),
    };
    let (b, rep) = py.detach(|| fimi::read_file(&path, range)).map_err(|e| read_err(&path.display().to_string(), e))?;
    let (o, i) = to_numpy(py, b);
    Ok((o, i, rep.duplicates_dropped))
}

/// A reader that lets Python handle signals while a read waits (Ctrl-C on a silent pipe).
/// An interrupted read runs the Python signal handlers; if one raises, the read stops and the
/// exception is kept for the caller.
struct SignalAware<R> {
    inner: R,
    raised: Option<PyErr>,
}

impl<R: Read> Read for SignalAware<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match self.inner.read(buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                    if let Err(err) = Python::attach(|py| py.check_signals()) {
                        self.raised = Some(err);
                        return Err(std::io::Error::other("interrupted by a signal"));
                    }
                }
                other => return other,
            }
        }
    }
}

/// Read FIMI text from an open file descriptor (a pipe, a FIFO, a device, a /proc file) as a
/// stream. The descriptor is duplicated, so the caller still owns and closes it.
/// Returns (offsets, items, duplicates_dropped).
#[pyfunction]
fn read_fimi_fd(py: Python<'_>, fd: i32) -> PyResult<(Arr<'_, i64>, Arr<'_, u32>, u64)> {
    use std::os::fd::BorrowedFd;
    if fd < 0 {
        return Err(PyValueError::new_err(format!("not a file descriptor: {fd}")));
    }
    // SAFETY: the caller passes a descriptor it holds open for the duration of the call.
    let owned = unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()?;
    let mut reader = SignalAware { inner: std::fs::File::from(owned), raised: None };
    let res = py.detach(|| fimi::read_stream(&mut reader));
    if let Some(err) = reader.raised.take() {
        return Err(err);
    }
    let (b, rep) = res.map_err(|e| read_err(&format!("fd {fd}"), e))?;
    let (o, i) = to_numpy(py, b);
    Ok((o, i, rep.duplicates_dropped))
}

/// Parse FIMI text held in memory. Returns (offsets, items, duplicates_dropped).
#[pyfunction]
fn parse_fimi<'py>(py: Python<'py>, data: &[u8]) -> PyResult<(Arr<'py, i64>, Arr<'py, u32>, u64)> {
    let (b, rep) = py.detach(|| fimi::parse(data, 1)).map_err(parse_err)?;
    let (o, i) = to_numpy(py, b);
    Ok((o, i, rep.duplicates_dropped))
}

/// Write CSR baskets as FIMI text to `path` (the caller handles atomic rename).
#[pyfunction]
fn write_fimi(py: Python<'_>, path: PathBuf, offsets: PyReadonlyArray1<i64>, items: PyReadonlyArray1<u32>) -> PyResult<()> {
    let (o, i) = (offsets.as_slice()?, items.as_slice()?);
    check_csr(o, i)?;
    py.detach(|| {
        let f = std::fs::File::create(&path)?;
        fimi::write_csr(o, i, f)
    })
    .map_err(|e| PyOSError::new_err(format!("{}: {e}", path.display())))
}

fn check_csr(o: &[i64], i: &[u32]) -> PyResult<()> {
    let ok = !o.is_empty() && o[0] == 0 && *o.last().unwrap() as usize == i.len() && o.windows(2).all(|w| w[0] <= w[1]);
    if ok { Ok(()) } else { Err(PyValueError::new_err("offsets do not describe the items array (must start at 0, be non-decreasing and end at len(items))")) }
}

/// Read long-form CSV baskets, keeping share `rank` of `size` of the transactions (all by
/// default). Returns (offsets, items, labels, transaction_ids).
#[pyfunction]
#[pyo3(signature = (data, tid_col="transaction_id", item_col="item", rank=0, size=1))]
fn parse_csv_baskets<'py>(py: Python<'py>, data: &[u8], tid_col: &str, item_col: &str, rank: usize, size: usize) -> PyResult<(Arr<'py, i64>, Arr<'py, u32>, Vec<String>, Vec<String>)> {
    if size == 0 || rank >= size {
        return Err(PyValueError::new_err(format!("rank {rank} is outside 0..{}", size.max(1) - 1)));
    }
    let lb = py.detach(|| csvbaskets::parse_share(data, tid_col, item_col, rank, size)).map_err(parse_err)?;
    let (o, i) = to_numpy(py, lb.baskets);
    Ok((o, i, lb.labels, lb.transaction_ids))
}

/// Byte ranges that tile the lines of a file into `parts` shares.
#[pyfunction]
fn split_ranges(path: PathBuf, parts: usize) -> PyResult<Vec<(u64, u64)>> {
    fimi::split_ranges(&path, parts).map_err(|e| PyOSError::new_err(format!("{}: {e}", path.display())))
}

/// Statistics of CSR baskets as a dict; `item_ids` (ascending) and `item_counts` are numpy
/// arrays over the items that occur (memory follows the distinct items, not the largest id).
#[pyfunction]
fn basket_stats<'py>(py: Python<'py>, offsets: PyReadonlyArray1<i64>, items: PyReadonlyArray1<u32>) -> PyResult<Bound<'py, PyDict>> {
    let (o, i) = (offsets.as_slice()?, items.as_slice()?);
    check_csr(o, i)?;
    let s = py.detach(|| stats::stats_csr(o, i));
    let d = PyDict::new(py);
    d.set_item("transactions", s.transactions)?;
    d.set_item("distinct_items", s.distinct_items)?;
    d.set_item("total_items", s.total_items)?;
    d.set_item("max_length", s.max_length)?;
    d.set_item("empty_transactions", s.empty_transactions)?;
    let avg = s.average_length();
    let density = s.density();
    d.set_item("average_length", avg)?;
    d.set_item("density", density)?;
    d.set_item("item_ids", PyArray1::from_vec(py, s.items.ids))?;
    d.set_item("item_counts", PyArray1::from_vec(py, s.items.counts))?;
    Ok(d)
}

/// Number of distinct items (memory follows the distinct items).
#[pyfunction]
fn distinct_items(py: Python<'_>, items: PyReadonlyArray1<u32>) -> PyResult<usize> {
    let i = items.as_slice()?;
    Ok(py.detach(|| stats::item_counts_sparse(i).ids.len()))
}

/// Order-preserving compaction of item ids: (dense items or None when the ids already are
/// 0..d, the distinct original ids ascending, their support counts).
#[pyfunction]
fn compact_items<'py>(py: Python<'py>, items: PyReadonlyArray1<u32>) -> PyResult<(Option<Arr<'py, u32>>, Arr<'py, u32>, Arr<'py, u64>)> {
    let i = items.as_slice()?;
    let (dense, c) = py.detach(|| basket::compact(i));
    Ok((dense.map(|d| PyArray1::from_vec(py, d)), PyArray1::from_vec(py, c.ids), PyArray1::from_vec(py, c.counts)))
}

/// `items` renumbered to their position in `ids` (ascending, holding every item); a
/// ValueError names the first item missing from `ids`.
#[pyfunction]
fn renumber_items<'py>(py: Python<'py>, items: PyReadonlyArray1<u32>, ids: PyReadonlyArray1<u32>) -> PyResult<Arr<'py, u32>> {
    let (i, d) = (items.as_slice()?, ids.as_slice()?);
    if d.windows(2).any(|w| w[0] >= w[1]) {
        return Err(PyValueError::new_err("ids must be strictly ascending"));
    }
    let out = py.detach(|| basket::renumber(i, d)).map_err(|m| PyValueError::new_err(format!("item {m} is not among the ids")))?;
    Ok(PyArray1::from_vec(py, out))
}

/// Sort and deduplicate every transaction of CSR arrays: (offsets, items, duplicates
/// dropped), or None when they already are canonical (keep the arrays: no copy).
#[pyfunction]
fn normalize_csr<'py>(py: Python<'py>, offsets: PyReadonlyArray1<i64>, items: PyReadonlyArray1<u32>) -> PyResult<Option<(Arr<'py, i64>, Arr<'py, u32>, u64)>> {
    let (o, i) = (offsets.as_slice()?, items.as_slice()?);
    check_csr(o, i)?;
    Ok(py.detach(|| basket::normalize_csr(o, i)).map(|(o, i, d)| (PyArray1::from_vec(py, o), PyArray1::from_vec(py, i), d)))
}

/// Python transactions (sequences of ints or strings) to (offsets, items, labels or None,
/// duplicates_dropped); see `io/lists.rs` for what is accepted.
#[pyfunction]
fn lists_to_csr<'py>(py: Python<'py>, transactions: &Bound<'py, PyAny>) -> PyResult<(Arr<'py, i64>, Arr<'py, u32>, Option<Vec<String>>, u64)> {
    let (o, i, labels, dropped) = lists::lists_to_csr(py, transactions)?;
    Ok((PyArray1::from_vec(py, o), PyArray1::from_vec(py, i), labels, dropped))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("BasketParseError", m.py().get_type::<BasketParseError>())?;
    m.add_function(wrap_pyfunction!(read_fimi, m)?)?;
    m.add_function(wrap_pyfunction!(read_fimi_fd, m)?)?;
    m.add_function(wrap_pyfunction!(parse_fimi, m)?)?;
    m.add_function(wrap_pyfunction!(write_fimi, m)?)?;
    m.add_function(wrap_pyfunction!(parse_csv_baskets, m)?)?;
    m.add_function(wrap_pyfunction!(split_ranges, m)?)?;
    m.add_function(wrap_pyfunction!(basket_stats, m)?)?;
    m.add_function(wrap_pyfunction!(distinct_items, m)?)?;
    m.add_function(wrap_pyfunction!(compact_items, m)?)?;
    m.add_function(wrap_pyfunction!(normalize_csr, m)?)?;
    m.add_function(wrap_pyfunction!(renumber_items, m)?)?;
    m.add_function(wrap_pyfunction!(lists_to_csr, m)?)?;
    Ok(())
}
