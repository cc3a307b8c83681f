//! The ATM cell switch (clusterlab-atm): run it in the calling thread with the GIL released
//! until the watched descriptor closes. The testbed starts it in the switch namespace.

use clusterlab_atm::cell::{Discard, SwitchConfig};
use clusterlab_atm::run::{run, RunConfig};
use clusterlab_wan::run::Control;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::atomic::AtomicBool;

fn parse_mac(s: &str) -> PyResult<[u8; 6]> {
    let parts: Vec<&str> = s.split(':').collect();
    let bad = || PyValueError::new_err(format!("MAC address {s:?}: accepted six hex bytes joined by ':'"));
    if parts.len() != 6 {
        return Err(bad());
    }
    let mut mac = [0u8; 6];
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    Ok(mac)
}

/// Switch frames between `ports` (interfaces of this namespace; `sites[i]` is port i's site)
/// through the cell model: `cell_ps` per cell on every link, `buffer_cells` per output port,
/// `discard` one of none, ppd, epd (with `epd_threshold` cells). `fdb`: (site, MAC, port)
/// static entries. `line_loss`: per port, the probability that its link loses a cell (both
/// directions; empty: none), drawn from `loss_seed`. Returns the totals: per port the model's counts (lists indexed by port),
/// frames read, send errors, lateness of departures (ns), kernel drops, late offers.
#[pyfunction]
#[pyo3(signature = (ports, sites, fdb, cell_ps, buffer_cells, discard="none", epd_threshold=0, trace_path=None,
                    interval_ns=100_000_000, watch_fd=-1, ready_fd=-1, realtime=true, line_loss=Vec::new(),
                    loss_seed=1))]
#[allow(clippy::too_many_arguments)]
fn atm_switch<'py>(py: Python<'py>, ports: Vec<String>, sites: Vec<u8>, fdb: Vec<(u8, String, u16)>, cell_ps: u64,
                   buffer_cells: u32, discard: &str, epd_threshold: u32, trace_path: Option<String>, interval_ns: u64,
                   watch_fd: i32, ready_fd: i32, realtime: bool, line_loss: Vec<f64>,
                   loss_seed: u64) -> PyResult<Bound<'py, PyDict>> {
    let discard = match discard {
        "none" => Discard::None,
        "ppd" => Discard::Ppd,
        "epd" => Discard::Epd { threshold: epd_threshold },
        other => return Err(PyValueError::new_err(format!("discard {other:?}: accepted none, ppd, epd"))),
    };
    let model = SwitchConfig { ports: ports.len(), cell_ps, buffer_cells, discard };
    if let Some(why) = model.why_not() {
        return Err(PyValueError::new_err(why));
    }
    let fdb = fdb.into_iter().map(|(s, m, p)| Ok((s, parse_mac(&m)?, p))).collect::<PyResult<Vec<_>>>()?;
    let control = Control { trace_path, interval_ns, watch_fd, ready_fd, realtime };
    if !line_loss.is_empty() {
        let mut probe = clusterlab_atm::CellSwitch::new(model).map_err(PyValueError::new_err)?;
        probe.set_line_loss(&line_loss, loss_seed).map_err(PyValueError::new_err)?;
    }
    let cfg = RunConfig { ports, sites, fdb, model, line_loss, loss_seed, control };
    let stop = AtomicBool::new(false);
    let t = py.detach(|| run(&cfg, &stop)).map_err(|e| PyOSError::new_err(e.to_string()))?;
    let d = PyDict::new(py);
    let col = |f: fn(&clusterlab_atm::PortStats) -> u64| t.ports.iter().map(f).collect::<Vec<u64>>();
    d.set_item("frames_in", col(|s| s.frames_in))?;
    d.set_item("cells_in", col(|s| s.cells_in))?;
    d.set_item("cells_out", col(|s| s.cells_out))?;
    d.set_item("cells_dropped", col(|s| s.cells_dropped))?;
    d.set_item("cells_discarded", col(|s| s.cells_discarded))?;
    d.set_item("frames_delivered", col(|s| s.frames_delivered))?;
    d.set_item("frames_lost", col(|s| s.frames_lost))?;
    d.set_item("cells_wasted", col(|s| s.cells_wasted))?;
    d.set_item("max_queue_cells", col(|s| s.max_queue_cells as u64))?;
    d.set_item("cells_line_lost", col(|s| s.cells_line_lost))?;
    d.set_item("frames_line_lost", col(|s| s.frames_line_lost))?;
    d.set_item("frames_read", t.frames_read.clone())?;
    d.set_item("foreign_frames", t.foreign_frames)?;
    d.set_item("flooded", t.flooded)?;
    d.set_item("send_errors", t.send_errors)?;
    d.set_item("late_offers", t.late_offers)?;
    d.set_item("kernel_drops", t.kernel_drops)?;
    d.set_item("delivered", t.delivered)?;
    let read = t.frames_read.iter().sum::<u64>().max(1);
    d.set_item("read_wait_mean_ns", t.read_wait_sum_ns as f64 / read as f64)?;
    d.set_item("read_wait_max_ns", t.read_wait_max_ns)?;
    d.set_item("input_wait_mean_ns", t.input_wait_sum_ns as f64 / read as f64)?;
    d.set_item("input_wait_max_ns", t.input_wait_max_ns)?;
    let n = t.delivered.max(1) as f64;
    d.set_item("decide_lag_mean_ns", t.decide_lag_sum_ns as f64 / n)?;
    d.set_item("decide_lag_max_ns", t.decide_lag_max_ns)?;
    let mean = t.late_sum_ns as f64 / n;
    d.set_item("late_mean_ns", mean)?;
    d.set_item("late_sd_ns", (t.late_sq_sum / n - mean * mean).max(0.0).sqrt())?;
    d.set_item("late_max_ns", t.late_max_ns)?;
    d.set_item("realtime", t.realtime)?;
    d.set_item("wakeups", t.wakeups)?;
    d.set_item("send_calls", t.send_calls)?;
    d.set_item("send_seconds", t.send_ns_sum as f64 / 1e9)?;
    d.set_item("send_max_ns", t.send_ns_max)?;
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(atm_switch, m)?)
}
