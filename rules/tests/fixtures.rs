//! Every fixture session under `fixtures/rules/<rule>/{fail,pass}` is analysed and its
//! findings compared with the `.expect.json` beside it, written by hand from what was planted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use kvlint_core::{Renderer, SessionFile};
use kvlint_fixtures::{Expected, all_match};

fn sessions() -> Vec<PathBuf> {
    let mut sessions = Vec::new();
    for rule in std::fs::read_dir(kvlint_fixtures::root().join("rules")).unwrap() {
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

fn actual(session: &Path, renderer: &Renderer) -> Vec<Expected> {
    let file = SessionFile::read(session).unwrap();
    kvlint_rules::check_session(&file, renderer, None)
        .unwrap()
        .findings
        .into_iter()
        .map(|diagnostic| Expected {
            rule: diagnostic.rule.to_owned(),
            turn: diagnostic.turn as u64,
            severity: diagnostic.severity.as_str().to_owned(),
            part: diagnostic.part.to_string(),
        })
        .collect()
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
        let expected = Expected::beside(session);
        let actual = actual(session, &renderer);
        if !all_match(&expected, &actual) {
            failures.push(format!(
                "{}\n  expected {expected:?}\n  actual   {actual:?}",
                session.display()
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
