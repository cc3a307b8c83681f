//! CSV baskets in long form: a header row, then one `transaction_id,item` pair per row.
//! Items may be any strings; they are mapped to dense u32 ids by an item dictionary whose
//! order is deterministic (numeric order when every label is an integer, else byte order).
//! Transactions keep the order in which their ids first appear.

use crate::basket::{normalize_tail, Baskets};
use crate::error::ParseError;
use std::collections::HashMap;

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
    if !rdr.read_byte_record(&mut rec).map_err(csv_err)? {
        return Err(err(1, 1, "empty CSV file: expected a header row".into()));
    }
    let header: Vec<String> =
        rec.iter().enumerate().map(|(k, f)| utf8(f, 1, k)).collect::<Result<_, _>>()?;
    let find = |name: &str| {
        header.iter().position(|h| h.trim_start_matches('\u{feff}') == name).ok_or_else(|| {
            err(1, 1, format!("missing column '{name}' in header (found: {})", header.join(", ")))
        })
    };
    let (ti, ii) = (find(tid_col)?, find(item_col)?);
    let mut tx_index: HashMap<String, usize> = HashMap::new();
    let mut tx_ids: Vec<String> = Vec::new();
    let mut label_index: HashMap<String, u32> = HashMap::new();
    let mut labels: Vec<String> = Vec::new();
    let mut pairs: Vec<(u32, u32)> = Vec::new(); // (transaction, provisional item id)
    while rdr.read_byte_record(&mut rec).map_err(csv_err)? {
        let line = rec.position().map_or(0, |p| p.line());
        if rec.len() == 1 && rec.get(0).is_some_and(|f| f.is_empty()) {
            continue; // blank line
        }
        let need = ti.max(ii) + 1;
        if rec.len() < need {
            return Err(err(line, rec.len() as u64 + 1, format!("row has {} fields, expected at least {need}", rec.len())));
        }
        let tid = utf8(&rec[ti], line, ti)?;
        let item = utf8(&rec[ii], line, ii)?;
        if item.is_empty() {
            return Err(err(line, ii as u64 + 1, format!("empty '{item_col}' field")));
        }
        let t = *tx_index.entry(tid).or_insert_with_key(|k| {
            tx_ids.push(k.clone());
            tx_ids.len() - 1
        });
        let n = labels.len() as u32;
        let i = *label_index.entry(item).or_insert_with_key(|k| {
            labels.push(k.clone());
            n
        });
        pairs.push((t as u32, i));
    }
    // Deterministic dictionary: numeric order if all labels are integers, else byte order.
    let mut order: Vec<u32> = (0..labels.len() as u32).collect();
    let numeric: Option<Vec<u64>> = labels.iter().map(|l| l.parse::<u64>().ok()).collect();
    match &numeric {
        Some(v) => order.sort_by_key(|&k| (v[k as usize], k)),
        None => order.sort_by(|&a, &b| labels[a as usize].cmp(&labels[b as usize])),
    }
    let mut remap = vec![0u32; labels.len()];
    for (new, &old) in order.iter().enumerate() {
        remap[old as usize] = new as u32;
    }
    let sorted_labels: Vec<String> = order.iter().map(|&k| labels[k as usize].clone()).collect();
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
}
