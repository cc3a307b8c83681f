//! The IBM Quest generator: a `QuestGenerator` object holding the drawn patterns, which makes
//! transactions in memory or appends them as FIMI text to a file, on `threads` threads.

use clusterlab_core::gen::{Quest, QuestParams, BLOCK};
use numpy::PyArray1;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use std::fs::OpenOptions;
use std::io::BufWriter;
use std::path::PathBuf;

#[pyclass(module = "clusterlab._core", frozen)]
struct QuestGenerator {
    quest: Quest,
}

fn pool(threads: Option<usize>) -> PyResult<rayon::ThreadPool> {
    let mut b = rayon::ThreadPoolBuilder::new();
    if let Some(t) = threads {
        if t == 0 {
            return Err(PyValueError::new_err("threads must be at least 1"));
        }
        b = b.num_threads(t);
    }
    b.build().map_err(|e| PyOSError::new_err(format!("cannot start threads: {e}")))
}

fn check_range(q: &Quest, first: u64) -> PyResult<()> {
    if !first.is_multiple_of(BLOCK) {
        return Err(PyValueError::new_err(format!("first transaction {first} is not a multiple of the block size {BLOCK}")));
    }
    if first > q.params.transactions {
        return Err(PyValueError::new_err(format!("first transaction {first} is past the end ({})", q.params.transactions)));
    }
    Ok(())
}

#[pymethods]
impl QuestGenerator {
    #[new]
    #[pyo3(signature = (transactions, avg_len, avg_pattern_len, patterns, items, correlation, corruption_mean, corruption_sd, seed))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        transactions: u64,
        avg_len: f64,
        avg_pattern_len: f64,
        patterns: u32,
        items: u32,
        correlation: f64,
        corruption_mean: f64,
        corruption_sd: f64,
        seed: u64,
    ) -> PyResult<Self> {
        let params = QuestParams { transactions, avg_len, avg_pattern_len, patterns, items, correlation, corruption_mean, corruption_sd, seed };
        params.validate().map_err(PyValueError::new_err)?;
        // Drawing patterns is sequential by design (it must not depend on threads).
        let quest = Quest::new(params).map_err(PyValueError::new_err)?;
        Ok(QuestGenerator { quest })
    }

    /// Transactions per independently seeded block; chunked calls start on multiples of it.
    #[classattr]
    fn block() -> u64 {
        BLOCK
    }

    /// The patterns: (offsets, items, weights, corruption levels).
    fn patterns<'py>(&self, py: Python<'py>) -> (Bound<'py, PyArray1<u64>>, Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>) {
        let p = &self.quest.patterns;
        (
            PyArray1::from_vec(py, p.offsets.clone()),
            PyArray1::from_vec(py, p.items.clone()),
            PyArray1::from_vec(py, p.weights.clone()),
            PyArray1::from_vec(py, p.corruption.clone()),
        )
    }

    /// Transactions [first, first + count) as CSR (offsets, items).
    #[pyo3(signature = (first, count, threads=None))]
    fn generate<'py>(&self, py: Python<'py>, first: u64, count: u64, threads: Option<usize>) -> PyResult<(Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<u32>>)> {
        check_range(&self.quest, first)?;
        let pool = pool(threads)?;
        let b = py.detach(|| pool.install(|| self.quest.generate(first, count)));
        Ok((PyArray1::from_vec(py, b.offsets), PyArray1::from_vec(py, b.items)))
    }

    /// Append transactions [first, first + count) as FIMI text to `path`. Returns the bytes
    /// written and the byte offset (relative to this write) of the line of each transaction
    /// index in `marks` (sorted).
    #[pyo3(signature = (path, first, count, marks=Vec::new(), threads=None))]
    fn write_fimi(&self, py: Python<'_>, path: PathBuf, first: u64, count: u64, marks: Vec<u64>, threads: Option<usize>) -> PyResult<(u64, Vec<u64>)> {
        check_range(&self.quest, first)?;
        if marks.windows(2).any(|w| w[0] > w[1]) {
            return Err(PyValueError::new_err("marks must be sorted"));
        }
        let pool = pool(threads)?;
        let batch = 4 * pool.current_num_threads();
        py.detach(|| {
            let f = OpenOptions::new().append(true).create(true).open(&path)?;
            let mut w = BufWriter::with_capacity(1 << 20, f);
            let r = pool.install(|| self.quest.write_fimi(first, count, &marks, batch, &mut w))?;
            std::io::Write::flush(&mut w)?;
            Ok(r)
        })
        .map_err(|e: std::io::Error| PyOSError::new_err(format!("{}: {e}", path.display())))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<QuestGenerator>()?;
    Ok(())
}
