//! A session larger than the memory budget parses its turns again from the file's text when
//! they are used (`SessionFile::turn`). Nothing may tell the two apart: every session of the
//! fixtures, read keeping no parsed turn and keeping all of them, gives the same turns and the
//! same check, placed findings included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::sync::Arc;

use kvlint_core::SessionFile;
use kvlint_render::Renderer;

/// Every session file under `fixtures/` (rules, corpus, inputs, bad inputs, diff pairs).
fn session_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = walk(&kvlint_fixtures::root())
        .into_iter()
        .filter(|path| {
            let name = path.file_name().unwrap().to_string_lossy();
            (name.ends_with(".jsonl") || name.ends_with(".json"))
                && !name.ends_with(".expect.json")
                && name != "INDEX.json"
                && name != "expected.json"
        })
        .collect();
    files.sort();
    files
}

fn walk(folder: &std::path::Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(folder).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}

#[test]
fn turns_parsed_again_are_the_turns_kept() {
    let renderer = Renderer::provider();
    let files = session_files();
    let mut compared = 0;
    for path in &files {
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        let name = path.display().to_string();
        let text: Arc<str> = Arc::from(text);
        let all_kept = SessionFile::parse_keeping(name.clone(), Arc::clone(&text), usize::MAX);
        let none_kept = SessionFile::parse_keeping(name.clone(), text, 0);
        let (all_kept, none_kept) = match (all_kept, none_kept) {
            (Ok(all_kept), Ok(none_kept)) => (all_kept, none_kept),
            (Err(kept), Err(again)) => {
                assert_eq!(kept.to_string(), again.to_string(), "{name}");
                continue;
            }
            (kept, again) => panic!("{name}: {kept:?} but {again:?}"),
        };
        assert_eq!(all_kept.len(), none_kept.len(), "{name}");
        for index in 0..all_kept.len() {
            assert_eq!(
                all_kept.turn(index).unwrap(),
                none_kept.turn(index).unwrap(),
                "{name} turn {index}"
            );
        }
        let checked = |session: &SessionFile| {
            format!(
                "{:?}",
                kvlint_rules::check_session(session, &renderer, None).map_err(|e| e.to_string())
            )
        };
        assert_eq!(checked(&all_kept), checked(&none_kept), "{name}");
        compared += 1;
    }
    assert!(compared >= 80, "compared only {compared} sessions");
}

#[test]
fn a_session_over_the_budget_keeps_only_what_fits() {
    let jsonl = kvlint_fixtures::growing_session_jsonl(40);
    let first_line = jsonl.lines().next().unwrap().len();
    let text: Arc<str> = Arc::from(jsonl);
    // Room for about the first turns only: the rest are parsed when used, and equal.
    let session =
        SessionFile::parse_keeping("s.jsonl".into(), text.clone(), 40 * first_line).unwrap();
    let all = SessionFile::parse_keeping("s.jsonl".into(), text, usize::MAX).unwrap();
    assert!(
        session.kept_turns() > 0 && session.kept_turns() < 40,
        "{}",
        session.kept_turns()
    );
    assert_eq!(all.kept_turns(), 40);
    for index in 0..40 {
        assert_eq!(session.turn(index).unwrap(), all.turn(index).unwrap());
    }
}
