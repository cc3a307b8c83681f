//! PyO3 binding of clusterlab-core and clusterlab-net, imported as `clusterlab._core`. Thin on
//! purpose: argument conversion, releasing the GIL around kernels and socket waits, and errors
//! turned into Python exceptions.
//! Each area registers its own functions so that work on one never edits another's file.

// Binding signatures return tuples of numpy arrays by nature.
#![allow(clippy::type_complexity)]

use pyo3::prelude::*;

mod atm;
mod gen;
mod hpa;
mod io;
mod iscsi;
mod mining;
mod net;
mod npb;
mod packed;
mod wan;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    io::register(m)?;
    gen::register(m)?;
    mining::register(m)?;
    hpa::register(m)?;
    net::register(m)?;
    iscsi::register(m)?;
    npb::register(m)?;
    wan::register(m)?;
    atm::register(m)?;
    packed::register(m)?;
    Ok(())
}
