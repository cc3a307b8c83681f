//! Raw Ethernet frames in and out of one interface (AF_PACKET, SOCK_RAW), non-blocking.
//!
//! Measured against TUN (the Python line): a packet socket on each side of a router
//! namespace needs no addresses, routes or ARP there (the line is a transparent L2 segment,
//! so the sites keep one subnet), and it reads a whole frame per system call as TUN does.
//! `PACKET_IGNORE_OUTGOING` keeps the frames we write from being read back.
//!
//! `PACKET_VNET_HDR`: every frame comes with a 10-byte virtio-net header, which goes back out
//! unchanged with it. A frame from a veth usually has its TCP/UDP checksum still to be
//! computed (checksum offload); the header carries that state across the line, so the far
//! host accepts the frame as it would from its own veth (without it, it drops the frame as
//! corrupt).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
pub const PACKET_VNET_HDR: libc::c_int = 15;
/// Bytes of `struct virtio_net_hdr` in front of every frame read or written.
pub const VNET_HDR_LEN: usize = 10;

/// A libc return code as a Result naming `what` failed (shared with clusterlab-atm's socket).
pub fn cvt(rc: libc::c_int, what: &str) -> io::Result<libc::c_int> {
    if rc < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
    }
    Ok(rc)
}

/// setsockopt of one int.
pub fn setopt(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int, what: &str) -> io::Result<()> {
    // SAFETY: value is a live c_int and its size is passed.
    let rc = unsafe {
        libc::setsockopt(fd, level, name, &value as *const libc::c_int as *const libc::c_void,
                         std::mem::size_of::<libc::c_int>() as libc::socklen_t)
    };
    cvt(rc, what).map(|_| ())
}

/// A packet socket bound to one interface.
pub struct Port {
    fd: OwnedFd,
    pub name: String,
}

impl Port {
    /// Open interface `name` (in the calling thread's network namespace). `buffer`: socket
    /// receive and send buffer in bytes (forced past rmem_max; needs CAP_NET_ADMIN).
    pub fn open(name: &str, buffer: usize) -> io::Result<Port> {
        let cname = CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name has a NUL"))?;
        // SAFETY: plain libc calls with valid arguments; the fd is owned right after.
        let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if index == 0 {
            return Err(io::Error::new(io::ErrorKind::NotFound, format!("no interface {name} in this namespace")));
        }
        let proto = (libc::ETH_P_ALL as u16).to_be();
        let raw = cvt(unsafe {
            libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, proto as libc::c_int)
        }, "socket(AF_PACKET) (needs root)")?;
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        sll.sll_ifindex = index as i32;
        let buf = buffer.min(i32::MAX as usize) as libc::c_int;
        setopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, buf, "SO_RCVBUFFORCE")?;
        setopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, buf, "SO_SNDBUFFORCE")?;
        setopt(raw, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1, "PACKET_IGNORE_OUTGOING (Linux >= 4.20)")?;
        setopt(raw, libc::SOL_PACKET, PACKET_VNET_HDR, 1, "PACKET_VNET_HDR")?;
        setopt(raw, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1, "SO_TIMESTAMPNS")?;
        cvt(unsafe {
            libc::bind(raw, &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                       std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t)
        }, &format!("bind to {name}"))?;
        Ok(Port { fd, name: name.to_string() })
    }

    /// One frame (after its virtio-net header) into `buf`: the length of both and when the
    /// kernel received it (CLOCK_REALTIME ns, 0 if unknown), or None when nothing is waiting.
    /// The kernel's time, not ours: a line that woke late still counts the delay from arrival.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<(usize, u64)>> {
        let mut iov = libc::iovec { iov_base: buf.as_mut_ptr() as *mut libc::c_void, iov_len: buf.len() };
        let mut cbuf = [0u64; 8];
        // SAFETY: msghdr points at live iov and cbuf for the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&cbuf) as _;
        let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
                _ => Err(e),
            };
        }
        let mut stamp = 0u64;
        // SAFETY: walking the control messages the kernel wrote into cbuf.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                    stamp = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        Ok(Some((n as usize, stamp)))
    }

    /// Write one frame (virtio-net header first); false when the interface refused it (counted as a loss by the caller).
    pub fn send(&self, frame: &[u8]) -> bool {
        // SAFETY: frame is valid for frame.len() bytes.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr() as *const libc::c_void, frame.len(), libc::MSG_DONTWAIT) };
        n == frame.len() as isize
    }
}

impl Port {
    /// Write several frames with one system call (`sendmmsg`); returns how many the interface
    /// took (a refused frame is skipped and the rest still sent; the caller counts the losses).
    pub fn send_many(&self, frames: &[&[u8]]) -> usize {
        if frames.len() == 1 {
            return usize::from(self.send(frames[0]));
        }
        let mut iovs: Vec<libc::iovec> = frames.iter()
            .map(|f| libc::iovec { iov_base: f.as_ptr() as *mut libc::c_void, iov_len: f.len() }).collect();
        // SAFETY: each mmsghdr points at one live iovec; nothing else is set.
        let mut msgs: Vec<libc::mmsghdr> = iovs.iter_mut().map(|iov| {
            let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
            m.msg_hdr.msg_iov = iov;
            m.msg_hdr.msg_iovlen = 1;
            m
        }).collect();
        let (mut done, mut refused) = (0usize, 0usize);
        while done < msgs.len() {
            // SAFETY: msgs[done..] are valid mmsghdrs for the call.
            let n = unsafe {
                libc::sendmmsg(self.fd.as_raw_fd(), msgs[done..].as_mut_ptr(), (msgs.len() - done) as libc::c_uint,
                               libc::MSG_DONTWAIT)
            };
            if n <= 0 {
                done += 1;
                refused += 1;
                continue;
            }
            done += n as usize;
        }
        done - refused
    }
}

impl AsRawFd for Port {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
