//! A WAN delay line between two Ethernet segments.
//!
//! [`line`] is the pure model (which packet is dropped, when each one leaves), [`hist`] the
//! per-interval counts by packet length, [`trace`] their text form, [`tpacket`] the lengths of
//! a capture ring's block (the monitor's histogram); [`afpacket`] and [`run`]
//! move real frames between two interfaces (Linux only). The model takes the time as an
//! argument, so its tests need no clock and no network.

pub mod hist;
pub mod line;
pub mod tpacket;
pub mod trace;

#[cfg(target_os = "linux")]
pub mod afpacket;
#[cfg(target_os = "linux")]
pub mod run;

pub use hist::Histogram;
pub use line::{Line, LineConfig, Model, Verdict};
