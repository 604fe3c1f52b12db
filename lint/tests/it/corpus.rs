//! The real sessions in `fixtures/corpus/sessions/` (recorded or reconstructed from public agent
//! projects) are all analysed, and what kvlint reports is compared with
//! `fixtures/corpus/expected.json`: the breaks found pair by pair by an independent script
//! that compares request bodies part by part (see `fixtures/corpus/README.md`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use kvlint_fixtures::{Expected, all_match};
use serde_json::Value;

#[test]
fn real_sessions_get_the_findings_found_by_hand() {
    let corpus = kvlint_fixtures::corpus();
    assert!(
        corpus.is_dir(),
        "the corpus is not at {} (set KVLINT_CORPUS)",
        corpus.display()
    );
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
    let actual: BTreeMap<String, Vec<Expected>> = report["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|session| {
            let name = Path::new(session["path"].as_str().unwrap())
                .file_name()
                .unwrap();
            (
                name.to_string_lossy().into_owned(),
                Expected::list(&session["findings"]),
            )
        })
        .collect();
    let expected_file = kvlint_fixtures::root().join("corpus/expected.json");
    let expected: BTreeMap<String, Value> =
        serde_json::from_str(&std::fs::read_to_string(expected_file).unwrap()).unwrap();
    assert_eq!(actual.len(), 38, "all 38 sessions are analysed");
    let errors_expected = expected
        .values()
        .flat_map(Expected::list)
        .filter(|finding| finding.severity == "error")
        .count();
    assert!(errors_expected >= 10, "the corpus has real breakers");
    let mut differences = Vec::new();
    for (name, findings) in &expected {
        let want = Expected::list(findings);
        let got = actual.get(name).cloned().unwrap_or_default();
        if !all_match(&want, &got) {
            differences.push(format!("{name}\n  expected {want:?}\n  actual   {got:?}"));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    // Exit 1: the corpus has error findings.
    assert_eq!(output.status.code(), Some(1));
}
