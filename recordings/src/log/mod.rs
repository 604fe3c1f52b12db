//! Request logs: one row per request, many sessions interleaved, read where they are and
//! grouped into sessions.
//!
//! A platform team keeps request logs, not session files. [`read_logs`] reads them, takes the
//! rows a [`RowFilter`] selects, groups the prompts into sessions with
//! [`kvlint_protocol::grouping`] (the one grouping of recordings and of the proxy) and hands
//! each session over as a [`SessionFile`], with a [`LogSummary`] whose counts add up:
//! `rows_read = rows_used + rows_filtered + rows_not_prompts + rows_bad`. [`read_log_bytes`]
//! reads rows held in memory the same way: a distributed job's map step over a log's rows,
//! handed every row of the session keys it holds.
//!
//! # Files
//!
//! - **JSON Lines**, one JSON object per line; plain, gzip or zstd compressed, told by the
//!   file's first bytes (not its name). Blank lines are passed over and not counted.
//! - **Parquet** (`PAR1`), read a row group at a time with the `parquet` crate's row API
//!   (snappy, zstd and gzip pages). A column holding a body (`request`, `body`, `input`,
//!   `response`, `output`) is usually a JSON **string**: it is parsed; a struct column is
//!   read as an object, a list as an array, a map as an object, a timestamp as seconds.
//!
//! Files are read in the order given (a folder's files in sorted order, by the caller).
//!
//! # Row shapes
//!
//! Told apart per row by its columns:
//!
//! 1. **kvlint's pair**, as session files write it: `request` (the body; `body` is read the
//!    same, as OpenAI Batch lines name it), and optionally `time` (seconds since the Unix
//!    epoch, milliseconds when larger than any date in seconds, or RFC 3339 text),
//!    `response` (what the engine answered: its usage and text give the output tokens),
//!    `headers` (an object of names to a string or a list of strings: the session and
//!    routing headers of [`kvlint_protocol::key`] group by them, `--where header:NAME`
//!    selects by any), `endpoint` or `url` (a URL or a path: `/v1/embeddings` and the other
//!    endpoints that take no prompt are not prompts), `session_id`.
//! 2. **A bare request body** per line (OpenAI chat or Responses, Anthropic Messages,
//!    Gemini: whatever [`kvlint_protocol::format::BodyFormat::detect`] recognizes): no time,
//!    no headers; a row without `request`, `body` or Langfuse's columns is read as one.
//! 3. **A Langfuse export**: observations from Langfuse's ClickHouse `observations` table
//!    (`packages/shared/clickhouse/migrations`, `0002_observations`), joined with
//!    `traces.session_id` (`0001_traces`). Read: `input` (`Nullable(String)`: the messages
//!    array, made a chat body, or a request body), `provided_model_name` (or `model`, as
//!    Langfuse's UI export names it) for the body's `model` when the input has none,
//!    `start_time` (`DateTime64(3)`: ClickHouse writes `2025-03-04 10:22:48.123`, UTC, or a
//!    Parquet timestamp), `session_id`, `output` (the assistant message or its text) and
//!    `usage_details` (`Map(String, UInt64)`: `output`, or `completion_tokens`), `type`
//!    (a row whose type is not `GENERATION` is not a prompt). A row is Langfuse's when it
//!    has `input` and one of `start_time`, `provided_model_name`, `trace_id`,
//!    `usage_details`. Its body is rebuilt (`reconstructed`).
//!
//! A `session_id` column (any shape) is the session key a trace's conversation id is
//! ([`kvlint_protocol::key::Carried::trace_conversation`]).
//!
//! # Grouping
//!
//! The prompts taken are grouped in time order (by `time`, then file, then row: the same
//! rows always give the same sessions, whatever order the files were given in) when every
//! one has a time, else in the order read. Session `n` (from 1, in the order sessions start)
//! is named `FILE#n` after the file of its first row.
//!
//! # Bad rows
//!
//! Nothing stops the run: a row that is not JSON, not an object, over
//! [`MAX_ROW_BYTES`], not UTF-8, in no known request format, or that a Parquet page holding
//! it cannot be decoded, is counted bad with its file and place
//! ([`BadRow`]; the first [`BAD_ROWS_KEPT`] kept); a file that cannot be opened or stops
//! being readable (a truncated Parquet footer, a corrupt gzip stream) is reported and
//! counted in `unreadable`, its rows read until then kept.

mod filter;
mod row;
mod source;

use std::path::Path;
use std::sync::Arc;

use kvlint_core::session::SessionFile;
use kvlint_request::request::Request;
use serde::Serialize;

pub use filter::{Condition, FilterError, RowField, RowFilter, parse_time_bound};
pub use row::parse_time;

use crate::{Interaction, Place};
use row::LogRow;
use source::{RowPlace, Yielded, read_bytes, read_file};

/// The largest row read: a body over it is a bad row. Anthropic's Messages API refuses
/// requests over 32 MB, the largest bound of the APIs kvlint reads.
pub const MAX_ROW_BYTES: usize = 32 << 20;

/// How many bad rows a summary lists (all are counted).
pub const BAD_ROWS_KEPT: usize = 100;

/// Whether a file name is a log's: `*.jsonl`, `*.ndjson`, `*.json`, `*.parquet`, each also
/// `.gz`, `.zst` or `.zstd`.
pub fn is_log_file_name(name: &str) -> bool {
    let name = [".gz", ".zst", ".zstd"]
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))
        .unwrap_or(name);
    [".jsonl", ".ndjson", ".json", ".parquet"]
        .iter()
        .any(|extension| name.ends_with(extension))
}

/// A row, or a file, that could not be read.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BadRow {
    pub file: String,
    /// The line (JSON Lines) or the row's number in the file (Parquet), from 1; `None` when
    /// the whole file could not be read.
    pub row: Option<u64>,
    /// The Parquet row group, from 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub row_group: Option<usize>,
    /// How many rows this stands for (a Parquet row group's lost rows; 0 for a file).
    pub rows: u64,
    pub reason: String,
}

/// What reading the logs found. `rows_read = rows_used + rows_filtered + rows_not_prompts +
/// rows_bad`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LogSummary {
    pub files: usize,
    pub rows_read: u64,
    /// Prompts taken and grouped into sessions.
    pub rows_used: u64,
    /// Rows the filters (`--since`, `--until`, `--where`) left out.
    pub rows_filtered: u64,
    /// Rows that are requests but no prompts (embeddings and other endpoints that take no
    /// prompt, Langfuse observations that are not generations).
    pub rows_not_prompts: u64,
    pub rows_bad: u64,
    /// Files, or their rest, that could not be read (no row counted for them).
    pub unreadable: u64,
    pub sessions: usize,
    /// The first [`BAD_ROWS_KEPT`] bad rows and unreadable files, in the order met.
    pub bad: Vec<BadRow>,
}

impl LogSummary {
    fn count_bad(&mut self, bad: BadRow) {
        if bad.row.is_some() {
            self.rows_bad += bad.rows;
        } else {
            self.unreadable += 1;
        }
        if self.bad.len() < BAD_ROWS_KEPT {
            self.bad.push(bad);
        }
    }
}

/// The sessions the logs hold, and what reading them found.
#[derive(Clone, Debug, Default)]
pub struct LogSessions {
    pub sessions: Vec<SessionFile>,
    pub summary: LogSummary,
}

/// A prompt taken, and where it came from.
struct Taken {
    file: usize,
    place: RowPlace,
    row: LogRow,
}

/// Reads the log `files`, takes the rows `filter` selects and groups the prompts into
/// sessions. Never fails: what cannot be read is counted and listed in the summary.
pub fn read_logs(files: &[impl AsRef<Path>], filter: &RowFilter) -> LogSessions {
    let names: Vec<String> = files
        .iter()
        .map(|file| file.as_ref().display().to_string())
        .collect();
    take_rows(&names, filter, |file, visit| {
        read_file(files[file].as_ref(), MAX_ROW_BYTES, visit);
    })
}

/// Reads a log held in memory, named `name`: JSON Lines rows (plain, gzip or zstd
/// compressed), as [`read_logs`] reads a file of them. This is the map step of a distributed
/// job over log rows: handed every row of the session keys it holds (all the rows of each
/// `session_id`, say), it groups them into the sessions `read_logs` finds for those keys in
/// the whole log.
pub fn read_log_bytes(name: &str, bytes: &[u8], filter: &RowFilter) -> LogSessions {
    take_rows(&[name.to_owned()], filter, |_, visit| {
        read_bytes(bytes, MAX_ROW_BYTES, visit);
    })
}

/// Reads each of the files `names` with `read` (a file's index, and where its rows go),
/// takes the rows `filter` selects and groups the prompts into sessions.
fn take_rows(
    names: &[String],
    filter: &RowFilter,
    mut read: impl FnMut(usize, &mut dyn FnMut(Yielded)),
) -> LogSessions {
    let mut summary = LogSummary {
        files: names.len(),
        ..LogSummary::default()
    };
    let mut taken = Vec::new();
    for (index, name) in names.iter().enumerate() {
        let file_index = taken_file_index(names, name);
        read(index, &mut |yielded| match yielded {
            Yielded::Row(place, row) => {
                summary.rows_read += 1;
                match classify(*row, filter) {
                    Classified::Filtered => summary.rows_filtered += 1,
                    Classified::NotPrompt => summary.rows_not_prompts += 1,
                    Classified::Bad(reason) => summary.count_bad(bad_row(name, place, 1, reason)),
                    Classified::Prompt(row) => taken.push(Taken {
                        file: file_index,
                        place,
                        row: *row,
                    }),
                }
            }
            Yielded::Bad(place, rows, reason) => {
                summary.rows_read += rows;
                summary.count_bad(bad_row(name, place, rows, reason));
            }
            Yielded::Unreadable(place, reason) => summary.count_bad(BadRow {
                file: name.clone(),
                row: None,
                row_group: place.and_then(|place| place.row_group),
                rows: 0,
                reason: match place {
                    Some(place) => format!("unreadable from line {}: {reason}", place.row),
                    None => reason,
                },
            }),
        });
    }
    if taken.iter().all(|taken| taken.row.time.is_some()) {
        taken.sort_by(|left, right| {
            let time = |taken: &Taken| taken.row.time.unwrap_or(0.0);
            time(left)
                .total_cmp(&time(right))
                .then_with(|| names[left.file].cmp(&names[right.file]))
                .then_with(|| left.place.row.cmp(&right.place.row))
        });
    }
    let sessions = grouped(&taken, names, &mut summary);
    summary.sessions = sessions.len();
    LogSessions { sessions, summary }
}

/// The index of the first file named `name` (a file given twice is one file).
fn taken_file_index(names: &[String], name: &str) -> usize {
    names.iter().position(|other| other == name).unwrap_or(0)
}

fn bad_row(file: &str, place: RowPlace, rows: u64, reason: String) -> BadRow {
    BadRow {
        file: file.to_owned(),
        row: Some(place.row),
        row_group: place.row_group,
        rows,
        reason,
    }
}

enum Classified {
    Filtered,
    NotPrompt,
    Bad(String),
    Prompt(Box<LogRow>),
}

/// Filters first (a row left out is not looked at further), then tells prompts from
/// requests that take none and from bodies in no known format.
fn classify(row: LogRow, filter: &RowFilter) -> Classified {
    if !filter.takes(&row) {
        return Classified::Filtered;
    }
    if row.not_generation.is_some() || kvlint_protocol::endpoint::not_a_prompt(&row.url).is_some() {
        return Classified::NotPrompt;
    }
    match Request::from_body(&row.value) {
        Ok(_) => Classified::Prompt(Box::new(row)),
        Err(error) => Classified::Bad(format!("not a request kvlint reads: {}", error.message)),
    }
}

/// The prompts taken, grouped into sessions by the recordings' grouping, as session files.
fn grouped(taken: &[Taken], names: &[String], summary: &mut LogSummary) -> Vec<SessionFile> {
    let interactions: Vec<Interaction> = taken
        .iter()
        .enumerate()
        .map(|(index, taken)| Interaction {
            index,
            method: "POST".into(),
            url: taken.row.url.clone(),
            body: taken.row.body.clone(),
            at: Place {
                line: usize::try_from(taken.place.row).unwrap_or(usize::MAX),
                column: 1,
            },
            response: taken.row.response.clone(),
            conversation: taken.row.session_id.clone(),
            key_headers: crate::key_headers(
                taken
                    .row
                    .headers
                    .iter()
                    .map(|(name, value)| (name.as_str(), value.as_str())),
            ),
            time: taken.row.time,
        })
        .collect();
    let found = crate::group::sessions(&interactions);
    // Every interaction is a prompt already; whatever the grouping still passes over is
    // counted, not lost.
    for (index, reason) in found.skipped {
        if let Some(taken) = taken.get(index) {
            summary.count_bad(bad_row(&names[taken.file], taken.place, 1, reason));
        }
    }
    let mut sessions = Vec::new();
    for session in found.sessions {
        let Some(first) = session
            .interactions
            .first()
            .and_then(|index| taken.get(*index))
        else {
            continue;
        };
        let name = format!("{}#{}", names[first.file], sessions.len() + 1);
        match SessionFile::parse(name, Arc::from(session.jsonl())) {
            Ok(file) => {
                summary.rows_used += session.interactions.len() as u64;
                sessions.push(file);
            }
            Err(error) => {
                for index in &session.interactions {
                    if let Some(taken) = taken.get(*index) {
                        summary.count_bad(bad_row(
                            &names[taken.file],
                            taken.place,
                            1,
                            error.to_string(),
                        ));
                    }
                }
            }
        }
    }
    sessions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_files_are_told_by_their_names_compressed_or_not() {
        for name in [
            "requests.jsonl",
            "requests.ndjson.zst",
            "part-0001.parquet",
            "export.json.gz",
            "day.jsonl.zstd",
        ] {
            assert!(is_log_file_name(name), "{name}");
        }
        for name in ["notes.txt", "trace.yaml", "requests.jsonl.bz2", "parquet"] {
            assert!(!is_log_file_name(name), "{name}");
        }
    }

    #[test]
    fn rows_of_a_log_add_up_and_are_grouped_in_time_order() {
        let folder = std::env::temp_dir().join(format!("kvlint-log-unit-{}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap_or_default();
        let log = folder.join("log.jsonl");
        // The second turn is written first: grouped by time, it still follows the first.
        let lines = [
            r#"{"time": 20, "request": {"model": "m", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}, {"role": "user", "content": "bye"}]}}"#,
            r#"{"time": 10, "request": {"model": "m", "messages": [{"role": "user", "content": "hi"}]}}"#,
            r#"{"time": 15, "url": "/v1/embeddings", "request": {"model": "e", "input": "x"}}"#,
            r#"{"time": 30, "request": {"model": "m", "messages": [{"role": "user", "content": "later"}]}}"#,
            "not json",
        ];
        std::fs::write(&log, lines.join("\n")).unwrap_or_default();
        let filter = RowFilter {
            until: Some(25.0),
            ..RowFilter::default()
        };
        let read = read_logs(&[&log], &filter);
        let summary = &read.summary;
        assert_eq!(
            (
                summary.rows_read,
                summary.rows_used,
                summary.rows_filtered,
                summary.rows_not_prompts,
                summary.rows_bad
            ),
            (5, 2, 1, 1, 1)
        );
        assert_eq!(summary.bad[0].row, Some(5));
        assert_eq!(read.sessions.len(), 1);
        assert_eq!(read.sessions[0].len(), 2);
        assert_eq!(
            read.sessions[0].turn(0).ok().and_then(|turn| turn.time),
            Some(10.0)
        );
        // The same rows handed over in memory, gzip compressed, read as the file was.
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gzip, lines.join("\n").as_bytes()).unwrap_or_default();
        let name = log.display().to_string();
        let in_memory = read_log_bytes(&name, &gzip.finish().unwrap_or_default(), &filter);
        assert_eq!(in_memory.summary, read.summary);
        assert_eq!(in_memory.sessions.len(), 1);
        assert_eq!(in_memory.sessions[0].path, read.sessions[0].path);
        assert_eq!(in_memory.sessions[0].text, read.sessions[0].text);
        std::fs::remove_dir_all(&folder).unwrap_or_default();
    }

    #[test]
    fn a_parquet_file_in_memory_is_unreadable_and_says_why() {
        let read = read_log_bytes("part.parquet", b"PAR1 and the rest", &RowFilter::default());
        assert_eq!(read.summary.unreadable, 1);
        assert!(read.summary.bad[0].reason.contains("JSON Lines"));
    }
}
