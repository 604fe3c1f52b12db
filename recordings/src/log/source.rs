//! A log file's rows, read as a stream: JSON Lines (plain, gzip or zstd, told by the first
//! bytes) a line at a time with a bound on its length, or Parquet a row group at a time. A row
//! that cannot be read is handed on as a bad row with its place; a file that stops being
//! readable ends with one.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::{Field, Row};
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};

use super::row::{Columns, LogRow, read_row};

/// Where a row is in its file: the line (JSON Lines) or the row's number in the file
/// (Parquet), from 1, and for Parquet its row group (from 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RowPlace {
    pub row: u64,
    pub row_group: Option<usize>,
}

/// What reading one file yields, in file order.
pub(super) enum Yielded {
    /// A row read as a request.
    Row(RowPlace, Box<LogRow>),
    /// A row that cannot be read: `rows` rows (more than one when a Parquet row group's
    /// remaining rows are lost with it), and why.
    Bad(RowPlace, u64, String),
    /// The file, or the rest of it from `RowPlace`, cannot be read (no row counted).
    Unreadable(Option<RowPlace>, String),
}

const GZIP: [u8; 2] = [0x1f, 0x8b];
const ZSTD: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
const PARQUET: [u8; 4] = *b"PAR1";

/// Reads the file at `path`, handing each row to `visit`. `max_row_bytes` bounds a row.
pub(super) fn read_file(path: &Path, max_row_bytes: usize, visit: &mut dyn FnMut(Yielded)) {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(error) => return visit(Yielded::Unreadable(None, error.to_string())),
    };
    let mut magic = [0u8; 4];
    let read = match read_prefix(&mut file, &mut magic) {
        Ok(read) => read,
        Err(error) => return visit(Yielded::Unreadable(None, error.to_string())),
    };
    if magic[..read] == PARQUET {
        return read_parquet(file, max_row_bytes, visit);
    }
    match File::open(path) {
        Ok(file) => read_json_lines(&magic[..read], file, max_row_bytes, visit),
        Err(_) => visit(Yielded::Unreadable(None, "cannot be opened again".into())),
    }
}

/// Reads a log's `bytes` (JSON Lines, plain or compressed), as [`read_file`] reads a file.
pub(super) fn read_bytes(bytes: &[u8], max_row_bytes: usize, visit: &mut dyn FnMut(Yielded)) {
    let magic = &bytes[..bytes.len().min(PARQUET.len())];
    if magic == PARQUET {
        return visit(Yielded::Unreadable(
            None,
            "Parquet is read from a file: hand its rows over as JSON Lines".into(),
        ));
    }
    read_json_lines(magic, bytes, max_row_bytes, visit);
}

/// Reads JSON Lines from `source`, inflated when its first bytes (`magic`) are gzip's or
/// zstd's.
fn read_json_lines(
    magic: &[u8],
    source: impl Read,
    max_row_bytes: usize,
    visit: &mut dyn FnMut(Yielded),
) {
    let stream: Box<dyn Read + '_> = if magic.starts_with(&GZIP) {
        Box::new(flate2::read::MultiGzDecoder::new(source))
    } else if magic == ZSTD {
        match zstd::stream::read::Decoder::new(source) {
            Ok(decoder) => Box::new(decoder),
            Err(error) => return visit(Yielded::Unreadable(None, format!("zstd: {error}"))),
        }
    } else {
        Box::new(source)
    };
    read_lines(
        BufReader::with_capacity(1 << 16, stream),
        max_row_bytes,
        visit,
    );
}

/// Fills `buffer` from the start of the file as far as it goes.
fn read_prefix(file: &mut File, buffer: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match file.read(&mut buffer[filled..])? {
            0 => break,
            read => filled += read,
        }
    }
    Ok(filled)
}

/// A line, or how long a line over the bound was.
enum Line {
    Kept,
    TooLong(usize),
}

/// Reads the next line into `buffer` (without its newline), keeping at most `max` bytes:
/// a longer line is read to its end and dropped. `None` at the end of the stream.
fn next_line(
    reader: &mut impl BufRead,
    buffer: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Option<Line>> {
    buffer.clear();
    let mut length = 0usize;
    let mut any = false;
    loop {
        let available = reader.fill_buf()?;
        if available.is_empty() {
            break;
        }
        any = true;
        let (taken, ended) = match available.iter().position(|byte| *byte == b'\n') {
            Some(newline) => (newline, true),
            None => (available.len(), false),
        };
        length = length.saturating_add(taken);
        if length <= max {
            buffer.extend_from_slice(&available[..taken]);
        } else {
            buffer.clear();
        }
        reader.consume(taken + usize::from(ended));
        if ended {
            break;
        }
    }
    Ok(any.then_some(if length > max {
        Line::TooLong(length)
    } else {
        Line::Kept
    }))
}

fn read_lines(mut reader: impl BufRead, max_row_bytes: usize, visit: &mut dyn FnMut(Yielded)) {
    let mut buffer = Vec::new();
    let mut line_number = 0u64;
    loop {
        line_number += 1;
        let place = RowPlace {
            row: line_number,
            row_group: None,
        };
        match next_line(&mut reader, &mut buffer, max_row_bytes) {
            Ok(None) => return,
            Err(error) => return visit(Yielded::Unreadable(Some(place), error.to_string())),
            Ok(Some(Line::TooLong(length))) => visit(Yielded::Bad(
                place,
                1,
                format!("a row of {length} bytes, over the bound of {max_row_bytes}"),
            )),
            Ok(Some(Line::Kept)) => {
                let Ok(text) = std::str::from_utf8(&buffer) else {
                    visit(Yielded::Bad(place, 1, "not UTF-8 text".into()));
                    continue;
                };
                let text = text.trim_end_matches('\r');
                let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
                if text.trim().is_empty() {
                    continue;
                }
                visit(match line_row(text) {
                    Ok(row) => Yielded::Row(place, Box::new(row)),
                    Err(reason) => Yielded::Bad(place, 1, reason),
                });
            }
        }
    }
}

/// A JSON line read as a request.
fn line_row(text: &str) -> Result<LogRow, String> {
    let columns: BTreeMap<String, &RawValue> = serde_json::from_str(text).map_err(|error| {
        if text.trim_start().starts_with('{') {
            format!("invalid JSON: {error}")
        } else {
            "not a JSON object".to_owned()
        }
    })?;
    read_row(&Columns::Json(columns), Some(text))
}

fn read_parquet(file: File, max_row_bytes: usize, visit: &mut dyn FnMut(Yielded)) {
    let reader = match SerializedFileReader::new(file) {
        Ok(reader) => reader,
        Err(error) => return visit(Yielded::Unreadable(None, format!("Parquet: {error}"))),
    };
    let mut first_row = 1u64;
    for group_index in 0..reader.num_row_groups() {
        let rows_in_group =
            u64::try_from(reader.metadata().row_group(group_index).num_rows()).unwrap_or(0);
        // A corrupt page must not stop the job, even where the decoder would panic on it.
        let mut yielded = 0u64;
        let read = catch_unwind(AssertUnwindSafe(|| {
            read_row_group(
                &reader,
                group_index,
                first_row,
                max_row_bytes,
                visit,
                &mut yielded,
            )
        }));
        let failure = match read {
            Ok(Ok(())) => None,
            Ok(Err(error)) => Some(error),
            Err(_) => Some("the decoder failed".to_owned()),
        };
        if let Some(error) = failure {
            bad_rest(
                first_row,
                yielded,
                rows_in_group,
                group_index,
                &error,
                visit,
            );
        }
        first_row += rows_in_group.max(yielded);
    }
}

/// The rows of a row group from the one that failed to its end, counted bad.
fn bad_rest(
    first_row: u64,
    yielded: u64,
    rows_in_group: u64,
    group_index: usize,
    error: &str,
    visit: &mut dyn FnMut(Yielded),
) {
    let lost = rows_in_group.saturating_sub(yielded).max(1);
    visit(Yielded::Bad(
        RowPlace {
            row: first_row + yielded,
            row_group: Some(group_index),
        },
        lost,
        format!("Parquet: {error} ({lost} rows of the row group from here lost)"),
    ));
}

/// Reads one row group, counting the rows handed on in `yielded`; why the rest cannot be.
fn read_row_group(
    reader: &SerializedFileReader<File>,
    group_index: usize,
    first_row: u64,
    max_row_bytes: usize,
    visit: &mut dyn FnMut(Yielded),
    yielded: &mut u64,
) -> Result<(), String> {
    let group = reader
        .get_row_group(group_index)
        .map_err(|error| error.to_string())?;
    let rows = group
        .get_row_iter(None)
        .map_err(|error| error.to_string())?;
    for row in rows {
        let row = row.map_err(|error| error.to_string())?;
        let place = RowPlace {
            row: first_row + *yielded,
            row_group: Some(group_index),
        };
        *yielded += 1;
        let mut size = 0usize;
        let columns = row_columns(&row, &mut size);
        visit(if size > max_row_bytes {
            Yielded::Bad(
                place,
                1,
                format!("a row of {size} bytes, over the bound of {max_row_bytes}"),
            )
        } else {
            match read_row(&Columns::Parquet(columns), None) {
                Ok(row) => Yielded::Row(place, Box::new(row)),
                Err(reason) => Yielded::Bad(place, 1, reason),
            }
        });
    }
    Ok(())
}

/// A Parquet row as JSON: strings as strings (a JSON column stays text, parsed where read),
/// timestamps as seconds since the Unix epoch, groups as objects, lists as arrays, maps as
/// objects keyed by their keys' text. `size` adds up the bytes of its strings.
fn row_columns(row: &Row, size: &mut usize) -> Map<String, Value> {
    row.get_column_iter()
        .map(|(name, field)| (name.clone(), field_value(field, size)))
        .collect()
}

fn field_value(field: &Field, size: &mut usize) -> Value {
    let float = |value: f64| Number::from_f64(value).map_or(Value::Null, Value::Number);
    match field {
        Field::Null => Value::Null,
        Field::Bool(value) => Value::Bool(*value),
        Field::Byte(value) => Value::from(*value),
        Field::Short(value) => Value::from(*value),
        Field::Int(value) => Value::from(*value),
        Field::Long(value) => Value::from(*value),
        Field::UByte(value) => Value::from(*value),
        Field::UShort(value) => Value::from(*value),
        Field::UInt(value) => Value::from(*value),
        Field::ULong(value) => Value::from(*value),
        Field::Float16(value) => float(f64::from(*value)),
        Field::Float(value) => float(f64::from(*value)),
        Field::Double(value) => float(*value),
        Field::Decimal(_) => Value::Null,
        Field::Str(text) => {
            *size = size.saturating_add(text.len());
            Value::String(text.clone())
        }
        Field::Bytes(bytes) => {
            *size = size.saturating_add(bytes.data().len());
            Value::String(String::from_utf8_lossy(bytes.data()).into_owned())
        }
        // Days since the epoch: its midnight, in seconds.
        Field::Date(days) => Value::from(i64::from(*days) * 86_400),
        Field::TimeMillis(_) | Field::TimeMicros(_) => Value::Null,
        Field::TimestampMillis(millis) => float(*millis as f64 / 1e3),
        Field::TimestampMicros(micros) => float(*micros as f64 / 1e6),
        Field::Group(row) => Value::Object(row_columns(row, size)),
        Field::ListInternal(list) => Value::Array(
            list.elements()
                .iter()
                .map(|element| field_value(element, size))
                .collect(),
        ),
        Field::MapInternal(map) => Value::Object(
            map.entries()
                .iter()
                .map(|(key, value)| {
                    let key = match field_value(key, size) {
                        Value::String(text) => text,
                        other => other.to_string(),
                    };
                    (key, field_value(value, size))
                })
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_over_the_bound_is_dropped_and_the_next_one_read() {
        let text = format!("{}\nshort\n\nlast", "x".repeat(100));
        let mut reader = BufReader::with_capacity(8, text.as_bytes());
        let mut buffer = Vec::new();
        assert!(matches!(
            next_line(&mut reader, &mut buffer, 10).unwrap(),
            Some(Line::TooLong(100))
        ));
        assert!(matches!(
            next_line(&mut reader, &mut buffer, 10).unwrap(),
            Some(Line::Kept)
        ));
        assert_eq!(buffer, b"short");
        assert!(matches!(
            next_line(&mut reader, &mut buffer, 10).unwrap(),
            Some(Line::Kept)
        ));
        assert_eq!(buffer, b"");
        assert!(matches!(
            next_line(&mut reader, &mut buffer, 10).unwrap(),
            Some(Line::Kept)
        ));
        assert_eq!(buffer, b"last");
        assert!(next_line(&mut reader, &mut buffer, 10).unwrap().is_none());
    }

    #[test]
    fn deeply_nested_json_is_a_bad_row_not_a_crash() {
        let text = format!("{{\"a\": {}{}}}", "[".repeat(100_000), "]".repeat(100_000));
        let error = line_row(&text).unwrap_err();
        assert!(error.contains("recursion limit"), "{error}");
    }
}
