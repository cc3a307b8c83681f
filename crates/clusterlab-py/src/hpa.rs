//! Parallel mining kernels (HPA routing and owner counting, PFP shuffle and local FP-growth).
//! Every kernel releases the GIL, so a rank's receiver thread counts while its main thread
//! scans and sends.

use clusterlab_core::hpa::{self, block, items, pfp, vertical, OwnerTable, Router};
use numpy::{PyArray1, PyReadonlyArray1, PyReadwriteArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

fn check_flat(flat: &[u32], k: usize, what: &str) -> PyResult<()> {
    if k == 0 || !flat.len().is_multiple_of(k) {
        return Err(PyValueError::new_err(format!("{what}: {} items is not a multiple of k={k}", flat.len())));
    }
    Ok(())
}

fn check_csr(o: &[i64], n_items: usize) -> PyResult<()> {
    let ok = !o.is_empty() && o[0] == 0 && *o.last().unwrap() as usize == n_items && o.windows(2).all(|w| w[0] <= w[1]);
    if ok { Ok(()) } else { Err(PyValueError::new_err("offsets do not describe the items array")) }
}

/// The rank in 0..parts that owns an itemset (item ranks ascending); see hpa/hash.rs.
#[pyfunction]
fn hpa_owner(items: Vec<u32>, parts: u32) -> PyResult<u32> {
    if parts == 0 {
        return Err(PyValueError::new_err("parts must be at least 1"));
    }
    Ok(hpa::owner_of(hpa::itemset_hash(&items), parts))
}

/// Candidate k-itemsets (flat) from the large (k-1)-itemsets `prev` (flat, sorted), keeping
/// those owned by rank `me` of `parts` (every candidate when parts == 1).
#[pyfunction]
fn hpa_candidates<'py>(py: Python<'py>, prev: PyReadonlyArray1<u32>, km1: usize, parts: u32, me: u32) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let p = prev.as_slice()?;
    check_flat(p, km1, "prev")?;
    if me >= parts {
        return Err(PyValueError::new_err(format!("rank {me} outside 0..{parts}")));
    }
    let out = py.detach(|| {
        if parts == 1 {
            hpa::apriori_gen_filtered(p, km1, |_| true)
        } else {
            hpa::apriori_gen_filtered(p, km1, |c| hpa::owner_of(hpa::itemset_hash(c), parts) == me)
        }
    });
    Ok(PyArray1::from_vec(py, out))
}

/// Prefix partitioning: the candidate k-itemsets whose first item `x` has `owners[x] == me`.
#[pyfunction]
fn hpa_prefix_candidates<'py>(py: Python<'py>, prev: PyReadonlyArray1<u32>, km1: usize, owners: PyReadonlyArray1<u32>, me: u32) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let p = prev.as_slice()?;
    let ow = owners.as_slice()?;
    check_flat(p, km1, "prev")?;
    if p.iter().any(|&x| x as usize >= ow.len()) {
        return Err(PyValueError::new_err("owners has no entry for an item of prev"));
    }
    let out = py.detach(|| hpa::apriori_gen_filtered(p, km1, |c| ow[c[0] as usize] == me));
    Ok(PyArray1::from_vec(py, out))
}

/// HPA-ELD: (replicated candidates, this rank's partition of the others); see eld_split.
#[pyfunction]
fn hpa_eld_candidates<'py>(py: Python<'py>, prev: PyReadonlyArray1<u32>, km1: usize, parts: u32, me: u32, freq_pos: PyReadonlyArray1<u32>, eld_max: usize) -> PyResult<(Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<u32>>)> {
    let p = prev.as_slice()?;
    let f = freq_pos.as_slice()?;
    check_flat(p, km1, "prev")?;
    if p.iter().any(|&x| x as usize >= f.len()) {
        return Err(PyValueError::new_err("freq_pos has no entry for an item of prev"));
    }
    let (e, own) = py.detach(|| hpa::eld_split(p, km1, f, eld_max, |c| hpa::owner_of(hpa::itemset_hash(c), parts) == me));
    Ok((PyArray1::from_vec(py, e), PyArray1::from_vec(py, own)))
}

/// A set of candidate k-itemsets with counters: the owner's partition (or the ELD set).
/// `count_block(data)` counts a received message block (see hpa/block.rs).
#[pyclass(module = "clusterlab._core")]
struct CandidateTable {
    inner: OwnerTable,
}

#[pymethods]
impl CandidateTable {
    /// `n_items` > 0 (items are below it) lets pairs use a dense index (pass 2).
    #[new]
    #[pyo3(signature = (k, flat, n_items=0))]
    fn new(py: Python<'_>, k: usize, flat: PyReadonlyArray1<u32>, n_items: usize) -> PyResult<Self> {
        let f = flat.as_slice()?;
        check_flat(f, k, "candidates")?;
        let inner = py.detach(|| OwnerTable::new(k, f.to_vec(), n_items));
        Ok(CandidateTable { inner })
    }

    fn __len__(&self) -> usize {
        self.inner.index.len()
    }

    /// Count every itemset of a received block (items of `width` bytes, little-endian);
    /// returns how many were not candidates.
    #[pyo3(signature = (data, width=4))]
    fn count_block(&mut self, py: Python<'_>, data: &[u8], width: usize) -> PyResult<u64> {
        let t = &mut self.inner;
        py.detach(|| t.count_block(data, width)).map_err(PyValueError::new_err)
    }

    /// `count_block` for each block of the list `blocks` (one call for many received blocks);
    /// returns how many itemsets were not candidates. The first bad block stops and raises.
    #[pyo3(signature = (blocks, width=4))]
    fn count_blocks(&mut self, py: Python<'_>, blocks: Vec<pyo3::pybacked::PyBackedBytes>, width: usize) -> PyResult<u64> {
        let t = &mut self.inner;
        py.detach(|| -> Result<u64, String> {
            let mut misses = 0;
            for b in &blocks {
                misses += t.count_block(b, width)?;
            }
            Ok(misses)
        })
        .map_err(PyValueError::new_err)
    }

    /// Counts in candidate order (numpy uint64).
    fn counts<'py>(&mut self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        PyArray1::from_vec(py, self.inner.counts())
    }

    /// The candidates, flat (numpy uint32).
    fn itemsets<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u32>> {
        PyArray1::from_vec(py, self.inner.index.items.clone())
    }

    #[getter]
    fn misses(&self) -> u64 {
        self.inner.misses
    }

    #[getter]
    fn blocks(&self) -> u64 {
        self.inner.blocks
    }
}

/// The sender side of one HPA pass (see hpa/route.rs).
#[pyclass(module = "clusterlab._core", name = "HpaRouter")]
struct PyRouter {
    inner: Router,
    width: usize,
}

#[pymethods]
impl PyRouter {
    #[new]
    #[pyo3(signature = (k, parts, me, prev, table, eld=None, block_bytes=8192, prune=true, width=4, owners=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(py: Python<'_>, k: usize, parts: u32, me: u32, prev: PyReadonlyArray1<u32>, table: &CandidateTable, eld: Option<PyRef<'_, CandidateTable>>, block_bytes: usize, prune: bool, width: usize, owners: Option<PyReadonlyArray1<u32>>) -> PyResult<Self> {
        block::check_width(width).map_err(PyValueError::new_err)?;
        if k < 2 || parts == 0 || me >= parts || table.inner.index.k != k {
            return Err(PyValueError::new_err(format!("bad router settings: k={k} parts={parts} me={me} table k={}", table.inner.index.k)));
        }
        if block_bytes < width * k {
            return Err(PyValueError::new_err(format!("block_bytes {block_bytes} cannot hold one {k}-itemset")));
        }
        let p = prev.as_slice()?;
        check_flat(p, k - 1, "prev")?;
        let local = table.inner.index.clone();
        let eld = eld.map(|e| e.inner.index.clone());
        // Blocks hold block_bytes / (width * k) itemsets; the router counts in u32 units.
        let per_block_u32 = (block_bytes / (width * k)).max(1) * k * 4;
        if width == 2 && p.iter().any(|&x| x > u16::MAX as u32) {
            return Err(PyValueError::new_err("2-byte items need item ranks below 65536"));
        }
        let owners = match owners {
            None => None,
            Some(o) => {
                let o = o.as_slice()?.to_vec();
                if eld.is_some() || o.iter().any(|&x| x >= parts) || p.iter().any(|&x| x as usize >= o.len()) {
                    return Err(PyValueError::new_err("prefix owners: no ELD, one owner below parts per item of prev"));
                }
                Some(o)
            }
        };
        let inner = py.detach(|| {
            let r = Router::new(k, parts, me, p, local, eld, per_block_u32, prune);
            match owners {
                Some(o) => r.with_prefix_owners(o),
                None => r,
            }
        });
        Ok(PyRouter { inner, width })
    }

    /// Route transactions lo..hi (items are ranks, ascending); returns the ready blocks as
    /// a list of (owner, bytes).
    fn route<'py>(&mut self, py: Python<'py>, offsets: PyReadonlyArray1<i64>, items: PyReadonlyArray1<u32>, lo: usize, hi: usize) -> PyResult<Bound<'py, PyList>> {
        let (o, i) = (offsets.as_slice()?, items.as_slice()?);
        if lo > hi || hi + 1 > o.len() {
            return Err(PyValueError::new_err(format!("transaction range {lo}..{hi} outside 0..{}", o.len().saturating_sub(1))));
        }
        // Only the routed range is read, so only it is checked (a full check per read block
        // would cost O(file) each time).
        let r = &o[lo..=hi];
        if r[0] < 0 || r.windows(2).any(|w| w[0] > w[1]) || r[r.len() - 1] as usize > i.len() {
            return Err(PyValueError::new_err("offsets do not describe the items array"));
        }
        let r = &mut self.inner;
        py.detach(|| r.route(o, i, lo, hi));
        self.take_ready(py)
    }

    /// Count a received block of prefix records (prefix partitioning; items of `width` bytes).
    fn count_records(&mut self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        let (r, w) = (&mut self.inner, self.width);
        py.detach(|| r.count_record_block(data, w)).map_err(PyValueError::new_err)
    }

    /// The partly filled blocks (call once after the last route).
    fn flush<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.inner.flush();
        self.take_ready(py)
    }

    fn local_counts<'py>(&mut self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        PyArray1::from_vec(py, self.inner.local_counts())
    }

    fn eld_counts<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        PyArray1::from_vec(py, self.inner.eld_counts.clone())
    }

    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = &self.inner.stats;
        let d = PyDict::new(py);
        d.set_item("transactions", s.transactions)?;
        d.set_item("subsets", s.enumerated)?;
        d.set_item("pruned_at_sender", s.pruned)?;
        d.set_item("eld_local", s.eld)?;
        d.set_item("owned_local", s.local)?;
        d.set_item("owned_local_misses", s.local_misses)?;
        d.set_item("itemsets_sent", s.sent_itemsets)?;
        d.set_item("blocks", s.blocks)?;
        Ok(d)
    }
}

impl PyRouter {
    fn take_ready<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for (o, b) in self.inner.take_ready_encoded(self.width) {
            out.append((o, PyBytes::new(py, &b)))?;
        }
        Ok(out)
    }
}

/// Keep items with map[item] != 0xFFFFFFFF, renamed to map[item], sorted; drop transactions
/// shorter than min_len. Returns (offsets, items).
#[pyfunction]
fn reduce_transactions<'py>(py: Python<'py>, offsets: PyReadonlyArray1<i64>, items: PyReadonlyArray1<u32>, map: PyReadonlyArray1<u32>, min_len: usize) -> PyResult<(Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<u32>>)> {
    let (o, i, m) = (offsets.as_slice()?, items.as_slice()?, map.as_slice()?);
    check_csr(o, i.len())?;
    let b = py.detach(|| hpa::reduce_transactions(o, i, m, min_len));
    Ok((PyArray1::from_vec(py, b.offsets), PyArray1::from_vec(py, b.items)))
}

/// Distinct items of a flat item array and their counts: (ids ascending, counts). Memory
/// follows the number of distinct items, not the largest id.
#[pyfunction]
fn distinct_item_counts<'py>(py: Python<'py>, items: PyReadonlyArray1<u32>) -> PyResult<(Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<u64>>)> {
    let i = items.as_slice()?;
    let (ids, counts) = py.detach(|| items::distinct_counts(i));
    Ok((PyArray1::from_vec(py, ids), PyArray1::from_vec(py, counts)))
}

/// Merge per-rank (ids, counts) lists into one sorted list with summed counts.
#[pyfunction]
fn merge_item_counts<'py>(py: Python<'py>, ids: Vec<PyReadonlyArray1<u32>>, counts: Vec<PyReadonlyArray1<u64>>) -> PyResult<(Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<u64>>)> {
    let parts: Vec<(&[u32], &[u64])> = ids.iter().zip(&counts).map(|(i, c)| Ok((i.as_slice()?, c.as_slice()?))).collect::<PyResult<_>>()?;
    if ids.len() != counts.len() || parts.iter().any(|(i, c)| i.len() != c.len()) {
        return Err(PyValueError::new_err("one count per id, one count list per id list"));
    }
    let (i, c) = py.detach(|| items::merge_counts(&parts));
    Ok((PyArray1::from_vec(py, i), PyArray1::from_vec(py, c)))
}

/// Keep the items listed in `keys` (sorted, distinct), renamed to `values[position]`, sorted;
/// drop transactions shorter than min_len. Returns (offsets, items).
#[pyfunction]
fn reduce_by_keys<'py>(py: Python<'py>, offsets: PyReadonlyArray1<i64>, items: PyReadonlyArray1<u32>, keys: PyReadonlyArray1<u32>, values: PyReadonlyArray1<u32>, min_len: usize) -> PyResult<(Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<u32>>)> {
    let (o, i, k, v) = (offsets.as_slice()?, items.as_slice()?, keys.as_slice()?, values.as_slice()?);
    check_csr(o, i.len())?;
    if k.len() != v.len() || k.windows(2).any(|w| w[0] >= w[1]) {
        return Err(PyValueError::new_err("keys must be ascending and distinct, with one value each"));
    }
    let b = py.detach(|| items::reduce_by_keys(o, i, k, v, min_len));
    Ok((PyArray1::from_vec(py, b.offsets), PyArray1::from_vec(py, b.items)))
}

/// `reduce_by_keys` in place: the kept transactions are written to the front of `offsets` and
/// `items` (both modified). Returns (transactions, items) kept; the caller truncates.
#[pyfunction]
fn reduce_by_keys_inplace(py: Python<'_>, mut offsets: PyReadwriteArray1<i64>, mut items: PyReadwriteArray1<u32>, keys: PyReadonlyArray1<u32>, values: PyReadonlyArray1<u32>, min_len: usize) -> PyResult<(usize, usize)> {
    let (k, v) = (keys.as_slice()?, values.as_slice()?);
    if k.len() != v.len() || k.windows(2).any(|w| w[0] >= w[1]) {
        return Err(PyValueError::new_err("keys must be ascending and distinct, with one value each"));
    }
    let (o, i) = (offsets.as_slice_mut()?, items.as_slice_mut()?);
    check_csr(o, i.len())?;
    Ok(py.detach(|| items::reduce_by_keys_in_place(o, i, k, v, min_len)))
}

/// `reduce_transactions` in place (see `reduce_by_keys_inplace`). Returns (transactions, items).
#[pyfunction]
fn reduce_transactions_inplace(py: Python<'_>, mut offsets: PyReadwriteArray1<i64>, mut items: PyReadwriteArray1<u32>, map: PyReadonlyArray1<u32>, min_len: usize) -> PyResult<(usize, usize)> {
    let m = map.as_slice()?;
    let (o, i) = (offsets.as_slice_mut()?, items.as_slice_mut()?);
    check_csr(o, i.len())?;
    Ok(py.detach(|| items::reduce_in_place(o, i, min_len, |x| m.get(x as usize).copied().filter(|&r| r != u32::MAX))))
}

/// Pass 2 counted locally: pair counts of transactions of ranks below `n` (ascending), as a
/// triangle in lexicographic pair order (numpy uint32).
#[pyfunction]
fn count_pairs<'py>(py: Python<'py>, offsets: PyReadonlyArray1<i64>, items: PyReadonlyArray1<u32>, n: usize) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let (o, i) = (offsets.as_slice()?, items.as_slice()?);
    check_csr(o, i.len())?;
    if i.iter().any(|&x| x as usize >= n) {
        return Err(PyValueError::new_err(format!("an item rank is not below n={n}")));
    }
    if o.windows(2).any(|w| i[w[0] as usize..w[1] as usize].windows(2).any(|p| p[0] >= p[1])) {
        return Err(PyValueError::new_err("transactions must hold ascending ranks"));
    }
    let c = py.detach(|| vertical::count_pairs(o, i, n));
    Ok(PyArray1::from_vec(py, c))
}

/// The pairs (flat, lexicographic) of a global triangle of counts that reach `min_count`.
#[pyfunction]
fn frequent_pairs<'py>(py: Python<'py>, counts: PyReadonlyArray1<u64>, n: usize, min_count: u64) -> PyResult<(Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<u64>>)> {
    let c = counts.as_slice()?;
    if c.len() != n * n.saturating_sub(1) / 2 {
        return Err(PyValueError::new_err(format!("{} counts is not a triangle of {n} items", c.len())));
    }
    let (f, k) = py.detach(|| vertical::frequent_pairs(c, n, min_count));
    Ok((PyArray1::from_vec(py, f), PyArray1::from_vec(py, k)))
}

/// Itemsets of one length with their local tid-lists (Count Distribution over vertical data).
#[pyclass(module = "clusterlab._core", name = "TidLists")]
struct PyTidLists {
    inner: vertical::TidLists,
}

#[pymethods]
impl PyTidLists {
    /// Lists of the items `keep` marks (item ranks below len(keep)).
    #[staticmethod]
    fn of_items(py: Python<'_>, offsets: PyReadonlyArray1<i64>, items: PyReadonlyArray1<u32>, keep: PyReadonlyArray1<bool>) -> PyResult<Self> {
        let (o, i, k) = (offsets.as_slice()?, items.as_slice()?, keep.as_slice()?);
        check_csr(o, i.len())?;
        if i.iter().any(|&x| x as usize >= k.len()) {
            return Err(PyValueError::new_err("an item rank has no entry in keep"));
        }
        Ok(PyTidLists { inner: py.detach(|| vertical::TidLists::of_items(o, i, k)) })
    }

    /// Lists of the candidates one item longer (flat), by intersection.
    fn extend(&self, py: Python<'_>, cands: PyReadonlyArray1<u32>) -> PyResult<Self> {
        let c = cands.as_slice()?;
        let inner = &self.inner;
        let next = py.detach(|| inner.extend(c)).map_err(PyValueError::new_err)?;
        Ok(PyTidLists { inner: next })
    }

    /// Local counts (list lengths), in order.
    fn counts<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        PyArray1::from_vec(py, self.inner.counts())
    }

    /// Keep the itemsets `keep` marks.
    fn retain(&self, py: Python<'_>, keep: PyReadonlyArray1<bool>) -> PyResult<Self> {
        let k = keep.as_slice()?;
        if k.len() != self.inner.len() {
            return Err(PyValueError::new_err("one keep flag per itemset"));
        }
        let inner = &self.inner;
        Ok(PyTidLists { inner: py.detach(|| inner.retain(k)) })
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }
}

/// PFP group-dependent transactions: one u32 stream `[len, items...]*` per group.
#[pyfunction]
fn pfp_group_transactions<'py>(py: Python<'py>, offsets: PyReadonlyArray1<i64>, items: PyReadonlyArray1<u32>, group_of: PyReadonlyArray1<u32>, n_groups: usize) -> PyResult<Vec<Bound<'py, PyArray1<u32>>>> {
    let (o, i, g) = (offsets.as_slice()?, items.as_slice()?, group_of.as_slice()?);
    check_csr(o, i.len())?;
    if i.iter().any(|&x| x as usize >= g.len()) || g.iter().any(|&x| x as usize >= n_groups) {
        return Err(PyValueError::new_err("an item has no group, or a group is outside 0..n_groups"));
    }
    let streams = py.detach(|| pfp::group_transactions(o, i, g, n_groups));
    Ok(streams.into_iter().map(|s| PyArray1::from_vec(py, s)).collect())
}

/// Mine the group's itemsets from received streams. Returns (offsets, items, counts), items
/// as F-list positions. `kernel`: "vertical" (tid-list intersections, the fastest on sparse
/// data; the default), "fptree" (a group-restricted FP-growth) or "fpgrowth" (the sequential
/// engine's FP-growth on each top-level item's conditional base).
#[pyfunction]
#[pyo3(signature = (streams, n_pos, in_group, min_count, max_len=0, kernel="vertical"))]
#[allow(clippy::too_many_arguments)]
fn pfp_mine_group<'py>(py: Python<'py>, streams: Vec<PyReadonlyArray1<u32>>, n_pos: usize, in_group: PyReadonlyArray1<bool>, min_count: u64, max_len: usize, kernel: &str) -> PyResult<(Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<u64>>)> {
    let slices: Vec<&[u32]> = streams.iter().map(|s| s.as_slice()).collect::<Result<_, _>>()?;
    let g = in_group.as_slice()?;
    if g.len() != n_pos {
        return Err(PyValueError::new_err("in_group must have one entry per F-list position"));
    }
    if !matches!(kernel, "vertical" | "fptree" | "fpgrowth") {
        return Err(PyValueError::new_err(format!("kernel must be vertical, fptree or fpgrowth, got {kernel:?}")));
    }
    let m = py.detach(|| match kernel {
        "vertical" => pfp::mine_group_vertical(&slices, n_pos, g, min_count, max_len),
        "fptree" => pfp::decode_streams(&slices, n_pos).map(|paths| pfp::mine_group(paths, n_pos, g, min_count, max_len)),
        _ => pfp::decode_streams(&slices, n_pos).map(|paths| pfp::mine_group_with_engine(paths, n_pos, g, min_count, max_len)),
    });
    let m = m.map_err(|e| PyValueError::new_err(format!("bad PFP message: {e}")))?;
    Ok((PyArray1::from_vec(py, m.offsets), PyArray1::from_vec(py, m.items), PyArray1::from_vec(py, m.counts)))
}

/// `pfp_mine_group` with the "vertical" kernel on one thread, handing its itemsets to
/// `callback(offsets, items, counts)` (F-list positions, in the order found) in chunks of at
/// least `chunk` itemsets (a top-level item's itemsets are never split) while it runs; at
/// most one chunk waits between them, so memory does not grow with the group's result. An
/// exception from the callback stops the kernel and is raised. Returns the number of itemsets.
#[pyfunction]
#[pyo3(signature = (streams, n_pos, in_group, min_count, max_len, chunk, callback))]
#[allow(clippy::too_many_arguments)]
fn pfp_mine_group_stream(
    py: Python<'_>, streams: Vec<PyReadonlyArray1<u32>>, n_pos: usize, in_group: PyReadonlyArray1<bool>, min_count: u64, max_len: usize, chunk: usize,
    callback: Bound<'_, PyAny>,
) -> PyResult<u64> {
    let slices: Vec<&[u32]> = streams.iter().map(|s| s.as_slice()).collect::<Result<_, _>>()?;
    let g = in_group.as_slice()?;
    if g.len() != n_pos {
        return Err(PyValueError::new_err("in_group must have one entry per F-list position"));
    }
    if chunk == 0 {
        return Err(PyValueError::new_err("chunk must be >= 1"));
    }
    let (tx, rx) = std::sync::mpsc::sync_channel::<pfp::Mined>(1);
    let mut failure: Option<PyErr> = None;
    let mut total = 0u64;
    let outcome = std::thread::scope(|scope| {
        let slices = &slices;
        let miner = scope.spawn(move || pfp::mine_group_vertical_chunked(slices, n_pos, g, min_count, max_len, chunk, &mut |m| tx.send(m).is_ok()));
        let mut rx = Some(rx);
        while let Some(r) = rx.take() {
            let (got, r) = py.detach(move || (r.recv(), r));
            let Ok(m) = got else { break };
            rx = Some(r);
            total += m.counts.len() as u64;
            let (o, i, c) = (PyArray1::from_vec(py, m.offsets), PyArray1::from_vec(py, m.items), PyArray1::from_vec(py, m.counts));
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
        Ok(Ok(_)) => Ok(total),
        Ok(Err(e)) => Err(PyValueError::new_err(format!("bad PFP message: {e}"))),
        Err(_) => Err(pyo3::exceptions::PyRuntimeError::new_err("the PFP mining thread panicked")),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(hpa_owner, m)?)?;
    m.add_function(wrap_pyfunction!(hpa_candidates, m)?)?;
    m.add_function(wrap_pyfunction!(hpa_prefix_candidates, m)?)?;
    m.add_function(wrap_pyfunction!(hpa_eld_candidates, m)?)?;
    m.add_class::<CandidateTable>()?;
    m.add_class::<PyRouter>()?;
    m.add_function(wrap_pyfunction!(reduce_transactions, m)?)?;
    m.add_function(wrap_pyfunction!(distinct_item_counts, m)?)?;
    m.add_function(wrap_pyfunction!(merge_item_counts, m)?)?;
    m.add_function(wrap_pyfunction!(reduce_by_keys, m)?)?;
    m.add_function(wrap_pyfunction!(reduce_by_keys_inplace, m)?)?;
    m.add_function(wrap_pyfunction!(reduce_transactions_inplace, m)?)?;
    m.add_function(wrap_pyfunction!(count_pairs, m)?)?;
    m.add_function(wrap_pyfunction!(frequent_pairs, m)?)?;
    m.add_class::<PyTidLists>()?;
    m.add_function(wrap_pyfunction!(pfp_group_transactions, m)?)?;
    m.add_function(wrap_pyfunction!(pfp_mine_group, m)?)?;
    m.add_function(wrap_pyfunction!(pfp_mine_group_stream, m)?)?;
    Ok(())
}
