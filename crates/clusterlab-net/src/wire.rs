//! Wire format of the TCP mesh, the Rust half. The Python half is
//! `python/clusterlab/rendezvous/frames.py`; the two encode the same bytes and reject the same
//! frames with the same messages (`tests/comm/test_wire_agreement.py` checks it both ways).
//!
//! A frame is a fixed 24-byte header, an optional array description, then the payload:
//!
//! ```text
//! magic  b"CLB\x01"  4 bytes (the last byte is the protocol version)
//! kind   u8          Kind (bytes, array, bye, abort, control)
//! ndim   u8          array rank (0..=MAX_NDIM), 0 for other kinds
//! dtlen  u8          length of the dtype string that follows (0 for other kinds)
//! flags  u8          reserved, 0 unless the receiver allows a bit
//! tag    i32 LE      MIN_TAG..MAX_TAG-1
//! source i32 LE      the sending rank: must be the rank the connection authenticated as
//! length u64 LE      payload bytes (at most the receiver's max_frame)
//! [dtype ascii, dtlen bytes][shape, ndim x u64 LE]    arrays only
//! payload
//! ```
//!
//! ```
//! use clusterlab_net::wire::{self, Kind};
//! let mut buf = [0u8; wire::MAX_HEAD];
//! let n = wire::encode(&mut buf, Kind::Array, 7, 2, 24, b"<i4", &[2, 3], 0);
//! let h = wire::decode_fixed(&buf[..wire::HEADER_LEN], 2, 1 << 20, 0).unwrap();
//! assert_eq!((h.kind, h.tag, h.length, n), (Kind::Array, 7, 24, wire::HEADER_LEN + 3 + 16));
//! let (dtype, shape) = wire::decode_array_meta(&buf[wire::HEADER_LEN..n], &h).unwrap();
//! assert_eq!((dtype.as_str(), shape), ("<i4", vec![2, 3]));
//! let mut bad = buf;
//! bad[..4].copy_from_slice(b"XXXX");
//! assert_eq!(wire::decode_fixed(&bad[..24], 2, 1 << 20, 0).unwrap_err().0, "rank 2 sent a frame with bad magic b'XXXX'");
//! ```

use std::fmt;

pub const MAGIC: [u8; 4] = *b"CLB\x01";
pub const VERSION: u8 = 1;
pub const HEADER_LEN: usize = 24;
pub const MAX_NDIM: usize = 32;
pub const MAX_DTYPE_LEN: usize = 16;
/// Longest array description (dtype string + shape) after the fixed header.
pub const MAX_META: usize = MAX_DTYPE_LEN + 8 * MAX_NDIM;
/// Longest header + description: a buffer this big holds any encoded header.
pub const MAX_HEAD: usize = HEADER_LEN + MAX_META;
/// Tags below the collectives' tag (-1) down to this are reserved for the backends.
pub const MIN_TAG: i32 = -16;
/// User tags are 0..MAX_TAG-1.
pub const MAX_TAG: i32 = 1 << 30;
/// ABORT and CONTROL payloads (JSON) are at most this long.
pub const CONTROL_LIMIT: u64 = 1 << 20;
/// Larger than any sane message, small enough to catch garbage.
pub const DEFAULT_MAX_FRAME: u64 = 1 << 34;

/// What a frame carries. The numbers are on the wire; the names are shared with Python's
/// `frames.Kind`.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// raw bytes, delivered as `bytes`
    Bytes = 0,
    /// a numpy buffer; dtype and shape follow the header
    Array = 1,
    /// clean close: the peer is done and sends nothing more
    Bye = 2,
    /// the peer fails the job; payload = JSON {"rank": r, "detail": "..."}
    Abort = 3,
    /// launcher/rendezvous messages; payload = JSON
    Control = 4,
}

impl Kind {
    pub const ALL: [Kind; 5] = [Kind::Bytes, Kind::Array, Kind::Bye, Kind::Abort, Kind::Control];

    pub fn from_u8(v: u8) -> Option<Kind> {
        Kind::ALL.get(v as usize).copied()
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Bytes => "BYTES",
            Kind::Array => "ARRAY",
            Kind::Bye => "BYE",
            Kind::Abort => "ABORT",
            Kind::Control => "CONTROL",
        }
    }
}

/// A frame that breaks the protocol; the message names the peer (same text as Python's
/// `ProtocolError`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError(pub String);

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WireError {}

/// The checked fixed header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub ndim: u8,
    pub dtlen: u8,
    pub flags: u8,
    pub tag: i32,
    pub source: i32,
    pub length: u64,
}

impl Header {
    /// Bytes of array description between the fixed header and the payload.
    pub fn meta_len(&self) -> usize {
        self.dtlen as usize + 8 * self.ndim as usize
    }
}

/// A checked dtype string (`<f8`, `|u1`, ...), at most 4 bytes, kept inline.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Dtype {
    len: u8,
    text: [u8; 4],
}

impl Dtype {
    pub fn as_bytes(&self) -> &[u8] {
        &self.text[..self.len as usize]
    }

    pub fn as_str(&self) -> &str {
        // only ASCII ever gets in (see `parse_dtype`)
        std::str::from_utf8(self.as_bytes()).unwrap_or("")
    }

    /// Bytes per element.
    pub fn itemsize(&self) -> usize {
        let d = self.as_bytes();
        d[2..].iter().fold(0usize, |s, c| s * 10 + (c - b'0') as usize)
    }
}

impl fmt::Debug for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Dtype({})", self.as_str())
    }
}

/// The plain numeric dtypes a frame may carry: byte order `<`, `>`, `|` or `=`, kind and item
/// size from this table (no objects, no structured types, no datetimes).
#[cfg_attr(not(test), allow(dead_code))]
const ITEMSIZES: [(u8, &[usize]); 5] = [
    (b'b', &[1]),
    (b'i', &[1, 2, 4, 8]),
    (b'u', &[1, 2, 4, 8]),
    (b'f', &[2, 4, 8, 16]),
    (b'c', &[8, 16, 32]),
];

/// `d` as a dtype if it is one of the accepted ones (see `ITEMSIZES`).
pub fn parse_dtype(d: &[u8]) -> Option<Dtype> {
    if !(3..=4).contains(&d.len()) || !matches!(d[0], b'<' | b'>' | b'|' | b'=') || !d[2..].iter().all(u8::is_ascii_digit) {
        return None;
    }
    let size = d[2..].iter().fold(0usize, |s, c| s * 10 + (c - b'0') as usize);
    // the table as a match (this runs for every array received; `ITEMSIZES` is its spec, and
    // a test checks that the two agree)
    let known = matches!((d[1], size), (b'b', 1) | (b'i' | b'u', 1 | 2 | 4 | 8) | (b'f', 2 | 4 | 8 | 16) | (b'c', 8 | 16 | 32));
    if !known || (d.len() == 4 && d[2] == b'0') {
        return None;
    }
    let mut text = [0u8; 4];
    text[..d.len()].copy_from_slice(d);
    Some(Dtype { len: d.len() as u8, text })
}

/// The wire name of a numpy dtype given as (byte order character, kind character, item size),
/// written as numpy's `dtype.str` does: `|` for one-byte types, `<`/`>` otherwise (`=`, native,
/// becomes this machine's order). None for anything not accepted by `parse_dtype`.
pub fn dtype_name(order: u8, kind: u8, itemsize: usize) -> Option<Dtype> {
    let order = match order {
        _ if itemsize == 1 => b'|',
        b'=' | b'|' => {
            if cfg!(target_endian = "little") {
                b'<'
            } else {
                b'>'
            }
        }
        b'<' | b'>' => order,
        _ => return None,
    };
    if itemsize == 0 || itemsize > 99 {
        return None;
    }
    let mut d = [order, kind, 0, 0];
    let len = if itemsize < 10 {
        d[2] = b'0' + itemsize as u8;
        3
    } else {
        d[2] = b'0' + (itemsize / 10) as u8;
        d[3] = b'0' + (itemsize % 10) as u8;
        4
    };
    parse_dtype(&d[..len])
}

/// Write a header (and, for arrays, the dtype string and shape) into `out`; returns its length.
/// `out` must hold `HEADER_LEN + dtype.len() + 8 * shape.len()` bytes (`MAX_HEAD` always does).
#[allow(clippy::too_many_arguments)]
pub fn encode(out: &mut [u8], kind: Kind, tag: i32, source: i32, length: u64, dtype: &[u8], shape: &[u64], flags: u8) -> usize {
    out[0..4].copy_from_slice(&MAGIC);
    out[4] = kind as u8;
    out[5] = shape.len() as u8;
    out[6] = dtype.len() as u8;
    out[7] = flags;
    out[8..12].copy_from_slice(&tag.to_le_bytes());
    out[12..16].copy_from_slice(&source.to_le_bytes());
    out[16..24].copy_from_slice(&length.to_le_bytes());
    let mut off = HEADER_LEN;
    out[off..off + dtype.len()].copy_from_slice(dtype);
    off += dtype.len();
    for s in shape {
        out[off..off + 8].copy_from_slice(&s.to_le_bytes());
        off += 8;
    }
    off
}

/// Python's `repr()` of a bytes object, so messages read the same in both languages.
pub fn bytes_repr(b: &[u8]) -> String {
    let quote = if b.contains(&b'\'') && !b.contains(&b'"') { '"' } else { '\'' };
    let mut s = String::from("b");
    s.push(quote);
    for &c in b {
        match c {
            b'\\' => s.push_str("\\\\"),
            b'\t' => s.push_str("\\t"),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\'' if quote == '\'' => s.push_str("\\'"),
            0x20..=0x7e => s.push(c as char),
            _ => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s.push(quote);
    s
}

/// Parse and check the fixed header (`buf` holds at least `HEADER_LEN` bytes) of a frame from
/// `expect_source`; `allowed_flags` are flag bits this receiver accepts.
pub fn decode_fixed(buf: &[u8], expect_source: i32, max_frame: u64, allowed_flags: u8) -> Result<Header, WireError> {
    let who = expect_source;
    let magic = &buf[0..4];
    if magic != MAGIC {
        if magic[..3] == MAGIC[..3] {
            return Err(WireError(format!("rank {who} speaks protocol version {}, this is version {VERSION}", magic[3])));
        }
        return Err(WireError(format!("rank {who} sent a frame with bad magic {}", bytes_repr(magic))));
    }
    let (kind, ndim, dtlen, flags) = (buf[4], buf[5], buf[6], buf[7]);
    let tag = i32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]);
    let source = i32::from_le_bytes([buf[12], buf[13], buf[14], buf[15]]);
    let length = u64::from_le_bytes(buf[16..24].try_into().expect("8 bytes"));
    let Some(kind) = Kind::from_u8(kind) else {
        return Err(WireError(format!("rank {who} sent a frame of unknown kind {kind}")));
    };
    let bad_flags = flags & !allowed_flags;
    if bad_flags != 0 {
        return Err(WireError(format!("rank {who} sent a frame with reserved flags {bad_flags:#x}")));
    }
    if source != expect_source {
        return Err(WireError(format!("rank {who} sent a frame claiming to come from rank {source}")));
    }
    if !(MIN_TAG..MAX_TAG).contains(&tag) {
        return Err(WireError(format!("rank {who} sent a frame with tag {tag} outside {MIN_TAG}..{}", MAX_TAG - 1)));
    }
    if length > max_frame {
        return Err(WireError(format!("rank {who} sent a {length}-byte frame; the limit is {max_frame} bytes")));
    }
    if kind == Kind::Array {
        if ndim as usize > MAX_NDIM || !(3..=MAX_DTYPE_LEN).contains(&(dtlen as usize)) {
            return Err(WireError(format!("rank {who} sent an array header with ndim {ndim}, dtype length {dtlen}")));
        }
    } else if ndim != 0 || dtlen != 0 {
        return Err(WireError(format!("rank {who} sent a non-array frame with array meta")));
    }
    if matches!(kind, Kind::Abort | Kind::Control) && length > CONTROL_LIMIT {
        return Err(WireError(format!("rank {who} sent a {length}-byte control frame (limit 1 MiB)")));
    }
    if kind == Kind::Bye && length != 0 {
        return Err(WireError(format!("rank {who} sent a BYE frame with a payload")));
    }
    Ok(Header { kind, ndim, dtlen, flags, tag, source, length })
}

/// Check an array description (`meta` holds at least `h.meta_len()` bytes): the dtype against
/// the accepted ones, and that `prod(shape) * itemsize` equals the payload length exactly.
pub fn decode_array_meta(meta: &[u8], h: &Header) -> Result<(Dtype, Vec<u64>), WireError> {
    let who = h.source;
    let dtlen = h.dtlen as usize;
    let d = &meta[..dtlen];
    let Some(dtype) = parse_dtype(d) else {
        return Err(WireError(format!("rank {who} sent an array of unsupported dtype {}", bytes_repr(d))));
    };
    let shape: Vec<u64> = (0..h.ndim as usize)
        .map(|k| u64::from_le_bytes(meta[dtlen + 8 * k..dtlen + 8 * k + 8].try_into().expect("8 bytes")))
        .collect();
    // the exact product: zero if any extent is zero, else an overflow cannot match a u64 length
    let total = if shape.contains(&0) {
        Some(0)
    } else {
        shape.iter().try_fold(dtype.itemsize() as u64, |t, &s| t.checked_mul(s))
    };
    if total != Some(h.length) {
        return Err(WireError(format!(
            "rank {who} sent an array of shape {} and dtype {} in {} bytes",
            shape_repr(&shape),
            bytes_repr(dtype.as_bytes()).trim_start_matches('b'),
            h.length
        )));
    }
    Ok((dtype, shape))
}

/// Python's `repr()` of a shape tuple: `()`, `(3,)`, `(2, 3)`.
pub fn shape_repr(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn parse_dtype_accepts_exactly_the_table() {
        for order in [b'<', b'>', b'|', b'=', b'!'] {
            for kind in [b'b', b'i', b'u', b'f', b'c', b'O', b'M'] {
                for size in 0..40usize {
                    let text = format!("{}{}{}", order as char, kind as char, size);
                    let want = order != b'!' && ITEMSIZES.iter().any(|(k, s)| *k == kind && s.contains(&size));
                    assert_eq!(parse_dtype(text.as_bytes()).is_some(), want, "{text}");
                }
            }
        }
        assert!(parse_dtype(b"<f08").is_none() && parse_dtype(b"<f").is_none());
    }

    use super::*;

    fn head(kind: u8, ndim: u8, dtlen: u8, flags: u8, tag: i32, source: i32, len: u64) -> [u8; 24] {
        let mut b = [0u8; 24];
        b[..4].copy_from_slice(&MAGIC);
        b[4] = kind;
        b[5] = ndim;
        b[6] = dtlen;
        b[7] = flags;
        b[8..12].copy_from_slice(&tag.to_le_bytes());
        b[12..16].copy_from_slice(&source.to_le_bytes());
        b[16..24].copy_from_slice(&len.to_le_bytes());
        b
    }

    #[test]
    fn round_trip_every_kind() {
        for kind in Kind::ALL {
            let mut buf = [0u8; MAX_HEAD];
            let len = if matches!(kind, Kind::Bye) { 0 } else { 16 };
            let (dt, shape): (&[u8], &[u64]) = if kind == Kind::Array { (b"<f8", &[2]) } else { (b"", &[]) };
            let n = encode(&mut buf, kind, -1, 3, len, dt, shape, 0);
            let h = decode_fixed(&buf, 3, 1 << 20, 0).unwrap();
            assert_eq!((h.kind, h.tag, h.source, h.length, HEADER_LEN + h.meta_len()), (kind, -1, 3, len, n));
            if kind == Kind::Array {
                let (d, s) = decode_array_meta(&buf[HEADER_LEN..n], &h).unwrap();
                assert_eq!((d.as_str(), s, d.itemsize()), ("<f8", vec![2], 8));
            }
        }
    }

    #[test]
    fn rejects_with_pythons_messages() {
        let cases: Vec<([u8; 24], &str)> = vec![
            ({ let mut b = head(0, 0, 0, 0, 0, 1, 0); b[..4].copy_from_slice(b"HTTP"); b }, "bad magic b'HTTP'"),
            ({ let mut b = head(0, 0, 0, 0, 0, 1, 0); b[3] = 7; b }, "protocol version 7, this is version 1"),
            (head(9, 0, 0, 0, 0, 1, 0), "unknown kind 9"),
            (head(0, 0, 0, 4, 0, 1, 0), "reserved flags 0x4"),
            (head(0, 0, 0, 0, 0, 0, 0), "claiming to come from rank 0"),
            (head(0, 0, 0, 0, -100, 1, 0), "tag -100 outside -16..1073741823"),
            (head(0, 0, 0, 0, 0, 1, 1 << 40), "1099511627776-byte frame; the limit is 1073741824 bytes"),
            (head(1, 33, 3, 0, 0, 1, 8), "array header with ndim 33, dtype length 3"),
            (head(0, 0, 3, 0, 0, 1, 0), "non-array frame with array meta"),
            (head(3, 0, 0, 0, 0, 1, 1 << 20 | 1), "control frame (limit 1 MiB)"),
            (head(2, 0, 0, 0, 0, 1, 1), "BYE frame with a payload"),
        ];
        for (b, msg) in cases {
            let e = decode_fixed(&b, 1, 1 << 30, 0).unwrap_err();
            assert!(e.0.starts_with("rank 1 ") && e.0.contains(msg), "{e} lacks {msg}");
        }
        assert!(decode_fixed(&head(0, 0, 0, 1, 0, 1, 0), 1, 10, 1).is_ok(), "an allowed flag passes");
    }

    #[test]
    fn dtypes_and_shapes() {
        for ok in ["<f8", "|u1", ">i2", "=c16", "|b1", "<f16", "<c32"] {
            assert!(parse_dtype(ok.as_bytes()).is_some(), "{ok}");
        }
        for bad in ["|O8", "<i3", "<f12", "<i16", "<U4", "xf8", "<f", "<f008", "<f08"] {
            assert!(parse_dtype(bad.as_bytes()).is_none(), "{bad}");
        }
        assert_eq!(dtype_name(b'=', b'f', 8).unwrap().as_str(), if cfg!(target_endian = "little") { "<f8" } else { ">f8" });
        assert_eq!(dtype_name(b'<', b'u', 1).unwrap().as_str(), "|u1");
        assert!(dtype_name(b'<', b'O', 8).is_none());
        let h = Header { kind: Kind::Array, ndim: 2, dtlen: 3, flags: 0, tag: 0, source: 1, length: 0 };
        let mut meta = b"<f8".to_vec();
        meta.extend_from_slice(&(1u64 << 40).to_le_bytes());
        meta.extend_from_slice(&0u64.to_le_bytes());
        assert_eq!(decode_array_meta(&meta, &h).unwrap().1, vec![1 << 40, 0], "an empty array of a huge extent");
        let h = Header { length: 8, ..h };
        let mut meta = b"<f8".to_vec();
        meta.extend_from_slice(&(1u64 << 40).to_le_bytes());
        meta.extend_from_slice(&(1u64 << 40).to_le_bytes());
        assert_eq!(decode_array_meta(&meta, &h).unwrap_err().0,
                   "rank 1 sent an array of shape (1099511627776, 1099511627776) and dtype '<f8' in 8 bytes");
        assert_eq!(bytes_repr(b"a'\x00\\"), "b\"a'\\x00\\\\\"");
    }
}
