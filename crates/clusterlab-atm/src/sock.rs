//! One packet socket for every port of the switch: AF_PACKET, SOCK_RAW, bound to no
//! interface, so that one `recvmmsg` reads what arrived on any port (each frame's interface is
//! in its address) and one `sendmmsg` writes frames to several ports (each message addressed
//! to its interface). A switch of 100 ports then costs one descriptor and a few system calls per
//! batch, not one `poll` entry and one call per port.
//!
//! As the WAN line's ports (`clusterlab_wan::afpacket`): `PACKET_VNET_HDR` carries each frame's
//! checksum-offload state across, `PACKET_IGNORE_OUTGOING` keeps our own writes from being read
//! back, and `SO_TIMESTAMPNS` gives the kernel's arrival time of every frame.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub use clusterlab_wan::afpacket::VNET_HDR_LEN;

use clusterlab_wan::afpacket::{cvt, setopt, PACKET_IGNORE_OUTGOING, PACKET_VNET_HDR};

const PACKET_STATISTICS: libc::c_int = 6;
/// Frames read (or written) per system call at most.
pub const BATCH: usize = 64;

/// The interface index of `name` in the calling thread's namespace.
pub fn ifindex(name: &str) -> io::Result<i32> {
    let c = std::ffi::CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name has a NUL"))?;
    // SAFETY: c is a valid C string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(io::Error::new(io::ErrorKind::NotFound, format!("no interface {name} in this namespace")));
    }
    Ok(i as i32)
}

/// A frame read: its interface, the kernel's receive time (CLOCK_REALTIME ns, 0 if none) and
/// its length (virtio-net header included) in the caller's buffer.
#[derive(Clone, Copy, Debug, Default)]
pub struct Received {
    pub ifindex: i32,
    pub stamp: u64,
    pub len: usize,
}

pub struct AllPorts {
    fd: OwnedFd,
    names: Vec<libc::sockaddr_ll>,
    ctrl: Vec<[u64; 8]>,
}

impl AllPorts {
    /// One socket for every interface of this namespace; `buffer`: receive and send buffer
    /// (bytes, forced past rmem_max; needs CAP_NET_ADMIN).
    pub fn open(buffer: usize) -> io::Result<AllPorts> {
        let proto = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain libc calls; the descriptor is owned right after.
        let raw = cvt(unsafe {
            libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, proto as libc::c_int)
        }, "socket(AF_PACKET) (needs root)")?;
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let buf = buffer.min(i32::MAX as usize) as libc::c_int;
        setopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, buf, "SO_RCVBUFFORCE")?;
        setopt(raw, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, buf, "SO_SNDBUFFORCE")?;
        setopt(raw, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1, "PACKET_IGNORE_OUTGOING (Linux >= 4.20)")?;
        setopt(raw, libc::SOL_PACKET, PACKET_VNET_HDR, 1, "PACKET_VNET_HDR")?;
        setopt(raw, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1, "SO_TIMESTAMPNS")?;
        // SAFETY: an all-zero sockaddr_ll is valid; ifindex 0 binds to every interface.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = proto;
        cvt(unsafe {
            libc::bind(raw, &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                       std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t)
        }, "bind(AF_PACKET)")?;
        // SAFETY: zeroed plain-old-data arrays.
        Ok(AllPorts { fd, names: vec![unsafe { std::mem::zeroed() }; BATCH], ctrl: vec![[0u64; 8]; BATCH] })
    }

    /// Up to `bufs.len()` (at most BATCH) frames into `bufs`, their details into `got`; 0 when
    /// nothing is waiting.
    pub fn recv_batch(&mut self, bufs: &mut [Vec<u8>], got: &mut [Received]) -> io::Result<usize> {
        let n = bufs.len().min(BATCH).min(got.len());
        let mut iovs: Vec<libc::iovec> = bufs[..n].iter_mut()
            .map(|b| libc::iovec { iov_base: b.as_mut_ptr() as *mut libc::c_void, iov_len: b.len() }).collect();
        // SAFETY: every mmsghdr points at live iovecs, names and control buffers for the call.
        let mut msgs: Vec<libc::mmsghdr> = (0..n).map(|i| {
            let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
            m.msg_hdr.msg_iov = &mut iovs[i];
            m.msg_hdr.msg_iovlen = 1;
            m.msg_hdr.msg_name = &mut self.names[i] as *mut libc::sockaddr_ll as *mut libc::c_void;
            m.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            m.msg_hdr.msg_control = self.ctrl[i].as_mut_ptr() as *mut libc::c_void;
            m.msg_hdr.msg_controllen = std::mem::size_of::<[u64; 8]>() as _;
            m
        }).collect();
        let rc = unsafe {
            libc::recvmmsg(self.fd.as_raw_fd(), msgs.as_mut_ptr(), n as libc::c_uint, libc::MSG_DONTWAIT, std::ptr::null_mut())
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(0),
                _ => Err(e),
            };
        }
        for i in 0..rc as usize {
            let m = &msgs[i];
            let mut stamp = 0u64;
            // SAFETY: walking the control messages the kernel wrote for this message.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&m.msg_hdr);
                while !c.is_null() {
                    if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                        let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                        stamp = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
                    }
                    c = libc::CMSG_NXTHDR(&m.msg_hdr, c);
                }
            }
            got[i] = Received { ifindex: self.names[i].sll_ifindex, stamp, len: m.msg_len as usize };
        }
        Ok(rc as usize)
    }

    /// Write each frame (virtio-net header first) to its interface; returns how many the
    /// interfaces took (a refused frame is skipped, the rest still sent).
    pub fn send_batch(&self, frames: &[(i32, &[u8])]) -> usize {
        let mut sent = 0;
        for chunk in frames.chunks(BATCH) {
            // SAFETY: zeroed sockaddr_ll values filled in below.
            let mut names: Vec<libc::sockaddr_ll> = chunk.iter().map(|&(ifindex, _)| {
                let mut s: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
                s.sll_family = libc::AF_PACKET as u16;
                s.sll_ifindex = ifindex;
                s.sll_halen = 6;
                s
            }).collect();
            let mut iovs: Vec<libc::iovec> = chunk.iter()
                .map(|(_, f)| libc::iovec { iov_base: f.as_ptr() as *mut libc::c_void, iov_len: f.len() }).collect();
            let mut msgs: Vec<libc::mmsghdr> = (0..chunk.len()).map(|i| {
                let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
                m.msg_hdr.msg_iov = &mut iovs[i];
                m.msg_hdr.msg_iovlen = 1;
                m.msg_hdr.msg_name = &mut names[i] as *mut libc::sockaddr_ll as *mut libc::c_void;
                m.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
                m
            }).collect();
            let mut done = 0usize;
            while done < msgs.len() {
                // SAFETY: msgs[done..] are valid mmsghdrs pointing at live buffers.
                let n = unsafe {
                    libc::sendmmsg(self.fd.as_raw_fd(), msgs[done..].as_mut_ptr(), (msgs.len() - done) as libc::c_uint,
                                   libc::MSG_DONTWAIT)
                };
                if n <= 0 {
                    done += 1; // this one was refused; go on with the rest
                    continue;
                }
                done += n as usize;
                sent += n as usize;
            }
        }
        sent
    }

    /// Frames the kernel dropped because the socket's receive buffer was full, since the last
    /// call (PACKET_STATISTICS resets on read).
    pub fn kernel_drops(&self) -> u64 {
        let mut st = [0u32; 2];
        let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
        // SAFETY: st is valid for len bytes.
        let rc = unsafe {
            libc::getsockopt(self.fd.as_raw_fd(), libc::SOL_PACKET, PACKET_STATISTICS,
                             st.as_mut_ptr() as *mut libc::c_void, &mut len)
        };
        if rc == 0 { st[1] as u64 } else { 0 }
    }
}

impl AsRawFd for AllPorts {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
