//! Every fixture session under `fixtures/rules/<rule>/{fail,pass}` is analysed and its
//! findings compared with the `.expect.json` beside it, written by hand from what was planted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use kvlint_core::analysis::SessionAnalysis;
use kvlint_core::render::Renderer;
use kvlint_core::session::SessionFile;
use serde_json::Value;

fn fixtures_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/rules")
}

fn sessions() -> Vec<PathBuf> {
    let mut sessions = Vec::new();
    for rule in std::fs::read_dir(fixtures_root()).unwrap() {
        for outcome in ["fail", "pass"] {
            let folder = rule.as_ref().unwrap().path().join(outcome);
            for entry in std::fs::read_dir(&folder).into_iter().flatten() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if !name.ends_with(".expect.json")
                    && (name.ends_with(".jsonl") || name.ends_with(".json"))
                {
                    sessions.push(path);
                }
            }
        }
    }
    sessions.sort();
    sessions
}

/// One finding as (rule, turn, severity, part).
type Row = (String, usize, String, String);

fn expected(session: &Path) -> Vec<Row> {
    let stem = session
        .to_string_lossy()
        .trim_end_matches(".jsonl")
        .trim_end_matches(".json")
        .to_owned();
    let expect: Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{stem}.expect.json")).unwrap())
            .unwrap();
    expect["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|finding| {
            (
                finding["rule"].as_str().unwrap().to_owned(),
                finding["turn"].as_u64().unwrap() as usize,
                finding["severity"].as_str().unwrap().to_owned(),
                finding["part"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn actual(session: &Path, renderer: &Renderer) -> Vec<Row> {
    let file = SessionFile::read(session).unwrap();
    let analysis = SessionAnalysis::new(&file, renderer).unwrap();
    analysis
        .broken_pairs()
        .map(|pair| kvlint_rules::diagnose(&pair))
        .map(|diagnostic| {
            (
                diagnostic.rule.to_owned(),
                diagnostic.turn,
                diagnostic.severity.as_str().to_owned(),
                diagnostic.part.to_string(),
            )
        })
        .collect()
}

/// Parts must name the same place; one may be more precise than the other
/// (`messages[1].content[0]` for `messages[1].content[0].thinking`).
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
fn every_fixture_gets_the_findings_it_expects() {
    let renderer = Renderer::provider();
    let sessions = sessions();
    assert!(
        sessions.len() >= 40,
        "found only {} fixture sessions",
        sessions.len()
    );
    let mut failures = Vec::new();
    for session in &sessions {
        let expected = expected(session);
        let actual = actual(session, &renderer);
        let matches = expected.len() == actual.len()
            && expected.iter().zip(&actual).all(|(want, got)| {
                want.0 == got.0 && want.1 == got.1 && want.2 == got.2 && same_place(&want.3, &got.3)
            });
        if !matches {
            let name = session
                .strip_prefix(fixtures_root())
                .unwrap()
                .display()
                .to_string();
            failures.push(format!(
                "{name}\n  expected {expected:?}\n  actual   {actual:?}"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixtures differ:\n{}",
        failures.len(),
        sessions.len(),
        failures.join("\n")
    );
}
