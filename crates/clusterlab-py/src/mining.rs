//! Frequent itemset kernels: the miners, closed/maximal filtering, rules, and the reusable
//! Apriori pieces (candidate generation and counting) for the parallel miners.
//! Itemsets travel as CSR numpy arrays: (offsets int64, items uint32, counts uint64).

use clusterlab_core::mining::{self as core, apriori as cap, closed as ccl, fpgrowth as cfp, rules as cru, Algorithm, BasketsRef, Itemsets, Limit, MineError, MineParams, Target};
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

type Arr<'py, T> = Bound<'py, PyArray1<T>>;
type Csr3<'py> = (Arr<'py, i64>, Arr<'py, u32>, Arr<'py, u64>);

fn verr(e: String) -> PyErr {
    PyValueError::new_err(e)
}

pyo3::create_exception!(_core, TooManyItemsets, PyValueError, "More itemsets than the limit: args (reached, limit).");

fn mine_err(e: MineError) -> PyErr {
    match e {
        MineError::TooMany { reached, limit } => TooManyItemsets::new_err((reached, limit)),
    }
}

/// The itemset limit of a run (None: the library default, which the Python layer passes).
fn limit_of(max_itemsets: Option<u64>) -> PyResult<Limit> {
    match max_itemsets {
        Some(0) => Err(verr("max_itemsets must be >= 1".into())),
        Some(n) => Ok(Limit::new(n)),
        None => Ok(Limit::unlimited()),
    }
}

fn db<'a>(o: &'a [i64], i: &'a [u32], w: Option<&'a [u64]>) -> PyResult<BasketsRef<'a>> {
    let d = BasketsRef::new(o, i, w).map_err(verr)?;
    d.check_sorted().map_err(verr)?;
    Ok(d)
}

fn itemsets(o: &[i64], i: &[u32], c: Option<&[u64]>) -> PyResult<Itemsets> {
    BasketsRef::new(o, i, None).map_err(|e| verr(format!("itemsets: {e}")))?;
    let n = o.len() - 1;
    let counts = match c {
        Some(c) if c.len() != n => return Err(verr(format!("{} counts for {n} itemsets", c.len()))),
        Some(c) => c.to_vec(),
        None => vec![0; n],
    };
    Ok(Itemsets { offsets: o.to_vec(), items: i.to_vec(), counts })
}

fn out3(py: Python<'_>, s: Itemsets) -> Csr3<'_> {
    (PyArray1::from_vec(py, s.offsets), PyArray1::from_vec(py, s.items), PyArray1::from_vec(py, s.counts))
}

/// Run `f` on a rayon pool of `threads` threads (the global pool when None).
fn with_threads<T: Send>(threads: Option<usize>, f: impl FnOnce() -> T + Send) -> PyResult<T> {
    match threads {
        None => Ok(f()),
        Some(0) => Err(verr("threads must be >= 1".into())),
        Some(n) => {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(n).build().map_err(|e| verr(e.to_string()))?;
            Ok(pool.install(f))
        }
    }
}

fn algorithm_of(name: &str) -> PyResult<Algorithm> {
    Ok(match name {
        "apriori" => Algorithm::Apriori,
        "fpgrowth" => Algorithm::FpGrowth,
        "eclat" => Algorithm::Eclat,
        "lcm" => Algorithm::Lcm,
        a => return Err(verr(format!("unknown algorithm {a:?} (apriori, fpgrowth, eclat, lcm)"))),
    })
}

fn params(min_count: u64, min_len: usize, max_len: Option<usize>) -> PyResult<MineParams> {
    if min_count == 0 {
        return Err(verr("min_count must be >= 1".into()));
    }
    Ok(MineParams { min_count, min_len, max_len: max_len.unwrap_or(usize::MAX) })
}

/// Mine frequent itemsets of CSR baskets (items ascending in each transaction).
/// algorithm: "apriori" | "fpgrowth" | "eclat" | "lcm"; target: "all" | "closed" | "maximal".
/// Optional per-transaction weights (uint64). Raises TooManyItemsets(reached, limit) once
/// more than max_itemsets itemsets are found (None: no limit). Returns (offsets, items,
/// counts), canonical.
#[pyfunction]
#[pyo3(signature = (offsets, items, min_count, algorithm="fpgrowth", target="all", min_len=1, max_len=None, threads=None, weights=None, max_itemsets=None))]
#[allow(clippy::too_many_arguments)]
fn mine_itemsets<'py>(
    py: Python<'py>, offsets: PyReadonlyArray1<i64>, items: PyReadonlyArray1<u32>, min_count: u64, algorithm: &str, target: &str,
    min_len: usize, max_len: Option<usize>, threads: Option<usize>, weights: Option<PyReadonlyArray1<u64>>, max_itemsets: Option<u64>,
) -> PyResult<Csr3<'py>> {
    let algo = algorithm_of(algorithm)?;
    let target = match target {
        "all" => Target::All,
        "closed" => Target::Closed,
        "maximal" => Target::Maximal,
        t => return Err(verr(format!("unknown target {t:?} (all, closed, maximal)"))),
    };
    let p = params(min_count, min_len, max_len)?;
    let w = weights.as_ref().map(|w| w.as_slice()).transpose()?;
    let d = db(offsets.as_slice()?, items.as_slice()?, w)?;
    let limit = limit_of(max_itemsets)?;
    let r = py.detach(|| with_threads(threads, || core::mine(d, algo, target, p, &limit)))?.map_err(mine_err)?;
    Ok(out3(py, r))
}

/// Mine all frequent itemsets on one thread and hand them to `callback(offsets, items,
/// counts)` in chunks of about `chunk` itemsets, in the order found, while the kernel runs
/// (at most one chunk waits between them, so memory does not grow with the result). An
/// exception from the callback stops the kernel and is raised. Returns the number of
/// itemsets; raises TooManyItemsets(reached, limit) past max_itemsets.
#[pyfunction]
#[pyo3(signature = (offsets, items, min_count, algorithm, min_len, max_len, max_itemsets, chunk, callback))]
#[allow(clippy::too_many_arguments)]
fn mine_stream(
    py: Python<'_>, offsets: PyReadonlyArray1<i64>, items: PyReadonlyArray1<u32>, min_count: u64, algorithm: &str, min_len: usize,
    max_len: Option<usize>, max_itemsets: Option<u64>, chunk: usize, callback: Bound<'_, PyAny>,
) -> PyResult<u64> {
    let algo = algorithm_of(algorithm)?;
    let p = params(min_count, min_len, max_len)?;
    let d = db(offsets.as_slice()?, items.as_slice()?, None)?;
    if chunk == 0 {
        return Err(verr("chunk must be >= 1".into()));
    }
    limit_of(max_itemsets)?;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Itemsets>(1);
    let tx = std::sync::Mutex::new(tx);
    let limit = Limit::streaming(max_itemsets.unwrap_or(u64::MAX), chunk, move |s| tx.lock().is_ok_and(|t| t.send(s).is_ok()));
    let mut failure: Option<PyErr> = None;
    let outcome = std::thread::scope(|scope| {
        let miner = scope.spawn(move || {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().map_err(|e| e.to_string())?;
            let r = pool.install(|| core::mine(d, algo, Target::All, p, &limit)).map(|_| limit.emitted());
            drop(limit); // closes the channel: the loop below ends
            Ok::<_, String>(r)
        });
        let mut rx = Some(rx);
        while let Some(r) = rx.take() {
            let (got, r) = py.detach(move || (r.recv(), r));
            let Ok(s) = got else { break };
            rx = Some(r);
            let (o, i, c) = out3(py, s);
            if let Err(e) = callback.call1((o, i, c)) {
                // Dropping the receiver makes the kernel's next hand-over fail: it stops.
                failure = Some(e);
                rx = None;
            }
        }
        py.detach(move || miner.join())
    });
    if let Some(e) = failure {
        return Err(e);
    }
    match outcome {
        Ok(Ok(r)) => r.map_err(mine_err),
        Ok(Err(e)) => Err(verr(e)),
        Err(_) => Err(pyo3::exceptions::PyRuntimeError::new_err("the mining thread panicked")),
    }
}

/// FP-growth on (optionally weighted) CSR baskets: the kernel PFP runs on each group's
/// conditional database. Returns (offsets, items, counts), canonical.
#[pyfunction]
#[pyo3(signature = (offsets, items, min_count, weights=None, min_len=1, max_len=None, threads=None))]
#[allow(clippy::too_many_arguments)]
fn fpgrowth<'py>(
    py: Python<'py>, offsets: PyReadonlyArray1<i64>, items: PyReadonlyArray1<u32>, min_count: u64, weights: Option<PyReadonlyArray1<u64>>,
    min_len: usize, max_len: Option<usize>, threads: Option<usize>,
) -> PyResult<Csr3<'py>> {
    let p = params(min_count, min_len, max_len)?;
    let w = weights.as_ref().map(|w| w.as_slice()).transpose()?;
    let d = db(offsets.as_slice()?, items.as_slice()?, w)?;
    let r = py.detach(|| with_threads(threads, || cfp::fpgrowth(d, &p)))?;
    Ok(out3(py, r))
}

/// Candidate k-itemsets (join + prune) from frequent (k-1)-itemsets given as CSR.
/// Returns (offsets, items) in lexicographic order.
#[pyfunction]
fn apriori_gen<'py>(py: Python<'py>, offsets: PyReadonlyArray1<i64>, items: PyReadonlyArray1<u32>) -> PyResult<(Arr<'py, i64>, Arr<'py, u32>)> {
    let prev = itemsets(offsets.as_slice()?, items.as_slice()?, None)?;
    let c = py.detach(|| cap::apriori_gen(&prev)).map_err(verr)?;
    Ok((PyArray1::from_vec(py, c.offsets), PyArray1::from_vec(py, c.items)))
}

/// Weighted support counts (uint64, in candidate order) of candidates all of one length k
/// in CSR baskets; parallel over transaction chunks.
#[pyfunction]
#[pyo3(signature = (offsets, items, cand_offsets, cand_items, weights=None, threads=None))]
#[allow(clippy::too_many_arguments)]
fn count_candidates<'py>(
    py: Python<'py>, offsets: PyReadonlyArray1<i64>, items: PyReadonlyArray1<u32>, cand_offsets: PyReadonlyArray1<i64>,
    cand_items: PyReadonlyArray1<u32>, weights: Option<PyReadonlyArray1<u64>>, threads: Option<usize>,
) -> PyResult<Arr<'py, u64>> {
    let w = weights.as_ref().map(|w| w.as_slice()).transpose()?;
    let d = db(offsets.as_slice()?, items.as_slice()?, w)?;
    let c = itemsets(cand_offsets.as_slice()?, cand_items.as_slice()?, None)?;
    let r = py.detach(|| with_threads(threads, || cap::count_candidates(d, &c)))?.map_err(verr)?;
    Ok(PyArray1::from_vec(py, r))
}

/// Indices of the closed (or maximal) itemsets among all frequent itemsets (canonical CSR).
#[pyfunction]
#[pyo3(signature = (offsets, items, counts, maximal=false))]
fn closed_filter<'py>(
    py: Python<'py>, offsets: PyReadonlyArray1<i64>, items: PyReadonlyArray1<u32>, counts: PyReadonlyArray1<u64>, maximal: bool,
) -> PyResult<Arr<'py, u32>> {
    let s = itemsets(offsets.as_slice()?, items.as_slice()?, Some(counts.as_slice()?))?;
    if !s.is_canonical() {
        return Err(verr("itemsets must be in canonical order (length, then items)".into()));
    }
    Ok(PyArray1::from_vec(py, py.detach(|| ccl::filter(&s, maximal))))
}

/// Itemsets in canonical order: items sorted inside each itemset, itemsets sorted by
/// (length, items). Returns (offsets, items, counts).
#[pyfunction]
fn canonical_itemsets<'py>(py: Python<'py>, offsets: PyReadonlyArray1<i64>, items: PyReadonlyArray1<u32>, counts: PyReadonlyArray1<u64>) -> PyResult<Csr3<'py>> {
    let mut s = itemsets(offsets.as_slice()?, items.as_slice()?, Some(counts.as_slice()?))?;
    let r = py.detach(|| {
        for i in 0..s.len() {
            let (a, b) = (s.offsets[i] as usize, s.offsets[i + 1] as usize);
            s.items[a..b].sort_unstable();
        }
        s.canonicalize()
    });
    Ok(out3(py, r))
}

/// Association rules from all frequent itemsets (canonical CSR with counts).
/// Returns (ante_offsets, ante_items, ante_counts, cons_offsets, cons_items, cons_counts,
/// rule_counts).
#[pyfunction]
#[pyo3(signature = (offsets, items, counts, min_confidence, multi=false))]
fn association_rules<'py>(
    py: Python<'py>, offsets: PyReadonlyArray1<i64>, items: PyReadonlyArray1<u32>, counts: PyReadonlyArray1<u64>, min_confidence: f64, multi: bool,
) -> PyResult<(Arr<'py, i64>, Arr<'py, u32>, Arr<'py, u64>, Arr<'py, i64>, Arr<'py, u32>, Arr<'py, u64>, Arr<'py, u64>)> {
    let s = itemsets(offsets.as_slice()?, items.as_slice()?, Some(counts.as_slice()?))?;
    if !s.is_canonical() {
        return Err(verr("itemsets must be in canonical order (length, then items)".into()));
    }
    let r = py.detach(|| cru::rules(&s, min_confidence, multi)).map_err(verr)?;
    let (a, c) = (r.antecedents, r.consequents);
    Ok((
        PyArray1::from_vec(py, a.offsets), PyArray1::from_vec(py, a.items), PyArray1::from_vec(py, a.counts),
        PyArray1::from_vec(py, c.offsets), PyArray1::from_vec(py, c.items), PyArray1::from_vec(py, c.counts),
        PyArray1::from_vec(py, r.counts),
    ))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(mine_itemsets, m)?)?;
    m.add_function(wrap_pyfunction!(mine_stream, m)?)?;
    m.add("TooManyItemsets", m.py().get_type::<TooManyItemsets>())?;
    m.add_function(wrap_pyfunction!(fpgrowth, m)?)?;
    m.add_function(wrap_pyfunction!(apriori_gen, m)?)?;
    m.add_function(wrap_pyfunction!(count_candidates, m)?)?;
    m.add_function(wrap_pyfunction!(closed_filter, m)?)?;
    m.add_function(wrap_pyfunction!(association_rules, m)?)?;
    m.add_function(wrap_pyfunction!(canonical_itemsets, m)?)?;
    Ok(())
}
