//! iSCSI initiator over libiscsi (`clusterlab.storage.iscsi`): one or more sessions
//! (connections) to one LUN, and bonnie-style sequential block loops (write, then read) run
//! with the GIL released.
//!
//! Several commands in flight: libiscsi's `*_sync` calls keep one command outstanding per
//! session, so one 64 KB command at a time waits a round trip plus the target's turn between
//! blocks and cannot fill a link. An `IscsiLun` opened with `connections = k` logs in k
//! sessions (same initiator name, distinct ISIDs) and stripes every block loop over them:
//! session j moves blocks j, j+k, j+2k, ... from its own thread, so k commands are in flight,
//! as a kernel initiator with queue depth k would have.
//!
//! libiscsi is loaded at run time (dlopen of `libiscsi.so.7`, Debian package libiscsi7 /
//! libiscsi-dev), not linked at build time: the extension builds and imports on machines
//! without it, and only opening a LUN says that the library is missing. The few functions used
//! are declared here by hand from `iscsi/iscsi.h` (API version 20170105); data moves through
//! the `*_iov_sync` calls straight into and out of our buffers, so no libiscsi struct other
//! than `scsi_task.status` (its first field) and `scsi_readcapacity16` (first two) is read.

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;
use std::time::Instant;

const ISCSI_SESSION_NORMAL: c_int = 2;
const ISCSI_HEADER_DIGEST_NONE: c_int = 0;
const SCSI_STATUS_GOOD: c_int = 0;
/// Largest transfer in one SCSI command (tgt's default MaxBurstLength is 256 KiB; larger
/// blocks are split so that one "block" of the benchmark may be any size).
const MAX_XFER: usize = 4 << 20;

#[repr(C)]
struct ScsiIovec {
    base: *mut c_void,
    len: usize,
}

#[repr(C)]
struct ReadCapacity16 {
    returned_lba: u64,
    block_length: u32,
}

type Ctx = *mut c_void;
type Task = *mut c_void;

struct Lib {
    create_context: unsafe extern "C" fn(*const c_char) -> Ctx,
    destroy_context: unsafe extern "C" fn(Ctx) -> c_int,
    set_targetname: unsafe extern "C" fn(Ctx, *const c_char) -> c_int,
    set_session_type: unsafe extern "C" fn(Ctx, c_int) -> c_int,
    set_header_digest: unsafe extern "C" fn(Ctx, c_int) -> c_int,
    set_timeout: unsafe extern "C" fn(Ctx, c_int) -> c_int,
    set_isid_random: unsafe extern "C" fn(Ctx, u32, u32) -> c_int,
    full_connect_sync: unsafe extern "C" fn(Ctx, *const c_char, c_int) -> c_int,
    logout_sync: unsafe extern "C" fn(Ctx) -> c_int,
    get_error: unsafe extern "C" fn(Ctx) -> *const c_char,
    readcapacity16_sync: unsafe extern "C" fn(Ctx, c_int) -> Task,
    #[allow(clippy::type_complexity)]
    read16_iov_sync: unsafe extern "C" fn(
        Ctx, c_int, u64, u32, c_int, c_int, c_int, c_int, c_int, c_int, *mut ScsiIovec, c_int,
    ) -> Task,
    #[allow(clippy::type_complexity)]
    write16_iov_sync: unsafe extern "C" fn(
        Ctx, c_int, u64, *mut u8, u32, c_int, c_int, c_int, c_int, c_int, c_int, *mut ScsiIovec, c_int,
    ) -> Task,
    datain_unmarshall: unsafe extern "C" fn(Task) -> *mut c_void,
    free_task: unsafe extern "C" fn(Task),
}

/// A symbol's address as the function-pointer type `F` of the field it fills.
///
/// # Safety
/// `p` must be the address of a function whose C signature is `F`.
unsafe fn fn_ptr<F: Copy>(p: *mut c_void) -> F {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) }
}

fn load() -> Result<Lib, String> {
    let mut handle = std::ptr::null_mut();
    for name in [c"libiscsi.so.7", c"libiscsi.so"] {
        // SAFETY: dlopen with a NUL-terminated name; the handle is never closed (kept for the process).
        handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if !handle.is_null() {
            break;
        }
    }
    if handle.is_null() {
        return Err("libiscsi is not installed (Debian: apt-get install libiscsi7, or `make system-deps` as root)".into());
    }
    macro_rules! sym {
        ($name:literal) => {{
            // SAFETY: the symbol's type is the one declared in iscsi.h / scsi-lowlevel.h.
            let p = unsafe { libc::dlsym(handle, concat!($name, "\0").as_ptr() as *const c_char) };
            if p.is_null() {
                return Err(format!("libiscsi lacks {} (too old?)", $name));
            }
            unsafe { fn_ptr(p) }
        }};
    }
    Ok(Lib {
        create_context: sym!("iscsi_create_context"),
        destroy_context: sym!("iscsi_destroy_context"),
        set_targetname: sym!("iscsi_set_targetname"),
        set_session_type: sym!("iscsi_set_session_type"),
        set_header_digest: sym!("iscsi_set_header_digest"),
        set_timeout: sym!("iscsi_set_timeout"),
        set_isid_random: sym!("iscsi_set_isid_random"),
        full_connect_sync: sym!("iscsi_full_connect_sync"),
        logout_sync: sym!("iscsi_logout_sync"),
        get_error: sym!("iscsi_get_error"),
        readcapacity16_sync: sym!("iscsi_readcapacity16_sync"),
        read16_iov_sync: sym!("iscsi_read16_iov_sync"),
        write16_iov_sync: sym!("iscsi_write16_iov_sync"),
        datain_unmarshall: sym!("scsi_datain_unmarshall"),
        free_task: sym!("scsi_free_scsi_task"),
    })
}

fn lib() -> PyResult<&'static Lib> {
    static LIB: OnceLock<Result<Lib, String>> = OnceLock::new();
    LIB.get_or_init(load).as_ref().map_err(|e| PyOSError::new_err(e.clone()))
}

/// The session: only ever used by one thread at a time (methods take `&mut self`).
struct Session {
    lib: &'static Lib,
    ctx: Ctx,
    lun: c_int,
    block_length: u32,
    blocks: u64,
}

// SAFETY: a libiscsi context has no thread affinity; PyO3's borrow checking gives one user at a time.
unsafe impl Send for Session {}
// SAFETY: every IscsiLun method that uses the session takes `&mut self`, so PyO3's borrow flag
// admits one caller at a time; no `&Session` is shared by two threads at once.
unsafe impl Sync for Session {}

impl Session {
    fn error(&self, what: &str) -> String {
        // SAFETY: ctx is live; iscsi_get_error returns a NUL-terminated string owned by ctx.
        let msg = unsafe { CStr::from_ptr((self.lib.get_error)(self.ctx)) };
        format!("{what}: {}", msg.to_string_lossy())
    }

    /// Run one SCSI command, check its status, free it.
    fn command(&self, what: &str, task: Task) -> Result<(), String> {
        if task.is_null() {
            return Err(self.error(what));
        }
        // SAFETY: status is the first field (int) of struct scsi_task.
        let status = unsafe { *(task as *const c_int) };
        unsafe { (self.lib.free_task)(task) };
        if status != SCSI_STATUS_GOOD {
            return Err(self.error(&format!("{what} (SCSI status {status:#x})")));
        }
        Ok(())
    }

    fn xfer(&self, write: bool, offset: u64, buf: &mut [u8]) -> Result<(), String> {
        let bl = self.block_length as u64;
        let mut done = 0usize;
        while done < buf.len() {
            let n = (buf.len() - done).min(MAX_XFER);
            let lba = (offset + done as u64) / bl;
            let mut iov = ScsiIovec { base: buf[done..].as_mut_ptr() as *mut c_void, len: n };
            // SAFETY: iov points at n live bytes of buf; libiscsi reads/writes exactly n bytes.
            let task = unsafe {
                if write {
                    (self.lib.write16_iov_sync)(self.ctx, self.lun, lba, std::ptr::null_mut(), n as u32,
                                                self.block_length as c_int, 0, 0, 0, 0, 0, &mut iov, 1)
                } else {
                    (self.lib.read16_iov_sync)(self.ctx, self.lun, lba, n as u32, self.block_length as c_int,
                                               0, 0, 0, 0, 0, &mut iov, 1)
                }
            };
            self.command(if write { "WRITE(16)" } else { "READ(16)" }, task)?;
            done += n;
        }
        Ok(())
    }

    fn check_region(&self, offset: u64, len: u64) -> Result<(), String> {
        let bl = self.block_length as u64;
        let size = self.blocks * bl;
        if !offset.is_multiple_of(bl) || !len.is_multiple_of(bl) {
            return Err(format!("offset {offset} and length {len} must be multiples of the LUN's block size {bl}"));
        }
        if offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(format!("region {offset}+{len} is beyond the LUN's {size} bytes"));
        }
        Ok(())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: ctx is live and dropped once; logout may fail on a dead link (bounded by the timeout).
        unsafe {
            (self.lib.logout_sync)(self.ctx);
            (self.lib.destroy_context)(self.ctx);
        }
    }
}

/// Pattern of block `index` (offset-derived, seeded): every block differs, so a read that
/// returns another block's data or stale data is caught. splitmix64 over 8-byte words.
fn pattern_word(seed: u64, pos: u64) -> u64 {
    let mut z = seed ^ pos.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn fill_pattern(buf: &mut [u8], seed: u64, offset: u64) {
    for (i, chunk) in buf.chunks_mut(8).enumerate() {
        let z = pattern_word(seed, offset + 8 * i as u64);
        chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
    }
}

/// Whether `buf` (read from byte `offset`) differs from the pattern of `seed` there.
fn pattern_differs(buf: &[u8], seed: u64, offset: u64) -> bool {
    buf.chunks(8).enumerate().any(|(i, chunk)| chunk != &pattern_word(seed, offset + 8 * i as u64).to_le_bytes()[..chunk.len()])
}

/// Log in one session to LUN `lun` of `target` at `portal`; `isid` tells the sessions of one
/// initiator apart (the target sees one I_T nexus per ISID).
fn connect(lib: &'static Lib, portal: &CStr, target: &CStr, lun: i32, initiator: &CStr, timeout: i32, isid: u32)
    -> Result<Session, String> {
    // SAFETY: arguments are NUL-terminated; ctx is checked before use and owned by Session.
    let ctx = unsafe { (lib.create_context)(initiator.as_ptr()) };
    if ctx.is_null() {
        return Err("iscsi_create_context failed".to_string());
    }
    let mut s = Session { lib, ctx, lun, block_length: 0, blocks: 0 };
    let (portal_s, target_s) = (portal.to_string_lossy(), target.to_string_lossy());
    unsafe {
        (lib.set_targetname)(ctx, target.as_ptr());
        (lib.set_session_type)(ctx, ISCSI_SESSION_NORMAL);
        (lib.set_header_digest)(ctx, ISCSI_HEADER_DIGEST_NONE);
        (lib.set_timeout)(ctx, timeout);
        (lib.set_isid_random)(ctx, isid & 0x00ff_ffff, 0);
        if (lib.full_connect_sync)(ctx, portal.as_ptr(), lun) != 0 {
            return Err(s.error(&format!("login to {target_s} at {portal_s} (LUN {lun})")));
        }
        let task = (lib.readcapacity16_sync)(ctx, lun);
        if task.is_null() || *(task as *const c_int) != SCSI_STATUS_GOOD {
            if !task.is_null() {
                (lib.free_task)(task);
            }
            return Err(s.error("READ CAPACITY(16)"));
        }
        let rc = (lib.datain_unmarshall)(task) as *const ReadCapacity16;
        if rc.is_null() {
            (lib.free_task)(task);
            return Err("READ CAPACITY(16): reply could not be decoded".to_string());
        }
        s.block_length = (*rc).block_length;
        s.blocks = (*rc).returned_lba + 1;
        (lib.free_task)(task);
    }
    if s.block_length == 0 {
        return Err("the LUN reports a block size of 0".to_string());
    }
    Ok(s)
}

/// Run `per_block(session, byte offset, buffer)` over the `block`-byte blocks of
/// `offset..offset+size`, session j taking blocks j, j+k, ... from its own thread (one thread
/// and no spawning when k = 1). Each thread has its own `block`-byte buffer. Returns the sum of
/// what `per_block` returned, or the first error.
fn striped<F>(sessions: &[Session], offset: u64, size: u64, block: u64, per_block: F) -> Result<u64, String>
where
    F: Fn(&Session, u64, &mut [u8]) -> Result<u64, String> + Sync,
{
    let k = sessions.len() as u64;
    let nblocks = size / block;
    let run = |j: u64| -> Result<u64, String> {
        let s = &sessions[j as usize];
        let mut buf = vec![0u8; block as usize];
        let mut sum = 0;
        let mut b = j;
        while b < nblocks {
            sum += per_block(s, offset + b * block, &mut buf)?;
            b += k;
        }
        Ok(sum)
    };
    if k == 1 {
        return run(0);
    }
    std::thread::scope(|sc| {
        let handles: Vec<_> = (0..k).map(|j| sc.spawn(move || run(j))).collect();
        let mut total = 0;
        let mut first_err = None;
        for h in handles {
            match h.join().unwrap_or_else(|_| Err("an initiator thread panicked".to_string())) {
                Ok(n) => total += n,
                Err(e) => first_err = first_err.or(Some(e)),
            }
        }
        first_err.map_or(Ok(total), Err)
    })
}

/// `per_block(session, byte offset)` over the `block`-byte blocks of `offset..offset+size`,
/// striped over the sessions as `striped` does, for callers that bring their own memory.
fn striped_into<F>(sessions: &[Session], offset: u64, size: u64, block: u64, per_block: F) -> Result<(), String>
where
    F: Fn(&Session, u64) -> Result<(), String> + Sync,
{
    striped(sessions, offset, size, block, |s, pos, _buf: &mut [u8]| per_block(s, pos).map(|()| 0)).map(|_| ())
}

/// One initiator's sessions to one LUN of an iSCSI target (tgt). Not shared between threads.
#[pyclass(module = "clusterlab._core", name = "IscsiLun")]
pub struct IscsiLun {
    sessions: Vec<Session>,
}

impl IscsiLun {
    fn session(&self) -> PyResult<&Session> {
        self.sessions.first().ok_or_else(|| PyValueError::new_err("the iSCSI session is closed"))
    }
}

#[pymethods]
impl IscsiLun {
    /// Log in to `target` (IQN) at `portal` ("addr:port") as `initiator` and open LUN `lun`
    /// over `connections` sessions (1..=64: that many commands in flight in the block loops).
    /// `timeout` (whole seconds, >= 1) bounds every command and the login.
    #[new]
    #[pyo3(signature = (portal, target, lun, initiator, timeout=30, connections=1))]
    fn new(py: Python<'_>, portal: &str, target: &str, lun: i32, initiator: &str, timeout: i32, connections: u32)
        -> PyResult<Self> {
        if timeout < 1 {
            return Err(PyValueError::new_err(format!("timeout must be at least 1 s, got {timeout}")));
        }
        if !(1..=64).contains(&connections) {
            return Err(PyValueError::new_err(format!("connections must be 1..64, got {connections}")));
        }
        let lib = lib()?;
        let cstr = |s: &str, what: &str| {
            CString::new(s).map_err(|_| PyValueError::new_err(format!("{what} contains a NUL byte")))
        };
        let (portal_c, target_c, init_c) = (cstr(portal, "portal")?, cstr(target, "target")?, cstr(initiator, "initiator")?);
        // ISIDs: distinct per session of this process (a hash of pid, time and index).
        let base = std::process::id().wrapping_mul(0x9E37_79B9)
            ^ std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let res: Result<Vec<Session>, String> = py.detach(|| {
            let mut sessions = Vec::new();
            for j in 0..connections {
                // on an error the sessions already opened are logged out when `sessions` drops
                sessions.push(connect(lib, &portal_c, &target_c, lun, &init_c, timeout, base.wrapping_add(j))?);
            }
            Ok(sessions)
        });
        res.map(|sessions| IscsiLun { sessions }).map_err(PyOSError::new_err)
    }

    /// Bytes per logical block of the LUN.
    #[getter]
    fn block_length(&self) -> PyResult<u32> {
        Ok(self.session()?.block_length)
    }

    /// Size of the LUN in bytes.
    #[getter]
    fn size(&self) -> PyResult<u64> {
        let s = self.session()?;
        Ok(s.blocks * s.block_length as u64)
    }

    /// Sessions (commands in flight in the block loops).
    #[getter]
    fn connections(&self) -> usize {
        self.sessions.len()
    }

    /// Write `data` at byte `offset` (both multiples of the block length).
    fn write(&mut self, py: Python<'_>, offset: u64, data: &[u8]) -> PyResult<()> {
        let s = self.session()?;
        s.check_region(offset, data.len() as u64).map_err(PyValueError::new_err)?;
        let mut buf = data.to_vec();
        py.detach(|| s.xfer(true, offset, &mut buf)).map_err(PyOSError::new_err)
    }

    /// Read `length` bytes at byte `offset` (both multiples of the block length) in
    /// `block`-byte READ(16) commands striped over the sessions (0: one command per 4 MiB).
    #[pyo3(signature = (offset, length, block=0))]
    fn read<'py>(&mut self, py: Python<'py>, offset: u64, length: u64, block: u64) -> PyResult<Bound<'py, PyBytes>> {
        let s = self.session()?;
        s.check_region(offset, length).map_err(PyValueError::new_err)?;
        if block != 0 && (!block.is_multiple_of(s.block_length as u64) || block > MAX_XFER as u64) {
            return Err(PyValueError::new_err(format!(
                "block must be a multiple of the LUN's block size ({}) up to {MAX_XFER}, got {block}", s.block_length)));
        }
        // The data goes straight from libiscsi into the bytes object handed back: no buffer
        // per block, no copy into Python afterwards (the object is not shared until returned).
        let sessions = &self.sessions;
        PyBytes::new_with(py, length as usize, |out: &mut [u8]| {
            py.detach(|| -> Result<(), String> {
                if block == 0 || length <= block {
                    return s.xfer(false, offset, out);
                }
                // Whole blocks striped over the sessions (each thread reads into its own blocks of
                // `out` through a shared base pointer: the blocks are disjoint), then the tail.
                let whole = length / block * block;
                let base = out.as_mut_ptr() as usize;
                striped_into(sessions, offset, whole, block, |s, pos| {
                    // SAFETY: pos-offset..+block lies inside `out` (whole <= length) and no other
                    // thread touches these bytes (each block belongs to exactly one session).
                    let dst = unsafe {
                        std::slice::from_raw_parts_mut((base as *mut u8).add((pos - offset) as usize), block as usize)
                    };
                    s.xfer(false, pos, dst)
                })?;
                if whole < length {
                    s.xfer(false, offset + whole, &mut out[whole as usize..])?;
                }
                Ok(())
            })
            .map_err(PyOSError::new_err)
        })
    }

    /// Sequential write of `size` bytes from `offset` in `block`-byte commands, each block
    /// filled with the seeded pattern, striped over the sessions. Returns (bytes, seconds).
    fn write_sequential(&mut self, py: Python<'_>, offset: u64, size: u64, block: u64, seed: u64) -> PyResult<(u64, f64)> {
        check_loop(self.session()?, offset, size, block)?;
        let sessions = &self.sessions;
        py.detach(|| {
            let t = Instant::now();
            striped(sessions, offset, size, block, |s, pos, buf| {
                fill_pattern(buf, seed, pos);
                s.xfer(true, pos, buf).map(|_| 0)
            })?;
            Ok::<_, String>((size, t.elapsed().as_secs_f64()))
        })
        .map_err(PyOSError::new_err)
    }

    /// Sequential read of `size` bytes from `offset` in `block`-byte commands striped over the
    /// sessions, each block compared with the seeded pattern as it arrives (in the timed loop:
    /// ~20 us per 64 KB, overlapping the other sessions' transfers). Returns (bytes, seconds,
    /// blocks that differ).
    fn read_sequential(&mut self, py: Python<'_>, offset: u64, size: u64, block: u64, seed: u64) -> PyResult<(u64, f64, u64)> {
        check_loop(self.session()?, offset, size, block)?;
        let sessions = &self.sessions;
        py.detach(|| {
            let t = Instant::now();
            let bad = striped(sessions, offset, size, block, |s, pos, buf| {
                s.xfer(false, pos, buf)?;
                Ok(u64::from(pattern_differs(buf, seed, pos)))
            })?;
            Ok::<_, String>((size, t.elapsed().as_secs_f64(), bad))
        })
        .map_err(PyOSError::new_err)
    }

    /// Log out and release the sessions (also done when the object is dropped).
    fn close(&mut self, py: Python<'_>) {
        let sessions = std::mem::take(&mut self.sessions);
        py.detach(move || drop(sessions));
    }
}

fn check_loop(s: &Session, offset: u64, size: u64, block: u64) -> PyResult<()> {
    if block == 0 || !block.is_multiple_of(s.block_length as u64) || !size.is_multiple_of(block) {
        return Err(PyValueError::new_err(format!(
            "block ({block}) must be a positive multiple of the LUN's block size ({}) and divide size ({size})",
            s.block_length
        )));
    }
    if block > 1 << 30 {
        return Err(PyValueError::new_err(format!("block must be at most 1 GiB, got {block}")));
    }
    s.check_region(offset, size).map_err(PyValueError::new_err)
}

/// The same seeded pattern in a local file, so the local baseline runs the identical block
/// loop: (bytes, seconds) of a sequential write (with fsync) or a read of `path`. `direct`:
/// open with O_DIRECT (the disk, not the page cache, serves every block; `block` a multiple of
/// 4096), as a throttled disk's baseline must, since a block-I/O limit sees only what reaches it.
#[pyfunction]
#[pyo3(signature = (path, size, block, seed, write, direct=false))]
fn local_sequential(py: Python<'_>, path: &str, size: u64, block: u64, seed: u64, write: bool, direct: bool) -> PyResult<(u64, f64, u64)> {
    use std::io::{Read, Write};
    use std::os::unix::fs::OpenOptionsExt;
    const ALIGN: usize = 4096;
    if block == 0 || !size.is_multiple_of(block) || block > 1 << 30 {
        return Err(PyValueError::new_err(format!("block ({block}) must be positive, at most 1 GiB, and divide size ({size})")));
    }
    if direct && !block.is_multiple_of(ALIGN as u64) {
        return Err(PyValueError::new_err(format!("with direct I/O block ({block}) must be a multiple of {ALIGN}")));
    }
    py.detach(|| -> std::io::Result<(u64, f64, u64)> {
        // O_DIRECT wants the buffer aligned: an aligned window of a slightly larger vector
        let mut v = vec![0u8; block as usize + ALIGN];
        let off = v.as_ptr().align_offset(ALIGN);
        let buf = &mut v[off..off + block as usize];
        let flags = if direct { libc::O_DIRECT } else { 0 };
        let t = Instant::now();
        let mut bad = 0u64;
        if write {
            let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).custom_flags(flags).open(path)?;
            let mut pos = 0;
            while pos < size {
                fill_pattern(buf, seed, pos);
                f.write_all(buf)?;
                pos += block;
            }
            f.sync_all()?;
            return Ok((size, t.elapsed().as_secs_f64(), 0));
        }
        let mut f = std::fs::OpenOptions::new().read(true).custom_flags(flags).open(path)?;
        let mut secs = 0.0;
        let mut pos = 0;
        while pos < size {
            let t = Instant::now();
            f.read_exact(buf)?;
            secs += t.elapsed().as_secs_f64();
            bad += u64::from(pattern_differs(buf, seed, pos));
            pos += block;
        }
        Ok((size, secs, bad))
    })
    .map_err(|e| PyOSError::new_err(format!("{path}: {e}")))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<IscsiLun>()?;
    m.add_function(wrap_pyfunction!(local_sequential, m)?)?;
    Ok(())
}
