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
        for k in 0..count {
            let at = j;
            let b = buf[j];
            let v = if b < 0x80 {
                j += 1;
                b as u64
            } else {
                varint_at(buf, &mut j).ok_or_else(|| Self::too_long(base + at as u64))?
            };
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
