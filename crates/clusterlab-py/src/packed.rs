//! Packed baskets (clusterlab_core::packed): encoding a partition for a LUN of layout version
//! 2 and decoding it piece by piece as the pieces arrive, without the GIL.

use clusterlab_core::packed::{self, DecodeError, Decoder};
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

type Arr<'py, T> = Bound<'py, PyArray1<T>>;

pyo3::create_exception!(_core, PackedFormatError, PyValueError, "Packed baskets are malformed: args are (message, byte offset in the region).");

fn decode_err(e: DecodeError) -> PyErr {
    PackedFormatError::new_err((e.message, e.offset))
}

/// CSR baskets (sorted, distinct ids per transaction) as packed bytes.
#[pyfunction]
fn pack_baskets<'py>(py: Python<'py>, offsets: PyReadonlyArray1<i64>, items: PyReadonlyArray1<u32>) -> PyResult<Bound<'py, PyBytes>> {
    let (o, i) = (offsets.as_slice()?, items.as_slice()?);
    let out = py.detach(|| packed::encode(o, i)).map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &out))
}

/// Decoder of one packed region of `region_len` bytes: `feed(piece)` as pieces arrive (cut
/// anywhere), then `finish(transactions)` -> (offsets, items).
#[pyclass(module = "clusterlab._core", name = "PackedDecoder")]
pub struct PackedDecoder {
    inner: Option<Decoder>,
}

impl PackedDecoder {
    fn get(&mut self) -> PyResult<&mut Decoder> {
        self.inner.as_mut().ok_or_else(|| PyValueError::new_err("this decoder has finished"))
    }
}

#[pymethods]
impl PackedDecoder {
    #[new]
    fn new(region_len: u64) -> Self {
        PackedDecoder { inner: Some(Decoder::new(region_len)) }
    }

    /// Bytes taken so far.
    #[getter]
    fn position(&mut self) -> PyResult<u64> {
        Ok(self.get()?.position())
    }

    fn feed(&mut self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        let d = self.get()?;
        py.detach(|| d.feed(data)).map_err(decode_err)
    }

    #[pyo3(signature = (transactions=None))]
    fn finish<'py>(&mut self, py: Python<'py>, transactions: Option<u64>) -> PyResult<(Arr<'py, i64>, Arr<'py, u32>)> {
        let d = self.inner.take().ok_or_else(|| PyValueError::new_err("this decoder has finished"))?;
        let b = d.finish(transactions).map_err(decode_err)?;
        Ok((PyArray1::from_vec(py, b.offsets), PyArray1::from_vec(py, b.items)))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pack_baskets, m)?)?;
    m.add_class::<PackedDecoder>()?;
    m.add("PackedFormatError", m.py().get_type::<PackedFormatError>())?;
    Ok(())
}
