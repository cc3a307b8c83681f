//! clusterlab's network engine: the TCP mesh's wire format (`wire`) and socket engine
//! (`engine`), with its bounded pool of receive buffers (`pool`). Pure Rust over libc, no Python: the binding (`clusterlab-py`, `net.rs`) only
//! converts arguments and releases the interpreter lock around the waits.
//!
//! ```
//! use clusterlab_net::engine::{Engine, Outcome};
//! use clusterlab_net::wire::{self, Kind};
//! use std::os::fd::AsRawFd;
//! use std::time::Duration;
//! let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
//! let mut e0 = Engine::new(&[(1, a.as_raw_fd())], 1 << 20);
//! let mut e1 = Engine::new(&[(0, b.as_raw_fd())], 1 << 20);
//! let mut head = [0u8; wire::MAX_HEAD];
//! let n = wire::encode(&mut head, Kind::Bytes, 5, 0, 2, b"", &[], 0);
//! e0.send(1, &head[..n], b"hi", Duration::from_secs(1)).unwrap();
//! match e1.wait(0, 5, Duration::from_secs(1)) {
//!     Outcome::Msg(src, m) => assert_eq!((src, &m.data[..]), (0, &b"hi"[..])),
//!     other => panic!("{other:?}"),
//! }
//! ```

pub mod engine;
pub mod lock;
pub mod pool;
pub mod wire;

pub use engine::{tune_malloc, Counters, Engine, Event, EventKind, Msg, Outcome, Status};
