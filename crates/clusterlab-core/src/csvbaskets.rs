//! CSV baskets in long form: a header row, then one `transaction_id,item` pair per row.
//! Items may be any strings; they are mapped to dense u32 ids by an item dictionary whose
//! order is deterministic (numeric order when every label is an integer, else byte order).
//! Transactions keep the order in which their ids first appear. A quote left open at the end
//! of the input is an error (the csv crate would take the rest of the file as one field).

use crate::basket::{normalize_tail, Baskets};
use crate::error::ParseError;
use crate::labels::{FastMap, LabelDictionary};

/// Baskets plus the label of every item id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelledBaskets {
    pub baskets: Baskets,
    pub labels: Vec<String>,
    pub transaction_ids: Vec<String>,
}

fn err(line: u64, column: u64, message: String) -> ParseError {
    ParseError { line, column, message }
}

/// Parse CSV bytes. `tid_col` and `item_col` name the header columns to use.
pub fn parse(buf: &[u8], tid_col: &str, item_col: &str) -> Result<LabelledBaskets, ParseError> {
    parse_share(buf, tid_col, item_col, 0, 1)
}

/// Where a quote opened at the start of a field is never closed, scanning from `from` (a
/// record start) to the end: `Some((byte offset of the quote, field number, whether a record
/// ended between `from` and the quote))`. Mirrors the
/// csv crate's reader: a quote opens a quoted field only as a field's first byte, `""` inside
/// is an escaped quote, and `\r` or `\n` end a record.
fn unterminated_quote(buf: &[u8], from: usize) -> Option<(usize, u64, bool)> {
    #[derive(PartialEq)]
    enum S {
        Start,
        Field,
        Quoted,
        AfterQuote,
    }
    let mut state = S::Start;
    let (mut field, mut open, mut ended, mut open_after_end) = (1u64, 0usize, false, false);
    for (k, &c) in buf.iter().enumerate().skip(from) {
        state = match (state, c) {
            (S::Quoted, b'"') => S::AfterQuote,
            (S::Quoted, _) | (S::AfterQuote, b'"') => S::Quoted,
            (S::Start, b'"') => {
                (open, open_after_end) = (k, ended);
                S::Quoted
            }
            (_, b',') => {
                field += 1;
                S::Start
            }
            (_, b'\n') | (_, b'\r') => {
                (field, ended) = (1, true);
                S::Start
            }
            _ => S::Field,
        };
    }
    (state == S::Quoted).then_some((open, field, open_after_end))
}

/// Parse CSV bytes, keeping only the transactions of share `rank` of `size`: transactions
/// `[T*rank/size, T*(rank+1)/size)` in order of first appearance, T counted over the whole
/// input. The item dictionary is the whole input's, so every share numbers items alike.
pub fn parse_share(buf: &[u8], tid_col: &str, item_col: &str, rank: usize, size: usize) -> Result<LabelledBaskets, ParseError> {
    let mut rdr = csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(buf);
    let mut rec = csv::ByteRecord::new();
    let utf8 = |bytes: &[u8], line: u64, field: usize| -> Result<String, ParseError> {
        std::str::from_utf8(bytes).map(|s| s.trim().to_string()).map_err(|e| {
            err(
                line,
                field as u64 + 1,
                format!("not UTF-8 text (invalid byte at offset {} of field {})", e.valid_up_to(), field + 1),
            )
        })
    };
    let csv_err = |e: csv::Error| {
        let line = e.position().map_or(0, |p| p.line());
        err(line, 1, format!("malformed CSV: {e}"))
    };
    // A quote left open swallows the rest of the input into the record that holds it (always
    // the last one), so any error in a record starting at `from` may really be that.
    let quote_error = |from: (usize, u64), this_record: bool| {
        let found = unterminated_quote(buf, from.0.min(buf.len()));
        found.filter(|q| !(this_record && q.2)).map(|(pos, field, _)| {
            let line = from.1 + memchr::memchr_iter(b'\n', &buf[from.0.min(pos)..pos]).count() as u64;
            err(line, field, format!("unterminated quote: field {field} opens a quote that is never closed"))
        })
    };
    if !rdr.read_byte_record(&mut rec).map_err(csv_err)? {
        return Err(err(1, 1, "empty CSV file: expected a header row".into()));
    }
    let header: Vec<String> = rec
        .iter()
        .enumerate()
        .map(|(k, f)| utf8(f, 1, k))
        .collect::<Result<_, _>>()
        .map_err(|e| quote_error((0, 1), true).unwrap_or(e))?;
    let find = |name: &str| {
        header.iter().position(|h| h.trim_start_matches('\u{feff}') == name).ok_or_else(|| {
            let e = err(1, 1, format!("missing column '{name}' in header (found: {})", header.join(", ")));
            quote_error((0, 1), true).unwrap_or(e)
        })
    };
    let (ti, ii) = (find(tid_col)?, find(item_col)?);
    let need = ti.max(ii) + 1;
    let mut tx_index: FastMap<String, usize> = FastMap::default();
    let mut tx_ids: Vec<String> = Vec::new();
    let mut dict = LabelDictionary::new();
    let mut pairs: Vec<(u32, u32)> = Vec::new(); // (transaction, provisional item id)
    let mut last_start = (0usize, 1u64); // byte and line where the last record starts
    while rdr.read_byte_record(&mut rec).map_err(csv_err)? {
        let line = rec.position().map_or(0, |p| p.line());
        last_start = rec.position().map_or(last_start, |p| (p.byte() as usize, p.line()));
        if rec.len() == 1 && rec.get(0).is_some_and(|f| f.is_empty()) {
            continue; // blank line
        }
        let fields = || -> Result<(String, String), ParseError> {
            if rec.len() < need {
                return Err(err(line, rec.len() as u64 + 1, format!("row has {} fields, expected at least {need}", rec.len())));
            }
            let (tid, item) = (utf8(&rec[ti], line, ti)?, utf8(&rec[ii], line, ii)?);
            if item.is_empty() {
                return Err(err(line, ii as u64 + 1, format!("empty '{item_col}' field")));
            }
            Ok((tid, item))
        };
        let (tid, item) = fields().map_err(|e| quote_error(last_start, true).unwrap_or(e))?;
        let t = *tx_index.entry(tid).or_insert_with_key(|k| {
            tx_ids.push(k.clone());
            tx_ids.len() - 1
        });
        pairs.push((t as u32, dict.id(&item)));
    }
    if let Some(e) = quote_error(last_start, false) {
        return Err(e);
    }
    // Deterministic dictionary: numeric order if all labels are integers, else byte order.
    let (sorted_labels, remap) = dict.sorted(true);
    // This share's transactions, in first-appearance order.
    let size = size.max(1);
    let (lo, hi) = (tx_ids.len() * rank / size, tx_ids.len() * (rank + 1) / size);
    let tx_ids: Vec<String> = tx_ids.drain(lo.min(hi)..hi).collect();
    pairs.retain(|&(t, _)| (lo..hi).contains(&(t as usize)));
    for p in pairs.iter_mut() {
        p.0 -= lo as u32;
    }
    // Group pairs by transaction, keeping first-appearance order of transactions.
    let mut counts = vec![0i64; tx_ids.len() + 1];
    for &(t, _) in &pairs {
        counts[t as usize + 1] += 1;
    }
    for k in 1..counts.len() {
        counts[k] += counts[k - 1];
    }
    let mut items = vec![0u32; pairs.len()];
    let mut fill = counts.clone();
    for &(t, i) in &pairs {
        items[fill[t as usize] as usize] = remap[i as usize];
        fill[t as usize] += 1;
    }
    let mut b = Baskets::new();
    for t in 0..tx_ids.len() {
        let start = b.items.len();
        b.items.extend_from_slice(&items[counts[t] as usize..counts[t + 1] as usize]);
        normalize_tail(&mut b.items, start);
        b.offsets.push(b.items.len() as i64);
    }
    Ok(LabelledBaskets { baskets: b, labels: sorted_labels, transaction_ids: tx_ids })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_items_and_order() {
        let lb = parse(b"transaction_id,item\nt1,milk\nt2,bread\nt1,bread\nt1,milk\n", "transaction_id", "item").unwrap();
        assert_eq!(lb.labels, vec!["bread", "milk"]);
        assert_eq!(lb.transaction_ids, vec!["t1", "t2"]);
        assert_eq!(lb.baskets.iter().collect::<Vec<_>>(), vec![&[0, 1][..], &[0][..]]);
    }

    #[test]
    fn numeric_labels_sort_numerically() {
        let lb = parse(b"transaction_id,item\n1,10\n1,2\n", "transaction_id", "item").unwrap();
        assert_eq!(lb.labels, vec!["2", "10"]);
    }

    #[test]
    fn errors() {
        let e = parse(b"tid,item\n1,a\n", "transaction_id", "item").unwrap_err();
        assert!(e.message.contains("missing column 'transaction_id'"));
        let e = parse(b"transaction_id,item\n1,a\n2,\xff\xfe\n", "transaction_id", "item").unwrap_err();
        assert_eq!((e.line, e.column), (3, 2));
        assert!(e.message.contains("UTF-8"));
        let e = parse(b"", "transaction_id", "item").unwrap_err();
        assert!(e.message.contains("header"));
    }

    #[test]
    fn unterminated_quote_is_an_error() {
        let e = parse(b"transaction_id,item\n1,a\n2,\"b\n3,c\n", "transaction_id", "item").unwrap_err();
        assert_eq!((e.line, e.column), (3, 2), "{e}");
        assert!(e.message.contains("unterminated quote"));
        let e = parse(b"transaction_id,item\r\n1,\"x\"\"\r\n", "transaction_id", "item").unwrap_err();
        assert_eq!((e.line, e.column), (2, 2), "{e}");
        let e = parse(b"transaction_id,item\n1,a\n\"2\n,b\n", "transaction_id", "item").unwrap_err();
        assert_eq!((e.line, e.column), (3, 1), "{e}");
        // A short row before a quote left open at the end is reported as the first error.
        let e = parse(b"transaction_id,item\n1\n2,\"b\n", "transaction_id", "item").unwrap_err();
        assert_eq!((e.line, e.column), (2, 2), "{e}");
        // Closed quotes, escaped quotes and quotes inside unquoted fields are fine.
        let ok = parse(b"transaction_id,item\n\"1\",\"a\"\"b\"\n1,c\"d\n2,\"\"\"\"\n", "transaction_id", "item").unwrap();
        assert_eq!(ok.labels, vec!["\"", "a\"b", "c\"d"]);
    }

    #[test]
    fn shares_tile_transactions_with_one_dictionary() {
        let text = b"transaction_id,item\nt1,x\nt2,y\nt3,z\nt1,w\nt4,x\n";
        let all = parse(text, "transaction_id", "item").unwrap();
        let mut joined = Baskets::new();
        let mut tids = Vec::new();
        for r in 0..3 {
            let s = parse_share(text, "transaction_id", "item", r, 3).unwrap();
            assert_eq!(s.labels, all.labels);
            joined.extend(&s.baskets);
            tids.extend(s.transaction_ids);
        }
        assert_eq!(joined, all.baskets);
        assert_eq!(tids, all.transaction_ids);
    }
}
