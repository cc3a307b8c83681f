//! Python transactions (a sequence of sequences of ints or strings) to CSR arrays, walked
//! once in Rust: no intermediate Python lists, sets or sorted copies.
//!
//! Items are ints in 0..4294967295 (Python ints, numpy integers, anything with
//! `__index__`) or strings. As soon as one string appears every item is a label, ints by
//! their decimal text, and labels get ids in sorted (code point) order, as `sorted()` gives.
//! Anything else (floats, None, nested lists, bytes) is refused naming `transactions[t][k]`.

use clusterlab_core::basket::normalize_tail;
use clusterlab_core::labels::LabelDictionary;
use numpy::{PyArray1, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyList, PyString, PyTuple};
use rayon::prelude::*;

/// CSR arrays being built, in integer or label mode.
struct Builder {
    offsets: Vec<i64>,
    items: Vec<u32>,
    dropped: u64,
    labels: Option<LabelDictionary>,
}

fn short_repr(x: &Bound<'_, PyAny>) -> String {
    let r = x.repr().map(|r| r.to_string()).unwrap_or_else(|_| "?".into());
    if r.chars().count() > 40 { format!("{}...", r.chars().take(37).collect::<String>()) } else { r }
}

fn bad_item(t: usize, k: usize, x: &Bound<'_, PyAny>, why: &str) -> PyErr {
    let ty = x.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
    let msg = format!("transactions[{t}][{k}] = {} ({ty}) {why}", short_repr(x));
    if why.starts_with("is outside") { PyValueError::new_err(msg) } else { PyTypeError::new_err(msg) }
}

const ACCEPTED: &str = "is not an item: items are integers 0..4294967295 or strings";

impl Builder {
    fn new(capacity: usize) -> Self {
        let mut offsets = Vec::with_capacity(capacity + 1);
        offsets.push(0);
        Builder { offsets, items: Vec::new(), dropped: 0, labels: None }
    }

    /// Switch to labels: every item so far becomes the label of its decimal text.
    fn switch_to_labels(&mut self) {
        let mut d = LabelDictionary::new();
        for v in self.items.iter_mut() {
            *v = d.id(&v.to_string());
        }
        self.labels = Some(d);
    }

    #[inline]
    fn int(&mut self, t: usize, k: usize, x: &Bound<'_, PyAny>, v: i64) -> PyResult<()> {
        if !(0..=u32::MAX as i64).contains(&v) {
            return Err(bad_item(t, k, x, "is outside 0..4294967295"));
        }
        match &mut self.labels {
            None => self.items.push(v as u32),
            Some(d) => self.items.push(d.id(&v.to_string())),
        }
        Ok(())
    }

    #[inline]
    fn item(&mut self, t: usize, k: usize, x: &Bound<'_, PyAny>) -> PyResult<()> {
        // Plain ints first: one C call, and no exception object on the common path.
        if x.is_instance_of::<PyInt>() {
            return match x.extract::<i64>() {
                Ok(v) => self.int(t, k, x, v),
                Err(_) => Err(bad_item(t, k, x, "is outside 0..4294967295")),
            };
        }
        if let Ok(s) = x.cast::<PyString>() {
            if self.labels.is_none() {
                self.switch_to_labels();
            }
            let id = self.labels.as_mut().unwrap().id(s.to_str()?);
            self.items.push(id);
            return Ok(());
        }
        if x.hasattr("__index__")? {
            return match x.extract::<i64>() {
                Ok(v) => self.int(t, k, x, v),
                Err(_) => Err(bad_item(t, k, x, "is outside 0..4294967295")),
            };
        }
        Err(bad_item(t, k, x, ACCEPTED))
    }

    /// A 1-D numpy array of integers, read from its buffer.
    fn int_array(&mut self, t: usize, a: &Bound<'_, PyUntypedArray>) -> PyResult<bool> {
        macro_rules! try_dtype {
            ($($ty:ty),*) => {$(
                if let Ok(arr) = a.cast::<PyArray1<$ty>>() {
                    let ro = arr.readonly();
                    let view = ro.as_array();
                    for (k, &v) in view.iter().enumerate() {
                        let v = v as i128;
                        if !(0..=u32::MAX as i128).contains(&v) {
                            return Err(PyValueError::new_err(format!(
                                "transactions[{t}][{k}] = {v} is outside 0..4294967295")));
                        }
                        match &mut self.labels {
                            None => self.items.push(v as u32),
                            Some(d) => self.items.push(d.id(&v.to_string())),
                        }
                    }
                    return Ok(true);
                }
            )*};
        }
        try_dtype!(i64, u32, i32, u64, u16, i16, u8, i8);
        Ok(false)
    }

    fn transaction(&mut self, t: usize, tx: &Bound<'_, PyAny>) -> PyResult<()> {
        let start = self.items.len();
        if let Ok(l) = tx.cast::<PyList>() {
            for (k, x) in l.iter().enumerate() {
                self.item(t, k, &x)?;
            }
        } else if let Ok(tu) = tx.cast::<PyTuple>() {
            for (k, x) in tu.iter().enumerate() {
                self.item(t, k, &x)?;
            }
        } else if tx.is_instance_of::<PyString>() || tx.is_instance_of::<PyBytes>() {
            let ty = tx.get_type().name()?.to_string();
            return Err(PyTypeError::new_err(format!(
                "transactions[{t}] is a {ty} ({}), not a collection of items", short_repr(tx))));
        } else if !(tx.cast::<PyUntypedArray>().is_ok_and(|a| a.ndim() == 1)
            && self.int_array(t, tx.cast::<PyUntypedArray>().unwrap())?)
        {
            let it = tx.try_iter().map_err(|_| {
                PyTypeError::new_err(format!("transactions[{t}] = {} is not a collection of items", short_repr(tx)))
            })?;
            for (k, x) in it.enumerate() {
                self.item(t, k, &x?)?;
            }
        }
        self.dropped += normalize_tail(&mut self.items, start) as u64;
        self.offsets.push(self.items.len() as i64);
        Ok(())
    }
}

/// Convert transactions to `(offsets, items, labels or None, duplicates_dropped)`.
pub fn lists_to_csr(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<(Vec<i64>, Vec<u32>, Option<Vec<String>>, u64)> {
    let mut b;
    if let Ok(l) = obj.cast::<PyList>() {
        b = Builder::new(l.len());
        for (t, tx) in l.iter().enumerate() {
            b.transaction(t, &tx)?;
        }
    } else if let Ok(tu) = obj.cast::<PyTuple>() {
        b = Builder::new(tu.len());
        for (t, tx) in tu.iter().enumerate() {
            b.transaction(t, &tx)?;
        }
    } else {
        // Not iterable: a TypeError, as before.
        let it = obj.try_iter()?;
        b = Builder::new(0);
        for (t, tx) in it.enumerate() {
            b.transaction(t, &tx?)?;
        }
    }
    let Builder { offsets, mut items, dropped, labels } = b;
    let labels = match labels {
        None => None,
        Some(d) => {
            let (sorted, remap) = py.detach(|| d.sorted(false));
            py.detach(|| {
                items.par_iter_mut().for_each(|v| *v = remap[*v as usize]);
                // Ids changed order: sort every transaction again (no duplicates to drop).
                let mut rest = &mut items[..];
                for w in offsets.windows(2) {
                    let (tx, tail) = rest.split_at_mut((w[1] - w[0]) as usize);
                    tx.sort_unstable();
                    rest = tail;
                }
            });
            Some(sorted)
        }
    };
    Ok((offsets, items, labels, dropped))
}
