//! `--log PATH…`: request logs (one request per row, many sessions interleaved) read as
//! sessions by `kvlint_recordings::log`, the rows selected by `--since`, `--until` and
//! `--where`, and the summary of what was read, bad rows included (docs/request-logs.md).

use std::path::PathBuf;

use kvlint_core::session::SessionFile;
use serde_json::Value;

/// The command line's request logs and the filters that select their rows.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LogArgs {
    /// Request logs, one request per row and many sessions interleaved: JSON Lines (plain,
    /// gzip or zstd) or Parquet; files or folders. Rows are kvlint's `{time, request,
    /// response, headers, endpoint}` pairs, bare request bodies or a Langfuse export, grouped
    /// into sessions as recordings are.
    #[arg(long, value_name = "PATH")]
    pub log: Vec<PathBuf>,
    /// Take the log rows sent at or after TIME: RFC 3339, `2026-11-29 10:00:00` (UTC) or a
    /// date (its midnight, UTC). Rows without a time are left out.
    #[arg(long, value_name = "TIME", requires = "log")]
    pub since: Option<String>,
    /// Take the log rows sent before TIME (not at it), as `--since` reads it: `--since
    /// 2026-11-29 --until 2026-11-30` is one day.
    #[arg(long, value_name = "TIME", requires = "log")]
    pub until: Option<String>,
    /// Take the log rows whose FIELD is VALUE: `model`, `endpoint` (URL or path), `session`
    /// (the session key or `session_id`) or `header:NAME`. Repeatable: different fields must
    /// all match, the same field repeated matches any of its values.
    #[arg(long = "where", value_name = "FIELD=VALUE", requires = "log")]
    pub conditions: Vec<String>,
}

/// The sessions the logs hold, named for their identity, and the summary of the reading.
pub struct LogInput {
    pub sessions: Vec<SessionFile>,
    pub summary: LogSummary,
}

#[cfg(feature = "recordings")]
pub use kvlint_recordings::log::LogSummary;

/// Without the `recordings` feature no log is read, so there is never a summary.
#[cfg(not(feature = "recordings"))]
#[derive(Debug, Clone)]
pub enum LogSummary {}

/// How many bad rows the human summary lists.
#[cfg(feature = "recordings")]
const BAD_ROWS_SHOWN: usize = 10;

/// Reads the logs `args` name, `None` when none is named.
#[cfg(feature = "recordings")]
pub fn read(args: &LogArgs) -> miette::Result<Option<LogInput>> {
    use kvlint_recordings::log::{Condition, RowFilter, parse_time_bound, read_logs};

    if args.log.is_empty() {
        return Ok(None);
    }
    let bound = |flag: &str, text: &Option<String>| -> miette::Result<Option<f64>> {
        text.as_deref()
            .map(parse_time_bound)
            .transpose()
            .map_err(|error| miette::miette!("{flag} {error}"))
    };
    let filter = RowFilter {
        since: bound("--since", &args.since)?,
        until: bound("--until", &args.until)?,
        conditions: args
            .conditions
            .iter()
            .map(|text| Condition::parse(text))
            .collect::<Result<_, _>>()
            .map_err(|error| miette::miette!("--where {error}"))?,
    };
    let files: Vec<PathBuf> = crate::workspace::discover::log_files(&args.log)
        .into_iter()
        .map(|candidate| candidate.path)
        .collect();
    let read = read_logs(&files, &filter);
    Ok(Some(LogInput {
        sessions: read.sessions,
        summary: read.summary,
    }))
}

#[cfg(not(feature = "recordings"))]
pub fn read(args: &LogArgs) -> miette::Result<Option<LogInput>> {
    if args.log.is_empty() {
        return Ok(None);
    }
    miette::bail!("--log needs kvlint built with its `recordings` feature (on by default)")
}

/// The summary as the JSON report's `log` object.
#[cfg(feature = "recordings")]
pub fn summary_json(summary: &LogSummary) -> Value {
    serde_json::to_value(summary).unwrap_or(Value::Null)
}

#[cfg(not(feature = "recordings"))]
pub fn summary_json(summary: &LogSummary) -> Value {
    match *summary {}
}

/// Whether the logs gave no row to use.
#[cfg(feature = "recordings")]
pub fn nothing_used(summary: &LogSummary) -> bool {
    summary.rows_used == 0
}

#[cfg(not(feature = "recordings"))]
pub fn nothing_used(summary: &LogSummary) -> bool {
    match *summary {}
}

/// The summary as a person reads it: the counts, which add up to the rows read, and the
/// first bad rows with their file and place.
#[cfg(feature = "recordings")]
pub fn summary_human(summary: &LogSummary) -> String {
    let mut text = format!(
        "request logs: {} file{}, {} rows read: {} used in {} sessions, {} filtered out, {} not prompts, {} bad",
        summary.files,
        if summary.files == 1 { "" } else { "s" },
        summary.rows_read,
        summary.rows_used,
        summary.sessions,
        summary.rows_filtered,
        summary.rows_not_prompts,
        summary.rows_bad,
    );
    if summary.unreadable > 0 {
        text.push_str(&format!("; {} unreadable", summary.unreadable));
    }
    text.push('\n');
    for bad in summary.bad.iter().take(BAD_ROWS_SHOWN) {
        let place = match (bad.row, bad.row_group) {
            (Some(row), Some(group)) => format!(": row {row} (row group {group})"),
            (Some(row), None) => format!(":{row}"),
            (None, _) => String::new(),
        };
        text.push_str(&format!("  {}{place}: {}\n", bad.file, bad.reason));
    }
    if summary.bad.len() > BAD_ROWS_SHOWN {
        text.push_str(&format!(
            "  … {} more in the JSON report's `log.bad`, which keeps the first {}\n",
            summary.bad.len() - BAD_ROWS_SHOWN,
            kvlint_recordings::log::BAD_ROWS_KEPT
        ));
    }
    text
}

#[cfg(not(feature = "recordings"))]
pub fn summary_human(summary: &LogSummary) -> String {
    match *summary {}
}
