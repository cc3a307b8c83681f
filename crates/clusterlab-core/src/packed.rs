//! Packed baskets: the compact binary encoding of a partition on a LUN (layout version 2,
//! docs/storage.md), about 1.1-1.3 bytes per item instead of the 3-4 of FIMI text.
//!
//! Per transaction, in order: a varint item count `n`, then `n` varints: the first item id,
//! then each next id minus the previous id minus 1 (the ids of a transaction are sorted and
//! distinct, as FIMI parsing leaves them, so every gap is >= 1). A varint is LEB128: 7 bits a
//! byte, low bits first, the high bit set on every byte but the last; at most 5 bytes and at
//! most 4294967295. An empty transaction is the single byte 0.
//!
//! [`Decoder`] takes the bytes in pieces cut anywhere (as they arrive from the target) and
//! refuses every malformed byte with its offset in the region: a varint cut by the region's
//! end or longer than 5 bytes, a count that cannot fit in the bytes left, an id above u32, a
//! transaction count other than the header's. It never panics on any input.

use crate::basket::Baskets;
use std::fmt;

/// What is wrong with packed bytes and where: `offset` counts bytes from the region's start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    pub offset: u64,
    pub message: String,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "byte {}: {}", self.offset, self.message)
    }
}

impl std::error::Error for DecodeError {}

fn push_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Encode CSR baskets (each transaction sorted ascending and without duplicates, as
/// [`Baskets`] holds them). Refuses offsets that do not describe `items` and unsorted or
/// repeated ids, naming the transaction.
pub fn encode(offsets: &[i64], items: &[u32]) -> Result<Vec<u8>, String> {
    if offsets.first() != Some(&0) || *offsets.last().unwrap() as usize != items.len() {
        return Err("offsets must start at 0 and end at the number of items".into());
    }
    let mut out = Vec::with_capacity(items.len() + items.len() / 4 + offsets.len());
    for (t, w) in offsets.windows(2).enumerate() {
        if w[0] > w[1] {
            return Err(format!("offsets decrease at transaction {t}"));
        }
        let tx = &items[w[0] as usize..w[1] as usize];
        push_varint(&mut out, tx.len() as u32);
        let mut prev: Option<u32> = None;
        for &id in tx {
            match prev {
                None => push_varint(&mut out, id),
                Some(p) if id > p => push_varint(&mut out, id - p - 1),
                Some(_) => return Err(format!("transaction {t} is not sorted and distinct")),
            }
            prev = Some(id);
        }
    }
    Ok(out)
}

/// The varint at `buf[*j..]`, which holds at least 5 bytes or the varint's end; advances
/// `*j` past it. None: longer than 5 bytes or above u32 (or cut by the buffer's end).
#[inline]
fn varint_at(buf: &[u8], j: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in [0u32, 7, 14, 21, 28] {
        let b = *buf.get(*j)?;
        *j += 1;
        if shift == 28 && b > 0x0f {
            return None;
        }
        v |= ((b & 0x7f) as u64) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// The varint starting `w` (8 bytes, little-endian): its value and length in bytes, or None
/// exactly when [`varint_at`] refuses it. No branch on the varint's length.
#[inline(always)]
fn varint_word(w: u64) -> Option<(u64, usize)> {
    // The varint ends at its first byte with the high bit clear (none in 8 bytes: len 9).
    let stops = !w & 0x8080_8080_8080_8080;
    let len = (stops.trailing_zeros() / 8 + 1) as usize;
    // The bits up to that byte's high bit: the varint's bytes, nothing after them.
    let x = w & (stops ^ stops.wrapping_sub(1));
    let v = (x & 0x7f) | ((x >> 1) & (0x7f << 7)) | ((x >> 2) & (0x7f << 14)) | ((x >> 3) & (0x7f << 21)) | ((x >> 4) & (0x7f << 28));
    // Above u32 with at most 5 bytes is a fifth byte above 0x0f, which varint_at refuses too.
    if len > 5 || v > u32::MAX as u64 {
        return None;
    }
    Some((v, len))
}

/// The varint at `buf[*j..]` (as [`varint_at`]), a whole word at a time when 8 bytes remain.
#[inline(always)]
fn varint_fast(buf: &[u8], j: &mut usize) -> Option<u64> {
    match buf.get(*j..*j + 8) {
        Some(w) => {
            let (v, len) = varint_word(u64::from_le_bytes(w.try_into().expect("8 bytes")))?;
            *j += len;
            Some(v)
        }
        None => varint_at(buf, j),
    }
}

/// Four varints of at most 2 bytes each at the start of `w` (8 bytes, little-endian): their
/// values and their length in bytes, or None (fewer than four end in these 8 bytes, or one is
/// longer: the caller takes them one at a time). No branch per varint: ids and gaps of a few
/// hundred items mix 1- and 2-byte varints, which a byte-by-byte loop mispredicts.
#[inline(always)]
fn four_short_varints(w: u64) -> Option<([u64; 4], usize)> {
    // The high bit of each byte that ends a varint, then of all but the first 1, 2, 3 of them.
    let s0 = !w & 0x8080_8080_8080_8080;
    let s1 = s0 & s0.wrapping_sub(1);
    let s2 = s1 & s1.wrapping_sub(1);
    let s3 = s2 & s2.wrapping_sub(1);
    let conts = w & 0x8080_8080_8080_8080 & (s3 ^ s3.wrapping_sub(1));
    // Two continuation bytes in a row within the four: one is longer than 2 bytes.
    if s3 == 0 || conts & (conts << 8) != 0 {
        return None;
    }
    // A varint's second byte counts only when its first has the continuation bit: * 0x7f
    // turns that bit (0x80) into the mask of the second byte's 7 bits, shifted into place.
    let short = |x: u64| (x & 0x7f) | ((x >> 1) & ((x & 0x80) * 0x7f));
    let v = [short(w), short(w >> (s0.trailing_zeros() + 1)), short(w >> (s1.trailing_zeros() + 1)), short(w >> (s2.trailing_zeros() + 1))];
    Some((v, (s3.trailing_zeros() / 8 + 1) as usize))
}

/// Streaming decoder of one packed region of `region_len` bytes.
#[derive(Debug)]
pub struct Decoder {
    out: Baskets,
    region_len: u64,
    /// Bytes taken so far (the offset of the next byte fed).
    pos: u64,
    /// A varint cut by the end of the last piece: value so far, bits taken, where it began.
    acc: u64,
    shift: u32,
    start: u64,
    /// Items still to come in the current transaction (0: the next varint is a count).
    left: u64,
    /// The previous item id of the current transaction (None before its first).
    prev: Option<u64>,
}

impl Decoder {
    pub fn new(region_len: u64) -> Self {
        let mut out = Baskets::new();
        // Every item takes at least a byte, so this never reserves more than needed
        // (items) and seldom too little (offsets: about 10 items a transaction).
        out.items.reserve((region_len as usize).min(1 << 28));
        Decoder { out, region_len, pos: 0, acc: 0, shift: 0, start: 0, left: 0, prev: None }
    }

    /// Bytes taken so far.
    pub fn position(&self) -> u64 {
        self.pos
    }

    #[inline]
    fn value(&mut self, v: u64, at: u64, next: u64) -> Result<(), DecodeError> {
        if self.left == 0 {
            // a count: its items need at least a byte each in what is left of the region
            if v > self.region_len - next {
                return Err(DecodeError {
                    offset: at,
                    message: format!("item count {v} runs past the region ({} bytes left)", self.region_len - next),
                });
            }
            if v == 0 {
                self.out.offsets.push(self.out.items.len() as i64);
            } else {
                self.left = v;
                self.prev = None;
            }
            return Ok(());
        }
        let id = match self.prev {
            None => v,
            Some(p) => p + 1 + v,
        };
        if id > u32::MAX as u64 {
            return Err(DecodeError { offset: at, message: format!("item id {id} is above 4294967295") });
        }
        self.out.items.push(id as u32);
        self.prev = Some(id);
        self.left -= 1;
        if self.left == 0 {
            self.out.offsets.push(self.out.items.len() as i64);
        }
        Ok(())
    }

    fn too_long(at: u64) -> DecodeError {
        DecodeError { offset: at, message: "varint longer than 5 bytes or above 4294967295".into() }
    }

    /// Take the next piece of the region.
    pub fn feed(&mut self, buf: &[u8]) -> Result<(), DecodeError> {
        if buf.len() as u64 > self.region_len - self.pos {
            return Err(DecodeError {
                offset: self.region_len,
                message: format!("{} bytes past the region's {}", buf.len() as u64 - (self.region_len - self.pos), self.region_len),
            });
        }
        let base = self.pos;
        let mut i = 0usize;
        while i < buf.len() {
            if self.shift == 0 && self.left == 0 {
                // whole transactions that surely end inside this piece: the hot loop
                while let Some(next) = self.whole_transaction(buf, i, base)? {
                    i = next;
                }
                if i == buf.len() {
                    break;
                }
            }
            // near the piece's end, or a varint or transaction cut by the previous piece
            i = self.one_varint(buf, i, base)?;
        }
        self.pos += buf.len() as u64;
        Ok(())
    }

    /// Decode one whole transaction at `buf[i..]` when the bytes left in the piece surely
    /// hold it (5 bytes for the count, 5 for each item: a varint's most); returns where the
    /// next one starts, or None (the caller goes varint by varint). The same checks and
    /// offsets as [`Decoder::one_varint`].
    #[inline]
    fn whole_transaction(&mut self, buf: &[u8], i: usize, base: u64) -> Result<Option<usize>, DecodeError> {
        let n = buf.len();
        if n - i < 5 {
            return Ok(None);
        }
        let mut j = i;
        let count = varint_at(buf, &mut j).ok_or_else(|| Self::too_long(base + i as u64))?;
        let after = base + j as u64;
        if count > self.region_len - after {
            return Err(DecodeError {
                offset: base + i as u64,
                message: format!("item count {count} runs past the region ({} bytes left)", self.region_len - after),
            });
        }
        if (n - j) as u64 / 5 < count {
            return Ok(None);
        }
        let items = &mut self.out.items;
        items.reserve(count as usize);
        let mut prev: u64 = 0;
        let mut k = 0;
        // Four items at a time while 8 bytes remain and they are short; anything else (a
        // longer varint, a bad one, an id above u32) is left to the loop after, which decodes
        // the same bytes again one item at a time and reports it.
        while count - k >= 4 {
            let Some(w) = buf.get(j..j + 8) else { break };
            let Some((v, len)) = four_short_varints(u64::from_le_bytes(w.try_into().expect("8 bytes"))) else { break };
            let first = if k == 0 { v[0] } else { prev + 1 + v[0] };
            let ids = [first, first + 1 + v[1], first + 2 + v[1] + v[2], first + 3 + v[1] + v[2] + v[3]];
            if ids[3] > u32::MAX as u64 {
                break;
            }
            items.extend(ids.map(|id| id as u32));
            prev = ids[3];
            j += len;
            k += 4;
        }
        for k in k..count {
            let at = j;
            let v = varint_fast(buf, &mut j).ok_or_else(|| Self::too_long(base + at as u64))?;
            let id = if k == 0 { v } else { prev + 1 + v };
            if id > u32::MAX as u64 {
                return Err(DecodeError { offset: base + at as u64, message: format!("item id {id} is above 4294967295") });
            }
            items.push(id as u32);
            prev = id;
        }
        self.out.offsets.push(items.len() as i64);
        Ok(Some(j))
    }

    /// Take bytes from `buf[i..]` until one varint is complete (then handle its value) or the
    /// piece ends (then keep what was read of it); returns where the next byte is.
    fn one_varint(&mut self, buf: &[u8], mut i: usize, base: u64) -> Result<usize, DecodeError> {
        if self.shift == 0 {
            self.start = base + i as u64;
            self.acc = 0;
        }
        while i < buf.len() {
            let b = buf[i];
            i += 1;
            if self.shift == 28 && b > 0x0f {
                return Err(Self::too_long(self.start));
            }
            self.acc |= ((b & 0x7f) as u64) << self.shift;
            if b & 0x80 == 0 {
                let (v, at) = (self.acc, self.start);
                self.shift = 0;
                self.acc = 0;
                self.value(v, at, base + i as u64)?;
                return Ok(i);
            }
            self.shift += 7;
        }
        Ok(i)
    }

    /// The baskets, once the whole region has been fed; `transactions`: how many the header
    /// says the region holds (checked when given).
    pub fn finish(self, transactions: Option<u64>) -> Result<Baskets, DecodeError> {
        if self.pos != self.region_len {
            return Err(DecodeError {
                offset: self.pos,
                message: format!("the region ends after {} of its {} bytes", self.pos, self.region_len),
            });
        }
        if self.shift > 0 {
            return Err(DecodeError { offset: self.start, message: "truncated varint at the region's end".into() });
        }
        if self.left > 0 {
            return Err(DecodeError {
                offset: self.pos,
                message: format!("the region ends inside a transaction, {} of its items missing", self.left),
            });
        }
        let got = self.out.len() as u64;
        if let Some(want) = transactions {
            if want != got {
                return Err(DecodeError {
                    offset: self.pos,
                    message: format!("the region holds {got} transactions, its header says {want}"),
                });
            }
        }
        Ok(self.out)
    }
}

/// Decode a whole region.
pub fn decode(buf: &[u8], transactions: Option<u64>) -> Result<Baskets, DecodeError> {
    let mut d = Decoder::new(buf.len() as u64);
    d.feed(buf)?;
    d.finish(transactions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn random_baskets(rng: &mut ChaCha8Rng, n: usize) -> Baskets {
        let lists: Vec<Vec<u32>> = (0..n)
            .map(|_| {
                let k = match rng.gen_range(0..10) {
                    0 => 0,
                    1 => rng.gen_range(100..400),
                    _ => rng.gen_range(1..20),
                };
                (0..k)
                    .map(|_| match rng.gen_range(0..8) {
                        0 => 0,
                        1 => u32::MAX,
                        2 => rng.gen(),
                        _ => rng.gen_range(0..1000),
                    })
                    .collect()
            })
            .collect();
        Baskets::from_lists(lists)
    }

    #[test]
    fn round_trip_random_baskets_whole_and_in_pieces() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for n in [0usize, 1, 2, 50, 2000] {
            let b = random_baskets(&mut rng, n);
            let enc = encode(&b.offsets, &b.items).unwrap();
            assert_eq!(decode(&enc, Some(b.len() as u64)).unwrap(), b);
            for _ in 0..20 {
                let mut d = Decoder::new(enc.len() as u64);
                let mut pos = 0;
                while pos < enc.len() {
                    let step = rng.gen_range(1..=7.min(enc.len() - pos).max(1));
                    d.feed(&enc[pos..pos + step]).unwrap();
                    pos += step;
                }
                d.feed(&[]).unwrap();
                assert_eq!(d.finish(Some(b.len() as u64)).unwrap(), b);
            }
        }
    }

    #[test]
    fn known_bytes() {
        let b = Baskets::from_lists([vec![], vec![0u32, 1, 129], vec![u32::MAX]]);
        let enc = encode(&b.offsets, &b.items).unwrap();
        assert_eq!(enc, vec![0, 3, 0, 0, 127, 1, 0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(decode(&enc, None).unwrap(), b);
    }

    #[test]
    fn encode_refuses_unsorted() {
        assert!(encode(&[0, 2], &[3, 3]).unwrap_err().contains("transaction 0"));
        assert!(encode(&[0, 1], &[3, 4]).is_err());
    }

    fn err(buf: &[u8], tx: Option<u64>) -> DecodeError {
        decode(buf, tx).unwrap_err()
    }

    #[test]
    fn malformed_bytes_are_refused_with_their_offset() {
        // truncated varint
        assert_eq!(err(&[1, 0x80], None).offset, 1);
        assert!(err(&[1, 0x80], None).message.contains("truncated varint"));
        // count past the region
        let e = err(&[0, 5, 1, 1], None);
        assert_eq!((e.offset, e.message.contains("runs past the region")), (1, true));
        // id overflow: u32::MAX then a gap of 0
        let e = err(&[2, 0xff, 0xff, 0xff, 0xff, 0x0f, 0], None);
        assert_eq!((e.offset, e.message.contains("above 4294967295")), (6, true));
        // varint too long / too large
        assert_eq!(err(&[1, 0xff, 0xff, 0xff, 0xff, 0x10], None).offset, 1);
        assert_eq!(err(&[1, 0x80, 0x80, 0x80, 0x80, 0x80, 0], None).offset, 1);
        // last transaction short of items
        assert!(err(&[3, 0x81, 0x01, 0x05], None).message.contains("1 of its items missing"));
        // transaction count other than the header's
        assert!(err(&[0, 0], Some(3)).message.contains("header says 3"));
        // more bytes than the region, fewer
        let mut d = Decoder::new(2);
        assert!(d.feed(&[0, 0, 0]).unwrap_err().message.contains("past the region"));
        let mut d = Decoder::new(2);
        d.feed(&[0]).unwrap();
        assert!(d.finish(None).unwrap_err().message.contains("ends after 1"));
    }

    #[test]
    fn no_panic_on_random_bytes() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for _ in 0..2000 {
            let len = rng.gen_range(0..64);
            let buf: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            let whole = decode(&buf, None);
            // pieces give the same answer as the whole
            let mut d = Decoder::new(len as u64);
            let mut res = Ok(());
            for c in buf.chunks(rng.gen_range(1..8)) {
                res = d.feed(c);
                if res.is_err() {
                    break;
                }
            }
            let pieces = res.and_then(|_| d.finish(None));
            assert_eq!(whole, pieces);
        }
    }

    /// Decode `buf` fed in pieces of the sizes `sizes` returns, stopping at an error.
    fn decode_in_pieces(buf: &[u8], tx: Option<u64>, mut sizes: impl FnMut() -> usize) -> Result<Baskets, DecodeError> {
        let mut d = Decoder::new(buf.len() as u64);
        let mut pos = 0;
        while pos < buf.len() {
            let step = sizes().clamp(1, buf.len() - pos);
            d.feed(&buf[pos..pos + step])?;
            pos += step;
        }
        d.finish(tx)
    }

    #[test]
    fn fast_and_slow_paths_agree_on_valid_corrupted_and_random_bytes() {
        // Fed a byte at a time, the decoder never has 5 bytes ahead and goes varint by varint
        // (the slow path, the reference); whole, it takes whole transactions at once wherever
        // they fit; in pieces of random sizes, both mixed. Every answer, values or error and
        // its offset, must be the same. The bytes written over favour the edges of the
        // varint checks (continuation bits, a fifth byte of 0x0f / 0x10).
        let mut rng = ChaCha8Rng::seed_from_u64(19);
        let edges = [0x00u8, 0x01, 0x0f, 0x10, 0x7f, 0x80, 0x81, 0x8f, 0x90, 0xff];
        for case in 0..1500 {
            let n = rng.gen_range(0..40);
            let b = random_baskets(&mut rng, n);
            let mut buf = encode(&b.offsets, &b.items).unwrap();
            let tx = if rng.gen_bool(0.5) { Some(b.len() as u64) } else { None };
            match case % 4 {
                0 => {}
                1 | 2 => {
                    for _ in 0..rng.gen_range(1..4) {
                        if buf.is_empty() {
                            break;
                        }
                        let k = rng.gen_range(0..buf.len());
                        match rng.gen_range(0..4) {
                            0 => buf[k] = rng.gen(),
                            1 => buf[k] = edges[rng.gen_range(0..edges.len())],
                            2 => {
                                buf.remove(k);
                            }
                            _ => buf.insert(k, edges[rng.gen_range(0..edges.len())]),
                        }
                    }
                }
                _ => {
                    let len = rng.gen_range(0..200);
                    buf = (0..len).map(|_| if rng.gen_bool(0.6) { rng.gen_range(0x80..=0xff) } else { rng.gen_range(0..0x80) }).collect();
                }
            }
            let slow = decode_in_pieces(&buf, tx, || 1);
            assert_eq!(decode(&buf, tx), slow, "whole, case {case}");
            for _ in 0..4 {
                let mut cut = ChaCha8Rng::seed_from_u64(rng.gen());
                let max = cut.gen_range(2..80);
                let pieces = decode_in_pieces(&buf, tx, || cut.gen_range(1..=max));
                assert_eq!(pieces, slow, "random pieces, case {case}");
            }
        }
    }

    #[test]
    fn mutated_encodings_give_the_same_answer_whole_and_in_pieces() {
        // whole buffers take the fast path (whole transactions), small pieces the varint by
        // varint one: every error must be the same, at the same offset
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        for _ in 0..300 {
            let b = random_baskets(&mut rng, 30);
            let mut enc = encode(&b.offsets, &b.items).unwrap();
            for _ in 0..rng.gen_range(0..4) {
                if !enc.is_empty() {
                    let k = rng.gen_range(0..enc.len());
                    enc[k] = rng.gen();
                }
            }
            if rng.gen_bool(0.3) && !enc.is_empty() {
                enc.truncate(rng.gen_range(0..enc.len()));
            }
            let whole = decode(&enc, Some(b.len() as u64));
            let mut d = Decoder::new(enc.len() as u64);
            let mut res = Ok(());
            for c in enc.chunks(rng.gen_range(1..9)) {
                res = d.feed(c);
                if res.is_err() {
                    break;
                }
            }
            assert_eq!(whole, res.and_then(|_| d.finish(Some(b.len() as u64))));
        }
    }
}
