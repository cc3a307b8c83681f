//! `CallLock`: the exclusion between a rank's communication calls and its background reader
//! (the drainer), with a bounded wait. A futex word (Drepper's "mutex, take 2": 0 free, 1 held,
//! 2 held with waiters), so the uncontended case is one compare-and-swap to take it and one
//! swap to give it back, and a waiter sleeps in the kernel instead of spinning on a CPU the
//! holder may need. Unlike `std::sync::Mutex` it is not tied to a guard's scope: the binding
//! holds it across calls into Python (the communicator's failure policy runs under it).
//!
//! ```
//! use clusterlab_net::lock::CallLock;
//! use std::time::Duration;
//! let l = CallLock::new();
//! assert!(l.try_lock() && l.is_locked() && !l.try_lock());
//! assert!(!l.lock_for(Duration::from_millis(10)));   // held: the wait ends at its deadline
//! l.unlock();
//! assert!(l.lock_for(Duration::ZERO) && l.is_locked());
//! ```

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const FREE: u32 = 0;
const HELD: u32 = 1;
const WAITED: u32 = 2; // held, and someone may sleep on it: unlock must wake

#[derive(Debug, Default)]
pub struct CallLock {
    state: AtomicU32,
}

impl CallLock {
    pub const fn new() -> Self {
        CallLock { state: AtomicU32::new(FREE) }
    }

    /// Take the lock if it is free; never waits.
    #[inline]
    pub fn try_lock(&self) -> bool {
        self.state.compare_exchange(FREE, HELD, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    /// Take the lock, waiting at most `timeout`; whether it was taken.
    pub fn lock_for(&self, timeout: Duration) -> bool {
        if self.try_lock() {
            return true;
        }
        let deadline = Instant::now() + timeout;
        loop {
            // mark it waited-for before sleeping, so the holder's unlock wakes us
            if self.state.swap(WAITED, Ordering::Acquire) == FREE {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            futex_wait(&self.state, WAITED, deadline - now);
        }
    }

    /// Give the lock back (the caller holds it).
    #[inline]
    pub fn unlock(&self) {
        if self.state.swap(FREE, Ordering::Release) == WAITED {
            futex_wake_one(&self.state);
        }
    }

    pub fn is_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) != FREE
    }
}

/// Sleep while `*word == expect`, at most `timeout` (spurious and early wake-ups are fine: the
/// caller re-checks).
fn futex_wait(word: &AtomicU32, expect: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: FUTEX_WAIT on a live, aligned u32 with a valid relative timespec.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG, expect, &ts as *const libc::timespec);
    }
}

fn futex_wake_one(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a live, aligned u32.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    #[test]
    fn excludes_and_wakes_waiters() {
        // four threads add to a counter under the lock without atomics of their own
        let lock = Arc::new(CallLock::new());
        let total = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (lock, total) = (lock.clone(), total.clone());
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        assert!(lock.lock_for(Duration::from_secs(10)));
                        let v = total.load(Ordering::Relaxed); // a non-atomic read-modify-write
                        total.store(v + 1, Ordering::Relaxed);
                        lock.unlock();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(total.load(Ordering::Relaxed), 80_000);
        assert!(!lock.is_locked());
    }

    #[test]
    fn a_wait_is_bounded_and_a_release_ends_it_early() {
        let lock = Arc::new(CallLock::new());
        assert!(lock.try_lock());
        let t0 = Instant::now();
        assert!(!lock.lock_for(Duration::from_millis(50)));
        assert!(t0.elapsed() >= Duration::from_millis(50));
        let l2 = lock.clone();
        let waiter = std::thread::spawn(move || {
            let t = Instant::now();
            let got = l2.lock_for(Duration::from_secs(10));
            (got, t.elapsed())
        });
        std::thread::sleep(Duration::from_millis(20));
        lock.unlock();
        let (got, waited) = waiter.join().unwrap();
        assert!(got && waited < Duration::from_secs(5), "{waited:?}");
        assert!(lock.is_locked());
    }
}
