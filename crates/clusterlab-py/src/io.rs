//! Basket I/O: FIMI and CSV parsing, FIMI writing, byte ranges, statistics.

use clusterlab_core::{csvbaskets, fimi, stats, Baskets, ParseError};
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::create_exception;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

create_exception!(_core, BasketParseError, PyValueError, "A basket file is malformed: args are (message, line, column).");

fn parse_err(e: ParseError) -> PyErr {
    BasketParseError::new_err((e.message, e.line, e.column))
}

fn read_err(path: &std::path::Path, e: fimi::ReadError) -> PyErr {
    match e {
        fimi::ReadError::Io(io) => PyOSError::new_err(format!("{}: {io}", path.display())),
        fimi::ReadError::Parse(p) => parse_err(p),
    }
}

type Csr<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<u32>>);

fn to_numpy(py: Python<'_>, b: Baskets) -> Csr<'_> {
    (PyArray1::from_vec(py, b.offsets), PyArray1::from_vec(py, b.items))
}

/// Read a FIMI file (or the lines starting in byte range [start, end)).
/// Returns (offsets, items, duplicates_dropped).
#[pyfunction]
#[pyo3(signature = (path, start=None, end=None))]
fn read_fimi(py: Python<'_>, path: PathBuf, start: Option<u64>, end: Option<u64>) -> PyResult<(Bound<'_, PyArray1<i64>>, Bound<'_, PyArray1<u32>>, u64)> {
    let range = match (start, end) {
        (None, None) => None,
        (s, e) => Some((s.unwrap_or(0), e.unwrap_or(u64::MAX))),
    };
    let (b, rep) = py.detach(|| fimi::read_file(&path, range)).map_err(|e| read_err(&path, e))?;
    let (o, i) = to_numpy(py, b);
    Ok((o, i, rep.duplicates_dropped))
}

/// Parse FIMI text held in memory. Returns (offsets, items, duplicates_dropped).
#[pyfunction]
fn parse_fimi<'py>(py: Python<'py>, data: &[u8]) -> PyResult<(Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<u32>>, u64)> {
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

/// Read long-form CSV baskets. Returns (offsets, items, labels, transaction_ids).
#[pyfunction]
#[pyo3(signature = (data, tid_col="transaction_id", item_col="item"))]
fn parse_csv_baskets<'py>(py: Python<'py>, data: &[u8], tid_col: &str, item_col: &str) -> PyResult<(Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<u32>>, Vec<String>, Vec<String>)> {
    let lb = py.detach(|| csvbaskets::parse(data, tid_col, item_col)).map_err(parse_err)?;
    let (o, i) = to_numpy(py, lb.baskets);
    Ok((o, i, lb.labels, lb.transaction_ids))
}

/// Byte ranges that tile the lines of a file into `parts` shares.
#[pyfunction]
fn split_ranges(path: PathBuf, parts: usize) -> PyResult<Vec<(u64, u64)>> {
    fimi::split_ranges(&path, parts).map_err(|e| PyOSError::new_err(format!("{}: {e}", path.display())))
}

/// Statistics of CSR baskets as a dict; `item_counts` is a numpy array indexed by item id.
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
    d.set_item("average_length", s.average_length())?;
    d.set_item("density", s.density())?;
    d.set_item("item_counts", PyArray1::from_vec(py, s.item_counts))?;
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("BasketParseError", m.py().get_type::<BasketParseError>())?;
    m.add_function(wrap_pyfunction!(read_fimi, m)?)?;
    m.add_function(wrap_pyfunction!(parse_fimi, m)?)?;
    m.add_function(wrap_pyfunction!(write_fimi, m)?)?;
    m.add_function(wrap_pyfunction!(parse_csv_baskets, m)?)?;
    m.add_function(wrap_pyfunction!(split_ranges, m)?)?;
    m.add_function(wrap_pyfunction!(basket_stats, m)?)?;
    Ok(())
}
