//! The WAN delay line (clusterlab-wan): run it in the calling thread with the GIL released
//! until the watched descriptor closes. The testbed starts it in the router namespace.

use clusterlab_atm::cell::Discard;
use clusterlab_atm::{CellLine, CellLineConfig};
use clusterlab_wan::run::{run, run_model, Control, RunConfig};
use clusterlab_wan::LineConfig;
use numpy::PyReadonlyArray1;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::atomic::AtomicBool;

/// Move frames between `iface_a` and `iface_b` with the line's delay, rate and queue; returns
/// per-direction totals (packets, bytes, drops, send_errors, delivered; late_mean_ns, late_sd_ns,
/// late_max_ns: departure minus due time, negative when early).
///
/// `limit_cells` given: the line carries AAL5 cells (clusterlab-atm's `CellLine`): `rate_bps` is
/// the rate of its 53-byte cells, its queue `limit_cells` cells (`limit_bytes` unused), and the
/// totals add per direction frames_lost, cells_in, cells_out, cells_dropped, cells_wasted
/// (cells of lost frames that used the line), cells_discarded (by the discard policy) and
/// max_queue_cells. With cells, `discard` is `none`, `ppd` or `epd` (`epd_threshold` cells), and
/// `arrival_rate_bps` the rate at which a frame's cells enter the queue (0: at once).
#[pyfunction]
#[pyo3(signature = (iface_a, iface_b, rate_bps, delay_ns, limit_bytes, shared=false, trace_path=None,
                    interval_ns=100_000_000, watch_fd=-1, ready_fd=-1, realtime=true, limit_cells=None,
                    discard="none", epd_threshold=0, arrival_rate_bps=0.0))]
#[allow(clippy::too_many_arguments)]
fn wan_delay_line<'py>(py: Python<'py>, iface_a: String, iface_b: String, rate_bps: f64, delay_ns: u64,
                       limit_bytes: u64, shared: bool, trace_path: Option<String>, interval_ns: u64, watch_fd: i32,
                       ready_fd: i32, realtime: bool, limit_cells: Option<u32>, discard: &str, epd_threshold: u32,
                       arrival_rate_bps: f64) -> PyResult<Bound<'py, PyDict>> {
    let discard = match discard {
        "none" => Discard::None,
        "ppd" => Discard::Ppd,
        "epd" => Discard::Epd { threshold: epd_threshold },
        other => return Err(PyValueError::new_err(format!("discard {other:?}: accepted none, ppd, epd"))),
    };
    if limit_cells.is_none() && discard != Discard::None {
        return Err(PyValueError::new_err("discard is the cell line's: give limit_cells"));
    }
    let control = Control { trace_path, interval_ns, watch_fd, ready_fd, realtime };
    let ifaces = [iface_a, iface_b];
    let stop = AtomicBool::new(false);
    let mut cells = None;
    let t = if let Some(limit_cells) = limit_cells {
        let mut line = CellLine::new(CellLineConfig { arrival_rate_bps, discard, ..CellLineConfig::new(rate_bps, delay_ns, limit_cells, shared) })
            .map_err(PyValueError::new_err)?;
        let t = py.detach(|| run_model(&ifaces, &control, &mut line, &stop)).map_err(|e| PyOSError::new_err(e.to_string()))?;
        cells = Some([line.stats(0), line.stats(1)]);
        t
    } else {
        let line = LineConfig { rate_bps, delay_ns, limit_bytes, shared };
        if let Some(why) = line.why_not() {
            return Err(PyValueError::new_err(why));
        }
        let cfg = RunConfig { ifaces, line, control };
        py.detach(|| run(&cfg, &stop)).map_err(|e| PyOSError::new_err(e.to_string()))?
    };
    let d = PyDict::new(py);
    if let Some(s) = cells {
        d.set_item("frames_lost", s.map(|s| s.frames_lost).to_vec())?;
        d.set_item("cells_in", s.map(|s| s.cells_in).to_vec())?;
        d.set_item("cells_out", s.map(|s| s.cells_out).to_vec())?;
        d.set_item("cells_dropped", s.map(|s| s.cells_dropped).to_vec())?;
        d.set_item("cells_wasted", s.map(|s| s.cells_wasted).to_vec())?;
        d.set_item("cells_discarded", s.map(|s| s.cells_discarded).to_vec())?;
        d.set_item("max_queue_cells", s.map(|s| s.max_queue_cells).to_vec())?;
    }
    d.set_item("packets", t.packets.to_vec())?;
    d.set_item("bytes", t.bytes.to_vec())?;
    d.set_item("drops", t.drops.to_vec())?;
    d.set_item("send_errors", t.send_errors.to_vec())?;
    d.set_item("delivered", t.delivered.to_vec())?;
    d.set_item("delivered_bytes", t.delivered_bytes.to_vec())?;
    let n = |i: usize| t.delivered[i].max(1) as f64;
    let mean: Vec<f64> = (0..2).map(|i| t.late_sum_ns[i] as f64 / n(i)).collect();
    let sd: Vec<f64> = (0..2).map(|i| (t.late_sq_sum[i] / n(i) - mean[i] * mean[i]).max(0.0).sqrt()).collect();
    d.set_item("late_mean_ns", mean)?;
    d.set_item("late_sd_ns", sd)?;
    d.set_item("late_max_ns", t.late_max_ns.to_vec())?;
    d.set_item("realtime", t.realtime)?;
    d.set_item("wakeups", t.wakeups)?;
    d.set_item("send_calls", t.send_calls)?;
    Ok(d)
}

/// `(ifindex, bucket, packets, bytes)` of the `num` packets from byte `first` of one block of a
/// TPACKET_V3 capture ring (`clusterlab.monitor.capture`'s counting thread: a Python loop per
/// packet took 8.5x the CPU).
#[pyfunction]
fn tpacket_block_counts(block: PyReadonlyArray1<'_, u8>, first: usize, num: u32) -> PyResult<Vec<(i32, u32, u64, u64)>> {
    clusterlab_wan::tpacket::block_counts(block.as_slice()?, first, num).map_err(PyValueError::new_err)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(wan_delay_line, m)?)?;
    m.add_function(wrap_pyfunction!(tpacket_block_counts, m)?)
}
