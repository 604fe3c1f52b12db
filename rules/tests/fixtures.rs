//! Every fixture session under `fixtures/rules/<rule>/{fail,pass}` is analysed and its
//! findings compared with the `.expect.json` beside it, written by hand from what was planted.
//! A session is checked as `kvlint check` does, with the `--engine` its `.expect.json` names
//! in `"engine"` (the rules that audit cache breakpoints and recorded usage need one); a
//! model's chat template (`.jinja`) is checked as `kvlint template` does.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use kvlint_core::{Engine, SessionFile};
use kvlint_fixtures::{Expected, all_match};
use kvlint_render::ChatTemplate;
use kvlint_render::Renderer;
use kvlint_render::template_check::check_template;
use kvlint_request::diagnostic::Diagnostic;
use kvlint_rules::RuleInput;

fn sessions() -> Vec<PathBuf> {
    let mut sessions = Vec::new();
    for rule in std::fs::read_dir(kvlint_fixtures::root().join("rules")).unwrap() {
        for outcome in ["fail", "pass"] {
            let folder = rule.as_ref().unwrap().path().join(outcome);
            for entry in std::fs::read_dir(&folder).into_iter().flatten() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if !name.ends_with(".expect.json")
                    && (name.ends_with(".jsonl")
                        || name.ends_with(".json")
                        || name.ends_with(".jinja"))
                {
                    sessions.push(path);
                }
            }
        }
    }
    sessions.sort();
    sessions
}

/// The `--engine` a fixture is checked with: `"engine"` in its `.expect.json`.
fn engine_beside(session: &Path) -> Option<Engine> {
    let name = session.to_string_lossy();
    let stem = name.trim_end_matches(".jsonl").trim_end_matches(".json");
    let text = std::fs::read_to_string(format!("{stem}.expect.json")).ok()?;
    let expect: serde_json::Value = serde_json::from_str(&text).unwrap();
    let spec = expect.get("engine")?.as_str().unwrap();
    Some(spec.parse().unwrap())
}

/// The findings of a model's chat template, as `kvlint template` gives them for a bare Jinja
/// file (special tokens as placeholders), at a fixed date.
fn template_findings(path: &Path) -> Vec<Diagnostic> {
    let now = chrono::NaiveDate::from_ymd_opt(2026, 11, 29)
        .and_then(|date| date.and_hms_opt(10, 0, 0))
        .unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    let template = ChatTemplate::from_text(path, text, now)
        .unwrap()
        .with_placeholder_special_tokens();
    check_template(&template, now)
        .unwrap()
        .breaks
        .iter()
        .filter_map(|found| kvlint_rules::diagnose(&RuleInput::TemplateBreak(found)))
        .collect()
}

fn actual(session: &Path, renderer: &Renderer) -> Vec<Expected> {
    let findings = if session
        .extension()
        .is_some_and(|extension| extension == "jinja")
    {
        template_findings(session)
    } else {
        let file = SessionFile::read(session).unwrap();
        let engine = engine_beside(session);
        kvlint_rules::check_session(&file, renderer, engine.as_ref())
            .unwrap()
            .findings
    };
    findings
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
