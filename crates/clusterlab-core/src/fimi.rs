//! FIMI `.dat` baskets: one transaction per line, items are non-negative integers (u32)
//! separated by blanks or tabs.
//!
//! Conventions (documented in docs/formats.md and tested):
//! - every line ending in `\n` is one transaction, so an empty line is an empty transaction;
//! - a last line without `\n` is a transaction when it holds at least one item;
//! - `\r` before `\n` (CRLF) and trailing blanks are ignored;
//! - duplicate items inside a transaction are dropped and items are sorted (set semantics);
//! - anything else (signs, letters, NUL bytes, items above 4294967295) is an error that
//!   names the line and column.

use crate::basket::{normalize_tail, Baskets};
use crate::error::{locate, ParseError};
use rayon::prelude::*;
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::Path;

/// What a parse found besides the baskets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParseReport {
    /// Duplicate items dropped inside transactions.
    pub duplicates_dropped: u64,
}

struct ChunkError {
    pos: usize,
    message: String,
}

fn describe(b: u8) -> String {
    if b.is_ascii_graphic() {
        format!("'{}'", b as char)
    } else {
        format!("byte 0x{b:02x}")
    }
}

/// Parse one chunk that starts at a line start. `last` says whether an unterminated final
/// line belongs to this chunk.
fn parse_chunk(buf: &[u8], base: usize) -> Result<(Baskets, u64), ChunkError> {
    let mut b = Baskets::new();
    // Rough reservation: an item takes about 3-4 bytes of text.
    b.items.reserve(buf.len() / 4);
    let mut dups = 0u64;
    let mut tx_start = 0usize;
    let n = buf.len();
    let mut i = 0usize;
    let mut line_has_bytes = false;
    while i < n {
        let c = buf[i];
        if c.is_ascii_digit() {
            let start = i;
            let mut v: u64 = 0;
            while i < n && buf[i].is_ascii_digit() {
                v = v * 10 + (buf[i] - b'0') as u64;
                if v > u32::MAX as u64 {
                    let mut j = i;
                    while j < n && buf[j].is_ascii_digit() {
                        j += 1;
                    }
                    return Err(ChunkError {
                        pos: base + start,
                        message: format!(
                            "item {} is larger than 4294967295 (items are u32)",
                            String::from_utf8_lossy(&buf[start..j])
                        ),
                    });
                }
                i += 1;
            }
            if i < n {
                let d = buf[i];
                if !(d == b' ' || d == b'\t' || d == b'\n' || d == b'\r') {
                    return Err(ChunkError {
                        pos: base + i,
                        message: format!("not an integer item: unexpected {} after digits", describe(d)),
                    });
                }
            }
            b.items.push(v as u32);
            line_has_bytes = true;
        } else if c == b' ' || c == b'\t' || c == b'\r' {
            if c == b'\r' && i + 1 < n && buf[i + 1] != b'\n' {
                return Err(ChunkError {
                    pos: base + i,
                    message: "carriage return inside a line (only CRLF line ends are accepted)".into(),
                });
            }
            line_has_bytes = true;
            i += 1;
        } else if c == b'\n' {
            dups += normalize_tail(&mut b.items, tx_start) as u64;
            b.offsets.push(b.items.len() as i64);
            tx_start = b.items.len();
            line_has_bytes = false;
            i += 1;
        } else if c == b'-' {
            return Err(ChunkError {
                pos: base + i,
                message: "negative item (items are non-negative integers)".into(),
            });
        } else {
            return Err(ChunkError {
                pos: base + i,
                message: format!("not an integer item: unexpected {}", describe(c)),
            });
        }
    }
    if line_has_bytes && b.items.len() > tx_start {
        dups += normalize_tail(&mut b.items, tx_start) as u64;
        b.offsets.push(b.items.len() as i64);
    }
    Ok((b, dups))
}

/// Split `buf` into about `parts` chunks, each ending just after a newline (the last one at
/// the end of the buffer).
fn chunk_bounds(buf: &[u8], parts: usize) -> Vec<(usize, usize)> {
    let n = buf.len();
    let parts = parts.max(1);
    let mut bounds = Vec::with_capacity(parts);
    let mut start = 0;
    for p in 1..=parts {
        if start >= n {
            break;
        }
        let mut end = if p == parts { n } else { (n * p / parts).max(start) };
        if end < n {
            end = match memchr::memchr(b'\n', &buf[end..]) {
                Some(off) => end + off + 1,
                None => n,
            };
        }
        bounds.push((start, end));
        start = end;
    }
    bounds
}

/// Parse a FIMI buffer, using all rayon threads on large inputs. `first_line` is the line
/// number of the buffer's first line in its file (for error messages of byte ranges).
pub fn parse(buf: &[u8], first_line: u64) -> Result<(Baskets, ParseReport), ParseError> {
    const MIN_CHUNK: usize = 1 << 20;
    let parts = (buf.len() / MIN_CHUNK).clamp(1, rayon::current_num_threads() * 4);
    let bounds = chunk_bounds(buf, parts);
    let results: Vec<Result<(Baskets, u64), ChunkError>> = bounds
        .par_iter()
        .map(|&(s, e)| parse_chunk(&buf[s..e], s))
        .collect();
    let mut parsed = Vec::with_capacity(results.len());
    for r in results {
        match r {
            Ok(x) => parsed.push(x),
            Err(e) => {
                // Chunks are in file order, so the first error found is the earliest.
                let (line, column) = locate(buf, e.pos, first_line);
                return Err(ParseError { line, column, message: e.message });
            }
        }
    }
    let report = ParseReport { duplicates_dropped: parsed.iter().map(|p| p.1).sum() };
    Ok((concat(parsed.into_iter().map(|p| p.0).collect()), report))
}

/// Join per-chunk baskets in order. The copy runs in parallel: on a 10M-transaction file a
/// serial join of ~800 MB of items costs as much as the parse itself.
fn concat(parts: Vec<Baskets>) -> Baskets {
    if parts.len() == 1 {
        return parts.into_iter().next().unwrap();
    }
    let n_items: usize = parts.iter().map(|p| p.items.len()).sum();
    let n_tx: usize = parts.iter().map(|p| p.len()).sum();
    let mut items = vec![0u32; n_items];
    let mut offsets = vec![0i64; n_tx + 1];
    // Carve the outputs into per-part slices, then fill them concurrently.
    let mut jobs = Vec::with_capacity(parts.len());
    let (mut it_rest, mut off_rest) = (&mut items[..], &mut offsets[1..]);
    let mut base = 0i64;
    for p in &parts {
        let (a, b) = it_rest.split_at_mut(p.items.len());
        let (c, d) = off_rest.split_at_mut(p.len());
        jobs.push((p, a, c, base));
        base += p.items.len() as i64;
        it_rest = b;
        off_rest = d;
    }
    jobs.into_par_iter().for_each(|(p, it, off, base)| {
        it.copy_from_slice(&p.items);
        for (o, &src) in off.iter_mut().zip(&p.offsets[1..]) {
            *o = src + base;
        }
    });
    Baskets { offsets, items }
}

/// The byte range `[start, end)` adjusted to line boundaries: a line belongs to the range
/// that holds its first byte. Ranges that tile a file thus tile its lines.
pub fn align_range(buf: &[u8], start: usize, end: usize) -> (usize, usize) {
    let n = buf.len();
    let align = |p: usize| -> usize {
        if p == 0 || p >= n {
            return p.min(n);
        }
        if buf[p - 1] == b'\n' {
            return p;
        }
        match memchr::memchr(b'\n', &buf[p..]) {
            Some(off) => p + off + 1,
            None => n,
        }
    };
    let s = align(start);
    let e = align(end).max(s);
    (s, e)
}

/// Open a file read-only as bytes (memory-mapped; empty files are fine).
pub fn map_file(path: &Path) -> std::io::Result<Option<memmap2::Mmap>> {
    let f = File::open(path)?;
    if f.metadata()?.len() == 0 {
        return Ok(None);
    }
    // SAFETY: the map is read-only; a file truncated underneath us by another process is
    // the usual mmap caveat, accepted for basket files that are written once.
    let m = unsafe { memmap2::Mmap::map(&f)? };
    Ok(Some(m))
}

/// Errors of reading a file: I/O or parse.
#[derive(Debug)]
pub enum ReadError {
    Io(std::io::Error),
    Parse(ParseError),
}

impl From<std::io::Error> for ReadError {
    fn from(e: std::io::Error) -> Self {
        ReadError::Io(e)
    }
}

/// Read a whole FIMI file, or just the lines whose first byte lies in `range`.
///
/// A regular file is memory-mapped; only the pages of the range are touched (line numbers
/// before the range are counted only when an error must be reported). Anything else (a pipe,
/// a character device, a file under /proc whose size reads as 0) is read as a stream, see
/// [`read_stream`]; a byte range of such a file is refused.
pub fn read_file(path: &Path, range: Option<(u64, u64)>) -> Result<(Baskets, ParseReport), ReadError> {
    let f = File::open(path)?;
    let meta = f.metadata()?;
    if meta.is_dir() {
        return Err(ReadError::Io(std::io::Error::other("is a directory")));
    }
    if !meta.is_file() || meta.len() == 0 {
        if range.is_some() && !meta.is_file() {
            return Err(ReadError::Io(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a byte range needs a regular file (this is a pipe or device)",
            )));
        }
        let (b, rep) = read_stream(f)?;
        if range.is_some() && !b.is_empty() {
            return Err(ReadError::Io(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a byte range needs a file whose size is known (this one reports size 0)",
            )));
        }
        return Ok((b, rep));
    }
    // SAFETY: the map is read-only; a file truncated underneath us by another process is
    // the usual mmap caveat, accepted for basket files that are written once.
    let map = unsafe { memmap2::Mmap::map(&f)? };
    let buf: &[u8] = &map;
    let (s, e) = match range {
        Some((s, e)) => align_range(buf, s.min(usize::MAX as u64) as usize, e.min(usize::MAX as u64) as usize),
        None => (0, buf.len()),
    };
    parse_windows(&map, s, e, WINDOW)
}

/// Bytes of a mapped file parsed at a time by [`read_file`].
const WINDOW: usize = 64 << 20;

/// Parse `map[s..e]` window by window into one output reserved from the first window's
/// density, releasing each window's pages once parsed: memory holds the baskets plus about
/// two windows (text and its parsed copy), not the whole text and two copies of the baskets.
fn parse_windows(map: &memmap2::Mmap, s: usize, e: usize, window: usize) -> Result<(Baskets, ParseReport), ReadError> {
    let buf: &[u8] = map;
    let mut out = Baskets::new();
    let mut report = ParseReport::default();
    let mut pos = s;
    while pos < e {
        let end = if e - pos <= window + window / 2 {
            e
        } else {
            memchr::memchr(b'\n', &buf[pos + window..e]).map_or(e, |o| pos + window + o + 1)
        };
        let (b, rep) = parse(&buf[pos..end], 1).map_err(|mut err| {
            // Lines before the window are counted only now, for the message.
            err.line += memchr::memchr_iter(b'\n', &buf[..pos]).count() as u64;
            ReadError::Parse(err)
        })?;
        report.duplicates_dropped += rep.duplicates_dropped;
        if pos == s {
            if end == e {
                return Ok((b, report));
            }
            // Reserve for the whole range at this window's density (+2%): pages never
            // written are never resident, and a denser rest only grows the vectors.
            let scale = |x: usize| (x as f64 * (e - s) as f64 / (end - s) as f64 * 1.02) as usize;
            out.items.reserve_exact(scale(b.items.len()));
            out.offsets.reserve_exact(scale(b.offsets.len()));
        }
        let base = out.items.len() as i64;
        out.items.extend_from_slice(&b.items);
        out.offsets.extend(b.offsets[1..].iter().map(|o| o + base));
        // SAFETY: the map is private and read-only, so dropped pages are read again from
        // the file if touched; nothing refers to this window's bytes any more.
        unsafe {
            let _ = map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, pos, end - pos);
        }
        pos = end;
    }
    Ok((out, report))
}

/// Bytes of text parsed at a time when streaming.
const STREAM_BLOCK: usize = 8 << 20;

/// Parse FIMI text from a reader block by block (a pipe, `/dev/stdin`, a device, a /proc
/// file): besides the baskets, memory holds one block of text (longer only for a longer
/// line). The first bad byte stops the read, so an endless stream of garbage fails at once.
pub fn read_stream<R: Read>(r: R) -> Result<(Baskets, ParseReport), ReadError> {
    read_stream_blocks(r, STREAM_BLOCK)
}

fn read_stream_blocks<R: Read>(mut r: R, block: usize) -> Result<(Baskets, ParseReport), ReadError> {
    let mut out = Baskets::new();
    let mut report = ParseReport::default();
    let mut buf = vec![0u8; block.max(1)];
    let mut have = 0usize;
    let mut first_line = 1u64;
    let mut eof = false;
    loop {
        // Fill the block (a pipe hands out at most 64 KB per read; /proc/sys files refuse
        // reads larger than the kernel will allocate, so ask for at most 256 KB at a time).
        while have < buf.len() && !eof {
            let upto = buf.len().min(have + (256 << 10));
            match r.read(&mut buf[have..upto]) {
                Ok(0) => eof = true,
                Ok(n) => have += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ReadError::Io(e)),
            }
        }
        // Parse the complete lines; keep a partial last line for the next block.
        let cut = if eof { have } else { memchr::memrchr(b'\n', &buf[..have]).map_or(0, |p| p + 1) };
        if cut == 0 && !eof {
            let n = buf.len();
            buf.resize(2 * n, 0); // one line longer than the block: grow it
            continue;
        }
        let (b, rep) = parse(&buf[..cut], first_line).map_err(ReadError::Parse)?;
        // Every '\n' ends exactly one transaction, so the lines consumed are known.
        first_line += b.len() as u64;
        report.duplicates_dropped += rep.duplicates_dropped;
        out.extend(&b);
        buf.copy_within(cut..have, 0);
        have -= cut;
        if eof {
            break;
        }
    }
    Ok((out, report))
}

/// `parts` byte ranges of a file that tile its lines (empty ranges where lines are few).
pub fn split_ranges(path: &Path, parts: usize) -> std::io::Result<Vec<(u64, u64)>> {
    let map = map_file(path)?;
    let buf: &[u8] = map.as_deref().unwrap_or(&[]);
    let n = buf.len();
    Ok((0..parts.max(1))
        .map(|p| {
            let (s, e) = align_range(buf, n * p / parts.max(1), n * (p + 1) / parts.max(1));
            (s as u64, e as u64)
        })
        .collect())
}

/// Write baskets as FIMI text, one transaction per line.
pub fn write<W: Write>(b: &Baskets, out: W) -> std::io::Result<()> {
    write_csr(&b.offsets, &b.items, out)
}

/// Write CSR arrays (as held by Python without a copy) as FIMI text.
pub fn write_csr<W: Write>(offsets: &[i64], items: &[u32], out: W) -> std::io::Result<()> {
    let mut w = BufWriter::with_capacity(1 << 20, out);
    let mut fmt = itoa::Buffer::new();
    for win in offsets.windows(2) {
        let t = &items[win[0] as usize..win[1] as usize];
        for (k, &it) in t.iter().enumerate() {
            if k > 0 {
                w.write_all(b" ")?;
            }
            w.write_all(fmt.format(it).as_bytes())?;
        }
        w.write_all(b"\n")?;
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Baskets, ParseError> {
        parse(s.as_bytes(), 1).map(|x| x.0)
    }

    #[test]
    fn basic_and_conventions() {
        let b = p("1 2 3\n\n4\t5  \r\n3 1 3\n7").unwrap();
        let v: Vec<&[u32]> = b.iter().collect();
        assert_eq!(v, vec![&[1, 2, 3][..], &[][..], &[4, 5][..], &[1, 3][..], &[7][..]]);
        assert_eq!(p("").unwrap().len(), 0);
        assert_eq!(p("1\n").unwrap().len(), 1);
        assert_eq!(p("1\n   ").unwrap().len(), 1);
        assert_eq!(p("4294967295\n").unwrap().items, vec![u32::MAX]);
    }

    #[test]
    fn errors_name_line_and_column() {
        let e = p("1 2\n3 x4\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 3));
        let e = p("1 2\n3 -4\n").unwrap_err();
        assert!(e.message.contains("negative"));
        let e = p("1\n2\n4294967296\n").unwrap_err();
        assert_eq!((e.line, e.column), (3, 1));
        assert!(e.message.contains("larger"));
        let e = p("1 2\0\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 4));
        assert!(e.message.contains("0x00"));
        let e = p("12a\n").unwrap_err();
        assert_eq!(e.column, 3);
    }

    #[test]
    fn parallel_equals_serial() {
        let mut s = String::new();
        for t in 0..200_000u32 {
            for k in 0..(t % 7) {
                s.push_str(&format!("{} ", (t * 31 + k * 17) % 1000));
            }
            s.push('\n');
        }
        let (a, _) = parse(s.as_bytes(), 1).unwrap();
        let (b, _) = parse_chunk(s.as_bytes(), 0).map_err(|_| ()).unwrap();
        assert_eq!(a, b);
        // An error deep in a large buffer is located in the right line.
        let bad = format!("{s}1 2 z\n");
        let e = parse(bad.as_bytes(), 1).unwrap_err();
        assert_eq!(e.line, 200_001);
    }

    #[test]
    fn ranges_tile_lines() {
        let text = b"1 2\n3\n\n4 5 6\n7";
        for parts in 1..8 {
            let n = text.len();
            let mut all = Baskets::new();
            for k in 0..parts {
                let (s, e) = align_range(text, n * k / parts, n * (k + 1) / parts);
                all.extend(&parse(&text[s..e], 1).unwrap().0);
            }
            assert_eq!(all, parse(text, 1).unwrap().0, "parts={parts}");
        }
    }

    /// A reader that hands out at most `step` bytes per call, like a pipe.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.step.min(out.len()).min(self.data.len());
            out[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    #[test]
    fn stream_equals_whole_parse() {
        let mut text = String::new();
        for t in 0..3000u32 {
            for k in 0..(t % 9) {
                text.push_str(&format!("{} ", (t * 13 + k * 101) % 5000));
            }
            text.push_str(if t % 5 == 0 { "\r\n" } else { "\n" });
        }
        text.push_str("1 2 2"); // unterminated last line, with a duplicate
        let want = parse(text.as_bytes(), 1).unwrap();
        for (block, step) in [(7, 3), (64, 1000), (4096, 17), (1 << 20, 65536)] {
            let got = read_stream_blocks(Trickle { data: text.as_bytes(), step }, block).map_err(|_| ()).unwrap();
            assert_eq!(got.0, want.0, "block {block}");
            assert_eq!(got.1, want.1);
        }
        // An error in a later block keeps its line and column.
        let bad = format!("{text}\n4 5\n6 x\n");
        let e = match read_stream_blocks(Trickle { data: bad.as_bytes(), step: 100 }, 64) {
            Err(ReadError::Parse(e)) => e,
            other => panic!("{other:?}"),
        };
        assert_eq!((e.line, e.column), (3003, 3));
        assert_eq!(read_stream_blocks(Trickle { data: b"", step: 1 }, 8).map_err(|_| ()).unwrap().0.len(), 0);
    }

    #[test]
    fn range_errors_count_lines_before_the_range() {
        let dir = std::env::temp_dir().join(format!("clusterlab-fimi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.dat");
        std::fs::write(&path, b"1\n2\n3\n4 y\n5\n").unwrap();
        let e = match read_file(&path, Some((4, 100))) {
            Err(ReadError::Parse(e)) => e,
            other => panic!("{other:?}"),
        };
        assert_eq!((e.line, e.column), (4, 3));
        let (b, _) = read_file(&path, Some((0, 4))).map_err(|_| ()).unwrap();
        assert_eq!(b.len(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn windows_equal_whole_parse_and_errors_keep_their_line() {
        let mut text = String::new();
        for t in 0..3000u32 {
            text += &format!("{} {} {}\n", t % 7, 10 + t % 13, 100 + t % 101);
        }
        text += "5 5 6"; // last line without newline, with a duplicate
        let dir = std::env::temp_dir().join(format!("clusterlab-fimi-win-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("w.dat");
        std::fs::write(&path, &text).unwrap();
        let map = map_file(&path).unwrap().unwrap();
        let whole = parse(text.as_bytes(), 1).unwrap();
        for window in [1usize, 100, 4096, 1 << 20] {
            let (b, rep) = parse_windows(&map, 0, text.len(), window).unwrap();
            assert_eq!((b, rep.duplicates_dropped), (whole.0.clone(), whole.1.duplicates_dropped), "window {window}");
        }
        let bad = text.replacen("100 ", "100 x", 1).replacen("\n5 ", "\n5 y", 1);
        std::fs::write(&path, &bad).unwrap();
        let map = map_file(&path).unwrap().unwrap();
        let want = parse(bad.as_bytes(), 1).unwrap_err();
        match parse_windows(&map, 0, bad.len(), 64) {
            Err(ReadError::Parse(e)) => assert_eq!((e.line, e.column), (want.line, want.column)),
            other => panic!("expected a parse error, got {other:?}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn write_roundtrip() {
        let b = Baskets::from_lists([vec![1u32, 20], vec![], vec![300]]);
        let mut out = Vec::new();
        write(&b, &mut out).unwrap();
        assert_eq!(out, b"1 20\n\n300\n");
        assert_eq!(parse(&out, 1).unwrap().0, b);
    }
}
