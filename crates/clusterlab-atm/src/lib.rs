//! An ATM cell switch for the testbed.
//!
//! [`cell`] is the pure model (which cells of which frames an output port drops, when each
//! frame's last cell leaves); [`sock`] and [`run`] move real Ethernet frames between a testbed's
//! host links through it (Linux only). The model takes the time as an argument, so its tests
//! need no clock and no network; `tests/reference.rs` checks it against a brute-force
//! simulation of the same rules. [`line`] is the WAN line's cell model (a
//! `clusterlab_wan::Model`, run by the WAN line's loop): the same AAL5 arithmetic on one queue per
//! direction, checked by `tests/reference_line.rs` against cell-by-cell AAL5 reassembly.

pub mod cell;
pub mod line;

#[cfg(target_os = "linux")]
pub mod sock;
#[cfg(target_os = "linux")]
pub mod run;

pub use cell::{cells_for, CellSwitch, Discard, Outcome, PortStats, SwitchConfig};
pub use line::{CellLine, CellLineConfig};
