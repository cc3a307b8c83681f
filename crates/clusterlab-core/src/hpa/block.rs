//! The wire form of HPA message blocks: item ranks (and prefix-record lengths) as
//! little-endian words of 2 bytes, when every item rank is below 65,536 and no record is
//! longer, or of 4 bytes otherwise. Senders encode their ready blocks here and owners decode
//! what they receive, so both ends of the wire share one definition.

/// Check a word width (2 or 4 bytes).
pub fn check_width(width: usize) -> Result<(), String> {
    if width == 2 || width == 4 {
        Ok(())
    } else {
        Err(format!("item width must be 2 or 4 bytes, got {width}"))
    }
}

/// Words as little-endian bytes of `width` each (2-byte words must fit in a u16).
pub fn encode(words: &[u32], width: usize) -> Vec<u8> {
    if width == 2 {
        debug_assert!(words.iter().all(|&x| x <= u16::MAX as u32));
        words.iter().flat_map(|&x| (x as u16).to_le_bytes()).collect()
    } else {
        words.iter().flat_map(|&x| x.to_le_bytes()).collect()
    }
}

/// Words of a received block; an error names a block that is not a whole number of
/// `group` words (1 for prefix records, k for k-itemsets).
pub fn decode(data: &[u8], width: usize, group: usize) -> Result<Vec<u32>, String> {
    check_width(width)?;
    let unit = width * group.max(1);
    if !data.len().is_multiple_of(unit) {
        return Err(if group > 1 {
            format!("message block of {} bytes is not a whole number of {group}-itemsets", data.len())
        } else {
            format!("message block of {} bytes is not a whole number of {width}-byte words", data.len())
        });
    }
    Ok(if width == 2 {
        data.chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]]) as u32).collect()
    } else {
        data.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let w = [1u32, 65535, 0, 7];
        assert_eq!(encode(&w, 2), vec![1, 0, 255, 255, 0, 0, 7, 0]);
        assert_eq!(decode(&encode(&w, 2), 2, 2).unwrap(), w);
        let big = [70000u32, 1];
        assert_eq!(decode(&encode(&big, 4), 4, 1).unwrap(), big);
        assert!(decode(&[0; 6], 4, 1).unwrap_err().contains("4-byte words"));
        assert!(decode(&[0; 6], 2, 2).unwrap_err().contains("2-itemsets"));
        assert!(check_width(3).is_err());
    }
}
