//! The receive buffers of big payloads (`DIRECT_MIN` bytes and more): a pool with a floor that
//! is filled at once and a ceiling.
//!
//! Every received message is handed to its caller in a buffer of its own. For big payloads
//! those buffers come from this pool: anonymous mappings of whole pages, kept when freed and
//! reused, so a stream of big messages does not page-fault fresh memory for each one (what
//! glibc's heap with `tune_malloc`'s thresholds did before; it also kept, for good, the most a
//! rank ever held at once, so a rank's memory rose whenever a round left more blocks waiting
//! than ever before: issue 25's soak).
//!
//! * **The bound**, filled at once: the first time a payload of a new largest size arrives, the
//!   bound becomes two buffers of that size per peer (a round of one message from every peer,
//!   and the previous round's still held, as a loop `x = comm.recv(...)` holds the last one
//!   while it receives the next), at most `limit`, and the pool maps and touches
//!   (`MAP_POPULATE`) buffers up to it there and then. It keeps them for good.
//! * **Above the bound**, while more are held or queued at once (the engine reads ahead of a
//!   stream, up to `ROUND_BUDGET` per connection), the pool maps more and reuses them too, up
//!   to `limit` bytes in all; once none of them has been needed for `trim_after` (one second),
//!   the next take or give-back unmaps the idle ones above the bound: that memory goes back to
//!   the kernel. A buffer wanted beyond `limit` is mapped for the occasion and unmapped when
//!   freed.
//!
//! So a rank's memory for received payloads after its first big round is the bound, plus what
//! a stream or a burst needs while it lasts (at most `limit`), instead of the most it ever held.
//!
//! Buffers are `Buf`s: a byte slice that gives its memory back to where it came from when
//! dropped (the pool, the kernel, or the heap for small payloads copied out of the stage).

use std::fmt;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Pooled buffers are mappings of whole pages of this size (mmap rounds further on larger pages).
const PAGE: usize = 4096;
/// A buffer's bytes start this far into its mapping, not on a page boundary: the kernel copies
/// received data from page-aligned socket buffers, and a destination at the same offset within
/// its page (4K aliasing of loads and stores) made 4 MiB ping-pongs ~5% slower than into
/// glibc's heap chunks (16 bytes past a boundary).
const OFFSET: usize = 64;
/// Default most bytes one engine's pool keeps (lent out and idle together).
pub const POOL_LIMIT: usize = 64 << 20;
/// Buffers above the bound are unmapped once none has been needed for this long.
pub const TRIM_AFTER: Duration = Duration::from_secs(1);

/// What a pool holds, for tests and `stats()`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// bytes the pool keeps for good (two buffers of the largest payload per peer, at most the limit)
    pub bound: usize,
    /// bytes of the pool's buffers, lent out or idle (at most the limit)
    pub owned: usize,
    /// bytes of its idle buffers
    pub idle: usize,
    /// buffers mapped beyond the limit (each unmapped when freed), in total
    pub overflow: u64,
    /// bytes unmapped above the bound after `trim_after` without need, in total
    pub trimmed: u64,
    /// buffers taken from the pool (reused or new), in total
    pub taken: u64,
}

struct Inner {
    idle: Vec<(usize, usize)>, // (address, capacity) of idle buffers
    stats: PoolStats,
    last_above: Option<Instant>, // when a take last needed more than the bound
}

/// A pool of page-aligned receive buffers, shared by an engine and the buffers it lent out
/// (which may be freed on any thread).
pub struct Pool {
    inner: Mutex<Inner>,
    limit: usize,
    trim_after: Duration,
}

fn map(cap: usize, populate: bool) -> Option<NonNull<u8>> {
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | if populate { libc::MAP_POPULATE } else { 0 };
    // SAFETY: a new private anonymous mapping; no existing memory is touched.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), cap, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0) };
    if p == libc::MAP_FAILED {
        None
    } else {
        NonNull::new(p as *mut u8)
    }
}

fn unmap(addr: usize, cap: usize) {
    // SAFETY: (addr, cap) is a mapping this module made and nothing references any more.
    unsafe { libc::munmap(addr as *mut libc::c_void, cap) };
}

impl Inner {
    /// Unmap the smallest idle buffer (the least useful); false when none is idle.
    fn pop_idle(&mut self) -> bool {
        let Some(i) = self.idle.iter().enumerate().min_by_key(|(_, &(_, c))| c).map(|(i, _)| i) else { return false };
        let (addr, c) = self.idle.remove(i);
        unmap(addr, c);
        self.stats.owned -= c;
        self.stats.idle -= c;
        true
    }
}

impl Pool {
    /// A pool that keeps at most `limit` bytes (0: no pool, every buffer comes from the heap).
    pub fn new(limit: usize) -> Arc<Pool> {
        Pool::with_trim(limit, TRIM_AFTER)
    }

    /// `new` with buffers above the bound unmapped after `trim_after` without need.
    pub fn with_trim(limit: usize, trim_after: Duration) -> Arc<Pool> {
        Arc::new(Pool { inner: Mutex::new(Inner { idle: Vec::new(), stats: PoolStats::default(), last_above: None }), limit, trim_after })
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn stats(&self) -> PoolStats {
        self.lock().stats
    }

    /// Unmap idle buffers above the bound if none has been needed for `trim_after`.
    fn trim(&self, g: &mut Inner, now: Instant) {
        if g.stats.owned > g.stats.bound && g.last_above.is_none_or(|t| now.duration_since(t) >= self.trim_after) {
            let before = g.stats.owned;
            while g.stats.owned > g.stats.bound && g.pop_idle() {}
            g.stats.trimmed += (before - g.stats.owned) as u64;
        }
    }

    /// An empty buffer of capacity at least `n` for a payload from one of `peers` peers.
    pub fn take(self: &Arc<Self>, n: usize, peers: usize) -> Buf {
        let cap = (n.max(1) + OFFSET).div_ceil(PAGE) * PAGE; // the mapping's size
        if self.limit == 0 || cap > self.limit {
            return Buf::from_vec(Vec::with_capacity(n));
        }
        let now = Instant::now();
        let mut g = self.lock();
        g.stats.taken += 1;
        let want = peers.max(1).saturating_mul(2 * cap).min(self.limit);
        if want > g.stats.bound {
            // a new largest payload: the bound grows, idle buffers too small for it go, and the
            // pool fills to the bound now (kept buffers of the old size would count against the
            // bound and leave the new size to buffers mapped and trimmed over and over)
            g.stats.bound = want;
            while g.idle.iter().any(|&(_, c)| c < cap) && g.pop_idle() {}
            while g.stats.owned + cap <= g.stats.bound {
                let Some(p) = map(cap, true) else { break };
                g.idle.push((p.as_ptr() as usize, cap));
                g.stats.owned += cap;
                g.stats.idle += cap;
            }
        }
        if g.stats.owned - g.stats.idle + cap > g.stats.bound {
            g.last_above = Some(now);
        } else {
            self.trim(&mut g, now);
        }
        // the smallest idle buffer that fits, the last given back among equals (its memory is
        // the likeliest still in the CPU's caches: glibc's heap reuses the same way)
        let best = g.idle.iter().enumerate().rev().filter(|(_, &(_, c))| c >= n + OFFSET).min_by_key(|(_, &(_, c))| c).map(|(i, _)| i);
        if let Some(i) = best {
            let (addr, c) = g.idle.remove(i);
            g.stats.idle -= c;
            return Buf::mapped(addr, c, Home::Pool(self.clone()));
        }
        // idle buffers too small for this payload make room for one that fits
        while g.stats.owned + cap > self.limit && g.pop_idle() {}
        if g.stats.owned + cap <= self.limit {
            if let Some(p) = map(cap, false) {
                g.stats.owned += cap;
                return Buf::mapped(p.as_ptr() as usize, cap, Home::Pool(self.clone()));
            }
        } else {
            g.stats.overflow += 1;
        }
        drop(g);
        match map(cap, false) {
            Some(p) => Buf::mapped(p.as_ptr() as usize, cap, Home::Mapped),
            None => Buf::from_vec(Vec::with_capacity(n)),
        }
    }

    fn give_back(&self, addr: usize, cap: usize) {
        let now = Instant::now();
        let mut g = self.lock();
        g.idle.push((addr, cap));
        g.stats.idle += cap;
        self.trim(&mut g, now);
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let g = self.inner.get_mut().unwrap_or_else(|e| e.into_inner());
        for (addr, cap) in g.idle.drain(..) {
            unmap(addr, cap);
        }
    }
}

enum Home {
    Heap,
    Pool(Arc<Pool>),
    Mapped,
}

/// A received payload's bytes: `len` initialised bytes of a buffer of `cap`, given back to
/// its home (the pool, the kernel or the heap) when dropped.
pub struct Buf {
    ptr: NonNull<u8>,
    len: usize,
    cap: usize,
    home: Home,
}

// SAFETY: a Buf owns its memory exclusively; the pool it returns to is behind a Mutex.
unsafe impl Send for Buf {}
unsafe impl Sync for Buf {}

impl Buf {
    /// The buffer of the mapping (`base`, `size`): its bytes start `OFFSET` into it.
    fn mapped(base: usize, size: usize, home: Home) -> Buf {
        Buf { ptr: NonNull::new((base + OFFSET) as *mut u8).expect("mapped address"), len: 0, cap: size - OFFSET, home }
    }

    pub fn from_vec(v: Vec<u8>) -> Buf {
        let mut v = std::mem::ManuallyDrop::new(v);
        let (len, cap) = (v.len(), v.capacity());
        Buf { ptr: NonNull::new(v.as_mut_ptr()).expect("vec pointer"), len, cap, home: Home::Heap }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Whether the buffer belongs to a pool (else it goes back to the heap or the kernel).
    pub fn pooled(&self) -> bool {
        matches!(self.home, Home::Pool(_))
    }

    /// The uninitialised tail: where the next bytes go, and how many fit.
    pub fn spare(&mut self) -> (*mut u8, usize) {
        // SAFETY: len <= cap, inside the allocation.
        (unsafe { self.ptr.as_ptr().add(self.len) }, self.cap - self.len)
    }

    /// Count `n` more bytes as written.
    ///
    /// # Safety
    /// The `n` bytes after the current end were initialised and `len + n <= capacity`.
    pub unsafe fn advance(&mut self, n: usize) {
        debug_assert!(self.len + n <= self.cap);
        self.len += n;
    }

    pub fn extend_from_slice(&mut self, s: &[u8]) {
        let (p, room) = self.spare();
        assert!(s.len() <= room, "Buf overflow");
        // SAFETY: room checked; the source is another allocation.
        unsafe {
            std::ptr::copy_nonoverlapping(s.as_ptr(), p, s.len());
            self.advance(s.len());
        }
    }
}

impl Deref for Buf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: the first len bytes are initialised and owned by this Buf.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl fmt::Debug for Buf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Buf({} of {} bytes, {})", self.len, self.cap, match self.home {
            Home::Heap => "heap",
            Home::Pool(_) => "pooled",
            Home::Mapped => "mapped",
        })
    }
}

impl Drop for Buf {
    fn drop(&mut self) {
        let (addr, cap) = (self.ptr.as_ptr() as usize - OFFSET, self.cap + OFFSET); // the mapping (not for Heap)
        match std::mem::replace(&mut self.home, Home::Heap) {
            // SAFETY: ptr/len/cap came from a Vec<u8> (from_vec) that was not freed.
            Home::Heap => drop(unsafe { Vec::from_raw_parts(self.ptr.as_ptr(), self.len, self.cap) }),
            Home::Pool(p) => p.give_back(addr, cap),
            Home::Mapped => unmap(addr, cap),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_fills_to_its_bound_at_once_and_gives_back_what_is_above() {
        const B: usize = 53_248; // 50,000 bytes in whole pages
        let pool = Pool::with_trim(4 << 20, Duration::from_millis(50));
        let a = pool.take(50_000, 15); // two per peer: 30 buffers, mapped and touched now
        let s = pool.stats();
        assert_eq!((s.bound, s.owned, s.idle), (30 * B, 30 * B, 29 * B));
        // 35 held at once: 5 more above the bound, kept and reused while they are needed
        let held: Vec<Buf> = (0..34).map(|_| pool.take(50_000, 15)).chain([a]).collect();
        assert!(held.iter().all(|b| b.pooled()));
        drop(held);
        assert_eq!((pool.stats().owned, pool.stats().trimmed), (35 * B, 0), "needed just now: kept");
        drop((0..35).map(|_| pool.take(50_000, 15)).collect::<Vec<_>>());
        assert_eq!(pool.stats().owned, 35 * B, "reused, not mapped again");
        std::thread::sleep(Duration::from_millis(60));
        drop(pool.take(50_000, 15)); // not needed for 50 ms: the 5 above the bound go back
        let s = pool.stats();
        assert_eq!((s.owned, s.idle, s.trimmed), (30 * B, 30 * B, 5 * B as u64));
        // a larger payload: the bound grows to the limit, and smaller buffers make room
        let b = pool.take(200_000, 15);
        assert!(b.capacity() >= 200_000 && b.pooled());
        let s = pool.stats();
        assert_eq!(s.bound, 4 << 20);
        assert!(s.owned <= 4 << 20);
    }

    #[test]
    fn beyond_the_limit_buffers_are_mapped_for_the_occasion() {
        const B: usize = 53_248;
        let pool = Pool::new(1 << 20); // room for 19 buffers
        let held: Vec<Buf> = (0..25).map(|_| pool.take(50_000, 15)).collect();
        assert_eq!(held.iter().filter(|b| b.pooled()).count(), 19);
        let s = pool.stats();
        assert_eq!((s.bound, s.owned, s.overflow), (1 << 20, 19 * B, 6));
        drop(held);
        assert_eq!(pool.stats().owned, 19 * B, "the 6 beyond the limit were unmapped");
    }

    #[test]
    fn the_last_buffer_given_back_is_the_next_taken() {
        let pool = Pool::new(1 << 20);
        let a = pool.take(40_000, 2);
        let b = pool.take(40_000, 2);
        let pa = a.as_ptr();
        drop(b);
        drop(a);
        assert_eq!(pool.take(40_000, 2).as_ptr(), pa);
    }

    #[test]
    fn a_sweep_of_growing_sizes_reuses_its_buffers() {
        // a ping-pong sweep: each size in turn, the previous message still held while the next
        // is received; after a size's first message nothing is mapped or trimmed any more
        let pool = Pool::with_trim(64 << 20, Duration::ZERO);
        for n in [40_000, 65_536, 131_072, 1 << 20, 4 << 20] {
            let mut held = pool.take(n, 1);
            let before = pool.stats();
            for _ in 0..20 {
                held = pool.take(n, 1); // the old one goes back after the new one is taken
            }
            drop(held);
            let after = pool.stats();
            assert_eq!((after.owned, after.trimmed), (before.owned, before.trimmed), "size {n}: {before:?} -> {after:?}");
            assert!(after.owned <= after.bound, "{after:?}");
        }
    }

    #[test]
    fn buffers_hold_what_is_written() {
        let pool = Pool::new(1 << 20);
        let mut b = pool.take(40_000, 1);
        b.extend_from_slice(&[7u8; 100]);
        let (p, room) = b.spare();
        assert_eq!(room, b.capacity() - 100);
        unsafe {
            std::ptr::write_bytes(p, 9, 10);
            b.advance(10);
        }
        assert_eq!((b.len(), b[99], b[100], b[109]), (110, 7, 9, 9));
        let v = Buf::from_vec(vec![1, 2, 3]);
        assert_eq!(&v[..], &[1, 2, 3]);
        assert!(!Pool::new(0).take(40_000, 4).pooled(), "limit 0: no pool");
    }
}
