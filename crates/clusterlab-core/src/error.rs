//! Parse errors that name the line and column, so a user can open the file at the fault.

use std::fmt;

/// Where a basket file is wrong and what is wrong there. Line and column are 1-based;
/// column counts bytes. The caller adds the file name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub line: u64,
    pub column: u64,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}: {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for ParseError {}

/// Line and column (1-based) of byte `pos` in `buf`, counting lines from `first_line`.
pub fn locate(buf: &[u8], pos: usize, first_line: u64) -> (u64, u64) {
    let pos = pos.min(buf.len());
    let before = &buf[..pos];
    let line = first_line + memchr::memchr_iter(b'\n', before).count() as u64;
    let line_start = memchr::memrchr(b'\n', before).map_or(0, |p| p + 1);
    (line, (pos - line_start) as u64 + 1)
}
