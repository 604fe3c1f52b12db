//! `kvlint workload --log` and `kvlint simulate --log`: request logs (one request per row, many
//! sessions interleaved) give the report their sessions give as session files, in JSON Lines
//! plain, gzip'd and zstd'd, and in Parquet written by pyarrow; a Langfuse export is grouped
//! by its session ids; the filters take the rows hand-counted here; bad rows and unreadable
//! files are reported with their place and never stop the run. Fixtures: fixtures/logs/
//! (written by scripts/make-log-fixtures.py, see its README).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::path::PathBuf;

use serde_json::Value;

use crate::common::kvlint;

const LOGS: &str = "fixtures/logs";

fn scratch(name: &str) -> PathBuf {
    let folder = std::env::temp_dir().join(format!("kvlint-logs-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    folder
}

/// A fixture's path, for this process (whose folder is not the repository's).
fn fixture(name: &str) -> PathBuf {
    kvlint_fixtures::repository().join(LOGS).join(name)
}

/// `kvlint workload --format json ARGS`: the report, its `log` object taken out.
fn workload(args: &[&str]) -> (Value, Option<Value>) {
    let mut all = vec!["workload", "--format", "json", "--no-trace-cache"];
    all.extend_from_slice(args);
    let (code, stdout, stderr) = kvlint(&all);
    assert_eq!(code, 0, "{stderr}");
    let mut report: Value = serde_json::from_str(&stdout).unwrap();
    let log = report.as_object_mut().unwrap().remove("log");
    (report, log)
}

fn count(log: &Value, key: &str) -> u64 {
    log[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no `{key}` in {log}"))
}

/// The summary's counts add up to the rows read.
fn assert_adds_up(log: &Value) {
    assert_eq!(
        count(log, "rows_read"),
        count(log, "rows_used")
            + count(log, "rows_filtered")
            + count(log, "rows_not_prompts")
            + count(log, "rows_bad"),
        "{log}"
    );
}

/// A summary's (used, filtered, not prompts, bad, sessions).
type Counts = (u64, u64, u64, u64, u64);

fn counts(log: &Value) -> Counts {
    assert_adds_up(log);
    (
        count(log, "rows_used"),
        count(log, "rows_filtered"),
        count(log, "rows_not_prompts"),
        count(log, "rows_bad"),
        count(log, "sessions"),
    )
}

#[test]
fn an_interleaved_log_gives_the_report_of_its_sessions_as_files() {
    let (as_files, none) = workload(&[&format!("{LOGS}/sessions")]);
    assert!(none.is_none());
    assert_eq!(as_files["sessions"], 3);
    assert_eq!(as_files["requests"], 9);
    for log in [
        "interleaved.jsonl",
        "interleaved.jsonl.gz",
        "interleaved.jsonl.zst",
        "interleaved.parquet",
    ] {
        let (from_log, summary) = workload(&["--log", &format!("{LOGS}/{log}")]);
        assert_eq!(from_log, as_files, "{log}");
        let summary = summary.unwrap();
        // Nine prompts and one embeddings request, in three sessions.
        assert_eq!(count(&summary, "rows_read"), 10, "{log}: {summary}");
        assert_eq!(counts(&summary), (9, 0, 1, 0, 3), "{log}: {summary}");
    }
}

#[test]
fn a_folder_of_logs_is_read_file_by_file() {
    let folder = scratch("folder");
    // The same rows split across two files, the later file's rows first in its name order:
    // grouped in time order, the sessions are the same.
    let text = std::fs::read_to_string(fixture("interleaved.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let (early, late) = lines.split_at(5);
    std::fs::write(folder.join("b.jsonl"), early.join("\n")).unwrap();
    std::fs::write(folder.join("a.jsonl"), late.join("\n")).unwrap();
    std::fs::write(folder.join("notes.txt"), "not a log").unwrap();
    let (from_folder, summary) = workload(&["--log", folder.to_str().unwrap()]);
    let (as_files, _) = workload(&[&format!("{LOGS}/sessions")]);
    assert_eq!(from_folder, as_files);
    assert_eq!(count(summary.as_ref().unwrap(), "files"), 2);
    std::fs::remove_dir_all(&folder).unwrap();
}

#[test]
fn a_langfuse_export_gives_the_sessions_its_session_ids_say() {
    use kvlint_recordings::log::{RowFilter, read_logs};
    for export in ["langfuse.jsonl", "langfuse.parquet"] {
        let path = kvlint_fixtures::repository().join(LOGS).join(export);
        let read = read_logs(&[path], &RowFilter::default());
        // Two generations per session id; the span is no prompt.
        assert_eq!(
            (
                read.summary.rows_read,
                read.summary.rows_used,
                read.summary.rows_not_prompts,
                read.summary.rows_bad
            ),
            (5, 4, 1, 0),
            "{export}: {:?}",
            read.summary
        );
        assert_eq!(read.sessions.len(), 2, "{export}");
        for (session, opened) in read.sessions.iter().zip([1_764_669_600.0, 1_764_669_605.0]) {
            assert_eq!(session.len(), 2, "{export}");
            let first = session.turn(0).unwrap();
            assert_eq!(first.time, Some(opened), "{export}");
            assert_eq!(first.request.body["model"], "gpt-4o");
            let second = session.turn(1).unwrap();
            assert_eq!(second.time, Some(opened + 60.0), "{export}");
            assert_eq!(
                second
                    .response
                    .as_ref()
                    .unwrap()
                    .pointer("/usage/completion_tokens"),
                Some(&Value::from(6))
            );
        }
    }
    let (report, summary) = workload(&["--log", &format!("{LOGS}/langfuse.jsonl")]);
    assert_eq!(
        (report["sessions"].as_u64(), report["requests"].as_u64()),
        (Some(2), Some(4))
    );
    assert_eq!(report["output_tokens"], 9 + 6 + 9 + 6);
    assert_eq!(counts(&summary.unwrap()), (4, 0, 1, 0, 2));
    let (_, beta) = workload(&[
        "--log",
        &format!("{LOGS}/langfuse.parquet"),
        "--where",
        "session=sess-beta",
    ]);
    assert_eq!(counts(&beta.unwrap()), (2, 3, 0, 0, 1));
}

#[test]
fn filters_take_the_rows_counted_by_hand() {
    let log = format!("{LOGS}/interleaved.jsonl");
    // Times from 2025-12-02T10:00:00Z, in seconds: a 0 9 40, b 3 20 3700, c 12 50 7300, the
    // embeddings request 30.
    let cases: &[(&[&str], Counts)] = &[
        // [10 s, 1 h): a 40, b 20, c 12 50 and the embeddings request.
        (
            &[
                "--since",
                "2025-12-02T10:00:10Z",
                "--until",
                "2025-12-02 11:00:00",
            ],
            (4, 5, 1, 0, 3),
        ),
        (
            &["--since", "2025-12-02", "--until", "2025-12-03"],
            (9, 0, 1, 0, 3),
        ),
        (&["--until", "2025-12-02T10:00:09Z"], (2, 8, 0, 0, 2)),
        (&["--where", "model=gpt-4o"], (3, 7, 0, 0, 1)),
        (
            &[
                "--where",
                "model=gpt-4o",
                "--where",
                "model=claude-sonnet-4-5",
            ],
            (6, 4, 0, 0, 2),
        ),
        (&["--where", "header:X-Team=support"], (3, 7, 0, 0, 1)),
        (&["--where", "header:x-team=coding"], (3, 6, 1, 0, 1)),
        (&["--where", "endpoint=/v1/messages"], (3, 7, 0, 0, 1)),
        (
            &[
                "--where",
                "header:x-team=coding",
                "--where",
                "model=gpt-4o",
                "--since",
                "2025-12-02T10:00:05Z",
            ],
            (2, 8, 0, 0, 1),
        ),
    ];
    for (filters, expected) in cases {
        let mut args = vec!["--log", log.as_str()];
        args.extend_from_slice(filters);
        let (report, summary) = workload(&args);
        assert_eq!(counts(summary.as_ref().unwrap()), *expected, "{filters:?}");
        assert_eq!(report["requests"].as_u64(), Some(expected.0), "{filters:?}");
    }
    // Nothing left to use: an input error naming the counts.
    let (code, _, stderr) = kvlint(&[
        "workload",
        "--log",
        &log,
        "--where",
        "endpoint=/v1/embeddings",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("no row of the request logs could be used"),
        "{stderr}"
    );
    assert!(stderr.contains("9 filtered out"), "{stderr}");
    assert!(stderr.contains("1 not prompts"), "{stderr}");
    // A bad filter is a usage error that names what it accepts.
    let (code, _, stderr) = kvlint(&["workload", "--log", &log, "--where", "colour=red"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("header:NAME"), "{stderr}");
    let (code, _, stderr) = kvlint(&["workload", "--log", &log, "--since", "last week"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--since"), "{stderr}");
}

#[test]
fn rows_without_a_time_are_left_out_by_a_time_filter_only() {
    let folder = scratch("bare");
    // Bare bodies, one per line: session a's requests as its file holds them.
    let session = std::fs::read_to_string(fixture("sessions/a.jsonl")).unwrap();
    let bodies: Vec<String> = session
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["request"].to_string())
        .collect();
    let log = folder.join("bodies.jsonl");
    std::fs::write(&log, bodies.join("\n")).unwrap();
    let (report, summary) = workload(&["--log", log.to_str().unwrap()]);
    assert_eq!(
        (report["sessions"].as_u64(), report["requests"].as_u64()),
        (Some(1), Some(3))
    );
    assert_eq!(counts(&summary.unwrap()), (3, 0, 0, 0, 1));
    let (code, _, stderr) = kvlint(&[
        "workload",
        "--log",
        log.to_str().unwrap(),
        "--since",
        "2020-01-01",
    ]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("3 filtered out"), "{stderr}");
    std::fs::remove_dir_all(&folder).unwrap();
}

#[test]
fn bad_rows_and_unreadable_files_are_reported_and_the_run_goes_on() {
    let folder = scratch("bad");
    // A row over the 32 MiB bound, then a good one.
    let oversized = folder.join("oversized.jsonl");
    let good = std::fs::read_to_string(fixture("interleaved.jsonl"))
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .to_owned();
    let mut file = std::fs::File::create(&oversized).unwrap();
    let huge = format!(
        "{{\"request\": {{\"model\": \"m\", \"messages\": [{{\"role\": \"user\", \"content\": \"{}\"}}]}}}}",
        "x".repeat(33 << 20)
    );
    writeln!(file, "{huge}").unwrap();
    writeln!(file, "{good}").unwrap();
    drop(file);
    // A Parquet file cut in half: its footer is gone.
    let parquet = std::fs::read(fixture("interleaved.parquet")).unwrap();
    let truncated = folder.join("truncated.parquet");
    std::fs::write(&truncated, &parquet[..parquet.len() / 2]).unwrap();
    // A gzip stream that breaks after its header.
    let corrupt = folder.join("corrupt.jsonl.gz");
    std::fs::write(
        &corrupt,
        [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xde, 0xad, 0xbe, 0xef],
    )
    .unwrap();
    let missing = folder.join("missing.jsonl");
    let bad = format!("{LOGS}/bad.jsonl");
    let (report, summary) = workload(&[
        "--log",
        &bad,
        "--log",
        oversized.to_str().unwrap(),
        "--log",
        truncated.to_str().unwrap(),
        "--log",
        corrupt.to_str().unwrap(),
        "--log",
        missing.to_str().unwrap(),
    ]);
    let summary = summary.unwrap();
    // bad.jsonl: 7 rows (a blank line passed over): 1 used, 1 embeddings request, 5 bad;
    // oversized.jsonl: 1 bad, 1 used.
    assert_eq!(count(&summary, "rows_read"), 9, "{summary}");
    assert_eq!(counts(&summary), (2, 0, 1, 6, 2), "{summary}");
    assert_eq!(count(&summary, "unreadable"), 3, "{summary}");
    assert_eq!(report["requests"], 2);
    let places: Vec<(String, Option<u64>)> = summary["bad"]
        .as_array()
        .unwrap()
        .iter()
        .map(|bad| {
            let file = PathBuf::from(bad["file"].as_str().unwrap());
            (
                file.file_name().unwrap().to_string_lossy().into_owned(),
                bad["row"].as_u64(),
            )
        })
        .collect();
    let expected: Vec<(String, Option<u64>)> = [
        ("bad.jsonl", Some(2)),
        ("bad.jsonl", Some(3)),
        ("bad.jsonl", Some(4)),
        ("bad.jsonl", Some(5)),
        ("bad.jsonl", Some(6)),
        ("oversized.jsonl", Some(1)),
        ("truncated.parquet", None),
        ("corrupt.jsonl.gz", None),
        ("missing.jsonl", None),
    ]
    .into_iter()
    .map(|(file, row)| (file.to_owned(), row))
    .collect();
    assert_eq!(places, expected, "{summary}");
    let reasons: Vec<&str> = summary["bad"]
        .as_array()
        .unwrap()
        .iter()
        .map(|bad| bad["reason"].as_str().unwrap())
        .collect();
    assert!(reasons[0].starts_with("invalid JSON"), "{reasons:?}");
    assert!(
        reasons[1].starts_with("not a request kvlint reads"),
        "{reasons:?}"
    );
    assert_eq!(reasons[2], "not a JSON object");
    assert_eq!(reasons[3], "not UTF-8 text");
    assert!(reasons[4].contains("recursion limit"), "{reasons:?}");
    assert!(
        reasons[5].contains("over the bound of 33554432"),
        "{reasons:?}"
    );
    assert!(reasons[6].starts_with("Parquet:"), "{reasons:?}");
    assert!(
        reasons[7].starts_with("unreadable from line 1"),
        "{reasons:?}"
    );

    // The human report prints the summary with each place.
    let (code, stdout, stderr) = kvlint(&[
        "workload",
        "--no-trace-cache",
        "--log",
        &bad,
        "--log",
        truncated.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("request logs: 2 files, 7 rows read: 1 used in 1 sessions, 0 filtered out, 1 not prompts, 5 bad; 1 unreadable"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("{bad}:2: invalid JSON")),
        "{stdout}"
    );

    // Nothing readable at all: an input error.
    let (code, _, stderr) = kvlint(&["workload", "--log", missing.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("missing.jsonl"), "{stderr}");
    std::fs::remove_dir_all(&folder).unwrap();
}

#[test]
fn a_corrupt_parquet_page_loses_its_row_group_only() {
    let folder = scratch("page");
    let mut parquet = std::fs::read(fixture("interleaved.parquet")).unwrap();
    // The first row group's pages start after the 4-byte magic: garble some of them.
    for byte in &mut parquet[40..400] {
        *byte = 0xa5;
    }
    let garbled = folder.join("garbled.parquet");
    std::fs::write(&garbled, &parquet).unwrap();
    let (code, stdout, stderr) = kvlint(&[
        "workload",
        "--format",
        "json",
        "--no-trace-cache",
        "--log",
        garbled.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let summary = &report["log"];
    assert_adds_up(summary);
    // Ten rows in row groups of four: the first group's are lost, the others read.
    assert_eq!(count(summary, "rows_read"), 10, "{summary}");
    assert!(count(summary, "rows_bad") >= 1, "{summary}");
    assert!(count(summary, "rows_used") >= 5, "{summary}");
    let first = &summary["bad"][0];
    assert_eq!(first["row_group"], 0, "{summary}");
    std::fs::remove_dir_all(&folder).unwrap();
}

/// Every routing policy but `session-hash`, which hashes each session's name (`a.jsonl` as a
/// file, `interleaved.parquet#1` from the log) and so places the sessions differently.
const ROUTING: &str = "round-robin,least-loaded,prefix-aware,ideal";

#[test]
fn simulate_reads_logs_too() {
    let simulate = |input: &[&str]| {
        let mut args = vec![
            "simulate",
            "--routing",
            ROUTING,
            "--no-trace-cache",
            "--format",
            "json",
            "--replicas",
            "2",
            "--cache",
            "5000",
            "--prefill-tps",
            "8000",
        ];
        args.extend_from_slice(input);
        kvlint(&args)
    };
    let log = format!("{LOGS}/interleaved.parquet");
    let (code, stdout, stderr) = simulate(&["--log", &log]);
    assert_eq!(code, 0, "{stderr}");
    let (_, from_files, _) = simulate(&[&format!("{LOGS}/sessions")]);
    assert_eq!(
        serde_json::from_str::<Value>(&stdout).unwrap(),
        serde_json::from_str::<Value>(&from_files).unwrap()
    );
    assert!(
        stderr.contains("request logs: 1 file, 10 rows read: 9 used in 3 sessions"),
        "{stderr}"
    );
}
