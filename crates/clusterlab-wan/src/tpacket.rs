//! Packet lengths from a block of a TPACKET_V3 ring (the monitor's capture, Python's
//! `clusterlab.monitor.capture`): per (interface index, 64-byte length bucket) the packets and
//! bytes of the block's packets. Pure: the block is a byte slice, so the tests need no socket.
//!
//! Each packet starts with a `struct tpacket3_hdr`: `tp_next_offset` (u32) at 0, `tp_len` (the
//! packet's length on the wire, u32) at 16; the capture's `sockaddr_ll` follows it, its
//! `sll_ifindex` (i32) at 52 from the packet's start. Lengths of 65536 bytes and more share the
//! last bucket.
//!
//! ```
//! use clusterlab_wan::tpacket::{block_counts, LAST_BUCKET};
//! let mut block = vec![0u8; 128];
//! for (off, next, len, ifindex) in [(0usize, 64u32, 1500u32, 3i32), (64, 0, 70_000, 3)] {
//!     block[off..off + 4].copy_from_slice(&next.to_le_bytes());
//!     block[off + 16..off + 20].copy_from_slice(&len.to_le_bytes());
//!     block[off + 52..off + 56].copy_from_slice(&ifindex.to_le_bytes());
//! }
//! assert_eq!(block_counts(&block, 0, 2).unwrap(), vec![(3, 23, 1, 1500), (3, LAST_BUCKET, 1, 70_000)]);
//! ```

use std::collections::BTreeMap;

/// Bucket width in bytes (the line's histogram's).
pub const BUCKET: u32 = crate::hist::BUCKET as u32;
/// The bucket of every length from 65536 bytes on, one past the histogram's 1024 for 0..65535
/// (the line's histogram folds those into its last bucket; the capture keeps them apart).
pub const LAST_BUCKET: u32 = crate::hist::BUCKETS as u32;
const HEADER: usize = 56; // the fields read: up to sll_ifindex's end

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// `(ifindex, bucket, packets, bytes)` of the `num` packets from byte `first` of `block`, sorted;
/// an error (not a panic) where the block's offsets lead outside it.
pub fn block_counts(block: &[u8], first: usize, num: u32) -> Result<Vec<(i32, u32, u64, u64)>, String> {
    let mut counts: BTreeMap<(i32, u32), (u64, u64)> = BTreeMap::new();
    let mut off = first;
    for i in 0..num {
        if off.checked_add(HEADER).is_none_or(|end| end > block.len()) {
            return Err(format!("packet {i} of {num} at offset {off} runs past the block ({} bytes)", block.len()));
        }
        let next = u32_at(block, off) as usize;
        let len = u32_at(block, off + 16);
        let ifindex = u32_at(block, off + 52) as i32;
        let bucket = if len < 65536 { len / BUCKET } else { LAST_BUCKET };
        let c = counts.entry((ifindex, bucket)).or_insert((0, 0));
        c.0 += 1;
        c.1 += u64::from(len);
        if i + 1 < num {
            if next == 0 {
                return Err(format!("packet {i} of {num} at offset {off} has no next packet"));
            }
            off += next;
        }
    }
    Ok(counts.into_iter().map(|((ifx, b), (n, by))| (ifx, b, n, by)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(packets: &[(u32, i32)], stride: usize) -> Vec<u8> {
        let mut b = vec![0u8; stride * packets.len().max(1)];
        for (i, &(len, ifx)) in packets.iter().enumerate() {
            let off = i * stride;
            let next = if i + 1 < packets.len() { stride as u32 } else { 0 };
            b[off..off + 4].copy_from_slice(&next.to_le_bytes());
            b[off + 16..off + 20].copy_from_slice(&len.to_le_bytes());
            b[off + 52..off + 56].copy_from_slice(&ifx.to_le_bytes());
        }
        b
    }

    #[test]
    fn counts_equal_a_per_packet_reference() {
        let pkts: Vec<(u32, i32)> = (0..500u32).map(|i| ((i * 7919) % 70_000 + 42, (i % 3) as i32 + 2)).collect();
        let b = block(&pkts, 80);
        let mut want: BTreeMap<(i32, u32), (u64, u64)> = BTreeMap::new();
        for &(len, ifx) in &pkts {
            let e = want.entry((ifx, if len < 65536 { len / 64 } else { 1024 })).or_insert((0, 0));
            e.0 += 1;
            e.1 += len as u64;
        }
        let want: Vec<_> = want.into_iter().map(|((i, b), (n, by))| (i, b, n, by)).collect();
        assert_eq!(block_counts(&b, 0, pkts.len() as u32).unwrap(), want);
        assert_eq!(block_counts(&b, 0, 0).unwrap(), vec![]);
    }

    #[test]
    fn offsets_outside_the_block_are_errors() {
        let b = block(&[(100, 1), (200, 1)], 64);
        assert!(block_counts(&b, 0, 3).unwrap_err().contains("has no next packet"));
        assert!(block_counts(&b[..100], 0, 2).unwrap_err().contains("runs past the block"));
        assert!(block_counts(&b, usize::MAX - 10, 1).is_err());
    }
}
