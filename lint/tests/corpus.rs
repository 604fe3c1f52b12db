//! The real sessions in `../shared/corpus/` (recorded or reconstructed from public agent
//! projects) are all analysed, and what kvlint reports is compared with
//! `fixtures/corpus/expected.json`: the breaks found pair by pair by an independent script
//! that compares request bodies part by part (see `fixtures/corpus/README.md`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn corpus() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let corpus = std::env::var_os("KVLINT_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../shared/corpus/sessions"));
    assert!(
        corpus.is_dir(),
        "the shared corpus is not at {} (set KVLINT_CORPUS)",
        corpus.display()
    );
    corpus
}

type Row = (String, u64, String, String);

fn rows(findings: &Value) -> Vec<Row> {
    findings
        .as_array()
        .unwrap()
        .iter()
        .map(|finding| {
            (
                finding["rule"].as_str().unwrap().to_owned(),
                finding["turn"].as_u64().unwrap(),
                finding["severity"].as_str().unwrap().to_owned(),
                finding["part"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn same_place(expected: &str, actual: &str) -> bool {
    let within = |outer: &str, inner: &str| {
        inner == outer
            || inner
                .strip_prefix(outer)
                .is_some_and(|rest| rest.starts_with(['.', '[']))
    };
    within(expected, actual) || within(actual, expected)
}

#[test]
fn real_sessions_get_the_findings_found_by_hand() {
    let corpus = corpus();
    let output = Command::new(env!("CARGO_BIN_EXE_kvlint"))
        .args(["check", "--format", "json"])
        .arg(&corpus)
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        report["errors"],
        Value::Array(Vec::new()),
        "every corpus file parses"
    );
    let actual: BTreeMap<String, Vec<Row>> = report["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|session| {
            let name = Path::new(session["path"].as_str().unwrap())
                .file_name()
                .unwrap();
            (
                name.to_string_lossy().into_owned(),
                rows(&session["findings"]),
            )
        })
        .collect();
    let expected: BTreeMap<String, Value> = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/corpus/expected.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(actual.len(), 38, "all 38 sessions are analysed");
    let errors_expected = expected
        .values()
        .flat_map(rows)
        .filter(|row| row.2 == "error")
        .count();
    assert!(errors_expected >= 10, "the corpus has real breakers");
    let mut differences = Vec::new();
    for (name, findings) in &expected {
        let want = rows(findings);
        let got = actual.get(name).cloned().unwrap_or_default();
        let same = want.len() == got.len()
            && want.iter().zip(&got).all(|(want, got)| {
                want.0 == got.0 && want.1 == got.1 && want.2 == got.2 && same_place(&want.3, &got.3)
            });
        if !same {
            differences.push(format!("{name}\n  expected {want:?}\n  actual   {got:?}"));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    // Exit 1: the corpus has error findings.
    assert_eq!(output.status.code(), Some(1));
}
